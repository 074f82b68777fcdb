"""What the service reads and writes, as plain functions over a ``Session``.

Run them in a worker thread from async code (``asyncio.to_thread``): they are blocking.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.auth import hash_token, new_token, token_prefix
from server.db.models import Conversation, Device, Turn, utcnow

__all__ = [
    "TurnClaim",
    "claim_turn",
    "conversation_turns",
    "create_device",
    "device_by_token",
    "erase_conversation",
    "finish_turn",
    "history",
    "list_devices",
    "mark_cancelled",
    "prepare_turn",
    "purge_older_than",
    "quota_counts",
    "revoke_device",
    "token_key",
    "turn_state",
]


def create_device(session: Session, label: str) -> tuple[Device, str]:
    """A new device and its token (the only time the token exists in clear)."""
    token = new_token()
    device = Device(
        id=str(uuid.uuid4()),
        label=label,
        token_hash=hash_token(token),
        token_prefix=token_prefix(token),
    )
    session.add(device)
    session.commit()
    return device, token


def token_key(token: str) -> str:
    """The key under which a token is known (its hash: never the token itself)."""
    return hash_token(token)


def device_by_token(session: Session, token: str) -> Device | None:
    device = session.scalar(select(Device).where(Device.token_hash == hash_token(token)))
    if device is None or device.revoked_at is not None:
        return None
    return device


def list_devices(session: Session) -> Sequence[Device]:
    return session.scalars(select(Device).order_by(Device.created_at)).all()


def revoke_device(session: Session, device_id_or_prefix: str) -> Device | None:
    device = session.get(Device, device_id_or_prefix) or session.scalar(
        select(Device).where(Device.token_prefix == device_id_or_prefix)
    )
    if device is None:
        return None
    if device.revoked_at is None:
        device.revoked_at = utcnow()
        session.commit()
    return device


@dataclass(frozen=True, slots=True)
class TurnClaim:
    """The outcome of claiming ``(device, client_message_id)``: ours to run, or someone's."""

    turn_id: int
    claimed: bool  # True: this request runs the turn
    state: str  # the state found (or "running" when just claimed)
    response: dict[str, Any] | None
    started_at: datetime


def _conversation(session: Session, device_id: str, external_id: str) -> Conversation:
    found = session.scalar(
        select(Conversation).where(
            Conversation.device_id == device_id, Conversation.external_id == external_id
        )
    )
    if found is not None:
        return found
    conversation = Conversation(device_id=device_id, external_id=external_id)
    session.add(conversation)
    try:
        session.flush()
    except IntegrityError:  # created meanwhile by a concurrent request
        session.rollback()
        return _conversation(session, device_id, external_id)
    return conversation


def _existing(session: Session, device_id: str, client_message_id: str) -> Turn | None:
    return session.scalar(
        select(Turn).where(Turn.device_id == device_id, Turn.client_message_id == client_message_id)
    )


