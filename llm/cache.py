"""A validated cache of answers: reused only while they still pass the checks.

Key: the device (its keyed hash: an answer is never shown to another device), the
pseudonymised request (the payload as it would be sent, history included, so the
conversation's context is in it), the model and the prompt hash. Each entry is tagged with
the conversation it came from, so that erasing that conversation deletes it. An entry carries
an HMAC of its key and answer under a secret local to the deployment, so an entry edited in
the database is recognised as tampered and regenerated; an entry older than the TTL is stale;
and every read revalidates the answer against the current contract and directory (a contact
removed since makes it invalid). Only answers that passed validation and came from the model
are stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
    conversation: str = ""  # keyed hash of the conversation the answer came from


class CacheStore(Protocol):
    """Where entries live (the server keeps them in its database)."""

    def get(self, key: str) -> CacheEntry | None: ...
    def put(self, entry: CacheEntry) -> None: ...
    def delete(self, key: str) -> None: ...


def cache_key(serialized_payload: str, model: str, prompt_hash: str, scope: str) -> str:
    """The entry's key; ``scope`` is the device's keyed hash (never empty in the server)."""
    digest = hashlib.sha256()
    for part in (scope, model, prompt_hash, serialized_payload):
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

    def _mac(self, entry: CacheEntry) -> str:
        parts = (entry.key, entry.answer, entry.model, entry.prompt_hash, entry.conversation)
        message = "\0".join((*parts, f"{entry.created_at:.6f}")).encode("utf-8", "surrogatepass")
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
        if entry.key != key or not hmac.compare_digest(self._mac(entry), entry.mac):
            store.delete(key)
            return Lookup(None, "tampered")
        if self._clock() - entry.created_at > self._ttl_s:
            store.delete(key)
            return Lookup(None, "stale")
        if revalidate(entry.answer):
            store.delete(key)
            return Lookup(None, "invalid")
        return Lookup(entry, "hit")

    def store(
        self, key: str, answer: str, model: str, prompt_hash: str, conversation: str = ""
    ) -> None:
        if self._store is None or self._ttl_s <= 0:
            return
        entry = CacheEntry(key, answer, model, prompt_hash, self._clock(), "", conversation)
        entry = dataclasses.replace(entry, mac=self._mac(entry))
        with contextlib.suppress(Exception):  # an answer not cached is only a later miss
            self._store.put(entry)
