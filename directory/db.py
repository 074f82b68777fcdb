"""Creating the directory's table until the server's Alembic migrations own it.

Temporary and isolated on purpose: once the migrations include ``DirectoryBase.metadata``,
this helper is replaced by them (``alembic upgrade head``).
"""

from __future__ import annotations

from sqlalchemy import Engine

from directory.models import DirectoryBase

__all__ = ["ensure_schema"]


def ensure_schema(engine: Engine) -> None:
    """Create the directory's tables that do not exist yet (never alters existing ones)."""
    DirectoryBase.metadata.create_all(engine)
