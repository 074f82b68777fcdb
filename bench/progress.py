"""The judge's progress on the terminal: a bar, the time left, a live PASS/FAIL/ERROR tally.

The tally counts the criteria of the scenarios' answers (a call grades several; calibration
answers are left out, as in the report's counts), those already journaled included; a retried
error leaves the tally when its new outcome enters it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["Display", "tally_text"]


class _Outcome(Protocol):
    @property
    def outcome(self) -> str: ...
    @property
    def error_kind(self) -> str | None: ...


def tally_text(tally: Counter[str]) -> str:
    """``PASS 12 · FAIL 3 · ERROR 2 (timeout 1, parse 1)``."""
    kinds = sorted(k for k in tally if k.startswith("ERROR:"))
    detail = ", ".join(f"{k.split(':', 1)[1]} {tally[k]}" for k in kinds if tally[k])
    text = f"PASS {tally['PASS']} · FAIL {tally['FAIL']} · ERROR {tally['ERROR']}"
    return f"{text} ({detail})" if detail else text


class Display:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.tally: Counter[str] = Counter()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def _count(self, outcomes: Iterable[_Outcome], sign: int) -> None:
        for outcome in outcomes:
            self.tally[outcome.outcome] += sign
            if outcome.outcome == "ERROR":
                self.tally[f"ERROR:{outcome.error_kind}"] += sign

    def start(self, calls: int, journaled: Iterable[_Outcome]) -> None:
        self._count(journaled, +1)
        self._progress = Progress(
            TextColumn("[bold]judge"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[tally]}"),
            console=self.console,
        )
        self._progress.start()
        self._task = self._progress.add_task("judge", total=calls, tally=tally_text(self.tally))

    def extend(self, calls: int, _outcomes: Iterable[_Outcome]) -> None:
        if self._progress is not None and self._task is not None:
            total = self._progress.tasks[0].total or 0
            self._progress.update(self._task, total=total + calls)

    def advance(self, outcomes: Iterable[_Outcome], *, replaces: Iterable[_Outcome]) -> None:
        self._count(replaces, -1)
        self._count(outcomes, +1)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, tally=tally_text(self.tally))

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
