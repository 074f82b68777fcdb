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
from llm.payload import Payload, PayloadElement
from llm.texts import prompt_text
from llm.types import Message

__all__ = ["PromptContact", "build_messages", "build_payload", "frame_user_text"]

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
    steps = safety_steps(topics, category)
    return "\n".join([intro, *(f"- {step}" for step in steps)])


def build_payload(
    text: str,
    *,
    category: str = "rien",
    topics: Sequence[str] = (),
    contacts: Sequence[PromptContact] = (),
    history: Sequence[Message] = (),
    history_budget_chars: int = 4_000,
) -> Payload:
    """Every element of one turn's request, each with its data class (``history`` oldest
    first, without system). User text, past answers included, is ``user_text``: it may hold
    what the person wrote about others."""
    elements = [
        PayloadElement("system_prompt", "system", "prompt", prompt_text("system.md")),
        PayloadElement("contacts", "system", "contacts", _contacts_section(contacts)),
    ]
    safety = _safety_section(category, topics)
    if safety is not None:
        elements.append(PayloadElement("safety_context", "system", "prompt", safety))
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
    elements += [
        PayloadElement(f"history.{index}", past.role, "user_text", past.content)
        for index, past in enumerate(kept)
    ]
    elements.append(PayloadElement("message", "user", "user_text", frame_user_text(text)))
    return Payload(tuple(elements))


def build_messages(text: str, **context: object) -> list[Message]:
    """The chat messages of ``build_payload`` (same arguments)."""
    return build_payload(text, **context).messages()  # type: ignore[arg-type]
