"""PPO's clipped surrogate loss, its clip fraction and its gradient, in numpy.

This module is the single source of truth for the teaching bundle: every figure,
widget and notebook calls it and never re-derives a ratio or a gradient.

For a batch of N samples with new log-probabilities ``logp_new``, old
log-probabilities ``logp_old`` and advantages ``A`` (used as given, never
normalized):

* ratio ``r_t = exp(logp_new_t - logp_old_t)``;
* loss ``L = -(1/N) * sum_t min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t)``;
* sample t is *clipped* when ``A_t > 0 and r_t > 1 + eps`` or
  ``A_t < 0 and r_t < 1 - eps`` (strict comparisons; ``A_t == 0`` never clips);
* ``dL/dlogp_new_t`` is 0 for a clipped sample and ``-r_t * A_t / N`` otherwise.

A ratio may overflow to ``inf`` (log-ratios above about 709.78).  That never
produces NaN: a sample with ``A == 0`` contributes exactly 0, and a
negative-advantage sample with an infinite ratio makes the loss ``+inf``, which
is the true float64 value.

Public API
----------
``ppo_clip_loss``, ``clip_fraction``, ``ppo_clip_grad``
    The three contract functions.
``clip_breakdown``
    The per-sample computation behind all three, as a :class:`ClipBreakdown`.
    It also accepts the variants used in RLHF codes: asymmetric bounds
    (``eps_low``/``eps_high``) and the dual-clip cap for negative advantages.
``ratio_sweep``, ``objective_curve``, ``gradient_curve``
    One sample's objective term and gradient over a grid of ratios, for plots.
``surrogate_loss``, ``surrogate_grad``
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
import numbers
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DEFAULT_EPS",
    "ClipBreakdown",
    "Objective",
    "WorkedExample",
    "clip_breakdown",
    "clip_fraction",
    "gradient_curve",
    "objective_curve",
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
_OBJECTIVES: tuple[str, ...] = ("clipped", "unclipped", "clip_only")

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


class WorkedExample(NamedTuple):
    """The contract's worked example: four samples, two of them clipped."""

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float


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


