"""Ollama through its official client (``ollama.AsyncClient``), ``/api/chat`` streaming.

The client waits forever by default and keeps a stream open if one merely stops reading, so:
explicit httpx timeouts are passed as a backstop, every exception is translated here into
``llm.errors``, and the stream is an async generator whose ``aclose()`` exits the client's
``async with`` block, which closes the HTTP response: Ollama sees the disconnect and stops.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import ollama

from llm.config import Budgets, ProviderConfig
from llm.errors import (
    IncompleteStream,
    MalformedLine,
    ModelError,
    Stage,
    StreamError,
    Unavailable,
)
from llm.providers.base import http_timeout, status_error, transport_error
from llm.types import ChatOptions, Chunk, GenerationStats, Health, Message

__all__ = ["OllamaProvider"]


def _same_model(wanted: str, listed: str) -> bool:
    """``qwen2.5`` names ``qwen2.5:latest``; tags otherwise must match."""

    def canonical(name: str) -> str:
        return name if ":" in name else f"{name}:latest"

    return canonical(wanted) == canonical(listed)


class OllamaProvider:
    def __init__(self, config: ProviderConfig, budgets: Budgets) -> None:
        self.config = config
        self._budgets = budgets
        headers = {}
        if (key := config.api_key()) is not None:
            headers["authorization"] = f"Bearer {key}"
        base_url = str(config.base_url).rstrip("/")
        self._client = ollama.AsyncClient(
            host=base_url, timeout=http_timeout(budgets), headers=headers
        )
        # The official client has no /api/version call: a plain client for that one.
        self._http = httpx.AsyncClient(
            base_url=base_url, timeout=http_timeout(budgets), headers=headers
        )

    def _options(self, options: ChatOptions) -> dict[str, Any]:
        wanted: dict[str, Any] = {
            "temperature": options.temperature,
            "num_predict": min(options.num_predict, self._budgets.num_predict),
        }
        if options.seed is not None:
            wanted["seed"] = options.seed
        if options.num_ctx is not None:
            wanted["num_ctx"] = options.num_ctx
        return wanted

    def _translate(self, exc: BaseException, stage: Stage) -> ModelError:
        where: Stage = "first_token" if stage == "first_token" else "stream"
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == -1:  # an {"error": ...} line inside a 200 stream
                return StreamError(
                    str(exc.error), provider=self.config.name, model=self.config.model, stage=where
                )
            return status_error(exc.status_code, str(exc.error), self.config, where)
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError) and stage == "stream":
            return IncompleteStream(
                f"connection closed mid-stream ({type(exc).__name__})",
                provider=self.config.name,
                model=self.config.model,
                stage=where,
            )
        if isinstance(exc, httpx.TransportError):
            return transport_error(exc, self.config, where)
        if isinstance(exc, json.JSONDecodeError):
            return MalformedLine(
                f"not JSON: {exc.msg}",
                provider=self.config.name,
                model=self.config.model,
                stage=where,
            )
        if isinstance(exc, ConnectionError):  # the client's own translation of ConnectError
            return transport_error(httpx.ConnectError(str(exc)), self.config, where)
        return Unavailable(
            f"{type(exc).__name__}: {exc}",
            provider=self.config.name,
            model=self.config.model,
            stage=where,
        )

    async def stream(
        self, messages: Sequence[Message], options: ChatOptions
    ) -> AsyncIterator[Chunk]:
        stage: Stage = "first_token"
        upstream: AsyncIterator[Any] | None = None
        try:
            upstream = await self._client.chat(
                model=self.config.model,
                messages=[m.as_dict() for m in messages],
                stream=True,
                options=self._options(options),
                keep_alive=options.keep_alive,
                format=options.json_schema,
            )
            async for part in upstream:
                stage = "stream"
                if part.done:
                    yield Chunk(
                        text=part.message.content or "",
                        done=True,
                        done_reason=part.done_reason,
                        stats=GenerationStats(
                            eval_count=part.eval_count,
                            eval_duration_ns=part.eval_duration,
                            prompt_eval_count=part.prompt_eval_count,
                            prompt_eval_duration_ns=part.prompt_eval_duration,
                            load_duration_ns=part.load_duration,
                            total_duration_ns=part.total_duration,
                        ),
                    )
                    return
                yield Chunk(text=part.message.content or "")
        except (
            ollama.ResponseError,
            httpx.TransportError,
            json.JSONDecodeError,
            ConnectionError,
        ) as exc:
            raise self._translate(exc, stage) from exc
        except (TypeError, ValueError) as exc:  # a line that parses but is not a chat chunk
            raise MalformedLine(
                f"unexpected chunk: {exc}", provider=self.config.name, model=self.config.model
            ) from exc
        finally:
            if upstream is not None:
                aclose = getattr(upstream, "aclose", None)
                if aclose is not None:
                    await aclose()
        raise IncompleteStream(
            "stream ended without done", provider=self.config.name, model=self.config.model
        )

    async def health(self) -> Health:
        checks: dict[str, str] = {}
        name, model = self.config.name, self.config.model
        try:
            response = await self._http.get("/api/version")
            response.raise_for_status()
            version = response.json().get("version")
            checks["reachable"] = f"ok (Ollama {version})"
        except (httpx.HTTPError, ValueError) as exc:
            checks["reachable"] = f"no: {type(exc).__name__}"
            return Health(name, model, False, False, None, None, str(exc)[:200], checks)
        try:
            tags = await self._client.list()
            present = any(_same_model(model, m.model or "") for m in tags.models)
            checks["model_present"] = "ok" if present else f"no: {model} not in /api/tags"
            running = await self._client.ps()
            loaded = any(_same_model(model, m.model or "") for m in running.models)
            checks["model_loaded"] = "ok" if loaded else "no: not in /api/ps (cold)"
        except (ollama.ResponseError, httpx.HTTPError) as exc:
            checks["model_present"] = f"unknown: {type(exc).__name__}"
            return Health(name, model, True, False, None, version, str(exc)[:200], checks)
        return Health(name, model, True, present, loaded, version, "", checks)

    async def warm_up(self) -> None:
        """Load the model: an empty ``messages`` answers ``done_reason: "load"``."""
        try:
            await self._client.chat(model=self.config.model, messages=[])
        except (ollama.ResponseError, httpx.TransportError, ConnectionError) as exc:
            error = self._translate(exc, "first_token")
            error.stage = "warm_up"
            raise error from exc

    async def aclose(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]  # untyped in ollama 0.6
        await self._http.aclose()
