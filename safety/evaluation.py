"""Scoring a rule set against a labelled corpus, and previewing a candidate rule set.

Pure functions over rows already read: ``nuisances safety eval`` does the reading and printing.
A row is ``{"id", "text", "expected", "tier"}`` as in ``tests/corpus/safety/*.jsonl``: ``clear``
rows are scored, ``edge`` rows are reported apart (genuinely ambiguous, never asserted).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from safety.detect import Detection, detect
from safety.model import LinearModel
from safety.ruleset import RuleSet

__all__ = [
    "RISK_CATEGORIES",
    "Comparison",
    "Outcome",
    "Report",
    "compare",
    "read_rows",
    "score",
]

RISK_CATEGORIES = ("danger", "represailles", "detresse")
LABELS = ("rien", *RISK_CATEGORIES)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a JSONL corpus; ``ValueError`` naming the line when one is malformed (not
    JSON, no text or label, an unknown label). A row without an id gets ``line-<n>``."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(row, dict) or not {"text", "expected"} <= row.keys():
                raise ValueError(f"{path}:{number}: needs 'text' and 'expected'")
            if row["expected"] not in LABELS:
                raise ValueError(f"{path}:{number}: unknown label {row['expected']!r}")
            row.setdefault("id", f"line-{number}")
            row.setdefault("tier", "clear")
            rows.append(row)
    return rows


@dataclass(frozen=True, slots=True)
class Outcome:
    """One row and what the detector said of it."""

    id: str
    text: str
    expected: str
    tier: str
    got: str
    rules: tuple[str, ...]
    risk: float = 0.0

    @property
    def card_expected(self) -> bool:
        return self.expected != "rien"

    @property
    def card_shown(self) -> bool:
        return self.got != "rien"

    @property
    def missed(self) -> bool:
        """A risk line with no card: the failure that can cost a life."""
        return self.card_expected and not self.card_shown

    @property
    def false_alarm(self) -> bool:
        return not self.card_expected and self.card_shown

    @property
    def wrong_category(self) -> bool:
        """A card shown, but for another risk category."""
        return self.card_expected and self.card_shown and self.got != self.expected


@dataclass(frozen=True, slots=True)
class Report:
    outcomes: tuple[Outcome, ...]
    card_recall: dict[str, float] = field(default_factory=dict)  # per category, clear rows
    category_recall: dict[str, float] = field(default_factory=dict)
    category_accuracy: float = 0.0  # clear risk rows whose category is right
    false_alarm_rate: float = 0.0  # clear 'rien' rows that raised a card
    edge_agreement: float = 0.0  # edge rows whose category matches the label

    @classmethod
    def of(cls, outcomes: tuple[Outcome, ...]) -> Report:
        """The figures of these outcomes."""
        clear = [o for o in outcomes if o.tier == "clear"]
        risk = [o for o in clear if o.card_expected]
        calm = [o for o in clear if not o.card_expected]
        edge = [o for o in outcomes if o.tier != "clear"]
        card_recall, category_recall = {}, {}
        for category in RISK_CATEGORIES:
            these = [o for o in clear if o.expected == category]
            card_recall[category] = _ratio(sum(o.card_shown for o in these), len(these))
            category_recall[category] = _ratio(sum(o.got == category for o in these), len(these))
        return cls(
            outcomes=outcomes,
            card_recall=card_recall,
            category_recall=category_recall,
            category_accuracy=_ratio(sum(o.got == o.expected for o in risk), len(risk)),
            false_alarm_rate=_ratio(sum(o.false_alarm for o in calm), len(calm)) if calm else 0.0,
            edge_agreement=_ratio(sum(o.got == o.expected for o in edge), len(edge)),
        )

    @property
    def card_recall_all(self) -> float:
        """Clear risk rows with a card, whatever their category."""
        risk = [o for o in self.rows("clear") if o.card_expected]
        return _ratio(sum(o.card_shown for o in risk), len(risk))

    def rows(self, tier: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.tier == tier]

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.rows("clear") if o.missed]

    @property
    def wrong_categories(self) -> list[Outcome]:
        return [o for o in self.rows("clear") if o.wrong_category]

    @property
    def false_alarms(self) -> list[Outcome]:
        return [o for o in self.rows("clear") if o.false_alarm]


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


def _outcome(row: Mapping[str, str], detection: Detection) -> Outcome:
    return Outcome(
        id=row["id"],
        text=row["text"],
        expected=row["expected"],
        tier=row.get("tier", "clear"),
        got=detection.category,
        rules=detection.rules,
        risk=detection.risk,
    )


def score(
    rows: Iterable[Mapping[str, str]],
    ruleset: RuleSet | None = None,
    model: LinearModel | None = None,
) -> Report:
    """Run the detector (with ``ruleset`` and ``model``, or the shipped ones) over ``rows``."""
    return Report.of(
        tuple(_outcome(row, detect(row["text"], ruleset=ruleset, model=model)) for row in rows)
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """What a candidate rule set changes, row by row, against the current one."""

    current: Report
    candidate: Report
    newly_caught: tuple[Outcome, ...]  # a card now where a risk row had none
    newly_missed: tuple[Outcome, ...]  # a risk row that loses its card
    new_false_alarms: tuple[Outcome, ...]
    fixed_false_alarms: tuple[Outcome, ...]
    category_changes: tuple[tuple[Outcome, Outcome], ...]  # (before, after), both with a card


def compare(rows: Iterable[Mapping[str, str]], current: RuleSet, candidate: RuleSet) -> Comparison:
    """The rules alone, current against candidate (``LinearModel.rules_only``): the shipped
    weights were trained with the current rules' features, so the whole detector with a
    candidate rule set is measured by retraining (``nuisances safety eval --cv``)."""
    materialised = list(rows)
    alone = LinearModel.rules_only()
    before = score(materialised, current, alone)
    after = score(materialised, candidate, alone)
    pairs = list(zip(before.outcomes, after.outcomes, strict=True))
    return Comparison(
        current=before,
        candidate=after,
        newly_caught=tuple(a for b, a in pairs if b.missed and not a.missed),
        newly_missed=tuple(a for b, a in pairs if a.missed and not b.missed),
        new_false_alarms=tuple(a for b, a in pairs if a.false_alarm and not b.false_alarm),
        fixed_false_alarms=tuple(a for b, a in pairs if b.false_alarm and not a.false_alarm),
        category_changes=tuple(
            (b, a) for b, a in pairs if b.card_shown and a.card_shown and b.got != a.got
        ),
    )
