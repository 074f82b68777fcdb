"""The audit file: owner-only, rotated, and reached by erasure and retention."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from llm.audit import AuditLog


def _lines(log: AuditLog) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in reversed(log.files())  # oldest first
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def test_files_are_owner_only_through_rotation(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit" / "audit.jsonl", max_bytes=10_000, backups=2)
    for n in range(200):
        log.record({"conversation": "c", "n": n, "pad": "x" * 100})
    files = log.files()
    assert len(files) == 3  # the current file and two backups, no more
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_size <= 10_000
    assert stat.S_IMODE((tmp_path / "audit").stat().st_mode) == 0o700
    assert [line["n"] for line in _lines(log)][-1] == 199
    log.close()


def test_erasure_drops_a_conversation_from_every_file(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=10_000, backups=3)
    for n in range(120):
        log.record({"conversation": "erase-me" if n % 3 == 0 else "keep", "n": n, "pad": "y" * 80})
    assert len(log.files()) > 1
    assert log.erase("erase-me") == 40
    remaining = _lines(log)
    assert {line["conversation"] for line in remaining} == {"keep"}
    assert [line["n"] for line in remaining] == [n for n in range(120) if n % 3]
    log.record({"conversation": "keep", "n": 999})  # the file is still written after
    assert _lines(log)[-1]["n"] == 999
    for path in log.files():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    log.close()


def test_retention_drops_old_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat(timespec="milliseconds")
    path.write_text(json.dumps({"time": old, "n": 0}) + "\n", encoding="utf-8")
    log = AuditLog(path)
    log.record({"n": 1})
    assert log.purge(datetime.now(UTC) - timedelta(days=30)) == 1
    assert [line["n"] for line in _lines(log)] == [1]
    log.close()


def _write_lines(path: str, writer: int, count: int) -> None:
    log = AuditLog(Path(path), max_bytes=20_000, backups=50)
    for n in range(count):
        log.record({"conversation": f"w{writer}", "n": n, "pad": "z" * 60})
    log.close()


def test_processes_sharing_the_files_lose_no_line_through_rotations_and_erasure(
    tmp_path: Path,
) -> None:
    """Two writer processes rotate the same files while a third erases one conversation:
    every line of the other writer is there once, none of the erased one is left."""
    import multiprocessing

    path = tmp_path / "audit.jsonl"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_lines, args=(str(path), w, 600)) for w in (1, 2)]
    for process in writers:
        process.start()
    eraser = AuditLog(path, max_bytes=20_000, backups=50)
    erased = 0
    while any(p.is_alive() for p in writers):
        erased += eraser.erase("w2")
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    erased += eraser.erase("w2")
    lines = _lines(eraser)
    assert len(eraser.files()) > 2  # the writers did rotate
    assert sorted(int(str(line["n"])) for line in lines if line["conversation"] == "w1") == list(
        range(600)
    )
    assert not [line for line in lines if line["conversation"] == "w2"]
    assert erased == 600
    eraser.close()
