"""Clusters of number material and their normalisation to ASCII digits, with an offset map.

A *token* is a digit group in any Unicode script (``\\d``), possibly with the letters O/o (for
0) and l/I (for 1) before or between its digits, a leading ``+`` or ``(+``; or a French number
from 0 to 99 in words. Tokens stand between letter boundaries ("23h", "R1336", "3e" are not
tokens), except a run of at least nine digits glued to a label ("Tél0612345678"). A *cluster* is
up to ``MAX_TOKENS`` tokens joined by runs of at most four separator characters.

``normalize_cluster`` turns a cluster into what ``phonenumbers`` understands: ASCII digits,
``+``, and ``. , - / ( )`` or spaces; every other separator (U+202F, U+2009, U+00A0, zero-width
and bidirectional characters, line breaks, ``· • _``, spaced hyphens) becomes a space, commas
between spelled numbers become spaces, each spelled number becomes its digits, and full-width
punctuation becomes ASCII. ``starts`` and ``ends`` map every normalised character back to its
span in the original text.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import regex

from safety.masking_context import DATE, is_plausible_date
from safety.spelled_numbers import MAX_WORD_LENGTH, WORD_PATTERN, word_digits

#: Most tokens in one cluster; a longer run of number material is cut into several clusters.
MAX_TOKENS = 24
_MAX_DIGIT_GROUP = 2 + 3 + 1 + 16 + 4  # "(+", up to three O, a digit, 16 more, "XXXX"
#: Longest token, in characters.
TOKEN_LENGTH = max(_MAX_DIGIT_GROUP, MAX_WORD_LENGTH)

_LETTER_OR_DIGIT = r"[\p{L}\p{M}\p{Nd}]"  # not \w, which has the zero-width joiners
_DASHES = "\u2010-\u2015\u2212\uff0d"
# Invisible characters a model may put between digits: soft hyphen, zero-width characters and
# joiners, bidirectional marks, embeddings and isolates, word joiner, byte order mark.
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
# What may stand between the groups of one number: spaces and punctuation, markdown emphasis,
# strike-through, code and quote marks, pipes.
_GLUE_CHARS = rf"\s{_INVISIBLE}.,·•‧∙⋅/_()+\-{_DASHES}．／（）＋*~`|>\[\]{{}}"
#: Longest glue unit: an HTML tag ("</strong>") or an entity ("&#x202f;").
_UNIT_LENGTH = 13
_GLUE_UNIT = (
    rf"(?:[{_GLUE_CHARS}]|</?[a-zA-Z][a-zA-Z0-9]{{0,7}}\s?/?>"
    r"|&(?:nbsp|thinsp|ensp|emsp|#160|#xa0|#8239|#x202f|#8201|#x2009|#32|#x20);)"
)
# Between two groups, besides separators: a group hidden by letters or stars ("06 xx 12",
# "07 43 ** 19"), or a word ("06 12 puis 34", "then").
_PLACEHOLDER = r"(?:[xX]{2}|\*{2}|[#•]{2}|\.{2}|…|\?{2})"
# Words a model puts between groups, the way one dictates a number.
GLUE_WORDS = ("puis", "ensuite", "et", "tiret", "then", "and")
_GLUE_WORD = rf"(?:{'|'.join(GLUE_WORDS)})"
#: Most glue units in a row, and most hidden groups or words inside one glue.
GLUE_UNITS = 6
_GLUE_INNER = 2
#: Longest glue, in characters.
GLUE_LENGTH = GLUE_UNITS * _UNIT_LENGTH + _GLUE_INNER * (4 + GLUE_UNITS * _UNIT_LENGTH)
_GLUE = (
    rf"{_GLUE_UNIT}{{1,{GLUE_UNITS}}}"
    rf"(?:(?:{_PLACEHOLDER}|{_GLUE_WORD}){_GLUE_UNIT}{{1,{GLUE_UNITS}}}){{0,{_GLUE_INNER}}}"
)
# One digit: any script's decimal digit, an emoji keycap ("6️⃣"), a circled, superscript or
# subscript digit.
_ONE_DIGIT = r"(?:\d(?:\ufe0f?\u20e3)?|[⓪①-⑨⓿⁰¹²³⁴-⁹₀-₉])"
_DIGIT_GROUP = (
    rf"(?:[(（]?[+＋]|[(（](?={_ONE_DIGIT}))?(?:(?:[Oo]|(?-i:[lI])){{0,3}}{_ONE_DIGIT}"
    rf"(?:{_ONE_DIGIT}|[Oo]|(?-i:[lI])(?={_ONE_DIGIT})){{0,16}}(?:[xX]{{1,4}})?"
    r"|0(?-i:[lI])|[Oo]{2,4}|(?-i:O))"
)
_BEFORE = rf"(?<!{_LETTER_OR_DIGIT})"
_AFTER = rf"(?!{_LETTER_OR_DIGIT})"
# A long run of digits glued to a label ("Tél0612345678"); short ones ("R1336", "3e") are not
# tokens.
_GLUED_DIGITS = r"(?<=[\p{L}\p{M}])\d{9,17}"
# A spelled number may start with "plus" for the + of an international prefix.
_SPELLED = rf"(?:plus[ \u00a0]+)?{WORD_PATTERN}"
_TOKEN = rf"(?:{_BEFORE}(?:{_DIGIT_GROUP}|{_SPELLED})|{_GLUED_DIGITS}){_AFTER}"

# Groups hidden at the end of a number ("06 12 XX XX XX"): they still make it one.
_TAIL = rf"(?:[ \-.{_DASHES}]{{1,3}}{_PLACEHOLDER}){{1,4}}(?![\p{{L}}\p{{N}}])"
#: Longest hidden tail, in characters.
TAIL_LENGTH = 4 * (3 + 2)
#: A cluster; the named group ``more`` captures every token after the first.
CLUSTER_SOURCE = rf"{_TOKEN}(?:{_GLUE}(?P<more>{_TOKEN})){{0,{MAX_TOKENS - 1}}}(?:{_TAIL})?"
#: What may extend a cluster: separators, then a token; or hidden groups.
CONTINUATION_SOURCE = rf"{_GLUE}{_TOKEN}|{_TAIL}"

#: Separators between two numbers rather than inside one (original text).
STRONG_SEPARATOR = regex.compile(r"[\n\r\u2028\u2029,;/()·•]|\s[-\u2010\u2015\u2212]|\.\s|\s\s")

# A hidden group in the normalisation: between separators ("**06**" is emphasis, not one).
_HIDDEN = rf"(?<=[\s\-.{_DASHES}_/|]){_PLACEHOLDER}(?![^\s\-.{_DASHES}_/|])"
_SCAN = regex.compile(
    rf"(?P<d>(?:{_BEFORE}{_DIGIT_GROUP}|{_GLUED_DIGITS}){_AFTER})"
    rf"|(?P<w>{_BEFORE}{_SPELLED}{_AFTER})"
    rf"|(?P<p>{_HIDDEN})"
    rf"|(?P<g>(?:(?!{_HIDDEN})[{_GLUE_CHARS}])+)|(?P<x>.)",
    regex.IGNORECASE | regex.VERSION0 | regex.DOTALL,
)
_KEPT_GLUE = {".": ".", ",": ",", "/": "/", "(": "(", ")": ")", "-": "-", "+": "+"}
_KEPT_GLUE.update({chr(code): "-" for code in range(0x2010, 0x2016)})
_KEPT_GLUE.update({"\u2212": "-", "－": "-", "．": ".", "／": "/", "（": "(", "）": ")", "＋": "+"})


@dataclass(frozen=True)
class NormalizedCluster:
    """A cluster as ASCII digits and punctuation, mapped back to the original text.

    ``text`` keeps slashes and dates; ``digits_view`` has the same length, with the characters
    of plausible dates replaced by ``x`` and the remaining slashes by spaces, which is what the
    phone number search reads.
    """

    text: str
    digits_view: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original span of the normalised characters ``[start, end)``."""
        return self.starts[start], self.ends[end - 1]


