"""Append-only JSON Lines files that survive a crash in the middle of a write.

A process killed while writing leaves a last line without its newline: readers skip any line
that does not parse, and the next append first ends that line, so it never glues onto it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["append_line", "read_objects"]


def append_line(path: Path, obj: Any) -> None:
    """Append ``obj`` as one JSON line, flushed and synced before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    with path.open("a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
        handle.write(text.encode("utf-8") + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_objects(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The objects of every complete line, and how many lines were skipped as unreadable."""
    if not path.is_file():
        return [], 0
    objects: list[dict[str, Any]] = []
    skipped = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(value, dict):
            objects.append(value)
        else:
            skipped += 1
    return objects, skipped
