"""No model at all: every turn answers with the fallback, status ``disabled``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from llm.config import ProviderConfig
from llm.types import ChatOptions, Chunk, Health, Message

__all__ = ["NoProvider"]


class NoProvider:
    """Configured on purpose (``type: none``): the turn never reaches ``stream``."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config

    async def stream(
        self, messages: Sequence[Message], options: ChatOptions
    ) -> AsyncIterator[Chunk]:
        raise RuntimeError("the 'none' provider is never asked to generate")
        yield  # pragma: no cover - makes this an async generator

    async def health(self) -> Health:
        return Health(
            self.config.name, "", False, False, None, None, "no model configured",
            {"provider": "none: every turn is a fallback (status disabled)"},
        )  # fmt: skip

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
