"""``detect(text)``: the emergency detector that runs before anything else in a turn.

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
from dataclasses import dataclass
from typing import Literal

from safety.engine import DeadlineExceededError, evaluate
from safety.normalize import normalize
from safety.ruleset import RuleSet, default_ruleset

__all__ = ["CATEGORY_PRIORITY", "DEFAULT_BUDGET_S", "Detection", "RuleMatch", "detect"]

CategoryName = Literal["danger", "represailles", "detresse", "rien"]
# The primary category is the first of these that fired.
CATEGORY_PRIORITY: tuple[CategoryName, ...] = ("danger", "detresse", "represailles")
DEFAULT_BUDGET_S = 0.05
TIMEOUT_RULE = "safety.timeout"
ERROR_RULE = "safety.error"


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """One rule that fired and the spans of the original text that made it fire."""

    rule: str
    category: CategoryName
    topics: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Detection:
    """The verdict on one message. Same input, same output."""

    category: CategoryName
    categories: tuple[CategoryName, ...]
    topics: tuple[str, ...]
    rules: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    normalized: str
    matches: tuple[RuleMatch, ...] = ()

    @property
    def is_risk(self) -> bool:
        """True when the client must show the card."""
        return self.category != "rien"


def _fail_toward_card(rule: str, normalized: str) -> Detection:
    return Detection(
        category="danger",
        categories=("danger",),
        topics=(),
        rules=(rule,),
        spans=(),
        normalized=normalized,
        matches=(RuleMatch(rule, "danger", (), ()),),
    )


def detect(
    text: str, *, ruleset: RuleSet | None = None, budget_s: float = DEFAULT_BUDGET_S
) -> Detection:
    """Classify ``text``; never raises, fails toward ``danger`` when it cannot finish."""
    normalized_text = ""
    # Only the thread that saw the collector on turns it back on: with detections running
    # in several threads, the collector ends as it was found.
    collector_was_on = gc.isenabled()
    if collector_was_on:
        gc.disable()
    try:
        # Loading the shipped rules (once per process) is not part of a message's budget.
        rules = ruleset if ruleset is not None else default_ruleset()
        deadline = time.thread_time() + budget_s
        normalized = normalize(text)
        normalized_text = normalized.text
        firings = evaluate(rules, normalized_text, deadline)
    except DeadlineExceededError:
        return _fail_toward_card(TIMEOUT_RULE, normalized_text)
    except TimeoutError:  # the regex module's own timeout
        return _fail_toward_card(TIMEOUT_RULE, normalized_text)
    except Exception:
        return _fail_toward_card(ERROR_RULE, normalized_text)
    finally:
        if collector_was_on:
            gc.enable()

    matches = tuple(
        RuleMatch(
            rule=f.rule.id,
            category=f.rule.category,
            topics=f.rule.topics,
            spans=tuple(sorted({normalized.to_original(h.start, h.end) for h in f.hits})),
        )
        for f in firings
    )
    fired = {m.category for m in matches}
    categories = tuple(c for c in CATEGORY_PRIORITY if c in fired)
    return Detection(
        category=categories[0] if categories else "rien",
        categories=categories,
        topics=tuple(sorted({t for m in matches for t in m.topics})),
        rules=tuple(m.rule for m in matches),
        spans=tuple(sorted({s for m in matches for s in m.spans})),
        normalized=normalized_text,
        matches=matches,
    )
