"""Tokens seen valid, checked in memory: the card never waits for the database, and a device
keeps its card and answers while the database is down, without ever honouring a revoked token
for longer than a bound.

At start-up and every ``token_refresh_s`` seconds the keys of every valid token are loaded
(up to the bound; more devices than that are re-checked key by key), stamping the known ones,
adding new ones and dropping the revoked ones: a device's first request after a restart is
checked in memory, and a token revoked from another process is refused within one refresh. A
token not in memory (made since the last refresh, or unknown) is checked in the database. An
entry is accepted only if it was confirmed less than ``max_age_s`` ago: while the database is
away no entry is stamped, and every one expires within that bound. Entries are keyed by the
token's hash, never the token, and bounded in number (least recently confirmed go first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["TokenCache"]


class TokenCache:
    def __init__(
        self,
        max_age_s: float = 60.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age_s = max_age_s
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def confirm(self, key: str, device_id: str) -> None:
        """The database just said ``key`` is valid for ``device_id``."""
        with self._lock:
            self._entries[key] = (device_id, self._clock())
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def without_database(self, key: str) -> str | None:
        """The device of ``key`` if it was confirmed recently enough; else None."""
        with self._lock:
            found = self._entries.get(key)
        if found is None or self._clock() - found[1] > self.max_age_s:
            return None
        return found[0]

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._entries)

    def refreshed(self, checked: list[str], valid: dict[str, str]) -> None:
        """The result of re-checking ``checked`` keys: those in ``valid`` are stamped again,
        the others (revoked, or gone) are dropped."""
        now = self._clock()
        with self._lock:
            for key in checked:
                if key in valid:
                    if key in self._entries:
                        self._entries[key] = (valid[key], now)
                else:
                    self._entries.pop(key, None)

    def preload(self, valid: dict[str, str]) -> None:
        """Keep keys the database just listed as valid, those not known yet included, up to
        the bound (the ones already known keep their place)."""
        now = self._clock()
        with self._lock:
            for key, device_id in valid.items():
                if len(self._entries) >= self.max_entries:
                    break
                if key not in self._entries:
                    self._entries[key] = (device_id, now)

    def __len__(self) -> int:
        return len(self._entries)
