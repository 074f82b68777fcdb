"""One judge call: stream under budgets, then parse strictly; an error is an outcome, not a grade.

``call_judge`` never raises for a failure of the judge. It returns a ``JudgeCall`` with either
the verdicts or an error kind and its cause:

==============================================  ==========  ===================================
what happened                                   kind        cause (example)
==============================================  ==========  ===================================
no first token, stall, total budget exhausted   timeout     ``timeout.first_token: ...``
refused port, 5xx, 503 busy, dropped stream,    transport   ``ConnectionRefused: ...``
mid-stream error line, unknown model
empty, not JSON, cut at num_predict, wrong      parse       ``schema: x.verdict: Input ...``
keys or verdicts; loop guard on the output
==============================================  ==========  ===================================

The loop guard (``DegenerateOutput``: the same chunk over and over, more chunks than asked) is
counted as ``parse``: the server answered, and what it wrote is unusable as a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from bench.rubric import SCHEMA_VERSION, ParseFailure, Verdict, judge_schema, parse_verdicts
from llm.budget import guarded_stream
from llm.config import Budgets, ProviderConfig
from llm.errors import DegenerateOutput, GenerationTimeout, ModelError
from llm.providers.base import Provider
from llm.types import ChatOptions, Message

__all__ = ["CallTimings", "ErrorKind", "JudgeCall", "JudgeConfig", "call_judge", "server_slots"]

ErrorKind = Literal["timeout", "transport", "parse"]


class JudgeConfig(BaseModel):
    """The judge: a provider of its own, and the options of every call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider_type: Literal["ollama", "openai_compat"] = "ollama"
    base_url: str = "http://127.0.0.1:11434"
    model: str
    parallel: int = Field(default=1, ge=1, le=64)
    seed: int = 7
    temperature: float = 0.0
    num_predict: int = Field(default=768, ge=16, le=8192)
    num_ctx: int | None = 4096
    # Short on purpose: once the judge phase ends, Ollama frees the judge's memory soon, before
    # the assistant's model needs it again (calls in a row keep it loaded meanwhile).
    keep_alive: str = "5m"

    def provider_config(self) -> ProviderConfig:
        return ProviderConfig(
            name="judge",
            type=self.provider_type,
            base_url=self.base_url,
            model=self.model,
            parallel=self.parallel,
        )

    def options(self, criteria: Sequence[str]) -> ChatOptions:
        return ChatOptions(
            temperature=self.temperature,
            seed=self.seed,
            num_predict=self.num_predict,
            num_ctx=self.num_ctx,
            keep_alive=self.keep_alive,
            json_schema=judge_schema(criteria),
        )

    def options_key(self) -> dict[str, object]:
        """The options that change a verdict, for the cache key."""
        return {
            "temperature": self.temperature,
            "seed": self.seed,
            "num_predict": self.num_predict,
            "num_ctx": self.num_ctx,
            "schema": SCHEMA_VERSION,
        }


@dataclass(frozen=True)
class CallTimings:
    first_token_s: float | None
    max_gap_s: float | None
    total_s: float
    chunks: int


@dataclass(frozen=True)
class JudgeCall:
    verdicts: dict[str, Verdict] | None
    error_kind: ErrorKind | None
    cause: str | None
    raw: str
    done_reason: str | None
    timings: CallTimings


def _describe(error: ModelError) -> str:
    status = f" (HTTP {error.http_status})" if error.http_status else ""
    return f"{type(error).__name__}{status} at {error.stage}: {error.detail}"


async def call_judge(
    provider: Provider,
    messages: Sequence[Message],
    criteria: Sequence[str],
    options: ChatOptions,
    budgets: Budgets,
) -> JudgeCall:
    """Ask the judge once; verdicts, or an error kind with its cause (never raises on those)."""
    loop = asyncio.get_running_loop()
    started = last = loop.time()
    first: float | None = None
    max_gap: float | None = None
    parts: list[str] = []
    chunks = 0
    done_reason: str | None = None
    kind: ErrorKind | None = None
    cause: str | None = None
    try:
        stream = guarded_stream(provider, messages, options, budgets)
        async with contextlib.aclosing(stream):
            async for chunk in stream:
                now = loop.time()
                if first is None:
                    first = now - started
                else:
                    max_gap = max(max_gap or 0.0, now - last)
                last = now
                chunks += 1
                parts.append(chunk.text)
                if chunk.done:
                    done_reason = chunk.done_reason
    except GenerationTimeout as error:
        kind, cause = "timeout", f"{error.reason}: {error.detail}"
    except DegenerateOutput as error:
        kind, cause = "parse", f"degenerate output: {error.detail}"
    except ModelError as error:
        kind, cause = "transport", _describe(error)
    raw = "".join(parts)
    timings = CallTimings(
        first_token_s=None if first is None else round(first, 3),
        max_gap_s=None if max_gap is None else round(max_gap, 3),
        total_s=round(loop.time() - started, 3),
        chunks=chunks,
    )
    if kind is not None:
        return JudgeCall(None, kind, cause, raw, done_reason, timings)
    try:
        verdicts = parse_verdicts(raw, criteria, done_reason)
    except ParseFailure as failure:
        return JudgeCall(None, "parse", failure.cause, raw, done_reason, timings)
    return JudgeCall(verdicts, None, None, raw, done_reason, timings)


async def server_slots(config: JudgeConfig) -> int | None:
    """The judge server's parallel slots when it says (llama.cpp's ``/props``), else None."""
    if config.provider_type != "openai_compat":
        return None
    base = config.base_url.rstrip("/").removesuffix("/v1")
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5.0) as http:
            response = await http.get("/props")
            response.raise_for_status()
            slots = response.json().get("total_slots")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return slots if isinstance(slots, int) and slots > 0 else None
