"""The leak scan: the last look at a payload before it goes to an external provider.

Independent of pseudonymisation on purpose (its own detectors, not the pseudonymiser's): it
reads every element of the outgoing request for (1) every raw identifier known in this
request — those it finds itself in what the person wrote, and those the pseudonymiser
replaced — and (2) any identifier pattern at all. A hit blocks the call. The report holds
kinds and counts, never the values, so that it can be logged.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from safety.masking import mask_numbers

__all__ = ["LeakReport", "find_identifiers", "scan"]

# The scan's own detectors, one alternation so that a text is read once.
_DETECTORS: dict[str, str] = {
    "courriel": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    "iban": r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
    "plaque": r"\b[A-Z]{2}-\d{3}-[A-Z]{2}\b|\b[A-Z]{2} \d{3} [A-Z]{2}\b",
    # A plain pattern for phone numbers (the raw values themselves are found exactly, with
    # ``mask_numbers``, in what the person wrote): digits in groups, 8 or more, as dialled.
    "telephone": r"(?<![\w])(?:\+|00)?\d(?:[ .\-/]?\(?\d\)?){7,14}(?![\w])",
    "identifiant": r"\b\d(?:[ .]?\d){8,}\b",
    "adresse": (
        r"\b\d{1,4}(?: ?(?i:bis|ter))?,? (?i:rue|avenue|boulevard|bd|place|allée|impasse|chemin|"
        r"route|quai|cours|square|passage|résidence|cité|villa) [^\s,.;]+"
    ),
}
_ALL = re.compile("|".join(f"(?P<{kind}>{source})" for kind, source in _DETECTORS.items()))
_WITHOUT_EMAIL = re.compile(
    "|".join(f"(?P<{kind}>{source})" for kind, source in _DETECTORS.items() if kind != "courriel")
)


_DIGIT = re.compile(r"\d")  # every detector but the e-mail one needs a digit


@dataclass(frozen=True, slots=True)
class LeakReport:
    kinds: dict[str, int]  # kind -> hits; values are never kept

    @property
    def clean(self) -> bool:
        return not self.kinds

    def audit(self) -> dict[str, int]:
        return dict(self.kinds)


def find_identifiers(text: str, exact_phones: bool = True) -> list[tuple[str, str]]:
    """(kind, value) of every identifier the scan's own detectors see in ``text``; with
    ``exact_phones``, phone numbers as the masker finds them (spelled, any digit script)."""
    if "@" in text:
        pattern = _ALL
    elif _DIGIT.search(text) is not None:
        pattern = _WITHOUT_EMAIL
    else:
        pattern = None
    found = (
        [] if pattern is None else [(m.lastgroup or "", m.group(0)) for m in pattern.finditer(text)]
    )
    if exact_phones:
        found += [("telephone", text[s:e]) for s, e in mask_numbers(text).spans]
    return found


@functools.lru_cache(maxsize=512)
def _pattern_hits(content: str) -> tuple[str, ...]:
    """The kinds of identifier patterns in one element (memoised: the prompt and the
    contacts, and the history, come back turn after turn)."""
    return tuple(kind for kind, _ in find_identifiers(content, exact_phones=False))


def scan(
    elements: Sequence[str], raw_texts: Iterable[str], known: Iterable[str] = ()
) -> LeakReport:
    """Hits in the outgoing ``elements``: raw values from ``raw_texts`` and ``known``, and any
    identifier pattern. Scanning element by element reads the same characters as the
    serialised request, minus JSON's quoting."""
    hits: Counter[str] = Counter()
    lowered = [element.lower() for element in elements]
    values = {value for text in raw_texts for _, value in find_identifiers(text)}
    for value in {*values, *known}:
        needle = value.lower()
        if len(needle.strip()) >= 3 and any(needle in element for element in lowered):
            hits["valeur connue"] += 1
    for element in elements:
        hits.update(_pattern_hits(element))
    return LeakReport(dict(hits))
