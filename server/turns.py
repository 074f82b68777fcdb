"""One chat request, HTTP aside: detect, card, idempotency, the model turn, storage.

``run_chat`` yields ``("safety", payload)`` first, whatever happens next, then either
``("delta", text)`` events and exactly one ``("done", ChatResponse)``, or one ``("error",
Refusal)`` (an idempotency conflict). It is shared by the JSON and the SSE routes (and the
bench, in-process), so both always agree.

Idempotency: the key is (device, conversation, ``client_message_id``), and a turn keeps the
digest of its message. The same key with the same message replays the stored answer (with
the card of the message just received: detection always runs); with another message it is
refused as ``idempotency_conflict``, card included. A retry that arrives while the first try
runs waits for it: in this process through a future, across processes by polling the row
until it is done or its lease runs out (a crashed process stops renewing it), then takes it
over. When the database cannot be reached the card still comes first and the model is still
called: idempotency is held in memory, quotas go on from the last counts, and the finished
turn is written to the spool, replayed into the database when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from llm.fallback import fallback_text, safety_steps
from llm.providers.none import NoProvider
from llm.texts import prompt_hash
from llm.turn import Delta, Timings, TurnRequest, TurnResult, chat_turn
from llm.types import Message
from safety import Detection
from safety.contacts import render_contacts
from server.db import repository
from server.db.repository import TurnKey
from server.logs import request_id
from server.schemas import CardContact, ChatRequest, ChatResponse, SafetyPayload, TimingsPayload
from server.services import InFlight, Services
from server.turn_gate import Place

__all__ = ["Event", "Refusal", "run_chat"]

log = logging.getLogger("nuisances.chat")
Event = tuple[Literal["safety", "delta", "done", "error"], Any]
_POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused after detection: its HTTP status, error code and card."""

    status: int
    code: str
    safety: SafetyPayload
    retry_after_s: int | None = None  # when the client may send again (429)


def _contacts_payload(services: Services, ids: tuple[str, ...]) -> list[dict[str, str]]:
    snapshot = services.directory.snapshot
    found = []
    for contact_id in ids:
        contact = snapshot.get(contact_id)
        if contact is not None:
            found.append({"id": contact.id, "name": contact.name, "number": contact.number})
    return found


async def _db(services: Services, function: Any, *args: Any, **kwargs: Any) -> Any:
    return await services.stored(function, *args, **kwargs)


def lease(services: Services) -> timedelta:
    """How long a running turn's row stays ours without a renewal."""
    return timedelta(seconds=services.settings.turn_lease_s)


async def _wait_for_row(
    services: Services, turn_id: int, until: datetime | None, deadline: float
) -> dict[str, Any] | None:
    """Wait for a turn another process runs; its stored response, or None when it ended
    without one or its lease ran out (then it can be taken over)."""
    while time.monotonic() < deadline:
        if until is not None and datetime.now(UTC) >= until:
            return None
        try:
            state, response = await _db(services, repository.turn_state, turn_id)
        except Exception:
            return None
        if state == "done":
            return response  # type: ignore[no-any-return]
        if state != "running":
            return None
        await asyncio.sleep(_POLL_S)
    return None


def _replay(stored: dict[str, Any], safety: SafetyPayload) -> ChatResponse:
    """A stored answer, with the card of the message received now."""
    return ChatResponse.model_validate(
        {**stored, "safety": safety.model_dump(mode="json"), "replayed": True}
    )


