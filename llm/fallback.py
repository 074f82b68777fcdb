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

__all__ = ["EMERGENCY_LINE", "FALLBACK_STATUSES", "TOPIC_ORDER", "fallback_text"]

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


def safety_steps(topics: Sequence[str]) -> list[str]:
    """The safety texts for the topics that fired, most urgent first."""
    chosen = [t for t in TOPIC_ORDER if t in topics][:MAX_TOPICS]
    return [prompt_text(f"safety/{topic}.md") for topic in chosen]


def fallback_text(
    status: FallbackStatus, *, category: str = "rien", topics: Sequence[str] = ()
) -> str:
    """The fallback for ``status``; with the safety steps and the card when a card was shown."""
    parts: list[str] = []
    if category != "rien":
        parts.extend(safety_steps(topics))
        parts.append(prompt_text("fallback/_card.md"))
    parts.append(prompt_text(f"fallback/{status}.md"))
    parts.append(prompt_text("fallback/_journal.md"))
    parts.append(EMERGENCY_LINE)
    return "\n\n".join(parts)
