"""Normalisation of people's real writing, with an offset map back to the original.

``normalize(text)`` turns a message typed fast on a phone into one canonical form that the
rules can match with plain patterns:

1. per character: invisible and format characters dropped (zero-width, bidi controls, soft
   hyphen, BOM, variation selectors, stray combining marks), whitespace unified, apostrophes
   and dashes unified, NFKC, casefold, accents stripped, ligatures split, Cyrillic and Greek
   look-alikes folded to Latin;
2. letters repeated three times or more collapsed to one ("aaaaide" -> "aide");
3. whitespace runs collapsed, ends trimmed;
4. SMS and phonetic spellings expanded ("jsuis" -> "je suis", "ya" -> "il y a") and missing
   apostrophes restored ("den" -> "d'en", "l odeur" -> "l'odeur").

Every character of the result knows the interval of the original text it came from, so a
match in the normalised text points back to what the person actually typed.

Each stage only ever produces characters that are fixed points of the stages before it, so
normalisation is idempotent (a property test checks it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Normalized", "normalize"]


@dataclass(frozen=True, slots=True)
class Normalized:
    """A normalised text and, for each of its characters, the original interval it came from."""

    original: str
    text: str
    # starts[i], ends[i]: the interval of ``original`` that produced text[i]; None = identity.
    _starts: tuple[int, ...] | None = None
    _ends: tuple[int, ...] | None = None

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Map the half-open interval [start, end) of ``text`` to one of ``original``."""
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"interval [{start}, {end}) outside the normalised text")
        if self._starts is None or self._ends is None:
            return start, end
        if start == end:
            pos = self._starts[start] if start < len(self.text) else len(self.original)
            return pos, pos
        return self._starts[start], self._ends[end - 1]

    @property
    def offsets(self) -> tuple[tuple[int, int], ...]:
        """The original interval of every normalised character (materialised on demand)."""
        if self._starts is None or self._ends is None:
            return tuple((i, i + 1) for i in range(len(self.text)))
        return tuple(zip(self._starts, self._ends, strict=True))


# --- stage 1: one character at a time -------------------------------------------------------

_APOSTROPHES = frozenset("'’‘`´ʼ′‛ʹˈ＇‚")
_DASHES = frozenset("‐‑‒–—―−﹣－")
# Characters that carry no visible glyph but can split a word: dropped, not turned into spaces.
_INVISIBLE = frozenset(
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u200e\u200f"
    "\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069"
    "\u206a\u206b\u206c\u206d\u206e\u206f\u3164\ufeff\uffa0"
)
# Look-alikes, after casefolding. Best effort: the common Cyrillic and Greek letters that
# render like Latin ones in phone fonts.
_HOMOGLYPHS = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j", "к": "k",
    "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s",
    "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ь": "b", "ᴦ": "r",
    # Greek
    "α": "a", "β": "b", "γ": "y", "ε": "e", "ζ": "z", "η": "n", "ι": "i", "κ": "k", "ν": "v",
    "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ς": "s", "σ": "o",
    # Latin letters that NFD does not decompose
    "ı": "i", "ł": "l", "ø": "o", "đ": "d", "ħ": "h", "ŀ": "l", "ɡ": "g",
}  # fmt: skip
_LIGATURES = {"œ": "oe", "æ": "ae", "ß": "ss"}
_CACHE_LIMIT = 20_000


def _fold_char(char: str) -> str:
    if char in _INVISIBLE:
        return ""
    if char in _APOSTROPHES:
        return "'"
    if char in _DASHES:
        return "-"
    if char.isspace():
        return " "
    category = unicodedata.category(char)
    if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"):
        # Controls, format characters, surrogates, private use, unassigned, lone marks.
        # Variation selectors and emoji modifiers are Mn/Sk-like noise too.
        return ""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", char).casefold())
    out = []
    for piece in unicodedata.normalize("NFD", folded):
        if unicodedata.category(piece) in ("Mn", "Me", "Cf"):
            continue
        piece = _LIGATURES.get(piece, piece)
        out.append(_HOMOGLYPHS.get(piece, piece))
    result = "".join(out)
    if result != char and any(c in _APOSTROPHES or c.isspace() for c in result):
        # NFKC can expand to sequences holding spaces or apostrophes (e.g. U+00A8 -> " ̈");
        # run them through the same folding so that every output is a fixed point.
        result = "".join(_fold_char(c) if c != char else c for c in result)
    return result