@dataclass(frozen=True, eq=False)
class ClipBreakdown:
    """Every intermediate quantity of the clipped loss, one entry per sample.

    All arrays have shape ``(N,)``.  Gradients are of the *loss* (the quantity
    minimized) with respect to ``logp_new``, so they include the ``1/N`` of the
    mean and the minus sign.  Build one with :func:`clip_breakdown` or
    :func:`ratio_sweep`; the derived arrays are computed on first access and
    then kept.

    Attributes
    ----------
    log_ratio:
        ``logp_new - logp_old`` (for a ratio sweep, ``log r``).
    ratio:
        ``r = exp(log_ratio)``; may be ``inf`` after overflow.
    advantages:
        The advantages as given (float64 copy, never normalized).
    is_clipped:
        True where the sample's gradient is switched off by clipping:
        ``A > 0 and r > upper``, ``A < 0 and r < lower`` (strict), or, with a
        dual-clip cap ``c``, ``A < 0 and r > c``.
    lower, upper:
        The clip band ``[1 - eps_low, 1 + eps_high]``.
    batch_size:
        The N that gradients are divided by: the number of samples for
        :func:`clip_breakdown`, 1 for :func:`ratio_sweep` (each grid point is
        its own batch of one).
    dual_clip:
        The dual-clip cap ``c`` or ``None``.
    clipped_ratio:
        ``clip(r, lower, upper)``.
    unclipped_term:
        ``r * A`` (exactly 0 where ``A == 0``, even if ``r`` is ``inf``).
    clipped_term:
        ``clip(r) * A``.
    objective_term:
        The term the objective keeps: ``min(r*A, clip(r)*A)``, and, when a
        dual-clip cap ``c`` is set, ``max(that, c*A)`` for ``A < 0``.
    grad:
        ``d loss / d logp_new``: 0 where clipped (and where ``A == 0``),
        ``-r*A/N`` elsewhere.
    """

    log_ratio: FloatArray
    ratio: FloatArray
    advantages: FloatArray
    lower: float
    upper: float
    batch_size: int
    dual_clip: float | None = None

    @cached_property
    def is_clipped(self) -> BoolArray:
        return _clip_mask(self.ratio, self.advantages, self.lower, self.upper, self.dual_clip)

    @cached_property
    def clipped_ratio(self) -> FloatArray:
        # min(max(r, lower), upper): what np.clip computes, without its wrapper's overhead.
        return np.minimum(np.maximum(self.ratio, self.lower), self.upper)

    @cached_property
    def unclipped_term(self) -> FloatArray:
        return _times_advantage(self.ratio, self.advantages)

    @cached_property
    def clipped_term(self) -> FloatArray:
        return _times_advantage(self.clipped_ratio, self.advantages)

    @cached_property
    def objective_term(self) -> FloatArray:
        kept = np.minimum(self.unclipped_term, self.clipped_term)
        if self.dual_clip is not None:
            capped = (self.advantages < 0) & (self.ratio > self.dual_clip)
            with np.errstate(over="ignore"):
                kept = np.where(capped, self.dual_clip * self.advantages, kept)
        return kept

    @cached_property
    def loss_contribution(self) -> FloatArray:
        """Each sample's share of the loss, ``-(1/N) * objective_term``."""
        return -(1.0 / self.batch_size) * self.objective_term

    def partial_loss(self, count: int) -> float:
        """``-(1/N) * sum(objective_term[:count])``: the loss after ``count`` samples.

        With ``count == N`` this is :attr:`loss`, bit for bit.
        """
        if not 1 <= count <= self.n:
            raise ValueError(f"count must be between 1 and {self.n}, got {count!r}")
        with np.errstate(over="ignore"):
            return float(-(1.0 / self.batch_size) * np.sum(self.objective_term[:count]))

    @cached_property
    def grad(self) -> FloatArray:
        # 0 where clipped or A == 0 (so an infinite ratio never meets a zero
        # advantage); (r*A)/(-N) == -(r*A)/N bit for bit elsewhere; adding 0.0
        # turns -0.0 into 0.0.
        keep = ~self.is_clipped
        keep &= self.advantages != 0
        with np.errstate(over="ignore"):
            grad = np.where(keep, self.ratio, 0.0)
            grad *= self.advantages
        np.divide(grad, -self.batch_size, out=grad)
        grad += 0.0
        return grad

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.ratio.shape[0])

    @property
    def loss(self) -> float:
        """``-(1/N) * sum(objective_term)``, the loss to minimize."""
        return _negative_mean(self.objective_term)

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


# --------------------------------------------------------------------------
# Input checking
# --------------------------------------------------------------------------


def _as_float_vector(name: str, value: ArrayLike, *, check_finite: bool = True) -> FloatArray:
    """Return ``value`` as a non-empty, 1-D float64 array (finite, if asked) or raise."""
    if type(value) is np.ndarray and value.dtype == np.float64 and value.ndim == 1 and value.size:
        if check_finite:
            _require_finite(name, value)
        return value
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a 1-D array of numbers, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a 1-D array of numbers; it looks nested or ragged "
            "(rows of different lengths) or holds values numpy cannot read"
        ) from None
    if array.dtype.kind == "O":
        array = _object_array_as_float(name, array)
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must contain real numbers, got dtype {array.dtype} "
            f"({_dtype_description(array.dtype)})"
        )
    if array.ndim != 1:
        shape = "a scalar" if array.ndim == 0 else f"shape {array.shape}"
        raise ValueError(f"{name} must be 1-D, got {shape}")
    if array.shape[0] == 0:
        raise ValueError(f"{name} is empty; it needs at least one sample")
    array = array.astype(np.float64, copy=False)
    if check_finite:
        _require_finite(name, array)
    return array


def _object_array_as_float(name: str, array: NDArray[np.object_]) -> FloatArray:
    """Convert a ragged or mixed-type array, naming the first entry that is not a number."""
    if array.ndim != 1:
        raise TypeError(f"{name} must be a 1-D array of numbers, got a nested or ragged sequence")
    for index, item in enumerate(array):
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Real):
            raise TypeError(f"{name} must contain only numbers: {name}[{index}] is {item!r}")
    return array.astype(np.float64)


