"""Model slots shared by every API process of a deployment, as PostgreSQL advisory locks.

Several processes (workers, machines) in front of the same model servers must never run more
generations on a server than it has slots, and must share the waiting places fairly. Each
slot is a session-level advisory lock ``(server key, slot number)``; a waiting place is a lock
too, and so is a device's right to wait. A process holds all of its locks on one connection
of its own, so a process that crashes loses its session and PostgreSQL frees its slots and
places at once: the lease is the connection. (Locks are re-entrant within a session: this
process keeps the set it holds and never asks twice for one.)

Keys are derived from the server's URL (a slot of ``http://pc-llm:11434`` is the same lock for
every process that talks to it) and from a hash of the device. Waiters are served first come,
first served across processes: each draws a ticket from a sequence (migration 0005) and holds
it as a lock too, and only the holders of the oldest tickets (as many as there are slots) may
take a slot when one frees. One poller per process looks every ``poll_s`` for its waiters; a
newcomer does not take a free slot while turns wait anywhere.

When PostgreSQL cannot be reached, turns fall back to this process's ``LocalSlots``: the
person still gets an answer, and the bound holds per process until the database is back.
When it has no connection left to give, a turn is ``busy`` rather than counted locally.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from llm.admission import Grant, LocalSlots
from llm.errors import Busy

__all__ = ["PgSlots", "conninfo"]

log = logging.getLogger("nuisances.slots")

_MASK = 0x7FFFFFFF
Key = tuple[int, int]


def conninfo(database_url: str) -> str:
    """A libpq URI from the service's SQLAlchemy URL (``postgresql+psycopg://...``)."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _key(name: str) -> int:
    """A stable, positive 31-bit lock key (pg_locks would show a negative one unsigned)."""
    return zlib.crc32(name.encode("utf-8")) & _MASK


def _device_key(device: str) -> int:
    return int.from_bytes(hashlib.sha256(device.encode("utf-8")).digest()[:4], "big") & _MASK


_WAITING = _key("nuisances:waiting")
_DEVICE = _key("nuisances:device-waiting")
_TICKET = _key("nuisances:ticket")


def _exhausted(exc: BaseException) -> bool:
    """PostgreSQL refused a connection for want of one (not: it is away)."""
    return getattr(exc, "sqlstate", None) == "53300" or "too many clients" in str(exc)


