"""The one small protocol every provider implements, and what they share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

import httpx

from llm.config import Budgets, ProviderConfig
from llm.errors import (
    Busy,
    ConnectionRefused,
    GenerationTimeout,
    HostNotFound,
    ModelError,
    ModelNotFound,
    ServerError,
    Stage,
    Unavailable,
)
from llm.types import ChatOptions, Chunk, Health, Message

__all__ = ["Provider", "http_timeout", "status_error", "transport_error"]


@runtime_checkable
class Provider(Protocol):
    """A model server. ``stream`` yields text chunks, the last with ``done=True``.

    ``stream`` must raise only ``llm.errors.ModelError`` subclasses, and must release the
    upstream connection when it is closed early (``aclose()``), so that the server stops
    generating. Budgets are enforced around it by ``llm.budget``, not trusted to it.
    """

    config: ProviderConfig

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> AsyncIterator[Chunk]: ...

    async def health(self) -> Health: ...

    async def warm_up(self) -> None: ...

    async def aclose(self) -> None: ...


def http_timeout(budgets: Budgets) -> httpx.Timeout:
    """Client-side timeouts as a backstop; ``llm.budget`` enforces the real ones."""
    return httpx.Timeout(
        connect=budgets.connect_s,
        read=budgets.first_token_s + budgets.idle_s,
        write=budgets.connect_s * 5,
        pool=budgets.connect_s,
    )


def transport_error(exc: httpx.TransportError, config: ProviderConfig, stage: Stage) -> ModelError:
    """An httpx transport failure as one of ours (the caller raises it ``from exc``)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return GenerationTimeout("connect", None, provider=config.name, model=config.model)
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if any(s in text for s in ("name or service not known", "nodename", "name resolution")):
            return HostNotFound(
                f"host not found: {exc}", provider=config.name, model=config.model, stage=stage
            )
        return ConnectionRefused(
            f"cannot connect: {exc}", provider=config.name, model=config.model, stage=stage
        )
    if isinstance(exc, httpx.TimeoutException):
        return GenerationTimeout("idle", None, provider=config.name, model=config.model)
    return Unavailable(
        f"{type(exc).__name__}: {exc}", provider=config.name, model=config.model, stage=stage
    )


def status_error(status: int, body: str, config: ProviderConfig, stage: Stage) -> ModelError:
    """An HTTP error status (with its body, already read) as one of ours."""
    kind: type[ModelError]
    if status == 404 and "not found" in body.lower():
        kind, default = ModelNotFound, "model not found"
    elif status in (429, 503):
        kind, default = Busy, "server busy"
    elif status >= 500:
        kind, default = ServerError, "server error"
    else:
        kind, default = Unavailable, f"HTTP {status}"
    return kind(
        body.strip()[:300] or default,
        http_status=status,
        provider=config.name,
        model=config.model,
        stage=stage,
    )
