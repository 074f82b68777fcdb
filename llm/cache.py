"""A validated cache of answers: reused only while they still pass the checks.

Key: the pseudonymised request (the payload as it would be sent), the model and the prompt
hash. An entry carries an HMAC of its key and answer under a secret local to the deployment,
so an entry edited in the database is recognised as tampered and regenerated; an entry older
than the TTL is stale; and every read revalidates the answer against the current contract and
directory (a contact removed since makes it invalid). Only answers that passed validation and
came from the model are stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["AnswerCache", "CacheEntry", "CacheStore", "Lookup", "cache_key"]


@dataclass(frozen=True, slots=True)
class CacheEntry:
    key: str
    answer: str
    model: str
    prompt_hash: str
    created_at: float  # seconds since the epoch
    mac: str


class CacheStore(Protocol):
    """Where entries live (the server keeps them in its database)."""

    def get(self, key: str) -> CacheEntry | None: ...
    def put(self, entry: CacheEntry) -> None: ...
    def delete(self, key: str) -> None: ...


def cache_key(serialized_payload: str, model: str, prompt_hash: str) -> str:
    digest = hashlib.sha256()
    for part in (model, prompt_hash, serialized_payload):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Lookup:
    entry: CacheEntry | None
    outcome: Literal["hit", "miss", "stale", "tampered", "invalid", "disabled"]


class AnswerCache:
    def __init__(
        self,
        store: CacheStore | None,
        secret: bytes,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._secret = secret
        self._ttl_s = ttl_s
        self._clock = clock

    def _mac(self, key: str, answer: str, model: str, prompt_hash: str, created_at: float) -> str:
        message = "\0".join((key, answer, model, prompt_hash, f"{created_at:.6f}")).encode(
            "utf-8", "surrogatepass"
        )
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def lookup(self, key: str, revalidate: Callable[[str], list[str]]) -> Lookup:
        if self._store is None or self._ttl_s <= 0:
            return Lookup(None, "disabled")
        try:
            return self._lookup(self._store, key, revalidate)
        except Exception:  # storage trouble is a miss: the cache never fails a turn
            return Lookup(None, "miss")

    def _lookup(
        self, store: CacheStore, key: str, revalidate: Callable[[str], list[str]]
    ) -> Lookup:
        entry = store.get(key)
        if entry is None:
            return Lookup(None, "miss")
        expected = self._mac(
            entry.key, entry.answer, entry.model, entry.prompt_hash, entry.created_at
        )
        if entry.key != key or not hmac.compare_digest(expected, entry.mac):
            store.delete(key)
            return Lookup(None, "tampered")
        if self._clock() - entry.created_at > self._ttl_s:
            store.delete(key)
            return Lookup(None, "stale")
        if revalidate(entry.answer):
            store.delete(key)
            return Lookup(None, "invalid")
        return Lookup(entry, "hit")

    def store(self, key: str, answer: str, model: str, prompt_hash: str) -> None:
        if self._store is None or self._ttl_s <= 0:
            return
        created = self._clock()
        mac = self._mac(key, answer, model, prompt_hash, created)
        with contextlib.suppress(Exception):  # an answer not cached is only a later miss
            self._store.put(CacheEntry(key, answer, model, prompt_hash, created, mac))
