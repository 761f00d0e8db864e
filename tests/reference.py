"""The contract in plain Python, one sample at a time: the reference the tests check against.

Written straight from ``docs/contract.md`` ("ppo_clip" section) with the ``math`` module
only, so it shares no code (and no numpy rounding) with :mod:`ppo_clip`.  It covers the
variants too: asymmetric bounds ``eps_low``/``eps_high`` and the dual-clip cap.

* :func:`ratio` is ``exp(logp_new - logp_old)``, ``inf`` where that overflows.
* :func:`sample` gives one sample's quantities in a batch of ``n``.
* :func:`batch` gives every sample's, and :func:`exact_loss` the loss computed exactly
  and rounded once, so a test can bound numpy's rounding.
* :func:`contract` returns ``(loss, clip fraction, gradient)`` as the three
  contract functions do.

>>> import math
>>> logp_old = [math.log(0.5)] * 4
>>> logp_new = [math.log(p) for p in (0.7, 0.55, 0.3, 0.45)]
>>> loss, fraction, grad = contract(logp_new, logp_old, [1.0, 2.0, -1.0, -0.5])
>>> round(loss, 12), fraction, [round(g, 12) for g in grad]
(-0.5375, 0.5, [0.0, -0.55, 0.0, 0.1125])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple


class Sample(NamedTuple):
    """One sample's quantities, as :class:`ppo_clip.ClipBreakdown` names them."""

    ratio: float
    clipped_ratio: float
    unclipped_term: float
    clipped_term: float
    objective_term: float
    is_clipped: bool
    grad: float


def ratio(logp_new: float, logp_old: float) -> float:
    """``exp(logp_new - logp_old)``; ``inf`` when it overflows."""
    try:
        return math.exp(logp_new - logp_old)
    except OverflowError:
        return math.inf


def sample(
    r: float,
    advantage: float,
    n: int,
    eps: float = 0.2,
    *,
    eps_low: float | None = None,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> Sample:
    """One sample with ratio ``r`` in a batch of ``n``, by the definitions.

    Band ``[1 - eps_low, 1 + eps_high]`` (each defaults to ``eps``); kept term
    ``min(r*A, clip(r)*A)``, and with a cap ``c``, ``max(that, c*A)`` for
    ``A < 0``; clipped when ``A > 0 and r > upper``, ``A < 0 and r < lower``
    or ``A < 0 and r > c`` (strict); gradient 0 where clipped or ``A == 0``,
    else ``-r*A/N``: computed as float64 computes ``-(r*A)/N``, except where the
    product ``r*A`` of a finite ratio overflows, where it is the exact ``-r*A/N``
    rounded once (finite where float64 holds it).  Where ``A == 0`` every
    product is 0, even for an infinite ``r``.
    """
    lower = 1.0 - (eps if eps_low is None else eps_low)
    upper = 1.0 + (eps if eps_high is None else eps_high)
    clipped_ratio = min(max(r, lower), upper)
    if advantage == 0:
        unclipped_term = clipped_term = 0.0
    else:
        unclipped_term = r * advantage  # a float product overflows to ±inf, as numpy's does
        clipped_term = clipped_ratio * advantage
    kept = min(unclipped_term, clipped_term)
    is_clipped = (advantage > 0 and r > upper) or (advantage < 0 and r < lower)
    if dual_clip is not None and advantage < 0:
        kept = max(kept, dual_clip * advantage)
        is_clipped = is_clipped or r > dual_clip
    if is_clipped or advantage == 0:
        grad = 0.0
    elif math.isinf(unclipped_term) and math.isfinite(r):
        grad = _rounded(-Fraction(r) * Fraction(advantage) / n)  # r*A overflowed; -r*A/N may not
    else:
        grad = -unclipped_term / n
    return Sample(r, clipped_ratio, unclipped_term, clipped_term, kept, is_clipped, grad)


def batch(
    logp_new: Sequence[float],
    logp_old: Sequence[float],
    advantages: Sequence[float],
    eps: float = 0.2,
    **variant: float | None,
) -> list[Sample]:
    """:func:`sample` for every sample of a batch."""
    n = len(advantages)
    return [
        sample(ratio(new, old), advantage, n, eps, **variant)
        for new, old, advantage in zip(logp_new, logp_old, advantages, strict=True)
    ]


def contract(
    logp_new: Sequence[float],
    logp_old: Sequence[float],
    advantages: Sequence[float],
    eps: float = 0.2,
) -> tuple[float, float, list[float]]:
    """``(loss, clip fraction, gradient)``: what the three contract functions return."""
    samples = batch(logp_new, logp_old, advantages, eps)
    fraction = sum(s.is_clipped for s in samples) / len(samples)
    loss = exact_loss(logp_new, logp_old, advantages, eps)
    return loss, fraction, [s.grad for s in samples]


def exact_loss(
    logp_new: Sequence[float],
    logp_old: Sequence[float],
    advantages: Sequence[float],
    eps: float = 0.2,
    *,
    ratios: Sequence[float] | None = None,
    eps_low: float | None = None,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> float:
    """The clipped loss computed exactly, then rounded once to float64 (``±inf`` beyond it).

    Each ratio is the float64 ``exp`` (``inf`` where it overflows), or the given ``ratios``:
    pass the module's own to check its rounding alone, since ``math.exp`` and numpy's
    ``exp`` may differ in the last bit.  Every product, the ``min`` (and the dual-clip
    ``max``) and the sum are exact (``fractions.Fraction``), so no product overflows on the
    way.  The band is ``[1 - eps_low, 1 + eps_high]`` in float64, as in :func:`sample`.  An
    infinite ratio with ``A < 0`` makes the loss ``+inf`` (without a dual-clip cap); with
    ``A > 0`` it is clipped and its term is ``(1 + eps_high) * A``.
    """
    lower = Fraction(1.0 - (eps if eps_low is None else eps_low))
    upper = Fraction(1.0 + (eps if eps_high is None else eps_high))
    cap = None if dual_clip is None else Fraction(dual_clip)
    total = Fraction(0)
    if ratios is None:
        ratios = [ratio(new, old) for new, old in zip(logp_new, logp_old, strict=True)]
    for r, advantage in zip(ratios, advantages, strict=True):
        if advantage == 0:
            continue
        exact_a = Fraction(advantage)
        if math.isinf(r):
            if advantage > 0:
                total += upper * exact_a
            elif cap is not None:
                total += cap * exact_a
            else:
                return math.inf
            continue
        exact_r = Fraction(r)
        kept = min(exact_r * exact_a, min(max(exact_r, lower), upper) * exact_a)
        if cap is not None and advantage < 0:
            kept = max(kept, cap * exact_a)
        total += kept
    return _rounded(-total / len(advantages))


def _rounded(value: Fraction) -> float:
    """``value`` rounded once to float64; ``±inf`` beyond float64's range; never ``-0.0``."""
    try:
        return float(value) + 0.0
    except OverflowError:
        return math.inf if value > 0 else -math.inf
