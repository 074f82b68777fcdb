"""Statistics against known values (hand-computed or from the literature's worked examples)."""

from __future__ import annotations

import pytest

from bench.stats import cohen_kappa, confusion, mcnemar, wilson


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),  # the classic example: 8/10 → [0.490, 0.943]
        (0, 10, 0.0, 0.2775),  # no success: the interval still has width
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),  # symmetric around 1/2
        (1, 1, 0.2065, 1.0),
    ],
)
def test_wilson_known_values(successes: int, trials: int, low: float, high: float) -> None:
    found = wilson(successes, trials)
    assert found == pytest.approx((low, high), abs=5e-5)


def test_wilson_without_trials_is_the_whole_range_and_bad_counts_are_refused() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson(3, 2)


@pytest.mark.parametrize(
    ("b", "c", "exact", "mid"),
    [
        (1, 6, 0.125, 0.0703125),  # 2·P(X≤1), X~B(7,½) = 16/128; mid-p subtracts P(X=1) = 7/128
        (6, 1, 0.125, 0.0703125),  # symmetric
        (0, 5, 0.0625, 0.03125),  # 2/32, then 2/32 − 1/32
        (0, 0, 1.0, 1.0),  # no discordant pair: no evidence either way
        (3, 3, 1.0, 1.0),
        (10, 2, 0.0385742, 0.0224609),  # 2·79/4096, then (158 − 66)/4096
    ],
)
def test_mcnemar_known_tables(b: int, c: int, exact: float, mid: float) -> None:
    test = mcnemar(b, c)
    assert (test.b, test.c) == (b, c)
    assert test.p_exact == pytest.approx(exact, abs=1e-6)
    assert test.p_mid == pytest.approx(mid, abs=1e-6)


@pytest.mark.parametrize(
    ("matrix", "kappa"),
    [
        ([[20, 5], [10, 15]], 0.4),  # po 0.70, pe 0.50
        ([[45, 15], [25, 15]], 0.1304),  # po 0.60, pe 0.54
        ([[10, 0], [0, 10]], 1.0),  # perfect agreement
        ([[0, 10], [10, 0]], -1.0),  # perfect disagreement
        ([[25, 25], [25, 25]], 0.0),  # chance only
    ],
)
def test_cohen_kappa_known_matrices(matrix: list[list[int]], kappa: float) -> None:
    assert cohen_kappa(matrix) == pytest.approx(kappa, abs=1e-4)


def test_kappa_is_undefined_without_items_or_when_chance_explains_all() -> None:
    assert cohen_kappa([[0, 0], [0, 0]]) is None
    assert cohen_kappa([[7, 0], [0, 0]]) is None  # both raters always say PASS
    with pytest.raises(ValueError, match="square"):
        cohen_kappa([[1, 2, 3], [4, 5, 6]])


def test_confusion_rows_are_the_first_rater() -> None:
    pairs = [("PASS", "PASS"), ("PASS", "FAIL"), ("FAIL", "FAIL"), ("PASS", "FAIL")]
    assert confusion(pairs) == [[1, 2], [0, 1]]
