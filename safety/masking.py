"""Masking of phone numbers written by a language model, in whole texts and in streams.

Approach
--------
1. **Clusters.** ``_CLUSTER`` finds runs of number material in the original text, read
   structurally (``safety.masking_tokens``): digit groups in any form (every Unicode script,
   emoji keycaps, circled, superscript and subscript digits, the letters O/o for 0 and l/I for
   1), a leading ``+``, ``(+`` or ``(``, and numbers spelled in words (French, Belgian and
   Swiss from 0 to 999, English), joined by glue: separators of every kind (spaces of every
   width, zero-width characters, line breaks and quote markers, ``. , - / _ · • |``, markdown
   emphasis, strike-through and code marks, HTML tags and space entities), a group hidden by
   ``XX``/``xx``/``**``, or a word between groups ("puis", "et"). Everything outside a cluster
   is copied unchanged.
2. **Normalisation** (``safety.masking_tokens``). Each cluster becomes ASCII digits and simple
   punctuation, with a map from every normalised character back to the original text, so that
   the library sees "06 12 34 56 78" where the model wrote "zéro six, douze, trente-quatre...",
   and a hidden group stands for digits ("06 58 xx xx 14" is still a number).
3. **Phone numbers** are found with each country's numbering metadata (``phonenumbers``):
   ``PhoneNumberMatcher`` for France (leniency POSSIBLE), a window pass over the digit groups
   checked with ``is_possible_number`` for France and, for runs with a trunk 0, for the
   neighbours (Belgium, Switzerland, Germany, the United Kingdom...), the North American plan
   for numbers without 0 or + (``Leniency.EXACT_GROUPING``: area code, exchange and grouping
   as the plan writes them), and French numbers read out in pairs with commas.
4. **Decisions by context** (``safety.masking_context``): dates are protected, references
   presented as references (SIREN, n°, PV, dossier...) are kept, a number of three to six
   digits presented as something to call ("appelez le 911", "au 117", "SMS au 31177") is
   masked unless it is in ``allowed`` (the national short numbers), a quantity ("le 120
   décibels", "1 500 €", "192 000 habitants") or a postal code ("au 10000 Paris", "(69003)"),
   and digits in a ``tel:`` link are always masked.

Each masked number becomes ``[numéro masqué]``. A cluster's decision depends only on the
cluster, the last ``LEFT_CONTEXT`` (48) characters of masked text before it and the
``RIGHT_CONTEXT`` (24) characters after it, which is what makes streaming exact. Deciding with
the masked text on the left, and deciding again the digits left between two masks on their own,
is what makes masking idempotent.

Streaming and the holdback bound
--------------------------------
``StreamMasker`` runs the same loop over ``context + pending`` text, with the ``regex``
module's partial matching: it emits at once all text where no cluster can start, and holds back
from the start of a cluster that is not settled yet (the chunk ends inside it, or right after it
where glue and a partial token, or the rest of a compound like "vingt et un" or "huit cent",
could continue it), or whose plan needs the right context (a short number presented as
something to call). It keeps the last 48 emitted (masked) characters as left context, and the
last original ones for the token boundaries, so each decision sees exactly what
``mask_numbers`` sees.

The holdback after ``feed`` returns is at most ``MAX_HOLDBACK`` = 6,678 characters: a cluster
has at most ``MAX_TOKENS`` (24) tokens of at most ``TOKEN_LENGTH`` (34) characters joined by
glue of at most ``GLUE_LENGTH`` (242: six separators or tags, twice a hidden group or a word
and six more), then at most four hidden groups (20), plus either a possible continuation or
the right context. The bound is that of an adversarial text; in ordinary prose the holdback
is a trailing partial word that could still be a spelled number ("di" of "dix"), or a
cluster plus at most 24 characters after it; prose without numbers is emitted as soon as it
is fed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

import regex

from safety.masking_context import LEFT_CONTEXT, RIGHT_CONTEXT
from safety.masking_phones import MASK, Plan, finish, plan_cluster
from safety.masking_tokens import (
    CLUSTER_SOURCE,
    CONTINUATION_SOURCE,
    GLUE_LENGTH,
    MAX_TOKENS,
    TAIL_LENGTH,
    TOKEN_LENGTH,
)
from safety.spelled_numbers import MAX_WORD_LENGTH

__all__ = ["MASK", "MAX_HOLDBACK", "NATIONAL_NUMBERS", "Masked", "StreamMasker", "mask_numbers"]

#: The national short numbers that stay visible (digits only).
NATIONAL_NUMBERS: Final[frozenset[str]] = frozenset(
    {
        "112",
        "15",
        "17",
        "18",
        "114",
        "115",
        "119",
        "3114",
        "3919",
        "116006",
        "116117",
        "191",
        "196",
        "197",
    }
)


_GLUE_MAX = GLUE_LENGTH
_LONGEST_CLUSTER = MAX_TOKENS * TOKEN_LENGTH + (MAX_TOKENS - 1) * _GLUE_MAX + TAIL_LENGTH
#: Upper bound of the text a ``StreamMasker`` holds back after ``feed`` returns.
MAX_HOLDBACK: Final = _LONGEST_CLUSTER + max(_GLUE_MAX + TOKEN_LENGTH, RIGHT_CONTEXT)

_CLUSTER = regex.compile(CLUSTER_SOURCE, regex.IGNORECASE | regex.VERSION0)
_CONTINUATION = regex.compile(CONTINUATION_SOURCE, regex.IGNORECASE | regex.VERSION0)
_LINE_BREAK = regex.compile(r"[\n\r\u2028\u2029;]")
# Spelled numbers that a longer spelling may continue, when they end a cluster.
_EXTENSIBLE_WORD = regex.compile(
    r"(?:un|deux|trois|quatre|cinq|six|sept|huit|neuf|dix|vingts?|trente|quarante|cinquante"
    r"|soixante|septante|huitante|octante|nonante|cents?|one|two|three|four|five|seven|eight"
    r"|nine|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred)$",
    regex.IGNORECASE,
)


@dataclass(frozen=True)
class Masked:
    """A masked text and the offsets, in the original text, of every masked number."""

    text: str
    spans: tuple[tuple[int, int], ...]


def _decide(
    buf: str, match: regex.Match[str], left: str, allowed: frozenset[str]
) -> tuple[int, Plan]:
    """The end of the cluster that ``match`` starts, and its plan; ``left`` is the masked text
    before it.

    A full cluster (``MAX_TOKENS`` tokens: a longer run of number material) is cut right after
    its last masked number, as masking the text again would cut it, else at its last line break
    or semicolon, so that a list of numbers is not cut inside a number.
    """
    start, end = match.span()
    plan = plan_cluster(buf[start:end], start, left, allowed)
    if len(match.captures("more")) < MAX_TOKENS - 1:
        return end, plan
    cut = end
    if plan.spans:
        cut = plan.spans[-1][1]
    else:
        breaks = list(_LINE_BREAK.finditer(buf, match.starts("more")[0], end))
        if breaks:
            cut = breaks[-1].start()
    if cut >= end:
        return end, plan
    return cut, plan_cluster(buf[start:cut], start, left, allowed)


def _masked_cluster(buf: str, start: int, end: int, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    cursor = start
    for span_start, span_end in spans:
        pieces.append(buf[cursor:span_start])
        pieces.append(MASK)
        cursor = span_end
    pieces.append(buf[cursor:end])
    return "".join(pieces)


def mask_numbers(text: str, allowed: frozenset[str] = NATIONAL_NUMBERS) -> Masked:
    """Replace every phone number in ``text`` by ``[numéro masqué]``, except ``allowed`` ones.

    Never raises on a ``str``; same input, same output (hence the small memo: a turn masks,
    pseudonymises and scans the same texts, and history comes back turn after turn).
    """
    if len(text) > _MEMO_MAX_CHARS:
        return _mask_numbers(text, allowed)
    return _memo(text, allowed)


_MEMO_MAX_CHARS = 8_192


def _mask_numbers(text: str, allowed: frozenset[str]) -> Masked:
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    tail = ""  # the last LEFT_CONTEXT characters of the masked text up to ``cursor``
    cursor = pos = 0
    while (match := _CLUSTER.search(text, pos)) is not None:
        start = match.start()
        left = (tail + text[max(cursor, start - LEFT_CONTEXT) : start])[-LEFT_CONTEXT:]
        pos, plan = _decide(text, match, left, allowed)
        cluster_spans = finish(plan, text[pos : pos + RIGHT_CONTEXT])
        if not cluster_spans:
            continue  # unchanged text: ``tail`` is rebuilt from ``text`` after ``cursor``
        masked = _masked_cluster(text, start, pos, cluster_spans)
        pieces += [text[cursor:start], masked]
        spans.extend(cluster_spans)
        tail = (left + masked)[-LEFT_CONTEXT:]
        cursor = pos
    pieces.append(text[cursor:])
    return Masked("".join(pieces), tuple(spans))


_memo = functools.lru_cache(maxsize=1_024)(_mask_numbers)


class StreamMasker:
    """Incremental ``mask_numbers``: ``feed`` what the model streams, ``close`` at the end.

    For every way of cutting a text into chunks, the concatenation of the ``feed`` results and
    of ``close()`` equals ``mask_numbers(text, allowed).text``. After each ``feed``, at most
    ``MAX_HOLDBACK`` characters are held back: only the start of a cluster that more text could
    still extend or whose right context has not arrived, or a trailing partial word that could
    still be a spelled number. Ordinary text is emitted as soon as it is fed.
    """

    def __init__(self, allowed: frozenset[str] = NATIONAL_NUMBERS) -> None:
        self._allowed = allowed
        self._context = ""  # last LEFT_CONTEXT characters already processed (original text)
        self._tail = ""  # last LEFT_CONTEXT characters already emitted (masked text)
        self._pending = ""  # original text not yet emitted
        self._closed = False

    def feed(self, chunk: str) -> str:
        """Add ``chunk`` and return the masked text that is now final."""
        if self._closed:
            return ""
        self._pending += chunk
        return self._advance(final=False)

    def close(self) -> str:
        """Return the rest of the masked text; later ``feed`` calls return nothing."""
        if self._closed:
            return ""
        out = self._advance(final=True)
        self._closed = True
        return out

    def _advance(self, *, final: bool) -> str:
        buf = self._context + self._pending
        size = len(buf)
        pos = len(self._context)
        out: list[str] = []
        tail = self._tail
        while pos < size:
            match = _CLUSTER.search(buf, pos, partial=not final)
            if match is None:
                out.append(buf[pos:])
                pos = size
                break
            start = match.start()
            if not final and (match.partial or not self._settled(buf, match)):
                out.append(buf[pos:start])
                pos = start
                break
            left = (tail + buf[max(pos, start - LEFT_CONTEXT) : start])[-LEFT_CONTEXT:]
            end, plan = _decide(buf, match, left, self._allowed)
            if not final and plan.needs_right and size - end < RIGHT_CONTEXT:
                out.append(buf[pos:start])
                pos = start
                break
            masked = _masked_cluster(buf, start, end, finish(plan, buf[end : end + RIGHT_CONTEXT]))
            out += [buf[pos:start], masked]
            tail = (left + masked)[-LEFT_CONTEXT:]
            pos = end
        self._pending = buf[pos:]
        self._context = buf[max(0, pos - LEFT_CONTEXT) : pos]
        emitted = "".join(out)
        self._tail = (self._tail + emitted)[-LEFT_CONTEXT:]
        return emitted

    @staticmethod
    def _settled(buf: str, match: regex.Match[str]) -> bool:
        """True when no continuation of ``buf`` can change the extent of ``match``."""
        end = match.end()
        if end >= len(buf):
            return False  # the last token, or its boundary check, may still change
        if _EXTENSIBLE_WORD.search(match.group()) and len(buf) - end < MAX_WORD_LENGTH:
            return False  # "vingt" may still become "vingt et un", "dix" "dix-sept"
        if len(match.captures("more")) >= MAX_TOKENS - 1:
            return True  # the cluster is full: what follows starts a new one
        return _CONTINUATION.match(buf, end, partial=True) is None
