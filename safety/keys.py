"""Where a pattern is filed in the rule set's index, so that only a few are tried per word.

The engine tries patterns only at word starts. Each top-level branch of a pattern starts
with literal characters, or with a non-capturing group (not optional) whose branches do;
groups are expanded (a group that follows a short literal prefix too, so that
``(?:me |m')(?:coupe|frappe)`` yields "me coupe", "m'frappe"...) and each resulting branch is
filed under its literal prefix, up to ``MAX_KEY`` characters ("au secours" for
``au secours\\b``, "siffl" for ``siffl\\w*``, "n'" for ``n'(?:y a|a) plus``). The engine
tries a pattern at a word start only where one of its literal prefixes is actually there.

A branch with fewer than two literal characters cannot be filed: ``ValueError``.
"""

from __future__ import annotations

import re

__all__ = ["MAX_KEY", "index_keys"]

MAX_KEY = 10
# Expansion stops here; a pattern with more branches is filed under shorter prefixes.
_MAX_BRANCHES = 400
_LITERAL = re.compile(r"[a-z0-9' -]*")


def _scan(pattern: str, stop_at_close: bool) -> tuple[list[str], int]:
    """Split at top-level ``|`` until the end (or the closing parenthesis of a group)."""
    branches, depth, start, index, in_class = [], 0, 0, 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0 and stop_at_close:
                branches.append(pattern[start:index])
                return branches, index
            depth -= 1
        elif char == "|" and depth == 0:
            branches.append(pattern[start:index])
            start = index + 1
        index += 1
    if stop_at_close:
        raise ValueError(f"{pattern!r}: unbalanced parenthesis")
    branches.append(pattern[start:])
    return branches, index


def _branch_key(pattern: str, branch: str) -> str:
    literal = _LITERAL.match(branch).group(0)  # type: ignore[union-attr]
    if branch[len(literal) : len(literal) + 1] in ("?", "*", "{"):
        literal = literal[:-1]  # the quantifier makes the last literal character optional
    if len(literal) < 2:
        raise ValueError(
            f"{pattern!r}: every branch starts with at least two literal lower-case characters"
            " (its key in the index)"
        )
    return literal[:MAX_KEY]


def _expand_inner(branch: str) -> list[str] | None:
    """Expand the first group that follows the literal prefix, if any and not optional."""
    literal = _LITERAL.match(branch).group(0)  # type: ignore[union-attr]
    rest = branch[len(literal) :]
    if len(literal) >= MAX_KEY or not rest.startswith("(?:"):
        return None
    inner, close = _scan(rest[3:], stop_at_close=True)
    after = rest[3 + close + 1 :]
    if after[:1] in ("?", "*", "{"):
        return None
    return [literal + alternative + after for alternative in inner]


def index_keys(pattern: str) -> frozenset[str]:
    """The keys under which ``pattern`` is filed; ``ValueError`` if a branch has none."""
    keys: set[str] = set()
    pending = _scan(pattern, stop_at_close=False)[0]
    done: list[str] = []
    while pending:
        branch = pending.pop()
        if branch.startswith("(?:"):
            inner, close = _scan(branch[3:], stop_at_close=True)
            rest = branch[3 + close + 1 :]
            if rest[:1] in ("?", "*", "{"):
                raise ValueError(f"{pattern!r}: a leading group cannot be optional")
            pending.extend(alternative + rest for alternative in inner)
            continue
        expanded = _expand_inner(branch)
        if expanded is not None and len(pending) + len(done) + len(expanded) <= _MAX_BRANCHES:
            pending.extend(expanded)
        else:
            done.append(branch)
    for branch in done:
        keys.add(_branch_key(pattern, branch))
    return frozenset(keys)
