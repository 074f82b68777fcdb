"""The outage spool on its own: durable, encrypted, bounded, replayed exactly once."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from server.spool import Spool

SECRET = b"k" * 32


def _record(n: int) -> dict[str, Any]:
    return {"key": {"n": n}, "turn": {"message": f"Sandrine Lebreton, message {n}"}}


def test_records_come_back_in_order_and_are_removed_once_replayed(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SECRET)
    for n in range(3):
        assert spool.append(_record(n))
    written: list[list[dict[str, Any]]] = []
    assert spool.replay(written.append) == 3
    assert written == [[_record(0), _record(1), _record(2)]]
    assert spool.size() == 0
    assert spool.replay(written.append) == 0
    assert len(written) == 1


def test_nothing_is_removed_when_the_database_write_fails(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SECRET)
    spool.append(_record(1))

    def down(_: list[dict[str, Any]]) -> None:
        raise ConnectionError("database away")

    with pytest.raises(ConnectionError):
        spool.replay(down)
    assert spool.pending() == [_record(1)]


def test_the_file_holds_no_plain_text_and_is_owner_only(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", SECRET)
    spool.append(_record(7))
    data = spool.path.read_bytes()
    assert b"Sandrine" not in data
    assert b"Lebreton" not in data
    assert stat.S_IMODE(spool.path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "spool").stat().st_mode) == 0o700


def test_a_torn_last_line_waits_and_lines_under_another_key_are_dropped(tmp_path: Path) -> None:
    Spool(tmp_path, b"o" * 32).append(_record(0))  # another deployment's key
    spool = Spool(tmp_path, SECRET)
    spool.append(_record(1))
    with spool.path.open("ab") as handle:
        handle.write(b"AAAA")  # a crash in the middle of a write
    assert spool.pending() == [_record(1)]
    written: list[list[dict[str, Any]]] = []
    spool.replay(written.append)
    assert written == [[_record(1)]]
    assert spool.path.read_bytes() == b"AAAA"  # kept: it may still be completed


def test_a_full_spool_refuses_and_says_so(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SECRET, max_bytes=400)
    accepted = [spool.append(_record(n)) for n in range(10)]
    assert accepted[0] is True
    assert accepted[-1] is False
    assert spool.size() <= 400
    assert len(spool.pending()) == accepted.count(True)
