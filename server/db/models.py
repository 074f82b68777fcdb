"""Devices (and their hashed tokens), conversations and turns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.db.base import Base

__all__ = ["CachedAnswer", "Conversation", "Device", "QuotaUsage", "Turn", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


class Device(Base):
    """A phone of the app, known by the hash of its bearer token."""

    __tablename__ = "devices"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    label: Mapped[str] = mapped_column(String(120))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    token_prefix: Mapped[str] = mapped_column(String(12))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Conversation(Base):
    __tablename__ = "conversations"
    # AUTOINCREMENT: an id is never given again after an erasure (SQLite would reuse it).
    __table_args__ = (UniqueConstraint("device_id", "external_id"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    external_id: Mapped[str] = mapped_column(String(64))  # the client's conversation_id
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    turns: Mapped[list[Turn]] = relationship(
        back_populates="conversation", cascade="all, delete-orphan", order_by="Turn.id"
    )


class Turn(Base):
    """One message and its answer. ``state`` is running until the answer is stored.

    The idempotency key is (device, conversation, ``client_message_id``); ``message_hash``
    tells a retry of the same message from another message sent under the same key. A running
    turn holds a lease (``lease_until``): past it the turn is taken over or marked failed.
    """

    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("device_id", "conversation_id", "client_message_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    client_message_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, index=True
    )
    # running | done | cancelled | failed (left running by a crash or an outage)
    state: Mapped[str] = mapped_column(String(16), default="running")
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    message: Mapped[str] = mapped_column(Text)
    message_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reply: Mapped[str | None] = mapped_column(Text, nullable=True)
    category: Mapped[str] = mapped_column(String(16))
    rules: Mapped[list[str]] = mapped_column(JSON, default=list)
    topics: Mapped[list[str]] = mapped_column(JSON, default=list)
    region: Mapped[str | None] = mapped_column(String(3), nullable=True)
    status: Mapped[str | None] = mapped_column(String(24), nullable=True)
    source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    model_called: Mapped[bool] = mapped_column(Boolean, default=False)
    prompt_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # the done object
    detection_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    queue_wait_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    first_token_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    total_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    conversation: Mapped[Conversation] = relationship(back_populates="turns")


class CachedAnswer(Base):
    """A validated answer, reusable for the same pseudonymised request (see llm.cache)."""

    __tablename__ = "answer_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Keyed hash of the device and conversation the answer came from: an erasure drops it.
    conversation: Mapped[str] = mapped_column(String(64), index=True, default="")
    answer: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    mac: Mapped[str] = mapped_column(String(64))


class QuotaUsage(Base):
    """Turns admitted to the model layer per UTC day, per device (``scope``) and in all
    (``scope`` ``*``): counted at admission, so erasing conversations gives nothing back."""

    __tablename__ = "quota_usage"

    day: Mapped[str] = mapped_column(String(10), primary_key=True)  # YYYY-MM-DD
    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)


class AuditErasure(Base):
    """An erasure every machine applies to its own audit files (by the conversation's keyed
    hash, never its id), until retention drops it."""

    __tablename__ = "audit_erasures"
    __table_args__ = {"sqlite_autoincrement": True}  # noqa: RUF012 - SQLAlchemy's own form

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, index=True
    )
