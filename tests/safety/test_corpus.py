"""The safety corpora, poured in verbatim (one file per writer), replayed line by line.

Every clear line must get exactly its label from the shipped detector: its category for a risk
line, ``rien`` for the others. The lines it does not get right are listed in ``KNOWN`` with a
reason, and expected to fail (strictly: a line that starts passing leaves the table), so that a
new miss or a new false alarm fails CI. Edge lines are genuinely ambiguous: replayed for
determinism and offsets, reported in the terminal summary, never asserted.

These figures are on lines the learned layer was trained on: they check that nothing
regresses, not how well the detector generalises. That is ``test_learned_layer.py``'s
leave-one-writer-out cross-validation.
"""

from __future__ import annotations

from typing import Any

import pytest

from safety import detect
from tests.conftest import safety_corpus, with_known_failures

ROWS = safety_corpus()
CLEAR = [r for r in ROWS if r["tier"] == "clear"]

# id -> why the shipped detector does not give this line its label. Every one gets a card, of
# another category: a rule fired whose category the verdict keeps (the category comes from the
# rules when they fire, see safety.detect), and the card still holds that category's numbers.
KNOWN: dict[str, str] = {
    "dist-137": (
        "a neighbour who said he would end it, then silence: suicide.ideation gives distress;"
        " the silence behind the door (danger now) has no rule of its own"
    ),
    "long-093": (
        "'fument' (young men smoking at the door) fires feu.fumee: no benign source is named"
        " close enough to it"
    ),
    "thr-009": ("knife marks on a forced door, found afterwards: arme.presence reads a weapon now"),
    "thr-028": (
        "'coupé l'eau et le courant' (an illegal eviction) fires electricite.eau: water and"
        " electricity named together"
    ),
    "thr-039": (
        "death threats quoted from voice messages ('je mérite pas de vivre') read as the"
        " writer's own wish to die"
    ),
    "thr-069": (
        "a gun shown with a conditional threat, not used: arme.presence reads a weapon now"
    ),
    "thr-130": (
        "a knife shown silently yesterday as intimidation: arme.presence reads a weapon now"
        " ('hier' is not a resolution)"
    ),
}


@pytest.mark.parametrize("row", with_known_failures(CLEAR, KNOWN))
def test_clear_line_gets_its_label(row: dict[str, Any]) -> None:
    detection = detect(row["text"])
    assert detection.category == row["expected"], (
        f"{row['writer']} {row['note']!r}: got {detection.category} {detection.rules}"
        f" (risk {detection.risk:.2f}): {row['text']!r}"
    )


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_line_is_deterministic_and_points_into_its_text(row: dict[str, Any]) -> None:
    first, second = detect(row["text"]), detect(row["text"])
    assert first == second
    assert "safety.error" not in first.rules
    assert "safety.timeout" not in first.rules
    for start, end in (*first.spans, *(s for e in first.evidence for s in e.spans)):
        assert 0 <= start < end <= len(row["text"])


def test_known_lines_are_real_clear_lines() -> None:
    assert set(KNOWN) <= {r["id"] for r in CLEAR}


def test_every_writer_file_is_there() -> None:
    writers = {r["writer"] for r in ROWS}
    assert writers == {"pub", "gen", "sms", "long", "dist", "dang", "thr", "var"}
    assert len(ROWS) == 1268
