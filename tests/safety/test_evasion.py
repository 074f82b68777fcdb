"""Evasion: writing a message differently must not change its verdict, rules and model alike.

Invisible characters, soft hyphens inside words, capitals, stretched letters, full-width and
Cyrillic look-alike letters are all folded away by normalisation before either layer reads
the text; these properties check it on whole verdicts, for messages of every category.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from safety import detect

MESSAGES = [
    "ça pue le gaz dans l'escalier",
    "il y a de la fumée noire sous la porte du voisin",
    "ma voisine est par terre et elle ne répond plus",
    "je vais me suicider ce soir",
    "il m'a dit que si je porte plainte il brûlera ma voiture",
    "le chien du voisin aboie toute la nuit",
]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
CYRILLIC = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у"}


def _insert_invisible(text: str, picks: list[int]) -> str:
    chars = list(text)
    for pick in picks:
        position = pick % (len(chars) + 1)
        chars.insert(position, INVISIBLE[pick % len(INVISIBLE)])
    return "".join(chars)


def _stretch(text: str, picks: list[int]) -> str:
    # Letters that stand alone: a stretched double letter ("terrrrre") folds to one ("tere"),
    # a known limit of normalisation, which the learned layer's n-grams cover but rules may not.
    # Neighbours are compared without accents: the "é" of "fumée" stands beside an "e".
    base = [_bare(c) for c in text]
    letters = [
        i
        for i, c in enumerate(text)
        if c.isalpha() and base[i - 1 : i] != [base[i]] and base[i + 1 : i + 2] != [base[i]]
    ]
    chosen = {letters[p % len(letters)] for p in picks}
    return "".join(c * 4 if i in chosen else c for i, c in enumerate(text))


def _bare(char: str) -> str:
    return unicodedata.normalize("NFKD", char)[0].lower()


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "a" <= c <= "z" else c for c in text)


def _homoglyphs(text: str) -> str:
    return "".join(CYRILLIC.get(c, c) for c in text)


TRANSFORMS: dict[str, Callable[[str, list[int]], str]] = {
    "invisible characters": _insert_invisible,
    "stretched letters": _stretch,
    "capitals": lambda text, _: text.upper(),
    "full-width letters": lambda text, _: _full_width(text),
    "Cyrillic look-alikes": lambda text, _: _homoglyphs(text),
}


@settings(max_examples=150, deadline=None)
@given(
    message=st.sampled_from(MESSAGES),
    names=st.lists(st.sampled_from(sorted(TRANSFORMS)), min_size=1, max_size=3, unique=True),
    picks=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=6),
)
def test_an_evaded_message_gets_the_same_verdict(
    message: str, names: list[str], picks: list[int]
) -> None:
    evaded = message
    # Stretching first: it reads the letters' neighbours, which the other transforms disguise.
    for name in sorted(names, key=lambda name: name != "stretched letters"):
        evaded = TRANSFORMS[name](evaded, picks)
    original, other = detect(message), detect(evaded)
    assert other.category == original.category, (names, evaded)
    assert other.rules == original.rules, (names, evaded)
    assert other.risk == original.risk, (names, evaded)


def test_the_messages_cover_every_category() -> None:
    assert {detect(m).category for m in MESSAGES} == {"danger", "detresse", "represailles", "rien"}


def test_a_stretched_double_letter_still_shows_the_card() -> None:
    """'terrrrre' folds to 'tere', which the rule does not read; the learned layer's n-grams
    still see a person down who does not answer."""
    detection = detect("ma voisine est par terrrrre et elle ne répond plus")
    assert detection.category == "danger"
