"""Budgets for a slow judge, set from what its first calls measured, and the run's estimate.

The first calls run under generous budgets (a cold load on a CPU box can take minutes). Once
``warm_up_calls`` calls have finished without a timeout, each budget becomes the 95th
percentile of what was measured, times ``factor``, never below its floor: a judge that slows
down a little is still waited for, a judge that hangs is not waited for forever. A call that
timed out is retried with the generous budgets again, never with the measured ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.judge import CallTimings
from llm.config import Budgets

__all__ = ["Pacer", "percentile"]


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Pacer:
    initial: Budgets
    floor_first_token_s: float = 20.0
    floor_idle_s: float = 10.0
    floor_total_s: float = 60.0
    factor: float = 3.0
    warm_up_calls: int = 3
    samples: list[CallTimings] = field(default_factory=list)

    def record(self, timings: CallTimings, *, timed_out: bool) -> None:
        """Keep the timings of a call that ran to its end (a timeout measures the budget)."""
        if not timed_out:
            self.samples.append(timings)

    @property
    def measured(self) -> bool:
        return len(self.samples) >= self.warm_up_calls

    def budgets(self, *, generous: bool = False) -> Budgets:
        """The budgets for the next call (the initial ones until enough calls were measured)."""
        if generous or not self.measured:
            return self.initial
        firsts = [s.first_token_s for s in self.samples if s.first_token_s is not None]
        gaps = [s.max_gap_s for s in self.samples if s.max_gap_s is not None]
        totals = [s.total_s for s in self.samples]
        first = max(self.floor_first_token_s, self.factor * percentile(firsts or [0.0], 0.95))
        idle = max(self.floor_idle_s, self.factor * percentile(gaps or [0.0], 0.95))
        total = max(self.floor_total_s, self.factor * percentile(totals, 0.95), first, idle)
        return self.initial.model_copy(
            update={
                "first_token_s": round(first, 1),
                "idle_s": round(idle, 1),
                "total_s": round(total, 1),
            }
        )

    def seconds_per_call(self) -> float | None:
        """Mean duration of the calls measured so far."""
        if not self.samples:
            return None
        return sum(s.total_s for s in self.samples) / len(self.samples)

    def estimate_s(self, calls: int, parallel: int) -> float | None:
        """Seconds for ``calls`` more calls on ``parallel`` slots, from the measured mean."""
        per_call = self.seconds_per_call()
        if per_call is None:
            return None
        return per_call * math.ceil(calls / max(1, parallel))


def format_duration(seconds: float) -> str:
    """``3 h 02 min``, ``4 min 05 s``, ``12 s``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"
