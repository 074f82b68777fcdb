"""Alembic, configured in code (no alembic.ini): ``upgrade`` runs at start-up and from the CLI."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect

from server.db.session import make_engine

__all__ = ["alembic_config", "current_revision", "upgrade"]

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database schema to ``revision`` (idempotent)."""
    command.upgrade(alembic_config(database_url), revision)


def current_revision(database_url: str) -> str | None:
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            row = connection.exec_driver_sql("SELECT version_num FROM alembic_version").first()
            return None if row is None else str(row[0])
    finally:
        engine.dispose()
