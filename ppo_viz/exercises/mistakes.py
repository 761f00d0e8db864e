"""The mistakes the checker names, and what an implementation with some of them returns.

Each mistake has a stable key, a title (:data:`TITLES`) and what the learner reads
(:data:`EXPLANATIONS`).  Most are *variants* of the reference (:data:`VARIANTS`): :func:`predict`
follows the computation one step at a time, each from the checker's copy of :mod:`ppo_clip`
(:data:`.battery.reference`), and lets each mistake change the one step it affects:

1. the inputs used: advantages normalized (``normalized``, with either standard deviation),
   log-probabilities swapped (``ratio_inverted``);
2. the ratios: the log-ratio itself (``no_exp``), NaN where ``exp(logp_new) / exp(logp_old)``
   is ``0/0`` (``ratio_underflow``), a band whose upper edge is its lower one (``clip_swapped``:
   ``np.clip(r, 1 + eps, 1 - eps)`` clips to that);
3. which samples count as clipped: sign-blind, on the wrong side, ``A = 0`` included (with
   either sign, or both), non-strict comparisons, none at all (``unclipped``);
4. the terms: the objective kept (``unclipped``, ``clip_only``, ``max_for_min``), the gradient
   (``minus_A``, ``grad_on_clipped``), NaN from ``inf * 0`` (``nan_overflow``);
5. the scale: the sign (``sign``) and the ``1/N`` (``no_mean``).

A mistake with several forms gives several possible answers, and so does a sample whose clip
decision depends on which ``exp`` computed its ratio (:attr:`.CheckBatch.undecided`).  The other
mistakes (an error, a timeout, a wrong type, changed inputs) are recognised by their symptom.  To
teach the checker a new mistake, add its title and explanations, and for a variant its key in
:data:`VARIANTS` and the step of :func:`predict` it changes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import (
    FUNCTION_NAMES,
    NUMERICS_NOTEBOOK,
    BoolArray,
    CheckBatch,
    FloatArray,
    Kind,
    Role,
    reference,
)

#: Every mistake's title, in the order findings are reported.
TITLES = {
    "not_implemented": "Not implemented yet",
    "error": "Your function raised an error",
    "timeout": "Your function did not return in time",
    "wrong_type": "Wrong return type or shape",
    "patched_module": "Changed the module ppo_clip",
    "sign": "Objective instead of loss (the sign)",
    "no_mean": "Forgot the 1/N",
    "ratio_inverted": "Ratio inverted (old over new)",
    "no_exp": "Log-ratio used as the ratio (the exp is missing)",
    "unclipped": "The unclipped objective r*A",
    "clip_only": "The clip-only objective (np.clip without the min)",
    "max_for_min": "The wrong side clipped (max instead of min)",
    "clip_swapped": "np.clip's bounds swapped",
    "sign_blind": "Counted |r - 1| > eps as clipped",
    "zero_advantage": "Counted A = 0 as clipped",
    "non_strict": "Non-strict comparisons at r = 1 ± eps",
    "grad_on_clipped": "Non-zero gradient on clipped samples",
    "minus_A": "-A/N instead of -r*A/N",
    "normalized": "Normalized the advantages",
    "nan_overflow": "NaN for A = 0 with an overflowing ratio",
    "ratio_underflow": "Ratio computed from probabilities",
    "mutated": "Changed the input arrays",
    "mismatch": "Differs from the reference",
}
#: The mistakes answers reveal, by the batches they show on: ``"robustness"`` ones only at
#: float64's edges (an overflowing ratio, probabilities that underflow).
VARIANTS: dict[Role, tuple[str, ...]] = {
    "core": (
        *("sign", "no_mean", "ratio_inverted", "no_exp", "unclipped", "clip_only", "max_for_min"),
        *("clip_swapped", "sign_blind", "zero_advantage", "non_strict", "grad_on_clipped"),
        *("minus_A", "normalized"),
    ),
    "robustness": ("nan_overflow", "ratio_underflow"),
}

#: Checked against cleanrl/ppo.py @020cf0e (norm_adv, per minibatch),
#: stable_baselines3/ppo/ppo.py @cef4cf2 (normalize_advantage, per minibatch) and
#: spinup/algos/pytorch/ppo/ppo.py @2092113 (the buffer's get() normalizes the batch once).
_NORMALIZED = (
    "You normalize the advantages ((A - mean) / std). PPO codes often do, but before the loss: "
    "CleanRL (norm_adv) and Stable-Baselines3 (normalize_advantage) normalize each minibatch's "
    "advantages, Spinning Up normalizes the whole batch's advantages once, when the update takes "
    "them from its buffer. This function uses them as given: normalizing here shifts them, can "
    "flip their signs, and so changes which samples are clipped."
)
_CLIPPED = "A > 0 with r > 1 + eps, or A < 0 with r < 1 - eps"
_UNFAVOURABLE = "A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps"
_WRONG_SIDE = (
    f"A sample is clipped when it moved the favourable way beyond the band ({_CLIPPED}); you "
    f"clip the ones that moved the other way ({_UNFAVOURABLE}), as max(r*A, clip(r)*A) does."
)
_RATIO = "The ratio is r = np.exp(logp_new - logp_old), the new policy's probability over the old"
_UNDERFLOW = (
    "when the log-probabilities are very negative (-750 to -1000, normal for whole sequences in "
    "RLHF): exp(logp) underflows to 0, so exp(logp_new) / exp(logp_old) is 0/0 = NaN"
)
_NAN = "r = exp(1000) is inf in float64, and inf * 0 is NaN. Multiply only where A != 0, e.g. "
_NAN += "np.multiply(r, A, out=np.zeros_like(r), where=A != 0)."

#: What the learner reads, by mistake and exercise (``"any"``: every exercise).
EXPLANATIONS: dict[str, dict[str, str]] = {
    "not_implemented": {
        "any": "The function's body is still empty (it raises NotImplementedError or returns "
        "nothing). Write your code in the cell above, run it, then run this check again."
    },
    "patched_module": {
        "any": "Your function replaces names in the module ppo_clip (or numpy). That cannot "
        "change the verdict (the checker has reference answers of its own) nor your notebook "
        "(your function ran in a copy of its process), but a loss function should not change "
        "other modules: remove those lines."
    },
    "sign": {
        "loss": "You return the mean of min(r*A, clip(r)*A), the objective PPO maximizes. The "
        "loss to minimize is its negative: L = -(1/N) * sum of min(r*A, clip(r)*A).",
        "grad": "Your gradient has the opposite sign. It is the gradient of the loss, so an "
        "unclipped sample gets -r*A/N: A > 0 gives a negative gradient, and gradient descent "
        "raises logp_new.",
    },
    "no_mean": {
        "loss": "You sum over the batch instead of averaging: the loss is a mean, so multiply "
        "by 1/N (or use np.mean) and it will not grow with the batch size.",
        "clip_fraction": "You return the number of clipped samples, not the fraction: divide "
        "by N, so the result lies in [0, 1].",
        "grad": "Your gradient is N times too large: the loss is a mean over N samples, so each "
        "sample's gradient carries the 1/N, -r*A/N.",
    },
    "ratio_inverted": {
        "any": f"You compute exp(logp_old - logp_new), pi_old / pi_new. {_RATIO} one, so it "
        "grows when the update makes the action more likely."
    },
    "no_exp": {
        "any": f"You use the log-ratio logp_new - logp_old as the ratio. {_RATIO} one: it is 1 "
        "where nothing changed, and the band [1 - eps, 1 + eps] is a band around 1."
    },
    "unclipped": {
        "loss": "Your loss is -(1/N) * sum of r*A, with no clipping at all. PPO keeps "
        "min(r*A, clip(r)*A), so the term of a sample that moved the favourable way beyond the "
        "band stops at (1 ± eps)*A: add the clipped term and the np.minimum.",
        "grad": f"Your gradient is -r*A/N on every sample, the gradient of r*A. A clipped "
        f"sample ({_CLIPPED}) keeps the constant clip(r)*A, so its gradient is 0: use "
        "np.where(clipped, 0.0, -r*A/N).",
    },
    "clip_only": {
        "loss": "Your loss is -(1/N) * sum of clip(r)*A: np.clip without the np.minimum. For a "
        f"sample that moved the unfavourable way beyond the band ({_UNFAVOURABLE}), the "
        "pessimistic min(r*A, clip(r)*A) is r*A: keep np.minimum of both terms.",
        "grad": "Your gradient is 0 for every sample outside the band, on both sides, as for "
        f"clip(r)*A alone (or for |r - 1| > eps). A sample that moved the unfavourable way "
        f"({_UNFAVOURABLE}) is not clipped: the min keeps r*A and its gradient -r*A/N, which "
        "is how PPO pulls back a sample that strayed the wrong way.",
    },
    "max_for_min": {
        "loss": "You keep the larger of r*A and clip(r)*A: np.maximum where the loss needs "
        "np.minimum. (PyTorch-style code takes a max of the negated terms: "
        "max(-A*r, -A*clip(r)) = -min(A*r, A*clip(r)).) The min is the pessimistic bound.",
        "clip_fraction": _WRONG_SIDE,
        "grad": f"{_WRONG_SIDE} Those samples keep their gradient -r*A/N; the ones that moved "
        "the favourable way beyond the band get 0.",
    },
    "clip_swapped": {
        "loss": "You call np.clip(r, 1 + eps, 1 - eps), upper bound first. np.clip then "
        "returns its upper bound for every sample, so your clipped term is (1 - eps)*A whatever "
        "r is. Write np.clip(r, 1 - eps, 1 + eps)."
    },
    "sign_blind": {
        "clip_fraction": "You count every sample with |r - 1| > eps, whatever the sign of its "
        "advantage (Stable-Baselines3 and CleanRL log that number). This contract counts a "
        f"sample only when clipping switches its gradient off: {_CLIPPED}."
    },
    "zero_advantage": {
        "clip_fraction": "You count a sample with A = 0 outside the band as clipped, for "
        "example with A >= 0, or np.where(A > 0, r > 1 + eps, r < 1 - eps), which sends A = 0 "
        "to the test for A < 0. Its term r*A is 0 whatever r is: there is no gradient to "
        "switch off, so it is never clipped."
    },
    "non_strict": {
        "clip_fraction": "You count a sample exactly on the edge (r = 1 + eps with A > 0, or "
        "r = 1 - eps with A < 0) as clipped; the comparisons are strict. With eps = 0 this "
        "decides every sample with r == 1. (Computing in float32 can also push a ratio of 1.2 "
        f"over the edge: {NUMERICS_NOTEBOOK}, section 3.)",
        "grad": "You zero the gradient of a sample exactly on the edge (r = 1 + eps with A > 0, "
        "or r = 1 - eps with A < 0). The comparisons are strict: it keeps -r*A/N. With eps = 0 "
        "this decides every sample with r == 1.",
    },
    "grad_on_clipped": {
        "grad": "Your gradient is not 0 on clipped samples. Their term is the constant "
        "clip(r)*A = (1 ± eps)*A, whose gradient is 0: use np.where(clipped, 0.0, -r*A/N)."
    },
    "minus_A": {
        "grad": "You use -A/N as the gradient of an unclipped sample; it is -r*A/N, because "
        "dr/dlogp_new = r (the derivative of exp is exp). The two agree only where r = 1, as in "
        "the first update on a freshly collected batch."
    },
    "normalized": {"any": _NORMALIZED},
    "nan_overflow": {
        "loss": f"You return NaN when a sample has A = 0 and an overflowing ratio: {_NAN}",
        "grad": f"Your gradient is NaN for a sample with A = 0 and an overflowing ratio: {_NAN}",
    },
    "ratio_underflow": {
        "clip_fraction": f"You miss clipped samples {_UNDERFLOW}, and NaN > 1 + eps is False. "
        "Compute the ratio from the difference: r = np.exp(logp_new - logp_old).",
        "any": f"You get NaN {_UNDERFLOW}. Compute the ratio from the difference: "
        "r = np.exp(logp_new - logp_old).",
    },
    "mutated": {
        "any": "Your function changes its input arrays, which the caller reuses (PPO runs "
        "several epochs on one batch). Write x = x - y instead of x -= y, or work on a copy "
        "(x = np.array(x, dtype=float))."
    },
}

#: The most mistakes one answer is explained by.
MAX_MISTAKES = 3


def explanation(key: str, kind: Kind) -> str:
    """What the learner reads about mistake ``key`` in exercise ``kind`` ("" if nothing)."""
    texts = EXPLANATIONS.get(key, {})
    return texts.get(kind) or texts.get("any", "")


def _variants(kind: Kind, role: Role) -> tuple[str, ...]:
    return tuple(key for key in VARIANTS[role] if explanation(key, kind))


#: The variant mistakes of each exercise, in report order (core ones, then robustness ones).
VALUE_MISTAKES: dict[str, tuple[str, ...]] = {
    kind: _variants(kind, "core") + _variants(kind, "robustness") for kind in FUNCTION_NAMES
}


@cache
def candidate_mistake_sets(kind: Kind, role: Role = "core") -> tuple[frozenset[str], ...]:
    """Every combination of up to :data:`MAX_MISTAKES` variants of ``role``, fewest first."""
    names = _variants(kind, role)
    return tuple(
        frozenset(combination)
        for size in range(MAX_MISTAKES + 1)
        for combination in itertools.combinations(names, size)
    )


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
    computed once: a check tries hundreds of sets of mistakes on the same batches.
    """
    return _predict(batch, kind, frozenset(mistakes))