def claim_turn(
    session: Session,
    *,
    device_id: str,
    conversation_id: str,
    client_message_id: str,
    message: str,
    category: str,
    rules: Sequence[str],
    topics: Sequence[str],
    region: str | None,
    stale_after: timedelta,
) -> TurnClaim:
    """Insert the turn as running, or report the existing one. The unique constraint on
    ``(device_id, client_message_id)`` makes this safe across processes. A cancelled turn, or
    one left running longer than ``stale_after`` (a crashed process), is taken over."""
    existing = _existing(session, device_id, client_message_id)
    if existing is None:
        conversation = _conversation(session, device_id, conversation_id)
        turn = Turn(
            device_id=device_id,
            conversation_id=conversation.id,
            client_message_id=client_message_id,
            message=message,
            category=category,
            rules=list(rules),
            topics=list(topics),
            region=region,
            state="running",
        )
        session.add(turn)
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            existing = _existing(session, device_id, client_message_id)
            if existing is None:
                raise
        else:
            return TurnClaim(turn.id, True, "running", None, turn.created_at)
    started = (
        existing.created_at
        if existing.created_at.tzinfo
        else existing.created_at.replace(tzinfo=UTC)
    )
    if existing.state == "cancelled" or (
        existing.state == "running" and utcnow() - started > stale_after
    ):
        existing.state = "running"
        existing.created_at = utcnow()
        session.commit()
        return TurnClaim(existing.id, True, "running", None, existing.created_at)
    return TurnClaim(existing.id, False, existing.state, existing.response, started)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a turn needs from storage before it runs, read in one go."""

    claim: TurnClaim
    history: list[tuple[str, str]]
    quota: tuple[int, int]  # model calls today: this device, everyone


def prepare_turn(session: Session, *, history_turns: int, **claim: Any) -> Prepared:
    """Claim the turn; when it is ours, read its history and today's quota counts too (one
    round trip to the worker thread and the database instead of three)."""
    found = claim_turn(session, **claim)
    if not found.claimed:
        return Prepared(found, [], (0, 0))
    past = history(session, claim["device_id"], claim["conversation_id"], history_turns)
    return Prepared(found, past, quota_counts(session, claim["device_id"]))


def finish_turn(session: Session, turn_id: int, **fields: Any) -> None:
    turn = session.get(Turn, turn_id)
    if turn is None:
        return
    for name, value in fields.items():
        setattr(turn, name, value)
    turn.state = "done"
    session.commit()


def mark_cancelled(session: Session, turn_id: int) -> None:
    turn = session.get(Turn, turn_id)
    if turn is not None and turn.state == "running":
        turn.state = "cancelled"
        session.commit()


def turn_state(session: Session, turn_id: int) -> tuple[str, dict[str, Any] | None]:
    turn = session.get(Turn, turn_id)
    if turn is None:
        return "missing", None
    session.refresh(turn)
    return turn.state, turn.response


def history(
    session: Session, device_id: str, conversation_id: str, limit: int
) -> list[tuple[str, str]]:
    """The last ``limit`` finished (message, reply) pairs of a conversation, oldest first."""
    rows = session.execute(
        select(Turn.message, Turn.reply)
        .join(Conversation, Turn.conversation_id == Conversation.id)
        .where(
            Conversation.device_id == device_id,
            Conversation.external_id == conversation_id,
            Turn.state == "done",
            Turn.reply.is_not(None),
        )
        .order_by(Turn.id.desc())
        .limit(limit)
    ).all()
    return [(message, reply or "") for message, reply in reversed(rows)]


def quota_counts(session: Session, device_id: str | None) -> tuple[int, int]:
    """Model calls today (UTC): by this device, by everyone. Counted from stored turns."""
    since = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
    base = select(func.count(Turn.id)).where(Turn.model_called.is_(True), Turn.created_at >= since)
    everyone = session.scalar(base) or 0
    mine = session.scalar(base.where(Turn.device_id == device_id)) or 0 if device_id else 0
    return int(mine), int(everyone)


def conversation_turns(session: Session, device_id: str, conversation_id: str) -> list[Turn] | None:
    conversation = session.scalar(
        select(Conversation).where(
            Conversation.device_id == device_id, Conversation.external_id == conversation_id
        )
    )
    return None if conversation is None else list(conversation.turns)


def erase_conversation(session: Session, device_id: str, conversation_id: str) -> int:
    """Delete a conversation and all its turns; the number of turns erased (0: none found)."""
    conversation = session.scalar(
        select(Conversation).where(
            Conversation.device_id == device_id, Conversation.external_id == conversation_id
        )
    )
    if conversation is None:
        return 0
    count = len(conversation.turns)
    session.delete(conversation)  # its turns go with it (cascade)
    session.commit()
    return count


def _deleted(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def purge_older_than(session: Session, age: timedelta) -> tuple[int, int]:
    """Delete turns older than ``age``, then empty conversations: (turns, conversations)."""
    cutoff = utcnow() - age
    turns = _deleted(session.execute(delete(Turn).where(Turn.created_at < cutoff)))
    empty = select(Conversation.id).where(~Conversation.turns.any())
    conversations = _deleted(
        session.execute(delete(Conversation).where(Conversation.id.in_(empty)))
    )
    session.commit()
    return turns, conversations
