"""The validated answer cache's storage, in the service's database (see ``llm.cache``)."""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import secrets
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from llm.cache import CacheEntry
from server.db.models import CachedAnswer

__all__ = ["SqlCacheStore", "cache_secret"]

log = logging.getLogger("nuisances.cache")


class SqlCacheStore:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def get(self, key: str) -> CacheEntry | None:
        with self._sessions() as session:
            row = session.get(CachedAnswer, key)
            if row is None:
                return None
            return CacheEntry(
                row.key,
                row.answer,
                row.model,
                row.prompt_hash,
                row.created_at,
                row.mac,
                row.conversation,
            )

    def put(self, entry: CacheEntry) -> None:
        with self._sessions() as session:
            session.merge(
                CachedAnswer(
                    key=entry.key,
                    conversation=entry.conversation,
                    answer=entry.answer,
                    model=entry.model,
                    prompt_hash=entry.prompt_hash,
                    created_at=entry.created_at,
                    mac=entry.mac,
                )
            )
            session.commit()

    def delete(self, key: str) -> None:
        with self._sessions() as session:
            row = session.get(CachedAnswer, key)
            if row is not None:
                session.delete(row)
                session.commit()


def cache_secret(data_dir: Path, configured: str | None = None) -> bytes:
    """The deployment's key for the cache's MACs, the keyed hashes (``server.privacy``) and
    the spool's encryption.

    ``configured`` (the ``secret`` setting) gives every replica on every machine the same
    key, so that they read each other's cache entries and hash a device alike; it is never
    used as is, only through a derivation. Without it, a key file in the data folder, created
    on first use, readable by its owner only (one machine). Without a writable data folder, a
    key for this process only (logged): hashes then change at each start."""
    if configured:
        return hmac.new(
            configured.encode("utf-8"), b"nuisances deployment key v1", "sha256"
        ).digest()
    path = data_dir / "cache.key"
    try:
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            with contextlib.suppress(FileExistsError):  # another process made it meanwhile
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    os.write(fd, secrets.token_hex(32).encode("ascii"))
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError) as exc:
        log.warning("no deployment key on disk", extra={"error": type(exc).__name__})
        return secrets.token_bytes(32)
