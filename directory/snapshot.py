"""The directory in memory: an immutable snapshot, and the store that swaps it.

The card is computed from a ``Directory`` snapshot and never touches the database at request
time. ``DirectoryStore`` holds the current snapshot; ``reload`` builds a new one from the
national data and the ``local_contacts`` table, ``watch`` polls the table's fingerprint and
reloads when it moves. When the database cannot be read, the store keeps the snapshot it has
(national-only at start) and logs a warning: the card is always available.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType

from sqlalchemy.orm import Session

from directory.card import CARD_IDS, card_ids
from directory.contact import CATEGORIES, Contact, fold
from directory.models import fingerprint, load_local_contacts
from directory.national import national_contacts

__all__ = ["Directory", "DirectoryStore", "SessionFactory"]

logger = logging.getLogger(__name__)

SessionFactory = Callable[[], Session]


def _keys(contact: Contact) -> set[str]:
    return {fold(contact.id), fold(contact.name), contact.dial, *map(fold, contact.aliases)}


class Directory:
    """An immutable snapshot of national and local contacts, indexed for the card."""

    __slots__ = ("_by_id", "_contacts", "_local_keys", "_locals", "_national_keys")

    def __init__(self, national: Sequence[Contact], local: Iterable[Contact] = ()):
        by_id: dict[str, Contact] = {}
        national_keys: dict[str, Contact] = {}
        for contact in national:
            if contact.region is not None or contact.id in by_id:
                raise ValueError(f"national contact {contact.id!r}: duplicate or regional")
            by_id[contact.id] = contact
            for key in _keys(contact):
                other = national_keys.setdefault(key, contact)
                if other is not contact:
                    raise ValueError(f"{contact.id!r} and {other.id!r} share the name {key!r}")
        missing = CARD_IDS - by_id.keys()
        if missing:
            raise ValueError(f"the cards need national contacts {sorted(missing)}")
        locals_: list[Contact] = []
        local_keys: dict[str, list[Contact]] = {}
        for contact in local:
            if contact.region is None or contact.id in by_id:
                logger.warning("local contact %r skipped: no region or id taken", contact.id)
                continue
            by_id[contact.id] = contact
            locals_.append(contact)
            for key in _keys(contact):
                local_keys.setdefault(key, []).append(contact)
        self._by_id = MappingProxyType(by_id)
        self._contacts = tuple(by_id.values())
        self._locals = tuple(locals_)
        self._national_keys = MappingProxyType(national_keys)
        self._local_keys = MappingProxyType({k: tuple(v) for k, v in local_keys.items()})

    @classmethod
    def national_only(cls) -> Directory:
        """The snapshot that needs no database."""
        return cls(national_contacts())

    @property
    def contacts(self) -> tuple[Contact, ...]:
        """Every contact: national ones in file order, then local ones by region and id."""
        return self._contacts

    @property
    def local_contacts(self) -> tuple[Contact, ...]:
        return self._locals

    def get(self, contact_id: str) -> Contact | None:
        return self._by_id.get(contact_id)

    def find(self, name_or_alias: str, *, region: str | None = None) -> Contact | None:
        """The contact a name, an alias, an id or a number designates (case and accents aside).

        National contacts win; a local contact is returned when it is the only match (in
        ``region``, when given).
        """
        key = fold(name_or_alias)
        if key.replace(" ", "").isdigit():
            key = key.replace(" ", "")
        national = self._national_keys.get(key)
        if national is not None:
            return national
        matches = [c for c in self._local_keys.get(key, ()) if region is None or c.region == region]
        return matches[0] if len(matches) == 1 else None

    def card_for(
        self, categories: Iterable[str], topics: Iterable[str] = (), region: str | None = None
    ) -> list[Contact]:
        """The card for what the detector fired, most relevant first; empty for ``rien``.

        National contacts in the order of ``directory.card``, then the local contacts of
        ``region`` whose categories meet the fired ones (those matching a fired topic first).
        """
        fired = [c for c in CATEGORIES if c in frozenset(categories)]
        topic_set = frozenset(topics)
        card = [self._by_id[i] for i in card_ids(fired, topic_set)]
        if not card or region is None:
            return card

        def rank(contact: Contact) -> tuple[int, int, str]:
            first = min(fired.index(c) for c in contact.categories if c in fired)
            return (first, 0 if topic_set & set(contact.topics) else 1, contact.id)

        local = [
            c
            for c in self._locals
            if c.region == region and any(cat in fired for cat in c.categories)
        ]
        return card + sorted(local, key=rank)


class DirectoryStore:
    """Holds the current ``Directory`` snapshot and replaces it whole when the data change."""

    def __init__(self, snapshot: Directory | None = None):
        self._snapshot = snapshot if snapshot is not None else Directory.national_only()
        self._fingerprint: str | None = None
        self._lock = threading.Lock()
        self._failing = False

    @property
    def snapshot(self) -> Directory:
        """The current snapshot; callers keep the one they got for a whole request."""
        return self._snapshot

    def reload(self, session_factory: SessionFactory) -> bool:
        """Rebuild the snapshot from the national data and the database.

        Returns False, keeping the current snapshot and logging a warning, when the database
        cannot be read.
        """
        with self._lock:
            try:
                with session_factory() as session:
                    stamp = fingerprint(session)
                    local = load_local_contacts(session)
                snapshot = Directory(national_contacts(), local)
            except Exception as exc:
                self._warn(exc)
                return False
            self._snapshot, self._fingerprint = snapshot, stamp
            if self._failing:
                logger.info("directory: database readable again, %d local contacts", len(local))
            self._failing = False
            return True

    def refresh(self, session_factory: SessionFactory) -> bool:
        """Reload only if the table's fingerprint moved; True when a new snapshot was built."""
        try:
            with session_factory() as session:
                stamp = fingerprint(session)
        except Exception as exc:
            self._warn(exc)
            return False
        if stamp == self._fingerprint and not self._failing:
            return False
        return self.reload(session_factory)

    async def watch(self, session_factory: SessionFactory, interval_s: float) -> None:
        """Poll the fingerprint every ``interval_s`` seconds and reload on change; until
        cancelled. The database calls run in a worker thread."""
        while True:
            await asyncio.to_thread(self.refresh, session_factory)
            await asyncio.sleep(interval_s)

    def _warn(self, exc: Exception) -> None:
        if not self._failing:
            kept = "local and national" if self._snapshot.local_contacts else "national-only"
            logger.warning(
                "directory: cannot read the database (%s: %s); keeping the %s snapshot",
                type(exc).__name__,
                exc,
                kept,
            )
        self._failing = True
