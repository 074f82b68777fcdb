"""Numbers from 0 to 999 written in words, as a language model spells phone digits.

A French phone number is read out in pairs ("zéro six, douze, trente-quatre, cinquante-six,
soixante-dix-huit"), a toll-free or Belgian one with hundreds ("zéro huit cent, quarante-sept",
"zéro quatre cent septante-cinq"), and a model asked in English spells "zero six one two". So
the masker recognises every French spelling of 0 to 999 (hyphenated compounds, "et", the
Belgian and Swiss "septante", "huitante", "octante", "nonante") and the English one
("twenty-one", "eight hundred and five"), and turns each into its digits. ``WORD_PATTERN`` is
a regular-expression fragment (no flags, no boundaries; the caller compiles it
case-insensitively between letter boundaries) matching one such number, longest spelling
first; ``word_value`` gives its value.

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
_ZEROS = {"zéro": 0, "zero": 0, "oh": 0}
_ENGLISH = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_HUNDREDS = {"cent", "cents", "hundred"}
_VALUES: dict[str, int] = {**_UNITS, **_TEENS, **_TENS, **_ZEROS, **_ENGLISH}

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

# 1 to 99 in French.
_FRENCH_99 = (
    rf"(?:{_TEN_TEEN}(?:{_ET}(?:un|onze)|{_JOIN}(?:{_TEEN}|{_UNIT}))?"
    rf"|quatre{_JOIN}vingts|{_TEN_UNIT}(?:{_ET}un|{_JOIN}{_UNIT})?"
    rf"|{_TEEN}|{_UNIT})"
)
_SPACE = r"[-\u2010\u2011 ]"  # one space or hyphen: "huit cent", "deux-cent-dix"
# "cents" takes its s only at the end: "huit cents douze" is 800 then 12, "huit cent douze" 812.
_FRENCH_HUNDRED = (
    rf"(?:(?:deux|trois|quatre|cinq|six|sept|huit|neuf){_SPACE})?"
    rf"(?:cent(?:{_SPACE}{_FRENCH_99})?|cents)"
)
_EN_UNIT = r"(?:one|two|three|four|five|six|seven|eight|nine)"
_EN_99 = (
    r"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
    rf"(?:{_JOIN}{_EN_UNIT})?"
    r"|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
    rf"|{_EN_UNIT})"
)
_EN_HUNDRED = rf"(?:{_EN_UNIT}{_SPACE})?hundred(?:{_SPACE}(?:and{_SPACE})?{_EN_99})?"

# A digit said twice or three times ("double zéro", "double oh").
_REPEATED = rf"(?:double|triple){_SPACE}(?:{_ZERO}|oh|{_UNIT}|{_EN_UNIT})"

#: One number from 0 to 999 in words, French or English, the longest spelling first; a
#: repeated digit; "oh" for zero, as English speakers read phone numbers.
WORD_PATTERN = rf"(?:{_REPEATED}|{_FRENCH_HUNDRED}|{_EN_HUNDRED}|{_FRENCH_99}|{_EN_99}|{_ZERO}|oh)"

#: Longest spelling ``WORD_PATTERN`` can match ("quatre cents quatre-vingt-dix-sept", 34).
MAX_WORD_LENGTH = 34

_SPLIT = regex.compile(r"[-\u2010\u2011\s]+")


def word_digits(spelled: str) -> str:
    """The digits one spelling stands for: "double zéro" -> "00", "douze" -> "12"."""
    words = [word for word in _SPLIT.split(spelled.lower()) if word]
    if len(words) == 2 and words[0] in ("double", "triple"):
        return str(word_value(words[1])) * (2 if words[0] == "double" else 3)
    return str(word_value(spelled))


def word_value(spelled: str) -> int:
    """Value of one spelling matched by ``WORD_PATTERN`` ("quatre-vingt-dix-huit" -> 98,
    "quatre cent septante-cinq" -> 475, "eight hundred and five" -> 805).

    Unknown words count as zero, so that the function never raises.
    """
    text = spelled.lower().replace("e\u0301", "é")
    words = [word for word in _SPLIT.split(text) if word and word not in ("et", "and")]
    hundreds = 0
    for index, word in enumerate(words):
        if word in _HUNDREDS:
            hundreds = 100 * (_below_hundred(words[:index]) or 1)
            words = words[index + 1 :]
            break
    return hundreds + _below_hundred(words)


def _below_hundred(words: list[str]) -> int:
    total = 0
    if len(words) >= 2 and words[0] == "quatre" and words[1] in ("vingt", "vingts"):
        total, words = 80, words[2:]
    for word in words:
        total += _VALUES.get(word, 0)
    return total
