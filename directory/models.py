"""Local contacts in the database: the ``local_contacts`` table and the functions on it.

An operator adds contacts per département (mairie, police municipale, bailleur, centre
antipoison of the region, médiateur) with ``nuisances directory import``. ``DirectoryBase``
is a declarative base of its own: the server's migrations include ``DirectoryBase.metadata``.

The functions take a ``Session`` and never commit: the caller owns the transaction.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError
from sqlalchemy import JSON, DateTime, MetaData, String, Text, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from directory.contact import Contact
from directory.national import national_ids

__all__ = [
    "DirectoryBase",
    "ImportReport",
    "LocalContactRow",
    "fingerprint",
    "load_local_contacts",
    "upsert_contacts",
]

logger = logging.getLogger(__name__)

_NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class DirectoryBase(DeclarativeBase):
    """The declarative base of the directory's tables."""

    metadata = MetaData(naming_convention=_NAMING)


class LocalContactRow(DirectoryBase):
    """One local contact; list fields are JSON arrays; ``updated_at`` moves on every change."""

    __tablename__ = "local_contacts"

    id: Mapped[str] = mapped_column(String(63), primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    number: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16))
    region: Mapped[str] = mapped_column(String(3), index=True)
    description: Mapped[str] = mapped_column(Text)
    hours: Mapped[str] = mapped_column(String(120))
    categories: Mapped[list[str]] = mapped_column(JSON)
    topics: Mapped[list[str]] = mapped_column(JSON)
    aliases: Mapped[list[str]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    def contact(self) -> Contact:
        """The row as a validated ``Contact`` (raises ``ValidationError`` if it is not one)."""
        return Contact.model_validate({name: getattr(self, name) for name in Contact.model_fields})

    def assign(self, contact: Contact, now: datetime) -> None:
        """Copy every field of ``contact`` into the row and stamp it."""
        self.name = contact.name
        self.number = contact.number
        self.kind = contact.kind
        self.region = _region(contact)
        self.description = contact.description
        self.hours = contact.hours
        self.categories = list(contact.categories)
        self.topics = list(contact.topics)
        self.aliases = list(contact.aliases)
        self.updated_at = now


def _region(contact: Contact) -> str:
    if contact.region is None:
        raise ValueError(f"contact {contact.id!r}: a local contact needs a region")
    return contact.region


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an upsert did, by contact id (each list in input order)."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated)


def load_local_contacts(session: Session) -> list[Contact]:
    """Every valid local contact, by région then id.

    A row that no longer validates (edited by hand, or a number the phone metadata now
    rejects) is skipped with a warning naming it: one bad row must not hide the others.
    """
    contacts: list[Contact] = []
    rows = session.scalars(
        select(LocalContactRow).order_by(LocalContactRow.region, LocalContactRow.id)
    )
    for row in rows:
        try:
            contacts.append(row.contact())
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            logger.warning("local contact %r skipped: %s", row.id, reason)
    return contacts


def upsert_contacts(session: Session, contacts: Iterable[Contact]) -> ImportReport:
    """Add new contacts and update changed ones; rows absent from ``contacts`` are untouched.

    Idempotent: the same input twice reports every id unchanged the second time. Every
    contact needs a region and an id of its own (not a national one): ``ValueError``
    otherwise, before anything is written. Flushes, does not commit.
    """
    batch = list(contacts)
    ids = [contact.id for contact in batch]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate ids in one upsert")
    reserved = national_ids()
    for contact in batch:
        _region(contact)
        if contact.id in reserved:
            raise ValueError(f"contact {contact.id!r}: this id belongs to a national contact")
    existing = (
        {
            row.id: row
            for row in session.scalars(select(LocalContactRow).where(LocalContactRow.id.in_(ids)))
        }
        if ids
        else {}
    )
    now = datetime.now(UTC)
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for contact in batch:
        row = existing.get(contact.id)
        if row is None:
            row = LocalContactRow(id=contact.id)
            row.assign(contact, now)
            session.add(row)
            added.append(contact.id)
        elif _same(row, contact):
            unchanged.append(contact.id)
        else:
            row.assign(contact, now)
            updated.append(contact.id)
    session.flush()
    return ImportReport(tuple(added), tuple(updated), tuple(unchanged))


def _same(row: LocalContactRow, contact: Contact) -> bool:
    try:
        return row.contact() == contact
    except ValidationError:
        return False


def fingerprint(session: Session) -> str:
    """A value that changes whenever the table changes: count, latest stamp, digest of stamps.

    Reads two columns of a table of a few hundred rows; cheap enough to poll. Changes made
    outside ``upsert_contacts`` must move ``updated_at`` to be seen.
    """
    count, latest = session.execute(
        select(func.count(), func.max(LocalContactRow.updated_at))
    ).one()
    digest = hashlib.sha256()
    rows = session.execute(
        select(LocalContactRow.id, LocalContactRow.updated_at).order_by(LocalContactRow.id)
    )
    for contact_id, stamp in rows:
        digest.update(f"{contact_id}\x1f{stamp.isoformat()}\x1e".encode())
    latest_text = latest.isoformat() if isinstance(latest, datetime) else str(latest)
    return f"{count}:{latest_text}:{digest.hexdigest()[:16]}"
