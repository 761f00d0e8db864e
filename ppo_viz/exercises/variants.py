"""What an implementation with some of the named mistakes returns on a batch.

:func:`predict` follows the computation one step at a time, each from the checker's copy of
:mod:`ppo_clip` (:data:`.battery.reference`), and lets each mistake change the one step it
affects:

1. the inputs used: advantages normalized (``normalized``, with either standard deviation),
   log-probabilities swapped (``ratio_inverted``);
2. the ratios: the log-ratio itself (``no_exp``), NaN where ``exp(logp_new) / exp(logp_old)``
   is ``0/0`` (``ratio_underflow``), a band whose upper edge is its lower one (``clip_swapped``:
   ``np.clip(r, 1 + eps, 1 - eps)`` clips to that);
3. which samples count as clipped: sign-blind, on the wrong side, ``A = 0`` included (with
   either sign, or both), non-strict comparisons, none at all (``unclipped``);
4. the loss: the objective kept (``unclipped``, ``clip_only``, ``max_for_min``), or the gradient
   (``minus_A``, ``grad_on_clipped``);
5. the scale: the sign (``sign``) and the ``1/N`` (``no_mean``).

A mistake with several forms gives several possible answers, and so does a batch whose clip
decision on some sample depends on which ``exp`` computed its ratio
(:attr:`.CheckBatch.undecided`): either verdict is accepted there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import BoolArray, CheckBatch, FloatArray, Kind, reference

#: Mistakes after which a sample's ratio or band is not the reference's: the verdict on an
#: undecided sample is then the variant's own.
_OWN_RATIOS = frozenset({"normalized", "ratio_inverted", "no_exp", "clip_swapped"})


@dataclass(frozen=True)
class Prediction:
    """What an implementation with some mistakes returns on one batch.

    ``values`` are the answers it may give (1-D float arrays); ``free`` marks gradient entries
    it claims nothing about (the clipped samples, for "non-zero gradient on clipped samples");
    ``loose`` asks for looser tolerances (normalizing codes add a small constant to the std).
    """

    values: tuple[FloatArray, ...]
    free: BoolArray | None = None
    loose: bool = False

    @property
    def value(self) -> FloatArray:
        """The first possible answer: the reference's verdicts and the mistakes' first forms."""
        return self.values[0]


def predict(batch: CheckBatch, kind: Kind, mistakes: Iterable[str] = ()) -> Prediction | None:
    """What an implementation with exactly these ``mistakes`` returns on ``batch``.

    With no mistakes, :mod:`ppo_clip`'s own answer comes first.  None when the variant is
    undefined on the batch (normalizing advantages whose standard deviation is 0).  Each is
    computed once (a check tries hundreds of sets of mistakes on the same batches).
    """
    return _predict(batch, kind, frozenset(mistakes))


@cache
def _predict(batch: CheckBatch, kind: Kind, flags: frozenset[str]) -> Prediction | None:
    breakdowns = _breakdowns_used(batch, flags)
    if not breakdowns:
        return None
    nan_ratio = batch.underflows if "ratio_underflow" in flags else np.zeros(batch.n, bool)
    scale = (-1.0 if "sign" in flags else 1.0) * (batch.n if "no_mean" in flags else 1)
    values, free = [], None
    for b in breakdowns:
        if kind == "loss":
            values.append(_loss(b, flags, nan_ratio))
            continue
        for clipped in _clip_masks(batch, b, flags):
            clipped = clipped & ~nan_ratio
            if kind == "clip_fraction":
                values.append(np.count_nonzero(clipped) / b.n)
            else:
                gradient, free = _gradient(b, flags, clipped, nan_ratio)
                values.append(gradient)
    arrays = [scale * np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in values]
    if not flags:
        arrays[0] = np.atleast_1d(batch.answers[kind])
    return Prediction(tuple(arrays), free, loose="normalized" in flags)


def _breakdowns_used(batch: CheckBatch, flags: frozenset[str]) -> list[Any]:
    """The reference breakdowns of the inputs, ratios and band the implementation uses."""
    breakdowns = [batch.breakdown]
    if {"normalized", "ratio_inverted"} & flags:
        new, old = batch.logp_new, batch.logp_old
        if "ratio_inverted" in flags:
            new, old = old, new
        advantages = _normalized(batch) if "normalized" in flags else [batch.advantages]
        breakdowns = [reference.clip_breakdown(new, old, a, batch.eps) for a in advantages]
    if "no_exp" in flags:
        breakdowns = [replace(b, ratio=b.log_ratio.copy()) for b in breakdowns]
    if "clip_swapped" in flags:
        breakdowns = [replace(b, upper=b.lower) for b in breakdowns]
    return breakdowns


def _normalized(batch: CheckBatch) -> list[FloatArray]:
    """``(A - mean) / std`` with numpy's std and with the unbiased one, where each is defined."""
    a = batch.advantages
    stds = [float(a.std(ddof=ddof)) for ddof in (0, 1) if batch.n > ddof]
    return [(a - a.mean()) / std for std in stds if std > 0]


def _clip_masks(batch: CheckBatch, b: Any, flags: frozenset[str]) -> list[BoolArray]:
    """Which samples the implementation counts as clipped: one mask per possible verdict."""
    if "unclipped" in flags:
        return [np.zeros(b.n, dtype=bool)]
    if "non_strict" in flags:
        above, below = b.ratio >= b.upper, b.ratio <= b.lower
    else:
        above, below = b.ratio > b.upper, b.ratio < b.lower
    if {"sign_blind", "clip_only"} & flags:
        masks = [above | below]
    else:
        positive, negative, zero = b.advantages > 0, b.advantages < 0, b.advantages == 0
        sides = [(positive, negative)]
        if "zero_advantage" in flags:  # A = 0 counted with A > 0, with A < 0, or with both
            sides = [(positive | zero, negative), (positive, negative | zero)]
            sides.append((positive | zero, negative | zero))
        if "max_for_min" in flags:
            masks = [(p & below) | (n & above) for p, n in sides]
        else:
            masks = [(p & above) | (n & below) for p, n in sides]
    undecided = np.flatnonzero(batch.undecided) if not _OWN_RATIOS & flags else []
    verdicts = list(masks)
    for count in range(1, len(undecided) + 1):  # the verdict flipped on the first `count`
        flipped = np.zeros(b.n, dtype=bool)
        flipped[undecided[:count]] = True
        masks += [mask ^ flipped for mask in verdicts]
    return masks


def _loss(b: Any, flags: frozenset[str], nan_ratio: BoolArray) -> float:
    """The loss before the scale: NaN spreads; the objective kept decides the terms."""
    if nan_ratio.any():
        return math.nan
    if "max_for_min" in flags:
        terms = np.maximum(b.unclipped_term, b.clipped_term)
    elif "unclipped" in flags:
        terms = b.unclipped_term
    elif "clip_only" in flags:
        terms = b.clipped_term
    else:
        return b.loss
    with np.errstate(all="ignore"):  # inf - inf is NaN here: no such answer is right
        return float(-terms.sum() / b.n) + 0.0


def _gradient(
    b: Any, flags: frozenset[str], clipped: BoolArray, nan_ratio: BoolArray
) -> tuple[FloatArray, BoolArray | None]:
    """The gradient before the scale, and the entries the variant claims nothing about."""
    with np.errstate(all="ignore"):
        full = (-b.advantages if "minus_A" in flags else -b.unclipped_term) / b.n + 0.0
    full = np.where(nan_ratio, math.nan, full)
    if "grad_on_clipped" in flags:
        return full, clipped
    return np.where(clipped, 0.0, full), None
