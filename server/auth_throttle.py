"""Failed-authentication throttling per client address.

An address may fail ``failures`` token checks within any ``window_s`` seconds (a sliding
window: the times of its last ``failures`` failures are kept). Beyond, its requests are refused
(429, ``Retry-After`` = seconds until its oldest failure leaves the window) before any token
lookup, whatever token they carry: a guesser gets at most ``failures`` guesses per window, and
the refused ones cost the database nothing.

Lookups under way are not failures: many genuine devices behind one address (a carrier NAT,
an office Wi-Fi, all behind the reverse proxy) are never refused for being many. Instead, at
most ``concurrent`` token lookups (database checks of a token not yet in memory) run at once
per address; the others wait their turn, in order (``turn``), at most ``wait_s`` seconds. When
a turn comes, the budget is checked again before the lookup starts: a burst of N concurrent
wrong guesses costs at most ``failures + concurrent - 1`` lookups, not N. A wait that expires
is a refusal only when the address is over its budget; otherwise the lookup goes ahead
(the wait is there to serialize, not to refuse).

At most ``max_addresses`` addresses are remembered (the least recently seen forgotten, with
their turns), so memory is bounded whatever the number of addresses.

One WARNING per address per ``log_interval_s`` tells which address is refused and how many of
its requests were refused since the last line.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from server.settings import LimitsSettings

__all__ = ["AUTH_WAIT_S", "MAX_ADDRESSES", "AuthThrottle", "Turn"]

log = logging.getLogger("nuisances.auth")

MAX_ADDRESSES = 10_000
AUTH_WAIT_S = 5.0  # longest wait for a turn to look a token up


@dataclass
class _Address:
    failures: deque[float]
    refused: int = 0  # requests refused since the last warning
    logged_at: float | None = field(default=None)
    turns: asyncio.Semaphore | None = None  # made on the first lookup of the address


class Turn:
    """The right to look up one token for ``address``, given by ``AuthThrottle.turn``.
    ``end`` must be called once the database answered (or failed to)."""

    __slots__ = ("_address", "_ended", "_semaphore", "_throttle")

    def __init__(
        self, throttle: AuthThrottle, address: str, semaphore: asyncio.Semaphore | None
    ) -> None:
        self._throttle = throttle
        self._address = address
        self._semaphore = semaphore  # None: the wait expired, the lookup went ahead anyway
        self._ended = False

    def end(self, ok: bool) -> None:
        """The lookup ended: the token was good (or could not be checked), or it was not
        (``ok`` False: a failure, counted before the next turn is given). Idempotent."""
        if self._ended:
            return
        self._ended = True
        if not ok:
            self._throttle.failed(self._address)
        if self._semaphore is not None:
            self._semaphore.release()


class AuthThrottle:
    """Not thread-safe: used from the event loop only."""

    def __init__(
        self,
        failures: int,
        window_s: float,
        *,
        concurrent: int = 4,
        wait_s: float = AUTH_WAIT_S,
        log_interval_s: float = 10.0,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures = failures
        self.window_s = window_s
        self.concurrent = concurrent
        self.wait_s = wait_s
        self.log_interval_s = log_interval_s
        self.max_addresses = max_addresses
        self.clock = clock
        self._addresses: OrderedDict[str, _Address] = OrderedDict()

    @classmethod
    def from_limits(cls, limits: LimitsSettings) -> AuthThrottle:
        return cls(
            limits.auth_failures,
            limits.auth_window_s,
            concurrent=limits.auth_concurrent,
            log_interval_s=limits.log_interval_s,
        )

    def __len__(self) -> int:
        return len(self._addresses)

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until ``address`` may try a token again (at least 1), or None when
        it may now. A refusal is counted (and logged, once per interval)."""
        entry = self._addresses.get(address)
        if entry is None:
            return None
        now = self.clock()
        self._addresses.move_to_end(address)
        failures = entry.failures
        while failures and now - failures[0] >= self.window_s:
            failures.popleft()
        if len(failures) < self.failures:
            return None
        wait = max(1, math.ceil(failures[0] + self.window_s - now))
        entry.refused += 1
        if entry.logged_at is None or now - entry.logged_at >= self.log_interval_s:
            log.warning(
                "failed logins throttled", extra={"client": address, "count": entry.refused}
            )
            entry.refused = 0
            entry.logged_at = now
        return wait

    async def turn(self, address: str) -> Turn | int:
        """Wait for a turn of ``address`` to look a token up (``concurrent`` at once, the
        others in order, each at most ``wait_s``), then check its budget again. Returns the
        ``Turn`` (whose ``end`` the caller must call), or the seconds to tell in Retry-After
        when the address is over its failure budget: then no lookup may start."""
        entry = self._entry(address)
        semaphore = entry.turns
        if semaphore is None:
            semaphore = entry.turns = asyncio.Semaphore(self.concurrent)
        held: asyncio.Semaphore | None = semaphore
        if not semaphore.locked():  # a free place and nobody waiting: no timer needed
            await semaphore.acquire()
        else:
            try:
                await asyncio.wait_for(semaphore.acquire(), self.wait_s)
            except TimeoutError:  # the lookups ahead are slow: go ahead unless over budget
                held = None
        wait = self.retry_after(address)
        if wait is not None:
            if held is not None:
                held.release()
            return wait
        return Turn(self, address, held)

    def failed(self, address: str) -> None:
        """``address`` presented a token that did not check."""
        self._entry(address).failures.append(self.clock())

    def _entry(self, address: str) -> _Address:
        entry = self._addresses.get(address)
        if entry is None:
            entry = self._addresses[address] = _Address(deque(maxlen=self.failures))
            while len(self._addresses) > self.max_addresses:
                self._addresses.popitem(last=False)
        else:
            self._addresses.move_to_end(address)
        return entry
