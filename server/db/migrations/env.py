"""Alembic environment: both metadata (server tables, directory's local contacts)."""

from __future__ import annotations

from alembic import context

from directory.models import DirectoryBase
from server.db import models  # noqa: F401 - registers the server's tables
from server.db.base import Base
from server.db.session import make_engine

target_metadata = [Base.metadata, DirectoryBase.metadata]


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection, target_metadata=target_metadata, render_as_batch=True
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
