"""normalize(): tables of what it does, and properties it keeps on any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safety import detect, normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("Ça PUE le GAZ", "ca pue le gaz", id="case and cedilla"),
        pytest.param("g\u200ba\u200bz", "gaz", id="zero-width spaces inside a word"),
        pytest.param("\ufeffgaz\u00ad", "gaz", id="BOM and soft hyphen"),
        pytest.param("\u202egaz\u202c", "gaz", id="bidi controls"),
        pytest.param("gаz", "gaz", id="Cyrillic a"),
        pytest.param("ϐοnjour", "bonjour", id="Greek look-alikes"),
        pytest.param("ＧＡＺ", "gaz", id="full-width letters (NFKC)"),
        pytest.param(
            "j’ai l‘odeur l`air l´eau lʼami", "j'ai l'odeur l'air l'eau l'ami", id="apostrophes"
        ),
        pytest.param("fumée brûlée œuf", "fumee brulee oeuf", id="accents and ligature"),
        pytest.param("aaaaide feuuuu", "aide feu", id="letters repeated three times or more"),
        pytest.param("  trop   d'espaces \n\t ici ", "trop d'espaces ici", id="whitespace"),
        pytest.param("jai jsuis chui g c ya", "j'ai je suis je suis j'ai c'est il y a", id="SMS"),
        pytest.param(
            "pk pcq tkt jsp bcp stp mtn",
            "pourquoi parce que t'inquiete je sais pas beaucoup s'il te plait maintenant",
            id="SMS 2",
        ),
        pytest.param(
            "qqn qq1 qqch auj ptn",
            "quelqu'un quelqu'un quelque chose aujourd'hui putain",
            id="SMS 3",
        ),
        pytest.param(
            "envie den finir jen peux plus",
            "envie d'en finir j'en peux plus",
            id="missing apostrophes",
        ),
        pytest.param(
            "d en l odeur j ai jusqu a", "d'en l'odeur j'ai jusqu'a", id="spaced elisions"
        ),
        pytest.param("jsens jcrois jvois", "je sens je crois je vois", id="je glued to a verb"),
        pytest.param("cc 2024 g8", "cc 2024 g8", id="no expansion inside other words"),
    ],
)
def test_normalize_table(raw: str, expected: str) -> None:
    assert normalize(raw).text == expected


def test_offsets_point_back_into_the_original() -> None:
    raw = "Jsuis là, ça pue le GAZ"
    normalized = normalize(raw)
    start = normalized.text.index("gaz")
    assert normalized.to_original(start, start + 3) == (raw.index("GAZ"), raw.index("GAZ") + 3)
    expanded = normalized.text.index("je suis")
    assert raw[slice(*normalized.to_original(expanded, expanded + 7))] == "Jsuis"


TEXT = st.text(st.characters(codec="utf-8"), max_size=300) | st.text(max_size=300)


@given(TEXT)
@settings(max_examples=400)
def test_normalize_is_idempotent(raw: str) -> None:
    once = normalize(raw).text
    assert normalize(once).text == once


@given(TEXT)
@settings(max_examples=400)
def test_offsets_stay_inside_the_original_and_in_order(raw: str) -> None:
    normalized = normalize(raw)
    offsets = normalized.offsets
    assert len(offsets) == len(normalized.text)
    previous = 0
    for start, end in offsets:
        assert 0 <= start < end <= len(raw)
        assert start >= previous
        previous = start


RISK_PHRASES = [
    ("ca pue le gaz", "danger"),
    ("je veux mourir", "detresse"),
    ("il me menace de mort", "represailles"),
    ("la prise fait des etincelles", "danger"),
    ("envie d'en finir", "detresse"),
]
INVISIBLE = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202c"])
ACCENTED = {"a": "àâ", "e": "éèêë", "i": "îï", "o": "ô", "u": "ùû", "c": "ç"}


@st.composite
def disguised(draw: st.DrawFn) -> tuple[str, str]:
    phrase, category = draw(st.sampled_from(RISK_PHRASES))
    out = []
    for char in phrase:
        if char.isalpha() and draw(st.booleans()):
            char = char.upper()
        if char.lower() in ACCENTED and draw(st.integers(0, 3)) == 0:
            char = draw(st.sampled_from(ACCENTED[char.lower()]))
        if char.isalpha() and draw(st.integers(0, 5)) == 0:
            char = char * draw(st.integers(3, 6))
        out.append(char)
        if draw(st.integers(0, 3)) == 0:
            out.append(draw(INVISIBLE))
    return "".join(out), category


@given(disguised())
@settings(max_examples=300)
def test_invisible_case_accents_and_repeats_do_not_change_the_verdict(
    case: tuple[str, str],
) -> None:
    text, category = case
    assert detect(text).category == category, normalize(text).text
