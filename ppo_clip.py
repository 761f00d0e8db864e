"""PPO's clipped surrogate loss, its clip fraction and its gradient, in numpy.

This module is the single source of truth for the teaching bundle: every figure,
widget and notebook calls it and never re-derives a ratio or a gradient.  It is
also the reference solution of the exercises.

For a batch of N samples with new log-probabilities ``logp_new``, old
log-probabilities ``logp_old`` and advantages ``A`` (used as given, never
normalized):

* ratio ``r_t = exp(logp_new_t - logp_old_t)``;
* loss ``L = -(1/N) * sum_t min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t)``;
* sample t is *clipped* when ``A_t > 0 and r_t > 1 + eps`` or
  ``A_t < 0 and r_t < 1 - eps`` (strict comparisons; ``A_t == 0`` never clips);
* ``dL/dlogp_new_t`` is 0 for a clipped sample and ``-r_t * A_t / N`` otherwise.

The file reads top to bottom:

1. **The textbook**: :func:`ppo_clip_loss`, :func:`clip_fraction` and
   :func:`ppo_clip_grad`, each the formula above in a few numpy lines.
2. **Every intermediate quantity**: :func:`clip_breakdown` gives each
   sample's ratio, terms, clip decision and gradient as a :class:`ClipBreakdown`,
   for the RLHF variants too (asymmetric bounds, the dual-clip cap);
   :func:`worked_example` is the contract's example.
3. **The alternatives** the clipped objective is compared with (the unclipped
   surrogate ``r*A`` and the clip-only ``clip(r)*A``): :func:`surrogate_loss`,
   :func:`surrogate_grad`, :func:`objective_terms` (:func:`objective_grad` for the
   gradient alone); and :func:`ratio_sweep`, one sample over a grid of ratios, for plots.
4. **Float64's limits**: what float64 arithmetic cannot do in the textbook
   lines, decided exactly instead.  A ratio overflows to ``inf`` above a
   log-ratio of about 709.78, ``inf * 0`` is NaN, and a product ``r*A`` or a
   sum of terms can overflow although the answer is finite.  Whenever a
   textbook line's result is not finite, part 4 decides it; never NaN:

   * a sample with ``A == 0`` contributes exactly 0 to the loss and the gradient;
   * an overflowed ratio with ``A < 0`` makes the loss and that sample's
     gradient ``+inf`` (the ratio is infinite in float64, and so is the loss);
   * otherwise the loss is the exact ``-(1/N) * sum(min(r*A, clip(r)*A))`` of
     the float64 ratios and advantages, rounded once to float64, and a gradient
     entry the exact ``-r*A/N`` rounded once: finite wherever float64 holds
     the answer, ``+-inf`` only beyond float64's range.

   Where nothing overflows, the answers are float64 arithmetic as written:
   ``-(r*A)/N`` for a gradient entry, and numpy's sum of the float64 terms
   divided by ``-N`` for the loss (rounded like any float64 mean: by a few
   units in the last place of the terms' total magnitude, over N).

Bad input raises a ``TypeError`` or ``ValueError`` that names the argument;
those checks live in :mod:`ppo_clip_inputs`, and part 4 (its exact arithmetic
shared with :mod:`llm_clip`) in :mod:`ppo_clip_exact`.

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
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

import ppo_clip_exact as exact
import ppo_clip_inputs as checks
from ppo_clip_exact import BoolArray, FloatArray
from ppo_clip_inputs import clip_band

__all__ = [
    "DEFAULT_EPS",
    "OBJECTIVES",
    "ClipBreakdown",
    "Objective",
    "WorkedExample",
    "clip_band",
    "clip_breakdown",
    "clip_fraction",
    "objective_grad",
    "objective_terms",
    "ppo_clip_grad",
    "ppo_clip_loss",
    "ratio_sweep",
    "surrogate_grad",
    "surrogate_loss",
    "worked_example",
]

DEFAULT_EPS = 0.2

Objective = Literal["clipped", "unclipped", "clip_only"]
OBJECTIVES: tuple[Objective, ...] = ("clipped", "unclipped", "clip_only")


# --------------------------------------------------------------------------
# 1. The textbook: the three contract functions
# --------------------------------------------------------------------------


def ppo_clip_loss(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, eps: float = DEFAULT_EPS
) -> float:
    """PPO's clipped surrogate loss (the quantity to minimize), as a float.

    ``L = -(1/N) * sum_t min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t)``
    with ``r_t = exp(logp_new_t - logp_old_t)``.  ``+inf`` when a
    negative-advantage sample's ratio overflows; never NaN (see part 4 of the
    module's docstring).  Input checks as in :func:`clip_breakdown`.

    >>> import numpy as np
    >>> ppo_clip_loss(np.log([0.7, 0.55, 0.3, 0.45]), np.log([0.5] * 4),
    ...               [1.0, 2.0, -1.0, -0.5])
    -0.5375000000000001
    """
    log_ratio, advantages = checks.checked_log_ratio(logp_new, logp_old, advantages)  # new - old
    eps = checks.checked_eps("eps", eps)
    with exact.float64_limits_handled_below():
        ratio = np.exp(log_ratio)  # r_t
        unclipped = ratio * advantages  # r_t * A_t
        clipped = np.clip(ratio, 1 - eps, 1 + eps) * advantages  # clip(r_t, 1-eps, 1+eps) * A_t
        terms = np.minimum(unclipped, clipped)  # min(r_t * A_t, clip(r_t, 1-eps, 1+eps) * A_t)
        loss = -terms.sum() / len(terms)  # -(1/N) * sum_t
    if not math.isfinite(loss):  # float64 overflowed on the way: part 4 decides
        return ClipBreakdown(log_ratio, ratio, advantages, 1 - eps, 1 + eps, len(terms)).loss
    return float(loss) + 0.0  # + 0.0 turns -0.0 (every term 0) into the 0.0 a reader expects


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
    log_ratio, advantages = checks.checked_log_ratio(logp_new, logp_old, advantages)  # new - old
    eps = checks.checked_eps("eps", eps)
    with exact.float64_limits_handled_below():
        ratio = np.exp(log_ratio)  # r_t (inf where it overflows: compared as such)
    clipped = ((advantages > 0) & (ratio > 1 + eps)) | ((advantages < 0) & (ratio < 1 - eps))
    return float(np.count_nonzero(clipped) / len(clipped))


def ppo_clip_grad(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, eps: float = DEFAULT_EPS
) -> FloatArray:
    """``d loss / d logp_new``, a float64 array of shape (N,).

    0 for a clipped sample and for ``A == 0`` (a constant term, even where the
    ratio overflowed), ``-r_t * A_t / N`` otherwise: ``d(r*A)/dlogp_new = r*A``
    because ``dr/dlogp_new = r``.  A ratio exactly on the band's edge is not
    clipped and keeps its gradient.

    >>> import numpy as np
    >>> ppo_clip_grad(np.log([0.7, 0.55, 0.3, 0.45]), np.log([0.5] * 4),
    ...               [1.0, 2.0, -1.0, -0.5])
    array([ 0.    , -0.55  ,  0.    ,  0.1125])
    """
    log_ratio, advantages = checks.checked_log_ratio(logp_new, logp_old, advantages)  # new - old
    eps = checks.checked_eps("eps", eps)
    with exact.float64_limits_handled_below():
        ratio = np.exp(log_ratio)  # r_t
        grad = ratio * advantages / -len(ratio)  # -r_t * A_t / N
    clipped = ((advantages > 0) & (ratio > 1 + eps)) | ((advantages < 0) & (ratio < 1 - eps))
    grad[clipped | (advantages == 0)] = 0.0  # a constant term (clipped, or A_t = 0): slope 0
    if not np.isfinite(grad).all():  # float64 overflowed on the way: part 4 decides
        return ClipBreakdown(log_ratio, ratio, advantages, 1 - eps, 1 + eps, len(ratio)).grad
    return grad + 0.0  # -r*A/N is -0.0 where r or A is 0: + 0.0 makes it 0.0


# --------------------------------------------------------------------------
# 2. Every intermediate quantity, one line each
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
        """``r * A``: exactly 0 where ``A == 0`` (even if ``r = inf``); ``+-inf`` past float64."""
        return exact.times_advantage(self.ratio, self.advantages)

    @cached_property
    def clipped_term(self) -> FloatArray:
        """``clip(r) * A``."""
        return exact.times_advantage(self.clipped_ratio, self.advantages)

    @cached_property
    def objective_term(self) -> FloatArray:
        """The term the objective keeps: ``min(r*A, clip(r)*A)``.

        With a dual-clip cap ``c``, a negative-advantage sample keeps
        ``max(min(r*A, clip(r)*A), c*A)``: its term never falls below ``c*A``.
        """
        kept = exact.kept_ratio(self.ratio, self.advantages, self.lower, self.upper, self.dual_clip)
        return exact.times_advantage(kept, self.advantages)

    @cached_property
    def is_clipped(self) -> BoolArray:
        """Where clipping switches the gradient off (strict comparisons).

        ``A > 0 and r > upper``, or ``A < 0 and r < lower``; with a dual-clip
        cap ``c``, also ``A < 0 and r > c``.  ``A == 0`` is never clipped.
        """
        b = self
        return exact.clipped_where(b.ratio, b.advantages, b.lower, b.upper, b.dual_clip)

    @cached_property
    def grad(self) -> FloatArray:
        """``d loss / d logp_new``: 0 where clipped, ``-r*A/N`` elsewhere."""
        return exact.gradient(self.ratio, self.advantages, ~self.is_clipped, self.batch_size)

    @cached_property
    def loss_contribution(self) -> FloatArray:
        """Each sample's share of the loss, ``-(1/N) * objective_term``."""
        with exact.float64_limits_handled_below():  # a tiny term over N underflows to 0
            return -self.objective_term / self.batch_size + 0.0

    @property
    def loss(self) -> float:
        """``-(1/N) * sum(objective_term)``, the loss to minimize (see :func:`_loss_of`)."""
        return _loss_of(self)

    def partial_loss(self, count: int) -> float:
        """``-(1/N) * sum(objective_term[:count])``: the loss after ``count`` samples.

        With ``count == N`` this is :attr:`loss`, bit for bit.
        """
        return _loss_of(self, count=checks.checked_count("count", count, self.n))

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
        Up count as clipped; it can differ from :attr:`is_clipped`.  Spinning Up
        writes this test; the others write ``|r - 1| > eps``, which can differ on
        the band's edge (``r - 1`` of a ratio at ``1 + eps`` may round above ``eps``).
        """
        return (self.ratio < self.lower) | (self.ratio > self.upper)

    @property
    def band_fraction(self) -> float:
        """The mean of :attr:`outside_band`: the other, sign-blind clip fraction."""
        return float(np.count_nonzero(self.outside_band) / self.n)


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
    log_ratio, advantages = checks.checked_log_ratio(logp_new, logp_old, advantages)
    lower, upper = clip_band(eps, eps_low, eps_high)
    with exact.float64_limits_handled_below():
        ratio = np.exp(log_ratio)
    cap, n = checks.checked_dual_clip(dual_clip), len(log_ratio)
    return ClipBreakdown(log_ratio, ratio, advantages.copy(), lower, upper, n, cap)


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
# 3. The alternatives the clipped objective is compared with, and curves for plots
# --------------------------------------------------------------------------


#: Each objective's per-sample term, a :class:`ClipBreakdown` attribute.
_TERMS = {"clipped": "objective_term", "unclipped": "unclipped_term", "clip_only": "clipped_term"}


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
    grad = objective_grad(breakdown, objective)  # checks the name first
    return getattr(breakdown, _TERMS[objective]), grad


def objective_grad(breakdown: ClipBreakdown, objective: Objective = "clipped") -> FloatArray:
    """The loss gradients of one objective, from a breakdown: ``objective_terms(...)[1]``
    without computing the terms (for a training loop that needs only the gradient)."""
    objective = checks.checked_choice("objective", objective, OBJECTIVES)
    b = breakdown
    if objective == "clipped":
        return b.grad
    flowing = np.ones(b.n, dtype=bool) if objective == "unclipped" else ~b.outside_band
    return exact.gradient(b.ratio, b.advantages, flowing, b.batch_size)


def _loss_of(
    breakdown: ClipBreakdown, objective: Objective = "clipped", count: int | None = None
) -> float:
    """``-(1/N) * sum`` of the first ``count`` (default: all) terms of an objective; never NaN:
    :func:`ppo_clip_exact.loss_of`, as part 4 of the module's docstring says.  Only the
    unclipped objective can meet two true infinities (overflowed ratios with advantages of
    both signs: ``inf - inf``); it raises ``ValueError``."""
    objective = checks.checked_choice("objective", objective, OBJECTIVES)
    b = breakdown
    if objective == "clipped":  # min(r*A, clip(r)*A) is k*A for the kept ratio k
        factor = exact.kept_ratio(b.ratio, b.advantages, b.lower, b.upper, b.dual_clip)
    else:
        factor = b.ratio if objective == "unclipped" else b.clipped_ratio
    name = f"the {objective} loss"
    return exact.loss_of(factor[:count], b.advantages[:count], b.batch_size, name)


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
    return _loss_of(clip_breakdown(logp_new, logp_old, advantages, eps), objective)


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
    return objective_grad(clip_breakdown(logp_new, logp_old, advantages, eps), objective)


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
    grid = checks.checked_ratios(ratios)
    lower, upper = clip_band(eps, eps_low, eps_high)
    with np.errstate(divide="ignore"):
        log_grid = np.log(grid)
    advantages = np.full_like(grid, checks.checked_real("advantage", advantage))
    return ClipBreakdown(
        log_grid, grid.copy(), advantages, lower, upper, 1, checks.checked_dual_clip(dual_clip)
    )
