"""French numbers from 0 to 99 written in words, as a language model spells phone digits.

A French phone number is read out in pairs ("zéro six, douze, trente-quatre, cinquante-six,
soixante-dix-huit"), so the masker needs to recognise every spelling of 0 to 99 (hyphenated
compounds, "et", and the Belgian and Swiss "septante", "huitante", "octante", "nonante") and to
turn each one into its digits. ``WORD_PATTERN`` is a regular-expression fragment (no flags, no
boundaries; the caller compiles it case-insensitively between letter boundaries) matching one such
number, longest spelling first; ``word_value`` gives its value.

Every spelling is at most ``MAX_WORD_LENGTH`` characters long, which bounds the streaming
holdback (see ``safety.masking``).
"""

from __future__ import annotations

import regex

_UNITS = {
    "un": 1,
    "deux": 2,
    "trois": 3,
    "quatre": 4,
    "cinq": 5,
    "six": 6,
    "sept": 7,
    "huit": 8,
    "neuf": 9,
}
_TEENS = {
    "dix": 10,
    "onze": 11,
    "douze": 12,
    "treize": 13,
    "quatorze": 14,
    "quinze": 15,
    "seize": 16,
}
_TENS = {
    "vingt": 20,
    "vingts": 20,
    "trente": 30,
    "quarante": 40,
    "cinquante": 50,
    "soixante": 60,
    "septante": 70,
    "huitante": 80,
    "octante": 80,
    "nonante": 90,
}
_ZEROS = {"zéro": 0, "zero": 0}
_VALUES: dict[str, int] = {**_UNITS, **_TEENS, **_TENS, **_ZEROS}

# Compounds are hyphenated ("dix-sept", "quatre-vingt-dix"); "et" may stand between spaces
# ("vingt et un"). A space alone separates two numbers: "cinquante dix" is 50, 10.
_JOIN = r"[-\u2010\u2011]"
_ET = r"[-\u2010\u2011\s]et[-\u2010\u2011\s]"
_UNIT = "(?:" + "|".join(_UNITS) + ")"
_TEEN = rf"(?:dix{_JOIN}(?:sept|huit|neuf)|" + "|".join(_TEENS) + ")"
# Tens followed by a unit only ("cinquante-deux"), and tens followed by a unit or a teen
# ("soixante-douze", "quatre-vingt-dix-huit"); "quatre-vingts" takes its s only when alone.
_TEN_UNIT = r"(?:vingt|trente|quarante|cinquante|septante|huitante|octante|nonante)"
_TEN_TEEN = rf"(?:soixante|quatre{_JOIN}vingt)"
_ZERO = r"(?:z(?:é|e\u0301|e)ro)"

#: One number from 0 to 99 in words, compound spellings first so that the longest one wins.
WORD_PATTERN = (
    rf"(?:{_TEN_TEEN}(?:{_ET}(?:un|onze)|{_JOIN}(?:{_TEEN}|{_UNIT}))?"
    rf"|quatre{_JOIN}vingts|{_TEN_UNIT}(?:{_ET}un|{_JOIN}{_UNIT})?"
    rf"|{_TEEN}|{_UNIT}|{_ZERO})"
)

#: Longest spelling ``WORD_PATTERN`` can match ("quatre-vingt-dix-sept", 21 characters).
MAX_WORD_LENGTH = 21

_SPLIT = regex.compile(r"[-\u2010\u2011\s]+")


def word_value(spelled: str) -> int:
    """Value of one spelling matched by ``WORD_PATTERN`` ("quatre-vingt-dix-huit" -> 98).

    Unknown words count as zero, so that the function never raises.
    """
    text = spelled.lower().replace("e\u0301", "é")
    words = [word for word in _SPLIT.split(text) if word and word != "et"]
    total = 0
    if len(words) >= 2 and words[0] == "quatre" and words[1] in ("vingt", "vingts"):
        total, words = 80, words[2:]
    for word in words:
        total += _VALUES.get(word, 0)
    return total
