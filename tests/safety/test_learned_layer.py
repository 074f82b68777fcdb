"""The learned layer: reproducible weights, and honest figures by leave-one-writer-out.

One training run (``nuisances safety train``'s own code, about half a minute on two cores)
serves two checks: the committed weights are what training gives, byte for byte, and the
cross-validated figures stay above their floors. The floors are on held-out writers, never on
training lines (where 100 % would mean nothing); they sit a little under what was measured
when the weights were last trained (see the README), so that a change which makes the
detector worse at the next writer's messages fails CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from safety import training
from safety.evaluation import RISK_CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "safety"
TEAM = ROOT / "safety" / "training" / "team"
WEIGHTS = ROOT / "safety" / "weights" / "model.json"

# Floors on the leave-one-writer-out figures (clear lines of the held-out writers).
RECALL_FLOOR = 0.965
CATEGORY_FLOOR = 0.92
FALSE_ALARM_CEILING = 0.05
WEAKEST_WRITER_FLOOR = 0.93
PER_CATEGORY_RECALL_FLOOR = 0.94


@pytest.fixture(scope="module")
def trained() -> tuple[dict[str, Any], Any]:
    return training.train(CORPUS, TEAM, training.Params(), workers=2)


def test_weights_are_what_training_gives_byte_for_byte(
    trained: tuple[dict[str, Any], Any],
) -> None:
    content, _ = trained
    fresh = training.dumps(content)
    committed = WEIGHTS.read_text(encoding="utf-8")
    assert fresh == committed, "safety/weights/model.json is stale: run `nuisances safety train`"


def test_cross_validated_figures_stay_above_their_floors(
    trained: tuple[dict[str, Any], Any],
) -> None:
    _, validation = trained
    pooled = validation.pooled
    assert pooled.card_recall_all >= RECALL_FLOOR
    assert pooled.category_accuracy >= CATEGORY_FLOOR
    assert pooled.false_alarm_rate <= FALSE_ALARM_CEILING
    for category in RISK_CATEGORIES:
        assert pooled.card_recall[category] >= PER_CATEGORY_RECALL_FLOOR, category
    weakest = min(validation.reports.items(), key=lambda item: item[1].card_recall_all)
    assert weakest[1].card_recall_all >= WEAKEST_WRITER_FLOOR, weakest[0]


def test_every_writer_is_held_out_once_and_only_clear_lines_are_scored(
    trained: tuple[dict[str, Any], Any],
) -> None:
    _, validation = trained
    assert set(validation.reports) == {p.stem for p in CORPUS.glob("*.jsonl")}
    scored = sum(len(r.rows("clear")) for r in validation.reports.values())
    assert scored == len(validation.pooled.rows("clear")) == 1080


def test_the_thresholds_of_the_weights_are_the_cross_validated_ones(
    trained: tuple[dict[str, Any], Any],
) -> None:
    content, validation = trained
    assert (content["threshold"], content["rule_threshold"]) == validation.thresholds
    assert content["rule_threshold"] <= content["threshold"]
