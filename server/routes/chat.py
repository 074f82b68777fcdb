"""``POST /v1/chat``: JSON, or Server-Sent Events with ``Accept: text/event-stream``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.deps import DeviceId, ServicesDep
from server.errors import ApiError
from server.schemas import ChatRequest, ChatResponse, ErrorBody
from server.sse import ClosingStreamingResponse, refusal_response, sse_stream
from server.turns import run_chat

router = APIRouter(prefix="/v1", tags=["chat"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": dict[str, ErrorBody], "description": description}
    for status, description in (
        (400, "Malformed JSON or invalid UTF-8"),
        (401, "Missing, unknown or revoked token"),
        (
            409,
            "idempotency_conflict: this client_message_id was already used in this "
            "conversation for another message. The body carries the new message's `safety` "
            "card all the same; send it again with a new id.",
        ),
        (413, "Body too large"),
        (
            429,
            "too_many_turns: this device already has `admission.device_turns` (2) turns in "
            "flight; `Retry-After` says when to send again. The body carries the message's "
            "`safety` card all the same.",
        ),
        (422, "Invalid fields: empty, too long, control characters..."),
    )
}
_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "model": ChatResponse,
        "description": "The answer as JSON, or with `Accept: text/event-stream` the events "
        '`safety` (category, rules, card), `delta`* ({"text"}) and `done` (this object), '
        "with `: heartbeat` comments during long waits. `done` comes last; a request "
        "refused after detection (idempotency_conflict) ends instead with an `error` event "
        '({"error": {...}}, as the 409 body, card included).',
        "content": {"text/event-stream": {}},
    }
}


@router.post("/chat", response_model=ChatResponse, responses={**_ERRORS, **_STREAM_DOC})
async def chat(body: ChatRequest, request: Request, device: DeviceId, services: ServicesDep) -> Any:
    """One turn: the safety card first, then the assistant's answer or a fallback."""
    limit = services.settings.message_max_chars
    if len(body.message) > limit:
        raise ApiError(422, "message_too_long", "message", limit=limit)
    events = run_chat(services, device, body)
    if "text/event-stream" in request.headers.get("accept", ""):
        return ClosingStreamingResponse(
            sse_stream(events, services.settings.heartbeat_s),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    async for kind, payload in events:
        if kind == "done":
            return JSONResponse(payload.model_dump(mode="json"))
        if kind == "error":
            return refusal_response(payload)
    raise RuntimeError("a turn ended without its done event")  # pragma: no cover
