"""What the service reads and writes, as plain functions over a ``Session``.

Run them in a worker thread from async code (``asyncio.to_thread``): they are blocking.
"""

from __future__ import annotations

import hashlib
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, text, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.auth import hash_token, new_token, token_prefix
from server.db.models import (
    AuditErasure,
    CachedAnswer,
    Conversation,
    Device,
    QuotaUsage,
    Turn,
    utcnow,
)

__all__ = [
    "Prepared",
    "TurnClaim",
    "TurnKey",
    "admit_quota",
    "claim_turn",
    "compact",
    "conversation_turns",
    "count_usage",
    "create_device",
    "device_by_token",
    "erase_conversation",
    "finish_turn",
    "history",
    "list_devices",
    "mark_cancelled",
    "message_digest",
    "prepare_turn",
    "purge_older_than",
    "quota_counts",
    "recover_turns",
    "renew_leases",
    "restore_turn",
    "revoke_device",
    "token_key",
    "turn_state",
    "valid_devices",
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


def valid_devices(session: Session, keys: Sequence[str]) -> dict[str, str]:
    """Of the token keys given, those still valid: key -> device id (for the token cache)."""
    if not keys:
        return {}
    rows = session.execute(
        select(Device.token_hash, Device.id).where(
            Device.token_hash.in_(list(keys)), Device.revoked_at.is_(None)
        )
    ).all()
    return dict(rows)


def active_tokens(session: Session, limit: int) -> dict[str, str]:
    """Token keys of the devices not revoked, the most recent ``limit``: key -> device id."""
    rows = session.execute(
        select(Device.token_hash, Device.id)
        .where(Device.revoked_at.is_(None))
        .order_by(Device.created_at.desc())
        .limit(limit)
    ).all()
    return dict(rows)


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


def message_digest(message: str) -> str:
    """What tells a retry from another message under the same idempotency key: the message
    NFC-normalised, trimmed, its runs of white space made one space, hashed."""
    normal = " ".join(unicodedata.normalize("NFC", message).split())
    return hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class TurnKey:
    """The idempotency key of a turn."""

    device_id: str
    conversation_id: str  # the client's conversation id
    client_message_id: str


@dataclass(frozen=True, slots=True)
class TurnClaim:
    """The outcome of claiming a turn's key: ours to run, someone's, or a conflict."""

    turn_id: int
    claimed: bool  # True: this request runs the turn
    state: str  # the state found ("running" when just claimed; "conflict": another message)
    response: dict[str, Any] | None
    lease_until: datetime | None


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)  # SQLite gives naive datetimes back


def _conversation(session: Session, device_id: str, external_id: str) -> Conversation:
    found = _find_conversation(session, device_id, external_id)
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


def _find_conversation(session: Session, device_id: str, external_id: str) -> Conversation | None:
    return session.scalar(
        select(Conversation).where(
            Conversation.device_id == device_id, Conversation.external_id == external_id
        )
    )


def _existing(session: Session, key: TurnKey) -> Turn | None:
    return session.scalar(
        select(Turn)
        .join(Conversation, Turn.conversation_id == Conversation.id)
        .where(
            Turn.device_id == key.device_id,
            Conversation.external_id == key.conversation_id,
            Turn.client_message_id == key.client_message_id,
        )
    )


