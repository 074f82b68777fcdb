"""The engine's semantics on a small rule set of our own: windows, negation, idioms, unless."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from safety import detect
from safety.model import LinearModel
from safety.ruleset import RuleSet, load_ruleset

# The engine's semantics alone: a model that defers to every rule that fires.
RULES_ONLY = LinearModel.rules_only()

LEXICON = """
family: lexique
description: Engine classes for the tests.
terms:
  negation: {negatable: false, patterns: ['pas\\b', 'aucune?\\b', 'n''y a plus\\b']}
  terminator: {negatable: false, patterns: ['mais\\b']}
  idiom: {negatable: false, patterns: ["feu d'artifice"]}
"""
FAMILY = """
family: test
description: Test family, small on purpose.
terms:
  hazard: {patterns: ['gaz\\b', 'feu\\b']}
  sign: {patterns: ['pue\\b', 'sent\\b']}
  benign: {patterns: ['cuisine\\b']}
  despair: {negatable: false, patterns: ['plus envie de vivre']}
  typo: {fuzzy: [incendie]}
rules:
  - id: test.presence
    category: danger
    topics: [gaz]
    description: A hazard and a sign of its presence.
    cues: [hazard, sign]
    window: 3
    unless: {benign: 2}
  - id: test.despair
    category: detresse
    topics: [suicide]
    description: Despair expressed through a negation.
    cues: [despair]
    window: 0
  - id: test.fuzzy
    category: danger
    topics: [feu]
    description: A misspelt fire word.
    cues: [typo]
    window: 0
"""


def _ruleset(factory: pytest.TempPathFactory, lexicon: str, family: str) -> RuleSet:
    directory: Path = factory.mktemp("rules")
    (directory / "_lexicon.yaml").write_text(lexicon, encoding="utf-8")
    (directory / "test.yaml").write_text(family, encoding="utf-8")
    return load_ruleset(directory)


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    return _ruleset(tmp_path_factory, LEXICON, FAMILY)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("ça pue le gaz", "danger", id="sign before hazard"),
        pytest.param("le gaz pue", "danger", id="hazard before sign"),
        pytest.param("gaz un deux trois pue", "danger", id="three words between: inside window"),
        pytest.param("gaz un deux trois quatre pue", "rien", id="four words between: outside"),
        pytest.param("pas de gaz qui pue", "rien", id="negated hazard"),
        pytest.param("pas de feu mais le gaz pue", "danger", id="terminator ends the scope"),
        pytest.param("aucune odeur, le gaz pue", "danger", id="punctuation ends the scope"),
        pytest.param("pas un deux trois quatre cinq le gaz pue", "danger", id="scope is 5 words"),
        pytest.param("n'y a plus de gaz qui pue", "rien", id="multi-word trigger"),
        pytest.param("feu d'artifice qui pue", "rien", id="idiom hides its words"),
        pytest.param("feu d'artifice et le gaz pue", "danger", id="idiom hides only its words"),
        pytest.param("la cuisine au gaz pue", "rien", id="unless within 2 words"),
        pytest.param("la cuisine un deux trois gaz pue", "danger", id="unless too far"),
        pytest.param("j'ai plus envie de vivre", "detresse", id="despair is never negated"),
        pytest.param("pas plus envie de vivre", "detresse", id="even after a trigger"),
        pytest.param("un incandie", "danger", id="one edit on a fuzzy word"),
        pytest.param("un incndei", "rien", id="too many edits"),
    ],
)
def test_engine_semantics(rules: RuleSet, text: str, expected: str) -> None:
    assert detect(text, ruleset=rules, model=RULES_ONLY).category == expected


def test_budget_exhausted_fails_toward_the_card(rules: RuleSet) -> None:
    detection = detect("rien de spécial " * 50, ruleset=rules, budget_s=0.0)
    assert detection.category == "danger"
    assert detection.rules == ("safety.timeout",)


def test_no_garbage_collection_runs_inside_the_budgeted_work() -> None:
    """A full collection over a large heap takes tens of milliseconds, charged to whichever
    call triggers it: inside the normaliser or the engine, it would eat the detection's
    budget and show a needless card. With a collection falling due at every allocation,
    none may start from their code; some start from the rest (else this proves nothing)."""
    callers: list[str] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            callers.append(sys._getframe(1).f_globals.get("__name__", ""))

    thresholds = gc.get_threshold()
    gc.callbacks.append(record)
    gc.set_threshold(1)
    try:
        detection = detect("le voisin fait du bruit tous les soirs depuis des mois")
        garbage = [[index] for index in range(100)]  # collections run again once it returns
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(record)
    assert detection.rules == ()
    assert len(garbage) == 100
    assert callers, "no collection ran at all"
    budgeted = ("safety.normalize", "safety.engine", "safety.features", "safety.model")
    assert [c for c in callers if c in budgeted] == []
    assert gc.isenabled()


def test_detection_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        detect("ça pue le gaz dans l'escalier")
        assert not gc.isenabled()
    finally:
        gc.enable()


CONTRAST_LEXICON = (
    LEXICON
    + """  contrast: {negatable: false, patterns: ['mais\\b', 'encore\\b']}
  resolved: {patterns: ['sont venus\\b', 'repare\\b']}
"""
)
CONTRAST_FAMILY = FAMILY.replace("unless: {benign: 2}", "unless: {benign: 2, resolved: 6}")


@pytest.fixture(scope="module")
def contrast_rules(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    return _ruleset(tmp_path_factory, CONTRAST_LEXICON, CONTRAST_FAMILY)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("ils sont venus, le gaz pue", "rien", id="resolved before the cues"),
        pytest.param("ils sont venus mais le gaz pue", "danger", id="a contrast reopens it"),
        pytest.param("ils sont venus, le gaz pue encore", "danger", id="'encore' reopens too"),
        pytest.param("le gaz pue mais ils sont venus", "rien", id="resolved after: closes"),
        pytest.param("le gaz pue, c'est repare", "rien", id="resolution after the cues"),
    ],
)
def test_a_contrast_word_reopens_a_resolved_event(
    contrast_rules: RuleSet, text: str, expected: str
) -> None:
    assert detect(text, ruleset=contrast_rules, model=RULES_ONLY).category == expected


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        pytest.param("ma voisine s'est pendue dans la cave", "blessure.pendaison", id="hanging"),
        pytest.param(
            "il me tue, venez vite", "violence.appel_au_secours", id="il me tue: a person"
        ),
        pytest.param(
            "les pompiers sont venus hier mais ça sent encore le gaz très fort",
            "gaz.presence",
            id="resolved then reopened",
        ),
    ],
)
def test_shipped_rules_see_events_that_idioms_and_resolutions_used_to_hide(
    text: str, rule: str
) -> None:
    assert rule in detect(text, model=RULES_ONLY).rules


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("ce bruit me tue", id="ce bruit me tue"),
        pytest.param("ma fille est pendue au téléphone", id="pendue au téléphone"),
        pytest.param("il n'y a pas encore de fumée", id="pas encore: still negated"),
    ],
)
def test_shipped_idioms_and_negations_still_hide_themselves(text: str) -> None:
    assert detect(text, model=RULES_ONLY).rules == ()
