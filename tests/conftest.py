"""Shared fixtures and the report of the safety corpus's edge lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CORPUS_DIR = Path(__file__).parent / "corpus"


SAFETY_DIR = CORPUS_DIR / "safety"


def with_known_failures(
    rows: list[dict[str, Any]], known: dict[str, str], key: str = "id"
) -> list[Any]:
    """One ``pytest.param`` per row, id ``row[key]``; rows named in ``known`` are expected
    to fail, strictly (one that starts passing must leave the table), with their reason."""
    return [
        pytest.param(
            row,
            id=row[key],
            marks=pytest.mark.xfail(reason=known[row[key]], strict=True)
            if row[key] in known
            else (),
        )
        for row in rows
    ]


def load_jsonl(name: str) -> list[dict[str, Any]]:
    """The rows of ``tests/corpus/<name>``."""
    with (CORPUS_DIR / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def safety_corpus() -> list[dict[str, Any]]:
    """Every line of every writer's file, each with its ``writer`` (the file's stem)."""
    return [
        {**row, "writer": path.stem}
        for path in sorted(SAFETY_DIR.glob("*.jsonl"))
        for row in load_jsonl(f"safety/{path.name}")
    ]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Edge lines of the safety corpora are reported, never asserted."""
    from safety.evaluation import score

    report = score(safety_corpus())
    edge = report.rows("edge")
    disagree = [o for o in edge if o.got != o.expected]
    terminalreporter.section("safety corpora: edge lines (reported, not asserted)")
    terminalreporter.write_line(
        f"{len(edge) - len(disagree)}/{len(edge)} edge lines agree with their label"
    )
    for outcome in disagree:
        terminalreporter.write_line(
            f"  {outcome.id}: label {outcome.expected}, detector {outcome.got} {outcome.rules}"
        )


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A real, empty database URL: SQLite in a temporary file, then PostgreSQL."""
    from tests.database import postgres_database

    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    with postgres_database() as url:
        yield url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
