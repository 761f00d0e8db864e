"""The mistakes the checker names, and what an implementation with them returns.

Each :class:`Mistake` has a stable key, a title and an explanation for the
learner.  Most are *variants* of the reference: :func:`predict` computes what
an implementation with a given set of them returns on a batch, from
:func:`ppo_clip.clip_breakdown`, one step of the computation at a time (the
advantages used, the ratios, which samples count as clipped, the loss or
gradient, the scale).  The checker matches a learner's answers against these
predictions.  The others (an error, a wrong return type, changed inputs, NaN
where an overflowing ratio meets ``A = 0``) are recognised by their symptom.

To teach the checker a new mistake, add a :class:`Mistake` to
:data:`MISTAKES` (with ``variant=True`` if answers reveal it) and change the
one step of :func:`predict` it affects.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

import ppo_clip
from ppo_viz.exercises.battery import FUNCTION_NAMES, BoolArray, CheckBatch, FloatArray, Kind

#: The explanation of normalizing the advantages, the same for every exercise.
_NORMALIZED = (
    "You normalize the advantages ((A - mean) / std). Many PPO codes do that once per "
    "batch before the loss, but this function uses the advantages as given. Normalizing "
    "here shifts them, can flip their signs, and so changes which samples are clipped: "
    "remove it."
)

_NAN_FIX = "multiply only where A != 0, e.g. np.multiply(r, A, out=np.zeros_like(r), where=A != 0)."


@dataclass(frozen=True)
class Mistake:
    """A mistake the checker can name.

    ``explanations`` maps an exercise (``"loss"``, ``"clip_fraction"``,
    ``"grad"``) or ``"any"`` to what the learner reads.  A ``variant``
    mistake is recognised by matching answers against :func:`predict`, in
    every exercise it has an explanation for (all three with ``"any"``).
    """

    key: str
    title: str
    explanations: Mapping[str, str]
    variant: bool = False

    def explanation(self, kind: Kind) -> str:
        """What the learner reads about this mistake in exercise ``kind`` ("" if none)."""
        return self.explanations.get(kind) or self.explanations.get("any", "")

    def applies_to(self, kind: Kind) -> bool:
        """Whether answers of exercise ``kind`` are matched against this variant."""
        return self.variant and ("any" in self.explanations or kind in self.explanations)


#: Every mistake, in the order findings are reported.
MISTAKES: dict[str, Mistake] = {
    m.key: m
    for m in (
        Mistake(
            "not_implemented",
            "Not implemented yet",
            {
                "any": "The function's body is still empty (it raises NotImplementedError or "
                "returns nothing). Write your implementation in the cell above, run that "
                "cell, then run this check again."
            },
        ),
        Mistake("error", "Your function raised an error", {}),
        Mistake("wrong_type", "Wrong return type or shape", {}),
        Mistake(
            "sign",
            "Objective instead of loss (the sign)",
            {
                "loss": "Your values have the opposite sign of the loss: you return the mean "
                "of min(r*A, clip(r)*A), the objective PPO maximizes. The loss to minimize is "
                "its negative: L = -(1/N) * sum of min(r*A, clip(r)*A).",
                "grad": "Your gradient has the opposite sign. It is the gradient of the loss "
                "(the quantity minimized), so an unclipped sample gets -r*A/N: a positive "
                "advantage gives a negative gradient, and gradient descent raises logp_new.",
            },
            variant=True,
        ),
        Mistake(
            "no_mean",
            "Forgot the 1/N",
            {
                "loss": "Your values are N times the loss: you sum over the batch instead of "
                "averaging. The loss is a mean: multiply the sum by 1/N (or use np.mean), so "
                "it does not grow with the batch size.",
                "clip_fraction": "You return the number of clipped samples, not the "
                "fraction. Divide by N, so the result lies in [0, 1].",
                "grad": "Your gradient is N times too large. The loss is a mean over N "
                "samples, so each sample's gradient carries the 1/N: -r*A/N.",
            },
            variant=True,
        ),
        Mistake(
            "sign_blind",
            "Counted |r - 1| > eps as clipped",
            {
                "loss": "Your loss uses clip(r)*A for every sample, as if every sample with "
                "|r - 1| > eps were clipped (or as if the min were missing). For a sample that "
                "moved the unfavourable way (A > 0 with r < 1 - eps, or A < 0 with "
                "r > 1 + eps), min(r*A, clip(r)*A) is r*A, the pessimistic choice: keep "
                "np.minimum of both terms.",
                "clip_fraction": "You count every sample with |r - 1| > eps as clipped, "
                "whatever the sign of its advantage. (Stable-Baselines3 and CleanRL log that "
                "number, but this contract counts something else.) A sample is clipped only "
                "when A > 0 and r > 1 + eps, or A < 0 and r < 1 - eps: only then does "
                "clipping switch its gradient off.",
                "grad": "You set the gradient to 0 for every sample with |r - 1| > eps. A "
                "sample outside the band that moved the unfavourable way (A > 0 with "
                "r < 1 - eps, or A < 0 with r > 1 + eps) is not clipped: the min keeps r*A, "
                "so its gradient stays -r*A/N. That is how PPO pulls back a sample that "
                "strayed the wrong way.",
            },
            variant=True,
        ),
        Mistake(
            "non_strict",
            "Non-strict comparisons at r = 1 ± eps",
            {
                "clip_fraction": "You count a sample whose ratio is exactly on the edge "
                "(r = 1 + eps with A > 0, or r = 1 - eps with A < 0) as clipped. The "
                "comparisons are strict: clipped means r > 1 + eps or r < 1 - eps. With "
                "eps = 0 this decides every sample with r == 1 exactly.",
                "grad": "You zero the gradient of a sample whose ratio is exactly on the edge "
                "(r = 1 + eps with A > 0, or r = 1 - eps with A < 0). The comparisons are "
                "strict: on the edge the sample is not clipped and keeps -r*A/N. With "
                "eps = 0 this decides every sample with r == 1 exactly.",
            },
            variant=True,
        ),
        Mistake(
            "grad_on_clipped",
            "Non-zero gradient on clipped samples",
            {
                "grad": "Your gradient is not 0 on clipped samples. Where the clipped term "
                "wins the min, it is clip(r)*A = (1 ± eps)*A, a constant that does not depend "
                "on logp_new, so its gradient is 0: use np.where(clipped, 0.0, -r*A/N).",
            },
            variant=True,
        ),
        Mistake(
            "minus_A",
            "-A/N instead of -r*A/N",
            {
                "grad": "You use -A/N as the gradient of an unclipped sample; it is -r*A/N. "
                "The loss depends on logp_new through r = exp(logp_new - logp_old), and "
                "dr/dlogp_new = r (the derivative of exp is exp). The two agree only where "
                "r = 1, as in the first update on a freshly collected batch.",
            },
            variant=True,
        ),
        Mistake("normalized", "Normalized the advantages", {"any": _NORMALIZED}, variant=True),
        Mistake(
            "nan_overflow",
            "NaN for A = 0 with an overflowing ratio",
            {
                "loss": "You return NaN when a sample has A = 0 and a ratio that overflowed: "
                "r = exp(1000) is inf in float64, and inf * 0 is NaN. Such a sample "
                "contributes exactly 0: " + _NAN_FIX,
                "grad": "Your gradient is NaN for a sample with A = 0 whose ratio overflowed: "
                "r = exp(1000) is inf in float64, and inf * 0 is NaN. Its gradient is exactly "
                "0: " + _NAN_FIX,
            },
        ),
        Mistake(
            "ratio_underflow",
            "Ratio computed from probabilities",
            {
                "clip_fraction": "You miss clipped samples when the log-probabilities are "
                "very negative (-750 to -1000, normal for whole sequences in RLHF): exp(logp) "
                "underflows to 0 there, so exp(logp_new) / exp(logp_old) is 0/0 = NaN, and "
                "NaN > 1 + eps is False. Compute the ratio from the difference: "
                "r = np.exp(logp_new - logp_old).",
                "any": "You get NaN when the log-probabilities are very negative (-750 to "
                "-1000, normal for whole sequences in RLHF): exp(logp) underflows to 0 there, "
                "so exp(logp_new) / exp(logp_old) is 0/0. Compute the ratio from the "
                "difference: r = np.exp(logp_new - logp_old).",
            },
            variant=True,
        ),
        Mistake(
            "mutated",
            "Changed the input arrays",
            {
                "any": "Your function changes its input arrays. The caller reuses them (PPO "
                "runs several epochs on one batch), so every call must leave them as they "
                "were. Write x = x - y instead of x -= y, or work on a copy "
                "(x = np.array(x, dtype=float)).",
            },
        ),
        Mistake("mismatch", "Differs from the reference", {}),
    )
}

#: The variant mistakes of each exercise, in report order.
VALUE_MISTAKES: dict[str, tuple[str, ...]] = {
    kind: tuple(m.key for m in MISTAKES.values() if m.applies_to(kind)) for kind in FUNCTION_NAMES
}

#: Sets of mistakes that describe nothing new together (the gradient of clipped
#: samples is free under "grad_on_clipped", so how clipping is decided does not show).
REDUNDANT = (
    frozenset({"grad_on_clipped", "sign_blind"}),
    frozenset({"grad_on_clipped", "non_strict"}),
)

#: The most mistakes one answer is explained by.
MAX_MISTAKES = 3


def explanation(key: str, kind: Kind) -> str:
    """The explanation of mistake ``key`` in exercise ``kind``."""
    return MISTAKES[key].explanation(kind)


@cache
def candidate_mistake_sets(kind: Kind) -> tuple[frozenset[str], ...]:
    """Every combination of up to :data:`MAX_MISTAKES` variant mistakes, fewest first."""
    names = VALUE_MISTAKES[kind]
    return tuple(
        frozenset(combo)
        for size in range(MAX_MISTAKES + 1)
        for combo in itertools.combinations(names, size)
        if not any(pair <= set(combo) for pair in REDUNDANT)
    )


# --------------------------------------------------------------------------
# What an implementation with some mistakes returns
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """What an implementation with some mistakes returns on one batch.

    ``breakdown`` is the reference breakdown of the advantages that
    implementation uses.  ``free`` marks gradient entries the variant makes no
    claim about (the clipped samples, for "non-zero gradient on clipped
    samples"); ``loose`` asks for looser tolerances (normalizing codes add a
    small constant to the std).
    """

    value: float | FloatArray
    breakdown: ppo_clip.ClipBreakdown
    free: BoolArray | None = None
    loose: bool = False


def predict(
    batch: CheckBatch, kind: Kind, mistakes: Iterable[str], ddof: int = 0
) -> Prediction | None:
    """What an implementation with exactly these ``mistakes`` returns on ``batch``.

    With no mistakes this is :mod:`ppo_clip`'s own answer.  ``ddof`` chooses the
    std of the "normalized" variant.  None when the variant is undefined on the
    batch (normalizing advantages whose std is 0).
    """
    flags = frozenset(mistakes)
    b = _breakdown_used(batch, flags, ddof)
    if b is None:
        return None
    loose = "normalized" in flags
    nan_ratio = _nan_ratios(batch, flags)
    clipped = _counted_as_clipped(b, flags) & ~nan_ratio
    scale = (-1.0 if "sign" in flags else 1.0) * (b.n if "no_mean" in flags else 1)
    if kind == "clip_fraction":
        return Prediction(scale * (np.count_nonzero(clipped) / b.n), b, loose=loose)
    if kind == "loss":
        return Prediction(scale * _loss(batch, b, flags, nan_ratio), b, loose=loose)
    gradient, free = _gradient(b, flags, clipped, nan_ratio)
    return Prediction(scale * gradient, b, free=free, loose=loose)


def _breakdown_used(
    batch: CheckBatch, flags: frozenset[str], ddof: int
) -> ppo_clip.ClipBreakdown | None:
    """The reference breakdown of the advantages the implementation uses.

    With "normalized", the advantages ``(A - mean) / std(ddof)``; None if
    that std is 0 or undefined.
    """
    if "normalized" not in flags:
        return batch.breakdown
    if batch.n <= ddof:
        return None
    std = float(batch.advantages.std(ddof=ddof))
    if not std > 0:
        return None
    normalized = (batch.advantages - batch.advantages.mean()) / std
    return ppo_clip.clip_breakdown(batch.logp_new, batch.logp_old, normalized, batch.eps)


def _nan_ratios(batch: CheckBatch, flags: frozenset[str]) -> BoolArray:
    """Where the implementation's ratio is NaN.

    ``exp(logp_new) / exp(logp_old)`` is ``0/0`` where both underflow.
    """
    if "ratio_underflow" in flags:
        return batch.underflows
    return np.zeros(batch.n, dtype=bool)


def _counted_as_clipped(b: ppo_clip.ClipBreakdown, flags: frozenset[str]) -> BoolArray:
    """Which samples the implementation treats as clipped (NaN ratios aside)."""
    sign_blind, non_strict = "sign_blind" in flags, "non_strict" in flags
    if not non_strict:
        return b.outside_band if sign_blind else b.is_clipped
    above, below = b.ratio >= b.upper, b.ratio <= b.lower
    if sign_blind:
        return above | below
    return ((b.advantages > 0) & above) | ((b.advantages < 0) & below)


def _loss(
    batch: CheckBatch, b: ppo_clip.ClipBreakdown, flags: frozenset[str], nan_ratio: BoolArray
) -> float:
    """The loss before the scale: NaN spreads; sign-blind clipping keeps clip(r)*A everywhere."""
    if nan_ratio.any():
        return math.nan
    if "sign_blind" in flags:  # out-of-band samples all take clip(r)*A: the clip-only loss
        return ppo_clip.surrogate_loss(
            batch.logp_new, batch.logp_old, b.advantages, batch.eps, objective="clip_only"
        )
    return b.loss


def _gradient(
    b: ppo_clip.ClipBreakdown, flags: frozenset[str], clipped: BoolArray, nan_ratio: BoolArray
) -> tuple[FloatArray, BoolArray | None]:
    """The gradient before the scale, and the entries the variant makes no claim about."""
    if "minus_A" in flags:  # d(r*A)/dlogp_new taken as A instead of r*A
        unclipped = -b.advantages / b.n
    else:
        unclipped = ppo_clip.objective_terms(b, "unclipped")[1]
    unclipped = np.where(nan_ratio, math.nan, unclipped)
    if "grad_on_clipped" in flags:
        return unclipped, b.is_clipped
    return np.where(clipped, 0.0, unclipped), None
