"""Notebook 7's exercises: GRPO's loss with its mask and aggregation, and GSPO's loss.

:func:`check_grpo_loss` and :func:`check_gspo_loss` run a learner's function on each batch of
the exercise's battery, in the sandbox of notebook 6's checker (:func:`.call_battery`: a copy of
the process, a time limit), compare every answer with :mod:`llm_clip`, and name the mistakes that
explain the answers: the fewest of :data:`MISTAKES` whose variant, computed with llm_clip on
changed inputs, gives every answer.  The result is notebook 6's card (:class:`.CheckResult`).

The learner's functions take, in this order::

    grpo_loss(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)
    gspo_loss(logp_new, logp_old, advantages, mask, eps_low, eps_high)

Every batch holds finite values on its padding (as a model's log-probabilities of pad tokens
are), so a forgotten mask shows in the answer instead of as a NaN.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import llm_clip
from ppo_viz.exercises.checker import CheckResult
from ppo_viz.exercises.mistakes import Finding, error_hint, finding
from ppo_viz.exercises.sandbox import TIME_LIMIT_S, Call, call_battery
from ppo_viz.llm.batch import response_batch
from ppo_viz.numbers import exact, rounded

#: The exercises' mistakes, from the trackers notebook 7 cites: title and what the learner reads.
MISTAKES = {
    "token_mean": (
        "Token-mean instead of sequence-mean",
        "You average over all the batch's tokens; GRPO averages each answer's tokens, "
        "then the answers: loss = -mean_i (1/n_i) sum_t term (TRL's loss_type="
        "'grpo'). Token-mean is DAPO's aggregation, and weights long answers more.",
    ),
    "token_sum": (
        "Summed each answer's tokens",
        "You sum each answer's tokens where GRPO averages them: divide answer i's sum "
        "by its n_i tokens (mask.sum(axis=1)), then take the mean over answers.",
    ),
    "no_mask": (
        "The mask forgotten (padding counted)",
        "Your answer counts the padding: its tokens enter the sums and the counts. "
        "Multiply every per-token term by the mask and count n_i = mask.sum(axis=1).",
    ),
    "no_std": (
        "Group std normalisation missing",
        "You centre each reward on its group's mean but do not divide by the group's std "
        "(that is Dr. GRPO's advantage): A = (R - mean) / (std + 1e-4).",
    ),
    "std_twice": (
        "Group std normalisation doubled",
        "You divide by the group's std + 1e-4 twice: once is GRPO's advantage.",
    ),
    "population_std": (
        "Population std (ddof=0)",
        "np.std divides by G; TRL and verl use the sample std, which divides by "
        "G - 1: np.std(group, ddof=1).",
    ),
    "no_std_eps": (
        "The + 1e-4 forgotten",
        "Divide by std + 1e-4, as TRL does: a group whose rewards tie has std 0, and 0/0 is NaN.",
    ),
    "kl_sign": (
        "The KL sign",
        "The KL term is a penalty: the objective is term - beta * k3, so the loss is "
        "-(term - beta * k3), which adds +beta * k3. Yours subtracts it.",
    ),
    "kl_direction": (
        "k3 of the wrong direction",
        "k3 = exp(d) - d - 1 with d = logp_ref - logp_new (TRL's and GRPO's); you "
        "use d = logp_new - logp_ref.",
    ),
    "sign": (
        "Objective instead of loss (the sign)",
        "Your answer has the opposite sign: the loss to minimize is minus the objective.",
    ),
    "product": (
        "Sequence ratio as a product",
        "You multiply the tokens' ratios, exp(sum of log-ratios), a number that grows "
        "with the answer's length; GSPO's sequence ratio is their geometric mean, "
        "exp(mean of the answer's log-ratios).",
    ),
    "arithmetic": (
        "Arithmetic mean of the ratios",
        "You average the tokens' ratios; GSPO takes the geometric mean, "
        "exp(mean of the log-ratios).",
    ),
    "token_clip": (
        "Token ratios clipped",
        "You clip each token's own ratio (that is GRPO); GSPO clips one ratio per "
        "answer, its sequence ratio s_i, and every token of the answer shares it.",
    ),
    "gspo_token_mean": (
        "Token-mean of a per-answer loss",
        "You average GSPO's per-answer terms over tokens, which weights each "
        "answer by its length (TRL warns of it); GSPO averages over answers.",
    ),
}
#: Mistakes that exclude one another (one way of doing the same step wrong).
EXCLUSIVE = {
    "grpo": [
        ("no_std", "std_twice", "population_std", "no_std_eps"),
        ("token_mean", "token_sum"),
        ("kl_sign", "kl_direction"),
        ("no_mask",),
        ("sign",),
    ],
    "gspo": [
        ("product", "arithmetic", "token_clip"),
        ("gspo_token_mean",),
        ("no_mask",),
        ("sign",),
    ],
}
MAX_MISTAKES = 3
RTOL, ATOL = 1e-9, 1e-12
STD_EPS = 1e-4  # TRL's (``grpo_trainer.py`` L2705-2707)
STD_MISTAKES = frozenset({"no_std", "std_twice", "population_std", "no_std_eps"})


@dataclass(frozen=True, eq=False)
class ExerciseBatch:
    """One batch: three arrays handed to the learner through the sandbox (``inputs``), the
    mask and ``extras`` added by :class:`_Bound`; what notebook 6's sandbox reads of a batch."""

    name: str
    lesson: str
    logp_new: np.ndarray
    logp_old: np.ndarray
    advantages: np.ndarray  # the third argument: rewards (GRPO) or advantages (GSPO)
    mask: np.ndarray
    extras: tuple[Any, ...]
    eps: float = 0.2
    read_only: bool = False
    role: str = "core"
    further: str = ""

    @property
    def n(self) -> int:
        return len(self.mask)

    @property
    def label(self) -> str:
        return f"batch '{self.name}' (B = {self.n}, T = {self.mask.shape[1]})"

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.logp_new.copy(), self.logp_old.copy(), self.advantages.copy()


