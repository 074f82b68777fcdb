"""Model slots shared by every API process of a deployment, as PostgreSQL advisory locks.

Several processes (workers, machines) in front of the same model servers must never run more
generations on a server than it has slots, and must share the waiting places fairly. Each
slot is a session-level advisory lock ``(server key, slot number)``, held on a connection of
its own for as long as the generation runs; a waiting place is a lock too, and so is a
device's right to wait. PostgreSQL releases a session's locks when its connection ends, so a
process that crashes frees its slots and places at once: the lease is the connection.

Keys are derived from the server's URL (a slot of ``http://pc-llm:11434`` is the same lock for
every process that talks to it) and from a keyed hash of the device. Waiters poll every
``poll_s``; a newcomer does not take a free slot while others wait for one, so that waiters
are served before arrivals (in the order their polls find a slot, not strictly first come).

When PostgreSQL cannot be reached the turn falls back to this process's ``LocalSlots``: the
person still gets an answer, and the bound holds per process until the database is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import zlib
from collections.abc import AsyncIterator, Sequence

import psycopg
from sqlalchemy.engine import make_url

from llm.admission import Grant, LocalSlots
from llm.errors import Busy

__all__ = ["PgSlots", "conninfo"]

log = logging.getLogger("nuisances.slots")

_WAITING = "nuisances:waiting"
_DEVICE = "nuisances:device-waiting"


def conninfo(database_url: str) -> str:
    """A libpq URI from the service's SQLAlchemy URL (``postgresql+psycopg://...``)."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _key(name: str) -> int:
    """A stable, positive 31-bit lock key (pg_locks shows it unsigned otherwise)."""
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def _device_key(device: str) -> int:
    return int.from_bytes(hashlib.sha256(device.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


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
        self._idle: list[psycopg.AsyncConnection[tuple[object, ...]]] = []
        self._waiting = 0
        self._down: set[int] = set()

    @property
    def waiting(self) -> int:
        return self._waiting + self.local.waiting

    def mark(self, server: int, up: bool) -> None:
        self.local.mark(server, up)
        if up:
            self._down.discard(server)
        else:
            self._down.add(server)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _connection(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, connect_timeout=max(1, round(self.connect_s))
        )

    async def _give_back(self, connection: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Release every advisory lock of the connection and keep it for the next turn."""
        try:
            await connection.execute("SELECT pg_advisory_unlock_all()")
        except Exception:
            with contextlib.suppress(Exception):
                await connection.close()  # closing releases the locks too
            return
        if len(self._idle) < 8:
            self._idle.append(connection)
        else:
            await connection.close()

    async def _try(
        self, connection: psycopg.AsyncConnection[tuple[object, ...]], a: int, b: int
    ) -> bool:
        cursor = await connection.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", (a, b))
        row = await cursor.fetchone()
        return bool(row and row[0])

    async def _take_slot(
        self, connection: psycopg.AsyncConnection[tuple[object, ...]], avoid: frozenset[int]
    ) -> int | None:
        order = sorted(
            (i for i in range(len(self.servers)) if i not in avoid), key=lambda i: i in self._down
        )
        for server in order:
            key, parallel = self.servers[server]
            for number in range(parallel):
                if await self._try(connection, key, number):
                    return server
        return None

    async def _others_waiting(
        self, connection: psycopg.AsyncConnection[tuple[object, ...]]
    ) -> bool:
        cursor = await connection.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::oid AND objsubid = 2",
            (_key(_WAITING),),
        )
        row = await cursor.fetchone()
        return bool(row and row[0])

    @contextlib.asynccontextmanager
    async def slot(
        self, device: str | None = None, avoid: frozenset[int] = frozenset()
    ) -> AsyncIterator[Grant]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            connection = await self._connection()
            try:
                server = await self._acquire(connection, device, avoid, started)
            except BaseException:
                await asyncio.shield(self._give_back(connection))
                raise
        except (psycopg.Error, OSError) as exc:
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
            await asyncio.shield(self._give_back(connection))

    async def _acquire(
        self,
        connection: psycopg.AsyncConnection[tuple[object, ...]],
        device: str | None,
        avoid: frozenset[int],
        started: float,
    ) -> int:
        if not await self._others_waiting(connection):
            server = await self._take_slot(connection, avoid)
            if server is not None:
                return server
        # Wait: first one of this device's places, then one of the shared places. Every lock
        # taken here is released by _give_back (pg_advisory_unlock_all) whatever happens.
        held: list[tuple[int, int]] = []
        try:
            if device is not None:
                mine = _device_key(device)
                for number in range(self.device_waiting):
                    if await self._try(
                        connection, key := (_key(_DEVICE) + number) & 0x7FFFFFFF, mine
                    ):
                        held.append((key, mine))
                        break
                else:
                    raise Busy("this device already waits", stage="admission")
            for number in range(self.max_waiting):
                if await self._try(connection, _key(_WAITING), number):
                    held.append((_key(_WAITING), number))
                    break
            else:
                raise Busy(f"{self.max_waiting} turns already waiting", stage="admission")
            return await self._wait(connection, avoid, started)
        finally:
            for a, b in held:  # the place is left as soon as a slot is ours (or never will be)
                await connection.execute("SELECT pg_advisory_unlock(%s::int4, %s::int4)", (a, b))

    async def _wait(
        self,
        connection: psycopg.AsyncConnection[tuple[object, ...]],
        avoid: frozenset[int],
        started: float,
    ) -> int:
        self._waiting += 1
        loop = asyncio.get_running_loop()
        try:
            while True:
                server = await self._take_slot(connection, avoid)
                if server is not None:
                    return server
                if loop.time() - started + self.poll_s > self.wait_s:
                    raise Busy(f"no slot within {self.wait_s:g} s", stage="admission")
                await asyncio.sleep(self.poll_s)
        finally:
            self._waiting -= 1
