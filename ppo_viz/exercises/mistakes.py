"""The mistakes the checker names: a stable key, a title and an explanation for the learner.

Most are *variants* of the reference: :func:`.variants.predict` computes what an implementation
with a set of them returns, and the checker matches the learner's answers with that.  The others
(an error, a timeout, a wrong return type, changed inputs, NaN where an overflowing ratio meets
``A = 0``, ...) are recognised by their symptom.  To teach the checker a new mistake, add its
title, its explanations and (for a variant) its key in :data:`VARIANTS`, and change the one step
of :func:`.variants.predict` it affects.
"""

from __future__ import annotations

import itertools
from functools import cache

from ppo_viz.exercises.battery import FUNCTION_NAMES, NUMERICS_NOTEBOOK, Kind, Role

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
#: float64's edges (a ratio computed from probabilities, where they underflow).
VARIANTS: dict[Role, tuple[str, ...]] = {
    "core": (
        *("sign", "no_mean", "ratio_inverted", "no_exp", "unclipped", "clip_only", "max_for_min"),
        *("clip_swapped", "sign_blind", "zero_advantage", "non_strict", "grad_on_clipped"),
        *("minus_A", "normalized"),
    ),
    "robustness": ("ratio_underflow",),
}

#: Checked against cleanrl/ppo.py @020cf0e (norm_adv, per minibatch),
#: stable_baselines3/ppo/ppo.py @cef4cf2 (normalize_advantage, per minibatch) and
#: spinup/algos/pytorch/ppo/ppo.py @2092113 (the buffer's get() normalizes the batch once).
_NORMALIZED = (
    "You normalize the advantages ((A - mean) / std). PPO codes often do, but as a step before "
    "the loss, on the advantages they hand to it: CleanRL (norm_adv) and Stable-Baselines3 "
    "(normalize_advantage) normalize each minibatch's advantages, Spinning Up normalizes the "
    "whole batch's advantages once, when the update takes them from its buffer. This function "
    "uses the advantages as given: normalizing here shifts them, can flip their signs, and so "
    "changes which samples are clipped. Remove it."
)
_NAN = "r = exp(1000) is inf in float64, and inf * 0 is NaN. Multiply only where A != 0, e.g. "
_NAN_FIX = "np.multiply(r, A, out=np.zeros_like(r), where=A != 0)."
_WRONG_SIDE = (
    "A sample is clipped when it moved the favourable way beyond the band (A > 0 with "
    "r > 1 + eps, or A < 0 with r < 1 - eps); you clip the ones that moved the unfavourable "
    "way (A > 0 with r < 1 - eps, A < 0 with r > 1 + eps) instead, which is what "
    "max(r*A, clip(r)*A) in place of the min does."
)
_RATIO = "The ratio is r = np.exp(logp_new - logp_old): the new policy's probability over the old"
_UNDERFLOW = (
    "when the log-probabilities are very negative (-750 to -1000, normal for whole sequences in "
    "RLHF): exp(logp) underflows to 0 there, so exp(logp_new) / exp(logp_old) is 0/0 = NaN"
)