class _Bound:
    """The learner's function with a batch's mask and extras added to the sandbox's call; its
    ``__code__`` is the learner's, so the sandbox names the learner's line in an error."""

    def __init__(self, function: Callable[..., Any], batch: ExerciseBatch) -> None:
        self.function, self.batch = function, batch

    @property
    def __code__(self) -> Any:
        return getattr(self.function, "__code__", None)

    def __call__(self, logp_new: Any, logp_old: Any, third: Any, _eps: float) -> Any:
        extras = [_read_only(x) if isinstance(x, np.ndarray) else x for x in self.batch.extras]
        return self.function(logp_new, logp_old, third, _read_only(self.batch.mask), *extras)


def _read_only(array: np.ndarray) -> np.ndarray:
    copy = array.copy()
    copy.setflags(write=False)
    return copy


# -- what an implementation with some mistakes answers ----------------------------------------


def group_advantages(rewards: np.ndarray, group_size: int, mistakes: frozenset[str]) -> np.ndarray:
    """GRPO's advantages (llm_clip's), or those of an implementation with ``mistakes``."""
    if not mistakes & STD_MISTAKES:
        return llm_clip.group_advantages(rewards, group_size, std_eps=STD_EPS)
    if "no_std" in mistakes:
        return llm_clip.group_advantages(rewards, group_size, scale_by_std=False)
    groups = rewards.reshape(-1, group_size)
    std = groups.std(axis=1, ddof=0 if "population_std" in mistakes else 1, keepdims=True)
    scale = std if "no_std_eps" in mistakes else std + STD_EPS
    if "std_twice" in mistakes:
        scale = scale**2
    with np.errstate(invalid="ignore"):  # a tie without the + 1e-4: 0 / 0
        return ((groups - groups.mean(axis=1, keepdims=True)) / scale).reshape(-1)