def _digit(char: str) -> str:
    """The ASCII form of one character of a digit group ("" for a keycap's marks)."""
    if char in "Oo":
        return "0"
    if char in "lI":
        return "1"
    if char in "(+（＋":
        return _KEPT_GLUE[char]
    if char in "\ufe0f\u20e3":
        return ""
    value = unicodedata.digit(char, -1)
    return str(value) if value >= 0 else "0"


_PLUS = regex.compile(r"plus[ \u00a0]+", regex.IGNORECASE)


def _one_digit_word(piece: str) -> bool:
    """A number spelled as one digit ("six", "zero"): read in a row, they make one group."""
    return len(word_digits(piece)) == 1 and _PLUS.match(piece) is None


def _glue(run: str, prev_kind: str, next_kind: str) -> list[str]:
    if prev_kind == next_kind == "w1" and run.isspace():
        return [""] * len(run)  # "cinq un quatre" is 514, as "zero six one two" is 0612
    mapped = [_KEPT_GLUE.get(char, " ") for char in run]
    if "," in mapped and {"w", "w1"} & {prev_kind, next_kind}:
        mapped = [" " if char == "," else char for char in mapped]
    if "-" in mapped and " " in mapped:
        mapped = [" " if char == "-" else char for char in mapped]
    return mapped


