"""The public safety corpus, poured in verbatim from ../shared/corpus, replayed line by line.

Clear risk lines must each raise a card; clear 'rien' lines and edge lines are replayed for
determinism and offsets, and scored in aggregate (edge lines are reported in the terminal
summary, never asserted: they are genuinely ambiguous).
"""

from __future__ import annotations

from typing import Any

import pytest

from safety import detect
from safety.evaluation import score
from tests.conftest import load_jsonl

ROWS = load_jsonl("safety.jsonl")
CLEAR_RISK = [r for r in ROWS if r["tier"] == "clear" and r["expected"] != "rien"]


@pytest.mark.parametrize("row", CLEAR_RISK, ids=[r["id"] for r in CLEAR_RISK])
def test_clear_risk_line_raises_a_card(row: dict[str, Any]) -> None:
    detection = detect(row["text"])
    assert detection.category != "rien", f"no card for {row['note']!r}: {row['text']!r}"


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_line_is_deterministic_and_points_into_its_text(row: dict[str, Any]) -> None:
    first, second = detect(row["text"]), detect(row["text"])
    assert first == second
    assert "safety.error" not in first.rules
    assert "safety.timeout" not in first.rules
    for start, end in first.spans:
        assert 0 <= start < end <= len(row["text"])


def test_category_is_right_on_95_percent_of_clear_risk_lines() -> None:
    report = score(ROWS)
    wrong = [o for o in report.rows("clear") if o.card_expected and o.got != o.expected]
    listing = "\n".join(f"{o.id}: expected {o.expected}, got {o.got}, {o.text!r}" for o in wrong)
    assert report.category_accuracy >= 0.95, f"mismatches:\n{listing}"


def test_false_alarms_on_at_most_5_percent_of_clear_rien_lines() -> None:
    report = score(ROWS)
    listing = "\n".join(f"{o.id}: {o.got} {o.rules} {o.text!r}" for o in report.false_alarms)
    assert report.false_alarm_rate <= 0.05, f"false alarms:\n{listing}"