#: What the learner reads, by mistake and exercise (``"any"``: every exercise).
EXPLANATIONS: dict[str, dict[str, str]] = {
    "not_implemented": {
        "any": "The function's body is still empty (it raises NotImplementedError or returns "
        "nothing). Write your implementation in the cell above, run that cell, then run this "
        "check again."
    },
    "patched_module": {
        "any": "Your function replaces names in the module ppo_clip (or numpy). The checker "
        "compares your answers with reference answers of its own, so that cannot change its "
        "verdict, and your function ran in a copy of the notebook's process, so your notebook "
        "is unchanged. A loss function should not change other modules: remove those lines."
    },
    "sign": {
        "loss": "Your values have the opposite sign of the loss: you return the mean of "
        "min(r*A, clip(r)*A), the objective PPO maximizes. The loss to minimize is its "
        "negative: L = -(1/N) * sum of min(r*A, clip(r)*A).",
        "grad": "Your gradient has the opposite sign. It is the gradient of the loss (the "
        "quantity minimized), so an unclipped sample gets -r*A/N: a positive advantage gives a "
        "negative gradient, and gradient descent raises logp_new.",
    },
    "no_mean": {
        "loss": "Your values are N times the loss: you sum over the batch instead of averaging. "
        "The loss is a mean: multiply the sum by 1/N (or use np.mean), so it does not grow "
        "with the batch size.",
        "clip_fraction": "You return the number of clipped samples, not the fraction. Divide "
        "by N, so the result lies in [0, 1].",
        "grad": "Your gradient is N times too large. The loss is a mean over N samples, so "
        "each sample's gradient carries the 1/N: -r*A/N.",
    },
    "ratio_inverted": {
        "any": "Your ratio is pi_old / pi_new: you compute exp(logp_old - logp_new). "
        f"{_RATIO} one, so it grows when the update makes the action more likely."
    },
    "no_exp": {
        "any": "You use the log-ratio logp_new - logp_old as if it were the ratio. "
        f"{_RATIO} one. It is 1 where nothing changed (the log-ratio is 0 there), and the clip "
        "band [1 - eps, 1 + eps] is a band around 1."
    },
    "unclipped": {
        "loss": "Your loss is -(1/N) * sum of r*A: the unclipped importance-weighted "
        "surrogate, with no clipping at all. PPO's loss keeps min(r*A, clip(r)*A), so the term "
        "of a sample that moved the favourable way beyond the band stops at (1 + eps)*A for "
        "A > 0, (1 - eps)*A for A < 0: add the clipped term and the np.minimum.",
        "grad": "Your gradient is -r*A/N on every sample: the gradient of the unclipped "
        "objective r*A. A clipped sample (A > 0 with r > 1 + eps, or A < 0 with r < 1 - eps) "
        "keeps the constant clip(r)*A = (1 ± eps)*A, so its gradient is 0: use "
        "np.where(clipped, 0.0, -r*A/N).",
    },
    "clip_only": {
        "loss": "Your loss is -(1/N) * sum of clip(r)*A: np.clip without the np.minimum, the "
        "clip-only objective. For a sample that moved the unfavourable way beyond the band "
        "(A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps), min(r*A, clip(r)*A) is r*A, the "
        "pessimistic choice, not clip(r)*A: keep np.minimum of both terms.",
        "grad": "Your gradient is 0 for every sample outside the band, on both sides: the "
        "gradient of the clip-only objective clip(r)*A (or of counting |r - 1| > eps as "
        "clipped). A sample outside the band that moved the unfavourable way (A > 0 with "
        "r < 1 - eps, or A < 0 with r > 1 + eps) is not clipped: the min keeps r*A, so its "
        "gradient stays -r*A/N. That is how PPO pulls back a sample that strayed the wrong way.",
    },
    "max_for_min": {
        "loss": "You keep the larger of r*A and clip(r)*A: np.maximum where the loss needs "
        "np.minimum. (The PyTorch-style form does take a max, but of the negated terms: "
        "max(-A*r, -A*clip(r)) = -min(A*r, A*clip(r)).) The min is the pessimistic bound: it "
        "keeps r*A for a sample that moved the unfavourable way, and the constant clip(r)*A "
        "for one that moved the favourable way beyond the band.",
        "clip_fraction": _WRONG_SIDE,
        "grad": _WRONG_SIDE + " Those samples keep their gradient -r*A/N; the ones that moved "
        "the favourable way beyond the band get 0.",
    },
    "clip_swapped": {
        "loss": "You call np.clip(r, 1 + eps, 1 - eps), with the upper bound first. When its "
        "lower bound is above its upper bound, np.clip returns the upper bound for every "
        "sample, so your clipped term is (1 - eps)*A whatever r is. Write "
        "np.clip(r, 1 - eps, 1 + eps)."
    },
    "sign_blind": {
        "clip_fraction": "You count every sample with |r - 1| > eps as clipped, whatever the "
        "sign of its advantage. (Stable-Baselines3 and CleanRL log that number, but this "
        "contract counts something else.) A sample is clipped only when A > 0 and r > 1 + eps, "
        "or A < 0 and r < 1 - eps: only then does clipping switch its gradient off."
    },
    "zero_advantage": {
        "clip_fraction": "You count a sample with A = 0 as clipped when its ratio is outside "
        "the band: for example A >= 0 where the rule says A > 0, or np.where(A > 0, "
        "r > 1 + eps, r < 1 - eps), which sends A = 0 to the test for A < 0. A sample with "
        "A = 0 is never clipped: its term r*A is 0 whatever r is, so there is no gradient to "
        "switch off."
    },
    "non_strict": {
        "clip_fraction": "You count a sample whose ratio is exactly on the edge (r = 1 + eps "
        "with A > 0, or r = 1 - eps with A < 0) as clipped. The comparisons are strict: "
        "clipped means r > 1 + eps or r < 1 - eps. With eps = 0 this decides every sample with "
        "r == 1 exactly. (Computing in float32 can also push a ratio of 1.2 over the edge: "
        f"{NUMERICS_NOTEBOOK}, section 3.)",
        "grad": "You zero the gradient of a sample whose ratio is exactly on the edge "
        "(r = 1 + eps with A > 0, or r = 1 - eps with A < 0). The comparisons are strict: on "
        "the edge the sample is not clipped and keeps -r*A/N. With eps = 0 this decides every "
        "sample with r == 1 exactly.",
    },
    "grad_on_clipped": {
        "grad": "Your gradient is not 0 on clipped samples. Where the clipped term wins the "
        "min, it is clip(r)*A = (1 ± eps)*A, a constant that does not depend on logp_new, so "
        "its gradient is 0: use np.where(clipped, 0.0, -r*A/N)."
    },
    "minus_A": {
        "grad": "You use -A/N as the gradient of an unclipped sample; it is -r*A/N. The loss "
        "depends on logp_new through r = exp(logp_new - logp_old), and dr/dlogp_new = r (the "
        "derivative of exp is exp). The two agree only where r = 1, as in the first update on "
        "a freshly collected batch."
    },
    "normalized": {"any": _NORMALIZED},
    "nan_overflow": {
        "loss": "You return NaN when a sample has A = 0 and a ratio that overflowed: "
        f"{_NAN}{_NAN_FIX} Such a sample contributes exactly 0.",
        "grad": "Your gradient is NaN for a sample with A = 0 whose ratio overflowed: "
        f"{_NAN}{_NAN_FIX} Its gradient is exactly 0.",
    },
    "ratio_underflow": {
        "clip_fraction": f"You miss clipped samples {_UNDERFLOW}, and NaN > 1 + eps is False. "
        "Compute the ratio from the difference: r = np.exp(logp_new - logp_old).",
        "any": f"You get NaN {_UNDERFLOW}. Compute the ratio from the difference: "
        "r = np.exp(logp_new - logp_old).",
    },
    "mutated": {
        "any": "Your function changes its input arrays. The caller reuses them (PPO runs "
        "several epochs on one batch), so every call must leave them as they were. Write "
        "x = x - y instead of x -= y, or work on a copy (x = np.array(x, dtype=float))."
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