async def run_chat(
    services: Services, device_id: str, request: ChatRequest
) -> AsyncGenerator[Event, None]:
    """``safety``, then ``delta``* and ``done``, or ``error``: no path ends without one."""
    started = time.perf_counter()
    safety: SafetyPayload | None = None
    done = False
    try:
        answer = _answer(services, device_id, request, started)
        async with contextlib.aclosing(answer):
            async for kind, payload in answer:
                if kind == "safety":
                    safety = payload
                done = done or kind in ("done", "error")
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

    key = TurnKey(device_id, request.conversation_id, request.client_message_id)
    digest = repository.message_digest(request.message)
    conflict: Event = ("error", Refusal(409, "idempotency_conflict", safety))
    deadline = time.monotonic() + settings.retry_wait_s
    # This process first: a turn answered during an outage, not yet replayed, or one running.
    while True:
        remembered = services.outage.answered.get(key)
        if remembered is not None:
            if remembered[0] != digest:
                services.metrics.conflicts.inc()
                yield conflict
                return
            replay = _replay(remembered[1], safety)
            yield ("delta", replay.text)
            yield ("done", replay)
            return
        running = services.in_flight.get(key)
        if running is None:
            break
        if running.digest != digest:
            services.metrics.conflicts.inc()
            yield conflict
            return
        try:
            stored = await asyncio.wait_for(
                asyncio.shield(running.future), max(0.0, deadline - time.monotonic())
            )
        except TimeoutError:
            stored = None
        if stored is not None:
            replay = _replay(stored, safety)
            yield ("delta", replay.text)
            yield ("done", replay)
            return
        if time.monotonic() >= deadline:
            break
        # The first try ended without an answer (cancelled): look again, then claim it.

    # At most ``device_turns`` turns of one device at once: here first (it holds while the
    # database is away), then across processes when the turn is claimed.
    limit = settings.admission.device_turns
    if sum(1 for k in services.in_flight if k.device_id == device_id) >= limit:
        yield _too_many(services, safety)
        return
    mine = InFlight(digest, asyncio.get_running_loop().create_future())
    services.in_flight[key] = mine
    try:
        # The card is out; the rest of the turn waits for a place (``server.turn_gate``).
        async with services.gate.turn() as place:
            claimed = _claimed(services, request, key, detection, safety, mine, started, place)
            async with contextlib.aclosing(claimed):
                async for event in claimed:
                    yield event
        if not mine.future.done():
            mine.future.set_result(None)
    except (asyncio.CancelledError, GeneratorExit):
        if mine.turn_id is not None and not mine.future.done():  # not once it was answered
            await asyncio.shield(_cancel(services, mine.turn_id))
        raise
    finally:
        if not mine.future.done():
            mine.future.set_result(None)
        if services.in_flight.get(key) is mine:
            del services.in_flight[key]


async def _claimed(
    services: Services,
    request: ChatRequest,
    key: TurnKey,
    detection: Detection,
    safety: SafetyPayload,
    mine: InFlight,
    started: float,
    place: Place,
) -> AsyncGenerator[Event, None]:
    """Claim the key in the database (or go on without it), run the turn, keep it."""
    settings = services.settings
    detection_ms = round((time.perf_counter() - started) * 1000, 3)
    reaches_model = not isinstance(services.provider, NoProvider)
    limits = (settings.admission.quota_per_device, settings.admission.quota_global)
    deadline = time.monotonic() + settings.retry_wait_s
    prepared: repository.Prepared | None = None
    database_ok = True
    for _attempt in range(4):
        try:
            prepared = await _db(
                services,
                repository.prepare_turn,
                history_turns=settings.history_turns,
                quota=limits if reaches_model else None,
                key=key,
                message=request.message,
                category=detection.category,
                rules=detection.rules,
                topics=detection.topics,
                region=request.region,
                lease=lease(services),
                max_running=settings.admission.device_turns,
            )
        except Exception as exc:
            log.warning("database unavailable for a turn", extra={"error": type(exc).__name__})
            database_ok = False
            prepared = None
            break
        claim = prepared.claim
        if claim.state == "too_many":
            yield _too_many(services, safety)
            return
        if claim.state == "conflict":
            services.metrics.conflicts.inc()
            yield ("error", Refusal(409, "idempotency_conflict", safety))
            return
        if claim.claimed:
            mine.turn_id = claim.turn_id
            break
        stored = (
            claim.response
            if claim.state == "done" and claim.response is not None
            else await _wait_for_row(services, claim.turn_id, claim.lease_until, deadline)
        )
        if stored is not None:
            mine.future.set_result(stored)
            replay = _replay(stored, safety)
            yield ("delta", replay.text)
            yield ("done", replay)
            return
        prepared = None  # the first try ended without an answer: claim again (then it is ours)
        if time.monotonic() >= deadline:
            break

    if prepared is None and database_ok:  # could not claim within the wait: answer, unstored
        fallback = _unavailable(services, detection, started)
        yield ("delta", fallback.text)
        yield ("done", _response(services, request, None, safety, fallback, detection_ms))
        return

    quota = None
    if prepared is not None:
        quota = prepared.quota
        if quota is not None:
            services.outage.known_counts[key.device_id] = (quota[0] + 1, quota[1] + 1)
    elif reaches_model:
        quota = services.outage.counts(key.device_id)
    history = [
        m
        for message, reply in (prepared.history if prepared is not None else [])
        for m in (Message("user", message), Message("assistant", reply))
    ]
    turn = TurnRequest(
        text=request.message,
        category=detection.category,
        topics=detection.topics,
        device_id=key.device_id,
        history=history,
        request_id=request_id.get(),
        quota_counts=quota,
        tags=services.tags.for_turn(key.device_id, key.conversation_id, request.message),
        around_model=place.released,
    )
    result: TurnResult | None = None
    turn_events = chat_turn(services.assistant, turn)
    async with contextlib.aclosing(turn_events):
        async for event in turn_events:
            if isinstance(event, Delta):
                yield ("delta", event.text)
            else:
                result = event
    if result is None:  # chat_turn always ends with a TurnResult
        raise RuntimeError("the model turn ended without a result")
    response = _response(services, request, mine.turn_id, safety, result, detection_ms)
    _observe(services, detection, result)
    stored_in = "database"
    if mine.turn_id is None or not await _store(
        services, mine.turn_id, request, result, response, detection_ms
    ):
        record = _spool_record(request, key, mine.digest, result, response, detection_ms)
        record["admitted"] = prepared is None and quota is not None
        stored_in = "spool" if services.spooled(key, mine.digest, record) else "nowhere"
        services.metrics.spooled.inc()
    log.info(
        "turn answered",
        extra={
            "turn_id": mine.turn_id,
            "category": detection.category,
            "rules": list(detection.rules),
            "status": result.status,
            "source": result.source,
            "stored": stored_in,
            "total_ms": result.timings.total_ms,
        },
    )
    mine.future.set_result(response.model_dump(mode="json"))
    yield ("done", response)


