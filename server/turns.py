"""One chat request, HTTP aside: detect, card, idempotency, the model turn, storage.

``run_chat`` yields ``("safety", payload)`` first, whatever happens next, then ``("delta",
text)`` events, then exactly one ``("done", ChatResponse)``. It is shared by the JSON and the
SSE routes (and the bench, in-process), so both always agree.

Idempotency: ``(device, client_message_id)`` is claimed in the database before any generation.
A retry of a finished turn replays the stored answer; a retry that arrives while the first one
runs waits for it (in this process through a future, across processes by polling the row). When
the database cannot be reached the card and a deterministic fallback still come back: without
storage there is no quota and no idempotency, so no model call is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any, Literal

from llm.fallback import fallback_text, safety_steps
from llm.texts import prompt_hash
from llm.turn import Delta, Timings, TurnRequest, TurnResult, chat_turn
from llm.types import Message
from safety import Detection
from safety.contacts import render_contacts
from server.db import repository
from server.logs import request_id
from server.schemas import CardContact, ChatRequest, ChatResponse, SafetyPayload, TimingsPayload
from server.services import Services

__all__ = ["Event", "run_chat"]

log = logging.getLogger("nuisances.chat")
Event = tuple[Literal["safety", "delta", "done"], Any]
_POLL_S = 0.25


def _contacts_payload(services: Services, ids: tuple[str, ...]) -> list[dict[str, str]]:
    snapshot = services.directory.snapshot
    found = []
    for contact_id in ids:
        contact = snapshot.get(contact_id)
        if contact is not None:
            found.append({"id": contact.id, "name": contact.name, "number": contact.number})
    return found


async def _db(services: Services, function: Any, *args: Any, **kwargs: Any) -> Any:
    def call() -> Any:
        with services.sessions() as session:
            return function(session, *args, **kwargs)

    return await asyncio.to_thread(call)


async def _wait_for_first(
    services: Services, key: tuple[str, str], turn_id: int
) -> dict[str, Any] | None:
    """Wait for the turn another request runs; its stored response, or None (gave up)."""
    deadline = time.monotonic() + services.settings.retry_wait_s
    future = services.in_flight.get(key)
    if future is not None:
        try:
            await asyncio.wait_for(asyncio.shield(future), services.settings.retry_wait_s)
        except (TimeoutError, asyncio.CancelledError):
            if future.cancelled():  # the first request was cancelled: nothing to replay
                return None
            raise
    while time.monotonic() < deadline:
        state, response = await _db(services, repository.turn_state, turn_id)
        if state == "done":
            return response  # type: ignore[no-any-return]
        if state in ("cancelled", "missing"):
            return None
        await asyncio.sleep(_POLL_S)
    return None


async def run_chat(
    services: Services, device_id: str, request: ChatRequest
) -> AsyncGenerator[Event, None]:
    """``safety``, ``delta``*, ``done``: no path ends without ``done``."""
    started = time.perf_counter()
    safety: SafetyPayload | None = None
    done = False
    try:
        answer = _answer(services, device_id, request, started)
        async with contextlib.aclosing(answer):
            async for kind, payload in answer:
                if kind == "safety":
                    safety = payload
                done = done or kind == "done"
                yield (kind, payload)
    except Exception as exc:  # a bug must still end with an answer: the card and a fallback
        log.error("turn failed unexpectedly", extra={"error": type(exc).__name__}, exc_info=True)
        if done:
            return
        detection = await services.detect(request.message)
        if safety is None:
            safety = _safety_payload(services, detection, request.region)
            yield ("safety", safety)
        result = _unavailable(services, detection, started)
        yield ("delta", result.text)
        yield ("done", _response(services, request, None, safety, result, 0.0))


async def _answer(
    services: Services, device_id: str, request: ChatRequest, started: float
) -> AsyncGenerator[Event, None]:
    settings = services.settings
    detection = await services.detect(request.message)
    detection_ms = round((time.perf_counter() - started) * 1000, 3)
    services.metrics.detection.observe(detection_ms / 1000)
    safety = _safety_payload(services, detection, request.region)
    yield ("safety", safety)

    key = (device_id, request.client_message_id)
    turn_id: int | None = None
    database_ok = True
    prepared: repository.Prepared | None = None
    for _attempt in range(3):
        try:
            prepared = await _db(
                services,
                repository.prepare_turn,
                history_turns=settings.history_turns,
                device_id=device_id,
                conversation_id=request.conversation_id,
                client_message_id=request.client_message_id,
                message=request.message,
                category=detection.category,
                rules=detection.rules,
                topics=detection.topics,
                region=request.region,
                stale_after=timedelta(
                    seconds=settings.budgets.total_s + settings.admission.wait_s + 30
                ),
            )
        except Exception as exc:
            log.warning("database unavailable for a turn", extra={"error": type(exc).__name__})
            database_ok = False
            break
        claim = prepared.claim
        if claim.claimed:
            turn_id = claim.turn_id
            break
        stored = (
            claim.response
            if claim.state == "done" and claim.response is not None
            else await _wait_for_first(services, key, claim.turn_id)
        )
        if stored is not None:
            replay = ChatResponse.model_validate({**stored, "replayed": True})
            yield ("delta", replay.text)
            yield ("done", replay)
            return
        # The first try was cancelled or abandoned: claim again (it is then ours).

    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if turn_id is not None:
        services.in_flight[key] = future
    result: TurnResult | None = None
    try:
        if database_ok and turn_id is not None and prepared is not None:
            history = [
                m
                for message, reply in prepared.history
                for m in (Message("user", message), Message("assistant", reply))
            ]
            turn = TurnRequest(
                text=request.message,
                category=detection.category,
                topics=detection.topics,
                device_id=device_id,
                history=history,
                request_id=request_id.get(),
                quota_counts=prepared.quota,
            )
            turn_events = chat_turn(services.assistant, turn)
            async with contextlib.aclosing(turn_events):
                async for event in turn_events:
                    if isinstance(event, Delta):
                        yield ("delta", event.text)
                    else:
                        result = event
        else:
            result = _unavailable(services, detection, started)
            yield ("delta", result.text)
        if result is None:  # chat_turn always ends with a TurnResult
            raise RuntimeError("the model turn ended without a result")
        response = _response(services, request, turn_id, safety, result, detection_ms)
        services.metrics.turns.labels(detection.category, result.status, result.source).inc()
        if result.timings.queue_wait_ms is not None:
            services.metrics.queue_wait.observe(result.timings.queue_wait_ms / 1000)
        if result.timings.first_token_ms is not None:
            services.metrics.first_token.observe(result.timings.first_token_ms / 1000)
        services.metrics.total.observe(result.timings.total_ms / 1000)
        if turn_id is not None:
            await _store(services, turn_id, result, response, detection_ms)
        log.info(
            "turn answered",
            extra={
                "turn_id": turn_id,
                "category": detection.category,
                "rules": list(detection.rules),
                "status": result.status,
                "source": result.source,
                "total_ms": result.timings.total_ms,
            },
        )
        yield ("done", response)
    except (asyncio.CancelledError, GeneratorExit):
        if turn_id is not None:
            await asyncio.shield(_cancel(services, turn_id))
        future.cancel()
        raise
    finally:
        if not future.done():
            future.set_result(None)
        services.in_flight.pop(key, None)


def _safety_payload(services: Services, detection: Detection, region: str | None) -> SafetyPayload:
    snapshot = services.directory.snapshot
    card = snapshot.card_for(detection.categories, detection.topics, region)
    steps = (
        safety_steps(detection.topics, detection.category) if detection.category != "rien" else []
    )
    return SafetyPayload(
        category=detection.category,
        categories=list(detection.categories),
        topics=list(detection.topics),
        rules=list(detection.rules),
        card=[CardContact.of(c) for c in card],
        steps=[render_contacts(s, snapshot, services.settings.contact_style).text for s in steps],
    )


def _unavailable(services: Services, detection: Detection, started: float) -> TurnResult:
    """The deterministic fallback, when the turn cannot reach the model layer at all."""
    raw = fallback_text("unavailable", category=detection.category, topics=detection.topics)
    rendered = render_contacts(raw, services.directory.snapshot, services.settings.contact_style)
    return TurnResult(
        text=rendered.text,
        source="fallback",
        status="unavailable",
        contacts=rendered.contacts,
        model=None,
        prompt_hash=prompt_hash(),
        timings=Timings(total_ms=round((time.perf_counter() - started) * 1000, 2)),
    )


def _response(
    services: Services,
    request: ChatRequest,
    turn_id: int | None,
    safety: SafetyPayload,
    result: TurnResult,
    detection_ms: float,
) -> ChatResponse:
    timings = result.timings
    return ChatResponse(
        conversation_id=request.conversation_id,
        client_message_id=request.client_message_id,
        turn_id=turn_id,
        safety=safety,
        text=result.text,
        source=result.source,
        status=result.status,
        contacts=_contacts_payload(services, result.contacts),
        model=result.model,
        prompt_hash=result.prompt_hash,
        timings=TimingsPayload(
            detection_ms=detection_ms,
            queue_wait_ms=timings.queue_wait_ms,
            first_token_ms=timings.first_token_ms,
            total_ms=timings.total_ms,
            tokens=timings.tokens,
            tokens_per_second=timings.tokens_per_second,
        ),
        partial_discarded=result.partial_discarded,
    )


async def _store(
    services: Services,
    turn_id: int,
    result: TurnResult,
    response: ChatResponse,
    detection_ms: float,
) -> None:
    try:
        await _db(
            services,
            repository.finish_turn,
            turn_id,
            reply=result.text,
            status=result.status,
            source=result.source,
            model=result.model,
            model_called=result.model_called,
            prompt_hash=result.prompt_hash,
            response=response.model_dump(mode="json"),
            detection_ms=detection_ms,
            queue_wait_ms=result.timings.queue_wait_ms,
            first_token_ms=result.timings.first_token_ms,
            total_ms=result.timings.total_ms,
            tokens=result.timings.tokens,
        )
    except Exception as exc:
        log.warning(
            "could not store a turn", extra={"turn_id": turn_id, "error": type(exc).__name__}
        )


async def _cancel(services: Services, turn_id: int) -> None:
    try:
        await _db(services, repository.mark_cancelled, turn_id)
    except Exception as exc:
        log.warning("could not mark a turn cancelled", extra={"error": type(exc).__name__})
