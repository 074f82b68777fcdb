"""Training's parts on small inputs: the pure-Python inference equals scikit-learn's, the
threshold choice puts recall first, the weights file is canonical, bad rows are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from safety import detect
from safety.model import CLASSES, default_model, model_from_json
from safety.ruleset import default_ruleset
from safety.training import (
    Design,
    Example,
    Held,
    Params,
    choose_thresholds,
    dumps,
    featurize,
    fit,
    held_lines,
    read_examples,
)
from tests.conftest import safety_corpus

RULES = default_ruleset()


def test_inference_in_plain_python_equals_scikit_learn() -> None:
    rows = [r for r in safety_corpus() if r["writer"] in ("pub", "gen")]
    features = [featurize(r["text"], RULES) for r in rows]
    design = Design(features)
    labels = [r["expected"] for r in rows]
    params = Params(min_df=1, digits=12)
    model = model_from_json(fit(design, range(len(rows)), labels, params))
    reference = LogisticRegression(C=params.C, solver="newton-cg", tol=params.tol, max_iter=200)
    reference.fit(design.matrix, np.array([CLASSES.index(label) for label in labels]))
    expected = reference.predict_proba(design.matrix)
    for item, row in zip(features, expected, strict=True):
        got = model.predict(item, top=0).probabilities
        assert [got[c] for c in CLASSES] == pytest.approx(list(row), abs=1e-6)


def test_training_twice_gives_the_same_file() -> None:
    rows = [r for r in safety_corpus() if r["writer"] == "pub"]
    design = Design([featurize(r["text"], RULES) for r in rows])
    labels = [r["expected"] for r in rows]
    first = dumps(fit(design, range(len(rows)), labels, Params()))
    second = dumps(fit(design, range(len(rows)), labels, Params()))
    assert first == second
    assert json.loads(first)["weights"]


def H(risk_expected: bool, risk: float, hard: bool = False, soft: bool = False) -> Held:
    return Held(risk_expected, risk, hard, soft)


@pytest.mark.parametrize(
    ("held", "target", "expected", "why"),
    [
        (
            [H(True, 0.9), H(True, 0.6), H(False, 0.5), H(False, 0.1)],
            1.0,
            (0.6, 0.6),
            "the highest thresholds that keep every risk line",
        ),
        (
            [H(True, 0.9), H(True, 0.3), H(False, 0.5)],
            1.0,
            (0.3, 0.3),
            "recall first: a false alarm is the price of the last risk line",
        ),
        (
            [H(True, 0.9), H(True, 0.3, soft=True), H(False, 0.5)],
            1.0,
            (0.9, 0.3),
            "a rule lets the model's own threshold stay above the harmless line",
        ),
        (
            [H(True, 0.01, hard=True), H(False, 0.5, soft=True)],
            1.0,
            (0.99, 0.99),
            "a hard rule needs no threshold at all",
        ),
    ],
)
def test_thresholds_put_recall_first(
    held: list[Held], target: float, expected: tuple[float, float], why: str
) -> None:
    assert choose_thresholds(held, target) == expected, why


def test_the_weights_file_is_canonical() -> None:
    content = {"weights": {"w:b": [1, 2], "w:a": [3, 4]}, "threshold": 0.5, "format": "x"}
    text = dumps(content)
    assert json.loads(text) == content
    assert text.index('"w:a"') < text.index('"w:b"')
    assert text.endswith("}\n")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "x.jsonl:1"),
        ('{"id": "a", "text": "t"}', "expected"),
        ('{"id": "a", "text": "t", "expected": "peut-etre"}', "unknown label"),
    ],
)
def test_a_malformed_row_is_refused_with_its_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_examples(path, "x")


def test_the_threshold_search_decides_as_detect_does() -> None:
    """choose_thresholds scores pairs through Held.card; detect decides through decide: on
    every clear corpus line, with the shipped weights, both must agree."""
    model = default_model()
    rows = [r for r in safety_corpus() if r["tier"] == "clear"]
    examples = [Example(r["id"], r["text"], r["expected"], r["tier"], r["writer"]) for r in rows]
    held = held_lines(examples, {r["writer"]: model for r in rows}, RULES)
    thresholds = (model.threshold, model.rule_threshold)
    for row, line in zip(rows, held, strict=True):
        assert line.card(thresholds) == (detect(row["text"]).category != "rien"), row["id"]
