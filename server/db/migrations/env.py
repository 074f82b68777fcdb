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
    sqlite = engine.dialect.name == "sqlite"
    try:
        with engine.connect() as connection:
            if sqlite:
                # Batch mode rebuilds a table by copying it and dropping the old one; with
                # foreign keys on, that DROP deletes every row referring to it (ON DELETE
                # CASCADE): the turns of every conversation. Off for the migration (it cannot
                # change inside a transaction), checked after.
                connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
                connection.commit()  # end the transaction SQLAlchemy began for the PRAGMA
            context.configure(
                connection=connection, target_metadata=target_metadata, render_as_batch=True
            )
            with context.begin_transaction():
                context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()
                if broken:
                    raise RuntimeError(f"foreign keys broken by a migration: {broken[:5]}")
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
