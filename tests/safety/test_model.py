"""The learned layer at run time, and how ``detect`` decides with it.

Decision tests use small hand-written weights, so each one shows one rule of the decision
(``safety.detect``'s docstring) whatever the shipped weights say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from directory.snapshot import Directory
from safety import detect
from safety.features import CHAR_MAX, CHAR_MIN, FAMILIES
from safety.model import (
    CLASSES,
    FORMAT,
    LinearModel,
    ModelError,
    default_model,
    load_model,
    model_from_json,
)

ROOT = Path(__file__).resolve().parents[2]


def weights(
    rows: dict[str, list[float]],
    *,
    intercept: tuple[float, ...] = (2.0, 0.0, 0.0, 0.0),
    threshold: float = 0.5,
    rule_threshold: float = 0.2,
) -> LinearModel:
    return model_from_json(
        {
            "format": FORMAT,
            "classes": list(CLASSES),
            "features": {"families": dict(FAMILIES), "char_min": CHAR_MIN, "char_max": CHAR_MAX},
            "intercept": list(intercept),
            "threshold": threshold,
            "rule_threshold": rule_threshold,
            "training": {},
            "weights": rows,
        }
    )


def test_detect_never_imports_the_training_libraries() -> None:
    code = (
        "import sys, safety\n"
        'safety.detect("ça pue le gaz dans l\'escalier")\n'
        "print([m for m in sys.modules if m.split('.')[0] in ('sklearn', 'numpy', 'scipy')])"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_shipped_weights_load_and_say_how_they_were_made() -> None:
    model = default_model()
    assert model.classes == CLASSES
    assert 0 < model.rule_threshold <= model.threshold < 1
    data = json.loads((ROOT / "safety" / "weights" / "model.json").read_text(encoding="utf-8"))
    assert data["format"] == FORMAT
    assert set(data["training"]["corpus"]) == {
        p.name for p in (ROOT / "tests/corpus/safety").glob("*.jsonl")
    }
    assert data["training"]["team"]


def test_the_model_alone_shows_its_category_general_card() -> None:
    model = weights({"w:bizarre": [0.0, 6.0, 0.0, 0.0]})
    detection = detect("c'est Bizarre dans la cour", model=model)
    assert detection.category == "danger"
    assert detection.rules == ("model.danger",)
    assert detection.topics == ()
    card = [
        c.id for c in Directory.national_only().card_for(detection.categories, detection.topics)
    ]
    assert card == ["urgence-europeenne", "samu", "police", "pompiers", "urgence-sms"]
    evidence = detection.evidence[0]
    assert evidence.feature == "w:bizarre"
    assert ["c'est Bizarre dans la cour"[s:e] for s, e in evidence.spans] == ["Bizarre"]
    assert detection.spans == evidence.spans


@pytest.mark.parametrize(
    ("category", "card_head"),
    [("detresse", "prevention-suicide"), ("represailles", "police")],
)
def test_each_category_has_its_general_card(category: str, card_head: str) -> None:
    row = [0.0, 0.0, 0.0, 0.0]
    row[CLASSES.index(category)] = 6.0
    detection = detect("un mot rare", model=weights({"w:rare": row}))
    assert detection.rules == (f"model.{category}",)
    card = Directory.national_only().card_for(detection.categories, detection.topics)
    assert card[0].id == card_head


def test_a_rule_shows_its_card_unless_the_model_is_confident_it_is_harmless() -> None:
    text = "ça pue le gaz dans l'escalier"  # gaz.presence, not a hard rule
    agree = weights({}, intercept=(0.0, 0.0, -9.0, -9.0), rule_threshold=0.2)  # risk 0.5
    veto = weights({}, intercept=(9.0, 0.0, 0.0, 0.0), rule_threshold=0.2)  # risk ~0.0004
    assert detect(text, model=agree).rules == ("gaz.presence",)
    vetoed = detect(text, model=veto)
    assert vetoed.category == "rien"
    assert vetoed.rules == ()


def test_a_hard_rule_shows_its_card_whatever_the_model_says() -> None:
    veto = weights({}, intercept=(12.0, 0.0, 0.0, 0.0))
    detection = detect("je vais me suicider ce soir", model=veto)
    assert detection.category == "detresse"
    assert "suicide.intention" in detection.rules
    assert detection.risk < 0.01


def test_when_rules_of_two_categories_fire_the_model_orders_them() -> None:
    text = "il a sorti un couteau et il m'a menacé de mort"  # arme + menace rules
    toward_threat = weights({}, intercept=(0.0, 0.0, 3.0, 0.0), rule_threshold=0.0)
    toward_danger = weights({}, intercept=(0.0, 3.0, 0.0, 0.0), rule_threshold=0.0)
    threat = detect(text, model=toward_threat)
    danger = detect(text, model=toward_danger)
    assert set(threat.categories) == set(danger.categories) == {"danger", "represailles"}
    assert threat.category == "represailles"
    assert danger.category == "danger"


def test_probabilities_add_up_and_risk_is_their_complement() -> None:
    detection = detect("le voisin fait du bruit tous les soirs")
    probabilities = dict(detection.probabilities)
    assert list(probabilities) == list(CLASSES)
    assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-3)
    assert detection.risk == pytest.approx(1.0 - probabilities["rien"], abs=1e-3)


def test_evidence_points_into_the_original_text_through_normalisation() -> None:
    text = "ça sent le GAAAZ dans l’escalier"
    detection = detect(text)
    assert detection.category == "danger"
    quoted = {text[s:e] for item in detection.evidence for s, e in item.spans}
    assert quoted
    assert all(q and q in text for q in quoted)


def _content(**changes: Any) -> dict[str, Any]:
    base = {
        "format": FORMAT,
        "classes": list(CLASSES),
        "features": {"families": dict(FAMILIES), "char_min": CHAR_MIN, "char_max": CHAR_MAX},
        "intercept": [0.0] * 4,
        "threshold": 0.5,
        "rule_threshold": 0.2,
        "training": {},
        "weights": {},
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": "other/1"}, "not a"),
        ({"classes": ["rien", "danger"]}, "classes"),
        ({"features": {"families": {"w": 1.0}, "char_min": 3, "char_max": 5}}, "trained with"),
        ({"weights": {"w:gaz": [1.0, 2.0]}}, "4 numbers"),
        ({"threshold": 1.5}, "outside"),
    ],
)
def test_a_weights_file_that_does_not_fit_is_refused(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    path = tmp_path / "weights.json"
    path.write_text(json.dumps(_content(**changes)), encoding="utf-8")
    with pytest.raises(ModelError, match=message):
        load_model(path)


def test_a_missing_or_broken_weights_file_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError):
        load_model(tmp_path / "absent.json")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ModelError):
        load_model(tmp_path / "broken.json")
