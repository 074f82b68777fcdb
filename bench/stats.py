"""Small, exact statistics for the bench: Wilson intervals, McNemar's test, Cohen's kappa.

- ``wilson(k, n)``: the Wilson score interval of a proportion (95 % by default); it stays
  inside [0, 1] and behaves at 0/n and n/n, unlike the normal approximation.
- ``mcnemar(b, c)``: the paired test of two runs on the same items, from the discordant pairs
  (``b``: passed in A only, ``c``: passed in B only); the exact two-sided binomial p-value and
  its mid-p variant (less conservative, recommended for small counts by Fagerland et al.).
- ``cohen_kappa(matrix)``: agreement between two raters beyond chance, from a square
  confusion matrix (rows: rater 1, columns: rater 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["McNemar", "cohen_kappa", "confusion", "mcnemar", "wilson"]

Z_95 = 1.959963984540054


def wilson(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval; ``(0.0, 1.0)`` when there is no trial."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError("need 0 <= successes <= trials")
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class McNemar:
    b: int  # pass in A, fail in B
    c: int  # fail in A, pass in B
    p_exact: float
    p_mid: float


def _binomial_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return float(sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def mcnemar(b: int, c: int) -> McNemar:
    """Exact (binomial) two-sided McNemar test and its mid-p; p = 1 without discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError("counts must not be negative")
    n = b + c
    if n == 0:
        return McNemar(b, c, 1.0, 1.0)
    low = min(b, c)
    tail = _binomial_cdf_half(low, n)
    point = math.comb(n, low) / 2**n
    return McNemar(b, c, min(1.0, 2 * tail), min(1.0, 2 * tail - point))


def confusion(
    pairs: Sequence[tuple[str, str]], labels: Sequence[str] = ("PASS", "FAIL")
) -> list[list[int]]:
    """The confusion matrix of ``(rater 1, rater 2)`` pairs, in the order of ``labels``."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for first, second in pairs:
        matrix[index[first]][index[second]] += 1
    return matrix


def cohen_kappa(matrix: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square matrix; None when undefined (no items, or chance = 1)."""
    size = len(matrix)
    if any(len(row) != size for row in matrix):
        raise ValueError("the matrix must be square")
    total = sum(sum(row) for row in matrix)
    if total == 0:
        return None
    observed = sum(matrix[i][i] for i in range(size)) / total
    rows = [sum(row) for row in matrix]
    columns = [sum(matrix[i][j] for i in range(size)) for j in range(size)]
    expected = sum(rows[i] * columns[i] for i in range(size)) / (total * total)
    if math.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1 - expected)
