"""PPO's clipped surrogate loss, its clip fraction and its gradient, in numpy.

This module is the single source of truth for the teaching bundle: every figure,
widget and notebook calls it and never re-derives a ratio or a gradient.  It is
also the reference solution of the exercises, so it is written the way the
formulas read.

For a batch of N samples with new log-probabilities ``logp_new``, old
log-probabilities ``logp_old`` and advantages ``A`` (used as given, never
normalized):

* ratio ``r_t = exp(logp_new_t - logp_old_t)``;
* loss ``L = -(1/N) * sum_t min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t)``;
* sample t is *clipped* when ``A_t > 0 and r_t > 1 + eps`` or
  ``A_t < 0 and r_t < 1 - eps`` (strict comparisons; ``A_t == 0`` never clips);
* ``dL/dlogp_new_t`` is 0 for a clipped sample and ``-r_t * A_t / N`` otherwise.

A ratio may overflow to ``inf`` (log-ratios above about 709.78).  That never
produces NaN: a product ``r * A`` is only formed where ``A != 0`` (elsewhere
it is exactly 0, because ``inf * 0`` is NaN in IEEE arithmetic), and a
negative-advantage sample with an infinite ratio makes the loss ``+inf``,
which is the true float64 value.

Bad input raises a ``TypeError`` or ``ValueError`` that names the argument;
those checks live in :mod:`ppo_clip_inputs`, so that this file reads like the
formulas.

Public API
----------
``ppo_clip_loss``, ``clip_fraction``, ``ppo_clip_grad``
    The three contract functions, each a few lines built from the steps below.
``checked_ratio``, ``times_advantage``, ``clipped_times_advantage``, ``clip_mask``,
``loss_gradient``, ``negative_mean``, ``clip_band``
    The steps: the checked ratios, the two candidate terms of the ``min``,
    which samples are clipped, the gradient, the mean, the band.
``clip_breakdown``
    The per-sample computation behind all three, as a :class:`ClipBreakdown`.
    It also accepts the variants used in RLHF codes: asymmetric bounds
    (``eps_low``/``eps_high``) and the dual-clip cap for negative advantages.
``ratio_sweep``, ``objective_curve``, ``gradient_curve``
    One sample's objective term and gradient over a grid of ratios, for plots.
``surrogate_loss``, ``surrogate_grad``, ``objective_terms``
    The clipped objective next to the two alternatives it is compared with:
    the unclipped importance-weighted surrogate ``r*A`` and the clip-only
    ``clip(r)*A``.

Worked example (from the project's contract):

>>> import numpy as np
>>> logp_old = np.log([0.5, 0.5, 0.5, 0.5])
>>> logp_new = np.log([0.7, 0.55, 0.3, 0.45])
>>> advantages = [1.0, 2.0, -1.0, -0.5]
>>> ppo_clip_loss(logp_new, logp_old, advantages)
-0.5375000000000001
>>> clip_fraction(logp_new, logp_old, advantages)
0.5
>>> ppo_clip_grad(logp_new, logp_old, advantages)
array([ 0.    , -0.55  ,  0.    ,  0.1125])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ppo_clip_inputs import (
    checked_dual_clip,
    checked_eps,
    checked_finite_vector,
    checked_log_ratio,
    checked_real,
)

__all__ = [
    "DEFAULT_EPS",
    "OBJECTIVES",
    "ClipBreakdown",
    "Objective",
    "WorkedExample",
    "checked_log_ratio",
    "checked_ratio",
    "clip_band",
    "clip_breakdown",
    "clip_fraction",
    "clip_mask",
    "clipped_times_advantage",
    "gradient_curve",
    "loss_gradient",
    "loss_of",
    "negative_mean",
    "objective_curve",
    "objective_terms",
    "ppo_clip_grad",
    "ppo_clip_loss",
    "ratio_of",
    "ratio_sweep",
    "surrogate_grad",
    "surrogate_loss",
    "times_advantage",
    "worked_example",
]

DEFAULT_EPS = 0.2

Objective = Literal["clipped", "unclipped", "clip_only"]
OBJECTIVES: tuple[Objective, ...] = ("clipped", "unclipped", "clip_only")

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


# --------------------------------------------------------------------------
# The contract: three functions of one batch
# --------------------------------------------------------------------------


def ppo_clip_loss(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, eps: float = DEFAULT_EPS
) -> float:
    """PPO's clipped surrogate loss (the quantity to minimize), as a float.

    ``L = -(1/N) * sum_t min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t)``
    with ``r_t = exp(logp_new_t - logp_old_t)``.  Returns ``+inf`` when a
    negative-advantage sample's ratio overflows; never NaN.  Input checks as
    in :func:`clip_breakdown`.

    >>> import numpy as np
    >>> ppo_clip_loss(np.log([0.7, 0.55, 0.3, 0.45]), np.log([0.5] * 4),
    ...               [1.0, 2.0, -1.0, -0.5])
    -0.5375000000000001
    """
    ratio, advantages = checked_ratio(logp_new, logp_old, advantages)
    lower, upper = clip_band(eps)
    unclipped_term = times_advantage(ratio, advantages)
    clipped_term = clipped_times_advantage(ratio, lower, upper, advantages)
    loss = negative_mean(np.minimum(unclipped_term, clipped_term), len(ratio))
    if not math.isfinite(loss):  # something overflowed on the way: see loss_of
        loss = loss_of(clip_breakdown(logp_new, logp_old, advantages, eps))
    return loss


def clip_fraction(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, eps: float = DEFAULT_EPS
) -> float:
    """The fraction of samples whose gradient clipping switches off, in [0, 1].

    A sample is clipped when ``A > 0 and r > 1 + eps`` or ``A < 0 and
    r < 1 - eps`` (strict); ``A == 0`` never clips.  This is the definition of
    TRL and verl, not the sign-blind ``mean(|r - 1| > eps)`` (see
    :attr:`ClipBreakdown.band_fraction`).

    >>> import numpy as np
    >>> clip_fraction(np.log([0.7, 0.55, 0.3, 0.45]), np.log([0.5] * 4),
    ...               [1.0, 2.0, -1.0, -0.5])
    0.5
    """
    ratio, advantages = checked_ratio(logp_new, logp_old, advantages)
    lower, upper = clip_band(eps)
    clipped = clip_mask(ratio, advantages, lower, upper)
    return float(np.count_nonzero(clipped) / len(ratio))


def ppo_clip_grad(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, eps: float = DEFAULT_EPS
) -> FloatArray:
    """``d loss / d logp_new``, a float64 array of shape (N,).

    0 for a clipped sample (and for ``A == 0``), ``-r_t * A_t / N`` otherwise.
    A ratio exactly on the band's edge is not clipped and keeps its gradient.

    >>> import numpy as np
    >>> ppo_clip_grad(np.log([0.7, 0.55, 0.3, 0.45]), np.log([0.5] * 4),
    ...               [1.0, 2.0, -1.0, -0.5])
    array([ 0.    , -0.55  ,  0.    ,  0.1125])
    """
    ratio, advantages = checked_ratio(logp_new, logp_old, advantages)
    lower, upper = clip_band(eps)
    clipped = clip_mask(ratio, advantages, lower, upper)
    return loss_gradient(ratio, advantages, clipped, len(ratio))


# --------------------------------------------------------------------------
# The steps, each a function of the ratios
# --------------------------------------------------------------------------


def checked_ratio(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """``(r, A)``: the ratios ``exp(logp_new - logp_old)`` and the advantages as float64.

    The inputs are checked first (see :func:`clip_breakdown`).  A log-ratio
    above about 709.78 overflows the ratio to ``inf``, its float64 value.
    """
    log_ratio, advantages = checked_log_ratio(logp_new, logp_old, advantages)
    return ratio_of(log_ratio), advantages


def ratio_of(log_ratio: FloatArray) -> FloatArray:
    """``exp(log_ratio)``: ``inf`` (no warning) where it overflows float64."""
    with np.errstate(over="ignore"):
        return np.exp(log_ratio)


def times_advantage(values: FloatArray, advantages: FloatArray) -> FloatArray:
    """``values * A``, with an exact 0 wherever ``A == 0``.

    Where ``A == 0`` the value is replaced by 0 before multiplying, so
    ``inf * 0`` (NaN in IEEE arithmetic) is never formed.  A product too large
    for float64 overflows to ``±inf``, its true float64 value.
    """
    with np.errstate(over="ignore"):
        return np.where(advantages == 0, 0.0, values) * advantages


def clipped_times_advantage(
    ratio: FloatArray, lower: float, upper: float, advantages: FloatArray
) -> FloatArray:
    """``clip(r, lower, upper) * A`` (``clip(r)`` is finite, so a plain product is safe)."""
    with np.errstate(over="ignore"):
        return np.clip(ratio, lower, upper) * advantages


def clip_mask(
    ratio: FloatArray,
    advantages: FloatArray,
    lower: float,
    upper: float,
    dual_clip: float | None = None,
) -> BoolArray:
    """Where clipping switches the gradient off (strict comparisons).

    ``A > 0 and r > upper``, or ``A < 0 and r < lower``; with a dual-clip cap
    ``c``, also ``A < 0 and r > c``.  ``A == 0`` is never clipped.
    """
    positive, negative = advantages > 0, advantages < 0
    clipped = (positive & (ratio > upper)) | (negative & (ratio < lower))
    if dual_clip is not None:
        clipped |= negative & (ratio > dual_clip)
    return clipped


def loss_gradient(
    ratio: FloatArray, advantages: FloatArray, clipped: BoolArray, n: int
) -> FloatArray:
    """``d loss / d logp_new``: 0 where ``clipped``, ``-r*A/N`` elsewhere.

    The slope of ``r*A`` with respect to ``logp_new`` is ``r*A``, because
    ``dr/dlogp_new = r``; a clipped sample keeps a constant term, slope 0.
    A sample with ``A == 0`` has slope 0 too, and is left out of the product
    so that ``inf * 0`` is never formed.
    """
    flowing = ~clipped & (advantages != 0)
    gradient = np.where(flowing, ratio, 0.0)
    with np.errstate(over="ignore"):
        gradient *= advantages
    gradient /= -n
    gradient += 0.0  # turns -0.0 into 0.0
    return gradient


def negative_mean(terms: FloatArray, n: int) -> float:
    """The loss ``-(1/n) * sum(terms)``: ``±inf`` if the sum overflows, never ``-0.0``.

    NaN when terms of ``+inf`` and ``-inf`` meet, and ``±inf`` when the sum of
    finite terms overflows: :func:`loss_of` handles both.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return float(-terms.sum() / n) + 0.0


