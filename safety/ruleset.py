"""Rules as data: the schema of the rule files, their validation and compilation.

A rule set is a directory of YAML files, one rule family per file. Each file declares
*terms* (named classes of lexical cues: patterns matched at a word start of the normalised
text, optionally whole words matched with a bounded edit distance) and *rules* (a category,
topics and the term classes that must co-occur within a window of words, unless some other
class occurs nearby). ``_lexicon.yaml`` holds the classes every family shares, among them
three that the engine itself reads:

- ``negation``: triggers whose scope (up to ``NEGATION_SCOPE`` words, stopped by punctuation
  or a ``terminator``) removes the negatable cues it covers;
- ``terminator``: words that end a negation scope ("mais", "par contre"...);
- ``idiom``: expressions whose words are never cues ("mourir de rire", "feu d'artifice");
- ``contrast``: words that reopen an event an earlier ``resolved`` cue said was over ("les
  pompiers sont venus hier *mais* ça sent *encore* le gaz"): a ``resolved`` cue before a rule's
  cues does not cancel the rule when a contrast word lies between it and the end of the cues.

Patterns are tried only at word starts where their literal prefix is present
(``safety.keys``). They stay in the common subset of Python's ``regex`` and ECMAScript so
that the mobile client can run the same files; what does not port (fuzzy matching) is
isolated in the ``fuzzy`` field of a term and declared as such.
``tests/safety/test_robustness.py`` compiles every pattern with ECMAScript's ``RegExp``
when Node.js is available.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import regex
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from safety.keys import index_keys

__all__ = [
    "MAX_LOOKBEHIND",
    "SPECIAL_TERMS",
    "CompiledRule",
    "CompiledTerm",
    "FuzzyEntries",
    "FuzzyIndex",
    "RuleSet",
    "RuleSetError",
    "TrieNode",
    "default_ruleset",
    "load_ruleset",
]

Category = Literal["danger", "represailles", "detresse"]
Topic = Literal[
    "gaz", "feu", "co", "electricite", "blessure", "violence", "enfant", "arme", "structure",
    "menace", "suicide", "automutilation",
]  # fmt: skip
SPECIAL_TERMS = frozenset({"negation", "terminator", "idiom", "contrast"})
# The engine's classes a rule set must define (``contrast`` is optional).
REQUIRED_TERMS = SPECIAL_TERMS - {"contrast"}
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
RuleId = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")]

# Syntax that compiles in Python's regex but not in ECMAScript, or not the same way.
_NOT_PORTABLE = regex.compile(
    r"\(\?[aiLmsuxV0-9]|\(\?P|\(\?>|\(\?\||\(\?#|\{e[<=]|\\[ALZGhHKNpPX]|\[\[:|[*+?}]\+"
)


class TermSpec(BaseModel):
    """A class of lexical cues."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    patterns: list[str] = Field(default_factory=list)
    fuzzy: list[Annotated[str, Field(pattern=r"^[a-z]{6,}$")]] = Field(default_factory=list)
    negatable: bool = True

    @field_validator("patterns")
    @classmethod
    def _patterns_are_portable(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            index_keys(pattern)
            if not pattern.isascii():
                raise ValueError(f"{pattern!r}: normalised text is ASCII: no accents in patterns")
            for lookbehind in _LOOKBEHIND.finditer(pattern):
                if len(lookbehind.group(1)) > MAX_LOOKBEHIND - 8:
                    raise ValueError(f"{pattern!r}: lookbehind longer than {MAX_LOOKBEHIND - 8}")
            if _NOT_PORTABLE.search(pattern):
                raise ValueError(f"{pattern!r}: syntax outside the Python/ECMAScript subset")
            try:
                regex.compile(pattern)
                re.compile(pattern)
            except (regex.error, re.error) as exc:
                raise ValueError(f"{pattern!r}: {exc}") from exc
        return patterns

    @model_validator(mode="after")
    def _not_empty(self) -> TermSpec:
        if not self.patterns and not self.fuzzy:
            raise ValueError("a term needs patterns or fuzzy words")
        return self


class RuleSpec(BaseModel):
    """A rule: every cue class within ``window`` words, no ``unless`` class nearby.

    ``unless`` maps a class to the number of words around the cluster where it cancels the
    rule (0: only when it overlaps the cluster's words; null: anywhere in the message).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: RuleId
    category: Category
    topics: list[Topic] = Field(min_length=1)
    description: str = Field(min_length=10)
    # A hard rule shows the card on its own; any other needs the learned layer not to be
    # confident that the message is harmless (see safety.detect).
    hard: bool = False
    cues: list[Name] = Field(min_length=1, max_length=4)
    window: int = Field(default=8, ge=0, le=60)
    unless: dict[Name, Annotated[int, Field(ge=0, le=200)] | None] = Field(default_factory=dict)


class FamilyFile(BaseModel):
    """One rule family, one file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: Name
    description: str = Field(min_length=10)
    terms: dict[Name, TermSpec] = Field(default_factory=dict)
    rules: list[RuleSpec] = Field(default_factory=list)


class RuleSetError(ValueError):
    """A rule file or a rule set that does not validate; the message names the file."""


# (order in the rule set, term name, pattern, the same pattern compiled by the standard
# library's ``re``, several times faster on short texts; ``regex`` gives timeouts on long ones)
Entry = tuple[int, str, regex.Pattern[str], re.Pattern[str]]
# (term, canonical word, compiled fuzzy pattern, allowed edits), by first letter
FuzzyEntries = tuple[tuple[str, str, regex.Pattern[str], int], ...]
FuzzyIndex = dict[str, FuzzyEntries]
# A lookbehind may look at most this many characters back (so contexts can be cached).
MAX_LOOKBEHIND = 32
_LOOKBEHIND = regex.compile(r"\(\?<[!=]((?:[^()\\]|\\.)*)\)")


class TrieNode(NamedTuple):
    children: dict[str, TrieNode]
    entries: tuple[Entry, ...]  # patterns whose literal prefix ends at this node


def _trie(index: dict[str, list[Entry]]) -> TrieNode:
    def build(keys: list[str], depth: int) -> TrieNode:
        here = tuple(dict.fromkeys(e for k in keys if len(k) == depth for e in index[k]))
        by_char: defaultdict[str, list[str]] = defaultdict(list)
        for key in keys:
            if len(key) > depth:
                by_char[key[depth]].append(key)
        return TrieNode({c: build(ks, depth + 1) for c, ks in by_char.items()}, here)

    return build(sorted(index), 0)


@dataclass(frozen=True, slots=True)
class CompiledTerm:
    name: str
    negatable: bool
    patterns: tuple[regex.Pattern[str], ...]
    fuzzy: tuple[tuple[str, regex.Pattern[str]], ...]  # (word, compiled fuzzy pattern)


@dataclass(frozen=True, slots=True)
class CompiledRule:
    id: str
    family: str
    category: Category
    topics: tuple[str, ...]
    description: str
    cues: tuple[str, ...]
    window: int
    unless: tuple[tuple[str, int | None], ...]
    cue_set: frozenset[str]
    hard: bool = False


@dataclass(frozen=True, slots=True)
class RuleSet:
    """A validated, compiled rule set, indexed for matching at word starts."""

    source: str
    terms: dict[str, CompiledTerm]
    rules: tuple[CompiledRule, ...]
    # A trie of literal prefixes (see safety.keys): walked from a word start, it yields the
    # (term name, pattern) pairs whose prefix is present there.
    prefix_trie: TrieNode
    # First letter of a word -> (term name, word, fuzzy pattern, max edits).
    fuzzy_index: FuzzyIndex

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({rule.family for rule in self.rules}))


