"""Notebook 7's exercises: GRPO's loss with its mask and aggregation, and GSPO's loss.

:func:`check_grpo_loss` and :func:`check_gspo_loss` are notebook 6's check (:func:`.run_check`)
on this module's :func:`battery`: the learner's function runs in notebook 6's sandbox (a copy of
the process, a time limit), every answer is compared with :mod:`llm_clip`, and the checker's
search (:func:`.value_findings`) names the fewest mistakes (:data:`EXPLANATIONS`) explaining
every answer: each mistake's answer is llm_clip's on changed inputs (advantages without the std,
a mask of ones, ...), registered in :data:`.EXERCISES`.  The result is notebook 6's card
(:class:`.CheckResult`).  The learner's functions take, in this order::

    grpo_loss(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)
    gspo_loss(logp_new, logp_old, advantages, mask, eps_low, eps_high)

Every batch holds finite values on its padding (as a model's log-probabilities of pad tokens
are), so a forgotten mask shows in the answer rather than as a NaN; GRPO's "extreme padding"
(logp_new 0, logp_old -1000 there) catches a mask applied after the exp.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from ppo_clip_inputs import checked_choice
from ppo_viz.exercises.advice import EXERCISES, Exercise, float32_like
from ppo_viz.exercises.battery import ExerciseBatch, in_float32, llm_reference
from ppo_viz.exercises.checker import CheckResult, run_check
from ppo_viz.exercises.sandbox import TIME_LIMIT_S, Function
from ppo_viz.llm.batch import response_batch

_MEAN = "GRPO averages each answer's tokens, then the answers: -mean_i (1/n_i) sum_t term"
_KL = "k3 = exp(d) - d - 1 with d = logp_ref - logp_new (TRL 1.16 by default multiplies it by r)"
_MIN = "np.minimum(r * A, np.clip(r, 1 - eps_low, 1 + eps_high) * A)"
#: GRPO's KL mistakes, which exclude one another.
_KL_MISTAKES = ("kl_sign", "kl_direction", "no_kl", "kl_estimator", "kl_times_ratio")
#: Every mistake these checks name: its title (unless :data:`.advice.TITLES` has it) and what the
#: learner reads (from the trackers notebook 7 cites).
TITLES = {
    "token_mean": "Token-mean instead of sequence-mean",
    "token_sum": "Summed over tokens without the 1/n_i",
    "no_mask": "The mask forgotten (padding counted)",
    "no_std": "Group std normalisation missing",
    "std_twice": "Group std normalisation doubled",
    "std_eps": "1e-6 added to the std, not 1e-4",
    "population_std": "Population std (ddof=0)",
    "no_kl": "The KL term left out",
    "kl_sign": "The KL sign",
    "kl_direction": "k3 of the wrong direction",
    "kl_estimator": "k1 or k2 where k3 is meant",
    "kl_times_ratio": "k3 weighted by the ratio (TRL 1.16's default)",
    "product": "Sequence ratio as a product",
    "token_clip": "Token ratios clipped",
    "arithmetic_mean": "Sequence ratio as the arithmetic mean",
    "max_for_min": "np.maximum where np.minimum is meant",
    "bounds_swapped": "eps_low and eps_high swapped",
    "over_T": "Divided by T, the padded length (np.mean over the padding)",
    "batch_std": "Normalised over the whole batch, not each group",
    "padding_nan": "NaN from the padding (term * mask after the exp)",
}
#: What the learner reads about each mistake.
EXPLANATIONS = {
    "token_mean": f"You average over all the batch's tokens, which weighs long answers more "
    f"(DAPO's aggregation); {_MEAN}.",
    "token_sum": f"You sum each answer's tokens without dividing by its length n_i, so long "
    f"answers weigh more; {_MEAN}, n_i = mask.sum(axis=1).",
    "no_mask": "Your answer counts the padding. Multiply each token's term by the mask and count "
    "n_i = mask.sum(axis=1).",
    "no_std": "You centre each reward on its group's mean but do not divide by the group's std + "
    "1e-4 (that is Dr. GRPO's advantage).",
    "std_twice": "You divide by the group's std + 1e-4 twice; GRPO divides once.",
    "std_eps": "You add 1e-6 to the group's std (verl's epsilon); the exercise, as TRL, adds 1e-4: "
    "A = (R - mean) / (std + 1e-4), which differs wherever a group's std is small.",
    "population_std": "np.std divides by G; TRL and verl take the sample std, which divides by G - "
    "1: np.std(group, ddof=1).",
    "no_kl": f"Your answer is right with beta = 0 and wrong with beta > 0: each token's term is "
    f"min(r*A, clip(r)*A) - beta * k3, {_KL}.",
    "kl_sign": "The KL is a penalty: the objective is term - beta * k3, so the loss adds + beta * "
    "k3. Yours subtracts it.",
    "kl_direction": f"{_KL}; yours has d = logp_new - logp_ref.",
    "kl_estimator": f"You penalise with k1 = -d or k2 = d**2 / 2; GRPO's penalty is {_KL}, which "
    "is never negative and usually of lower variance than k1.",
    "kl_times_ratio": "You multiply k3 by the ratio r, as TRL 1.16 does by default "
    "(use_bias_correction_kl); this exercise's GRPO, as its paper, takes k3 alone.",
    "sign": "Your answer has the opposite sign: the loss to minimize is minus the objective.",
    "product": "You multiply the tokens' ratios, which runs away with the length; GSPO's s_i is "
    "their geometric mean, exp(mean log-ratio).",
    "token_clip": "You clip each token's own ratio, which is GRPO; GSPO clips one ratio per "
    "answer, s_i, shared by all its tokens.",
    "arithmetic_mean": "You average the tokens' ratios, mean_t exp(d_t); GSPO's s_i is their "
    "geometric mean, exp(mean_t d_t) over the answer's n_i tokens, which one token's outlier ratio "
    "does not dominate.",
    "ratio_inverted": "You compute exp(logp_old - logp_new), pi_old / pi_new; the ratio is new "
    "over old: exp(logp_new - logp_old).",
    "clip_only": f"You keep clip(r)*A alone, without the np.minimum: a ratio that moved the "
    f"unfavourable way keeps r*A, {_MIN}.",
    "max_for_min": f"You keep the larger of r*A and clip(r)*A, which clips the unfavourable moves "
    f"and lets the favourable ones run; the objective keeps the smaller: {_MIN}.",
    "bounds_swapped": "You clip to [1 - eps_high, 1 + eps_low]; the band is np.clip(s, 1 - "
    "eps_low, 1 + eps_high): eps_high widens it above 1, where A > 0 pushes.",
    "over_T": "You divide each answer's sum by T, the padded length (np.mean(..., axis=1) over a "
    "padded row does), so short answers count less; divide by its own n_i = mask.sum(axis=1).",
    "batch_std": "You centre and scale the rewards with the whole batch's mean and std; GRPO "
    "compares each answer with its own group's G answers: rewards.reshape(-1, G), then the mean "
    "and std along axis=1.",
    "fixed_eps": "Your answer is right with eps = 0.2 and wrong with other values: use the "
    "function's eps argument, not the number 0.2.",
    "padding_nan": "Padding may hold any finite log-probabilities (here logp_new 0 and logp_old "
    "-1000), and exp(1000) is inf; inf * 0 is NaN, so multiplying term by the mask afterwards does "
    "not clean it. Mask before the exp: np.exp(np.where(mask, logp_new - logp_old, 0.0)), or keep "
    "the padding out with np.where(mask, term, 0.0).",
    "precision": float32_like("Your loss agrees with llm_clip's"),
}
#: Each exercise's mistakes, in groups of those that exclude one another.
EXCLUSIVE = {
    "grpo": [
        ("no_std", "std_twice", "population_std", "std_eps"),
        ("batch_std",),
        ("token_mean", "over_T", "token_sum"),
        ("no_mask", "padding_nan"),
        _KL_MISTAKES,
        ("ratio_inverted", "clip_only", "max_for_min"),
        ("fixed_eps",),
        ("sign",),
    ],
    "gspo": [
        ("product", "token_clip", "arithmetic_mean", "over_T", "token_sum"),
        ("ratio_inverted", "clip_only", "max_for_min"),
        ("bounds_swapped",),
        ("no_mask",),
        ("sign",),
    ],
}
STD_EPS = 1e-4  # TRL's (``grpo_trainer.py`` L2705-2707); verl's is 1e-6


# -- what an implementation with some mistakes answers -------------------------------------------


def grpo_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> list[float]:
    """llm_clip's GRPO loss on the inputs an implementation with ``mistakes`` uses (two
    answers for ``kl_estimator``: k1's and k2's)."""
    (new, old, rewards), m = batch.arrays.values(), mistakes
    mask, group_size, eps, beta, ref = batch.extras
    g = len(rewards) if "batch_std" in m else group_size
    a = llm_reference.group_advantages(rewards, g, scale_by_std="no_std" not in m)
    if m & {"std_twice", "population_std", "std_eps"}:
        std = rewards.reshape(-1, g).std(axis=1, ddof=0 if "population_std" in m else 1)
        centred = llm_reference.group_advantages(rewards, g, scale_by_std=False)
        std = np.repeat(std + (1e-6 if "std_eps" in m else STD_EPS), g)
        a = centred / std ** (2 if "std_twice" in m else 1)
    eps = 0.2 if "fixed_eps" in m else eps
    aggregation = next((AGGREGATIONS[k] for k in AGGREGATIONS if k in m), None)
    mask = np.ones_like(mask) if "no_mask" in m else mask
    gap = _changed_gap(new - old, m, eps, eps)
    options = dict(objective="grpo", eps_low=eps, aggregation=aggregation, max_len=mask.shape[1])
    if "padding_nan" in m and _padding_overflows(new - old, mask, a):
        return [math.nan]
    scale = (-1 if "sign" in m else 1) * (mask.shape[1] if "token_sum" in m else 1)
    if not m & {*_KL_MISTAKES, "max_for_min"}:
        kl = dict(logp_ref=ref, kl_coef=beta)  # the KL keeps logp_new
        return [scale * llm_reference.policy_loss(new, new - gap, a, mask, **options, **kl)]
    d, flip = ref - new, -1 if "max_for_min" in m else 1  # max(x, y) = -min(-x, -y)
    b = llm_reference.token_breakdown(new, new - gap, flip * a, mask, **options)
    penalties = {"kl_direction": [np.expm1(-d) + d], "no_kl": [0 * d]}
    penalties["kl_estimator"] = [-d, d**2 / 2]
    if "kl_times_ratio" in m:  # TRL 1.16's use_bias_correction_kl, r before the clip
        with np.errstate(over="ignore", invalid="ignore"):  # a ratio past float64: no match
            r = np.exp(np.where(mask, new - old, 0.0))
            penalties["kl_times_ratio"] = [r * (np.expm1(d) - d)]
    k = next((penalties[key] for key in penalties if key in m), [np.expm1(d) - d])
    sign = -1 if "kl_sign" in m else 1  # each penalty weighted as the loss weighs its tokens
    kl_terms = [float((b.weight * np.where(b.mask, x, 0.0)).sum()) for x in k]
    return [scale * (flip * b.loss + sign * beta * term) for term in kl_terms]


def gspo_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> float:
    """llm_clip's GSPO loss on the inputs an implementation with ``mistakes`` uses: a product
    of ratios is the geometric mean of n_i times larger log-ratios; clipping each token's ratio
    is GRPO; the max is minus the min with -A."""
    (new, old, a), (mask, low, high), m = batch.arrays.values(), batch.extras, mistakes
    mask = np.ones_like(mask) if "no_mask" in m else mask
    gap, n = new - old, mask.sum(axis=1, keepdims=True)
    if m & {"product", "over_T"}:  # the sum of the log-ratios, over 1 or T instead of n_i
        gap = gap * n / (mask.shape[1] if "over_T" in m else 1)
    if "arithmetic_mean" in m:  # every token gets log(mean_t r_t)
        r = np.exp(np.where(mask, gap, -np.inf))
        gap = np.broadcast_to(np.log(r.sum(axis=1, keepdims=True) / n), gap.shape)
    low, high = (high, low) if "bounds_swapped" in m else (low, high)
    if m & {"ratio_inverted", "clip_only"}:  # on s_i, shared by its tokens
        s = np.exp(np.where(mask, gap, 0.0).sum(axis=1, keepdims=True) / n)
        gap = _changed_gap(np.broadcast_to(np.log(s), gap.shape), m, low, high)
    options = dict(objective="grpo" if "token_clip" in m else "gspo", eps_low=low, eps_high=high)
    if "token_sum" in m:  # each answer's term on each of its tokens, summed
        options.update(aggregation="seq-mean-token-sum-norm", max_len=mask.shape[1])
    flip = -1 if "max_for_min" in m else 1
    value = flip * llm_reference.policy_loss(old + gap, old, flip * a, mask, **options)
    return (-1 if "sign" in m else 1) * (mask.shape[1] if "token_sum" in m else 1) * value


#: The aggregations some mistakes use instead of GRPO's own.
AGGREGATIONS = {
    "token_mean": "token-mean",
    "over_T": "seq-mean-token-sum-norm",
    "token_sum": "seq-mean-token-sum-norm",
}


def _changed_gap(gap: np.ndarray, m: frozenset[str], low: float, high: float) -> np.ndarray:
    """The log-ratio ``gap`` inverted or clipped, as ``m`` says: r' = 1/r, or r' = clip(r),
    whose min(r'*A, clip(r')*A) is clip(r)*A whatever A's sign."""
    if "ratio_inverted" in m:
        gap = -gap
    if "clip_only" in m:
        gap = np.clip(gap, np.log1p(-low), np.log1p(high))
    return gap


