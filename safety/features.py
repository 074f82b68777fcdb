"""Features of a normalised message, for the learned layer: the same for training and inference.

A message becomes a set of named binary features in seven families:

- ``w:`` words: runs of letters and digits of the normalised text (``safety.normalize``),
  that is characters for which Python's ``str.isalnum()`` holds, and single symbols outside
  ASCII that are neither (emoji), one token each;
- ``b:`` word pairs: two adjacent tokens, joined by a space; ``t:`` word triples, likewise;
- ``c:`` character n-grams inside words: every substring of 3 to 5 characters of the token
  padded with one space on each side (" gaz " gives " ga", "gaz", "az ", " gaz", "gaz ", " gaz ")
  so that spelling slips ("gaze", "fumer", "menaser") still share most of their n-grams. They
  are counted word by word: each distinct word brings its distinct n-grams, so an n-gram shared
  by two different words counts twice (the model then sums, per word, the weights of its
  n-grams once and remembers the sum);
- ``cue:`` the rule files' cue classes that count (not negated, not inside an idiom), and
  ``off:`` those found but negated or inside an idiom: negation, idiom and resolved-event
  context reach the model through them, and the engine's own classes (``negation``,
  ``terminator``, ``idiom``, ``contrast``) appear as ``cue:`` too;
- ``rule:`` the rules that fired.

Within a family a present feature is worth ``weight / sqrt(n)``, ``n`` the number of distinct
features of that family in the message (the family's vector has length ``weight``), so that a
long message does not outweigh a short one. For the character family ``n`` is counted over
distinct words: the n-grams of each distinct word, added up; an n-gram's value is then
multiplied by the number of distinct words that hold it. The family weights
(``FAMILIES``) were chosen on leave-one-writer-out cross-validation: words count more than
n-grams, and the rule cues less, because rules written while reading a corpus are too
reliable on it (a model trained with them at full weight learns to trust them, and misses what
they miss).

Everything here is deterministic and pure; another language reproduces it from this page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from safety.engine import Analysis
from safety.ruleset import SPECIAL_TERMS

__all__ = [
    "CHAR_MAX",
    "CHAR_MIN",
    "FAMILIES",
    "Features",
    "char_ngrams",
    "extract",
    "locate",
    "tokens",
]

CHAR_MIN, CHAR_MAX = 3, 5
# Family -> weight (the length of the family's vector in a message).
FAMILIES: dict[str, float] = {
    "w": 1.5, "b": 1.0, "t": 1.0, "c": 1.0, "cue": 0.3, "off": 0.3, "rule": 0.3,
}  # fmt: skip
# Word tokens, or one symbol outside ASCII (an emoji) on its own.
_TOKEN = re.compile(r"[^\W_]+|[^\w\s\x00-\x7f]")
_MEMO_LIMIT = 50_000
_NGRAMS: dict[str, tuple[str, ...]] = {}


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(token, start, end) of every token of the normalised ``text``."""
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def char_ngrams(token: str) -> tuple[str, ...]:
    """The distinct ``c:`` features of one token, in a stable order (memoised)."""
    found = _NGRAMS.get(token)
    if found is None:
        padded = f" {token} "
        size = len(padded)
        grams = dict.fromkeys(
            "c:" + padded[i : i + n]
            for n in range(CHAR_MIN, CHAR_MAX + 1)
            for i in range(size - n + 1)
        )
        found = tuple(grams)
        if len(_NGRAMS) >= _MEMO_LIMIT:
            _NGRAMS.clear()
        _NGRAMS[token] = found
    return found


@dataclass(frozen=True, slots=True)
class Features:
    """The features of one message: for each family the keys present (a feature's name is
    ``family:key``), and the value of a present feature of each family.

    The character n-grams are not listed: they are those of the distinct words (``keys["w"]``),
    and the model looks them up word by word, through a memo.
    """

    keys: dict[str, tuple[str, ...]]  # family -> keys, every family but "c"
    values: dict[str, float]  # family -> the value of each of its present features

    @property
    def words(self) -> tuple[str, ...]:
        """The distinct tokens, in order of first appearance."""
        return self.keys["w"]

    def items(self) -> Iterable[tuple[str, float]]:
        """Every (feature name, value), the ``c:`` family included: an n-gram held by
        several words comes once per word (the values add up)."""
        for family, keys in self.keys.items():
            value = self.values[family]
            for key in keys:
                yield f"{family}:{key}", value
        value = self.values["c"]
        for word in self.keys["w"]:
            for name in char_ngrams(word):
                yield name, value


def _value(family: str, count: int) -> float:
    return FAMILIES[family] / math.sqrt(count) if count else 0.0


class _GramCount(dict[str, int]):
    """Word -> how many distinct ``c:`` features it has (memoised, bounded)."""

    def __missing__(self, word: str) -> int:
        count = len(char_ngrams(word))
        if len(self) >= _MEMO_LIMIT:
            self.clear()
        self[word] = count
        return count


_GRAM_COUNT = _GramCount()
_JOIN = " ".join


def extract(text: str, analysis: Analysis) -> Features:
    """The features of the normalised ``text``, given what the engine found in it."""
    words = _TOKEN.findall(text)
    distinct = tuple(dict.fromkeys(words))
    live = {h.term for h in analysis.live}
    found = {h.term for h in analysis.hits}
    keys = {
        "w": distinct,
        "b": tuple(dict.fromkeys(map(_JOIN, pairwise(words)))),
        "t": tuple(dict.fromkeys(map(_JOIN, zip(words, words[1:], words[2:], strict=False)))),
        # Cue classes that count, and the engine's own classes (negation, idiom...).
        "cue": tuple(sorted(live | (found & SPECIAL_TERMS))),
        # Cue classes found but negated or inside an idiom.
        "off": tuple(sorted(found - live - SPECIAL_TERMS)),
        "rule": tuple(dict.fromkeys(f.rule.id for f in analysis.firings)),
    }
    values = {family: _value(family, len(these)) for family, these in keys.items()}
    values["c"] = _value("c", sum(map(_GRAM_COUNT.__getitem__, distinct)))
    return Features(keys, values)


def locate(
    feature: str, found: list[tuple[str, int, int]], analysis: Analysis
) -> list[tuple[int, int]]:
    """Where ``feature`` comes from, given the ``tokens`` of the normalised text and what the
    engine found in it: the spans of its words or cues."""
    family, _, name = feature.partition(":")
    if family in ("cue", "off"):
        return [(h.start, h.end) for h in analysis.hits if h.term == name]
    if family == "rule":
        return [(h.start, h.end) for f in analysis.firings if f.rule.id == name for h in f.hits]
    if family in ("w", "grams"):  # a word, or the character n-grams of a word taken together
        return [(s, e) for t, s, e in found if t == name]
    if family in ("b", "t"):
        wanted = name.split(" ")
        size = len(wanted)
        return [
            (found[i][1], found[i + size - 1][2])
            for i in range(len(found) - size + 1)
            if [t for t, _, _ in found[i : i + size]] == wanted
        ]
    if family == "c":
        return [(s, e) for t, s, e in found if feature in char_ngrams(t)]
    return []
