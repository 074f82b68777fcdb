"""render_contacts and StreamRenderer: numbers from the directory, the same on a stream."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from directory.snapshot import Directory
from safety.contacts import StreamRenderer, render_contacts

BOOK = Directory.national_only()


@pytest.mark.parametrize(
    ("text", "expected", "contacts"),
    [
        pytest.param(
            "Appelez [[pompiers]].", "Appelez Sapeurs-pompiers (18).", ("pompiers",), id="tag"
        ),
        pytest.param(
            "Appelez les pompiers.", "Appelez les pompiers (18).", ("pompiers",), id="plain mention"
        ),
        pytest.param(
            "les pompiers [[pompiers]], vite",
            "les pompiers (18), vite",
            ("pompiers",),
            id="mention confirmed by its tag",
        ),
        pytest.param(
            "le SAMU puis le SAMU",
            "le SAMU (15) puis le SAMU",
            ("samu",),
            id="number on the first mention only",
        ),
        pytest.param(
            "Le samu social aide",
            "Le samu social (115) aide",
            ("samu-social",),
            id="longest name wins",
        ),
        pytest.param(
            "SOS AMITIÉ écoute",
            "SOS AMITIÉ (09 72 39 40 50) écoute",
            ("sos-amitie",),
            id="case and accents",
        ),
        pytest.param("[[inconnu]] puis la suite", " puis la suite", (), id="unknown tag removed"),
        pytest.param(
            "la politique du syndic", "la politique du syndic", (), id="no mention inside a word"
        ),
        pytest.param(
            "[[ grdf ]] d'abord",
            "Urgence sécurité gaz (GRDF) (0 800 47 33 33) d'abord",
            ("grdf",),
            id="spaces inside a tag",
        ),
    ],
)
def test_render_table(text: str, expected: str, contacts: tuple[str, ...]) -> None:
    rendered = render_contacts(text, BOOK)
    assert rendered.text == expected
    assert rendered.contacts == contacts


def test_unknown_tags_are_reported() -> None:
    assert render_contacts("voir [[conciliateur]]", BOOK).unknown_tags == ("conciliateur",)


def test_name_style_shows_no_number() -> None:
    assert (
        render_contacts("Appelez [[pompiers]].", BOOK, style="name").text
        == "Appelez Sapeurs-pompiers."
    )


def test_plain_text_is_not_held_back() -> None:
    renderer = StreamRenderer(BOOK)
    assert renderer.feed("Bonjour, notez ") == "Bonjour, notez "
    assert renderer.feed("les dates et ") == "les dates et "


PIECES = st.sampled_from(
    [
        "Appelez ", "les pompiers", " [[pompiers]]", "[[samu]]", " ou le SAMU", "[[inconnu]]",
        "SOS Amitié", " et ", "la police", ", ", "[[", "]]", "[", "police", "sos", " amitié",
        "Bonjour. ", "é", "samu social", "\n", "le numéro d'urgence européen", " [[urgence-europeenne]]",
    ]
)  # fmt: skip


@given(st.lists(PIECES, max_size=25), st.data())
@settings(max_examples=300)
def test_stream_equals_one_shot_for_every_cut(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=12)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    renderer = StreamRenderer(BOOK)
    streamed = "".join(renderer.feed(chunk) for chunk in chunks) + renderer.close()
    expected = render_contacts(text, BOOK)
    assert streamed == expected.text
    assert renderer.contacts == expected.contacts
    assert renderer.unknown_tags == expected.unknown_tags