# --------------------------------------------------------------------------
# Every intermediate quantity, one line each
# --------------------------------------------------------------------------


@dataclass(eq=False)
class ClipBreakdown:
    """Every intermediate quantity of the clipped loss, one entry per sample.

    All arrays have shape ``(N,)``.  Gradients are of the *loss* (the quantity
    minimized) with respect to ``logp_new``, so they include the ``1/N`` of the
    mean and the minus sign.  Build one with :func:`clip_breakdown` or
    :func:`ratio_sweep`; each derived array is computed the first time it is
    read and then kept.

    Attributes
    ----------
    log_ratio:
        ``logp_new - logp_old`` (for a ratio sweep, ``log r``).
    ratio:
        ``r = exp(log_ratio)``; may be ``inf`` after overflow.
    advantages:
        The advantages as given (float64 copy, never normalized).
    lower, upper:
        The clip band ``[1 - eps_low, 1 + eps_high]``.
    batch_size:
        The N that gradients are divided by: the number of samples for
        :func:`clip_breakdown`, 1 for :func:`ratio_sweep` (each grid point is
        its own batch of one).
    dual_clip:
        The dual-clip cap ``c`` or ``None``.
    """

    log_ratio: FloatArray
    ratio: FloatArray
    advantages: FloatArray
    lower: float
    upper: float
    batch_size: int
    dual_clip: float | None = None

    @cached_property
    def clipped_ratio(self) -> FloatArray:
        """``clip(r, lower, upper)``."""
        return np.clip(self.ratio, self.lower, self.upper)

    @cached_property
    def unclipped_term(self) -> FloatArray:
        """``r * A`` (exactly 0 where ``A == 0``, even if ``r`` is ``inf``)."""
        return times_advantage(self.ratio, self.advantages)

    @cached_property
    def clipped_term(self) -> FloatArray:
        """``clip(r) * A``."""
        return clipped_times_advantage(self.ratio, self.lower, self.upper, self.advantages)

    @cached_property
    def objective_term(self) -> FloatArray:
        """The term the objective keeps: ``min(r*A, clip(r)*A)``.

        With a dual-clip cap ``c``, a negative-advantage sample keeps
        ``max(min(r*A, clip(r)*A), c*A)``: its term never falls below ``c*A``.
        """
        kept = np.minimum(self.unclipped_term, self.clipped_term)
        if self.dual_clip is not None:
            with np.errstate(over="ignore"):
                floor = self.dual_clip * self.advantages
            kept = np.where(self.advantages < 0, np.maximum(kept, floor), kept)
        return kept

    @cached_property
    def is_clipped(self) -> BoolArray:
        """Where clipping switches the gradient off: see :func:`clip_mask`."""
        return clip_mask(self.ratio, self.advantages, self.lower, self.upper, self.dual_clip)

    @cached_property
    def grad(self) -> FloatArray:
        """``d loss / d logp_new``: 0 where clipped, ``-r*A/N`` elsewhere."""
        return loss_gradient(self.ratio, self.advantages, self.is_clipped, self.batch_size)

    @cached_property
    def loss_contribution(self) -> FloatArray:
        """Each sample's share of the loss, ``-(1/N) * objective_term``."""
        return -self.objective_term / self.batch_size

    @property
    def loss(self) -> float:
        """``-(1/N) * sum(objective_term)``, the loss to minimize (see :func:`loss_of`)."""
        return loss_of(self)

    def partial_loss(self, count: int) -> float:
        """``-(1/N) * sum(objective_term[:count])``: the loss after ``count`` samples.

        With ``count == N`` this is :attr:`loss`, bit for bit.
        """
        if not 1 <= count <= self.n:
            raise ValueError(f"count must be between 1 and {self.n}, got {count!r}")
        return loss_of(self, count=count)

    @property
    def n(self) -> int:
        """The number of samples N."""
        return len(self.ratio)

    @property
    def clip_fraction(self) -> float:
        """The fraction of samples whose gradient clipping switched off."""
        return float(np.count_nonzero(self.is_clipped) / self.n)

    @property
    def outside_band(self) -> BoolArray:
        """``r < lower or r > upper``, ignoring the advantage's sign.

        This is what Stable-Baselines3, CleanRL, OpenAI Baselines and Spinning
        Up count as clipped; it can differ from :attr:`is_clipped`.
        """
        return (self.ratio < self.lower) | (self.ratio > self.upper)

    @property
    def band_fraction(self) -> float:
        """``mean(|r - 1| > eps)``: the other, sign-blind clip fraction."""
        return float(np.count_nonzero(self.outside_band) / self.n)


