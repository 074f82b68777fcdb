"""The messages sent to the model for one turn.

In order: the system prompt (``prompts/system.md``); the contacts the model may name, by id,
name and purpose, never with a number; the safety context when the detector fired (the steps
to give first, ``prompts/safety/``); the last turns of the conversation within a character
budget; and the person's message inside ``<message>…</message>`` with ``&``, ``<`` and ``>``
escaped, so that it reads as text to understand, never as instructions or as the end of the
frame. The hash of the prompt files (``llm.texts.prompt_hash``) is recorded with each turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llm.fallback import safety_steps
from llm.texts import prompt_text
from llm.types import Message

__all__ = ["PromptContact", "build_messages", "frame_user_text"]

_CATEGORY_LABEL = {
    "danger": "danger physique immédiat",
    "detresse": "détresse (idées suicidaires ou auto-agression)",
    "represailles": "menace ou représailles dans un conflit de voisinage",
}


@dataclass(frozen=True, slots=True)
class PromptContact:
    """What the model may know of a contact: never its number."""

    id: str
    name: str
    description: str


def frame_user_text(text: str) -> str:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<message>\n{escaped}\n</message>"


def _contacts_section(contacts: Sequence[PromptContact]) -> str:
    lines = ["Identifiants que tu peux écrire entre doubles crochets (jamais de numéro) :"]
    lines += [f"- [[{c.id}]] {c.name} : {c.description}" for c in contacts]
    return "\n".join(lines)


def _safety_section(category: str, topics: Sequence[str]) -> str | None:
    if category == "rien":
        return None
    intro = prompt_text("safety/_intro.md").replace(
        "{category}", _CATEGORY_LABEL.get(category, category)
    )
    steps = safety_steps(topics)
    return "\n".join([intro, *(f"- {step}" for step in steps)])


def build_messages(
    text: str,
    *,
    category: str = "rien",
    topics: Sequence[str] = (),
    contacts: Sequence[PromptContact] = (),
    history: Sequence[Message] = (),
    history_budget_chars: int = 4_000,
) -> list[Message]:
    """The full message list for one turn (``history`` oldest first, without system)."""
    system_parts = [prompt_text("system.md"), _contacts_section(contacts)]
    safety = _safety_section(category, topics)
    if safety is not None:
        system_parts.append(safety)
    kept: list[Message] = []
    used = 0
    for past in reversed(history):
        content = frame_user_text(past.content) if past.role == "user" else past.content
        if used + len(content) > history_budget_chars:
            break
        kept.append(Message(past.role, content))
        used += len(content)
    kept.reverse()
    while kept and kept[0].role != "user":  # a conversation window starts with the person
        kept.pop(0)
    return [
        Message("system", "\n\n".join(system_parts)),
        *kept,
        Message("user", frame_user_text(text)),
    ]
