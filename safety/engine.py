"""The matching engine: cues found at word starts, idioms and negations applied, rules evaluated.

Three passes over a normalised text:

1. **Cues.** Every word start is looked up by its first two characters in the rule set's
   index; only the patterns filed under that key are tried there (``Pattern.match`` at that
   position), so the cost grows with the number of words, not with the number of patterns.
   Words are also tried against the fuzzy words filed under their first letter.
2. **Idioms and negations.** Cues inside an idiom ("mourir de rire") are dropped. A negation
   trigger ("pas de", "aucune", "sans", "n'y a plus") drops the *negatable* cues that start
   in its scope: up to ``NEGATION_SCOPE`` words after it, stopped earlier by punctuation or a
   ``terminator`` ("mais"). Only the negated cue goes; the rest of the message still counts.
3. **Rules.** A rule fires when it finds one cue of each of its classes with at most
   ``window`` words between them (a cue's own length does not count), and no cue of an
   ``unless`` class within that class's number of words on either side of the cluster (0:
   overlapping it; null: anywhere in the message).

Everything is deterministic. The caller gives a deadline in the thread's CPU time
(``time.thread_time()``); ``DeadlineExceededError`` is raised when it passes, so that the
caller can fail toward the card.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from itertools import product
from typing import NamedTuple

import regex

from safety.keys import MAX_KEY
from safety.ruleset import (
    MAX_LOOKBEHIND,
    SPECIAL_TERMS,
    CompiledRule,
    Entry,
    FuzzyEntries,
    RuleSet,
    TrieNode,
)

__all__ = [
    "LONG_INPUT",
    "NEGATION_SCOPE",
    "Analysis",
    "DeadlineExceededError",
    "Firing",
    "Hit",
    "analyse",
    "evaluate",
    "find_hits",
]

NEGATION_SCOPE = 5
# The unless class that a contrast word reopens: an event said to be over.
REOPENED = "resolved"
# Above this many characters, every match also runs under the regex module's timeout.
LONG_INPUT = 2_000
_BEHIND = MAX_LOOKBEHIND
_AHEAD = 240


def _order(entry: Entry) -> int:
    return entry[0]


# Word splitting uses the standard library: \w+ is linear, and re is several times faster.
_WORD = re.compile(r"\w+")
_CLAUSE_BREAK = regex.compile(r"[.,;:!?()\[\]\"«»]")


class DeadlineExceededError(Exception):
    """The time budget of one detection ran out."""


class Hit(NamedTuple):
    """One cue in the normalised text: its class, character span and word span."""

    term: str
    start: int
    end: int
    word: int
    last_word: int


class _Sorted:
    """The hits of one class, sorted by word, with range queries on word spans."""

    __slots__ = ("hits", "longest", "words")

    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits  # found word by word, so already sorted by first word
        self.words = [h.word for h in hits]
        self.longest = max(h.last_word - h.word for h in hits)

    def within(self, lo: int, hi: int) -> list[Hit]:
        """Hits lying entirely inside words [lo, hi]."""
        index = bisect_left(self.words, lo)
        end = bisect_right(self.words, hi)
        return [h for h in self.hits[index:end] if h.last_word <= hi]

    def overlapping(self, lo: int, hi: int) -> list[Hit]:
        """Hits that share at least one word with [lo, hi]."""
        index = bisect_left(self.words, lo - self.longest)
        end = bisect_right(self.words, hi)
        return [h for h in self.hits[index:end] if h.last_word >= lo]


@dataclass(frozen=True, slots=True)
class Firing:
    rule: CompiledRule
    hits: tuple[Hit, ...]


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the engine found in one normalised text.

    ``hits`` are all the cues found, the engine's own classes included; ``live`` those that
    count (not inside an idiom, not negated); ``firings`` the rules that fired. The learned
    layer reads the cue classes too, so that negation and idioms reach it.
    """

    hits: tuple[Hit, ...]
    live: tuple[Hit, ...]
    firings: tuple[Firing, ...]


def _remaining(deadline: float) -> float:
    left = deadline - time.thread_time()
    if left <= 0:
        raise DeadlineExceededError
    return left


