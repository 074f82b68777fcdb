"""Replay of ``tests/corpus/masking/*.jsonl``: one case per line, asserted on every line.

After masking, no ``must_mask`` substring may remain, nor four of its digits in a row, and every
``must_keep`` substring must still be there. Lines are never edited to suit the masker; a line
the masker does not handle yet is listed in ``KNOWN_LEAKS`` with its reason, and expected to
fail (strictly: the day it passes, it leaves the table).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safety.markup import StreamSanitizer, markup_kinds, sanitize
from safety.masking import StreamMasker, mask_numbers
from tests.conftest import with_known_failures

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "masking"
LINES: list[dict[str, Any]] = [
    json.loads(line)
    for path in sorted(CORPUS.glob("*.jsonl"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if line.strip()
]
# Lines the masker does not handle yet, with the reason (none today: every line passes).
KNOWN_LEAKS: dict[str, str] = {}


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _problems(line: dict[str, Any], masked: str) -> list[str]:
    found = []
    # Digits that must stay (a date next to the number) do not count as a leak of its digits.
    rest = masked
    for part in line["must_keep"]:
        rest = rest.replace(part, " ")
    visible = _digits(rest)
    for part in line["must_mask"]:
        digits = _digits(part)
        if part in masked:
            found.append(f"still visible {part!r}")
        elif any(digits[i : i + 4] in visible for i in range(len(digits) - 3)):
            found.append(f"four digits of {part!r} remain")
    found += [f"lost {part!r}" for part in line["must_keep"] if part not in masked]
    return found


@pytest.mark.parametrize("line", with_known_failures(LINES, KNOWN_LEAKS))
def test_corpus_line(line: dict[str, Any]) -> None:
    masked = mask_numbers(line["text"]).text
    problems = _problems(line, masked)
    assert not problems, f"{line['note']}: {problems} in {masked!r}"


@pytest.mark.parametrize("line", LINES, ids=[line["id"] for line in LINES])
def test_corpus_line_streamed_one_character_at_a_time(line: dict[str, Any]) -> None:
    text = line["text"]
    masker = StreamMasker()
    streamed = "".join(masker.feed(char) for char in text) + masker.close()
    assert streamed == mask_numbers(text).text


def test_known_leaks_name_real_lines() -> None:
    assert set(KNOWN_LEAKS) <= {line["id"] for line in LINES}


@settings(max_examples=300, deadline=None)
@given(
    line=st.sampled_from(LINES),
    cuts=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=40),
)
def test_corpus_line_through_the_whole_stream_for_any_chunking(
    line: dict[str, Any], cuts: list[int]
) -> None:
    """What a turn does to deltas (markup out, then numbers masked) equals the one-shot
    result, whatever the chunks; and the line's numbers are masked in both. What the line
    keeps is kept too, except a web address ("allo119.gouv.fr"), which never reaches the
    client as such (``safety.markup``)."""
    text = line["text"]
    sanitizer, masker = StreamSanitizer(), StreamMasker()
    pieces, position, index = [], 0, 0
    while position < len(text):
        size = cuts[index % len(cuts)]
        pieces.append(masker.feed(sanitizer.feed(text[position : position + size])))
        position, index = position + size, index + 1
    pieces.append(masker.feed(sanitizer.close()) + masker.close())
    one_shot = mask_numbers(sanitize(text).text).text
    assert "".join(pieces) == one_shot
    keeps = [part for part in line["must_keep"] if not markup_kinds(part)]
    assert not _problems({**line, "must_keep": keeps}, one_shot)
