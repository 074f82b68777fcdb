"""The team's training lines: well formed, marked as the team's, and independent of the corpora.

A team line that shares most of its words with a corpus line would let the held-out writer be
half-seen in cross-validation; such lines were removed, and this keeps it so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import safety_corpus

TEAM = Path(__file__).resolve().parents[2] / "safety" / "training" / "team"
LINES: list[dict[str, Any]] = [
    {**json.loads(line), "file": path.name}
    for path in sorted(TEAM.glob("*.jsonl"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if line.strip()
]
LABELS = {"danger", "represailles", "detresse", "rien"}


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", text.lower()))


def test_team_lines_are_well_formed_and_marked_as_the_teams() -> None:
    assert len(LINES) > 5000
    ids = [line["id"] for line in LINES]
    assert len(ids) == len(set(ids))
    for line in LINES:
        assert set(line) == {"id", "text", "expected", "tier", "note", "file"}, line["id"]
        assert line["id"].startswith("TEAM-"), line["id"]
        assert line["expected"] in LABELS, line["id"]
        assert line["tier"] in ("clear", "edge"), line["id"]
        assert line["text"].strip(), line["id"]


def test_no_team_line_repeats_another() -> None:
    texts = [line["text"] for line in LINES]
    assert len(texts) == len(set(texts))


@pytest.mark.parametrize("writer", sorted({r["writer"] for r in safety_corpus()}))
def test_no_team_line_is_close_to_a_corpus_line(writer: str) -> None:
    corpus = [_words(r["text"]) for r in safety_corpus() if r["writer"] == writer]
    close = []
    for line in LINES:
        words = _words(line["text"])
        if len(words) < 5:
            continue
        for other in corpus:
            if len(words & other) / len(words | other) >= 0.6:
                close.append(line["id"])
                break
    assert close == []
