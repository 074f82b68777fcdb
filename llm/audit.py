"""The audit log: one JSON line per model call, from which any answer can be explained.

A file with rotation rather than a table: it is append-only by nature, survives a database
that is down (when fallbacks answer and the reason matters most), is never touched by the
retention purge or an erasure (it holds no raw identifier to erase: only the pseudonymised
payload), and ``nuisances doctor`` and ``jq`` read it directly.

Each line: time, request id, provider and model, the flow decision with its reasons, the
pseudonymised payload, the answer (pseudonymised again, numbers masked), the validation
errors, the leak scan's kinds and counts, status, source, timings, and the error. Never an API
key, a bearer token, or a raw identifier: what is written is built from pseudonymised text.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["AuditLog"]


class AuditLog:
    def __init__(self, path: Path | None, max_bytes: int = 10_000_000, backups: int = 5) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._handler: logging.handlers.RotatingFileHandler | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handler = logging.handlers.RotatingFileHandler(
                path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
            )

    def record(self, entry: dict[str, Any]) -> None:
        if self._handler is None:
            return
        line = json.dumps(
            {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **entry},
            ensure_ascii=False,
            default=str,
        )
        record = logging.LogRecord("audit", logging.INFO, __file__, 0, line, None, None)
        with self._lock:
            self._handler.emit(record)

    def last(self, count: int = 1) -> list[dict[str, Any]]:
        """The last ``count`` entries of the current file (for ``nuisances doctor``)."""
        if self.path is None or not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()[-count:]
        return [json.loads(line) for line in lines if line.strip()]

    def close(self) -> None:
        if self._handler is not None:
            self._handler.close()
