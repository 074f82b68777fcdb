"""Engines and sessions. SQLite gets foreign keys, a busy timeout, and erasure that erases:
``secure_delete`` zeroes freed content, ``journal_size_limit`` keeps the write-ahead log from
holding old pages indefinitely (``repository.compact`` truncates it after an erasure). Its
folder is created, and the database file is created readable by its owner only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["make_engine", "make_session_factory"]


def make_engine(database_url: str, **options: Any) -> Engine:
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            path = Path(url.database)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # SQLite gives its -wal and -shm files the database file's mode.
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        engine = create_engine(url, connect_args={"timeout": 15}, **options)

        @event.listens_for(engine, "connect")
        def _pragmas(connection: Any, _: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL is safe against corruption and commits without an fsync each
            # (a power cut may lose the last turns, not the database).
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA secure_delete=ON")
            cursor.execute("PRAGMA journal_size_limit=1048576")
            cursor.close()

        return engine
    options.setdefault("pool_pre_ping", True)
    options.setdefault("connect_args", {"connect_timeout": 5})
    return create_engine(url, **options)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
