"""Exact arithmetic for part 4 of :mod:`ppo_clip` and :mod:`llm_clip`, where float64 overflowed.

Every finite float64 value is a whole number of units of ``2**-1074``, so a product of ``k`` of
them is a whole number of units of ``2**-(1074*k)`` and a sum of such products an exact Python
integer; :func:`rounded` rounds the exact quotient once to float64.  Both modules call these
only where their textbook lines left a term, a sum or a gradient entry not finite
(``inf * 0``, an overflowed ratio, a product ``r*A`` or a sum beyond float64's range although
the answer is not), and :func:`row_sums` where a row's terms cancel past float64's digits.
The clip's own decisions, which both modules share, come first: :func:`kept_ratio` (the
``k`` of a kept term ``k * A``) and :func:`clipped_where`; then :mod:`ppo_clip`'s part 4,
:func:`gradient` and :func:`loss_of`, float64 where it holds and exact where it overflowed.
The standard library and numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]


def kept_ratio(
    ratio: FloatArray, advantages: FloatArray, lower: float, upper: float,
    dual_clip: float | None = None,
) -> FloatArray:  # fmt: skip
    """The ``k`` with ``min(r*A, clip(r)*A) == k * A`` exactly, for each sample (or token).

    ``min(r, upper)`` where ``A > 0`` and ``max(r, lower)`` where ``A < 0``;
    with a dual-clip cap ``c``, at most ``c`` where ``A < 0`` (the kept term
    ``max(min(r*A, clip(r)*A), c*A)``).  Rounding to float64 never reverses an
    order, so ``k * A`` in float64 is also the float64 kept term, bit for bit.
    """
    top = np.inf if dual_clip is None else dual_clip
    return np.where(advantages > 0, np.minimum(ratio, upper), np.clip(ratio, lower, top))


def clipped_where(
    ratio: FloatArray, advantages: FloatArray, lower: float, upper: float,
    dual_clip: float | None = None,
) -> BoolArray:  # fmt: skip
    """Where the clip switches the gradient off (strict): ``A > 0 and r > upper``, or
    ``A < 0 and r < lower``; with a dual-clip cap ``c``, also ``A < 0 and r > c``."""
    positive, negative = advantages > 0, advantages < 0
    clipped = (positive & (ratio > upper)) | (negative & (ratio < lower))
    if dual_clip is not None:
        clipped |= negative & (ratio > dual_clip)
    return clipped


def gradient(ratio: FloatArray, advantages: FloatArray, flowing: BoolArray, n: int) -> FloatArray:
    """``-r*A/n`` where ``flowing``, 0 elsewhere and where ``A == 0``; never NaN."""
    grad = np.where(flowing & (advantages != 0), ratio, 0.0)  # inf * 0 is never formed
    with float64_limits_handled_below():
        grad *= advantages
        grad /= -n
        # an infinite entry makes the sum infinite (a sum of finite entries that overflows
        # only costs the search: nothing is undecided)
        if not math.isfinite(np.add.reduce(grad)):  # each entry as gradient_entry decides
            for i in np.flatnonzero(~np.isfinite(grad)).tolist():
                grad[i] = gradient_entry(float(ratio[i]), float(advantages[i]), n)
    return grad + 0.0  # -0.0 made 0.0


def loss_of(factor: FloatArray, advantages: FloatArray, n: int, name: str) -> float:
    """``-(1/n) * sum(factor * A)``: numpy's float64 sum where it is finite, else
    :func:`exact_loss` (the exact value rounded once; ``ValueError`` naming ``name`` for
    ``inf - inf``)."""
    with float64_limits_handled_below():  # numpy's float64 sum: not finite where it overflowed
        loss = float(-times_advantage(factor, advantages).sum() / n) + 0.0
    if math.isfinite(loss):
        return loss
    return exact_loss([factor], advantages, n, name)


def exact_loss(
    factors: Sequence[FloatArray],
    advantages: FloatArray,
    n: int | IntArray,
    name: str = "the loss",
    kl: FloatArray | None = None,
    kl_coef: float = 0.0,
) -> float:
    """The exact ``sum((kl_coef * kl - A * product(factors)) / n)`` rounded once to float64.

    One entry per term (1-D arrays); ``n`` divides every term, or is one divisor per term; a
    term with ``A == 0`` has no policy part.  :mod:`ppo_clip`'s ``-(1/n) * sum(factor * A)``
    has one factor: the ratio for the unclipped objective, ``clip(r)`` for the clip-only one,
    :func:`kept_ratio` for the clipped one; :mod:`llm_clip` adds k3 (``kl``).
    An infinite factor (an overflowed ratio) with a nonzero advantage, or an infinite ``kl``,
    makes the loss infinite; two of opposite signs make it undefined (``ValueError``, naming
    ``name``).  Beyond float64's range the loss is ``+-inf``.
    """
    policy_inf = (advantages != 0) & np.logical_or.reduce([np.isinf(f) for f in factors])
    with float64_limits_handled_below():  # an infinite product is decided just below
        terms = times_advantage(math.prod(factors), advantages)
    signs = set((-np.sign(terms[policy_inf])).tolist())
    if kl_coef and np.isinf(kl).any():  # type: ignore[arg-type]
        signs.add(1.0)
    if len(signs) == 2:
        raise ValueError(
            f"{name} is undefined: infinite terms of both signs (ratios or k3 past float64's "
            "range, e.g. log-ratios above about 709.78) make it inf - inf"
        )
    if signs:
        return math.inf * signs.pop()
    scale = UNIT * (len(factors) + 1)  # each term, in units of 2**-scale, is a whole number
    divisors, sums = np.broadcast_to(n, advantages.shape).tolist(), {}
    columns = [f.tolist() for f in factors]
    for k, a in enumerate(advantages.tolist()):
        units = _units((kl_coef, float(kl[k])), scale) if kl_coef else 0  # type: ignore[index]
        if a:
            units -= _units((a, *(column[k] for column in columns)), scale)
        sums[divisors[k]] = sums.get(divisors[k], 0) + units
    return rounded(sum(Fraction(total, int(d) << scale) for d, total in sums.items()))


def gradient_entry(
    g: float, a: float, n: int, kl_coef: float = 0.0, exp_d: float = 0.0, at: str = "",
    weight: float = 1.0,
) -> float:  # fmt: skip
    """``-(g*A*weight + kl_coef*(exp(d) - 1)) / n`` for an entry float64 left not finite.

    ``g`` is ``r`` for :mod:`ppo_clip`'s ``-r*A/N`` (and no KL term); ``weight`` is
    :mod:`llm_clip`'s rollout weight (finite, at least 0).  ``A == 0`` or ``weight == 0``: no
    policy part (``inf * 0`` was NaN).  An infinite ``g`` (an overflowed ratio) gives ``inf``
    with the sign of ``-A`` (for PPO's clipped objective only ``A < 0`` gets here: ``+inf``), an
    overflowed ``exp(d) - 1`` gives ``-inf``; both at once is undefined (``ValueError``, naming
    the entry ``at``); otherwise the exact value rounded once, finite wherever float64 holds it.
    """
    policy = a != 0 and weight != 0
    policy_inf, kl_inf = policy and math.isinf(g), math.isinf(exp_d)
    if policy_inf and kl_inf:
        raise ValueError(
            f"the gradient at {at} is undefined: its ratio and exp(logp_ref - logp_new) both "
            "overflow (inf - inf)"
        )
    if policy_inf or kl_inf:
        return -math.copysign(math.inf, a) if policy_inf else -math.inf
    return rounded(-(exact(kl_coef, exp_d) + (exact(g, a, weight) if policy else 0)) / n)


def row_sums(
    values: FloatArray, mask: BoolArray, lengths: IntArray | None = None,
    minus: FloatArray | None = None,
) -> FloatArray:  # fmt: skip
    """Each row's sum of ``values - minus`` over its unmasked entries, over ``lengths`` if given
    (:mod:`llm_clip`'s GSPO ``log s_i``, GMPO's mean clipped log-ratio, a sequence rollout
    weight's exponent, OPSM's mean gap).  Where float64's sum can have lost digits and the row's
    entries are finite, the exact value rounded once: where it overflowed on the way (a sum past
    1.8e308, a difference ``inf - inf``), and where its terms cancel so far that the rounding
    bound of any float64 sum of n terms, ``(n + 1) * 2**-53 * sum|x|``, exceeds ``2**-30`` of
    ``|sum|`` (e.g. ``-1e308 - (-1)``, ``-0.5 - (-1.5)`` and ``1e308 - (-1)`` sum to 3, float64
    says 1).  An ordinary batch (``sum|x|`` below ``2**23 / (n + 1)`` times ``|sum|`` in every
    row) takes numpy's sum: one comparison, after one more array sum, clears it."""
    with float64_limits_handled_below():
        differences = values if minus is None else values - minus
        terms = np.where(mask, differences, 0.0)
        total, size = terms.sum(axis=1), np.abs(terms).sum(axis=1)
        unsure = np.zeros(0, dtype=int)  # ``not x >= 0`` below is also true of NaN (inf - inf)
        if not 2.0**23 * np.abs(total).min() - size.max() * (mask.shape[1] + 1) >= 0:
            margin = 2.0**23 * np.abs(total) - size * (mask.sum(axis=1) + 1)  # per row
            unsure = np.flatnonzero(~(margin >= 0))
        if lengths is not None:
            total = total / lengths
    for i in unsure:
        plus, less = values[i, mask[i]], np.zeros(0) if minus is None else minus[i, mask[i]]
        if np.isfinite(plus).all() and np.isfinite(less).all():
            divisor = 1 if lengths is None else int(lengths[i])
            exact_sum = sum(map(Fraction, [*plus.tolist(), *(-less).tolist()]), Fraction(0))
            total[i] = rounded(exact_sum / divisor)
    return total


#: Every finite float64 value is a whole number of units of 2**-UNIT (the smallest subnormal).
UNIT = 1074


def exact(*factors: float) -> Fraction:
    """The product of finite float64 values, exactly."""
    scale = UNIT * len(factors)
    return Fraction(_units(factors, scale), 1 << scale)


def _units(factors: Iterable[float], scale: int) -> int:
    """The product of finite float64 values as a whole number of units of ``2**-scale``
    (``scale`` at least ``UNIT`` per factor): integer arithmetic, fast on long sums."""
    top, bits = 1, 0
    for value in factors:
        numerator, denominator = float(value).as_integer_ratio()  # a power of two below
        top, bits = top * numerator, bits + denominator.bit_length() - 1
    return top << (scale - bits)


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
