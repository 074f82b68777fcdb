"""A bound on the turns of one process doing work past their card, so that cards never wait.

Every request's card (parse, authenticate, detect, send the ``safety`` event) runs on the event
loop, and under load it waits behind the work of every turn under way there: claims, stores,
fallbacks, answers. Letting only a few turns do that work at once (the others wait here, their
card already out) keeps the loop's queue short: a card leaves within milliseconds, and the
throughput stays what the CPU allows (``scripts/bench_api.py``, 100 clients back to back, the
model busy, one worker: card p99 from 340 ms to about 25 ms at the same throughput).

Waiting for a model slot and generating are not work of this kind (the model server works):
a turn lets its place go meanwhile (``Place.released``, handed to the model layer as
``TurnRequest.around_model``), so the bound never stands between a turn and the model, and
``admission.wait_s`` stays the only wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["Place", "TurnGate"]


class Place:
    """One turn's place; ``released()`` lets it go for a while."""

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self._semaphore = semaphore
        self.held = True

    @contextlib.asynccontextmanager
    async def released(self) -> AsyncIterator[None]:
        """Let the place go for the body (the turn waits for something else), then take one
        again."""
        if not self.held:
            yield
            return
        self.held = False
        self._semaphore.release()
        try:
            yield
        finally:
            await self._semaphore.acquire()  # cancelled here: the turn holds none, frees none
            self.held = True


class TurnGate:
    def __init__(self, places: int = 3) -> None:
        self.places = places
        self._semaphore = asyncio.Semaphore(places)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[Place]:
        """Hold a place for the body (the rest of one turn)."""
        await self._semaphore.acquire()
        place = Place(self._semaphore)
        try:
            yield place
        finally:
            if place.held:
                self._semaphore.release()