def find_hits(ruleset: RuleSet, text: str, deadline: float) -> tuple[list[Hit], list[int]]:
    """All cues of ``text``, and the start offset of every word.

    Short inputs are bounded by construction (the ReDoS guard test runs every pattern on
    adversarial input) and checked against the deadline every few words. Long inputs (over
    ``LONG_INPUT`` characters) also run every match under the regex module's own timeout,
    and match each distinct context once: the cues found at a word depend only on the text
    from ``_BEHIND`` characters before it to ``_AHEAD`` after it (lookbehinds are capped at
    load time), so a repeated context, the stuff of adversarial input, costs a lookup.
    """
    long_input = len(text) > LONG_INPUT
    timeout = _remaining(deadline) if long_input else None
    words = [m.span() for m in _WORD.finditer(text)]
    starts = [start for start, _ in words]
    hits: list[Hit] = []
    cache: dict[str, list[tuple[str, int]]] = {}
    trie, fuzzy_index = ruleset.prefix_trie, ruleset.fuzzy_index
    memo = _memo_for(trie)
    for number, (start, end) in enumerate(words):
        if long_input:
            context = text[max(0, start - _BEHIND) : start + _AHEAD]
            cached = cache.get(context)
            if cached is not None:
                for term, size in cached:
                    last = bisect_right(starts, start + size - 1) - 1
                    hits.append(Hit(term, start, start + size, number, last))
                continue
            timeout = _remaining(deadline)
        elif number % 16 == 15:  # word 0 needs no check: the deadline was just set
            _remaining(deadline)
        # Most words start no cue: two lookups tell, without a call.
        window = text[start : start + MAX_KEY]
        candidates = memo.get(window)
        if candidates is None:
            candidates = _candidates(window, trie, memo)
        fuzzy = fuzzy_index.get(window[0])
        if not candidates and fuzzy is None:
            found = []
        else:
            found = _cues_at(text, start, end, candidates, fuzzy, timeout)
        if long_input:
            cache[context] = found
        for term, size in found:
            last = bisect_right(starts, start + size - 1) - 1
            hits.append(Hit(term, start, start + size, number, last))
    return hits, starts


# Per-trie memo of candidates by window. The trie itself is kept beside its memo so that
# its id cannot be reused by another trie while the memo lives.
_MEMOS: dict[int, tuple[TrieNode, dict[str, tuple[Entry, ...]]]] = {}
_MEMO_LIMIT = 50_000


def _memo_for(trie: TrieNode) -> dict[str, tuple[Entry, ...]]:
    slot = _MEMOS.get(id(trie))
    if slot is None or slot[0] is not trie:
        slot = _MEMOS[id(trie)] = (trie, {})
    return slot[1]


def _candidates(
    window: str, trie: TrieNode, memo: dict[str, tuple[Entry, ...]]
) -> tuple[Entry, ...]:
    """The patterns whose literal prefix starts ``window`` (the text from a word start, as
    long as the longest prefix), in file order; remembered in ``memo``, as they depend on
    the window alone."""
    candidates: list[Entry] = []
    node: TrieNode | None = trie.children.get(window[0])
    index = 1
    while node is not None:
        if node.entries:
            candidates.extend(node.entries)
        if index >= len(window):
            break
        node = node.children.get(window[index])
        index += 1
    # Within a class, the first pattern in file order wins, as in an alternation.
    candidates.sort(key=_order)
    found = tuple(candidates)
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[window] = found
    return found


def _cues_at(
    text: str,
    start: int,
    end: int,
    candidates: tuple[Entry, ...],
    fuzzy: FuzzyEntries | None,
    timeout: float | None,
) -> list[tuple[str, int]]:
    """(term, match length) of every cue class found at the word ``text[start:end]``, given
    the patterns that may start there and the fuzzy words of its first letter."""
    found: list[tuple[str, int]] = []
    seen: set[str] = set()
    for _, term, pattern, fast in candidates:
        if term in seen:
            continue
        # Short inputs: the standard library's matcher, bounded by construction (the ReDoS
        # guard test); long ones: the regex module's, under its timeout.
        match = (
            fast.match(text, start)
            if timeout is None
            else pattern.match(text, start, timeout=timeout)
        )
        if match is not None and match.end() > start:
            found.append((term, match.end() - start))
            seen.add(term)
    if fuzzy is not None:
        word = text[start:end]
        for term, canonical, compiled, edits in fuzzy:
            if term in seen or abs(len(word) - len(canonical)) > edits:
                continue
            if compiled.fullmatch(word, timeout=timeout) is not None:
                found.append((term, end - start))
                seen.add(term)
    return found


class _Cover:
    """A union of character intervals, queried in O(log n)."""

    __slots__ = ("ends", "starts")

    def __init__(self, intervals: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(intervals):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]

    def contains(self, position: int) -> bool:
        index = bisect_right(self.starts, position) - 1
        return index >= 0 and position < self.ends[index]

    def overlaps(self, start: int, end: int) -> bool:
        index = bisect_left(self.ends, start + 1)  # first interval ending after ``start``
        return index < len(self.starts) and self.starts[index] < end


