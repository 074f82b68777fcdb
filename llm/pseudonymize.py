"""Pseudonymisation: identifiers in what people write become tokens before a model call.

E-mail addresses, phone numbers, postal addresses, people's names (after a civility or in
"mon voisin X" forms, then wherever else they appear), licence plates, IBANs and long numeric
identifiers become ``[courriel-1]``, ``[téléphone-1]``, ``[adresse-1]``, ``PERS-1``,
``[plaque-1]``, ``[iban-1]``, ``[identifiant-1]``. The same value always gets the same token
within a request. The mapping stays in this process: ``reidentify`` puts the person's own
words back into a validated answer (phone numbers excepted, shown masked as everywhere else).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from safety.masking import MASK, mask_numbers

__all__ = ["PseudonymizeConfig", "Pseudonymizer", "placeholders"]

_UPPER = "A-ZÀ-ÖØ-Þ"
_NAME = rf"[{_UPPER}][\w'’-]+(?:[ -][{_UPPER}][\w'’-]+)?"
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_PLATE = re.compile(
    r"\b[A-Z]{2}[- ]?\d{3}[- ]?[A-Z]{2}\b|\b\d{1,4}[ -]?[A-Z]{1,3}[ -]?(?:\d{2}|2A|2B|97\d)\b"
)
_IDENTIFIER = re.compile(r"\b\d(?:[ .]?\d){8,}\b")
_STREET = (
    r"(?:rue|avenue|av\.|boulevard|bd|place|allée|allee|impasse|chemin|route|quai|cours|"
    r"square|passage|résidence|residence|cité|cite|villa|sentier|lotissement)"
)
_ADDRESS = re.compile(
    rf"\b\d{{1,4}}(?: ?(?:bis|ter))?,? {_STREET} (?:(?:de la|du|des|de l'|d'|de) ?)?"
    rf"[{_UPPER}\w][\w'’-]*(?: [{_UPPER}][\w'’-]*){{0,4}}"
    rf"(?:,? \d{{5}}(?: [{_UPPER}][\w'’-]*(?:[ -][{_UPPER}][\w'’-]*)*)?)?",
    re.IGNORECASE,
)
_POSTCODE_CITY = re.compile(rf"\b\d{{5}} [{_UPPER}][\w'’-]+(?:[ -][{_UPPER}][\w'’-]+)*")
_CIVILITY = re.compile(
    rf"\b(?:M\.|Mr\.?|Mme|Mlle|Monsieur|Madame|Mademoiselle|Dr\.?|Docteur|Maître|Me)\s+({_NAME})"
)
_ROLE = re.compile(
    r"\b(?i:mon|ma|le|la|notre|un|une|cette|ce)\s+(?i:voisin|voisine|gardien|gardienne|"
    r"propriétaire|proprietaire|proprio|bailleur|concierge|colocataire|locataire|syndic|"
    rf"copropriétaire|agent)\s+(?i:du \w+ |d'en face |d'à côté )?({_NAME})"
)


_PLACEHOLDER = re.compile(r"PERS-\d+|\[[a-zéè]+-\d+\]")


def placeholders(text: str) -> list[str]:
    """The placeholder tokens in ``text`` (``PERS-1``, ``[adresse-2]``…), in order."""
    return _PLACEHOLDER.findall(text)


class PseudonymizeConfig(BaseModel):
    """Which kinds of identifiers are replaced (all, unless a deployment says otherwise)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    emails: bool = True
    phones: bool = True
    addresses: bool = True
    names: bool = True
    plates: bool = True
    ibans: bool = True
    identifiers: bool = True


@dataclass
class Pseudonymizer:
    """One per request: the mapping never leaves it."""

    config: PseudonymizeConfig = field(default_factory=PseudonymizeConfig)
    forward: dict[str, str] = field(default_factory=dict)  # original -> token
    reverse: dict[str, str] = field(default_factory=dict)  # token -> original
    _counts: dict[str, int] = field(default_factory=dict)

    def _token(self, kind: str, original: str) -> str:
        if original in self.forward:
            return self.forward[original]
        self._counts[kind] = self._counts.get(kind, 0) + 1
        number = self._counts[kind]
        token = f"PERS-{number}" if kind == "personne" else f"[{kind}-{number}]"
        self.forward[original] = token
        self.reverse[token] = original
        return token

    def _replace(self, text: str, pattern: re.Pattern[str], kind: str, group: int = 0) -> str:
        def swap(match: re.Match[str]) -> str:
            value = match.group(group)
            if not value.strip() or value.startswith(("[", "PERS-")):
                return match.group(0)
            whole = match.group(0)
            start = match.start(group) - match.start(0)
            return whole[:start] + self._token(kind, value) + whole[start + len(value) :]

        return pattern.sub(swap, text)

    def pseudonymize(self, text: str) -> str:
        """``text`` with its identifiers replaced by tokens (the mapping grows)."""
        config = self.config
        steps: list[tuple[bool, Callable[[str], str]]] = [
            (config.emails, lambda t: self._replace(t, _EMAIL, "courriel")),
            (config.ibans, lambda t: self._replace(t, _IBAN, "iban")),
            (config.addresses, lambda t: self._replace(t, _ADDRESS, "adresse")),
            (config.addresses, lambda t: self._replace(t, _POSTCODE_CITY, "adresse")),
            (config.plates, lambda t: self._replace(t, _PLATE, "plaque")),
            (config.phones, self._phones),
            (config.identifiers, lambda t: self._replace(t, _IDENTIFIER, "identifiant")),
            (config.names, self._names),
        ]
        for enabled, step in steps:
            if enabled:
                text = step(text)
        return text

    def _phones(self, text: str) -> str:
        spans = mask_numbers(text).spans
        for start, end in reversed(spans):
            text = text[:start] + self._token("téléphone", text[start:end]) + text[end:]
        return text

    def _names(self, text: str) -> str:
        text = self._replace(text, _CIVILITY, "personne", 1)
        text = self._replace(text, _ROLE, "personne", 1)
        # A name seen once is a name everywhere in the request ("Martin" alone, later on).
        for original, token in sorted(self.forward.items(), key=lambda kv: -len(kv[0])):
            if token.startswith("PERS-"):
                for part in {original, *original.split()}:
                    if len(part) >= 3:
                        text = re.sub(rf"(?<![\w]){re.escape(part)}(?![\w])", token, text)
        return text

    def reidentify(self, text: str) -> str:
        """Put the person's words back (phone numbers stay masked)."""

        def swap(match: re.Match[str]) -> str:
            token = match.group(0)
            original = self.reverse.get(token)
            if original is None:
                return token
            return MASK if token.startswith("[téléphone") else original

        return _PLACEHOLDER.sub(swap, text)

    @property
    def originals(self) -> tuple[str, ...]:
        """The raw values replaced in this request (for the leak scan; never logged)."""
        return tuple(self.forward)
