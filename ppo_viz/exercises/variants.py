"""What an implementation with some of the named mistakes returns on a batch.

:func:`predict` follows the computation one step at a time, each step from
the checker's copy of :mod:`ppo_clip` (:data:`.reference`), and lets each
mistake change the one step it affects:

1. the inputs used: advantages normalized (``normalized``), log-probabilities
   swapped (``ratio_inverted``);
2. the ratios: the log-ratio itself (``no_exp``), NaN where
   ``exp(logp_new) / exp(logp_old)`` is ``0/0`` (``ratio_underflow``);
3. which samples count as clipped: sign-blind, on the wrong side, ``A = 0``
   included, non-strict comparisons, none at all (``unclipped``);
4. the loss: the objective kept (``unclipped``, ``clip_only``, ``max_for_min``,
   ``clip_swapped``), or the gradient (``minus_A``, ``grad_on_clipped``);
5. the scale: the sign (``sign``) and the ``1/N`` (``no_mean``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from itertools import product
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import BoolArray, CheckBatch, FloatArray, Kind
from ppo_viz.exercises.mistakes import MISTAKES
from ppo_viz.exercises.reference import reference

#: The form of each mistake that has several (see :attr:`.Mistake.forms`); 0 when absent.
Forms = Mapping[str, int]


@dataclass(frozen=True)
class Prediction:
    """What an implementation with some mistakes returns on one batch.

    ``breakdown`` is the reference breakdown of the inputs and ratios that
    implementation uses.  ``free`` marks gradient entries the variant makes no
    claim about (the clipped samples, for "non-zero gradient on clipped
    samples"); ``loose`` asks for looser tolerances (normalizing codes add a
    small constant to the std).
    """

    value: float | FloatArray
    breakdown: Any
    free: BoolArray | None = None
    loose: bool = False


def forms_of(flags: Iterable[str]) -> Iterator[dict[str, int]]:
    """Every choice of form for the mistakes in ``flags`` that have several."""
    several = [flag for flag in sorted(flags) if MISTAKES[flag].forms > 1]
    for choice in product(*(range(MISTAKES[flag].forms) for flag in several)):
        yield dict(zip(several, choice, strict=True))


def predict(
    batch: CheckBatch, kind: Kind, mistakes: Iterable[str], forms: Forms | None = None
) -> Prediction | None:
    """What an implementation with exactly these ``mistakes`` returns on ``batch``.

    With no mistakes this is :mod:`ppo_clip`'s own answer.  ``forms`` picks the
    form of a mistake that has several: the std of ``normalized`` (0 for
    ``np.std``, 1 for the unbiased std), where ``zero_advantage`` sends
    ``A = 0`` (0: with ``A > 0``, 1: with ``A < 0``, 2: both).  None when the
    variant is undefined on the batch (normalizing advantages whose std is 0).
    """
    flags, forms = frozenset(mistakes), forms or {}
    b = _breakdown_used(batch, flags, forms)
    if b is None:
        return None
    loose = "normalized" in flags
    nan_ratio = _nan_ratios(batch, flags)
    clipped = _counted_as_clipped(b, flags, forms) & ~nan_ratio
    scale = (-1.0 if "sign" in flags else 1.0) * (b.n if "no_mean" in flags else 1)
    if kind == "clip_fraction":
        return Prediction(scale * (np.count_nonzero(clipped) / b.n), b, loose=loose)
    if kind == "loss":
        return Prediction(scale * _loss(b, flags, nan_ratio), b, loose=loose)
    gradient, free = _gradient(b, flags, clipped, nan_ratio)
    return Prediction(scale * gradient, b, free=free, loose=loose)


def _breakdown_used(batch: CheckBatch, flags: frozenset[str], forms: Forms) -> Any | None:
    """The reference breakdown of the inputs and ratios the implementation uses.

    With "normalized", the advantages ``(A - mean) / std`` (None if that std
    is 0 or undefined); with "ratio_inverted", ``logp_new`` and ``logp_old``
    swapped; with "no_exp", the log-ratio in place of the ratio; with
    "clip_swapped", a band whose upper bound is its lower one, which is what
    ``np.clip(r, 1 + eps, 1 - eps)`` clips to.
    """
    b = batch.breakdown
    if {"normalized", "ratio_inverted"} & flags:
        advantages = _normalized(batch, forms.get("normalized", 0), flags)
        if advantages is None:
            return None
        logp_new, logp_old = batch.logp_new, batch.logp_old
        if "ratio_inverted" in flags:
            logp_new, logp_old = logp_old, logp_new
        b = reference.clip_breakdown(logp_new, logp_old, advantages, batch.eps)
    if "no_exp" in flags:
        b = replace(b, ratio=b.log_ratio.copy())
    if "clip_swapped" in flags:
        b = replace(b, upper=b.lower)
    return b


def _normalized(batch: CheckBatch, ddof: int, flags: frozenset[str]) -> FloatArray | None:
    """The advantages the implementation uses: as given, or ``(A - mean) / std(ddof)``."""
    if "normalized" not in flags:
        return batch.advantages
    if batch.n <= ddof:
        return None
    std = float(batch.advantages.std(ddof=ddof))
    if not std > 0:
        return None
    return (batch.advantages - batch.advantages.mean()) / std


def _nan_ratios(batch: CheckBatch, flags: frozenset[str]) -> BoolArray:
    """Where the implementation's ratio is NaN: ``exp(logp_new) / exp(logp_old)`` is ``0/0``."""
    if "ratio_underflow" in flags:
        return batch.underflows
    return np.zeros(batch.n, dtype=bool)


