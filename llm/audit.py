"""The audit log: one JSON line per model call, from which any answer can be explained.

A file with rotation rather than a table: it is append-only by nature and survives a database
that is down (when fallbacks answer and the reason matters most); ``nuisances doctor`` and
``jq`` read it directly.

Each line: time, request id, provider and model, keyed hashes of the device and the
conversation (never the ids themselves), the flow decision with its reasons, the payload
pseudonymised then scrubbed by the audit's own scan (``llm.audit_scrub``), the answer treated
the same way, lengths, validation errors, the scans' kinds and counts, status, source,
timings, and the error. Never an API key, a bearer token, a raw identifier or raw text.

Erasure reaches it: ``erase(conversation_tag)`` rewrites the files without that
conversation's lines, and ``purge(before)`` drops lines older than the retention. Files are
created readable by their owner only (0600).

Several processes (API workers, ``nuisances db purge`` from cron) share the files of a
machine: every append, rotation and rewrite holds an exclusive ``flock`` on ``audit.lock``
beside them, and a writer whose file was rotated or rewritten by another process reopens the
current one before writing, so no line lands in a file that was renamed or replaced.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["AuditLog"]

_MODE = 0o600


class AuditLog:
    def __init__(self, path: Path | None, max_bytes: int = 10_000_000, backups: int = 5) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._lock_fd: int | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock_fd = os.open(path.with_name("audit.lock"), os.O_RDWR | os.O_CREAT, _MODE)
            self._fd = self._open()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """This thread and every other process: one writer at a time on the files."""
        with self._lock:
            if self._lock_fd is None:
                yield
                return
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _current(self) -> None:
        """Reopen the file when another process rotated or rewrote it (under the lock)."""
        assert self.path is not None  # noqa: S101 - only called with a path
        try:
            same = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino  # type: ignore[arg-type]
        except FileNotFoundError:
            same = False
        if not same:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = self._open()

    def _open(self) -> int:
        assert self.path is not None  # noqa: S101 - only called with a path
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _MODE)
        os.fchmod(fd, _MODE)
        return fd

    def files(self) -> list[Path]:
        """The current file and its backups, newest first (those that exist)."""
        if self.path is None:
            return []
        names = [self.path, *(Path(f"{self.path}.{n}") for n in range(1, self.backups + 1))]
        return [name for name in names if name.exists()]

    def record(self, entry: dict[str, Any]) -> None:
        if self._fd is None:
            return
        line = json.dumps(
            {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **entry},
            ensure_ascii=False,
            default=str,
        )
        data = (line + "\n").encode("utf-8", "replace")
        with self._exclusive():
            if self._fd is None:
                return
            self._current()
            if os.fstat(self._fd).st_size + len(data) > self.max_bytes:
                self._rotate()
            os.write(self._fd, data)

    def _rotate(self) -> None:
        assert self.path is not None  # noqa: S101 - only called with a path
        assert self._fd is not None  # noqa: S101
        os.close(self._fd)
        if self.backups > 0:
            for number in range(self.backups - 1, 0, -1):
                older = Path(f"{self.path}.{number}")
                if older.exists():
                    os.replace(older, f"{self.path}.{number + 1}")
            os.replace(self.path, f"{self.path}.1")
        else:
            self.path.unlink(missing_ok=True)
        self._fd = self._open()

    def _rewrite(self, keep: Callable[[dict[str, Any]], bool]) -> int:
        """Rewrite every file with the lines ``keep`` accepts; the number of lines dropped.
        Each file is replaced atomically (a new file, fsync'd, renamed over the old one)."""
        dropped = 0
        with self._exclusive():
            for path in self.files():
                kept: list[str] = []
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
                for line in lines:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        entry = None
                    if isinstance(entry, dict) and not keep(entry):
                        dropped += 1
                    else:
                        kept.append(line)
                if len(kept) == len(lines):
                    continue
                temporary = path.with_name(path.name + ".tmp")
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _MODE)
                try:
                    os.write(fd, "".join(f"{line}\n" for line in kept).encode("utf-8"))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temporary, path)
                if path == self.path and self._fd is not None:
                    os.close(self._fd)
                    self._fd = self._open()
        return dropped

    def apply_erasures(self, pending: Callable[[int], list[tuple[int, str]]]) -> int:
        """Apply the erasures recorded since the last applied on this machine: ``pending``
        gives (id, conversation tag) after an id. The last id applied is kept beside the
        files (``erasures.applied``), so a machine that was off applies what it missed. An
        erasure applied twice drops nothing the second time. The number of lines dropped."""
        if self.path is None:
            return 0
        marker = self.path.with_name("erasures.applied")
        try:
            last = int(marker.read_text(encoding="ascii").strip() or 0)
        except (FileNotFoundError, ValueError):
            last = 0
        dropped = 0
        found = pending(last)
        for erasure_id, tag in found:
            dropped += self.erase(tag)
            last = max(last, erasure_id)
        if found:
            with self._exclusive():
                try:
                    current = int(marker.read_text(encoding="ascii").strip() or 0)
                except (FileNotFoundError, ValueError):
                    current = 0
                temporary = marker.with_name(marker.name + f".{os.getpid()}.tmp")
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _MODE)
                try:
                    os.write(fd, str(max(last, current)).encode("ascii"))
                finally:
                    os.close(fd)
                os.replace(temporary, marker)
        return dropped

    def erase(self, conversation_tag: str) -> int:
        """Drop every line of one conversation (its keyed hash); the number dropped."""
        return self._rewrite(lambda entry: entry.get("conversation") != conversation_tag)

    def purge(self, before: datetime) -> int:
        """Drop every line older than ``before`` (the retention); the number dropped."""
        cutoff = before.astimezone(UTC).isoformat(timespec="milliseconds")
        return self._rewrite(lambda entry: str(entry.get("time", "")) >= cutoff)

    def last(self, count: int = 1) -> list[dict[str, Any]]:
        """The last ``count`` entries of the current file (for ``nuisances doctor``)."""
        if self.path is None or not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()[-count:]
        return [json.loads(line) for line in lines if line.strip()]

    def close(self) -> None:
        with self._lock:
            for fd in (self._fd, self._lock_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fd = self._lock_fd = None
