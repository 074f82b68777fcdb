"""Request and response shapes of the chat API (what OpenAPI at /docs shows, with examples)."""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from directory.contact import Contact

__all__ = [
    "CardContact",
    "ChatRequest",
    "ChatResponse",
    "ErrorBody",
    "SafetyPayload",
    "TimingsPayload",
]

_ID = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
_REGION = r"^(0[1-9]|[1-8][0-9]|9[0-5]|2A|2B|97[1-6])$"
# Control characters other than tab and line breaks are refused; so is a message made only of
# invisible characters.
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}


def visible_length(text: str) -> int:
    return sum(
        1
        for char in text
        if not char.isspace() and unicodedata.category(char) not in ("Cf", "Cc", "Mn", "Zs")
    )


class ChatRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "conversation_id": "c-2024-11-02-a",
                    "message": "Ça sent le gaz dans l'escalier depuis ce matin, je fais quoi ?",
                    "client_message_id": "m-0001",
                    "region": "75",
                }
            ]
        },
    )

    conversation_id: str = Field(pattern=_ID, description="Chosen by the client.")
    message: str = Field(description="What the person typed (checked against the length limit).")
    client_message_id: str = Field(pattern=_ID, description="Idempotency key: retry with it.")
    region: str | None = Field(default=None, pattern=_REGION, description="Département code.")

    @field_validator("message")
    @classmethod
    def _readable(cls, message: str) -> str:
        for char in message:
            if unicodedata.category(char) == "Cc" and char not in _ALLOWED_CONTROLS:
                raise ValueError("control_characters")
            if unicodedata.category(char) == "Cs":
                raise ValueError("invalid_text")
        if visible_length(message) == 0:
            raise ValueError("empty_message")
        return message


class CardContact(BaseModel):
    id: str
    name: str
    number: str
    dial: str
    kind: str
    description: str
    hours: str

    @classmethod
    def of(cls, contact: Contact) -> CardContact:
        return cls(
            id=contact.id,
            name=contact.name,
            number=contact.number,
            dial=contact.dial,
            kind=contact.kind,
            description=contact.description,
            hours=contact.hours,
        )


class SafetyPayload(BaseModel):
    category: Literal["danger", "represailles", "detresse", "rien"]
    categories: list[str]
    topics: list[str]
    rules: list[str]
    card: list[CardContact]
    # The deterministic first steps for the card's topics, numbers from the directory: shown
    # with the card, whatever the model answers next (empty for "rien").
    steps: list[str] = Field(default_factory=list)


class TimingsPayload(BaseModel):
    detection_ms: float
    queue_wait_ms: float | None = None
    first_token_ms: float | None = None
    total_ms: float
    tokens: int | None = None
    tokens_per_second: float | None = None


class ChatResponse(BaseModel):
    """The whole answer: the JSON reply, and the ``done`` event of a stream, are this."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "conversation_id": "c-2024-11-02-a",
                    "client_message_id": "m-0001",
                    "turn_id": 42,
                    "safety": {
                        "category": "danger",
                        "categories": ["danger"],
                        "topics": ["gaz"],
                        "rules": ["gaz.presence"],
                        "card": [
                            {
                                "id": "pompiers",
                                "name": "Sapeurs-pompiers",
                                "number": "18",
                                "dial": "18",
                                "kind": "urgence",
                                "description": "Incendie, fuite de gaz, effondrement.",
                                "hours": "24 h/24, 7 j/7",
                            }
                        ],
                    },
                    "text": "Ne touchez à aucun interrupteur… Si quelqu'un est en danger "
                    "maintenant, appelez le 112.",
                    "source": "fallback",
                    "status": "unavailable",
                    "contacts": [{"id": "pompiers", "name": "Sapeurs-pompiers", "number": "18"}],
                    "model": "qwen2.5:1.5b-instruct",
                    "prompt_hash": "3f2a9c1b5d7e8f10",
                    "timings": {"detection_ms": 0.06, "total_ms": 12.4},
                    "partial_discarded": False,
                    "replayed": False,
                }
            ]
        }
    )

    conversation_id: str
    client_message_id: str
    turn_id: int | None
    safety: SafetyPayload
    text: str
    source: Literal["llm", "cache", "fallback"]
    status: Literal[
        "ok", "timeout", "busy", "quota", "unavailable", "invalid_output", "blocked_policy",
        "disabled",
    ]  # fmt: skip
    contacts: list[dict[str, str]]
    model: str | None
    prompt_hash: str
    timings: TimingsPayload
    partial_discarded: bool = Field(
        default=False,
        description="True when deltas were streamed before a failure: show `text` instead.",
    )
    replayed: bool = Field(default=False, description="A retry answered from storage.")


class ErrorBody(BaseModel):
    """Every 4xx: a code, the message in French (for people) and English (for developers)."""

    code: str
    message_fr: str
    message_en: str
    field: str | None = None
    details: list[dict[str, Any]] | None = None
    safety: SafetyPayload | None = Field(
        default=None,
        description="On a chat request refused after detection (idempotency_conflict, "
        "too_many_turns): the card of the message actually received, to show as always.",
    )
    retry_after_s: int | None = Field(
        default=None, description="When a refused request may be sent again (as Retry-After)."
    )
