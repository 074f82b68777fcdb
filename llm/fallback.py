"""Deterministic French answers for when the model cannot answer, one per status.

Each is useful on its own: when the detector fired it starts with the safety steps of the
topics that fired (``prompts/safety/``) and points to the card; then it says why there is no
assistant answer and what the person can still do in the journal; and it always ends with
``EMERGENCY_LINE``. ``[[id]]`` tags in the texts are rendered with the directory's numbers by
the caller, like the model's own words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from llm.texts import prompt_text

__all__ = [
    "CATEGORY_STEPS",
    "EMERGENCY_LINE",
    "FALLBACK_STATUSES",
    "TOPIC_ORDER",
    "fallback_text",
    "safety_steps",
]

EMERGENCY_LINE = "Si quelqu'un est en danger maintenant, appelez le 112."
FallbackStatus = Literal[
    "timeout", "busy", "quota", "unavailable", "invalid_output", "blocked_policy", "disabled"
]
FALLBACK_STATUSES: tuple[FallbackStatus, ...] = (
    "timeout", "busy", "quota", "unavailable", "invalid_output", "blocked_policy", "disabled",
)  # fmt: skip
# Most urgent first; a fallback gives the steps of at most two topics, to stay short.
TOPIC_ORDER = (
    "gaz", "feu", "co", "electricite", "structure", "arme", "violence", "enfant", "blessure",
    "suicide", "automutilation", "menace",
)  # fmt: skip
MAX_TOPICS = 2
# When a card has no topic with steps of its own (the learned layer decided alone, or the
# detector failed toward the card), the general steps of its category.
CATEGORY_STEPS = {"danger": "danger", "detresse": "suicide", "represailles": "menace"}


def safety_steps(topics: Sequence[str], category: str = "rien") -> list[str]:
    """The safety texts for the topics that fired, most urgent first; for a card without a
    known topic, its category's general steps."""
    chosen = [t for t in TOPIC_ORDER if t in topics][:MAX_TOPICS]
    if not chosen and category in CATEGORY_STEPS:
        chosen = [CATEGORY_STEPS[category]]
    return [prompt_text(f"safety/{topic}.md") for topic in chosen]


def fallback_text(
    status: FallbackStatus, *, category: str = "rien", topics: Sequence[str] = ()
) -> str:
    """The fallback for ``status``; with the safety steps and the card when a card was shown."""
    parts: list[str] = []
    if category != "rien":
        parts.extend(safety_steps(topics, category))
        parts.append(prompt_text("fallback/_card.md"))
    parts.append(prompt_text(f"fallback/{status}.md"))
    parts.append(prompt_text("fallback/_journal.md"))
    parts.append(EMERGENCY_LINE)
    return "\n\n".join(parts)
