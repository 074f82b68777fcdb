"""The spool: turns answered while the database was unreachable, kept until it comes back.

One JSON line per turn in ``data_dir/spool/turns.jsonl``: appended, flushed and fsync'd before
the answer is considered kept; created 0600 in a 0700 folder; bounded in size (a full spool
refuses further turns, which are then answered but not kept, and logged). ``replay`` hands
the lines, in order, to a function that writes them into the database (exactly once: each
turn is upserted under its idempotency key, so a replay interrupted and run again writes
nothing twice), then removes what it replayed. An advisory lock (``fcntl.flock``) makes
appends and replays safe between processes sharing the folder.

The lines hold what the database would hold (the message and the answer), encrypted with
AES-GCM under a key derived from the deployment's secret: a copy of the spool alone, a backup
of it, or a grep over the data folder shows no one's words. The spool is the database's
stand-in, emptied as soon as the database answers again.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["Spool"]

log = logging.getLogger("nuisances.spool")

_MODE = 0o600


class Spool:
    def __init__(self, folder: Path, secret: bytes, max_bytes: int = 50_000_000) -> None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._aead = AESGCM(hmac.new(secret, b"spool v1", hashlib.sha256).digest())
        self.path = folder / "turns.jsonl"
        self.max_bytes = max_bytes
        self._lock_path = folder / "turns.lock"
        self._thread_lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, _MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, record: dict[str, Any]) -> bool:
        """Keep ``record`` durably; False when the spool is full (nothing written)."""
        data = self._seal(record)
        with self._locked():
            if self.size() + len(data) > self.max_bytes:
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _MODE)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        return True

    def _seal(self, record: dict[str, Any]) -> bytes:
        plain = json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
        nonce = os.urandom(12)
        sealed = base64.b64encode(nonce + self._aead.encrypt(nonce, plain, b"spool v1"))
        return sealed + b"\n"

    def _open(self, line: bytes) -> dict[str, Any] | None:
        try:
            raw = base64.b64decode(line, validate=True)
            plain = self._aead.decrypt(raw[:12], raw[12:], b"spool v1")
            record = json.loads(plain)
        except (ValueError, InvalidTag):
            return None  # another key, or a damaged line: it cannot be replayed
        return record if isinstance(record, dict) else None

    def pending(self) -> list[dict[str, Any]]:
        with self._locked():
            return self._read()[0]

    def _read(self) -> tuple[list[dict[str, Any]], int]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0
        end = raw.rfind(b"\n") + 1  # a torn last line (a crash mid-write) waits
        records = []
        lines = raw[:end].splitlines()
        for line in lines:
            record = self._open(line)
            if record is not None:
                records.append(record)
        if len(records) < len(lines):
            log.error(
                "spool lines that cannot be read (another key, or damaged) are dropped",
                extra={"lines": len(lines) - len(records)},
            )
        return records, end

    def replay(self, write: Callable[[list[dict[str, Any]]], None]) -> int:
        """Write the pending turns with ``write`` (which raises if the database is away, and
        then nothing is removed); the number of turns replayed."""
        with self._locked():
            records, end = self._read()
            if not records and end == 0:
                return 0
            if records:
                write(records)
            rest = self.path.read_bytes()[end:]
            temporary = self.path.with_name("turns.tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _MODE)
            try:
                os.write(fd, rest)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
        return len(records)
