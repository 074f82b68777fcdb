"""What leaves the process on a model call, element by element, each with its data class.

The flow policy (``llm.policy``) decides on elements, not on strings: every piece of an
outgoing request is declared as one of ``DATA_CLASSES``; a piece without a class blocks the
send (closed by default). ``Payload.messages()`` assembles the chat messages the provider gets.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from llm.types import Message, Role

__all__ = ["DATA_CLASSES", "DataClass", "Payload", "PayloadElement"]

DataClass = Literal["pseudonym", "user_text", "contacts", "prompt", "metadata"]
DATA_CLASSES: tuple[DataClass, ...] = ("pseudonym", "user_text", "contacts", "prompt", "metadata")


@dataclass(frozen=True, slots=True)
class PayloadElement:
    name: str  # e.g. "system_prompt", "contacts", "safety_context", "history.3", "message"
    role: Role
    data_class: DataClass | None  # None: unclassified, which blocks the send
    content: str


@dataclass(frozen=True, slots=True)
class Payload:
    elements: tuple[PayloadElement, ...]

    def messages(self) -> list[Message]:
        """System elements joined into one system message, then the others in order."""
        system = [e.content for e in self.elements if e.role == "system"]
        rest = [Message(e.role, e.content) for e in self.elements if e.role != "system"]
        return [Message("system", "\n\n".join(system)), *rest] if system else rest

    def serialized(self) -> str:
        """The request body's text, as the leak scan reads it."""
        return json.dumps([m.as_dict() for m in self.messages()], ensure_ascii=False)

    def with_contents(self, contents: Sequence[str]) -> Payload:
        return Payload(
            tuple(replace(e, content=c) for e, c in zip(self.elements, contents, strict=True))
        )
