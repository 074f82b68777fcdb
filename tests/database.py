"""Real databases for the storage tests: SQLite in a temporary file, and PostgreSQL.

PostgreSQL is the server on 127.0.0.1:5432 (trust auth); each test session gets a database of
its own, created and dropped here. Where the server is unreachable the PostgreSQL cases are
skipped, unless NUISANCES_TEST_REQUIRE_POSTGRES=1 (set by .ci/run), which turns that into a
failure: CI must prove both backends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

ADMIN_URL = os.environ.get("NUISANCES_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_available() -> bool:
    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database; yields its SQLAlchemy URL, drops it afterwards."""
    if not postgres_available():
        if os.environ.get("NUISANCES_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here and unreachable at {ADMIN_URL}")
        pytest.skip(f"PostgreSQL unreachable at {ADMIN_URL}")
    name = f"nuisances_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