@dataclass(eq=False)
class _Waiter:
    avoid: frozenset[int]
    ticket: int
    granted: asyncio.Future[tuple[int, Key]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class PgSlots:
    def __init__(
        self,
        database_url: str,
        servers: Sequence[tuple[str, int]],
        max_waiting: int = 4,
        wait_s: float = 20.0,
        device_waiting: int = 1,
        poll_s: float = 0.05,
        connect_s: float = 2.0,
    ) -> None:
        self._conninfo = conninfo(database_url)
        self.servers = [(_key(f"nuisances:slot:{url}"), parallel) for url, parallel in servers]
        self.max_waiting = max_waiting
        self.wait_s = wait_s
        self.device_waiting = device_waiting
        self.poll_s = poll_s
        self.connect_s = connect_s
        self.local = LocalSlots([p for _, p in servers], max_waiting, wait_s, device_waiting)
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the connection
        self._held: set[Key] = set()  # the locks this process holds
        self._queue: collections.deque[_Waiter] = collections.deque()
        self._poller: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @property
    def waiting(self) -> int:
        return len(self._queue) + self.local.waiting

    def mark(self, server: int, up: bool) -> None:
        self.local.mark(server, up)  # one record of the servers down, used by both

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()
        self._connection = None

    # -- statements ---------------------------------------------------------------------------

    async def _rows(self, statement: str, params: tuple[int, ...]) -> list[tuple[Any, ...]]:
        """Run one statement on this process's connection (made again if it was lost)."""
        async with self._lock:
            if self._connection is None or self._connection.closed:
                await self._connect()
            assert self._connection is not None  # noqa: S101 - just made
            try:
                cursor = await self._connection.execute(statement, params)
            except psycopg.OperationalError:
                with contextlib.suppress(Exception):
                    await self._connection.close()
                raise
            return list(await cursor.fetchall())

    async def _value(self, statement: str, params: tuple[int, ...]) -> Any:
        rows = await self._rows(statement, params)
        return rows[0][0] if rows else None

    async def _connect(self) -> None:
        self._connection = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, connect_timeout=max(1, round(self.connect_s))
        )
        if self._held:  # a new session after a lost one: take back what our turns still hold
            lost = []
            for a, b in sorted(self._held):
                cursor = await self._connection.execute(
                    "SELECT pg_try_advisory_lock(%s::int4, %s::int4)", (a, b)
                )
                row = await cursor.fetchone()
                if not (row and row[0]):
                    lost.append((a, b))
            if lost:
                log.warning("slots taken by another process while the database was away",
                            extra={"count": len(lost)})  # fmt: skip

    async def _try(self, key: Key) -> bool:
        if key in self._held:
            return False
        self._held.add(key)  # ours while we ask: no other turn of this process asks for it
        try:
            got = bool(await self._value("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", key))
        except BaseException:
            self._held.discard(key)
            raise
        if not got:
            self._held.discard(key)
        return got

    async def _unlock(self, key: Key) -> None:
        self._held.discard(key)
        with contextlib.suppress(Exception):
            await self._value("SELECT pg_advisory_unlock(%s::int4, %s::int4)", key)

    async def _take_slot(self, avoid: frozenset[int]) -> tuple[int, Key] | None:
        order = sorted(
            (i for i in range(len(self.servers)) if i not in avoid), key=self.local.is_down
        )
        for server in order:
            key, parallel = self.servers[server]
            for number in range(parallel):
                if await self._try((key, number)):
                    return server, (key, number)
        return None

    async def _someone_waits(self) -> bool:
        if self._queue:
            return True
        count = await self._value(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::int4::oid AND objsubid = 2",
            (_WAITING,),
        )
        return bool(count)

    async def _first_tickets(self, count: int) -> set[int]:
        """The ``count`` oldest tickets of the turns waiting now, in every process."""
        rows = await self._rows(
            "SELECT objid::int8 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::int4::oid AND objsubid = 2 ORDER BY objid LIMIT %s",
            (_TICKET, count),
        )
        return {int(row[0]) for row in rows}

    # -- the protocol ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def slot(
        self, device: str | None = None, avoid: frozenset[int] = frozenset()
    ) -> AsyncIterator[Grant]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            server, key = await self._acquire(device, avoid, started)
        except (psycopg.Error, OSError) as exc:
            if _exhausted(exc):
                raise Busy("the database has no connection to spare", stage="admission") from exc
            log.warning(
                "slots without the database: counted in this process",
                extra={"error": type(exc).__name__},
            )
            async with self.local.slot(device, avoid) as grant:
                yield grant
            return
        try:
            yield Grant(server, loop.time() - started)
        finally:
            await asyncio.shield(self._unlock(key))
            self._wake.set()  # a waiter of this process may take it at once

    async def _acquire(
        self, device: str | None, avoid: frozenset[int], started: float
    ) -> tuple[int, Key]:
        if not await self._someone_waits():
            got = await self._take_slot(avoid)
            if got is not None:
                return got
        places: list[Key] = []
        try:
            if device is not None:
                mine = _device_key(device)
                for number in range(self.device_waiting):
                    if await self._try(((_DEVICE + number) & _MASK, mine)):
                        places.append(((_DEVICE + number) & _MASK, mine))
                        break
                else:
                    raise Busy("this device already waits", stage="admission")
            for number in range(self.max_waiting):
                if await self._try((_WAITING, number)):
                    places.append((_WAITING, number))
                    break
            else:
                raise Busy(f"{self.max_waiting} turns already waiting", stage="admission")
            return await self._wait(avoid, started)
        finally:  # the places are left as soon as a slot is ours, or never will be
            for place in places:
                await asyncio.shield(self._unlock(place))

    async def _wait(self, avoid: frozenset[int], started: float) -> tuple[int, Key]:
        ticket = int(await self._value("SELECT nextval('slot_tickets')::int4", ()))
        if not await self._try((_TICKET, ticket)):  # only after 2**31 tickets, at a wrap
            raise Busy("no ticket to wait with", stage="admission")
        try:
            return await self._queued(_Waiter(avoid, ticket), started)
        finally:
            await asyncio.shield(self._unlock((_TICKET, ticket)))

    async def _queued(self, waiter: _Waiter, started: float) -> tuple[int, Key]:
        self._queue.append(waiter)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())
        self._wake.set()
        remaining = self.wait_s - (asyncio.get_running_loop().time() - started)
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                return await asyncio.shield(waiter.granted)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ValueError):
                self._queue.remove(waiter)
            if waiter.granted.done() and waiter.granted.exception() is None:
                await asyncio.shield(self._unlock(waiter.granted.result()[1]))  # just granted
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise Busy(f"no slot within {self.wait_s:g} s", stage="admission") from None

    async def _poll(self) -> None:
        """Hand free slots to this process's waiters, in their order, until none waits."""
        slots = sum(parallel for _, parallel in self.servers)
        try:
            while self._queue:
                first = await self._first_tickets(slots)
                for waiter in list(self._queue):
                    if waiter.ticket not in first:
                        continue  # older tickets, here or in another process, go first
                    got = await self._take_slot(waiter.avoid)
                    if got is None:
                        continue
                    if waiter in self._queue and not waiter.granted.done():
                        self._queue.remove(waiter)
                        waiter.granted.set_result(got)
                    else:  # it gave up meanwhile
                        await self._unlock(got[1])
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_s)
        except Exception as exc:  # the database went away: every waiter learns it
            while self._queue:
                waiter = self._queue.popleft()
                if not waiter.granted.done():
                    waiter.granted.set_exception(exc)
