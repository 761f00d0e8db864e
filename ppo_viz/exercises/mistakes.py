"""The mistakes the checker names: a stable key, a title and an explanation for the learner.

Most are *variants* of the reference: :func:`.variants.predict` computes what
an implementation with a given set of them returns on a batch, and the
checker matches a learner's answers against those predictions.  The others
(an error, a timeout, a wrong return type, changed inputs, NaN where an
overflowing ratio meets ``A = 0``, ...) are recognised by their symptom.

A variant's ``role`` says where it can show: ``"core"`` variants on the
realistic batches, ``"robustness"`` ones only at float64's edges (the
ratio computed from probabilities shows only where they underflow).  Some
variants come in several ``forms`` that give the same diagnosis (advantages
normalized with either standard deviation; ``A = 0`` sent to either branch).

To teach the checker a new mistake, add a :class:`Mistake` to
:data:`MISTAKES` (with ``variant=True`` if answers reveal it) and change the
one step of :func:`.variants.predict` it affects.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from ppo_viz.exercises.battery import FUNCTION_NAMES, NUMERICS_NOTEBOOK, Kind, Role

#: The explanation of normalizing the advantages, the same for every exercise.  Checked
#: against cleanrl/ppo.py @020cf0e (norm_adv, per minibatch), stable_baselines3/ppo/ppo.py
#: @cef4cf2 (normalize_advantage, per minibatch) and spinup/algos/pytorch/ppo/ppo.py @2092113
#: (the buffer's get() normalizes the whole batch once).
_NORMALIZED = (
    "You normalize the advantages ((A - mean) / std). PPO codes often do, but as a step before "
    "the loss, on the advantages they hand to it: CleanRL (norm_adv) and Stable-Baselines3 "
    "(normalize_advantage) normalize each minibatch's advantages, Spinning Up normalizes the "
    "whole batch's advantages once, when the update takes them from its buffer. This function "
    "uses the advantages as given: normalizing here shifts them, can flip their signs, and so "
    "changes which samples are clipped. Remove it."
)

_NAN_FIX = "multiply only where A != 0, e.g. np.multiply(r, A, out=np.zeros_like(r), where=A != 0)."

_WRONG_SIDE = (
    "A sample is clipped when it moved the favourable way beyond the band (A > 0 with "
    "r > 1 + eps, or A < 0 with r < 1 - eps); you clip the ones that moved the unfavourable "
    "way (A > 0 with r < 1 - eps, A < 0 with r > 1 + eps) instead, which is what "
    "max(r*A, clip(r)*A) in place of the min does."
)

_RATIO = "The ratio is r = np.exp(logp_new - logp_old): the new policy's probability over the old"


@dataclass(frozen=True)
class Mistake:
    """A mistake the checker can name.

    ``explanations`` maps an exercise (``"loss"``, ``"clip_fraction"``,
    ``"grad"``) or ``"any"`` to what the learner reads.  A ``variant``
    mistake is recognised by matching answers against the predictions of
    :mod:`.variants`, in every exercise it has an explanation for (all three
    with ``"any"``), on the batches of its ``role``; ``forms`` is how many
    alternative forms it has.
    """

    key: str
    title: str
    explanations: Mapping[str, str]
    variant: bool = False
    role: Role = "core"
    forms: int = 1

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
        Mistake("timeout", "Your function did not return in time", {}),
        Mistake("wrong_type", "Wrong return type or shape", {}),
        Mistake(
            "patched_module",
            "Changed the module ppo_clip",
            {
                "any": "Your function replaces names in the module ppo_clip. The checker "
                "compares your answers with reference answers it computed when it was "
                "imported, so that cannot change its verdict; it has put the module's own "
                "names back, so the rest of your notebook still works. A loss function should "
                "not change other modules: remove those lines.",
            },
        ),
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
            "ratio_inverted",
            "Ratio inverted (old over new)",
            {
                "any": "Your ratio is pi_old / pi_new: you compute exp(logp_old - logp_new). "
                f"{_RATIO} one, so it grows when the update makes the action more likely.",
            },
            variant=True,
        ),
        Mistake(
            "no_exp",
            "Log-ratio used as the ratio (the exp is missing)",
            {
                "any": "You use the log-ratio logp_new - logp_old as if it were the ratio. "
                f"{_RATIO} one. It is 1 where nothing changed (the log-ratio is 0 there), and "
                "the clip band [1 - eps, 1 + eps] is a band around 1.",
            },
            variant=True,
        ),
        Mistake(
            "unclipped",
            "The unclipped objective r*A",
            {
                "loss": "Your loss is -(1/N) * sum of r*A: the unclipped importance-weighted "
                "surrogate, with no clipping at all. PPO's loss keeps min(r*A, clip(r)*A), so "
                "the term of a sample that moved the favourable way beyond the band stops at "
                "(1 + eps)*A for A > 0, (1 - eps)*A for A < 0: add the clipped term and the "
                "np.minimum.",
                "grad": "Your gradient is -r*A/N on every sample: the gradient of the "
                "unclipped objective r*A. A clipped sample (A > 0 with r > 1 + eps, or A < 0 "
                "with r < 1 - eps) keeps the constant clip(r)*A = (1 ± eps)*A, so its gradient "
                "is 0: use np.where(clipped, 0.0, -r*A/N).",
            },
            variant=True,
        ),
        Mistake(
            "clip_only",
            "The clip-only objective (np.clip without the min)",
            {
                "loss": "Your loss is -(1/N) * sum of clip(r)*A: np.clip without the "
                "np.minimum, the clip-only objective. For a sample that moved the unfavourable "
                "way beyond the band (A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps), "
                "min(r*A, clip(r)*A) is r*A, the pessimistic choice, not clip(r)*A: keep "
                "np.minimum of both terms.",
                "grad": "Your gradient is 0 for every sample outside the band, on both sides: "
                "the gradient of the clip-only objective clip(r)*A (or of counting "
                "|r - 1| > eps as clipped). A sample outside the band that moved the "
                "unfavourable way (A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps) is not "
                "clipped: the min keeps r*A, so its gradient stays -r*A/N. That is how PPO "
                "pulls back a sample that strayed the wrong way.",
            },
            variant=True,
        ),
        Mistake(
            "max_for_min",
            "The wrong side clipped (max instead of min)",
            {
                "loss": "You keep the larger of r*A and clip(r)*A: np.maximum where the loss "
                "needs np.minimum. (The PyTorch-style form does take a max, but of the negated "
                "terms: max(-A*r, -A*clip(r)) = -min(A*r, A*clip(r)).) The min is the "
                "pessimistic bound: it keeps r*A for a sample that moved the unfavourable way, "
                "and the constant clip(r)*A for one that moved the favourable way beyond the "
                "band.",
                "clip_fraction": _WRONG_SIDE,
                "grad": _WRONG_SIDE + " Those samples keep their gradient -r*A/N; the ones "
                "that moved the favourable way beyond the band get 0.",
            },
            variant=True,
        ),
        Mistake(
            "clip_swapped",
            "np.clip's bounds swapped",
            {
                "loss": "You call np.clip(r, 1 + eps, 1 - eps), with the upper bound first. "
                "When its lower bound is above its upper bound, np.clip returns the upper "
                "bound for every sample, so your clipped term is (1 - eps)*A whatever r is. "
                "Write np.clip(r, 1 - eps, 1 + eps).",
            },
            variant=True,
        ),
        Mistake(
            "sign_blind",
            "Counted |r - 1| > eps as clipped",
            {
                "clip_fraction": "You count every sample with |r - 1| > eps as clipped, "
                "whatever the sign of its advantage. (Stable-Baselines3 and CleanRL log that "
                "number, but this contract counts something else.) A sample is clipped only "
                "when A > 0 and r > 1 + eps, or A < 0 and r < 1 - eps: only then does "
                "clipping switch its gradient off.",
            },
            variant=True,
        ),
        Mistake(
            "zero_advantage",
            "Counted A = 0 as clipped",
            {
                "clip_fraction": "You count a sample with A = 0 as clipped when its ratio is "
                "outside the band: for example A >= 0 where the rule says A > 0, or "
                "np.where(A > 0, r > 1 + eps, r < 1 - eps), which sends A = 0 to the test for "
                "A < 0. A sample with A = 0 is never clipped: its term r*A is 0 whatever r "
                "is, so there is no gradient to switch off.",
            },
            variant=True,
            forms=3,  # A = 0 counted with A > 0, with A < 0, or with both
        ),
        Mistake(
            "non_strict",
            "Non-strict comparisons at r = 1 ± eps",
            {
                "clip_fraction": "You count a sample whose ratio is exactly on the edge "
                "(r = 1 + eps with A > 0, or r = 1 - eps with A < 0) as clipped. The "
                "comparisons are strict: clipped means r > 1 + eps or r < 1 - eps. With "
                "eps = 0 this decides every sample with r == 1 exactly. (Computing in float32 "
                "can also push a ratio of exactly 1.2 over the edge: "
                f"{NUMERICS_NOTEBOOK}, section 3.)",
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
        Mistake(
            "normalized",
            "Normalized the advantages",
            {"any": _NORMALIZED},
            variant=True,
            forms=2,  # np.std (ddof 0) or the unbiased std of torch (ddof 1)
        ),
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
            role="robustness",
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
            role="robustness",
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


def _variants(kind: Kind, role: Role) -> tuple[str, ...]:
    return tuple(m.key for m in MISTAKES.values() if m.applies_to(kind) and m.role == role)


#: The variant mistakes of each exercise, in report order (core ones, then robustness ones).
VALUE_MISTAKES: dict[str, tuple[str, ...]] = {
    kind: _variants(kind, "core") + _variants(kind, "robustness") for kind in FUNCTION_NAMES
}


def _exclusive(*keys: str) -> tuple[frozenset[str], ...]:
    """Every pair of ``keys``."""
    return tuple(frozenset(pair) for pair in itertools.combinations(keys, 2))


def _with(key: str, *others: str) -> tuple[frozenset[str], ...]:
    """``key`` paired with each of ``others``."""
    return tuple(frozenset({key, other}) for other in others)


#: Pairs of mistakes that contradict each other or describe nothing new together: one
#: objective in place of the clipped one; how clipping is decided, under "unclipped"
#: (nothing is clipped) or "grad_on_clipped" (the gradient of clipped samples is free).
REDUNDANT = (
    *_exclusive("unclipped", "clip_only", "max_for_min", "sign_blind"),
    *_with("unclipped", "clip_swapped", "non_strict", "zero_advantage"),
    *_with("grad_on_clipped", "unclipped", "clip_only", "max_for_min", "non_strict", "sign_blind"),
    *_with("zero_advantage", "sign_blind"),
    *_with("ratio_underflow", "no_exp"),
)

#: The most mistakes one answer is explained by.
MAX_MISTAKES = 3


def explanation(key: str, kind: Kind) -> str:
    """The explanation of mistake ``key`` in exercise ``kind``."""
    return MISTAKES[key].explanation(kind)


@cache
def candidate_mistake_sets(kind: Kind, role: Role = "core") -> tuple[frozenset[str], ...]:
    """Every combination of up to :data:`MAX_MISTAKES` variants of ``role``, fewest first."""
    names = _variants(kind, role)
    return tuple(
        frozenset(combo)
        for size in range(MAX_MISTAKES + 1)
        for combo in itertools.combinations(names, size)
        if not any(pair <= set(combo) for pair in REDUNDANT)
    )
