"""The methods compared, and ppo_clip's gradient for many independent runs in one call.

A *method* is an objective from :mod:`ppo_clip` (``clipped``, ``unclipped`` or
``clip_only``), a clip size ``eps`` and whether it takes one update per batch
(plain policy gradient) or ``K`` epochs of updates.

Runs over many seeds are computed side by side: every array has one row per
run.  :func:`surrogate_gradients` hands all rows to :func:`ppo_clip.clip_breakdown`
at once and gives each run exactly the gradient ppo_clip computes for that run's
batch alone (see its docstring), so a run's numbers never depend on which other
runs were computed with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

import ppo_clip
from ppo_viz.app import InputError
from ppo_viz.style import COLORS, NAMES, PALETTE

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: The contract's largest batch: one call to ppo_clip never gets more samples.
MAX_SAMPLES_PER_CALL = 4096


@dataclass(frozen=True)
class Method:
    """One way of turning a batch into policy updates.

    ``objective`` and ``eps`` go to :mod:`ppo_clip`; ``one_step`` makes it
    plain policy gradient: a single update per batch, whatever the number of
    epochs (at the first update every ratio is 1, so all three objectives
    give the same gradient, the ordinary policy gradient).  For methods
    without a clip, ``eps`` only sets the band the clip fraction is measured
    with.  ``label`` is the name legends and tables print.
    """

    key: str
    label: str
    objective: ppo_clip.Objective
    eps: float = ppo_clip.DEFAULT_EPS
    one_step: bool = False

    @property
    def color(self) -> str:
        return METHOD_COLORS[self.key]

    @property
    def linestyle(self) -> str:
        return METHOD_LINESTYLES.get(self.key, "-")

    def epochs(self, epochs: int) -> int:
        """How many passes this method makes over a batch when the setting is ``epochs``."""
        return 1 if self.one_step else epochs


#: Every method, by key.
METHODS = {
    method.key: method
    for method in (
        Method("ppo", "PPO, ε = 0.2", "clipped", 0.2),
        Method("ppo_eps_0.1", "PPO, ε = 0.1", "clipped", 0.1),
        Method("ppo_eps_0.3", "PPO, ε = 0.3", "clipped", 0.3),
        Method("unclipped", f"{NAMES['unclipped']} (r·A)", "unclipped"),
        Method("clip_only", f"{NAMES['clip_only']}, ε = 0.2", "clip_only"),
        Method("plain_pg", "plain PG (K = 1)", "unclipped", one_step=True),
    )
}

METHOD_COLORS = {
    "ppo": COLORS["clipped"],
    "ppo_eps_0.1": PALETTE["sky_blue"],
    "ppo_eps_0.3": PALETTE["purple"],
    "unclipped": COLORS["unclipped"],
    "clip_only": COLORS["clip_only"],
    "plain_pg": PALETTE["black"],
}
#: The two other clip sizes and plain PG are drawn dashed, dotted and dash-dotted, so they
#: read apart from PPO's ε = 0.2 even without colour.
METHOD_LINESTYLES = {"ppo_eps_0.1": "--", "ppo_eps_0.3": ":", "plain_pg": "-."}


def surrogate_gradients(
    logp_new: FloatArray,
    logp_old: FloatArray,
    advantages: FloatArray,
    method: Method,
) -> tuple[FloatArray, BoolArray]:
    """``(d loss / d logp_new, clipped)`` for independent runs, one per row, from ppo_clip.

    All arrays have shape ``(runs, n)``: row ``i`` is run ``i``'s batch of
    ``n`` samples and its loss is the mean over those ``n``.  ``clipped`` is
    where PPO's rule at ``method.eps`` switches a gradient off (for the other
    objectives: where it *would*).

    The rows go to :func:`ppo_clip.clip_breakdown` in chunks of ``m`` rows,
    ``m`` a power of two with ``m * n <= 4096`` (the contract's largest
    batch); a last, short chunk is filled up with rows of zero advantage,
    which have no gradient.  ppo_clip divides by the chunk's ``m * n``
    samples; multiplying by ``m`` gives each run the gradient of its own
    mean, and because ``m`` is a power of two both steps are exact in
    floating point: every run gets, bit for bit, what
    ``ppo_clip.surrogate_grad`` returns for its batch alone.
    """
    runs, n = logp_new.shape
    m = _rows_per_call(runs, n)
    rows = -(-runs // m) * m
    arrays = [_zero_padded(a, rows) for a in (logp_new, logp_old, advantages)]
    grads, clipped = np.empty((rows, n)), np.empty((rows, n), dtype=bool)
    for start in range(0, rows, m):
        chunk = slice(start, start + m)
        new, old, adv = (a[chunk].ravel() for a in arrays)
        breakdown = ppo_clip.clip_breakdown(new, old, adv, method.eps)
        _, grad = ppo_clip.objective_terms(breakdown, method.objective)
        grads[chunk] = grad.reshape(m, n)
        clipped[chunk] = breakdown.is_clipped.reshape(m, n)
    grads *= m
    return grads[:runs], clipped[:runs]


def _zero_padded(values: FloatArray, rows: int) -> FloatArray:
    """``values`` with rows of zeros added up to ``rows`` rows."""
    if len(values) == rows:
        return values
    padded = np.zeros((rows, values.shape[1]))
    padded[: len(values)] = values
    return padded


def _rows_per_call(runs: int, n: int) -> int:
    """A power of two: enough rows for every run, but at most 4096 samples per call."""
    most = 1 << (max(1, MAX_SAMPLES_PER_CALL // n).bit_length() - 1)
    return min(most, 1 << (runs - 1).bit_length())


def k3_kl(log_ratio: FloatArray) -> FloatArray:
    """Per run, the "k3" estimate of KL(old || new) on its batch: ``mean((r - 1) - log r)``.

    The samples come from the old policy, so ``E_old[r] = 1`` and the mean is an
    unbiased estimate of ``KL(old || new)``; every term is ``>= 0``.  This is
    the ``approx_kl`` that Stable-Baselines3 and CleanRL log.
    """
    return np.mean(np.expm1(log_ratio) - log_ratio, axis=-1)


def checked_settings(settings: Any, ranges: dict[str, tuple[float, float, bool]]) -> None:
    """Check (and convert) every field of a frozen settings dataclass against ``ranges``.

    ``ranges[field] = (low, high, whole)``; a value that is not a number, lies
    outside ``[low, high]`` or is not whole when it must be raises
    :class:`InputError` naming the setting as the controls do.
    """
    for field in fields(settings):
        low, high, whole = ranges[field.name]
        value = getattr(settings, field.name)
        name = field.name.replace("_", " ")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise InputError(f"{name} must be a number, got {value!r}")
        if not (math.isfinite(value) and low <= value <= high):
            raise InputError(f"{name} must be between {low:g} and {high:g}, got {value!r}")
        if whole and value != int(value):
            raise InputError(f"{name} must be a whole number, got {value!r}")
        object.__setattr__(settings, field.name, int(value) if whole else float(value))


Runs = TypeVar("Runs")


def joined_runs(first: Runs, second: Runs, arrays: tuple[str, ...]) -> Runs:
    """``first`` with ``second``'s seeds added: the same method and settings, more rows.

    ``first`` and ``second`` are dataclasses with ``method``, ``settings`` and
    ``seeds``; the fields named in ``arrays`` (one row per seed) are stacked.
    """
    a: Any = first
    b: Any = second
    if (a.method, a.settings) != (b.method, b.settings):
        raise ValueError("only runs of the same method and settings can be joined")
    stacked = {name: np.concatenate([getattr(a, name), getattr(b, name)]) for name in arrays}
    return replace(a, seeds=a.seeds + b.seeds, **stacked)


@dataclass(frozen=True)
class Spread:
    """The mean over runs (axis 0) and the middle half of them (25th to 75th percentile)."""

    mean: FloatArray
    low: FloatArray
    high: FloatArray


def spread(values: FloatArray) -> Spread:
    """:class:`Spread` of ``values`` with runs along axis 0 (NaN entries are left out)."""
    low, high = percentiles_ignoring_nan(values, (25.0, 75.0))
    return Spread(np.nanmean(values, axis=0), low, high)


def percentiles_ignoring_nan(values: FloatArray, qs: Sequence[float]) -> list[FloatArray]:
    """``np.nanpercentile(values, qs, axis=0)``, every column at once: one array per ``q``.

    numpy computes it column by column in Python (about 50 ms for a CartPole
    panel, which a reader waits for on every switch of setting).  The same
    rule, vectorised: sort each column once (NaNs go last), find the position
    ``q / 100 * (n - 1)`` among its ``n`` numbers, and interpolate linearly
    between the two neighbours, as numpy's ``_lerp`` does.
    """
    ordered = np.sort(values, axis=0)
    counts = np.count_nonzero(~np.isnan(values), axis=0)
    last = np.maximum(counts - 1, 0)
    percentiles = []
    for q in qs:
        position = q / 100.0 * last
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, last)
        low = np.take_along_axis(ordered, below[None], axis=0)[0]
        high = np.take_along_axis(ordered, above[None], axis=0)[0]
        weight = position - below
        step = high - low
        result = np.where(weight >= 0.5, high - step * (1 - weight), low + step * weight)
        percentiles.append(np.where(counts > 0, result, np.nan))
    return percentiles
