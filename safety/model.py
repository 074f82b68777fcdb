"""The learned layer at run time: a multinomial linear model read from a JSON weights file.

Inference is a sparse dot product in plain Python: for each class, the intercept plus the sum
of the weights of the message's features, each scaled by its value (``safety.features``), then
a softmax. No scikit-learn, no numpy: the mobile client can run the same file.

The weights file (``safety/weights/model.json``, written by ``nuisances safety train``):

- ``format``: ``"nuisances-safety-linear/1"``;
- ``classes``: the class names, ``rien`` first; ``intercept``: one number per class;
- ``weights``: feature name -> one number per class (features absent from the file weigh 0);
- ``threshold``: with no rule fired, a card shows when ``1 - P(rien)`` reaches it;
- ``rule_threshold``: a rule that is not hard shows its card when ``1 - P(rien)`` reaches it
  (both chosen on cross-validation, see ``safety.training``);
- ``features``: the feature parameters the weights were trained with (checked at load time);
- ``training``: what it was trained from (files and their SHA-256, lines, parameters).
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from safety.features import CHAR_MAX, CHAR_MIN, FAMILIES, Features, char_ngrams

__all__ = [
    "FORMAT",
    "Contribution",
    "LinearModel",
    "ModelError",
    "Prediction",
    "default_model",
    "load_model",
    "model_from_json",
]

FORMAT = "nuisances-safety-linear/1"
CLASSES = ("rien", "danger", "represailles", "detresse")


class ModelError(ValueError):
    """A weights file that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """One feature's part in a verdict: its weight for the class minus its weight for rien."""

    feature: str
    value: float


Row = tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Prediction:
    """The model's view of one message."""

    probabilities: dict[str, float]  # class -> probability, classes in file order
    risk: float  # 1 - P(rien)
    category: str  # the most probable risk class (whatever ``risk`` is)
    top: tuple[Contribution, ...]  # features that pushed most toward ``category``


_WORD_MEMO_LIMIT = 50_000
GRAMS = "grams:"  # the evidence name of a word's character n-grams, taken together


