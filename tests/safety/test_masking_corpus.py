"""Replay of ``tests/corpus/masking.jsonl``: one case per line, asserted on every line.

After masking, no ``must_mask`` substring may remain and every ``must_keep`` substring must
still be there. Lines are never edited to suit the masker; a disagreement is argued in a note.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from safety.masking import StreamMasker, mask_numbers

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "masking.jsonl"
LINES: list[dict[str, Any]] = [
    json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()
]


@pytest.mark.parametrize("line", LINES, ids=[line["id"] for line in LINES])
def test_corpus_line(line: dict[str, Any]) -> None:
    masked = mask_numbers(line["text"]).text
    leaked = [part for part in line["must_mask"] if part in masked]
    lost = [part for part in line["must_keep"] if part not in masked]
    assert not leaked, f"{line['note']}: still visible {leaked} in {masked!r}"
    assert not lost, f"{line['note']}: lost {lost} in {masked!r}"


@pytest.mark.parametrize("line", LINES, ids=[line["id"] for line in LINES])
def test_corpus_line_streamed_one_character_at_a_time(line: dict[str, Any]) -> None:
    text = line["text"]
    masker = StreamMasker()
    streamed = "".join(masker.feed(char) for char in text) + masker.close()
    assert streamed == mask_numbers(text).text
