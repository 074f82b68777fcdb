"""Admission: a bounded, fair wait for a model slot, and daily quotas.

A CPU model server generates ``parallel`` answers at once (default 1); a deployment may have
several servers. A turn takes a slot on the first server that has one free and is not known
to be down. When none is free it waits at most ``wait_s`` seconds in one of ``max_waiting``
places, and one device holds at most ``device_waiting`` of them, so one phone cannot take
every place from the others. Beyond that, or past the wait, the turn is refused at once with
``Busy`` and answered by the fallback: nobody is left hanging behind a queue.

``Slots`` is the protocol; ``LocalSlots`` keeps the count in this process (the embedded,
one-process deployment). Several processes on PostgreSQL share ``server.pg_slots.PgSlots``,
which holds the same slots as advisory locks.

Quotas are per device and global, per day, counted by the server (from its stored turns) and
handed in as a ``QuotaCounter``; reaching one gives ``QuotaExceeded``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from llm.errors import Busy, QuotaExceeded

__all__ = ["Grant", "LocalSlots", "QuotaCounter", "Quotas", "Slots"]


@dataclass(frozen=True, slots=True)
class Grant:
    """A slot held: on which server (an index into the configured list), after what wait."""

    server: int
    waited_s: float


class Slots(Protocol):
    """Where a turn gets the right to generate."""

    @property
    def waiting(self) -> int:
        """Turns waiting for a slot in this process now (the queue-depth gauge)."""
        ...

    def slot(
        self, device: str | None = None, avoid: frozenset[int] = frozenset()
    ) -> AbstractAsyncContextManager[Grant]:
        """Hold a slot for the body, on a server not in ``avoid``. Raises ``Busy``."""
        ...

    def mark(self, server: int, up: bool) -> None:
        """What the last call or health check said of ``server``: a server down is tried
        only when no other is free."""
        ...


@dataclass(eq=False)
class _Waiter:
    device: str | None
    avoid: frozenset[int]
    granted: asyncio.Future[int] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class LocalSlots:
    """Slots counted in this process; waiters are served first come, first served."""

    def __init__(
        self,
        parallel: int | Sequence[int] = 1,
        max_waiting: int = 4,
        wait_s: float = 20.0,
        device_waiting: int = 1,
    ) -> None:
        self.capacity = [parallel] if isinstance(parallel, int) else list(parallel)
        self.max_waiting = max_waiting
        self.wait_s = wait_s
        self.device_waiting = device_waiting
        self._busy = [0] * len(self.capacity)
        self._down: set[int] = set()
        self._queue: collections.deque[_Waiter] = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    @property
    def active(self) -> int:
        return sum(self._busy)

    def mark(self, server: int, up: bool) -> None:
        if up:
            self._down.discard(server)
        else:
            self._down.add(server)

    def is_down(self, server: int) -> bool:
        """The last call or health check found ``server`` away."""
        return server in self._down

    def _free(self, avoid: frozenset[int]) -> int | None:
        """A server with a free slot: one not known down first, else any."""
        free = [i for i, cap in enumerate(self.capacity) if i not in avoid and self._busy[i] < cap]
        up = [i for i in free if i not in self._down]
        chosen = up or free
        return chosen[0] if chosen else None

    @contextlib.asynccontextmanager
    async def slot(
        self, device: str | None = None, avoid: frozenset[int] = frozenset()
    ) -> AsyncIterator[Grant]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Nobody jumps the queue: a free slot goes to those already waiting first.
        server = None if self._queue else self._free(avoid)
        if server is None:
            server = await self._wait(device, avoid)
        self._busy[server] += 1
        try:
            yield Grant(server, loop.time() - started)
        finally:
            self._busy[server] -= 1
            self._hand_over()

    async def _wait(self, device: str | None, avoid: frozenset[int]) -> int:
        if len(self._queue) >= self.max_waiting:
            raise Busy(f"{len(self._queue)} turns already waiting", stage="admission")
        if device is not None:
            mine = sum(1 for w in self._queue if w.device == device)
            if mine >= self.device_waiting:
                raise Busy(f"this device already waits {mine} times", stage="admission")
        waiter = _Waiter(device, avoid)
        self._queue.append(waiter)
        self._hand_over()  # a slot the ones ahead cannot use may be free for this one
        try:
            async with asyncio.timeout(self.wait_s):
                server = await asyncio.shield(waiter.granted)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ValueError):
                self._queue.remove(waiter)
            if waiter.granted.done() and not waiter.granted.cancelled():
                # Granted just as the wait ended: give the slot back to the next one.
                self._busy[waiter.granted.result()] -= 1
                self._hand_over()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise Busy(f"no slot within {self.wait_s:g} s", stage="admission") from None
        self._busy[server] -= 1  # counted for us by _hand_over; the caller counts it again
        return server

    def _hand_over(self) -> None:
        """Give free slots to the waiters, in their order."""
        for waiter in list(self._queue):
            server = self._free(waiter.avoid)
            if server is None:
                continue
            self._queue.remove(waiter)
            self._busy[server] += 1  # reserved until the waiter wakes up
            waiter.granted.set_result(server)


class QuotaCounter(Protocol):
    """Counts today's model calls; the server implements it from its stored turns."""

    async def today(self, device_id: str | None) -> tuple[int, int]:
        """(calls by this device today, calls by everyone today)."""
        ...


@dataclass(frozen=True, slots=True)
class Quotas:
    per_device: int | None = 200  # None: unlimited
    global_: int | None = 2_000

    async def check(self, counter: QuotaCounter | None, device_id: str | None) -> None:
        """Raise ``QuotaExceeded`` when today's count reached a limit."""
        if counter is None or (self.per_device is None and self.global_ is None):
            return
        device_count, global_count = await counter.today(device_id)
        if (
            self.per_device is not None
            and device_id is not None
            and device_count >= self.per_device
        ):
            raise QuotaExceeded("device", self.per_device)
        if self.global_ is not None and global_count >= self.global_:
            raise QuotaExceeded("global", self.global_)
