"""What both studies' claims rest on: sets of seeds, seeded bootstrap intervals, paired
differences and their verdicts, and simultaneous bands over a curve of paired differences.

Every study runs each cell on two sets of seeds (:data:`SEED_SETS`): claims and best settings
are chosen on the *discovery* set and checked on the *confirmation* set, free of the winner's
curse; the LLM studies run a third (:data:`THIRD_SET`) that tests what the first two state
(:func:`stated_side`, :func:`third_set_count`).  Every method of a set runs on the same seeds
with the same random numbers, so two methods compare seed by seed (:func:`paired`): the mean of
the per-seed differences, with a bootstrap 95% interval; one that holds 0 says *not
distinguishable with these seeds*, not "equal".  The bootstrap's resamples come from a fixed
seed (integers only: the same values give the same interval on any machine).  Which comparisons
a study makes is its own (:mod:`experiments.claims`, :mod:`experiments.rlhf_findings`,
:mod:`experiments.mismatch_study`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ppo_viz.results import SEED_SETS as SEED_SETS  # the two sets of seeds, in order
from ppo_viz.results import THIRD_SET

#: Every set of seeds, in order: the LLM studies add a third (:data:`THIRD_SET`).
ALL_SEED_SETS = (*SEED_SETS, THIRD_SET)

#: The bootstrap's own seed, its number of resamples and the interval's coverage.
BOOTSTRAP_SEED = 1707_06347
RESAMPLES = 10_000
LEVEL = 0.95
#: The normal quantile of a two-sided 95% interval (a quick stand-in for the bootstrap's).
Z95 = 1.96
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


def paired(values: ArrayLike, reference: ArrayLike) -> dict[str, Any]:
    """``values - reference`` seed by seed, over the seeds where both are finite: the mean
    difference ``diff``, its bootstrap interval ``ci`` and the number of seeds ``n``."""
    a, b = np.asarray(values, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same seeds: shapes {a.shape} and {b.shape}")
    d = a - b
    d = d[np.isfinite(d)]
    return {"diff": float(d.mean()), "ci": list(bootstrap_interval(d)), "n": d.size}


def sign_of(ci: Sequence[float]) -> int:
    """+1 or -1 where the interval ``ci`` excludes 0 on that side, 0 where it holds 0."""
    low, high = ci
    return 1 if low > 0 else (-1 if high < 0 else 0)


def verdict_of(ci: Sequence[float]) -> str:
    """The verdict of a difference whose 95% interval is ``ci``: :data:`HIGHER`,
    :data:`LOWER` or :data:`NOT_DISTINGUISHABLE`."""
    return (NOT_DISTINGUISHABLE, HIGHER, LOWER)[sign_of(ci)]


def fresh_verdicts(differences: np.ndarray) -> np.ndarray:
    """Per row of per-seed differences (a fresh set drawn from the seeds there are), its
    verdict by the normal-approximation 95% interval ``mean +- 1.96 sd / sqrt(n)``."""
    mean, sd = differences.mean(axis=1), differences.std(axis=1, ddof=1)
    half = Z95 * sd / np.sqrt(differences.shape[1])
    intervals = zip(mean - half, mean + half, strict=True)
    return np.array([verdict_of(ci) for ci in intervals], dtype=object)


def stated_side(signs: Mapping[str, Sequence[int]], side: int) -> dict[str, list[int]]:
    """One side (+1 or -1) of a curve tested on every set of :data:`ALL_SEED_SETS`, from each
    set's :func:`sign_of` at each setting: the settings where discovery and confirmation both
    put it on ``side`` (``stated``), where the third set does too (``held``) and where the
    third set puts it on the other side (``contradicted``), as indices.

    >>> signs = {"discovery": [1, 1, 0], "confirmation": [1, 1, 1], "replication": [1, -1, 1]}
    >>> stated_side(signs, 1)
    {'stated': [0, 1], 'held': [0], 'contradicted': [1]}
    """
    first, second, third = (signs[s] for s in ALL_SEED_SETS)
    stated = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a == b == side]
    held, against = ([i for i in stated if third[i] == s] for s in (side, -side))
    return {"stated": stated, "held": held, "contradicted": against}


def third_set_count(sides: Sequence[Mapping[str, Sequence[Any]]]) -> dict[str, int]:
    """Of the stated sides (each as :func:`stated_side` gives it; those stated nowhere are left
    out): how many the third set confirms at every stated setting, at some, and how many it
    contradicts somewhere."""
    stated = [s for s in sides if s["stated"]]
    return {
        "stated": len(stated),
        "held_everywhere": sum(len(s["held"]) == len(s["stated"]) for s in stated),
        "held_somewhere": sum(bool(s["held"]) for s in stated),
        "contradicted": sum(bool(s["contradicted"]) for s in stated),
    }


def stable_range(values: Sequence[float], success_shares: Sequence[float]) -> list[float] | None:
    """The smallest and the largest of ``values`` at which at least :data:`STABLE_SHARE` of
    the seeds succeed (None if there is none).  Steps in between may fail: see the cells.

    >>> stable_range([0.1, 1.0, 10.0], [0.5, 0.95, 0.9])
    [1.0, 10.0]
    """
    stable = [v for v, share in zip(values, success_shares, strict=True) if share >= STABLE_SHARE]
    return [min(stable), max(stable)] if stable else None


def simultaneous_band(differences: ArrayLike) -> dict[str, Any]:
    """A curve of paired differences with a simultaneous :data:`LEVEL` band over its settings.

    ``differences``: (seeds, settings), each seed's difference at each setting (the same seeds
    at every setting, so the curve's points are correlated as they are).  Max-t studentized
    bootstrap: seeds are resampled whole, ``t*_g = (mean*_g - mean_g) / se*_g`` at each setting
    ``g``, and ``c`` is the :data:`LEVEL` quantile of ``max_g |t*_g|``; the band is
    ``mean_g +- c * se_g``, so that all its points hold their true values together in about 95%
    of seed sets, where one interval per point would miss somewhere far more often.  Returns
    ``mean``, ``low``, ``high`` (lists), the critical value ``c`` and ``n`` seeds; a setting
    where every seed has the same difference has a band of width 0.

    >>> band = simultaneous_band([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    >>> band["mean"], band["low"][1], band["high"][1]
    ([2.0, 0.0], 0.0, 0.0)
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 1 or not np.isfinite(d).all():
        raise ValueError(
            f"differences must be a finite (seeds, settings) array with 2 or more seeds, got "
            f"shape {d.shape}"
        )
    n = d.shape[0]
    mean, se = d.mean(axis=0), d.std(axis=0, ddof=1) / math.sqrt(n)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    resampled = d[rng.integers(0, n, (RESAMPLES, n))]  # (resamples, seeds, settings)
    se_star = resampled.std(axis=1, ddof=1) / math.sqrt(n)
    gap = resampled.mean(axis=1) - mean
    t = np.divide(np.abs(gap), se_star, out=np.zeros_like(gap), where=se_star > 0)
    c = float(np.quantile(t.max(axis=1), LEVEL))
    return {
        "mean": mean.tolist(),
        "low": (mean - c * se).tolist(),
        "high": (mean + c * se).tolist(),
        "c": c,
        "n": n,
    }
