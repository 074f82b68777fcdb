"""The leak scan: the last look at a payload before it goes to an external provider.

Independent of pseudonymisation on purpose (its own detectors, not the pseudonymiser's): it
reads the serialised request for (1) every raw identifier known in this request — those it
finds itself in what the person wrote, and those the pseudonymiser replaced — and (2) any
identifier pattern at all. A hit blocks the call. The report holds kinds and counts, never the
values, so that it can be logged.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from safety.masking import mask_numbers

__all__ = ["LeakReport", "find_identifiers", "scan"]

_DETECTORS: dict[str, re.Pattern[str]] = {
    "courriel": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "iban": re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b"),
    "plaque": re.compile(r"\b[A-Z]{2}-\d{3}-[A-Z]{2}\b|\b[A-Z]{2} \d{3} [A-Z]{2}\b"),
    "identifiant": re.compile(r"\b\d(?:[ .]?\d){8,}\b"),
    "adresse": re.compile(
        r"\b\d{1,4}(?: ?(?:bis|ter))?,? (?:rue|avenue|boulevard|bd|place|allée|impasse|chemin|"
        r"route|quai|cours|square|passage|résidence|cité|villa) [^\s,.;]+",
        re.IGNORECASE,
    ),
}


@dataclass(frozen=True, slots=True)
class LeakReport:
    kinds: dict[str, int]  # kind -> hits; values are never kept

    @property
    def clean(self) -> bool:
        return not self.kinds

    def audit(self) -> dict[str, int]:
        return dict(self.kinds)


def find_identifiers(text: str) -> list[tuple[str, str]]:
    """(kind, value) of every identifier the scan's own detectors see in ``text``."""
    found = [(kind, m.group(0)) for kind, rx in _DETECTORS.items() for m in rx.finditer(text)]
    found += [("téléphone", text[s:e]) for s, e in mask_numbers(text).spans]
    return found


def scan(serialized: str, raw_texts: Iterable[str], known: Iterable[str] = ()) -> LeakReport:
    """Hits in ``serialized``: raw values from ``raw_texts`` and ``known``, and any pattern."""
    hits: Counter[str] = Counter()
    lowered = serialized.lower()
    values = {value for text in raw_texts for _, value in find_identifiers(text)}
    for value in {*values, *known}:
        if len(value.strip()) >= 3 and value.lower() in lowered:
            hits["valeur connue"] += 1
    for kind, _ in find_identifiers(serialized):
        hits[kind] += 1
    return LeakReport(dict(hits))
