"""Adversarial inputs for the detector: deterministic, built from the rule set itself.

Used by the ReDoS guard test and by ``nuisances safety bench`` (worst case). Each input is at
most ``size`` characters. They aim at what makes a matcher slow: every pattern's literal
prefix at every word start, long runs without spaces, dense negations and idioms, floods of
invisible or combining characters, random Unicode.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from safety.ruleset import RuleSet, TrieNode

__all__ = ["adversarial_inputs", "literal_prefixes"]


def literal_prefixes(ruleset: RuleSet) -> list[str]:
    """Every literal prefix filed in the rule set's trie, in a stable order."""
    found: list[str] = []

    def walk(node: TrieNode, prefix: str) -> None:
        if node.entries:
            found.append(prefix)
        for char in sorted(node.children):
            walk(node.children[char], prefix + char)

    walk(ruleset.prefix_trie, "")
    return found


def _fill(unit: str, size: int) -> str:
    return (unit * (size // max(1, len(unit)) + 1))[:size]


def adversarial_inputs(
    ruleset: RuleSet, size: int = 10_240, seed: int = 7
) -> Iterator[tuple[str, str]]:
    """(name, text) pairs; the same for the same rule set, size and seed."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not secrets
    prefixes = literal_prefixes(ruleset)
    yield "one long word", _fill("a", size)
    yield "accents", _fill("é", size)
    yield "combining marks", _fill("e\u0301\u0302\u0303", size)
    yield "zero-width flood", _fill("g\u200ba\u200bz\u200b ", size)
    yield "apostrophes", _fill("l'", size)
    yield "punctuation", _fill(".,;!? ", size)
    yield "repeated letters", _fill("aaaaaaaaaaide ", size)
    yield "sms words", _fill("jai jsuis ya c qqn ", size)
    yield "negations", _fill("pas de aucune sans ni jamais n'y a plus ", size)
    yield "idioms", _fill("mourir de rire y a pas le feu feu d'artifice ", size)
    yield "random unicode", "".join(chr(rng.randrange(0x20, 0x2FFFF)) for _ in range(size))
    yield "cue soup", _fill(" ".join(rng.choice(prefixes) for _ in range(4000)), size)
    # Every literal prefix, repeated at every word start, with and without the space.
    step = max(1, len(prefixes) // 8)
    for index in range(0, len(prefixes), step):
        chunk = prefixes[index : index + step]
        yield f"prefixes {index}-{index + len(chunk)}", _fill(" ".join(chunk) + " ", size)
        yield f"prefixes glued {index}", _fill("".join(chunk), size)