def grpo_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> float:
    """GRPO's loss (llm_clip's) on changed inputs: what an implementation with ``mistakes``
    returns.  No mistakes: ``llm_clip.policy_loss(..., objective="grpo")``."""
    group_size, eps, beta, logp_ref = batch.extras
    m = mistakes
    a = group_advantages(batch.advantages, group_size, m)
    if not np.isfinite(a).all():
        return float("nan")
    mask = np.ones_like(batch.mask) if "no_mask" in m else batch.mask
    aggregation = "seq-mean-token-mean"
    if m & {"token_mean", "token_sum"}:
        aggregation = "token-mean" if "token_mean" in m else "seq-mean-token-sum-norm"
    ref = 2 * batch.logp_new - logp_ref if "kl_direction" in m else logp_ref

    def loss(kl_coef: float) -> float:
        return llm_clip.policy_loss(
            batch.logp_new,
            batch.logp_old,
            a,
            mask,
            objective="grpo",
            eps_low=eps,
            aggregation=aggregation,
            max_len=1,
            logp_ref=ref,
            kl_coef=kl_coef,
        )

    value = 2 * loss(0.0) - loss(beta) if "kl_sign" in m else loss(beta)
    return -value if "sign" in m else value


def gspo_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> float:
    """GSPO's loss (llm_clip's) on changed inputs: what an implementation with ``mistakes``
    returns.  No mistakes: ``llm_clip.policy_loss(..., objective="gspo")``."""
    eps_low, eps_high = batch.extras
    m, old = mistakes, batch.logp_old
    mask = np.ones_like(batch.mask) if "no_mask" in m else batch.mask
    gap = np.where(mask, batch.logp_new - old, 0.0)
    n = mask.sum(axis=1, keepdims=True)
    if "product" in m:  # exp(sum) = the geometric mean of n_i times larger log-ratios
        gap = gap * n
    elif "arithmetic" in m:  # mean(r): the geometric mean of log(mean(r)) on every token
        gap = np.log((np.exp(gap) * mask).sum(axis=1, keepdims=True) / n) * np.ones_like(gap)
    value = llm_clip.policy_loss(
        old + gap,
        old,
        batch.advantages,
        mask,
        objective="grpo" if "token_clip" in m else "gspo",
        eps_low=eps_low,
        eps_high=eps_high,
        aggregation="token-mean" if "gspo_token_mean" in m else "seq-mean-token-mean",
    )
    return -value if "sign" in m else value


ANSWERS = {"grpo": grpo_answer, "gspo": gspo_answer}


def mistake_sets(exercise: str) -> Iterator[frozenset[str]]:
    """Every set of at most :data:`MAX_MISTAKES` mistakes, one per exclusive group, fewest
    first."""
    groups = [("", *group) for group in EXCLUSIVE[exercise]]
    sets = {frozenset(filter(None, choice)) for choice in itertools.product(*groups)}
    yield from sorted(
        (s for s in sets if len(s) <= MAX_MISTAKES), key=lambda s: (len(s), sorted(s))
    )


@cache
def _answer(exercise: str, batch: ExerciseBatch, mistakes: frozenset[str]) -> float:
    return ANSWERS[exercise](batch, mistakes)


def _agrees(got: float, expected: float) -> bool:
    return bool(np.isclose(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True))


# -- the batteries -----------------------------------------------------------------------------