@cache
def _predict(batch: CheckBatch, kind: Kind, flags: frozenset[str]) -> Prediction | None:
    no_ratio = batch.underflows if "ratio_underflow" in flags else np.zeros(batch.n, bool)
    nan = no_ratio | (batch.overflowing_zero_advantage & ("nan_overflow" in flags))
    scale = (-1.0 if "sign" in flags else 1.0) * (batch.n if "no_mean" in flags else 1)
    values, free = [], None
    for b in _breakdowns_used(batch, flags):
        if kind == "loss":
            values.append(math.nan if nan.any() else _loss(b, flags))
            continue
        for clipped in _clip_masks(batch, b, flags):
            clipped &= ~no_ratio  # NaN > 1 + eps is False
            if kind == "clip_fraction":
                values.append(np.count_nonzero(clipped) / b.n)
                continue
            with np.errstate(all="ignore"):
                full = (-b.advantages if "minus_A" in flags else -b.unclipped_term) / b.n + 0.0
            full[nan] = math.nan
            if "grad_on_clipped" in flags:  # claims nothing where any verdict clips
                free = clipped if free is None else free | clipped
            values.append(full if free is not None else np.where(clipped, 0.0, full))
    if not values:
        return None
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
        advantages = [batch.advantages]
        if "normalized" in flags:  # with numpy's std and with the unbiased one, where defined
            a = batch.advantages
            stds = [float(a.std(ddof=ddof)) for ddof in (0, 1) if batch.n > ddof]
            advantages = [(a - a.mean()) / std for std in stds if std > 0]
        breakdowns = [reference.clip_breakdown(new, old, a, batch.eps) for a in advantages]
    if "no_exp" in flags:
        breakdowns = [replace(b, ratio=b.log_ratio.copy()) for b in breakdowns]
    if "clip_swapped" in flags:
        breakdowns = [replace(b, upper=b.lower) for b in breakdowns]
    return breakdowns


