"""Admission: a bounded wait for a model slot, and daily quotas.

The CPU model server generates one answer at a time (``parallel`` slots, default 1). A turn
waits for a slot at most ``wait_s`` seconds, and at most ``max_waiting`` turns wait at once:
beyond that, or past the wait, the turn is refused at once with ``Busy`` and answered by the
fallback; the person is never left hanging behind a queue.

Quotas are per device and global, per day, counted by the server (from its stored turns) and
handed in as a ``QuotaCounter``; reaching one gives ``QuotaExceeded``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from llm.errors import Busy, QuotaExceeded

__all__ = ["QuotaCounter", "Quotas", "Slots"]


class Slots:
    """``parallel`` generations at once, ``max_waiting`` waiting at most ``wait_s`` seconds."""

    def __init__(self, parallel: int = 1, max_waiting: int = 4, wait_s: float = 20.0) -> None:
        self.parallel = parallel
        self.max_waiting = max_waiting
        self.wait_s = wait_s
        self._semaphore = asyncio.Semaphore(parallel)
        self._waiting = 0
        self._active = 0

    @property
    def waiting(self) -> int:
        """Turns waiting for a slot now (the queue-depth gauge)."""
        return self._waiting

    @property
    def active(self) -> int:
        return self._active

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold a slot for the body; yields the seconds spent waiting. Raises ``Busy``."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self._semaphore.locked():
            if self._waiting >= self.max_waiting:
                raise Busy(f"{self._waiting} turns already waiting", stage="admission")
            self._waiting += 1
            try:
                async with asyncio.timeout(self.wait_s):
                    await self._semaphore.acquire()
            except TimeoutError:
                raise Busy(f"no slot within {self.wait_s:g} s", stage="admission") from None
            finally:
                self._waiting -= 1
        else:
            await self._semaphore.acquire()
        self._active += 1
        try:
            yield loop.time() - started
        finally:
            self._active -= 1
            self._semaphore.release()


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
