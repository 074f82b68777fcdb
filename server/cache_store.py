"""The validated answer cache's storage, in the service's database (see ``llm.cache``)."""

from __future__ import annotations

import secrets
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from llm.cache import CacheEntry
from server.db.models import CachedAnswer

__all__ = ["SqlCacheStore", "cache_secret"]


class SqlCacheStore:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def get(self, key: str) -> CacheEntry | None:
        with self._sessions() as session:
            row = session.get(CachedAnswer, key)
            if row is None:
                return None
            return CacheEntry(
                row.key, row.answer, row.model, row.prompt_hash, row.created_at, row.mac
            )

    def put(self, entry: CacheEntry) -> None:
        with self._sessions() as session:
            session.merge(
                CachedAnswer(
                    key=entry.key,
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


def cache_secret(data_dir: Path) -> bytes:
    """The deployment's key for the cache's MACs, created on first use (mode 600)."""
    path = data_dir / "cache.key"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32), encoding="ascii")
        path.chmod(0o600)
    return bytes.fromhex(path.read_text(encoding="ascii").strip())