def _dtype_description(dtype: np.dtype) -> str:
    descriptions = {"b": "booleans", "c": "complex numbers", "U": "text", "S": "bytes"}
    return descriptions.get(dtype.kind, "not real numbers")


def _require_finite(name: str, array: FloatArray) -> None:
    finite = np.isfinite(array)
    if not finite.all():
        index = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"{name}[{index}] is {float(array[index])}; every value must be finite")


def _check_same_length(**arrays: FloatArray) -> int:
    lengths = {name: array.shape[0] for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise ValueError(f"inputs must have the same length: {described}")
    return next(iter(lengths.values()))


def _as_real(name: str, value: object) -> float:
    """Return ``value`` as a finite Python float or raise, naming ``name``.

    Accepts Python and numpy real scalars, including 0-d arrays.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {number!r}")
    return number


def _as_eps(name: str, value: object) -> float:
    number = _as_real(name, value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {number!r}")
    return number


def _band(eps: object, eps_low: object | None, eps_high: object | None) -> tuple[float, float]:
    """The clip band ``(1 - eps_low, 1 + eps_high)``; each defaults to ``eps``."""
    symmetric = _as_eps("eps", eps)
    low = symmetric if eps_low is None else _as_eps("eps_low", eps_low)
    high = symmetric if eps_high is None else _as_eps("eps_high", eps_high)
    return 1.0 - low, 1.0 + high


def _as_dual_clip(value: object | None) -> float | None:
    if value is None:
        return None
    cap = _as_real("dual_clip", value)
    if cap <= 1.0:
        raise ValueError(f"dual_clip must be greater than 1, got {cap!r}")
    return cap


# --------------------------------------------------------------------------
# The one shared computation
# --------------------------------------------------------------------------


def _times_advantage(values: FloatArray, advantages: FloatArray) -> FloatArray:
    """``values * A`` with an exact 0 wherever ``A == 0``, even where ``values`` is ``inf``."""
    with np.errstate(invalid="ignore", over="ignore"):
        product = values * advantages
    product[advantages == 0] = 0.0
    return product


def _negative_mean(terms: FloatArray) -> float:
    with np.errstate(over="ignore"):
        return float(-(1.0 / terms.shape[0]) * np.add.reduce(terms))


def _clip_mask(
    ratio: FloatArray, advantages: FloatArray, lower: float, upper: float, dual_clip: float | None
) -> BoolArray:
    """Where clipping switches a sample's gradient off (strict comparisons)."""
    clipped = (advantages > 0) & (ratio > upper)
    negative = advantages < 0
    clipped |= negative & (ratio < lower)
    if dual_clip is not None:
        clipped |= negative & (ratio > dual_clip)
    return clipped


def _evaluate(
    log_ratio: FloatArray,
    ratio: FloatArray,
    advantages: FloatArray,
    lower: float,
    upper: float,
    dual_clip: float | None,
    n: int,
) -> ClipBreakdown:
    """Per-sample breakdown from ratios; gradients are divided by ``n``."""
    return ClipBreakdown(
        log_ratio=log_ratio,
        ratio=ratio,
        advantages=advantages,
        lower=lower,
        upper=upper,
        batch_size=n,
        dual_clip=dual_clip,
    )


def _log_ratio_and_ratio(
    logp_new: FloatArray, logp_old: FloatArray, advantages: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``logp_new - logp_old`` and its ``exp``, after checking every input is finite.

    One sum over the log-ratio and one over the advantages stay finite unless
    some input is NaN or infinite (or the sums overflow); only then is each
    input checked element by element, to name the culprit.
    """
    with np.errstate(all="ignore"):
        log_ratio = logp_new - logp_old
        if not math.isfinite(np.add.reduce(log_ratio) + np.add.reduce(advantages)):
            _require_finite("logp_new", logp_new)
            _require_finite("logp_old", logp_old)
            _require_finite("advantages", advantages)
        return log_ratio, np.exp(log_ratio)


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
    new = _as_float_vector("logp_new", logp_new, check_finite=False)
    old = _as_float_vector("logp_old", logp_old, check_finite=False)
    adv = _as_float_vector("advantages", advantages, check_finite=False)
    n = _check_same_length(logp_new=new, logp_old=old, advantages=adv)
    lower, upper = _band(eps, eps_low, eps_high)
    cap = _as_dual_clip(dual_clip)
    log_ratio, ratio = _log_ratio_and_ratio(new, old, adv)
    return _evaluate(log_ratio, ratio, adv.copy(), lower, upper, cap, n)


# --------------------------------------------------------------------------
# The contract
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
    return clip_breakdown(logp_new, logp_old, advantages, eps).loss


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
    return clip_breakdown(logp_new, logp_old, advantages, eps).clip_fraction


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
    return clip_breakdown(logp_new, logp_old, advantages, eps).grad


# --------------------------------------------------------------------------
# The alternatives the clipped objective is compared with
# --------------------------------------------------------------------------


def _check_objective(objective: object) -> str:
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    return str(objective)


def objective_terms(
    breakdown: ClipBreakdown, objective: Objective = "clipped"
) -> tuple[FloatArray, FloatArray]:
    """Per-sample terms and loss gradients of one objective, from a breakdown.

    Returns ``(terms, grad)``: for ``"clipped"`` the breakdown's own
    ``objective_term`` and ``grad``; for ``"unclipped"`` ``r*A`` and
    ``-r*A/N``; for ``"clip_only"`` ``clip(r)*A`` and ``-r*A/N`` inside the
    closed band, 0 outside it.  Works on a :func:`ratio_sweep` too (N = 1).
    """
    objective = _check_objective(objective)
    if objective == "clipped":
        return breakdown.objective_term, breakdown.grad
    full_grad = np.where(
        breakdown.advantages == 0, 0.0, -breakdown.unclipped_term / breakdown.batch_size
    )
    if objective == "unclipped":
        return breakdown.unclipped_term, full_grad
    ratio = breakdown.ratio
    inside = (ratio >= breakdown.lower) & (ratio <= breakdown.upper)
    return breakdown.clipped_term, np.where(inside, full_grad, 0.0)


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
    name = _check_objective(objective)
    breakdown = clip_breakdown(logp_new, logp_old, advantages, eps)
    terms, _ = objective_terms(breakdown, name)
    return _negative_mean(terms)


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
    and 0 outside the band, whatever the advantage's sign (so a sample that
    left the band in the unfavourable direction gets no gradient back).
    """
    name = _check_objective(objective)
    breakdown = clip_breakdown(logp_new, logp_old, advantages, eps)
    _, grad = objective_terms(breakdown, name)
    return grad


# --------------------------------------------------------------------------
# Curves over a grid of ratios, for plots
# --------------------------------------------------------------------------


def _as_ratio_grid(ratios: ArrayLike) -> FloatArray:
    grid = _as_float_vector("ratios", ratios)
    if (grid < 0).any():
        index = int(np.flatnonzero(grid < 0)[0])
        raise ValueError(f"ratios[{index}] is {float(grid[index])}; ratios cannot be negative")
    return grid


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
    grid = _as_ratio_grid(ratios).copy()
    adv = np.full_like(grid, _as_real("advantage", advantage))
    lower, upper = _band(eps, eps_low, eps_high)
    with np.errstate(divide="ignore"):
        log_grid = np.log(grid)
    return _evaluate(log_grid, grid, adv, lower, upper, _as_dual_clip(dual_clip), n=1)


def objective_curve(ratios: ArrayLike, advantage: float, eps: float = DEFAULT_EPS) -> FloatArray:
    """One sample's objective term ``min(r*A, clip(r)*A)`` at each ratio."""
    return ratio_sweep(ratios, advantage, eps).objective_term


def gradient_curve(ratios: ArrayLike, advantage: float, eps: float = DEFAULT_EPS) -> FloatArray:
    """One sample's ``d loss / d logp_new`` (N = 1) at each ratio."""
    return ratio_sweep(ratios, advantage, eps).grad
