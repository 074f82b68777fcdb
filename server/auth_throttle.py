"""Failed-authentication throttling per client address.

An address may fail ``failures`` token checks within any ``window_s`` seconds (a sliding
window: the times of its last ``failures`` failures are kept). Beyond, its requests are refused
(429, ``Retry-After`` = seconds until its oldest failure leaves the window) before any token
lookup, whatever token they carry: a guesser gets at most ``failures`` guesses per window, and
the refused ones cost the database nothing. At most ``max_addresses`` addresses are remembered
(the least recently seen forgotten), so memory is bounded whatever the number of addresses.

One WARNING per address per ``log_interval_s`` tells which address is refused and how many of
its requests were refused since the last line.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from server.settings import LimitsSettings

__all__ = ["MAX_ADDRESSES", "AuthThrottle"]

log = logging.getLogger("nuisances.auth")

MAX_ADDRESSES = 10_000


@dataclass
class _Address:
    failures: deque[float]
    pending: int = 0  # token lookups under way: they count until they are known good
    refused: int = 0  # requests refused since the last warning
    logged_at: float | None = field(default=None)


class AuthThrottle:
    """Not thread-safe: used from the event loop only."""

    def __init__(
        self,
        failures: int,
        window_s: float,
        *,
        log_interval_s: float = 10.0,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures = failures
        self.window_s = window_s
        self.log_interval_s = log_interval_s
        self.max_addresses = max_addresses
        self.clock = clock
        self._addresses: OrderedDict[str, _Address] = OrderedDict()

    @classmethod
    def from_limits(cls, limits: LimitsSettings) -> AuthThrottle:
        return cls(limits.auth_failures, limits.auth_window_s, log_interval_s=limits.log_interval_s)

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
        if len(failures) + entry.pending < self.failures:
            return None
        if len(failures) >= self.failures:
            wait = max(1, math.ceil(failures[0] + self.window_s - now))
        else:  # room taken by lookups under way: known in a moment
            wait = 1
        entry.refused += 1
        if entry.logged_at is None or now - entry.logged_at >= self.log_interval_s:
            log.warning(
                "failed logins throttled", extra={"client": address, "count": entry.refused}
            )
            entry.refused = 0
            entry.logged_at = now
        return wait

    def checking(self, address: str) -> None:
        """A token lookup for ``address`` begins. Until ``checked``, it counts as a failure:
        concurrent guesses cannot all slip in before the first of them is known bad."""
        self._entry(address).pending += 1

    def checked(self, address: str, ok: bool) -> None:
        """The lookup begun by ``checking`` ended: the token was good (or could not be
        checked), or it was not (``ok`` False: a failure)."""
        entry = self._addresses.get(address)
        if entry is not None and entry.pending:
            entry.pending -= 1
        if not ok:
            self.failed(address)

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
