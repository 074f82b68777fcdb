"""The judge's journal (append-only JSONL, one line per call) and the verdict cache.

Every call is journaled when it ends, with its key, the raw text the judge wrote, the verdicts
or the error and its cause, the timings and the budgets it ran under. A crashed run resumes call
by call: a key whose last entry has verdicts is not asked again; a key whose last entry is an
error is asked again only when errors are retried.

The cache key is a hash of the judge model (and its digest when the server gives one), the
rubric hash, the answer hash, the options and the repeat index: two repeats of the same answer
are two keys, so a repeat is never a copy of another. ``VerdictCache`` shares verdicts across
run directories (only verdicts, never errors).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.identity import ModelIdentity
from bench.jsonl import append_line, read_objects
from bench.judge import ErrorKind
from bench.rubric import Verdict

__all__ = ["Journal", "JournalEntry", "VerdictCache", "cache_key"]


def cache_key(
    *,
    judge: ModelIdentity,
    rubric_hash: str,
    answer_hash: str,
    options: dict[str, object],
    repeat: int,
) -> str:
    payload = {
        "judge_type": judge.provider_type,
        "judge_model": judge.model,
        "judge_digest": judge.digest,
        "rubric": rubric_hash,
        "answer": answer_hash,
        "options": options,
        "repeat": repeat,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class JournalEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    item: str
    kind: Literal["scenario", "calibration"]
    scenario_id: str
    repeat: int
    at: str
    judge_type: str
    judge_url: str
    judge_model: str
    judge_digest: str | None
    rubric_hash: str
    answer_hash: str
    options: dict[str, object]
    outcome: Literal["verdicts", "error"]
    verdicts: dict[str, Verdict] | None
    error_kind: ErrorKind | None
    cause: str | None
    raw: str
    done_reason: str | None
    timings: dict[str, float | int | None]
    budgets: dict[str, float]
    attempt: int
    cached_from: str | None = None  # "cache": copied from the shared cache, no call made


class Journal:
    """The journal of one judge directory, read once, then appended to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._latest: dict[str, JournalEntry] = {}
        self._attempts: dict[str, int] = {}
        objects, self.skipped = read_objects(path)
        for obj in objects:
            try:
                self._index(JournalEntry.model_validate(obj))
            except ValidationError:
                self.skipped += 1

    def _index(self, entry: JournalEntry) -> None:
        self._latest[entry.key] = entry
        if entry.cached_from is None:
            self._attempts[entry.key] = self._attempts.get(entry.key, 0) + 1

    def latest(self, key: str) -> JournalEntry | None:
        return self._latest.get(key)

    def attempts(self, key: str) -> int:
        return self._attempts.get(key, 0)

    def entries(self) -> list[JournalEntry]:
        """The last entry of every key."""
        return list(self._latest.values())

    def append(self, entry: JournalEntry) -> None:
        append_line(self.path, entry.model_dump(mode="json"))
        self._index(entry)


class VerdictCache:
    """Verdicts shared across runs, keyed by ``cache_key``; a no-op without a path."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._found: dict[str, JournalEntry] = {}
        if path is not None:
            for obj in read_objects(path)[0]:
                try:
                    entry = JournalEntry.model_validate(obj)
                except ValidationError:
                    continue
                if entry.outcome == "verdicts":
                    self._found[entry.key] = entry

    def get(self, key: str) -> JournalEntry | None:
        return self._found.get(key)

    def put(self, entry: JournalEntry) -> None:
        if self.path is None or entry.outcome != "verdicts" or entry.key in self._found:
            return
        append_line(self.path, entry.model_dump(mode="json"))
        self._found[entry.key] = entry