@dataclass(frozen=True, slots=True)
class LinearModel:
    classes: tuple[str, ...]
    intercept: tuple[float, ...]
    weights: dict[str, Row]  # feature name -> one weight per class
    threshold: float
    rule_threshold: float
    source: str
    # family -> key -> row: the weights split by family prefix, for lookups without names.
    _tables: dict[str, dict[str, Row]] = field(default_factory=dict, compare=False, repr=False)
    # word -> (its own row, the sum of the rows of its character n-grams): a cache.
    _words: dict[str, tuple[Row | None, Row | None]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        for name, row in self.weights.items():
            family, _, key = name.partition(":")
            self._tables.setdefault(family, {})[key] = row

    @classmethod
    def rules_only(cls) -> LinearModel:
        """A model that knows no feature and defers to the rules: every rule that fires shows
        its card, and the model never shows one alone (to measure or test the rules)."""
        return cls(CLASSES, (0.0,) * len(CLASSES), {}, 1.0, 0.0, "rules only")

    def _word(self, word: str) -> tuple[Row | None, Row | None]:
        """The word's own row and its n-grams' summed row (memoised)."""
        try:
            return self._words[word]
        except KeyError:
            pass
        get = self.weights.get
        rows = [r for n in char_ngrams(word) if (r := get(n)) is not None]
        grams = tuple(map(sum, zip(*rows, strict=True))) if rows else None
        entry = (self._tables.get("w", {}).get(word), grams)
        if len(self._words) >= _WORD_MEMO_LIMIT:
            self._words.clear()
        self._words[word] = entry
        return entry

    def _rows(self, features: Features) -> list[tuple[float, list[Row]]]:
        """(value, rows) for each family: the weight rows of the features the model knows."""
        memo = self._words
        own: list[Row] = []
        grams: list[Row] = []
        for key in features.keys["w"]:
            entry = memo.get(key) or self._word(key)
            if entry[0] is not None:
                own.append(entry[0])
            if entry[1] is not None:
                grams.append(entry[1])
        values = features.values
        found = [(values["w"], own), (values["c"], grams)]
        tables = self._tables
        for family, keys in features.keys.items():
            table = tables.get(family)
            if family != "w" and table is not None and keys:
                found.append((values[family], [r for k in keys if (r := table.get(k)) is not None]))
        return found

    def logits(self, features: Features) -> list[float]:
        """The intercept plus, family by family, the value times the sum of the rows."""
        total = list(self.intercept)
        for value, rows in self._rows(features):
            if rows:
                for k, column in enumerate(zip(*rows, strict=True)):
                    total[k] += value * sum(column)
        return total

    def contributions(self, features: Features, category: str) -> list[tuple[float, str]]:
        """(part, feature) for every known feature: its part in the log-odds of ``category``
        against ``rien``; the character n-grams of a word come as one, ``grams:<word>``."""
        k = self.classes.index(category)
        values = features.values
        w_value, c_value = values["w"], values["c"]
        parts: list[tuple[float, str]] = []
        for key in features.keys["w"]:
            own, grams = self._words.get(key) or self._word(key)
            if own is not None:
                parts.append((w_value * (own[k] - own[0]), "w:" + key))
            if grams is not None:
                parts.append((c_value * (grams[k] - grams[0]), GRAMS + key))
        for family, keys in features.keys.items():
            table = self._tables.get(family)
            if family == "w" or table is None:
                continue
            value = values[family]
            prefix = family + ":"
            parts.extend(
                (value * (r[k] - r[0]), prefix + key)
                for key in keys
                if (r := table.get(key)) is not None
            )
        return parts

    def predict(self, features: Features, top: int = 5) -> Prediction:
        logits = self.logits(features)
        peak = max(logits)
        exps = [math.exp(v - peak) for v in logits]
        norm = sum(exps)
        probabilities = {c: e / norm for c, e in zip(self.classes, exps, strict=True)}
        risk_classes = self.classes[1:]
        category = max(risk_classes, key=lambda c: (probabilities[c], -risk_classes.index(c)))
        return Prediction(
            probabilities=probabilities,
            risk=1.0 - probabilities[self.classes[0]],
            category=category,
            top=self.explain(features, category, top),
        )

    def explain(self, features: Features, category: str, top: int = 5) -> tuple[Contribution, ...]:
        """The ``top`` features that pushed most toward ``category`` rather than ``rien``."""
        if top <= 0:
            return ()
        best = heapq.nsmallest(
            top,
            ((-part, name) for part, name in self.contributions(features, category) if part > 0),
        )
        return tuple(Contribution(name, -negated) for negated, name in best)


def _parse(data: Any, source: str) -> LinearModel:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ModelError(f"{source}: not a {FORMAT} weights file")
    classes = tuple(data.get("classes", ()))
    if classes != CLASSES:
        raise ModelError(f"{source}: classes must be {list(CLASSES)}, not {list(classes)}")
    params = data.get("features", {})
    wanted = {"families": dict(FAMILIES), "char_min": CHAR_MIN, "char_max": CHAR_MAX}
    if params != wanted:
        raise ModelError(f"{source}: trained with features {params}, this code makes {wanted}")
    width = len(classes)
    intercept = tuple(float(v) for v in data["intercept"])
    weights = {name: tuple(float(v) for v in row) for name, row in data["weights"].items()}
    if len(intercept) != width or any(len(row) != width for row in weights.values()):
        raise ModelError(f"{source}: every weight row needs {width} numbers")
    threshold = float(data["threshold"])
    rule_threshold = float(data["rule_threshold"])
    for name, value in (("threshold", threshold), ("rule_threshold", rule_threshold)):
        if not 0.0 <= value <= 1.0:
            raise ModelError(f"{source}: {name} {value} outside [0, 1]")
    return LinearModel(classes, intercept, weights, threshold, rule_threshold, source)


def load_model(path: Path) -> LinearModel:
    """Read and check a weights file; ``ModelError`` when it cannot be used."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: {exc}") from exc
    return _parse(data, str(path))


def model_from_json(data: Any, source: str = "<memory>") -> LinearModel:
    return _parse(data, source)


_DEFAULT: LinearModel | None = None


def default_model() -> LinearModel:
    """The model shipped in ``safety/weights/model.json``, loaded once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        text = (resources.files("safety") / "weights" / "model.json").read_text(encoding="utf-8")
        _DEFAULT = _parse(json.loads(text), "safety/weights/model.json")
    return _DEFAULT