def _padding_overflows(gap: np.ndarray, mask: np.ndarray, a: np.ndarray) -> bool:
    """Whether ``term * mask`` is NaN: a padding ratio exp(d) overflows where A <= 0 (its term
    -inf or inf * 0)."""
    d = np.where(mask, -np.inf, gap)
    return bool(np.any((d > np.log(np.finfo(float).max)) & (a[:, None] <= 0)))


EXERCISES.update(
    grpo=Exercise(TITLES, EXPLANATIONS, EXCLUSIVE["grpo"], grpo_answer),
    gspo=Exercise(TITLES, EXPLANATIONS, EXCLUSIVE["gspo"], gspo_answer),
)


# -- the batteries -------------------------------------------------------------------------------


#: Each exercise's small batches, by name: the answers' lengths, the third argument (rewards for
#: GRPO, advantages for GSPO), the other arguments, the seed and the spread of the log-ratios;
#: optionally the log-probabilities (new, old) on the padding, else finite junk.
SMALL_BATCHES = {
    "grpo": {
        "one group": ([5, 2, 4, 3], [1, 0, 0, 1], (4, 0.2, 0.0), 1, 0.15),
        "two groups": ([3, 6, 2, 5, 4, 6], [1, 0, 0, 1, 0.5, 0], (3, 0.2, 0.0), 2, 0.15),
        "KL to the reference": ([6, 3, 5, 2], [0, 1, 1, 0], (4, 0.2, 0.1), 4, 0.3),
        "a narrow band": ([4, 6, 3, 5], [0, 1, 0.5, 1], (4, 0.05, 0.0), 7, 0.2),
        "a wide band": ([2, 5, 3, 4, 6, 2], [1, 0, 1, 0, 0, 1], (3, 0.4, 0.0), 8, 0.6),
        "extreme padding": ([4, 2, 5, 3], [1, 0, 0, 1], (4, 0.2, 0.0), 9, 0.2, (0.0, -1000.0)),
    },
    "gspo": {
        "three answers": ([5, 2, 4], [1.0, -1.0, 0.5], (0.2, 0.2), 5, 0.2),
        "an uneven band": ([4, 3, 6, 2], [1.0, -0.8, 0.6, -1.2], (0.1, 0.3), 3, 0.3),
        "the paper's range": ([3, 6, 2, 5], [0.8, -0.4, 1.2, -1.5], (3e-4, 4e-4), 6, 0.01),
    },
}
#: The names of each exercise's arrays, handed to the learner's function first.
ARRAYS = {
    "grpo": ("logp_new", "logp_old", "rewards"),
    "gspo": ("logp_new", "logp_old", "advantages"),
}


