"""One chat turn over the HTTP API, as Server-Sent Events, with the client's own timings.

Works the same against a running server and in-process (``httpx.ASGITransport``; that
transport hands the body over once complete, so in-process the client's timings only bound the
turn, and the server's own timings in the ``done`` event are the ones to read).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from pydantic import ValidationError

from bench.records import TurnRecord, TurnTimings
from server.schemas import ChatResponse, SafetyPayload

__all__ = ["CHAT_TIMEOUT", "chat_turn"]

#: Generous: the server streams heartbeats while the model is slow, and answers by itself
#: with a fallback when its own budgets run out.
CHAT_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=30.0, pool=600.0)


def _collapse(kinds: list[str]) -> list[str]:
    """``["safety", "delta", "delta", "done"]`` as ``["safety", "delta*2", "done"]``."""
    out: list[str] = []
    for kind in kinds:
        if out and out[-1].split("*")[0] == kind:
            count = int(out[-1].split("*")[1]) if "*" in out[-1] else 1
            out[-1] = f"{kind}*{count + 1}"
        else:
            out.append(kind)
    return out


async def chat_turn(
    http: httpx.AsyncClient,
    token: str,
    *,
    conversation_id: str,
    client_message_id: str,
    message: str,
    region: str | None = None,
) -> TurnRecord:
    """Send one message and record what came back; never raises on a failed turn."""
    body: dict[str, Any] = {
        "conversation_id": conversation_id,
        "client_message_id": client_message_id,
        "message": message,
    }
    if region is not None:
        body["region"] = region
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    record = TurnRecord(message=message, client_message_id=client_message_id)
    started = time.perf_counter()
    kinds: list[str] = []
    try:
        async with http.stream(
            "POST", "/v1/chat", json=body, headers=headers, timeout=CHAT_TIMEOUT
        ) as response:
            record.http_status = response.status_code
            if response.status_code != 200:
                await response.aread()
                record.error = f"HTTP {response.status_code}: {response.text[:300]}"
                return record
            kind = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:].strip()
                elif line.startswith("data: "):
                    _event(record, kind, json.loads(line[6:]), started)
                    kinds.append(kind)
    except (httpx.HTTPError, ValueError, ValidationError) as exc:
        record.error = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        record.events = _collapse(kinds)
    if record.response is None and record.error is None:
        record.error = "the stream ended without a done event"
    return record


def _event(record: TurnRecord, kind: str, data: Any, started: float) -> None:
    elapsed = round((time.perf_counter() - started) * 1000, 2)
    timings: TurnTimings = record.timings
    if kind == "safety":
        record.safety = SafetyPayload.model_validate(data)
        timings.safety_ms = timings.safety_ms if timings.safety_ms is not None else elapsed
    elif kind == "delta":
        timings.first_delta_ms = timings.first_delta_ms or elapsed
    elif kind == "done":
        record.response = ChatResponse.model_validate(data)
        timings.done_ms = elapsed
