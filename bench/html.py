"""The self-contained HTML report (``report.html``): inline CSS, inline SVG, no external asset.

Sections: the run and the judge, the gate; outcomes (a stacked bar, errors by kind); pass rates
per criterion, per deterministic check and per expected category, as bar charts with their
Wilson 95 % intervals and as tables; the scenarios; agreement with people (kappa) when a
calibration set was given; the assistant's sources and timings; every error with its cause;
and each answer in full, with its checks, the judge's verdicts and reasons, and its raw text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

from bench.charts import outcome_bar, rate_chart
from bench.report import check_cells, error_rows, pct, rate_cells
from bench.summary import ItemResult, Rate, Summary, rate_of

__all__ = ["render_html", "write_html"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.gate{padding:.6em 1em;border-radius:4px;font-weight:600;display:inline-block}
.ok{background:#e3f3e4;color:#1b5e20}.ko{background:#fbe4e4;color:#8e1b1b}
.warn{background:#fff4d6;color:#6b4e00;padding:.5em 1em;border-radius:4px}
.PASS{color:#2e7d32;font-weight:600}.FAIL{color:#c62828;font-weight:600}
.ERROR{color:#666;font-weight:600}.NA{color:#999}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.6em;border-radius:4px;font-size:12px}
details{margin:.3em 0;border:1px solid #e3e3e3;border-radius:4px;padding:.3em .6em}
summary{cursor:pointer}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dt{font-weight:600}
"""


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric_from: int = 99) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            cls = " class='n'" if index >= numeric_from else ""
            cells.append(f"<td{cls}>{escape(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_RATE_HEADER = ["PASS", "FAIL", "ERROR", "pass rate", "95 % (Wilson)"]


def _rates(title: str, key: str, table: dict[str, Rate]) -> str:
    if not table:
        return f"<h2>{escape(title)}</h2><p>Nothing to show.</p>"
    chart = rate_chart(list(table.items()), title)
    rows = [[name, *rate_cells(rate)] for name, rate in table.items()]
    return f"<h2>{escape(title)}</h2>{chart}{_table([key, *_RATE_HEADER], rows, 1)}"


def _checks(summary: Summary) -> str:
    chart = rate_chart(list(summary.by_check.items()), "Deterministic checks")
    header = ["check", "PASS", "FAIL", "NA", "pass rate", "95 % (Wilson)"]
    rows = [check_cells(name, rate, summary) for name, rate in summary.by_check.items()]
    return f"<h2>Deterministic checks</h2>{chart}{_table(header, rows, 1)}"


def _meta(summary: Summary) -> str:
    run, judge, target = summary.run, summary.judge, summary.run.get("target", {})
    pairs = [
        ("Run", f"{run.get('run_id')} (recorded {run.get('created_at')})"),
        (
            "Assistant under test",
            f"{target.get('provider_type')} · {target.get('model')} · "
            f"{target.get('base_url') or target.get('url')} · digest {target.get('digest') or '—'}",
        ),
        (
            "Answers",
            f"{len(summary.items)} = {len(run.get('scenario_ids', []))} scenarios × "
            f"{run.get('repeat', 1)} repeat(s)",
        ),
        (
            "Judge",
            f"{judge.get('provider_type')} · {judge.get('model')} · "
            f"{judge.get('base_url')} · digest {judge.get('digest') or '—'}",
        ),
        ("Rubric hash", str(judge.get("rubric_hash"))),
        ("Judge options", str(judge.get("options"))),
        ("Judge slots", str(judge.get("parallel"))),
        ("Judge budgets (last)", str(judge.get("budgets"))),
        ("Wall time (this invocation)", f"{summary.wall_s:.1f} s"),
    ]
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in pairs)
    gate = "ok" if summary.passed_gate else "ko"
    verdict = "PASSED" if summary.passed_gate else "FAILED"
    html = (
        f"<dl>{rows}</dl><p class='gate {gate}'>Gate {verdict}: coverage "
        f"{pct(summary.coverage)} (threshold {pct(summary.gate)})</p>"
    )
    if judge.get("self_judge"):
        reasons = "; ".join(judge.get("self_judge_reasons", []))
        html += f"<p class='warn'>Self-judging, allowed explicitly: {escape(reasons)}</p>"
    return html


def _outcomes(summary: Summary) -> str:
    counts = summary.counts
    html = "<h2>Outcomes</h2>" + outcome_bar(dict(counts), summary.gate)
    row = [
        str(counts["PASS"]),
        str(counts["FAIL"]),
        str(counts["ERROR"]),
        str(summary.total),
        pct(summary.coverage),
    ]
    html += _table(["PASS", "FAIL", "ERROR", "criteria", "coverage"], [row], 0)
    if summary.error_kinds:
        kinds = [[k, str(v)] for k, v in summary.error_kinds.items()]
        html += "<p>ERROR is never a FAIL: by kind</p>" + _table(["kind", "criteria"], kinds, 1)
    return html


