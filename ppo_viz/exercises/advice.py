"""What the learner reads about each mistake: its title and its explanation.

:data:`TITLES` and :data:`EXPLANATIONS` hold notebook 6's value mistakes, in the loss's words,
and those every check shares (an error, a timeout, a wrong type, changed inputs, rebound modules,
imprecision); :data:`IN_EXERCISE` holds the words of the clip fraction's and the gradient's where
their code shows a mistake differently.  Notebook 7 to 9's exercises keep their own value
mistakes' texts in their modules (:mod:`.llm`, :mod:`.gae`, :mod:`.rollout`), registered in
:data:`EXERCISES`, and advise on float32 with :func:`float32_like`; :func:`words` picks a
finding's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ppo_viz.exercises.battery import NUMERICS_NOTEBOOK

#: Every mistake's title (an exercise of :data:`EXERCISES` may give its own).
TITLES = {
    "not_implemented": "Not implemented yet",
    "not_a_function": "Not a function",
    "error": "Your function raised an error",
    "timeout": "Your function did not return in time",
    "wrong_type": "Wrong return type or shape",
    "patched_module": "Rebound names in ppo_clip, llm_clip or numpy",
    "sign": "Objective instead of loss (the sign)",
    "no_mean": "Forgot the 1/N",
    "ratio_inverted": "Ratio inverted (old over new)",
    "no_exp": "Log-ratio used as the ratio (the exp is missing)",
    "fixed_eps": "eps ignored (0.2 written in)",
    "unclipped": "The unclipped objective r*A",
    "clip_only": "The clip-only objective (np.clip without the min)",
    "max_for_min": "The wrong side clipped (max instead of min)",
    "min_of_ratios": "The minimum of the ratios, not of the terms",
    "no_negative_branch": "Forgot the A < 0 branch",
    "upper_sign_blind": "Clipped above the band whatever A's sign",
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
    "precision": "Close, but not to float64 precision",
    "mismatch": "Differs from the reference",
}
_CLIPPED = "A > 0 with r > 1 + eps, or A < 0 with r < 1 - eps"
_UNFAVOURABLE = "A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps"
_NEW_OVER_OLD = "the ratio is new over old: r = np.exp(logp_new - logp_old)"

#: What every checker's "precision" finding advises: float32 is the usual cause.
FLOAT64_ADVICE = (
    "Compute in float64 throughout (float32 arrays, np.float32 or dtype=np.float32 keep about 7 "
    "significant digits of each number, and fewer survive where terms cancel)"
)

_COMPARED = (
    "The checker compares with float64's precision, np.isclose with rtol = 1e-9 and atol = "
    f"1e-12. {FLOAT64_ADVICE}"
)


def float32_like(agreeing: str) -> str:
    """A checker's "precision" explanation: ``agreeing`` ("Your loss agrees with llm_clip's")
    as closely as float32 can, and the advice."""
    return f"{agreeing} as closely as float32 arithmetic can, not to float64's. {FLOAT64_ADVICE}."


#: What the learner reads about each mistake.  Checked against cleanrl/ppo.py @020cf0e
#: (norm_adv), stable_baselines3/ppo/ppo.py @cef4cf2 (normalize_advantage) and
#: spinup/algos/pytorch/ppo/ppo.py @2092113 (the buffer's get()).
EXPLANATIONS = {
    "not_a_function": "This check expects your function: the name after def, without "
    "parentheses (check(loss), not check(loss()) or check('loss')).",
    "not_implemented": "Your function still raises NotImplementedError (the template's line) or "
    "its body is empty: replace that line with your code, run the cell, then run this check "
    "again.",
    "patched_module": "Your function rebinds names in ppo_clip, llm_clip or numpy. The verdict "
    "and your notebook are safe (the checker keeps its own reference and ran your function in a "
    "copy of the process), but a loss function should not change other modules: remove those "
    "lines.",
    "sign": "Your answer has the opposite sign: the loss to minimize is minus the mean of "
    "min(r*A, clip(r)*A), the objective PPO maximizes, and an unclipped sample's gradient is "
    "-r*A/N.",
    "no_mean": "You sum the terms over the batch where the loss averages them: np.mean, not "
    "np.sum.",
    "ratio_inverted": f"You compute exp(logp_old - logp_new), pi_old / pi_new; {_NEW_OVER_OLD}.",
    "no_exp": f"You use the log-ratio logp_new - logp_old as the ratio; {_NEW_OVER_OLD}, 1 where "
    "nothing changed, the centre of the band [1 - eps, 1 + eps].",
    "fixed_eps": "Your answer is right with eps = 0.2 and wrong with other values: use the "
    "function's eps argument, 1 - eps and 1 + eps, not the numbers 0.8 and 1.2.",
    "unclipped": f"You ignore clipping: a clipped sample ({_CLIPPED}) keeps the constant "
    "clip(r)*A, whose gradient is 0: np.minimum(r * A, np.clip(r, 1 - eps, 1 + eps) * A).",
    "clip_only": "You keep clip(r)*A alone, without the np.minimum: a sample that moved the "
    f"unfavourable way ({_UNFAVOURABLE}) keeps r*A, whose gradient -r*A/N pulls it back.",
    "max_for_min": "You keep the larger of r*A and clip(r)*A, which clips the moves the "
    f"unfavourable way ({_UNFAVOURABLE}); PPO keeps the smaller (np.minimum, or "
    f"max(-A*r, -A*clip(r)) in PyTorch style), which clips the favourable ones: {_CLIPPED}.",
    "min_of_ratios": "You take the minimum of the ratios, np.minimum(r, np.clip(r, 1 - eps, 1 + "
    "eps)) * A. The minimum is of the two terms, np.minimum(r * A, np.clip(r, 1 - eps, 1 + eps) "
    "* A): multiplying by A < 0 flips which is smaller, so for A < 0 your version clips the "
    "moves above the band, which PPO keeps, and keeps those below it, which PPO clips.",
    "no_negative_branch": "You clip only samples with A > 0 above the band. A sample with A < 0 "
    "below it, r < 1 - eps, moved the favourable way too and is clipped: PPO clips "
    f"{_CLIPPED}. np.minimum(r * A, np.clip(r, 1 - eps, 1 + eps) * A) covers both branches.",
    "upper_sign_blind": "You treat every sample above the band, r > 1 + eps, as clipped, "
    "whatever the sign of A; with A < 0 that ratio moved the unfavourable way, and PPO keeps its "
    f"term r*A and its gradient -r*A/N, which pulls it back (clipped means {_CLIPPED}).",
    "clip_swapped": "You call np.clip(r, 1 + eps, 1 - eps), which returns its upper bound, 1 - "
    "eps, for every sample; the lower bound comes first: np.clip(r, 1 - eps, 1 + eps).",
    "sign_blind": "You count every sample with |r - 1| > eps (as Stable-Baselines3 and CleanRL "
    f"log it); this contract counts only those whose gradient clipping switches off: {_CLIPPED}.",
    "zero_advantage": "You count a sample with A = 0 outside the band as clipped (with A >= 0, "
    "or np.where(A > 0, r > 1 + eps, r < 1 - eps)); its term r*A is 0 whatever r is, so there is "
    "no gradient to switch off.",
    "non_strict": "You treat a sample exactly on the edge (r = 1 + eps with A > 0, r = 1 - eps "
    "with A < 0) as clipped; the comparisons are strict, r > 1 + eps, which with eps = 0 decides "
    f"every sample with r == 1 (float32 can also push 1.2 over the edge: {NUMERICS_NOTEBOOK}, "
    "section 3).",
    "grad_on_clipped": "Your gradient is not 0 on clipped samples, whose term is the constant "
    "clip(r)*A = (1 ± eps)*A: np.where(clipped, 0.0, -r * A / N).",
    "minus_A": "You use -A/N where the gradient is -r*A/N: dr/dlogp_new = r, the derivative of "
    "exp. They agree only where r = 1, as in the first update on a freshly collected batch.",
    "normalized": "You normalize the advantages; PPO codes do that before the loss (CleanRL's "
    "norm_adv and Stable-Baselines3's normalize_advantage per minibatch, Spinning Up once per "
    "batch), and here it shifts them, flips signs and changes which samples are clipped.",
    "nan_overflow": "r = exp(1000) is inf in float64 and inf * 0 is NaN, so a sample with A = 0 "
    "and an overflowing ratio makes your answer NaN: multiply only where A != 0, "
    "np.multiply(r, A, out=np.zeros_like(r), where=A != 0).",
    "ratio_underflow": "exp(logp_new) / exp(logp_old) is 0/0 = NaN when both log-probabilities "
    "are near -1000 (normal for whole sequences in RLHF); compute the ratio from the "
    "difference: r = np.exp(logp_new - logp_old).",
    "mutated": "Your function changes its input arrays, which the caller reuses (PPO runs "
    "several epochs on one batch): write x = x - y, not x -= y, or work on a copy.",
    "precision": f"{_COMPARED}.",
}

#: A mistake's title and explanation where the clip fraction's or the gradient's code shows it
#: differently from the loss's, by (key, kind).
IN_EXERCISE = {
    ("no_mean", "clip_fraction"): (
        "Counted the clipped samples, not their fraction",
        "You return how many samples are clipped where the contract asks for their fraction: "
        "np.mean(clipped), not np.sum or np.count_nonzero.",
    ),
    ("no_mean", "grad"): (
        TITLES["no_mean"],
        "Your entries lack the 1/N: the loss is a mean over the batch, so a sample's gradient is "
        "-r*A/N, not -r*A.",
    ),
    ("unclipped", "grad"): (
        "No entry zeroed (the unclipped objective's gradient)",
        f"Your gradient is -r*A/N on every sample, the gradient of r*A alone; a clipped sample "
        f"({_CLIPPED}) keeps the constant clip(r)*A, whose gradient is 0: np.where(clipped, "
        "0.0, -r * A / N).",
    ),
    ("clip_only", "grad"): (
        "Zeroed every sample outside the band (the clip-only objective's gradient)",
        "You zero the gradient wherever r is outside the band, whatever A's sign, as clip(r)*A "
        f"alone would; a sample that moved the unfavourable way ({_UNFAVOURABLE}) keeps r*A in "
        "PPO's loss, and its gradient -r*A/N pulls it back.",
    ),
    ("max_for_min", "clip_fraction"): (
        "Counted the unfavourable moves (TRL 0.16's clip_ratio)",
        "You count the samples where r*A < clip(r)*A, those that moved the unfavourable way "
        f"({_UNFAVOURABLE}), as TRL 0.16 logged its clip_ratio (notebook 2, Two clip "
        f"fractions). PPO clips the others, where clip(r)*A < r*A: {_CLIPPED}.",
    ),
    ("max_for_min", "grad"): (
        "Zeroed the wrong side (max instead of min)",
        "You zero the gradient of the samples that moved the unfavourable way "
        f"({_UNFAVOURABLE}), which np.maximum of the terms would clip; PPO's np.minimum keeps "
        f"their -r*A/N and clips the favourable moves: {_CLIPPED}.",
    ),
    ("min_of_ratios", "clip_fraction"): (
        "Counted only r > 1 + eps as clipped",
        "You count the samples above the band, r > 1 + eps, whatever A's sign, and none below "
        "it (what np.minimum(r, np.clip(r, 1 - eps, 1 + eps)) clips); with A < 0 a sample above "
        f"the band moved the unfavourable way and one below it the favourable way: {_CLIPPED}.",
    ),
    ("min_of_ratios", "grad"): (
        "Zeroed the gradient only where r > 1 + eps",
        "You zero the gradient wherever r > 1 + eps, whatever A's sign, and nowhere below the "
        "band (the gradient of np.minimum(r, np.clip(r, 1 - eps, 1 + eps)) * A); with A < 0 a "
        "sample above the band moved the unfavourable way and keeps -r*A/N, one below it the "
        f"favourable way and gets 0: PPO zeroes {_CLIPPED}.",
    ),
    ("no_negative_branch", "clip_fraction"): (
        TITLES["no_negative_branch"],
        "You count only samples with A > 0 above the band. A sample with A < 0 below it, r < 1 - "
        f"eps, moved the favourable way too and is clipped: count {_CLIPPED}.",
    ),
    ("no_negative_branch", "grad"): (
        TITLES["no_negative_branch"],
        "You zero the gradient only of samples with A > 0 above the band. A sample with A < 0 "
        "below it, r < 1 - eps, moved the favourable way too and is clipped, its gradient 0: "
        f"zero {_CLIPPED}.",
    ),
    ("precision", "grad"): (
        TITLES["precision"],
        f"{_COMPARED}, and compute the gradient from its formula, -r*A/N, not by finite "
        "differences (which also average the two slopes at an edge).",
    ),
}


class Exercise(NamedTuple):
    """An exercise whose answers another module computes (notebook 7's, registered by
    :mod:`.llm`; notebook 8's, by :mod:`.gae`; notebook 9's, by :mod:`.rollout`): its mistakes'
    titles where they are not :data:`TITLES`' and explanations (by key), its mistakes in groups
    that exclude one another, and what an implementation with some mistakes answers on a batch
    (an array, a float, or a list of the forms it may take)."""

    titles: Mapping[str, str]
    explanations: Mapping[str, str]
    groups: Sequence[tuple[str, ...]]
    answer: Callable[[Any, frozenset[str]], Any]


#: The exercises whose value mistakes :mod:`.mistakes`' ``VALUE_MISTAKES`` does not list, by kind.
EXERCISES: dict[str, Exercise] = {}


def words(key: str, kind: str = "") -> tuple[str, str]:
    """Mistake ``key``'s title and explanation as exercise ``kind`` (``"loss"``,
    ``"clip_fraction"``, ``"grad"`` or one of :data:`EXERCISES`) shows it ("" for a finding that
    brings its own)."""
    if (own := EXERCISES.get(kind)) is not None:
        return own.titles.get(key) or TITLES[key], own.explanations.get(key, "")
    return IN_EXERCISE.get((key, kind), (TITLES[key], EXPLANATIONS.get(key, "")))