def _batch(exercise: str, name: str, lesson: str, *arrays: Any, extras: tuple[Any, ...]) -> Any:
    """An :class:`.ExerciseBatch` of ``exercise`` (its mask the first of the ``extras``)."""
    named = dict(zip(ARRAYS[exercise], map(np.asarray, arrays), strict=True))
    return ExerciseBatch(name, lesson, named, extras)


def _small_batch(exercise: str, name: str) -> ExerciseBatch:
    """Batch ``name`` of :data:`SMALL_BATCHES`: answers of its lengths with seeded
    log-probabilities, finite junk on padding (a GRPO batch's other arguments get a reference's
    log-probabilities appended)."""
    lengths, third, extras, seed, spread, *padding = SMALL_BATCHES[exercise][name]
    rng = np.random.default_rng(seed)
    mask = np.arange(max(lengths) + 1) < np.array(lengths)[:, None]
    old = np.log(rng.uniform(0.05, 0.95, mask.shape))
    new = np.minimum(old + rng.normal(0.0, spread, mask.shape), 0.0)
    lesson = f"answers of {', '.join(map(str, lengths))} tokens"
    if exercise == "grpo":
        lesson += f", eps {extras[1]}" if extras[1] != 0.2 else ""
        extras = (*extras, np.minimum(old + rng.normal(0.0, 0.3, mask.shape), 0.0))
    elif extras[0] != extras[1]:
        lesson += f", eps_low {extras[0]:g}, eps_high {extras[1]:g}"
    if padding:
        new[~mask], old[~mask] = padding[0]
        lesson += f"; on the padding logp_new = {padding[0][0]:g}, logp_old = {padding[0][1]:g}"
    return _batch(exercise, name, lesson, new, old, np.array(third, float), extras=(mask, *extras))


