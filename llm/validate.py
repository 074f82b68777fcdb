"""Output validation: every answer checked against a closed contract before it is trusted.

The contract: not empty, not too long; ``[[id]]`` tags only for contacts of the directory; no
markup (HTML, links and URIs of any kind, bare domains, e-mail addresses, code blocks: read by
``safety.markup`` after NFKC and entity decoding) and no echo of the ``<message>`` frame;
written in French.
Each failure is a short French sentence, sent back to the model for its one retry, and kept
in the audit log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from safety.markup import markup_kinds

__all__ = ["OutputContract", "validate"]

_TAG = re.compile(r"\[\[\s*([A-Za-z0-9_-]{1,64})\s*\]\]")
_FRENCH = frozenset(
    [
        "le", "la", "les", "un", "une", "des", "de", "du", "et", "est", "pas", "que", "qui",
        "vous", "je", "il", "elle", "nous", "ne", "en", "dans", "pour", "sur", "au", "aux",
        "avec", "ce", "cette", "votre", "vos", "son", "sa", "ses", "mais", "ou", "si", "plus",
        "peut", "faire", "avez", "être", "a", "y",
    ]
)  # fmt: skip
_ENGLISH = frozenset(
    [
        "the", "and", "is", "are", "you", "your", "to", "of", "in", "for", "on", "with", "this",
        "that", "it", "be", "can", "not", "have", "if", "or", "as", "at", "please", "will",
        "should", "would",
    ]
)  # fmt: skip
_WORD = re.compile(r"[a-zA-Zàâçéèêëîïôûùüÿœ']+")


@dataclass(frozen=True, slots=True)
class OutputContract:
    min_chars: int = 2
    max_chars: int = 2_500
    min_french_share: float = 0.6  # of the function words found, when there are enough of them


def _french_share(text: str) -> float | None:
    words = [w.lower().strip("'") for w in _WORD.findall(text)]
    french = sum(w in _FRENCH for w in words)
    english = sum(w in _ENGLISH for w in words)
    if french + english < 6:
        return None  # too short to judge
    return french / (french + english)


def validate(
    text: str, known_contact: Callable[[str], bool], contract: OutputContract = OutputContract()
) -> list[str]:
    """The contract's failures for ``text`` (empty list: valid)."""
    errors: list[str] = []
    visible = text.strip()
    if len(visible) < contract.min_chars:
        errors.append("La réponse est vide.")
        return errors
    if len(text) > contract.max_chars:
        errors.append(
            f"La réponse est trop longue ({len(text)} caractères, {contract.max_chars} au plus)."
        )
    unknown = sorted({t for t in _TAG.findall(text) if not known_contact(t)})
    if unknown:
        errors.append(
            f"Identifiants inconnus : {', '.join(unknown)} ; n'utilise que ceux de la liste."
        )
    if "<message>" in text or "</message>" in text:
        errors.append("La réponse recopie le cadre <message>.")
    for label in markup_kinds(text):
        errors.append(f"La réponse contient un(e) {label} : écris du texte simple.")
    share = _french_share(text)
    if share is not None and share < contract.min_french_share:
        errors.append("La réponse doit être écrite en français.")
    return errors
