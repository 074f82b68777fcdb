"""Budgets enforced by us around any provider, never trusted to a client's defaults.

``guarded_stream`` wraps a provider's stream and enforces, with the event loop's clock:

- **first token** (covers a cold load): the time to the first chunk;
- **idle**: the time between two chunks;
- **total**: the whole generation;
- **num_predict**: a cap on chunks (about one token each), in case the server ignores its own;
- **loop guard**: the same non-blank chunk ``loop_repeats`` times in a row.

Before the first token, and only then, connection errors and 503 are retried with backoff,
inside the first-token budget. On timeout, error, loop, or when the caller stops early (a
client disconnect cancels the task; ``aclose()`` on this generator), the provider's stream is
closed, which closes the HTTP response so the model server stops generating.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

import anyio

from llm.config import Budgets
from llm.errors import Busy, ConnectionRefused, DegenerateOutput, GenerationTimeout, ModelError
from llm.providers.base import Provider
from llm.types import ChatOptions, Chunk, Message

__all__ = ["guarded_stream"]

_RETRYABLE = (ConnectionRefused,)


def _retryable(error: ModelError) -> bool:
    return isinstance(error, _RETRYABLE) or (isinstance(error, Busy) and error.http_status == 503)


async def _next(stream: AsyncIterator[Chunk], within_s: float) -> Chunk | None:
    """The next chunk, None at the end; TimeoutError when ``within_s`` passes first."""
    try:
        async with asyncio.timeout(within_s):
            return await anext(stream)
    except StopAsyncIteration:
        return None


async def _close(stream: AsyncIterator[Chunk]) -> None:
    """Close the provider's stream, shielded: inside a cancelled scope (a client that hung up)
    the close must still run to its end, or the connection to the model server stays open."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await aclose()


async def guarded_stream(
    provider: Provider,
    messages: Sequence[Message],
    options: ChatOptions,
    budgets: Budgets,
) -> AsyncGenerator[Chunk, None]:
    """The provider's chunks under our budgets; raises ``llm.errors.ModelError`` only."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    total_deadline = started + budgets.total_s
    first_deadline = started + budgets.first_token_s
    name, model = provider.config.name, provider.config.model
    capped = ChatOptions(
        temperature=options.temperature,
        seed=options.seed,
        num_predict=min(options.num_predict, budgets.num_predict),
        num_ctx=options.num_ctx,
        keep_alive=options.keep_alive,
        json_schema=options.json_schema,
    )
    attempt = 0
    while True:
        stream = provider.stream(messages, capped)
        try:
            first = await _next(stream, max(0.0, min(first_deadline, total_deadline) - loop.time()))
        except TimeoutError:
            await _close(stream)
            raise GenerationTimeout(
                "first_token",
                budgets.first_token_s,
                provider=name,
                model=model,
                stage="first_token",
            ) from None
        except ModelError as error:
            await _close(stream)
            backoff = budgets.retry_backoff_s * (2**attempt)
            if (
                attempt < budgets.retries
                and _retryable(error)
                and loop.time() + backoff < first_deadline
            ):
                attempt += 1
                await asyncio.sleep(backoff)
                continue
            raise
        except BaseException:
            await _close(stream)
            raise
        break

    try:
        chunk = first
        count, last_text, repeats = 0, None, 0
        while chunk is not None:
            count += 1
            text = chunk.text
            if text.strip() and text == last_text:
                repeats += 1
                if repeats >= budgets.loop_repeats:
                    raise DegenerateOutput(
                        f"the same chunk {repeats + 1} times in a row",
                        provider=name,
                        model=model,
                        stage="stream",
                    )
            else:
                repeats = 0
            last_text = text
            if count > capped.num_predict + 8 and not chunk.done:
                raise DegenerateOutput(
                    f"more than {capped.num_predict} chunks: the server ignores num_predict",
                    provider=name,
                    model=model,
                    stage="stream",
                )
            yield chunk
            if chunk.done:
                return
            now = loop.time()
            if now >= total_deadline:
                raise GenerationTimeout(
                    "total", budgets.total_s, provider=name, model=model, stage="stream"
                )
            idle = min(budgets.idle_s, total_deadline - now)
            try:
                chunk = await _next(stream, idle)
            except TimeoutError:
                if idle >= budgets.idle_s:
                    raise GenerationTimeout(
                        "idle", budgets.idle_s, provider=name, model=model, stage="stream"
                    ) from None
                raise GenerationTimeout(
                    "total", budgets.total_s, provider=name, model=model, stage="stream"
                ) from None
        # The provider contract: a stream ends with a done chunk or raises IncompleteStream.
    finally:
        await _close(stream)