def _scenarios(summary: Summary) -> str:
    rows = []
    for item in summary.items:
        failed = [c.id for c in item.checks if c.outcome == "FAIL"]
        rate = rate_of(o.outcome for o in item.criteria)
        rows.append(
            [
                item.name,
                item.title,
                item.expected_category,
                item.detected_category or "—",
                f"{item.source} · {item.status}",
                ", ".join(failed) or "—",
                *rate_cells(rate),
            ]
        )
    header = ["answer", "title", "expected", "detected", "source", "failed checks", *_RATE_HEADER]
    return "<h2>Answers, one per scenario and repeat</h2>" + _table(header, rows, 6)


def _calibration(summary: Summary) -> str:
    if not summary.kappa:
        return ""
    rows = [
        [
            name,
            "—" if k.kappa is None else f"{k.kappa:.2f}",
            pct(k.agreement),
            str(k.pairs),
            str(k.unpaired),
        ]
        for name, k in summary.kappa.items()
    ]
    header = ["criterion", "Cohen's kappa", "agreement", "pairs", "not graded (ERROR)"]
    return "<h2>Agreement with people (calibration)</h2>" + _table(header, rows, 1)


def _item(item: ItemResult) -> str:
    tally = {k: sum(1 for o in item.criteria if o.outcome == k) for k in ("PASS", "FAIL", "ERROR")}
    head = " · ".join(f"<span class='{k}'>{k} {v}</span>" for k, v in tally.items())
    checks = "".join(
        f"<li><span class='{c.outcome}'>{c.outcome}</span> {escape(c.id)} "
        f"<small>{escape(c.detail)}</small></li>"
        for c in item.checks
    )
    criteria = "".join(
        f"<li><span class='{o.outcome}'>{o.outcome}</span> {escape(o.criterion)} — "
        f"{escape(o.reason or (f'{o.error_kind}: {o.cause}' if o.outcome == 'ERROR' else ''))}"
        + (
            f" <small>(label: {escape(item.labels[o.criterion])})</small>"
            if o.criterion in item.labels
            else ""
        )
        + "</li>"
        for o in item.criteria
    )
    raw = f"<p>Raw judge text:</p><pre>{escape(item.raw)}</pre>" if item.raw else ""
    return (
        f"<details><summary>{escape(item.name)} — {escape(item.title)} · {head}</summary>"
        f"<p>Answer ({escape(str(item.source))} · {escape(str(item.status))}):</p>"
        f"<pre>{escape(item.answer or '(no answer)')}</pre>"
        f"<p>Checks:</p><ul>{checks or '<li>—</li>'}</ul><p>Criteria:</p><ul>{criteria}</ul>"
        f"{raw}</details>"
    )


def render_html(summary: Summary) -> str:
    sources = [[k, str(v)] for k, v in summary.sources.items()]
    timings = [[k, "—" if v is None else f"{v:g}"] for k, v in summary.timings.items()]
    errors = error_rows(summary)
    body = [
        f"<h1>Bench report — run {escape(str(summary.run.get('run_id')))}</h1>",
        _meta(summary),
        _outcomes(summary),
        _rates("Pass rate per criterion (judge)", "criterion", summary.by_criterion),
        _checks(summary),
        _rates("Pass rate per expected category", "category", summary.by_category),
        _rates("Pass rate per scenario (all repeats)", "scenario", summary.by_scenario),
        _scenarios(summary),
        _calibration(summary),
        "<h2>Assistant answers and timings</h2>",
        _table(["source · status", "answers"], sources, 1),
        _table(["figure (seconds)", "value"], timings, 1),
        "<h2>Errors (never counted as FAIL)</h2>",
        _table(["item", "criteria", "kind", "cause"], [list(r) for r in errors])
        if errors
        else "<p>No error.</p>",
        "<h2>Answers in full</h2>",
        *(_item(item) for item in summary.items),
    ]
    if summary.calibration:
        body += ["<h2>Calibration answers</h2>", *(_item(i) for i in summary.calibration)]
    return (
        "<!DOCTYPE html><html lang='fr'><head><meta charset='utf-8'>"
        f"<title>Bench report {escape(str(summary.run.get('run_id')))}</title>"
        f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_html(summary: Summary, path: Path) -> None:
    path.write_text(render_html(summary), encoding="utf-8")
