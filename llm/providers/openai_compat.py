"""Any OpenAI-compatible server (llama.cpp, llama-cpp-python, vLLM, OpenAI), over plain httpx.

``POST /v1/chat/completions`` with ``stream: true`` answers Server-Sent Events: ``data: {json}``
events separated by blank lines, ``:`` comments (keep-alive pings), ``data: [DONE]`` last.
Every exception is translated here into ``llm.errors``; the stream is an async generator whose
``aclose()`` exits ``async with client.stream(...)``, which closes the HTTP response: the
server sees the disconnect and stops generating.

Stats come from ``usage`` (asked for with ``stream_options.include_usage``) and llama.cpp's
``timings``; a server that streams neither (llama-cpp-python) gets its content deltas counted
and timed here (one delta is one token on llama.cpp servers). ``total_duration_ns`` is always
measured here, from the request to the end of the stream.

Constrained output: OpenAI, vLLM and llama-server read ``{"type": "json_schema", "json_schema":
{...}}``; llama-cpp-python only reads ``{"type": "json_object", "schema": ...}`` and answers the
other with an error that names ``response_format``. ``json_mode="auto"`` sends the first and
falls back to the second once, for the life of the provider, when the server refuses it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from llm.config import Budgets, ProviderConfig
from llm.errors import IncompleteStream, MalformedLine, ModelError, Stage, StreamError, Unavailable
from llm.providers.base import http_timeout, status_error, transport_error
from llm.types import ChatOptions, Chunk, GenerationStats, Health, Message

__all__ = ["JsonMode", "OpenAICompatProvider"]

JsonMode = Literal["auto", "json_schema", "json_object"]
_NS_PER_MS = 1_000_000


def _error_text(body: str) -> str:
    """``{"error": {"message": M, "code": "model_not_found"}}`` as ``M (model not found)``."""
    try:
        error = json.loads(body).get("error", body)
    except (ValueError, AttributeError):
        return body
    if not isinstance(error, dict):
        return str(error)
    code = error.get("code")
    suffix = f" ({code.replace('_', ' ')})" if isinstance(code, str) and code else ""
    return f"{error.get('message', '')}{suffix}"


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ms_to_ns(value: Any) -> int | None:
    return round(value * _NS_PER_MS) if _int(value) is not None else None


def _mapping(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


class _SSE:
    """Server-Sent Events, line by line: ``feed`` returns an event's data once it is complete."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        if not line:  # a blank line dispatches the event
            data, self._data = self._data, []
            return "\n".join(data) if data else None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value.removeprefix(" "))
        return None  # event:, id:, retry: carry nothing we use

    def flush(self) -> str | None:
        return self.feed("")


@dataclass
class _Turn:
    """What one stream has said so far, besides its text."""

    started_ns: int
    opened: bool = False  # a 2xx status and headers arrived
    finish_reason: str | None = None
    done: bool = False
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    deltas: int = 0
    first_delta_ns: int | None = None

    def delta(self, text: str) -> Chunk:
        self.deltas += 1
        self.first_delta_ns = self.first_delta_ns or time.monotonic_ns()
        return Chunk(text=text)

    def stats(self) -> GenerationStats:
        usage, timings, now = self.usage or {}, self.timings or {}, time.monotonic_ns()
        counted = self.deltas if not usage and not timings else None
        measured = now - self.first_delta_ns if counted and self.first_delta_ns else None
        return GenerationStats(
            eval_count=_int(usage.get("completion_tokens"))
            or _int(timings.get("predicted_n"))
            or counted,
            eval_duration_ns=_ms_to_ns(timings.get("predicted_ms")) or measured,
            prompt_eval_count=_int(usage.get("prompt_tokens")) or _int(timings.get("prompt_n")),
            prompt_eval_duration_ns=_ms_to_ns(timings.get("prompt_ms")),
            total_duration_ns=now - self.started_ns,
        )


