"""The learned layer's features: what a message becomes, as another language must rebuild it."""

from __future__ import annotations

import math

import pytest

from safety.engine import analyse
from safety.features import FAMILIES, char_ngrams, extract, locate, tokens
from safety.normalize import normalize
from safety.ruleset import default_ruleset

RULES = default_ruleset()


def features_of(text: str):  # type: ignore[no-untyped-def]
    normalized = normalize(text).text
    analysis = analyse(RULES, normalized, float("inf"))
    return normalized, analysis, extract(normalized, analysis)


def test_character_ngrams_are_3_to_5_long_inside_padded_words() -> None:
    assert char_ngrams("gaz") == ("c: ga", "c:gaz", "c:az ", "c: gaz", "c:gaz ", "c: gaz ")
    assert len(char_ngrams("fumee")) == len(set(char_ngrams("fumee")))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ça pue le gaz !", ["ca", "pue", "le", "gaz"]),
        ("au secours 😭😭", ["au", "secours", "😭", "😭"]),
        ("l'odeur", ["l", "odeur"]),
        ("3e étage", ["3e", "etage"]),
    ],
)
def test_tokens_are_letters_and_digits_or_one_symbol(text: str, expected: list[str]) -> None:
    assert [t for t, _, _ in tokens(normalize(text).text)] == expected


def test_a_message_has_words_pairs_triples_cues_and_rules() -> None:
    _, _, features = features_of("ça pue le gaz dans l'escalier")
    names = {name for name, _ in features.items()}
    assert {"w:gaz", "b:le gaz", "t:pue le gaz", "cue:gas", "cue:gas_sign", "c: gaz "} <= names
    assert features.keys["rule"] == ("gaz.presence",)
    assert "gaz" in features.words


def test_a_negated_cue_is_a_feature_of_its_own() -> None:
    _, _, features = features_of("pas de fumée, juste le bruit")
    assert "smoke" in features.keys["off"]
    assert "smoke" not in features.keys["cue"]
    assert "negation" in features.keys["cue"]


@pytest.mark.parametrize("family", ["w", "b", "t", "cue", "off"])
def test_each_family_vector_has_the_length_of_its_weight(family: str) -> None:
    _, _, features = features_of("ça pue le gaz dans l'escalier, pas de fumée")
    count = len(features.keys[family])
    assert features.values[family] * math.sqrt(count) == pytest.approx(FAMILIES[family])


def test_character_ngrams_are_counted_word_by_word() -> None:
    _, _, features = features_of("gaz gaz gazz")
    items = [name for name, _ in features.items() if name.startswith("c:")]
    assert items.count("c: ga") == 2  # two distinct words hold it; the repeated one counts once
    assert features.values["c"] == pytest.approx(
        FAMILIES["c"] / math.sqrt(len(char_ngrams("gaz")) + len(char_ngrams("gazz")))
    )


def test_features_are_located_in_the_normalised_text() -> None:
    normalized, analysis, _ = features_of("ça pue le gaz")
    found = tokens(normalized)
    assert [normalized[s:e] for s, e in locate("w:gaz", found, analysis)] == ["gaz"]
    assert [normalized[s:e] for s, e in locate("b:le gaz", found, analysis)] == ["le gaz"]
    assert [normalized[s:e] for s, e in locate("grams:pue", found, analysis)] == ["pue"]
    assert [normalized[s:e] for s, e in locate("c: ga", found, analysis)] == ["gaz"]
    assert locate("cue:gas", found, analysis) == [(10, 13)]
    assert locate("w:absent", found, analysis) == []