def _notebook_batch(exercise: str) -> ExerciseBatch:
    """Notebook 7's batch at update 3: GRPO's rewards with a KL term, or GSPO's advantages."""
    nb = response_batch(4)
    if exercise == "grpo":
        lesson, third, extras = "G = 4, beta = 0.04", nb.rewards, (4, 0.2, 0.04, nb.logp_ref)
    else:
        lesson, third, extras = "eps 0.01", nb.advantages(), (0.01, 0.01)
    arrays = (nb.logp_new[2], nb.logp_old, third)
    return _batch(exercise, "notebook 7's batch", lesson, *arrays, extras=(nb.mask, *extras))


@cache
def battery(exercise: str) -> tuple[ExerciseBatch, ...]:
    """The batches a check runs: small ones, the first again rounded to float32, then notebook
    7's batch at update 3."""
    checked_choice("exercise", exercise, tuple(SMALL_BATCHES))
    small = [_small_batch(exercise, name) for name in SMALL_BATCHES[exercise]]
    return (*small, in_float32(small[0]), _notebook_batch(exercise))


# -- checking ------------------------------------------------------------------------------------


def check_grpo_loss(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check ``grpo_loss(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)``."""
    return run_check("grpo_loss", "grpo", function, battery("grpo"), time_limit_s, "llm_clip")


def check_gspo_loss(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check ``gspo_loss(logp_new, logp_old, advantages, mask, eps_low, eps_high)``."""
    return run_check("gspo_loss", "gspo", function, battery("gspo"), time_limit_s, "llm_clip")