def claim_turn(
    session: Session,
    *,
    key: TurnKey,
    message: str,
    category: str,
    rules: Sequence[str],
    topics: Sequence[str],
    region: str | None,
    lease: timedelta,
    max_running: int | None = None,
) -> TurnClaim:
    """Insert the turn as running, or report the existing one. The unique constraint on the
    key makes this safe across processes. A turn stored under the key with another message is
    a conflict. A cancelled or failed turn, or one whose lease ran out (its process crashed
    or lost the database), is taken over.

    ``max_running``: a new turn is refused (state ``too_many``) while the device already has
    that many turns running under a live lease, whichever process runs them. On PostgreSQL the
    count and the insert hold a transaction-level advisory lock on the device, so two
    processes cannot both take the last place."""
    digest = message_digest(message)
    existing = _existing(session, key)
    now = utcnow()
    if max_running is not None and (existing is None or existing.state != "running"):
        if session.get_bind().dialect.name == "postgresql":
            session.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                {"key": f"nuisances:device-turns:{key.device_id}"},
            )
        running = session.scalar(
            select(func.count())
            .select_from(Turn)
            .where(Turn.device_id == key.device_id, Turn.state == "running", Turn.lease_until > now)
        )
        if (running or 0) >= max_running:
            session.rollback()
            return TurnClaim(0, False, "too_many", None, None)
    if existing is None:
        conversation = _conversation(session, key.device_id, key.conversation_id)
        turn = Turn(
            device_id=key.device_id,
            conversation_id=conversation.id,
            client_message_id=key.client_message_id,
            message=message,
            message_hash=digest,
            category=category,
            rules=list(rules),
            topics=list(topics),
            region=region,
            state="running",
            lease_until=now + lease,
        )
        session.add(turn)
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            existing = _existing(session, key)
            if existing is None:
                raise
        else:
            return TurnClaim(turn.id, True, "running", None, turn.lease_until)
    if (existing.message_hash or message_digest(existing.message)) != digest:
        return TurnClaim(existing.id, False, "conflict", None, None)
    lease_until = _aware(existing.lease_until)
    if existing.state in ("cancelled", "failed") or (
        existing.state == "running" and (lease_until is None or lease_until <= now)
    ):
        existing.state = "running"
        existing.created_at = now
        existing.lease_until = now + lease
        existing.category, existing.rules, existing.topics = category, list(rules), list(topics)
        session.commit()
        return TurnClaim(existing.id, True, "running", None, existing.lease_until)
    return TurnClaim(existing.id, False, existing.state, existing.response, lease_until)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a turn needs from storage before it runs, read in one go."""

    claim: TurnClaim
    history: list[tuple[str, str]]
    quota: tuple[int, int] | None  # admitted turns today before this one (device, everyone)


def prepare_turn(
    session: Session,
    *,
    history_turns: int,
    quota: tuple[int | None, int | None] | None,
    **claim: Any,
) -> Prepared:
    """Claim the turn; when it is ours, read its history and admit it to today's quota (one
    round trip to the worker thread instead of three). ``quota`` is (per device, global),
    ``None`` for a turn that will not reach a model."""
    found = claim_turn(session, **claim)
    if not found.claimed:
        return Prepared(found, [], None)
    key: TurnKey = claim["key"]
    past = history(session, key.device_id, key.conversation_id, history_turns)
    counts = None if quota is None else admit_quota(session, key.device_id, *quota)
    return Prepared(found, past, counts)


def _today() -> str:
    return utcnow().date().isoformat()


def _insert(session: Session) -> Any:
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


def _usage_row(session: Session, day: str, scope: str, calls: int = 0) -> None:
    statement = _insert(session)(QuotaUsage).values(day=day, scope=scope, calls=calls)
    if calls:
        session.execute(
            statement.on_conflict_do_update(
                index_elements=["day", "scope"],
                set_={"calls": QuotaUsage.calls + statement.excluded.calls},
            )
        )
    else:
        session.execute(statement.on_conflict_do_nothing(index_elements=["day", "scope"]))


def admit_quota(
    session: Session, device_id: str, per_device: int | None, global_: int | None
) -> tuple[int, int]:
    """Count one turn against today's quotas, atomically, unless a limit is reached.

    The counts before this turn (device, everyone); a refused turn is not counted and gets
    counts at the limit, which ``llm.admission.Quotas`` turns into ``quota``. Each increment
    is a conditional ``UPDATE``: concurrent admissions serialise on the row, so two processes
    can never both take the last place.
    """
    day = _today()
    _usage_row(session, day, device_id)
    _usage_row(session, day, "*")
    for scope, limit in ((device_id, per_device), ("*", global_)):
        bounded = true() if limit is None else QuotaUsage.calls < limit
        result = session.execute(
            update(QuotaUsage)
            .where(QuotaUsage.day == day, QuotaUsage.scope == scope, bounded)
            .values(calls=QuotaUsage.calls + 1)
        )
        if _deleted(result) == 0:
            session.rollback()
            return quota_counts(session, device_id)
    counts = quota_counts(session, device_id)
    session.commit()
    return counts[0] - 1, counts[1] - 1


def quota_counts(session: Session, device_id: str | None) -> tuple[int, int]:
    """Turns admitted today (UTC): by this device, by everyone."""
    day = _today()
    rows = dict(
        session.execute(
            select(QuotaUsage.scope, QuotaUsage.calls).where(
                QuotaUsage.day == day, QuotaUsage.scope.in_([device_id or "*", "*"])
            )
        ).all()
    )
    return int(rows.get(device_id or "", 0)), int(rows.get("*", 0))


def count_usage(session: Session, day: str, device_id: str, calls: int) -> None:
    """Add turns admitted while the database was away (spool replay): no limit applies."""
    _usage_row(session, day, device_id, calls)
    _usage_row(session, day, "*", calls)


def finish_turn(session: Session, turn_id: int, **fields: Any) -> None:
    turn = session.get(Turn, turn_id)
    if turn is None:
        return
    for name, value in fields.items():
        setattr(turn, name, value)
    turn.state = "done"
    turn.lease_until = None
    session.commit()


def restore_turn(session: Session, key: TurnKey, fields: Mapping[str, Any]) -> bool:
    """Store a turn answered while the database was away (from the spool), exactly once:
    a turn already done under its key is left alone; a running or failed one is finished; a
    missing one is inserted. True when something was written."""
    existing = _existing(session, key)
    if existing is not None and existing.state == "done":
        return False
    values = {name: value for name, value in fields.items() if name != "created_at"}
    if existing is None:
        conversation = _conversation(session, key.device_id, key.conversation_id)
        existing = Turn(
            device_id=key.device_id,
            conversation_id=conversation.id,
            client_message_id=key.client_message_id,
            created_at=datetime.fromisoformat(fields["created_at"]),
            **values,
        )
        session.add(existing)
    else:
        for name, value in values.items():
            setattr(existing, name, value)
    existing.state = "done"
    existing.lease_until = None
    session.flush()
    if isinstance(existing.response, dict):  # answered without an id: it has one now
        existing.response = {**existing.response, "turn_id": existing.id}
    return True


def mark_cancelled(session: Session, turn_id: int) -> None:
    turn = session.get(Turn, turn_id)
    if turn is not None and turn.state == "running":
        turn.state = "cancelled"
        turn.lease_until = None
        session.commit()


def turn_state(session: Session, turn_id: int) -> tuple[str, dict[str, Any] | None]:
    turn = session.get(Turn, turn_id)
    if turn is None:
        return "missing", None
    session.refresh(turn)
    return turn.state, turn.response


def renew_leases(session: Session, turn_ids: Sequence[int], seconds: float) -> None:
    """The turns this process runs are still running: push their leases forward."""
    session.execute(
        update(Turn)
        .where(Turn.id.in_(list(turn_ids)), Turn.state == "running")
        .values(lease_until=utcnow() + timedelta(seconds=seconds))
    )
    session.commit()


def recover_turns(session: Session) -> int:
    """Mark failed the turns left running past their lease (a crash, an outage): a retry
    then takes them over at once. The number of turns marked."""
    result = session.execute(
        update(Turn)
        .where(Turn.state == "running", (Turn.lease_until < utcnow()) | Turn.lease_until.is_(None))
        .values(state="failed", lease_until=None)
    )
    session.commit()
    return _deleted(result)


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


def conversation_turns(session: Session, device_id: str, conversation_id: str) -> list[Turn] | None:
    conversation = _find_conversation(session, device_id, conversation_id)
    return None if conversation is None else list(conversation.turns)


def erase_conversation(
    session: Session, device_id: str, conversation_id: str, cache_tag: str
) -> int:
    """Delete a conversation, all its turns and every cached answer derived from it, in one
    transaction; the number of turns erased (0: none found)."""
    conversation = _find_conversation(session, device_id, conversation_id)
    if conversation is None:
        return 0
    count = len(conversation.turns)
    session.execute(delete(CachedAnswer).where(CachedAnswer.conversation == cache_tag))
    session.delete(conversation)  # its turns go with it (cascade)
    # Every machine's audit files must lose the conversation too (``erasures_after``).
    session.add(AuditErasure(conversation=cache_tag))
    session.commit()
    return count


def erasures_after(session: Session, last_id: int) -> list[tuple[int, str]]:
    """Erasures recorded after ``last_id``, oldest first: (id, conversation's keyed hash)."""
    rows = session.execute(
        select(AuditErasure.id, AuditErasure.conversation)
        .where(AuditErasure.id > last_id)
        .order_by(AuditErasure.id)
    )
    return [(int(row[0]), str(row[1])) for row in rows]


def compact(session: Session) -> None:
    """After an erasure or a purge: on SQLite, move the write-ahead log into the database and
    truncate it (``secure_delete`` has zeroed the freed content), so no copy of what was
    erased is left in the log. PostgreSQL needs nothing here (see the README)."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))


def _deleted(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def purge_older_than(session: Session, age: timedelta) -> tuple[int, int]:
    """Delete turns older than ``age``, then empty conversations and cached answers older
    than ``age``: (turns, conversations)."""
    cutoff = utcnow() - age
    turns = _deleted(session.execute(delete(Turn).where(Turn.created_at < cutoff)))
    empty = select(Conversation.id).where(~Conversation.turns.any())
    conversations = _deleted(
        session.execute(delete(Conversation).where(Conversation.id.in_(empty)))
    )
    session.execute(delete(CachedAnswer).where(CachedAnswer.created_at < cutoff.timestamp()))
    # An erasure older than the retention has nothing left to erase: the audit lines it was
    # for are older still, and go with the same purge on every machine.
    session.execute(delete(AuditErasure).where(AuditErasure.created_at < cutoff))
    session.commit()
    return turns, conversations
