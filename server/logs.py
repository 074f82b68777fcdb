"""Structured logs: one JSON object a line, with the request id; never message text.

Only whitelisted fields reach the output: the logger's name, the level, the message (a fixed
phrase written by us), and the ``extra`` keys listed in ``SAFE_FIELDS``. Anything else passed in
``extra`` is dropped, so a careless ``extra={"message": text}`` cannot leak what a person wrote.

Warnings and errors that repeat (same logger, same message, same ``error``) are written at most
once per interval (``RepeatFilter``); the next one written says how many were left out
(``suppressed``). Info lines, one per request or turn, always pass.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["SAFE_FIELDS", "JsonFormatter", "RepeatFilter", "configure_logging", "request_id"]

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
SAFE_FIELDS = frozenset(
    {
        "method", "path", "status_code", "duration_ms", "device", "turn_id", "category",
        "status", "source", "model", "rules", "topics", "queue_wait_ms", "first_token_ms",
        "total_ms", "tokens", "replayed", "reason", "error", "label", "count",
        "suppressed", "client", "max_connections", "open_files",
    }
)  # fmt: skip


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,  # which worker, when several serve
            "event": record.msg if isinstance(record.msg, str) else "log",
        }
        if record.args and isinstance(record.msg, str):
            # Arguments are not interpolated: only their types, so no value can leak.
            entry["arg_types"] = [type(a).__name__ for a in record.args]
        rid = request_id.get()
        if rid is not None:
            entry["request_id"] = rid
        for name in SAFE_FIELDS:
            if name in record.__dict__:
                entry[name] = record.__dict__[name]
        if record.exc_info and record.exc_info[0] is not None:
            entry["exception"] = record.exc_info[0].__name__
        return json.dumps(entry, ensure_ascii=False, default=str)


class RepeatFilter(logging.Filter):
    """Lets a WARNING-or-above record through at most once per ``interval_s`` for the same
    (logger, first line of the message, ``error`` extra); the next one that passes carries
    ``suppressed``, the number left out since. Lower levels always pass. At most ``max_keys``
    conditions are remembered (the least recent forgotten)."""

    def __init__(
        self,
        interval_s: float = 10.0,
        *,
        max_keys: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.max_keys = max_keys
        self.clock = clock
        # key -> [time last let through, records left out since]
        self._seen: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        message = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        # asyncio's messages go on with the context ("socket: <...>") after the first line.
        key = (record.name, message.split("\n", 1)[0], str(record.__dict__.get("error")))
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval_s:
                seen[1] += 1
                return False
            self._seen[key] = [now, 0]
            self._seen.move_to_end(key)
            while len(self._seen) > self.max_keys:
                self._seen.popitem(last=False)
        if seen is not None and seen[1]:
            record.suppressed = int(seen[1])
        return True

    def quiet(self) -> list[tuple[tuple[str, str, str], int]]:
        """Conditions with lines left out whose interval is over (a flood that stopped): each
        with its count, which is reset."""
        now = self.clock()
        found = []
        with self._lock:
            for key, seen in self._seen.items():
                if seen[1] and now - seen[0] >= self.interval_s:
                    found.append((key, int(seen[1])))
                    seen[1] = 0
        return found


_active: RepeatFilter | None = None


def flush_suppressed() -> None:
    """Log once more each condition that went quiet with lines left out, with their count,
    so that a flood shorter than the interval is still counted (called periodically)."""
    if _active is None:
        return
    for (name, message, error), count in _active.quiet():
        extra: dict[str, object] = {"suppressed": count}
        if error != "None":
            extra["error"] = error
        logging.getLogger(name).warning(message, extra=extra)


def configure_logging(level: str = "INFO", interval_s: float = 10.0) -> None:
    """JSON lines on stderr; repeated warnings and errors at most once per ``interval_s``."""
    global _active
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    _active = RepeatFilter(interval_s)
    handler.addFilter(_active)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).handlers[:] = []
        logging.getLogger(noisy).propagate = False
