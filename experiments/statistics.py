"""The study's statistics: seeded bootstrap intervals, paired differences, stable ranges.

Every method of a sweep runs on the same seeds, and a seed's random numbers are the same
for every method (common random numbers), so two methods are compared seed by seed: the
mean of the per-seed differences, with a bootstrap 95% interval.  An interval that holds 0
says the two are *not distinguishable with these seeds*: not that they are equal.  The
bootstrap draws its resamples from a fixed seed, so the same scores always give the same
interval (on any machine: the resampling uses integers only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

#: The bootstrap's own seed, its number of resamples and the interval's coverage.
BOOTSTRAP_SEED = 1707_06347
RESAMPLES = 10_000
LEVEL = 0.95
#: A method is stable at a step size when at least this share of its seeds succeed.
STABLE_SHARE = 0.9
#: The verdicts of a paired difference: its interval above 0, below 0, or holding 0.
HIGHER, LOWER, NOT_DISTINGUISHABLE = "higher", "lower", "not distinguishable"


def bootstrap_interval(values: ArrayLike) -> tuple[float, float]:
    """The percentile bootstrap :data:`LEVEL` interval of the mean of ``values``.

    >>> bootstrap_interval([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or not np.isfinite(values).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got {values!r}")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = values[rng.integers(0, values.size, (RESAMPLES, values.size))].mean(axis=1)
    tail = 50.0 * (1.0 - LEVEL)
    low, high = np.percentile(means, (tail, 100.0 - tail))
    return float(low), float(high)


def paired_difference(scores: ArrayLike, reference: ArrayLike) -> dict[str, object]:
    """``scores - reference`` seed by seed: the mean difference, its bootstrap interval, and
    the verdict: :data:`HIGHER`, :data:`LOWER`, or :data:`NOT_DISTINGUISHABLE` when the
    interval holds 0."""
    a, b = np.asarray(scores, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores need the same seeds: shapes {a.shape} and {b.shape}")
    low, high = bootstrap_interval(a - b)
    verdict = verdict_of(low, high)
    return {"diff": float(np.mean(a - b)), "ci": [low, high], "verdict": verdict}


def verdict_of(low: float, high: float) -> str:
    """The verdict of a difference whose 95% interval is ``[low, high]``."""
    return NOT_DISTINGUISHABLE if low <= 0.0 <= high else (HIGHER if low > 0.0 else LOWER)


def stable_range(values: Sequence[float], success_shares: Sequence[float]) -> list[float] | None:
    """The smallest and the largest of ``values`` at which at least :data:`STABLE_SHARE` of
    the seeds succeed (None if there is none).  Steps in between may fail: see the cells.

    >>> stable_range([0.1, 1.0, 10.0], [0.5, 0.95, 0.9])
    [1.0, 10.0]
    """
    stable = [v for v, share in zip(values, success_shares, strict=True) if share >= STABLE_SHARE]
    return [min(stable), max(stable)] if stable else None
