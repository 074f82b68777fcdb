"""One model call under our budgets, its raw text kept, its deltas post-processed on the way.

``generate`` streams the provider's chunks through ``llm.budget.guarded_stream`` and hands
each piece of the model's raw text to ``on_text`` (the turn post-processes and forwards it when
it streams, or ignores it when it must validate first). It returns the raw text, the stats and
the timings; errors are ``llm.errors.ModelError``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass

from llm.budget import guarded_stream
from llm.config import Budgets
from llm.providers.base import Provider
from llm.types import ChatOptions, GenerationStats, Message

__all__ = ["Generation", "generate"]


@dataclass
class Generation:
    raw: str = ""
    stats: GenerationStats | None = None
    first_token_ms: float | None = None
    total_ms: float = 0.0


async def generate(
    provider: Provider,
    messages: Sequence[Message],
    options: ChatOptions,
    budgets: Budgets,
    result: Generation,
) -> AsyncGenerator[str, None]:
    """Yield the raw text piece by piece; ``result`` is filled as it goes (also on error)."""
    started = time.perf_counter()
    parts: list[str] = []
    chunks = guarded_stream(provider, messages, options, budgets)
    try:
        # aclosing: leaving early (a cancelled turn) must close the upstream now, not whenever
        # the garbage collector gets to the generator.
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                if result.first_token_ms is None:
                    result.first_token_ms = round((time.perf_counter() - started) * 1000, 2)
                if chunk.stats is not None:
                    result.stats = chunk.stats
                if chunk.text:
                    parts.append(chunk.text)
                    result.raw = "".join(parts)
                    yield chunk.text
    finally:
        result.total_ms = round((time.perf_counter() - started) * 1000, 2)


def remaining_budget(budgets: Budgets, spent_ms: float) -> Budgets | None:
    """The budgets of a retry within what is left of the turn's total, or None if too little."""
    left = budgets.total_s - spent_ms / 1000
    if left < budgets.total_s / 2:
        return None
    return budgets.model_copy(
        update={
            "total_s": left,
            "first_token_s": min(budgets.first_token_s, left),
            "idle_s": min(budgets.idle_s, left),
            "retries": 0,
        }
    )


Noop = Callable[[str], None]
