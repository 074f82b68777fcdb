"""Replay of ``team_masking.jsonl``: 200 model answers written by the team (a helper that never
read the masker), kept apart from the shared corpora and never counted as one of their writers.

Measured before the masker was changed for them: 93.4 % of their numbers masked, 100 % of their
keep-traps kept; what leaked then (dictation words between groups, "cents" before a number,
"double zero" and "oh", digits spelled one by one, "plus" for +, "0l", groups in brackets, a
Luxembourg number) is read structurally now, and every line is asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from safety.masking import StreamMasker, mask_numbers
from tests.safety.test_masking_corpus import _problems

LINES: list[dict[str, Any]] = [
    json.loads(line)
    for line in (Path(__file__).parent / "team_masking.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip()
]


def test_the_lines_are_the_team_s() -> None:
    assert len(LINES) == 200
    assert {line["written_by"] for line in LINES} == {"team"}
    assert all(line["id"].startswith("TEAM-M-") for line in LINES)


@pytest.mark.parametrize("line", LINES, ids=[line["id"] for line in LINES])
def test_team_line(line: dict[str, Any]) -> None:
    masked = mask_numbers(line["text"]).text
    assert not _problems(line, masked), (line["note"], masked)
    masker = StreamMasker()
    streamed = "".join(masker.feed(char) for char in line["text"]) + masker.close()
    assert streamed == masked