def _clip_masks(batch: CheckBatch, b: Any, flags: frozenset[str]) -> list[BoolArray]:
    """Which samples the implementation counts as clipped: one mask per possible verdict."""
    if "unclipped" in flags:
        return [np.zeros(b.n, dtype=bool)]
    if "non_strict" in flags:
        above, below = b.ratio >= b.upper, b.ratio <= b.lower
    else:
        above, below = b.ratio > b.upper, b.ratio < b.lower
    positive, negative, zero = b.advantages > 0, b.advantages < 0, b.advantages == 0
    sides = [(positive, negative)]
    if "zero_advantage" in flags:  # A = 0 counted with A > 0, with A < 0, or with both
        sides = [(positive | zero, negative), (positive, negative | zero), (~negative, ~positive)]
    if {"sign_blind", "clip_only"} & flags:
        masks = [above | below]
    elif "max_for_min" in flags:
        masks = [(p & below) | (n & above) for p, n in sides]
    else:
        masks = [(p & above) | (n & below) for p, n in sides]
    undecided, verdicts = np.flatnonzero(batch.undecided), list(masks)
    for count in range(1, 0 if _OWN_RATIOS & flags else len(undecided) + 1):
        flipped = np.zeros(b.n, dtype=bool)  # the verdict flipped on the first `count`
        flipped[undecided[:count]] = True
        masks += [mask ^ flipped for mask in verdicts]
    return masks


def _loss(b: Any, flags: frozenset[str]) -> float:
    """The loss before the scale: the objective kept decides the terms."""
    if not {"max_for_min", "unclipped", "clip_only"} & flags:
        return b.loss
    if "max_for_min" in flags:
        terms = np.maximum(b.unclipped_term, b.clipped_term)
    else:
        terms = b.unclipped_term if "unclipped" in flags else b.clipped_term
    with np.errstate(all="ignore"):  # inf - inf is NaN here: no such answer is right
        return float(-terms.sum() / b.n) + 0.0