def _negation_scopes(text: str, hits: list[Hit], starts: list[int]) -> _Cover:
    terminators = sorted(h.start for h in hits if h.term == "terminator")
    scopes = []
    for trigger in (h for h in hits if h.term == "negation"):
        limit_word = trigger.last_word + NEGATION_SCOPE + 1
        end = starts[limit_word] if limit_word < len(starts) else len(text)
        brk = _CLAUSE_BREAK.search(text, trigger.end, end)
        if brk is not None:
            end = brk.start()
        # A terminator right after its trigger is part of it ("pas encore", "jamais plus").
        index = bisect_left(terminators, trigger.end + 2)
        if index < len(terminators):
            end = min(end, terminators[index])
        scopes.append((trigger.start, end))
    return _Cover(scopes)


def _live(ruleset: RuleSet, text: str, hits: list[Hit], starts: list[int]) -> list[Hit]:
    """Cues that count: not inside an idiom, not negated, not engine classes."""
    idioms = [(h.start, h.end) for h in hits if h.term == "idiom"]
    if idioms:
        cover = _Cover(idioms)
        hits = [h for h in hits if not cover.overlaps(h.start, h.end)]
    scopes = _negation_scopes(text, hits, starts)
    terms = ruleset.terms
    return [
        h
        for h in hits
        if h.term not in SPECIAL_TERMS
        and not (terms[h.term].negatable and scopes.contains(h.start))
    ]


def _fire(
    rule: CompiledRule, by_term: dict[str, _Sorted], contrasts: list[int], deadline: float
) -> tuple[Hit, ...] | None:
    groups = [by_term.get(name) for name in rule.cues]
    if any(group is None for group in groups):
        return None
    anchors, *others = (group for group in groups if group is not None)
    for anchor in anchors.hits:
        _remaining(deadline)
        near = [
            group.within(
                anchor.word - rule.window - 1 - group.longest, anchor.last_word + rule.window + 1
            )
            for group in others
        ]
        for combo in product(*near):
            cluster = (anchor, *combo)
            # The words between cues; a cue's own length does not count.
            if max(h.word for h in cluster) - min(h.last_word for h in cluster) - 1 > rule.window:
                continue
            first = min(h.word for h in cluster)
            last = max(h.last_word for h in cluster)
            if not _blocked(rule, first, last, by_term, contrasts):
                return cluster
    return None


def _blocked(
    rule: CompiledRule, first: int, last: int, by_term: dict[str, _Sorted], contrasts: list[int]
) -> bool:
    for name, window in rule.unless:
        group = by_term.get(name)
        if group is None:
            continue
        if window is None:
            return True
        for hit in group.overlapping(first - window, last + window):
            # An event said to be over before the cues, with a contrast word between (or right
            # after them: "ça pue encore"): it is reopened, not over.
            if (
                name == REOPENED
                and hit.last_word < first
                and _contrast_between(contrasts, hit.last_word, last + 2)
            ):
                continue
            return True
    return False


def _contrast_between(contrasts: list[int], after: int, until: int) -> bool:
    index = bisect_right(contrasts, after)
    return index < len(contrasts) and contrasts[index] <= until


def evaluate(ruleset: RuleSet, text: str, deadline: float) -> list[Firing]:
    """The rules of ``ruleset`` that fire on the normalised ``text``, in rule-set order."""
    return list(analyse(ruleset, text, deadline).firings)


def analyse(ruleset: RuleSet, text: str, deadline: float) -> Analysis:
    """The cues of the normalised ``text``, those that count, and the rules that fire."""
    hits, starts = find_hits(ruleset, text, deadline)
    if not hits:
        return Analysis((), (), ())
    live = _live(ruleset, text, hits, starts)
    grouped: defaultdict[str, list[Hit]] = defaultdict(list)
    for hit in live:
        grouped[hit.term].append(hit)
    by_term = {name: _Sorted(hits) for name, hits in grouped.items()}
    contrasts = sorted(h.word for h in hits if h.term == "contrast")
    firings = []
    present = by_term.keys()
    for rule in ruleset.rules:
        if not present >= rule.cue_set:
            continue
        cluster = _fire(rule, by_term, contrasts, deadline)
        if cluster is not None:
            firings.append(Firing(rule, cluster))
    return Analysis(tuple(hits), tuple(live), tuple(firings))
