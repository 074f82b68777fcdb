"""Markup and links never reach the client: one table per class, then streaming properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safety.markup import LINK_REMOVED, MAX_HOLDBACK, StreamSanitizer, markup_kinds, sanitize

# (model output, what must be gone, the kind the validation reports)
REMOVED = [
    ("Bonjour <script>alert(1)</script> voisin", ["<script", "</script"], "balise HTML"),
    ("Voici <img src=x onerror=alert(1)> la photo", ["<img", "onerror"], "balise HTML"),
    ("Un <!-- commentaire --> caché", ["<!--", "-->"], "balise HTML"),
    ("&lt;script&gt;alert(1)&lt;/script&gt;", ["&lt;script", "script&gt;"], "balise HTML"),
    ("＜script＞alert(1)＜/script＞", ["＜script", "script＞"], "balise HTML"),
    ("Cliquez [ici](javascript:alert(1)) vite", ["javascript", "](", "alert(1)"], "lien markdown"),
    ("Voir [la mairie](https://mairie.fr/bruit).", ["https", "mairie.fr", "]("], "lien markdown"),
    ("![photo](https://x.io/a.png) ci-dessus", ["![", "https", "x.io"], "image markdown"),
    ("Lisez [ceci][1].\n[1]: javascript:alert(1)", ["[1]", "javascript"], "lien markdown"),
    ("javascript:alert(document.cookie)", ["javascript", "alert("], "lien web"),
    ("ｊａｖａｓｃｒｉｐｔ：alert(1)", ["ｊａｖａｓｃｒｉｐｔ", "alert("], "lien web"),
    ("data:text/html;base64,PHNjcmlwdD4=", ["data:", "base64"], "lien web"),
    ("Allez sur service-public.fr/particuliers.", ["service-public.fr"], "lien web"),
    ("Voyez www.exemple.org pour cela", ["www.", "exemple.org"], "lien web"),
    ("Écrivez à mairie@ville-exemple.fr demain", ["mairie@", "ville-exemple.fr"], "adresse e-mail"),
    ("mailto:syndic@exemple.com", ["mailto", "syndic@"], "lien web"),
    ("```python\nprint('x')\n```", ["```"], "bloc de code"),
    ("~~~\ncode\n~~~", ["~~~"], "bloc de code"),
]

# Ordinary answers: nothing to take out, and nothing reported.
KEPT = [
    "Le voisin du 3e étage fait du bruit. M. Dupont l'a constaté à 23 h.",
    "Appelez les [[pompiers]] puis le [[samu]] ; notez le [numéro masqué] plus tard.",
    "Selon l'article R. 1336-5 du code de la santé publique, etc. Le bruit cesse vers 2 h.",
    "Une mesure de 1,5 m, un chien (un berger) et 45 dB(A) la nuit.",
    "Notez : date, heure, durée. Puis écrivez au bailleur.",
    "**Important** : gardez une trace écrite, *toujours*.",
]


@pytest.mark.parametrize(("text", "gone", "kind"), REMOVED, ids=[t for t, _, _ in REMOVED])
def test_each_class_is_removed_and_reported(text: str, gone: list[str], kind: str) -> None:
    clean = sanitize(text)
    for part in gone:
        assert part not in clean.text
    assert clean.removed >= 1
    assert kind in markup_kinds(text)


def test_a_link_keeps_its_text_and_a_uri_says_it_was_removed() -> None:
    assert sanitize("Cliquez [ici](javascript:alert(1)) vite").text == "Cliquez ici vite"
    assert sanitize("Voir https://exemple.com/a?b=c maintenant").text == (
        f"Voir {LINK_REMOVED} maintenant"
    )


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_answers_are_left_alone(text: str) -> None:
    assert sanitize(text).text == text
    assert markup_kinds(text) == []


PIECES = [
    "Bonjour ", "voisin", " ", "\n", "<b>", "</b>", "<script>", "&lt;", "&gt;", "＜", "＞", "[",
    "]", "(", ")", "[ici]", "(javascript:alert(1))", "[1]", ": ", "https://", "exemple.fr", "/a",
    "www.", "@", "marie", ".", "```", "~~~", "!", "[[pompiers]]", "06 12 34 56 78", "é", "`",
    "data:", "tel:", "mailto:",
]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=20),
)
def test_streaming_equals_one_shot_for_any_chunking(pieces: list[str], cuts: list[int]) -> None:
    text = "".join(pieces)
    sanitizer = StreamSanitizer()
    out, position, index = [], 0, 0
    while position < len(text):
        size = cuts[index % len(cuts)]
        out.append(sanitizer.feed(text[position : position + size]))
        assert len(sanitizer._pending) <= MAX_HOLDBACK
        position, index = position + size, index + 1
    out.append(sanitizer.close())
    assert "".join(out) == sanitize(text).text
    assert sanitizer.removed == sanitize(text).removed


def test_prose_is_emitted_as_it_comes() -> None:
    sanitizer = StreamSanitizer()
    emitted = sanitizer.feed("Notez chaque épisode dans le journal, avec l'heure. ")
    assert emitted == "Notez chaque épisode dans le journal, avec l'heure. "
