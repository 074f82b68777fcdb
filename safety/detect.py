"""``detect(text)``: the emergency detector that runs before anything else in a turn.

Two deterministic layers read the normalised message: the cue rules (``safety/rules/``) and the
learned linear layer (``safety/weights/model.json``), which also reads the rules' cue classes.
The verdict (``decide``):

1. a **hard** rule that fires shows the card on its own (explicit suicide words, a weapon out,
   a fire in progress...);
2. another rule that fires shows the card when the model's risk (``1 - P(rien)``) reaches the
   weights file's ``rule_threshold``: a rule is strong evidence, and the model only vetoes it
   when it is confident the message is harmless (a film, a joke, an event long over);
3. with no rule, the model shows the card when its risk reaches ``threshold``; the category is
   its most probable risk class and the rule id ``model.<category>``, with that category's
   general card.

The category comes from the rules when they fired, otherwise from the model. Every verdict is
explained: the rules and their spans, the model's probabilities and the features that pushed
most toward the category, with their spans in the original text.

Tuned for recall: a missed emergency can cost a life, a false alert one card on screen. So
every failure mode fails toward the card: when the time budget runs out the verdict is
``danger`` with rule ``safety.timeout``; any unexpected error gives ``danger`` with rule
``safety.error``. ``detect`` never raises.

The budget bounds the detector's own work on adversarial input; it must not run out for
reasons that are not the message's. So it is counted in the calling thread's CPU time, not
wall time (waiting for the GIL or the CPU under load does not count), and the automatic
garbage collector is paused while a detection runs: a full collection in a process with a
large heap takes tens of milliseconds, and whichever allocation triggers it pays. A
collection that falls due runs as soon as the detection ends.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast

from safety.engine import Analysis, DeadlineExceededError, analyse
from safety.features import Features, extract, locate, tokens
from safety.model import LinearModel, Prediction, default_model
from safety.normalize import Normalized, normalize
from safety.ruleset import RuleSet, default_ruleset

__all__ = [
    "CATEGORY_PRIORITY",
    "DEFAULT_BUDGET_S",
    "Detection",
    "Evidence",
    "RuleMatch",
    "decide",
    "detect",
]

CategoryName = Literal["danger", "represailles", "detresse", "rien"]
# The primary category is the first of these that fired.
CATEGORY_PRIORITY: tuple[CategoryName, ...] = ("danger", "detresse", "represailles")
DEFAULT_BUDGET_S = 0.05
TIMEOUT_RULE = "safety.timeout"
ERROR_RULE = "safety.error"
MODEL_RULE = "model."
TOP_FEATURES = 5


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """One rule that fired and the spans of the original text that made it fire."""

    rule: str
    category: CategoryName
    topics: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Evidence:
    """One feature of the learned layer that pushed toward the category, where it is."""

    feature: str
    weight: float  # its part in the log-odds of the category against rien
    spans: tuple[tuple[int, int], ...]  # offsets in the original text


@dataclass(frozen=True, slots=True)
class Detection:
    """The verdict on one message. Same input, same output.

    ``evidence`` (the learned layer's top features toward the category, with their spans) is
    worked out the first time it is read: the service shows the card without it, the command
    line and the evaluation read it.
    """

    category: CategoryName
    categories: tuple[CategoryName, ...]
    topics: tuple[str, ...]
    rules: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    normalized: str
    matches: tuple[RuleMatch, ...] = ()
    # The learned layer: P(class) for rien, danger, represailles, detresse; 1 - P(rien).
    probabilities: tuple[tuple[str, float], ...] = ()
    risk: float = 0.0
    _explainer: Callable[[], tuple[Evidence, ...]] | None = field(
        default=None, compare=False, repr=False
    )
    _explained: list[tuple[Evidence, ...]] = field(default_factory=list, compare=False, repr=False)

    @property
    def is_risk(self) -> bool:
        """True when the client must show the card."""
        return self.category != "rien"

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """The features that pushed most toward the category (toward the most probable risk
        category for ``rien``), each with its spans in the original text."""
        if not self._explained:
            self._explained.append(self._explainer() if self._explainer is not None else ())
        return self._explained[0]


def _fail_toward_card(rule: str, normalized: str) -> Detection:
    return Detection(
        category="danger",
        categories=("danger",),
        topics=(),
        rules=(rule,),
        spans=(),
        normalized=normalized,
        matches=(RuleMatch(rule, "danger", (), ()),),
        risk=1.0,
    )


def decide(
    analysis: Analysis, prediction: Prediction, model: LinearModel
) -> tuple[list[int], CategoryName | None]:
    """Which firings show the card (their indexes), and the model's category when it decides.

    See the module's docstring: hard rules always, other rules when the risk reaches
    ``model.rule_threshold``, the model alone when it reaches ``model.threshold``.
    """
    agree = prediction.risk >= model.rule_threshold
    shown = [i for i, f in enumerate(analysis.firings) if f.rule.hard or agree]
    if shown:
        return shown, None
    if prediction.risk >= model.threshold:
        return [], cast(CategoryName, prediction.category)
    return [], None


def _explain(
    normalized: Normalized,
    analysis: Analysis,
    features: Features,
    model: LinearModel,
    category: str,
) -> tuple[Evidence, ...]:
    top = model.explain(features, category, TOP_FEATURES)
    found = tokens(normalized.text)
    return tuple(
        Evidence(
            feature=c.feature,
            weight=round(c.value, 4),
            spans=tuple(
                sorted(
                    {normalized.to_original(s, e) for s, e in locate(c.feature, found, analysis)}
                )
            ),
        )
        for c in top
    )


def detect(
    text: str,
    *,
    ruleset: RuleSet | None = None,
    model: LinearModel | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
) -> Detection:
    """Classify ``text``; never raises, fails toward ``danger`` when it cannot finish."""
    normalized_text = ""
    # Only the thread that saw the collector on turns it back on: with detections running
    # in several threads, the collector ends as it was found.
    collector_was_on = gc.isenabled()
    if collector_was_on:
        gc.disable()
    try:
        # Loading the shipped rules and weights (once per process) is not part of the budget.
        rules = ruleset if ruleset is not None else default_ruleset()
        weights = model if model is not None else default_model()
        deadline = time.thread_time() + budget_s
        normalized = normalize(text)
        normalized_text = normalized.text
        analysis = analyse(rules, normalized_text, deadline)
        features = extract(normalized_text, analysis)
        prediction = weights.predict(features, top=0)
        shown, model_category = decide(analysis, prediction, weights)
        result = _verdict(
            normalized, analysis, features, weights, prediction, shown, model_category
        )
        if time.thread_time() > deadline:
            raise DeadlineExceededError
    except DeadlineExceededError:
        return _fail_toward_card(TIMEOUT_RULE, normalized_text)
    except TimeoutError:  # the regex module's own timeout
        return _fail_toward_card(TIMEOUT_RULE, normalized_text)
    except Exception:
        return _fail_toward_card(ERROR_RULE, normalized_text)
    finally:
        if collector_was_on:
            gc.enable()
    return result


def _verdict(
    normalized: Normalized,
    analysis: Analysis,
    features: Features,
    model: LinearModel,
    prediction: Prediction,
    shown: list[int],
    model_category: CategoryName | None,
) -> Detection:
    matches = tuple(
        RuleMatch(
            rule=f.rule.id,
            category=f.rule.category,
            topics=f.rule.topics,
            spans=tuple(sorted({normalized.to_original(h.start, h.end) for h in f.hits})),
        )
        for f in (analysis.firings[i] for i in shown)
    )
    fired = {m.category for m in matches}
    if model_category is not None:
        fired.add(model_category)
        matches = (RuleMatch(MODEL_RULE + model_category, model_category, (), ()),)
    # Rules of several categories fired ("he said he would set my car on fire": a fire word
    # and a threat): the primary one is the one the model finds most probable among them.
    probabilities = prediction.probabilities
    categories = tuple(
        sorted(
            (c for c in CATEGORY_PRIORITY if c in fired),
            key=lambda c: (-probabilities.get(c, 0.0), CATEGORY_PRIORITY.index(c)),
        )
    )
    category: CategoryName = categories[0] if categories else "rien"
    explained = prediction.category if category == "rien" else category

    def explainer() -> tuple[Evidence, ...]:
        return _explain(normalized, analysis, features, model, explained)

    spans = {s for m in matches for s in m.spans}
    ready: list[tuple[Evidence, ...]] = []
    if model_category is not None:  # the model decided: its evidence is what to highlight
        ready.append(explainer())
        spans = {s for e in ready[0] for s in e.spans}
    return Detection(
        category=category,
        categories=categories,
        topics=tuple(sorted({t for m in matches for t in m.topics})),
        rules=tuple(m.rule for m in matches),
        spans=tuple(sorted(spans)),
        normalized=normalized.text,
        matches=matches,
        probabilities=tuple((c, round(p, 4)) for c, p in prediction.probabilities.items()),
        risk=round(prediction.risk, 4),
        _explainer=explainer,
        _explained=ready,
    )
