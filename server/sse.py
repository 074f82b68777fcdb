"""Server-Sent Events: ``event:``/``data:`` frames, and comment heartbeats while waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from pydantic import BaseModel
from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from server.errors import error_response
from server.turns import Event, Refusal

__all__ = ["HEARTBEAT", "ClosingStreamingResponse", "encode", "refusal_response", "sse_stream"]

HEARTBEAT = b": heartbeat\n\n"
_CLEANUP_S = 10.0


def refusal_response(refusal: Refusal) -> JSONResponse:
    """A request refused after detection, card included (and ``Retry-After`` when given)."""
    retry = refusal.retry_after_s
    return error_response(
        refusal.status,
        refusal.code,
        safety=refusal.safety,
        headers=None if retry is None else {"Retry-After": str(retry)},
        retry_after_s=retry,
    )


def encode(kind: str, payload: Any) -> bytes:
    if kind == "error":  # a Refusal: the same body as the JSON error response
        data = bytes(refusal_response(payload).body).decode()
    elif isinstance(payload, BaseModel):
        data = payload.model_dump_json()
    else:
        data = json.dumps({"text": payload} if kind == "delta" else payload, ensure_ascii=False)
    return f"event: {kind}\ndata: {data}\n\n".encode()


async def sse_stream(events: AsyncIterator[Event], heartbeat_s: float) -> AsyncIterator[bytes]:
    """Frames for ``events``; a heartbeat comment whenever ``heartbeat_s`` pass in silence.

    When the client goes away the response is cancelled; the pending step of ``events`` is
    cancelled with it, which cancels the turn and closes the model's stream upstream.
    """
    pending: asyncio.Future[Event] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            finished, _ = await asyncio.wait({pending}, timeout=heartbeat_s)
            if not finished:
                yield HEARTBEAT
                continue
            try:
                kind, payload = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield encode(kind, payload)
    finally:
        # Cancel the step under way and let it finish its cleanup (closing the model's stream)
        # undisturbed: awaiting the task directly would forward every further cancellation of
        # this one into it, interrupting that cleanup; asyncio.wait does not, and the shield
        # keeps the request's cancelled scope from cutting the wait short.
        with anyio.CancelScope(shield=True):
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.wait({pending}, timeout=_CLEANUP_S)
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()


class ClosingStreamingResponse(StreamingResponse):
    """A streaming response that closes its iterator when it stops, whatever the reason.

    When the client hangs up while the iterator is suspended, Starlette cancels the sending
    task and leaves the generator to the garbage collector; closing it here, shielded, cancels
    the turn at once, which closes the model's stream upstream.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
