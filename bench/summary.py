"""Figures of one judged run: outcome counts, coverage, pass rates with Wilson intervals, kappa.

A pass rate is computed over real verdicts only (``PASS / (PASS + FAIL)``); errors are never
in it and never dropped: each rate carries its error count, and the coverage (the share of
criteria with a real verdict) is what the gate checks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.checks import CheckResult
from bench.grader import CriterionOutcome
from bench.pacing import percentile
from bench.stats import cohen_kappa, confusion, wilson

__all__ = ["ItemResult", "Kappa", "Rate", "Summary", "rate_of", "summarise"]


@dataclass(frozen=True)
class Rate:
    passed: int
    failed: int
    errors: int
    low: float
    high: float

    @property
    def verdicts(self) -> int:
        return self.passed + self.failed

    @property
    def rate(self) -> float | None:
        return self.passed / self.verdicts if self.verdicts else None

    @property
    def coverage(self) -> float | None:
        total = self.verdicts + self.errors
        return self.verdicts / total if total else None


def rate_of(outcomes: Iterable[str]) -> Rate:
    """The rate of ``PASS`` among ``PASS``/``FAIL``; ``ERROR`` counted apart, ``NA`` ignored."""
    counts = Counter(outcomes)
    low, high = wilson(counts["PASS"], counts["PASS"] + counts["FAIL"])
    return Rate(counts["PASS"], counts["FAIL"], counts["ERROR"], low, high)


@dataclass
class ItemResult:
    """One graded answer: its checks, its criteria, what the judge wrote."""

    name: str
    kind: str
    scenario_id: str
    title: str
    expected_category: str
    repeat: int
    source: str | None
    status: str | None
    detected_category: str | None
    answer: str | None
    checks: list[CheckResult]
    criteria: list[CriterionOutcome]
    raw: str | None = None
    judge_total_s: float | None = None
    assistant_total_ms: float | None = None
    assistant_first_token_ms: float | None = None
    labels: dict[str, str] = field(default_factory=dict)  # calibration: the person's labels


@dataclass(frozen=True)
class Kappa:
    kappa: float | None
    pairs: int
    unpaired: int  # labelled criteria the judge did not grade (ERROR)
    agreement: float | None


@dataclass
class Summary:
    run: dict[str, Any]
    judge: dict[str, Any]
    gate: float
    items: list[ItemResult]
    calibration: list[ItemResult]
    wall_s: float
    counts: Counter[str] = field(default_factory=Counter)
    error_kinds: Counter[str] = field(default_factory=Counter)
    by_criterion: dict[str, Rate] = field(default_factory=dict)
    by_scenario: dict[str, Rate] = field(default_factory=dict)
    by_category: dict[str, Rate] = field(default_factory=dict)
    by_check: dict[str, Rate] = field(default_factory=dict)
    check_na: dict[str, int] = field(default_factory=dict)  # answers a check did not apply to
    kappa: dict[str, Kappa] = field(default_factory=dict)
    sources: Counter[str] = field(default_factory=Counter)
    timings: dict[str, float | None] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts[k] for k in ("PASS", "FAIL", "ERROR"))

    @property
    def coverage(self) -> float:
        return (self.counts["PASS"] + self.counts["FAIL"]) / self.total if self.total else 0.0

    @property
    def passed_gate(self) -> bool:
        return self.total > 0 and self.coverage >= self.gate

    def as_json(self) -> dict[str, Any]:
        def rates(table: dict[str, Rate]) -> dict[str, Any]:
            return {
                k: {**asdict(r), "rate": r.rate, "coverage": r.coverage} for k, r in table.items()
            }

        return {
            "run": self.run,
            "judge": self.judge,
            "gate": self.gate,
            "coverage": self.coverage,
            "passed_gate": self.passed_gate,
            "wall_s": self.wall_s,
            "counts": dict(self.counts),
            "error_kinds": dict(self.error_kinds),
            "by_criterion": rates(self.by_criterion),
            "by_scenario": rates(self.by_scenario),
            "by_category": rates(self.by_category),
            "by_check": rates(self.by_check),
            "check_na": self.check_na,
            "kappa": {k: asdict(v) for k, v in self.kappa.items()},
            "sources": dict(self.sources),
            "timings": self.timings,
            "items": [asdict(i) for i in self.items],
            "calibration": [asdict(i) for i in self.calibration],
        }


def _grouped(items: Sequence[ItemResult], key: str) -> dict[str, Rate]:
    groups: dict[str, list[str]] = defaultdict(list)
    for item in items:
        for outcome in item.criteria:
            name = outcome.criterion if key == "criterion" else str(getattr(item, key))
            groups[name].append(outcome.outcome)
    return {name: rate_of(values) for name, values in sorted(groups.items())}


def _kappas(calibration: Sequence[ItemResult]) -> dict[str, Kappa]:
    pairs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    unpaired: Counter[str] = Counter()
    for item in calibration:
        judged = {o.criterion: o.outcome for o in item.criteria}
        for criterion, label in item.labels.items():
            verdict = judged.get(criterion, "ERROR")
            for name in (criterion, "(toutes)"):
                if verdict == "ERROR":
                    unpaired[name] += 1
                else:
                    pairs[name].append((label, verdict))
    found = {}
    for name in sorted(set(pairs) | set(unpaired)):
        matrix = confusion(pairs[name])
        agree = sum(1 for a, b in pairs[name] if a == b)
        found[name] = Kappa(
            kappa=cohen_kappa(matrix),
            pairs=len(pairs[name]),
            unpaired=unpaired[name],
            agreement=agree / len(pairs[name]) if pairs[name] else None,
        )
    return found


def _quantiles(values: Sequence[float], prefix: str) -> dict[str, float | None]:
    if not values:
        return {f"{prefix}_p50": None, f"{prefix}_p95": None}
    return {
        f"{prefix}_p50": round(percentile(values, 0.5), 3),
        f"{prefix}_p95": round(percentile(values, 0.95), 3),
    }


def summarise(
    *,
    run: dict[str, Any],
    judge: dict[str, Any],
    gate: float,
    items: list[ItemResult],
    calibration: list[ItemResult],
    wall_s: float,
) -> Summary:
    summary = Summary(run, judge, gate, items, calibration, round(wall_s, 2))
    for item in items:
        summary.sources[f"{item.source or 'none'} · {item.status or 'none'}"] += 1
        for outcome in item.criteria:
            summary.counts[outcome.outcome] += 1
            if outcome.outcome == "ERROR":
                summary.error_kinds[outcome.error_kind or "unknown"] += 1
    summary.by_criterion = _grouped(items, "criterion")
    summary.by_scenario = _grouped(items, "scenario_id")
    summary.by_category = _grouped(items, "expected_category")
    checks: dict[str, list[str]] = defaultdict(list)
    for item in items:
        for check in item.checks:
            checks[check.id].append(check.outcome)
    summary.by_check = {name: rate_of(values) for name, values in checks.items()}
    summary.check_na = {name: values.count("NA") for name, values in checks.items()}
    summary.kappa = _kappas(calibration)
    judged = [i.judge_total_s for i in (*items, *calibration) if i.judge_total_s is not None]
    totals = [i.assistant_total_ms / 1000 for i in items if i.assistant_total_ms is not None]
    firsts = [
        i.assistant_first_token_ms / 1000 for i in items if i.assistant_first_token_ms is not None
    ]
    summary.timings = {
        "judge_calls_sum_s": round(sum(judged), 1),
        **_quantiles(judged, "judge_call_s"),
        **_quantiles(totals, "assistant_total_s"),
        **_quantiles(firsts, "assistant_first_token_s"),
    }
    return summary
