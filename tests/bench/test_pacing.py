"""Budgets from measured timings: generous first, then p95 × factor, never below the floors."""

from __future__ import annotations

import pytest

from bench.judge import CallTimings
from bench.pacing import Pacer, format_duration, percentile
from llm.config import Budgets

INITIAL = Budgets(first_token_s=600, idle_s=180, total_s=1200)


def timings(first: float, gap: float, total: float) -> CallTimings:
    return CallTimings(first_token_s=first, max_gap_s=gap, total_s=total, chunks=10)


def test_initial_budgets_until_enough_calls_are_measured() -> None:
    pacer = Pacer(INITIAL, warm_up_calls=3)
    pacer.record(timings(30, 2, 60), timed_out=False)
    pacer.record(timings(30, 2, 60), timed_out=False)
    assert pacer.budgets() == INITIAL
    pacer.record(timings(40, 5, 90), timed_out=False)
    measured = pacer.budgets()
    assert (measured.first_token_s, measured.idle_s, measured.total_s) == (120, 15, 270)


def test_floors_hold_for_a_fast_judge() -> None:
    pacer = Pacer(INITIAL, floor_first_token_s=20, floor_idle_s=10, floor_total_s=60)
    for _ in range(3):
        pacer.record(timings(0.1, 0.01, 0.5), timed_out=False)
    measured = pacer.budgets()
    assert (measured.first_token_s, measured.idle_s, measured.total_s) == (20, 10, 60)


def test_timeouts_are_not_samples_and_retries_of_timeouts_get_the_generous_budgets() -> None:
    pacer = Pacer(INITIAL)
    for _ in range(5):
        pacer.record(timings(600, 0, 600), timed_out=True)
    assert pacer.samples == []
    for _ in range(3):
        pacer.record(timings(1, 1, 2), timed_out=False)
    assert pacer.budgets().total_s == 60
    assert pacer.budgets(generous=True) == INITIAL


def test_estimate_is_calls_times_the_mean_over_the_slots() -> None:
    pacer = Pacer(INITIAL)
    assert pacer.estimate_s(10, 1) is None  # nothing measured yet
    pacer.record(timings(1, 1, 10), timed_out=False)
    pacer.record(timings(1, 1, 20), timed_out=False)
    assert pacer.estimate_s(10, 1) == 150
    assert pacer.estimate_s(10, 4) == 45  # ceil(10 / 4) rounds of 15 s


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [
        ([1, 2, 3], 0.95, 3),
        ([5, 1, 4, 2, 3], 0.5, 3),
        ([7], 0.95, 7),
        (list(range(1, 101)), 0.95, 95),
    ],
)
def test_nearest_rank_percentile(values: list[float], share: float, expected: float) -> None:
    assert percentile(values, share) == expected


@pytest.mark.parametrize(
    ("seconds", "text"), [(12, "12 s"), (245, "4 min 05 s"), (10_920, "3 h 02 min")]
)
def test_durations_read_well(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