def _counted_as_clipped(b: Any, flags: frozenset[str], forms: Forms) -> BoolArray:
    """Which samples the implementation treats as clipped (NaN ratios aside)."""
    if "unclipped" in flags:
        return np.zeros(b.n, dtype=bool)
    if "non_strict" in flags:
        above, below = b.ratio >= b.upper, b.ratio <= b.lower
    else:
        above, below = b.ratio > b.upper, b.ratio < b.lower
    if {"sign_blind", "clip_only"} & flags:
        return above | below
    positive, negative = b.advantages > 0, b.advantages < 0
    if "zero_advantage" in flags:
        form, zero = forms.get("zero_advantage", 0), b.advantages == 0
        positive = positive | (zero if form in (0, 2) else False)
        negative = negative | (zero if form in (1, 2) else False)
    if "max_for_min" in flags:
        return (positive & below) | (negative & above)
    return (positive & above) | (negative & below)


def _loss(b: Any, flags: frozenset[str], nan_ratio: BoolArray) -> float:
    """The loss before the scale: NaN spreads; the objective kept decides the terms."""
    if nan_ratio.any():
        return math.nan
    if "max_for_min" in flags:
        return reference.negative_mean(np.maximum(b.unclipped_term, b.clipped_term), b.n)
    objective = next((o for o in ("unclipped", "clip_only") if o in flags), "clipped")
    try:
        return reference.loss_of(b, objective)
    except ValueError:  # infinite ratios with advantages of both signs: inf - inf
        return math.nan


def _gradient(
    b: Any, flags: frozenset[str], clipped: BoolArray, nan_ratio: BoolArray
) -> tuple[FloatArray, BoolArray | None]:
    """The gradient before the scale, and the entries the variant makes no claim about."""
    if "minus_A" in flags:  # d(r*A)/dlogp_new taken as A instead of r*A
        unclipped = -b.advantages / b.n + 0.0
    else:
        unclipped = reference.objective_terms(b, "unclipped")[1]
    unclipped = np.where(nan_ratio, math.nan, unclipped)
    if "grad_on_clipped" in flags:
        return unclipped, clipped
    return np.where(clipped, 0.0, unclipped), None
