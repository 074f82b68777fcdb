"""Engines and sessions. SQLite gets foreign keys and a busy timeout; its folder is created."""

from __future__ import annotations

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
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 15}, **options)

        @event.listens_for(engine, "connect")
        def _pragmas(connection: Any, _: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL is safe against corruption and commits without an fsync each
            # (a power cut may lose the last turns, not the database).
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    options.setdefault("pool_pre_ping", True)
    options.setdefault("connect_args", {"connect_timeout": 5})
    return create_engine(url, **options)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
