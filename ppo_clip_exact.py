"""Exact arithmetic for part 4 of :mod:`ppo_clip` and :mod:`llm_clip`, where float64 overflowed.

Every finite float64 value is a fraction, so :class:`fractions.Fraction` holds products and sums
of them exactly; :func:`rounded` rounds the exact answer once to float64.  Both modules call
these only where their textbook lines left a term, a sum or a gradient entry not finite
(``inf * 0``, an overflowed ratio, a product ``r*A`` or a sum beyond float64's range although
the answer is not).  The standard library and numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def exact_loss(factor: FloatArray, advantages: FloatArray, n: int, name: str = "the loss") -> float:
    """The exact ``-(1/n) * sum(factor * A)`` rounded once to float64; ``0`` where ``A == 0``.

    ``factor`` multiplies each advantage: the ratio for the unclipped objective,
    ``clip(r)`` for the clip-only one, ``ppo_clip._kept_ratio`` for the clipped one.
    An infinite factor (an overflowed ratio) with a nonzero advantage makes the
    loss infinite; two of opposite signs make it undefined (``ValueError``,
    naming ``name``).  Beyond float64's range the loss is ``+-inf``.
    """
    nonzero = advantages != 0
    factor, advantages = factor[nonzero], advantages[nonzero]
    infinity = true_infinity(
        -np.sign(advantages[np.isinf(factor)]),  # -(1/n) * inf * A
        f"{name} is undefined: infinite ratios (log-ratios above about 709.78) with "
        "advantages of both signs make it inf - inf",
    )
    if infinity is not None:
        return infinity
    return rounded(-sum(map(exact, factor.tolist(), advantages.tolist()), Fraction(0)) / n)


def gradient_beyond_float64(
    grad: FloatArray,
    undecided: BoolArray,
    ratio: FloatArray,
    advantages: FloatArray,
    n: int | None = None,
) -> None:
    """Decide, in place, the entries of ``grad = -r*A/N`` that float64 left not finite.

    ``undecided`` marks them; ``n`` defaults to the number of entries.
    ``A == 0``: 0 (``inf * 0`` was NaN).  ``r = inf``: ``inf`` with the sign of
    ``-A`` (for the clipped objective only ``A < 0`` gets here: ``+inf``).
    Finite ``r`` with ``r*A`` beyond float64: the exact ``-r*A/N`` rounded
    once, finite wherever float64 holds it.
    """
    n = len(grad) if n is None else n
    for index in np.flatnonzero(undecided).tolist():
        r, a = float(ratio[index]), float(advantages[index])
        if a == 0:
            grad[index] = 0.0
        elif math.isinf(r):
            grad[index] = -math.copysign(math.inf, a)
        else:
            grad[index] = rounded(-exact(r, a) / n)


def true_infinity(signs: Iterable[float], undefined: str) -> float | None:
    """The answer when terms are truly infinite: ``signs`` are theirs (1.0 or -1.0).

    None where there is none, ``+-inf`` where all have one sign, ``ValueError(undefined)``
    where both signs meet (``inf - inf``).
    """
    distinct = set(signs)
    if len(distinct) == 2:
        raise ValueError(undefined)
    return math.inf * float(distinct.pop()) if distinct else None


def exact(*factors: float) -> Fraction:
    """The product of finite float64 values, exactly."""
    return math.prod(map(Fraction, factors), start=Fraction(1))


def rounded(value: Fraction) -> float:
    """``value`` rounded once to float64 (Python's int division rounds so).

    ``+-inf`` where it lies beyond float64's range; never ``-0.0``.
    """
    try:
        return value.numerator / value.denominator + 0.0
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def float64_limits_handled_below() -> np.errstate:
    """No warning or error on the way, whatever the caller's numpy error state (``np.seterr``).

    float64 is meant to overflow to ``inf`` (then NaN from ``inf * 0``) and to underflow to 0
    or a subnormal number in the textbook lines: the results are checked, and decided here.
    """
    return np.errstate(over="ignore", under="ignore", invalid="ignore")


def times_advantage(values: FloatArray | float, advantages: FloatArray) -> FloatArray:
    """``values * A``, with an exact 0 wherever ``A == 0`` (``inf * 0`` is never formed).

    A product too large for float64 is ``+-inf``, its float64 value.
    """
    with float64_limits_handled_below():
        return np.where(advantages == 0, 0.0, values) * advantages
