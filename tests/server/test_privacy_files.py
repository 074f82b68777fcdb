"""Planted identifiers, an outage, an erasure: then every file the service wrote is read.

``scripts/privacy_check.py`` does the work (and prints its findings when run by hand); here it
runs against both databases. On SQLite the database file and its -wal and -shm files are
read too, and a control message in another conversation must still be found in them, so the
search is shown able to find text.
"""

from __future__ import annotations

import asyncio
import importlib.util
import stat
import sys
from pathlib import Path
from types import ModuleType

from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "privacy_check", ROOT / "scripts" / "privacy_check.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["privacy_check"] = module
    spec.loader.exec_module(module)
    return module


def test_no_planted_identifier_survives_in_any_file(database_url: str, tmp_path: Path) -> None:
    check = _script()
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as fake:
        fake.enqueue(Behaviour.normal("Notez les horaires dans le journal."))
        for _ in check.MESSAGES:
            fake.enqueue(Behaviour.normal(check.ECHO))
        finding = asyncio.run(check.run(database_url, tmp_path / "data", fake.url))
    assert finding.spooled > 0  # one turn did go through the spool
    assert finding.audit_lines_before >= len(check.MESSAGES)  # the audit log was written
    assert finding.before_erasure == {}
    assert finding.files == {}
    if database_url.startswith("sqlite"):
        assert finding.control_found
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    for path in (tmp_path / "data").rglob("*"):
        expected = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == expected, path