def normalize_cluster(cluster: str, offset: int) -> NormalizedCluster:
    """Normalise ``cluster``, which starts at ``offset`` in the original text."""
    pieces = [
        (match.lastgroup or "x", match.start(), match.group()) for match in _SCAN.finditer(cluster)
    ]
    pieces = [
        ("w1" if kind == "w" and _one_digit_word(piece) else kind, start, piece)
        for kind, start, piece in pieces
    ]
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for index, (kind, start, piece) in enumerate(pieces):
        begin = offset + start
        if kind in ("w", "w1"):
            spoken = _PLUS.match(piece)
            digits = ("+" if spoken else "") + word_digits(piece[spoken.end() if spoken else 0 :])
            for char in digits:
                chars.append(char)
                starts.append(begin)
                ends.append(begin + len(piece))
            continue
        if kind == "g":
            prev_kind = pieces[index - 1][0] if index > 0 else ""
            next_kind = pieces[index + 1][0] if index + 1 < len(pieces) else ""
            mapped = _glue(piece, prev_kind, next_kind)
        elif kind == "d":
            mapped = [_digit(char) for char in piece]
        elif kind == "p":  # a hidden group stands for digits: the number is still one
            mapped = ["0"] * len(piece)
        else:
            mapped = [" "] * len(piece)
        for position, char in enumerate(mapped):
            if not char:  # a keycap's marks belong to the digit before them
                if ends:
                    ends[-1] = begin + position + 1
                continue
            chars.append(char)
            starts.append(begin + position)
            ends.append(begin + position + 1)
    text = "".join(chars)
    view = list(text)
    for match in DATE.finditer(text):
        if is_plausible_date(match):
            view[match.start() : match.end()] = "x" * (match.end() - match.start())
    digits_view = "".join(view).replace("/", " ")
    return NormalizedCluster(text, digits_view, tuple(starts), tuple(ends))


def token_extent(text: str) -> tuple[int, int] | None:
    """From the start of the first token of ``text`` to the end of its last, if any."""
    first: int | None = None
    last = 0
    for match in _SCAN.finditer(text):
        if match.lastgroup in ("d", "w"):
            if first is None:
                first = match.start()
            last = match.end()
    return None if first is None else (first, last)