def _junk_padding(values: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """``values`` with padding set to finite log-probabilities, as a model gives pad tokens."""
    junk = np.log(np.random.default_rng(seed).uniform(0.05, 0.9, values.shape))
    return np.where(mask, values, junk)


def _random_batch(
    name: str,
    lesson: str,
    lengths: list[int],
    third: list[float],
    extras: tuple,
    seed: int,
    spread: float = 0.15,
    kl: bool = False,
) -> ExerciseBatch:
    """A batch of answers with ``lengths`` tokens, random log-probabilities, junk padding."""
    rng = np.random.default_rng(seed)
    mask = np.arange(max(lengths) + 1) < np.array(lengths)[:, None]
    old = np.log(rng.uniform(0.05, 0.95, mask.shape))
    new = np.minimum(old + rng.normal(0.0, spread, mask.shape), 0.0)
    if kl:
        ref = np.minimum(old + rng.normal(0.0, 0.3, mask.shape), 0.0)
        extras = (*extras, _junk_padding(ref, mask, seed + 3))
    return ExerciseBatch(
        name,
        lesson,
        _junk_padding(new, mask, seed + 1),
        _junk_padding(old, mask, seed + 2),
        np.array(third, float),
        mask,
        extras,
    )


@cache
def battery(exercise: str) -> tuple[ExerciseBatch, ...]:
    """The batches an exercise's check runs, small ones first."""
    nb = response_batch(4)
    at = 2  # update mu = 3: after two steps, some tokens clipped
    if exercise == "grpo":
        return (
            _random_batch(
                "one group",
                "4 answers of 2 to 5 tokens, one group, no KL",
                [5, 2, 4, 3],
                [1, 0, 0, 1],
                (4, 0.2, 0.0),
                seed=1,
                kl=True,
            ),
            _random_batch(
                "two groups",
                "2 prompts x 3 answers; the groups' stds differ",
                [3, 6, 2, 5, 4, 6],
                [1, 0, 0, 1, 0.5, 0],
                (3, 0.2, 0.0),
                seed=2,
                kl=True,
            ),
            _random_batch(
                "a group that ties",
                "the second group's rewards tie: A = 0, not NaN",
                [4, 2, 3, 3],
                [1, 0, 0.5, 0.5],
                (2, 0.2, 0.0),
                seed=3,
                kl=True,
            ),
            _random_batch(
                "KL to the reference",
                "beta = 0.1: the loss adds beta * k3",
                [6, 3, 5, 2],
                [0, 1, 1, 0],
                (4, 0.2, 0.1),
                seed=4,
                spread=0.3,
                kl=True,
            ),
            ExerciseBatch(
                "notebook 7's batch",
                "the notebook's 12 answers at update 3, beta 0.04",
                nb.logp_new[at],
                nb.logp_old,
                nb.rewards,
                nb.mask,
                (4, 0.2, 0.04, nb.logp_ref),
            ),
        )
    a = nb.advantages()
    return (
        _random_batch(
            "three answers",
            "lengths 5, 2 and 4; eps 0.2",
            [5, 2, 4],
            [1.0, -1.0, 0.5],
            (0.2, 0.2),
            seed=5,
            spread=0.2,
        ),
        _random_batch(
            "the paper's range",
            "eps_low 3e-4, eps_high 4e-4 (GSPO's paper)",
            [3, 6, 2, 5],
            [0.8, -0.4, 1.2, -1.5],
            (3e-4, 4e-4),
            seed=6,
            spread=0.01,
        ),
        _random_batch(
            "long answers",
            "12 to 20 tokens: a product of ratios runs away",
            [20, 12, 16],
            [-1.0, 1.0, 1.0],
            (0.2, 0.3),
            seed=7,
            spread=0.1,
        ),
        ExerciseBatch(
            "notebook 7's batch",
            "the notebook's 12 answers at update 3, eps 0.01",
            nb.logp_new[at],
            nb.logp_old,
            a,
            nb.mask,
            (0.01, 0.01),
        ),
    )


# -- checking ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExerciseResult(CheckResult):
    """Notebook 6's card for one of notebook 7's exercises (its own count of batches)."""

    batches: int = 0

    def headline(self) -> str:
        if not self.implemented:
            return f"{self.exercise}: not implemented yet."
        if self.passed:
            return f"{self.exercise}: passed. It matches llm_clip on all {self.batches} batches."
        return (
            f"{self.exercise}: {len(self.findings)} problem"
            f"{'s' if len(self.findings) > 1 else ''} found (it matches llm_clip on "
            f"{self.matching_core} of {self.batches} batches)."
        )


def check_grpo_loss(
    function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
) -> ExerciseResult:
    """Check ``grpo_loss(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)``."""
    return check("grpo", function, time_limit_s)


def check_gspo_loss(
    function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
) -> ExerciseResult:
    """Check ``gspo_loss(logp_new, logp_old, advantages, mask, eps_low, eps_high)``."""
    return check("gspo", function, time_limit_s)


def check(exercise: str, function: Callable[..., Any], time_limit_s: float) -> ExerciseResult:
    """Run ``function`` on the battery (one sandboxed call per batch; none after a timeout) and
    name its mistakes."""
    name = f"{exercise}_loss"
    batches = battery(exercise)
    if not callable(function):
        text = f"check_{name} expects your function (its name, without parentheses)."
        return ExerciseResult(name, "loss", (finding("error", text),), batches=len(batches))
    calls: list[Call] = []
    for batch in batches:
        calls += call_battery(_Bound(function, batch), "loss", [batch], time_limit_s)
        if calls[-1].timed_out:
            break
    printed = next((c.printed for c in calls if c.printed), "")
    note = f"Your function printed: {printed!r}" if printed else ""
    if all(c.not_implemented for c in calls):
        return ExerciseResult(
            name, "loss", (finding("not_implemented"),), printed=note, batches=len(batches)
        )
    findings, matching = _findings(exercise, calls)
    return ExerciseResult(
        name, "loss", tuple(findings), matching_core=matching, printed=note, batches=len(batches)
    )


def _findings(exercise: str, calls: list[Call]) -> tuple[list[Finding], int]:
    """The problems the calls show (errors, time, type, changed inputs, then the values), and
    how many batches' answers match llm_clip."""
    found = []
    if failed := next((c for c in calls if c.error), None):
        text = f"On {failed.batch.label} your function {failed.error}. {error_hint(failed.error)}"
        found.append(finding("error", text.strip()))
    if late := next((c for c in calls if c.timed_out), None):
        found.append(
            finding(
                "timeout",
                f"On {late.batch.label} your function did not return "
                "within the time limit; the check stopped there.",
            )
        )
    if wrong := next((c for c in calls if isinstance(c.answer, str)), None):
        found.append(finding("wrong_type", f"Your function returned {wrong.answer}."))
    if changed := next((c for c in calls if c.changed), None):
        argument = (
            changed.changed[0]
            if exercise == "gspo"
            else {"advantages": "rewards"}.get(changed.changed[0], changed.changed[0])
        )
        found.append(
            finding("mutated", evidence=f"On {changed.batch.label} it changed {argument}.")
        )
    answers = [(c.batch, float(c.answer[0])) for c in calls if isinstance(c.answer, np.ndarray)]
    matching = sum(_agrees(got, _answer(exercise, b, frozenset())) for b, got in answers)
    if answers and matching < len(answers):
        found += _value_findings(exercise, answers)
    return found, matching


def _value_findings(exercise: str, answers: list[tuple[ExerciseBatch, float]]) -> list[Finding]:
    """The fewest mistakes that explain every answer, each shown on a batch; or a mismatch."""
    for mistakes in mistake_sets(exercise):
        if mistakes and all(_agrees(got, _answer(exercise, b, mistakes)) for b, got in answers):
            return [_shown(exercise, key, mistakes, answers) for key in sorted(mistakes)]
    b, got = next((b, g) for b, g in answers if not _agrees(g, _answer(exercise, b, frozenset())))
    text = (
        "Your answers differ from llm_clip's and match none of the mistakes this checker "
        f"knows. On {b.label} ({b.lesson}) llm_clip gives "
        f"{exact(_answer(exercise, b, frozenset()))}, your function {exact(got)}."
    )
    return [Finding("mismatch", "Differs from the reference", text)]


def _shown(
    exercise: str, key: str, mistakes: frozenset[str], answers: list[tuple[ExerciseBatch, float]]
) -> Finding:
    """Mistake ``key``'s finding, with a batch where leaving it out changes the answer."""
    title, text = MISTAKES[key]
    for b, got in answers:
        without = _answer(exercise, b, mistakes - {key})
        if not _agrees(got, without):
            evidence = (
                f"On {b.label} ({b.lesson}): llm_clip gives "
                f"{rounded(_answer(exercise, b, frozenset()), 6)}, your function "
                f"{rounded(got, 6)}."
            )
            return Finding(key, title, text, evidence)
    return Finding(key, title, text)
