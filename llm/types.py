"""The shapes the model layer passes around: messages, options, chunks, health."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ChatOptions", "Chunk", "GenerationStats", "Health", "Message", "Role"]

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Sampling and size options, passed to every provider in its own spelling."""

    temperature: float = 0.3
    seed: int | None = None
    num_predict: int = 400
    num_ctx: int | None = 4096
    keep_alive: str | None = None  # Ollama only; None: the server's OLLAMA_KEEP_ALIVE applies
    json_schema: dict[str, object] | None = None  # constrained output (judge), when supported


@dataclass(frozen=True, slots=True)
class GenerationStats:
    """What the model server says of a generation (nanoseconds as Ollama gives them)."""

    eval_count: int | None = None
    eval_duration_ns: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration_ns: int | None = None
    load_duration_ns: int | None = None
    total_duration_ns: int | None = None

    @property
    def tokens_per_second(self) -> float | None:
        if self.eval_count and self.eval_duration_ns:
            return self.eval_count / (self.eval_duration_ns / 1e9)
        return None


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of the model's text; the last one has ``done`` set and may carry stats."""

    text: str
    done: bool = False
    done_reason: str | None = None
    stats: GenerationStats | None = None


@dataclass(frozen=True, slots=True)
class Health:
    """What ``nuisances doctor`` and ``/readyz`` report of a provider."""

    provider: str
    model: str
    reachable: bool
    model_present: bool
    model_loaded: bool | None  # None: the server cannot tell
    version: str | None = None
    detail: str = ""
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.reachable and self.model_present