def _max_edits(word: str) -> int:
    return 2 if len(word) >= 10 else 1


def _compile(source: str, families: list[tuple[str, FamilyFile]]) -> RuleSet:
    terms: dict[str, CompiledTerm] = {}
    owners: dict[str, str] = {}
    rules: list[CompiledRule] = []
    for filename, family in families:
        for name, spec in family.terms.items():
            if name in owners:
                raise RuleSetError(f"{filename}: term {name!r} already defined in {owners[name]}")
            owners[name] = filename
            terms[name] = CompiledTerm(
                name=name,
                negatable=spec.negatable,
                patterns=tuple(regex.compile(p) for p in spec.patterns),
                fuzzy=tuple(
                    (w, regex.compile(f"(?e)(?:{w}){{e<={_max_edits(w)}}}")) for w in spec.fuzzy
                ),
            )
    missing = REQUIRED_TERMS - terms.keys()
    if missing:
        raise RuleSetError(f"{source}: the engine needs the terms {sorted(missing)}")
    seen: dict[str, str] = {}
    for filename, family in families:
        for rule in family.rules:
            if rule.id in seen:
                raise RuleSetError(
                    f"{filename}: rule {rule.id!r} already defined in {seen[rule.id]}"
                )
            seen[rule.id] = filename
            if not rule.id.startswith(family.family + "."):
                raise RuleSetError(
                    f"{filename}: rule {rule.id!r} must start with {family.family!r}."
                )
            for name in (*rule.cues, *rule.unless):
                if name not in terms:
                    raise RuleSetError(f"{filename}: rule {rule.id!r} uses unknown term {name!r}")
                if name in SPECIAL_TERMS:
                    raise RuleSetError(f"{filename}: rule {rule.id!r} cannot use {name!r}")
            rules.append(
                CompiledRule(
                    id=rule.id,
                    family=family.family,
                    category=rule.category,
                    topics=tuple(rule.topics),
                    description=rule.description,
                    cues=tuple(rule.cues),
                    window=rule.window,
                    unless=tuple(rule.unless.items()),
                    cue_set=frozenset(rule.cues),
                    hard=rule.hard,
                )
            )
    index: defaultdict[str, list[Entry]] = defaultdict(list)
    order = 0
    fuzzy: defaultdict[str, list[tuple[str, str, regex.Pattern[str], int]]] = defaultdict(list)
    for term in terms.values():
        for pattern in term.patterns:
            order += 1
            fast = re.compile(pattern.pattern)
            for key in sorted(index_keys(pattern.pattern)):
                index[key].append((order, term.name, pattern, fast))
        for word, compiled in term.fuzzy:
            fuzzy[word[0]].append((term.name, word, compiled, _max_edits(word)))
    return RuleSet(
        source=source,
        terms=terms,
        rules=tuple(rules),
        prefix_trie=_trie(index),
        fuzzy_index={k: tuple(v) for k, v in fuzzy.items()},
    )


def _parse(filename: str, content: str) -> FamilyFile:
    try:
        data = yaml.safe_load(content)
        return FamilyFile.model_validate(data)
    except yaml.YAMLError as exc:
        raise RuleSetError(f"{filename}: not valid YAML: {exc}") from exc
    except ValidationError as exc:
        raise RuleSetError(f"{filename}: {exc}") from exc


def load_ruleset(directory: Path) -> RuleSet:
    """Load and validate every ``*.yaml`` file of ``directory``; raise ``RuleSetError``."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise RuleSetError(f"{directory}: no rule files (*.yaml)")
    families = [(f.name, _parse(f.name, f.read_text(encoding="utf-8"))) for f in files]
    return _compile(str(directory), families)


_DEFAULT: RuleSet | None = None


def default_ruleset() -> RuleSet:
    """The rule set shipped in ``safety/rules``, loaded once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        root = resources.files("safety") / "rules"
        names = sorted(e.name for e in root.iterdir() if e.name.endswith(".yaml"))
        families = [(n, _parse(n, (root / n).read_text(encoding="utf-8"))) for n in names]
        _DEFAULT = _compile("safety/rules", families)
    return _DEFAULT