class _FoldTable(dict[str, str]):
    """A memo of ``_fold_char``, bounded so that adversarial input cannot grow it forever."""

    def __missing__(self, char: str) -> str:
        folded = _fold_char(char)
        if len(self) < _CACHE_LIMIT:
            self[char] = folded
        return folded


_TABLE = _FoldTable({chr(i): _fold_char(chr(i)) for i in range(0x250)})


# --- the stages and their composition ---------------------------------------------------------

Intervals = tuple[list[int], list[int]]


class _Builder:
    """Accumulates stages; keeps the per-character map only once a stage changed lengths."""

    def __init__(self, original: str) -> None:
        self.original = original
        self.text = original
        self.starts: list[int] | None = None
        self.ends: list[int] | None = None

    def apply(self, new_text: str, local: Intervals | None) -> None:
        """``local`` maps each char of new_text to an interval of the current text."""
        if local is not None:
            loc_starts, loc_ends = local
            if self.starts is None or self.ends is None:
                self.starts, self.ends = loc_starts, loc_ends
            else:
                # Composed through C-level maps: this runs over every character of a long text.
                # ends[i] is an exclusive end: position e maps to the end of character e - 1
                # (0 stays 0, hence the leading 0).
                self.starts = list(map(self.starts.__getitem__, loc_starts))
                self.ends = list(map([0, *self.ends].__getitem__, loc_ends))
        self.text = new_text

    def substitute(self, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> None:
        """Apply a regex substitution; replaced characters map to the whole matched interval."""
        text = self.text
        if pattern.search(text) is None:
            return
        pieces: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        last = 0
        changed = False
        for match in pattern.finditer(text):
            start, end = match.span()
            repl = replace(match)
            if repl == text[start:end]:
                continue
            changed = True
            pieces.append(text[last:start])
            starts.extend(range(last, start))
            ends.extend(range(last + 1, start + 1))
            pieces.append(repl)
            starts.extend([start] * len(repl))
            ends.extend([end] * len(repl))
            last = end
        if not changed:
            return
        pieces.append(text[last:])
        starts.extend(range(last, len(text)))
        ends.extend(range(last + 1, len(text) + 1))
        self.apply("".join(pieces), (starts, ends))


def _fold_chars(builder: _Builder) -> None:
    text = builder.text
    if text.isascii() and text.isprintable() and text == text.lower():
        return  # already folded: lower-case printable ASCII (tabs and newlines are not printable)
    pieces = list(map(_TABLE.__getitem__, text))
    folded = "".join(pieces)
    # No piece is empty and the lengths agree: every piece is exactly one character.
    if len(folded) == len(text) and "" not in pieces:
        builder.apply(folded, None)
        return
    starts: list[int] = []
    ends: list[int] = []
    for index, piece in enumerate(pieces):
        starts.extend([index] * len(piece))
        ends.extend([index + 1] * len(piece))
    builder.apply(folded, (starts, ends))


# The stages below use the standard library's re: these simple scans run several times faster
# there than in the regex module, and they run on every message.
_TRIPLE = re.compile(r"(.)\1\1")  # cheap pre-check for _REPEATS
_REPEATS = re.compile(r"([^\W\d_])\1{2,}")
_SPACES = re.compile(r" {2,}|^ +| +$")
_WORDS = re.compile(r"[^\W_]+")

# SMS and phonetic spellings, accents already stripped. Only whole words are rewritten.
_SMS = {
    "jai": "j'ai", "g": "j'ai", "javais": "j'avais", "jaurais": "j'aurais", "jetais": "j'etais",
    "jsuis": "je suis", "jsui": "je suis", "chui": "je suis", "chuis": "je suis",
    "shui": "je suis", "jss": "je suis", "c": "c'est", "cest": "c'est",
    "ya": "il y a", "yen": "il y en", "pk": "pourquoi", "pq": "pourquoi", "pcq": "parce que",
    "pck": "parce que", "psk": "parce que", "tkt": "t'inquiete", "jsp": "je sais pas",
    "chais": "je sais", "bcp": "beaucoup", "stp": "s'il te plait", "svp": "s'il vous plait",
    "mtn": "maintenant", "mnt": "maintenant", "qqn": "quelqu'un", "qq1": "quelqu'un",
    "qqun": "quelqu'un", "qqch": "quelque chose", "qqc": "quelque chose", "auj": "aujourd'hui",
    "ajd": "aujourd'hui", "ptn": "putain", "jpp": "j'en peux plus", "jvais": "je vais",
    "jveux": "je veux", "jpeux": "je peux", "jsais": "je sais", "jme": "je me", "jte": "je te",
    "jle": "je le", "jla": "je la", "jles": "je les", "jfais": "je fais", "jcrois": "je crois",
    "jpense": "je pense", "jtiens": "je tiens", "jen": "j'en", "den": "d'en", "sen": "s'en",
    "men": "m'en", "quil": "qu'il", "quils": "qu'ils", "jose": "j'ose",
    "jentends": "j'entends", "jarrive": "j'arrive", "jappelle": "j'appelle", "jy": "j'y",
    "jhabite": "j'habite", "jattends": "j'attends", "jessaie": "j'essaie", "jecris": "j'ecris",
    "jaime": "j'aime", "dhab": "d'hab", "tjrs": "toujours", "tjs": "toujours", "dsl": "desole",
    "koi": "quoi", "ki": "qui", "ke": "que", "pa": "pas", "tro": "trop", "bi1": "bien",
    "oqp": "occupe", "slt": "salut", "vrmt": "vraiment", "vrm": "vraiment", "tt": "tout",
    "ds": "dans", "ms": "mais", "pr": "pour", "pke": "parce que",
}  # fmt: skip
_SMS_WORDS = re.compile(
    r"(?<![\w'])(?:" + "|".join(sorted(map(re.escape, _SMS), key=len, reverse=True)) + r")(?![\w'])"
)
# An elided article or pronoun left without its apostrophe: "l odeur", "d en", "j ai".
_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxz")
# "je" glued to a verb that starts with a consonant ("jsens", "jcrois", "jvois"): no French
# word starts with j + consonant, so the split is safe.
_GLUED_JE = re.compile(r"(?<![\w'])j(?=[bcdfghjklmnpqrstvwxz][a-z])")


_ELIDABLE = frozenset(
    ("c", "d", "j", "l", "m", "n", "s", "t", "qu", "jusqu", "lorsqu", "puisqu", "quoiqu", "presqu")
)
_ELISION = re.compile(
    r"(?<![\w'])(?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quoiqu|presqu) (?=[aeiouyh])"
    r"(?!(?:" + "|".join(w for w in _SMS if w[0] in "aeiouyh") + r")\b)"  # "c ya": two SMS words
)


def normalize(text: str) -> Normalized:
    """Normalise ``text`` for matching; never raises on any ``str``."""
    builder = _Builder(text)
    _fold_chars(builder)
    if _TRIPLE.search(builder.text):
        builder.substitute(_REPEATS, lambda m: m.group(1))
    builder.substitute(_SPACES, lambda m: " " if m.start() > 0 and m.end() < len(m.string) else "")
    # Which word-level stages can apply at all: one cheap pass instead of three scans.
    words = set(_WORDS.findall(builder.text))
    if not words.isdisjoint(_ELIDABLE):
        builder.substitute(_ELISION, lambda m: m.group(0)[:-1] + "'")
    if not words.isdisjoint(_SMS):
        builder.substitute(_SMS_WORDS, lambda m: _SMS[m.group(0)])
    if any(w[0] == "j" and len(w) > 2 and w[1] in _CONSONANTS for w in words):
        builder.substitute(_GLUED_JE, lambda m: "je ")
    if builder.starts is None or builder.ends is None:
        return Normalized(text, builder.text)
    return Normalized(text, builder.text, tuple(builder.starts), tuple(builder.ends))