def _too_many(services: Services, safety: SafetyPayload) -> Event:
    services.metrics.refused.labels("too_many_turns").inc()
    retry = services.settings.admission.retry_after_s
    return ("error", Refusal(429, "too_many_turns", safety, retry))


def _observe(services: Services, detection: Detection, result: TurnResult) -> None:
    services.metrics.turns.labels(detection.category, result.status, result.source).inc()
    if result.timings.queue_wait_ms is not None:
        services.metrics.queue_wait.observe(result.timings.queue_wait_ms / 1000)
    if result.timings.first_token_ms is not None:
        services.metrics.first_token.observe(result.timings.first_token_ms / 1000)
    services.metrics.total.observe(result.timings.total_ms / 1000)
    services.metrics.masked_numbers.inc(result.masked_numbers)
    services.metrics.markup_removed.inc(result.markup_removed)


def _turn_fields(
    request: ChatRequest,
    result: TurnResult,
    response: ChatResponse,
    detection_ms: float,
) -> dict[str, Any]:
    return {
        "reply": result.text,
        "status": result.status,
        "source": result.source,
        "model": result.model,
        "model_called": result.model_called,
        "prompt_hash": result.prompt_hash,
        "response": response.model_dump(mode="json"),
        "detection_ms": detection_ms,
        "queue_wait_ms": result.timings.queue_wait_ms,
        "first_token_ms": result.timings.first_token_ms,
        "total_ms": result.timings.total_ms,
        "tokens": result.timings.tokens,
    }


def _spool_record(
    request: ChatRequest,
    key: TurnKey,
    digest: str,
    result: TurnResult,
    response: ChatResponse,
    detection_ms: float,
) -> dict[str, Any]:
    now = datetime.now(UTC)
    safety = response.safety
    return {
        "key": dataclasses.asdict(key),
        "day": now.date().isoformat(),
        "turn": {
            "created_at": now.isoformat(),
            "message": request.message,
            "message_hash": digest,
            "category": safety.category,
            "rules": safety.rules,
            "topics": safety.topics,
            "region": request.region,
            **_turn_fields(request, result, response, detection_ms),
        },
    }


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
    request: ChatRequest,
    result: TurnResult,
    response: ChatResponse,
    detection_ms: float,
) -> bool:
    """Finish the turn's row; False when the database is away (the caller spools it)."""
    try:
        await _db(
            services,
            repository.finish_turn,
            turn_id,
            **_turn_fields(request, result, response, detection_ms),
        )
    except Exception as exc:
        log.warning(
            "could not store a turn", extra={"turn_id": turn_id, "error": type(exc).__name__}
        )
        return False
    return True


async def _cancel(services: Services, turn_id: int) -> None:
    try:
        await _db(services, repository.mark_cancelled, turn_id)
    except Exception as exc:
        log.warning("could not mark a turn cancelled", extra={"error": type(exc).__name__})
