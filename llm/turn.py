"""``chat_turn``: one turn of steps 4 to 8 of DESIGN.md, with no HTTP in sight.

It yields ``Delta`` events (text already post-processed: numbers masked, contacts rendered
with the directory's numbers) and ends with exactly one ``TurnResult``, whatever happens:

- no model configured → fallback, status ``disabled``;
- quota reached → ``quota``; no slot in time → ``busy`` (``llm.admission``);
- the provider fails, times out, loops or answers nothing → the status of its error
  (``llm.errors``), and the fallback.

The ``TurnResult`` text is authoritative: when a failure comes after some deltas went out,
``partial_discarded`` is set and the client replaces what it showed by the fallback. When the
caller stops iterating (a client disconnect cancels the task), the guarded stream closes the
upstream connection, so the model server stops generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from llm.admission import QuotaCounter, Quotas, Slots
from llm.budget import guarded_stream
from llm.config import Budgets
from llm.errors import ModelError
from llm.fallback import FallbackStatus, fallback_text
from llm.prompting import PromptContact, build_messages
from llm.providers.base import Provider
from llm.providers.none import NoProvider
from llm.texts import prompt_hash
from llm.types import ChatOptions, GenerationStats, Message
from safety.contacts import ContactBook, StreamRenderer, render_contacts
from safety.masking import StreamMasker

__all__ = ["Assistant", "Delta", "Timings", "TurnRequest", "TurnResult", "chat_turn"]

Source = Literal["llm", "cache", "fallback"]
Status = Literal[
    "ok", "timeout", "busy", "quota", "unavailable", "invalid_output", "blocked_policy", "disabled"
]


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Timings:
    queue_wait_ms: float | None = None
    first_token_ms: float | None = None
    total_ms: float = 0.0
    tokens: int | None = None
    tokens_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    text: str
    source: Source
    status: Status
    contacts: tuple[str, ...]  # ids the answer named, in order
    model: str | None
    prompt_hash: str
    timings: Timings
    partial_discarded: bool = False
    unknown_tags: tuple[str, ...] = ()
    error: dict[str, str | int | None] | None = None


@dataclass(frozen=True, slots=True)
class TurnRequest:
    text: str
    category: str = "rien"
    topics: tuple[str, ...] = ()
    device_id: str | None = None
    history: Sequence[Message] = ()


@dataclass
class Assistant:
    """The long-lived parts a turn needs; the server builds one at start-up."""

    provider: Provider
    budgets: Budgets
    book: Callable[[], ContactBook]  # the current directory snapshot
    prompt_contacts: Callable[[str, Sequence[str]], Sequence[PromptContact]]
    slots: Slots = field(default_factory=Slots)
    quotas: Quotas = field(default_factory=Quotas)
    quota_counter: QuotaCounter | None = None
    options: ChatOptions = field(default_factory=ChatOptions)


def _fallback(
    assistant: Assistant,
    request: TurnRequest,
    status: FallbackStatus,
    started: float,
    *,
    partial: bool = False,
    error: ModelError | None = None,
    queue_wait_ms: float | None = None,
) -> TurnResult:
    raw = fallback_text(status, category=request.category, topics=request.topics)
    rendered = render_contacts(raw, assistant.book())
    return TurnResult(
        text=rendered.text,
        source="fallback",
        status=status,
        contacts=rendered.contacts,
        model=None if status == "disabled" else assistant.provider.config.model,
        prompt_hash=prompt_hash(),
        timings=Timings(queue_wait_ms=queue_wait_ms, total_ms=_ms(started)),
        partial_discarded=partial,
        error=error.audit() if error is not None else None,
    )


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


async def chat_turn(
    assistant: Assistant, request: TurnRequest
) -> AsyncGenerator[Delta | TurnResult, None]:
    """Deltas, then one ``TurnResult``; never raises a model error."""
    started = time.perf_counter()
    if isinstance(assistant.provider, NoProvider):
        result = _fallback(assistant, request, "disabled", started)
        yield Delta(result.text)
        yield result
        return
    try:
        await assistant.quotas.check(assistant.quota_counter, request.device_id)
    except ModelError as error:
        result = _fallback(assistant, request, "quota", started, error=error)
        yield Delta(result.text)
        yield result
        return

    book = assistant.book()
    messages = build_messages(
        request.text,
        category=request.category,
        topics=request.topics,
        contacts=assistant.prompt_contacts(request.category, request.topics),
        history=request.history,
    )
    masker, renderer = StreamMasker(), StreamRenderer(book)
    sent: list[str] = []
    queue_wait_ms: float | None = None
    first_token_ms: float | None = None
    stats: GenerationStats | None = None
    try:
        async with assistant.slots.slot() as waited:
            queue_wait_ms = round(waited * 1000, 2)
            generation_started = time.perf_counter()
            chunks = guarded_stream(
                assistant.provider, messages, assistant.options, assistant.budgets
            )
            # aclosing: leaving the loop early (a cancelled turn) must close the upstream now,
            # not whenever the garbage collector gets to the generator.
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    if first_token_ms is None:
                        first_token_ms = _ms(generation_started)
                    if chunk.stats is not None:
                        stats = chunk.stats
                    out = renderer.feed(masker.feed(chunk.text))
                    if out:
                        sent.append(out)
                        yield Delta(out)
            tail = renderer.feed(masker.close()) + renderer.close()
            if tail:
                sent.append(tail)
                yield Delta(tail)
    except ModelError as error:
        result = _fallback(
            assistant,
            request,
            error.status,
            started,
            partial=bool(sent),
            error=error,
            queue_wait_ms=queue_wait_ms,
        )
        if not sent:
            yield Delta(result.text)
        yield result
        return
    except asyncio.CancelledError:
        raise
    text = "".join(sent)
    if not text.strip():
        result = _fallback(
            assistant, request, "invalid_output", started, queue_wait_ms=queue_wait_ms
        )
        yield Delta(result.text)
        yield result
        return
    yield TurnResult(
        text=text,
        source="llm",
        status="ok",
        contacts=renderer.contacts,
        model=assistant.provider.config.model,
        prompt_hash=prompt_hash(),
        timings=Timings(
            queue_wait_ms=queue_wait_ms,
            first_token_ms=first_token_ms,
            total_ms=_ms(started),
            tokens=stats.eval_count if stats else None,
            tokens_per_second=round(stats.tokens_per_second, 2)
            if stats and stats.tokens_per_second
            else None,
        ),
        unknown_tags=renderer.unknown_tags,
    )
