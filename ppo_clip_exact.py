"""Exact arithmetic for ``ppo_clip``'s part 4, where float64 overflowed on the way to an answer.

Every float64 value is a whole number of units of 2**-1074, so a product of two is a whole
number of units of 2**-2148 and a sum of products is an exact Python integer; dividing it by
``N`` rounds once to float64.  :mod:`ppo_clip` calls these only where its textbook lines left a
term, a sum or a gradient entry not finite (``inf * 0``, an overflowed ratio, a product ``r*A``
or a sum beyond float64's range although the answer is not).  numpy and the standard library
only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

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
    infinite_signs = set(np.sign(advantages[np.isinf(factor)]).tolist())
    if len(infinite_signs) == 2:
        raise ValueError(
            f"{name} is undefined: infinite ratios (log-ratios above about 709.78) with "
            "advantages of both signs make it inf - inf"
        )
    if infinite_signs:  # -(1/n) * inf * A
        return -math.copysign(math.inf, infinite_signs.pop())
    exact_sum = exact_sum_of_products(factor.tolist(), advantages.tolist())
    return rounded(-exact_sum, PRODUCT_UNITS * n)


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
            grad[index] = rounded(-exact_sum_of_products([r], [a]), PRODUCT_UNITS * n)


#: Every float64 value is a whole number of units of 2**-1074 (the smallest subnormal), so a
#: product of two is a whole number of units of 2**-2148.
PRODUCT_EXPONENT = 2 * 1074
PRODUCT_UNITS = 2**PRODUCT_EXPONENT


def exact_sum_of_products(x: Iterable[float], y: Iterable[float]) -> int:
    """``sum(x * y)`` exactly, as a whole number of units of ``1 / PRODUCT_UNITS``."""
    total = 0
    for a, b in zip(x, y, strict=True):
        (a_top, a_bottom), (b_top, b_bottom) = a.as_integer_ratio(), b.as_integer_ratio()
        # a_bottom * b_bottom is a power of two, 2**k with k <= PRODUCT_EXPONENT
        total += (a_top * b_top) << (PRODUCT_EXPONENT + 1 - (a_bottom * b_bottom).bit_length())
    return total


def rounded(numerator: int, denominator: int) -> float:
    """``numerator / denominator`` rounded once to float64 (Python rounds int division so).

    ``+-inf`` where the quotient lies beyond float64's range; never ``-0.0``.
    """
    try:
        return numerator / denominator + 0.0
    except OverflowError:
        return math.inf if numerator > 0 else -math.inf