class OpenAICompatProvider:
    def __init__(
        self, config: ProviderConfig, budgets: Budgets, *, json_mode: JsonMode = "auto"
    ) -> None:
        self.config = config
        self._budgets = budgets
        self._json_mode = json_mode
        headers = {}
        if (key := config.api_key()) is not None:
            headers["authorization"] = f"Bearer {key}"
        base_url = str(config.base_url).rstrip("/")
        base_url = base_url if base_url.endswith("/v1") else f"{base_url}/v1"
        self._client = httpx.AsyncClient(
            base_url=base_url, timeout=http_timeout(budgets), headers=headers
        )

    def _body(self, messages: Sequence[Message], options: ChatOptions) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [m.as_dict() for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": options.temperature,
            "max_tokens": min(options.num_predict, self._budgets.num_predict),
        }
        if options.seed is not None:
            body["seed"] = options.seed
        if options.json_schema is not None and self._json_mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": options.json_schema}
        elif options.json_schema is not None:
            schema = {"name": "answer", "schema": options.json_schema, "strict": True}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        return body

    def _refused_json_schema(self, body: dict[str, Any], status: int, text: str) -> bool:
        """Switch to ``json_object`` if the server refused ``json_schema`` (auto mode only).

        llama-cpp-python answers 500 with a validation error naming ``response_format``.
        """
        sent = body.get("response_format", {}).get("type")
        if self._json_mode != "auto" or sent != "json_schema" or status not in (400, 422, 500):
            return False
        if "response_format" not in text and "json_schema" not in text:
            return False
        self._json_mode = "json_object"
        return True

    def _error(self, kind: type[ModelError], detail: str, stage: Stage) -> ModelError:
        return kind(detail[:300], provider=self.config.name, model=self.config.model, stage=stage)

    def _event(self, data: str, turn: _Turn, stage: Stage) -> str:
        """The content of one ``data:`` event (``""`` if none); records its ending and stats."""
        if data == "[DONE]":
            turn.done = True
            return ""
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise self._error(MalformedLine, f"not JSON: {data[:80]!r}", stage) from exc
        if not isinstance(event, dict):
            raise self._error(MalformedLine, f"not an object: {data[:80]!r}", stage)
        if "error" in event:
            raise self._error(StreamError, _error_text(data), stage)
        try:
            turn.usage = _mapping(event.get("usage")) or turn.usage
            turn.timings = _mapping(event.get("timings")) or turn.timings
            choice = (event.get("choices") or [{}])[0]
            turn.finish_reason = choice.get("finish_reason") or turn.finish_reason
            content = (choice.get("delta") or {}).get("content")
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise self._error(MalformedLine, f"unexpected chunk: {data[:80]!r}", stage) from exc
        return content if isinstance(content, str) else ""

    async def stream(
        self, messages: Sequence[Message], options: ChatOptions
    ) -> AsyncIterator[Chunk]:
        stage: Stage = "first_token"
        turn = _Turn(started_ns=time.monotonic_ns())
        try:
            for attempt in (1, 2):
                body = self._body(messages, options)
                async with self._client.stream("POST", "/chat/completions", json=body) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        status, detail = response.status_code, response.text
                        if attempt == 1 and self._refused_json_schema(body, status, detail):
                            continue
                        raise status_error(status, _error_text(detail), self.config, stage)
                    turn.opened, sse = True, _SSE()
                    async for line in response.aiter_lines():
                        data = sse.feed(line)
                        if data is not None and (text := self._event(data, turn, stage)):
                            stage = "stream"
                            yield turn.delta(text)
                        if turn.done:
                            break
                    else:
                        data = sse.flush()  # an event cut short by the end of the body
                        if data is not None and (text := self._event(data, turn, stage)):
                            yield turn.delta(text)
                break
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if not turn.opened:
                raise transport_error(exc, self.config, stage) from exc
            raise self._error(IncompleteStream, f"connection lost: {exc}", stage) from exc
        except httpx.TransportError as exc:
            raise transport_error(exc, self.config, stage) from exc
        except httpx.HTTPError as exc:
            raise self._error(Unavailable, f"{type(exc).__name__}: {exc}", stage) from exc
        if not (turn.done or turn.finish_reason):
            raise self._error(IncompleteStream, "ended without finish_reason nor [DONE]", stage)
        yield Chunk(text="", done=True, done_reason=turn.finish_reason, stats=turn.stats())

    async def health(self) -> Health:
        name, model = self.config.name, self.config.model
        try:
            response = await self._client.get("/models")
        except httpx.HTTPError as exc:
            checks = {"reachable": f"no: {type(exc).__name__}"}
            return Health(name, model, False, False, None, None, str(exc)[:200], checks)
        checks = {"reachable": f"ok (HTTP {response.status_code})"}
        try:
            response.raise_for_status()
            ids = [str(entry["id"]) for entry in response.json()["data"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            checks["model_present"] = f"unknown: {type(exc).__name__}"
            detail = _error_text(response.text)[:200] or str(exc)[:200]
            return Health(name, model, True, False, None, None, detail, checks)
        present = model in ids
        checks["model_present"] = "ok" if present else f"no: {model} not in /v1/models {ids[:5]}"
        checks["model_loaded"] = "assumed: served models are loaded" if present else "no"
        return Health(name, model, True, present, True if present else None, None, "", checks)

    async def warm_up(self) -> None:
        """One completion of one token, so that the first real turn finds a warm server."""
        body = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": "Bonjour"}],
            "max_tokens": 1,
            "stream": False,
        }
        try:
            response = await self._client.post("/chat/completions", json=body)
            if response.status_code >= 400:
                raise status_error(
                    response.status_code, _error_text(response.text), self.config, "warm_up"
                )
            response.json()
        except httpx.TransportError as exc:
            error = transport_error(exc, self.config, "warm_up")
            error.stage = "warm_up"
            raise error from exc
        except httpx.HTTPError as exc:
            raise self._error(Unavailable, f"{type(exc).__name__}: {exc}", "warm_up") from exc
        except ValueError as exc:
            raise self._error(MalformedLine, "warm-up answer is not JSON", "warm_up") from exc

    async def aclose(self) -> None:
        await self._client.aclose()