def _without_negative_zero(values: FloatArray) -> FloatArray:
    """``values`` with every ``-0.0`` turned into ``0.0`` (adding 0.0 does exactly that)."""
    return values + 0.0


def clip_breakdown(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    eps: float = DEFAULT_EPS,
    *,
    eps_low: float | None = None,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> ClipBreakdown:
    """Compute every per-sample quantity of the clipped loss.

    Parameters
    ----------
    logp_new, logp_old, advantages:
        1-D array-likes of equal length N >= 1 with finite real values.
        Inputs are never modified; read-only arrays are fine.
    eps:
        Clip size in [0, 1]; the band is ``[1 - eps, 1 + eps]``.
    eps_low, eps_high:
        Optional asymmetric bounds in [0, 1] (band ``[1 - eps_low,
        1 + eps_high]``); each defaults to ``eps``.
    dual_clip:
        Optional cap ``c > 1`` for negative advantages: the kept term becomes
        ``max(min(r*A, clip(r)*A), c*A)``, and a sample with ``A < 0`` and
        ``r > c`` is clipped (zero gradient).

    Raises
    ------
    TypeError
        Non-numeric data or a non-real ``eps``.
    ValueError
        Empty or non-1-D input, lengths that differ, NaN or infinite values
        (the message names the argument and index), ``eps`` outside [0, 1].

    >>> import numpy as np
    >>> b = clip_breakdown(np.log([0.7, 0.55, 0.3, 0.45]), np.log([0.5] * 4),
    ...                    [1.0, 2.0, -1.0, -0.5])
    >>> b.ratio
    array([1.4, 1.1, 0.6, 0.9])
    >>> b.is_clipped
    array([ True, False,  True, False])
    >>> b.objective_term
    array([ 1.2 ,  2.2 , -0.8 , -0.45])
    """
    log_ratio, advantages = checked_log_ratio(logp_new, logp_old, advantages)
    lower, upper = clip_band(eps, eps_low, eps_high)
    return ClipBreakdown(
        log_ratio=log_ratio,
        ratio=ratio_of(log_ratio),
        advantages=advantages.copy(),
        lower=lower,
        upper=upper,
        batch_size=len(log_ratio),
        dual_clip=checked_dual_clip(dual_clip),
    )


def worked_example() -> WorkedExample:
    """The contract's worked example as fresh arrays (safe to modify).

    >>> example = worked_example()
    >>> ppo_clip_loss(*example)
    -0.5375000000000001
    """
    return WorkedExample(
        logp_new=np.log([0.7, 0.55, 0.3, 0.45]),
        logp_old=np.log([0.5, 0.5, 0.5, 0.5]),
        advantages=np.array([1.0, 2.0, -1.0, -0.5]),
        eps=0.2,
    )


class WorkedExample(NamedTuple):
    """The contract's worked example: four samples, two of them clipped."""

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float


# --------------------------------------------------------------------------
# The alternatives the clipped objective is compared with
# --------------------------------------------------------------------------


def objective_terms(
    breakdown: ClipBreakdown, objective: Objective = "clipped"
) -> tuple[FloatArray, FloatArray]:
    """Per-sample terms and loss gradients of one objective, from a breakdown.

    Returns ``(terms, grad)``:

    * ``"clipped"``: the breakdown's own ``objective_term`` and ``grad``;
    * ``"unclipped"``: ``r*A`` and ``-r*A/N`` for every sample;
    * ``"clip_only"``: ``clip(r)*A``, and ``-r*A/N`` inside the closed band,
      0 outside it, whatever the advantage's sign (so a sample that left the
      band in the unfavourable direction gets no gradient back).

    Works on a :func:`ratio_sweep` too (N = 1).
    """
    objective = _checked_objective(objective)
    if objective == "clipped":
        return breakdown.objective_term, breakdown.grad
    full_grad = _without_negative_zero(-breakdown.unclipped_term / breakdown.batch_size)
    if objective == "unclipped":
        return breakdown.unclipped_term, full_grad
    inside = ~breakdown.outside_band
    return breakdown.clipped_term, np.where(inside, full_grad, 0.0)


#: The exact power of two the advantages are scaled by when products overflow float64.
OVERFLOW_SCALE = 2.0**-16


def scaled_down(advantages: np.ndarray) -> np.ndarray:
    """``advantages * OVERFLOW_SCALE``, where no nonzero advantage becomes 0.

    The tiniest advantages (below about 1e-319) would round to 0, and an
    infinite ratio times them would then give 0 instead of ``±inf``; they keep
    their sign as the smallest float64 instead.  Their other products change
    by far less than the last bit of a loss large enough to be recomputed.
    """
    scaled = advantages * OVERFLOW_SCALE
    smallest = np.copysign(np.finfo(np.float64).smallest_subnormal, advantages)
    return np.where((scaled == 0) & (advantages != 0), smallest, scaled)


def loss_of(
    breakdown: ClipBreakdown, objective: Objective = "clipped", count: int | None = None
) -> float:
    """``-(1/N) * sum`` of the first ``count`` (default: all) terms of an objective; never NaN.

    With huge advantages a product ``r*A`` or ``clip(r)*A`` can be too large
    for float64 (``±inf``) and a sum of large terms can overflow, although the
    exact loss is finite: a ``+inf`` term meeting a ``-inf`` one would even
    give NaN.  So when the plain computation is not finite, the loss is
    recomputed with the advantages scaled down by :data:`OVERFLOW_SCALE` (an
    exact power of two, so the terms are the same up to that factor): every
    product of a finite ratio stays finite, and the result is the exact loss
    rounded to float64, or ``±inf`` when it lies beyond float64's range or a
    ratio itself overflowed (``r = inf`` with ``A < 0`` makes the clipped loss
    ``+inf``).  Only the unclipped objective can meet two true infinities
    (infinite ratios with advantages of both signs: ``inf - inf``); it
    raises ``ValueError``.
    """
    terms, _ = objective_terms(breakdown, objective)
    loss = negative_mean(terms[:count], breakdown.batch_size)
    if math.isfinite(loss):
        return loss
    scaled = replace(breakdown, advantages=scaled_down(breakdown.advantages))
    terms, _ = objective_terms(scaled, objective)
    loss = negative_mean(terms[:count], breakdown.batch_size) / OVERFLOW_SCALE
    if math.isnan(loss):
        raise ValueError(
            f"the {objective} loss is undefined: infinite ratios (log-ratios above about "
            "709.78) with advantages of both signs make it inf - inf"
        )
    return loss


def surrogate_loss(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    eps: float = DEFAULT_EPS,
    *,
    objective: Objective = "clipped",
) -> float:
    """Loss ``-(1/N) * sum(term)`` for one of three surrogate objectives.

    ``objective`` is ``"clipped"`` (PPO, ``min(r*A, clip(r)*A)``; equals
    :func:`ppo_clip_loss`), ``"unclipped"`` (``r*A``) or ``"clip_only"``
    (``clip(r)*A``).
    """
    objective = _checked_objective(objective)
    return loss_of(clip_breakdown(logp_new, logp_old, advantages, eps), objective)


def surrogate_grad(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    eps: float = DEFAULT_EPS,
    *,
    objective: Objective = "clipped",
) -> FloatArray:
    """``d loss / d logp_new`` for one of the three objectives of :func:`surrogate_loss`.

    ``"clipped"``: :func:`ppo_clip_grad`.  ``"unclipped"``: ``-r*A/N`` for
    every sample.  ``"clip_only"``: ``-r*A/N`` where ``1 - eps <= r <= 1 + eps``
    and 0 outside the band, whatever the advantage's sign.
    """
    objective = _checked_objective(objective)
    breakdown = clip_breakdown(logp_new, logp_old, advantages, eps)
    _, grad = objective_terms(breakdown, objective)
    return grad


# --------------------------------------------------------------------------
# Curves over a grid of ratios, for plots
# --------------------------------------------------------------------------


def ratio_sweep(
    ratios: ArrayLike,
    advantage: float,
    eps: float = DEFAULT_EPS,
    *,
    eps_low: float | None = None,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> ClipBreakdown:
    """One sample's breakdown at each ratio of a grid, each as a batch of N = 1.

    Entry ``i`` of every array is what :func:`clip_breakdown` gives for a
    single sample with ratio ``ratios[i]`` and the given advantage, so
    ``grad[i]`` is ``ppo_clip_grad`` with N = 1.  Aggregates such as
    ``.loss`` are not meaningful on a sweep.

    >>> sweep = ratio_sweep([0.5, 1.0, 1.5], advantage=1.0)
    >>> sweep.objective_term
    array([0.5, 1. , 1.2])
    >>> sweep.grad
    array([-0.5, -1. ,  0. ])
    """
    grid = checked_finite_vector("ratios", ratios)
    if (grid < 0).any():
        index = int(np.argmax(grid < 0))
        raise ValueError(f"ratios[{index}] is {float(grid[index])}; ratios cannot be negative")
    lower, upper = clip_band(eps, eps_low, eps_high)
    with np.errstate(divide="ignore"):
        log_grid = np.log(grid)
    return ClipBreakdown(
        log_ratio=log_grid,
        ratio=grid.copy(),
        advantages=np.full_like(grid, checked_real("advantage", advantage)),
        lower=lower,
        upper=upper,
        batch_size=1,
        dual_clip=checked_dual_clip(dual_clip),
    )


def objective_curve(ratios: ArrayLike, advantage: float, eps: float = DEFAULT_EPS) -> FloatArray:
    """One sample's objective term ``min(r*A, clip(r)*A)`` at each ratio."""
    return ratio_sweep(ratios, advantage, eps).objective_term


def gradient_curve(ratios: ArrayLike, advantage: float, eps: float = DEFAULT_EPS) -> FloatArray:
    """One sample's ``d loss / d logp_new`` (N = 1) at each ratio."""
    return ratio_sweep(ratios, advantage, eps).grad


# --------------------------------------------------------------------------
# The band, and the name of an objective (the other input checks are in ppo_clip_inputs)
# --------------------------------------------------------------------------


def clip_band(eps: object, eps_low: object = None, eps_high: object = None) -> tuple[float, float]:
    """The clip band ``(1 - eps_low, 1 + eps_high)``; each bound defaults to ``eps``.

    >>> clip_band(0.2)
    (0.8, 1.2)
    """
    symmetric = checked_eps("eps", eps)
    low = symmetric if eps_low is None else checked_eps("eps_low", eps_low)
    high = symmetric if eps_high is None else checked_eps("eps_high", eps_high)
    return 1.0 - low, 1.0 + high


def _checked_objective(objective: object) -> Objective:
    """``objective`` if it names one of :data:`OBJECTIVES`, else a ``ValueError``."""
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    return objective  # type: ignore[return-value]
