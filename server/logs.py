"""Structured logs: one JSON object a line, with the request id; never message text.

Only whitelisted fields reach the output: the logger's name, the level, the message (a fixed
phrase written by us), and the ``extra`` keys listed in ``SAFE_FIELDS``. Anything else passed in
``extra`` is dropped, so a careless ``extra={"message": text}`` cannot leak what a person wrote.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime

__all__ = ["SAFE_FIELDS", "JsonFormatter", "configure_logging", "request_id"]

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
SAFE_FIELDS = frozenset(
    {
        "method", "path", "status_code", "duration_ms", "device", "turn_id", "category",
        "status", "source", "model", "rules", "topics", "queue_wait_ms", "first_token_ms",
        "total_ms", "tokens", "replayed", "reason", "error", "label", "count",
    }
)  # fmt: skip


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
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


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).handlers[:] = []
        logging.getLogger(noisy).propagate = False
