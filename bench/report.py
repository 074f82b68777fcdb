"""The Markdown summary of a judged run (``report.md``), and the shared formatting helpers."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bench.summary import Rate, Summary, rate_of

__all__ = ["check_cells", "error_rows", "pct", "rate_cells", "write_markdown"]


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"


def rate_cells(rate: Rate) -> list[str]:
    """PASS, FAIL, ERROR, rate, interval: the columns every rate table shares."""
    interval = f"{pct(rate.low)} – {pct(rate.high)}" if rate.verdicts else "—"
    return [str(rate.passed), str(rate.failed), str(rate.errors), pct(rate.rate), interval]


def check_cells(name: str, rate: Rate, summary: Summary) -> list[str]:
    """A deterministic check's row: NA (did not apply) where criteria show ERROR."""
    cells = rate_cells(rate)
    return [name, cells[0], cells[1], str(summary.check_na.get(name, 0)), *cells[3:]]


def error_rows(summary: Summary) -> list[tuple[str, str, str, str]]:
    """(item, criteria, kind, cause) for every item with an ERROR, scenarios then calibration."""
    rows = []
    for item in (*summary.items, *summary.calibration):
        errors = [o for o in item.criteria if o.outcome == "ERROR"]
        if errors:
            names = ", ".join(o.criterion for o in errors)
            rows.append((item.name, names, errors[0].error_kind or "", errors[0].cause or ""))
    return rows


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    def clean(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(clean(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _header(summary: Summary) -> list[str]:
    run, judge, target = summary.run, summary.judge, summary.run.get("target", {})
    gate = "PASSED" if summary.passed_gate else "FAILED"
    lines = [
        f"# Bench report — run {run.get('run_id', '?')}",
        "",
        f"- Assistant under test: {target.get('provider_type')} · {target.get('model')} · "
        f"{target.get('base_url') or target.get('url')} (digest {target.get('digest') or '—'})",
        f"- Answers: {len(summary.items)} ({len(run.get('scenario_ids', []))} scenarios × "
        f"{run.get('repeat', 1)} repeat(s)); recorded {run.get('created_at', '?')}",
        f"- Judge: {judge.get('provider_type')} · {judge.get('model')} · {judge.get('base_url')} "
        f"(digest {judge.get('digest') or '—'}); rubric {judge.get('rubric_hash')}; "
        f"options {judge.get('options')}; {judge.get('parallel')} slot(s)",
        f"- Wall time of this judge invocation: {summary.wall_s:.1f} s "
        f"(judge calls journaled: {summary.timings.get('judge_calls_sum_s')} s in all)",
        f"- **Gate: {gate}** — coverage {pct(summary.coverage)} (threshold {pct(summary.gate)})",
    ]
    if judge.get("self_judge"):
        reasons = "; ".join(judge.get("self_judge_reasons", []))
        lines.append(f"- **Self-judging, allowed explicitly**: {reasons}")
    return [*lines, ""]


def markdown(summary: Summary) -> str:
    counts = summary.counts
    lines = _header(summary)
    lines += ["## Outcomes", ""]
    lines += _table(
        ["PASS", "FAIL", "ERROR", "criteria", "coverage"],
        [
            [
                str(counts["PASS"]),
                str(counts["FAIL"]),
                str(counts["ERROR"]),
                str(summary.total),
                pct(summary.coverage),
            ]
        ],
    )
    if summary.error_kinds:
        lines += _table(
            ["error kind", "criteria"], [[k, str(v)] for k, v in summary.error_kinds.items()]
        )
    rate_header = ["PASS", "FAIL", "ERROR", "pass rate", "95 % (Wilson)"]
    lines += ["## Criteria (judge)", ""]
    lines += _table(
        ["criterion", *rate_header], [[k, *rate_cells(r)] for k, r in summary.by_criterion.items()]
    )
    lines += ["## Deterministic checks", ""]
    lines += _table(
        ["check", "PASS", "FAIL", "NA", "pass rate", "95 % (Wilson)"],
        [check_cells(k, r, summary) for k, r in summary.by_check.items()],
    )
    lines += ["## By expected category", ""]
    lines += _table(
        ["category", *rate_header], [[k, *rate_cells(r)] for k, r in summary.by_category.items()]
    )
    lines += ["## Scenarios (all repeats and criteria)", ""]
    lines += _table(
        ["scenario", *rate_header], [[k, *rate_cells(r)] for k, r in summary.by_scenario.items()]
    )
    lines += ["## Answers", ""]
    rows = []
    for item in summary.items:
        failed = [c.id for c in item.checks if c.outcome == "FAIL"]
        cells = rate_cells(rate_of(o.outcome for o in item.criteria))
        rows.append(
            [
                item.name,
                item.expected_category,
                item.detected_category or "—",
                f"{item.source} · {item.status}",
                ", ".join(failed) or "—",
                *cells,
            ]
        )
    lines += _table(
        ["answer", "expected", "detected", "source", "failed checks", *rate_header], rows
    )
    if summary.kappa:
        lines += ["## Agreement with people (calibration, Cohen's kappa)", ""]
        lines += _table(
            ["criterion", "kappa", "agreement", "pairs", "not graded (ERROR)"],
            [
                [
                    k,
                    "—" if v.kappa is None else f"{v.kappa:.2f}",
                    pct(v.agreement),
                    str(v.pairs),
                    str(v.unpaired),
                ]
                for k, v in summary.kappa.items()
            ],
        )
    lines += ["## Assistant answers", ""]
    lines += _table(
        ["source · status", "answers"], [[k, str(v)] for k, v in summary.sources.items()]
    )
    lines += ["## Timings (seconds)", ""]
    lines += _table(
        ["figure", "value"],
        [[k, "—" if v is None else f"{v:g}"] for k, v in summary.timings.items()],
    )
    errors = error_rows(summary)
    if errors:
        lines += ["## Errors (never counted as FAIL)", ""]
        lines += _table(["item", "criteria", "kind", "cause"], [list(row) for row in errors])
    return "\n".join(lines).rstrip() + "\n"


def write_markdown(summary: Summary, path: Path) -> None:
    path.write_text(markdown(summary), encoding="utf-8")
