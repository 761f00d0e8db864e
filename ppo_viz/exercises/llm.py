"""Notebook 7's exercises: GRPO's loss with its mask and aggregation, and GSPO's loss.

:func:`check_grpo_loss` and :func:`check_gspo_loss` run a learner's function on each batch of
:func:`battery` in notebook 6's sandbox (:func:`.call_battery`: a copy of the process, a time
limit), compare every answer with :mod:`llm_clip`, and name the fewest :data:`MISTAKES` that
explain every answer: each mistake's answer is llm_clip's on changed inputs (advantages without
the std, a mask of ones, ...).  The result is notebook 6's card (:class:`.CheckResult`).  The
learner's functions take, in this order::

    grpo_loss(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)
    gspo_loss(logp_new, logp_old, advantages, mask, eps_low, eps_high)

Every batch holds finite values on its padding (as a model's log-probabilities of pad tokens
are), so a forgotten mask shows in the answer rather than as a NaN.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import llm_clip
from ppo_viz.exercises.checker import CheckResult, error_hint
from ppo_viz.exercises.mistakes import Finding, finding
from ppo_viz.exercises.sandbox import TIME_LIMIT_S, Call, call_battery
from ppo_viz.llm.batch import response_batch
from ppo_viz.numbers import exact, rounded

_MEAN = "GRPO averages each answer's tokens, then the answers: -mean_i (1/n_i) sum_t term"
#: Each mistake's title and what the learner reads (from the trackers notebook 7 cites).
MISTAKES = {
    "token_mean": ("Token-mean instead of sequence-mean", f"You average over all the batch's "
                   f"tokens, which weighs long answers more (DAPO's aggregation); {_MEAN}."),
    "no_mask": ("The mask forgotten (padding counted)", "Your answer counts the padding. "
                "Multiply each token's term by the mask and count n_i = mask.sum(axis=1)."),
    "no_std": ("Group std normalisation missing", "You centre each reward on its group's mean "
               "but do not divide by the group's std + 1e-4 (that is Dr. GRPO's advantage)."),
    "std_twice": ("Group std normalisation doubled",
                  "You divide by the group's std + 1e-4 twice; GRPO divides once."),
    "population_std": ("Population std (ddof=0)", "np.std divides by G; TRL and verl take the "
                       "sample std, which divides by G - 1: np.std(group, ddof=1)."),
    "kl_sign": ("The KL sign", "The KL is a penalty: the objective is term - beta * k3, so the "
                "loss adds + beta * k3. Yours subtracts it."),
    "kl_direction": ("k3 of the wrong direction", "k3 = exp(d) - d - 1 with d = logp_ref - "
                     "logp_new (TRL's, GRPO's); yours has d = logp_new - logp_ref."),
    "sign": ("Objective instead of loss (the sign)",
             "Your answer has the opposite sign: the loss to minimize is minus the objective."),
    "product": ("Sequence ratio as a product", "You multiply the tokens' ratios, which runs away "
                "with the length; GSPO's s_i is their geometric mean, exp(mean log-ratio)."),
    "token_clip": ("Token ratios clipped", "You clip each token's own ratio, which is GRPO; "
                   "GSPO clips one ratio per answer, s_i, shared by all its tokens."),
}  # fmt: skip
#: Each exercise's mistakes, in groups of those that exclude one another.
EXCLUSIVE = {
    "grpo": [("no_std", "std_twice", "population_std"), ("token_mean",), ("no_mask",),
             ("kl_sign", "kl_direction"), ("sign",)],
    "gspo": [("product", "token_clip"), ("no_mask",), ("sign",)],
}  # fmt: skip
MAX_MISTAKES = 3
RTOL, ATOL = 1e-9, 1e-12
STD_EPS = 1e-4  # TRL's (``grpo_trainer.py`` L2705-2707)


@dataclass(frozen=True, eq=False)
class ExerciseBatch:
    """A batch shaped for notebook 6's sandbox: three arrays it hands over (``inputs``), and
    the mask and ``extras`` that :class:`_Bound` adds."""

    name: str
    lesson: str
    logp_new: np.ndarray
    logp_old: np.ndarray
    advantages: np.ndarray  # the third argument: rewards (GRPO) or advantages (GSPO)
    mask: np.ndarray
    extras: tuple[Any, ...]
    eps: float = 0.2  # the sandbox passes it on; the exercises take theirs from extras
    read_only: bool = False

    n = property(lambda self: len(self.mask))
    label = property(lambda self: f"batch '{self.name}' ({self.lesson})")

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.logp_new.copy(), self.logp_old.copy(), self.advantages.copy()


class _Bound:
    """The learner's function with the batch's mask and extras added (read-only copies); its
    ``__code__`` is the learner's, so the sandbox names the learner's line in an error."""

    def __init__(self, function: Callable[..., Any], batch: ExerciseBatch) -> None:
        self.function, self.batch = function, batch

    __code__ = property(lambda self: getattr(self.function, "__code__", None))

    def __call__(self, logp_new: Any, logp_old: Any, third: Any, _eps: float) -> Any:
        extras = [_read_only(x) if isinstance(x, np.ndarray) else x for x in self.batch.extras]
        return self.function(logp_new, logp_old, third, _read_only(self.batch.mask), *extras)


def _read_only(array: np.ndarray) -> np.ndarray:
    copy = array.copy()
    copy.setflags(write=False)
    return copy


# -- what an implementation with some mistakes answers -------------------------------------------


def grpo_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> float:
    """llm_clip's GRPO loss on the inputs an implementation with ``mistakes`` uses."""
    (group_size, eps, beta, ref), m = batch.extras, mistakes
    a = llm_clip.group_advantages(batch.advantages, group_size, scale_by_std="no_std" not in m)
    if m & {"std_twice", "population_std"}:
        groups = batch.advantages.reshape(-1, group_size)
        std = groups.std(axis=1, ddof=0 if "population_std" in m else 1) + STD_EPS
        centred = llm_clip.group_advantages(batch.advantages, group_size, scale_by_std=False)
        a = centred / np.repeat(std, group_size) ** (2 if "std_twice" in m else 1)
    options = {
        "objective": "grpo", "eps_low": eps,
        "aggregation": "token-mean" if "token_mean" in m else None,
        "logp_ref": 2 * batch.logp_new - ref if "kl_direction" in m else ref,
    }  # fmt: skip
    mask = np.ones_like(batch.mask) if "no_mask" in m else batch.mask
    arguments = (batch.logp_new, batch.logp_old, a, mask)
    value = llm_clip.policy_loss(*arguments, kl_coef=beta, **options)
    if "kl_sign" in m:  # the policy part minus the KL part
        value = 2 * llm_clip.policy_loss(*arguments, **options) - value
    return -value if "sign" in m else value


def gspo_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> float:
    """llm_clip's GSPO loss on the inputs an implementation with ``mistakes`` uses: a product
    of ratios is the geometric mean of n_i times larger log-ratios; clipping each token's ratio
    is GRPO."""
    (eps_low, eps_high), m, old = batch.extras, mistakes, batch.logp_old
    mask = np.ones_like(batch.mask) if "no_mask" in m else batch.mask
    gap = batch.logp_new - old
    if "product" in m:
        gap = gap * mask.sum(axis=1, keepdims=True)
    value = llm_clip.policy_loss(
        old + gap, old, batch.advantages, mask, eps_low=eps_low, eps_high=eps_high,
        objective="grpo" if "token_clip" in m else "gspo",
    )  # fmt: skip
    return -value if "sign" in m else value


ANSWERS = {"grpo": grpo_answer, "gspo": gspo_answer}


@cache
def _answer(exercise: str, batch: ExerciseBatch, mistakes: frozenset[str]) -> float:
    return ANSWERS[exercise](batch, mistakes)


def _agrees(got: float, expected: float) -> bool:
    return bool(np.isclose(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True))


def mistake_sets(exercise: str) -> list[frozenset[str]]:
    """Every set of at most :data:`MAX_MISTAKES` mistakes, one per group, fewest first."""
    choices = itertools.product(*(("", *group) for group in EXCLUSIVE[exercise]))
    sets = {frozenset(filter(None, choice)) for choice in choices}
    return sorted((s for s in sets if len(s) <= MAX_MISTAKES), key=lambda s: (len(s), sorted(s)))


# -- the batteries -------------------------------------------------------------------------------


def _batch(name: str, lengths: list[int], third: list[float], extras: tuple, seed: int,
           spread: float = 0.15) -> ExerciseBatch:  # fmt: skip
    """Answers of ``lengths`` tokens with seeded log-probabilities, finite junk on padding (a
    GRPO batch's ``extras`` get a reference's log-probabilities appended)."""
    rng = np.random.default_rng(seed)
    mask = np.arange(max(lengths) + 1) < np.array(lengths)[:, None]
    old = np.log(rng.uniform(0.05, 0.95, mask.shape))
    new = np.minimum(old + rng.normal(0.0, spread, mask.shape), 0.0)
    if len(extras) == 3:
        extras = (*extras, np.minimum(old + rng.normal(0.0, 0.3, mask.shape), 0.0))
    return ExerciseBatch(name, f"answers of {', '.join(map(str, lengths))} tokens",
                         new, old, np.array(third, float), mask, extras)  # fmt: skip


@cache
def battery(exercise: str) -> tuple[ExerciseBatch, ...]:
    """The batches a check runs: small ones, then notebook 7's batch at update 3."""
    nb = response_batch(4)
    if exercise == "grpo":
        return (
            _batch("one group", [5, 2, 4, 3], [1, 0, 0, 1], (4, 0.2, 0.0), seed=1),
            _batch("two groups", [3, 6, 2, 5, 4, 6], [1, 0, 0, 1, 0.5, 0], (3, 0.2, 0.0), seed=2),
            _batch("KL to the reference", [6, 3, 5, 2], [0, 1, 1, 0], (4, 0.2, 0.1), seed=4,
                   spread=0.3),
            ExerciseBatch("notebook 7's batch", "G = 4, beta = 0.04", nb.logp_new[2], nb.logp_old,
                          nb.rewards, nb.mask, (4, 0.2, 0.04, nb.logp_ref)),
        )  # fmt: skip
    return (
        _batch("three answers", [5, 2, 4], [1.0, -1.0, 0.5], (0.2, 0.2), seed=5, spread=0.2),
        _batch("the paper's range", [3, 6, 2, 5], [0.8, -0.4, 1.2, -1.5], (3e-4, 4e-4), seed=6,
               spread=0.01),
        ExerciseBatch("notebook 7's batch", "eps 0.01", nb.logp_new[2], nb.logp_old,
                      nb.advantages(), nb.mask, (0.01, 0.01)),
    )  # fmt: skip


# -- checking ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExerciseResult(CheckResult):
    """Notebook 6's card for one of notebook 7's exercises (with its own count of batches)."""

    batches: int = 0

    def headline(self) -> str:
        if not self.implemented:
            return f"{self.exercise}: not implemented yet."
        if self.passed:
            return f"{self.exercise}: passed. It matches llm_clip on all {self.batches} batches."
        found = f"{len(self.findings)} problem{'s' if len(self.findings) > 1 else ''} found"
        matches = f"it matches llm_clip on {self.matching_core} of {self.batches} batches"
        return f"{self.exercise}: {found} ({matches})."


def check_grpo_loss(function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
                    ) -> ExerciseResult:  # fmt: skip
    """Check ``grpo_loss(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)``."""
    return check("grpo", function, time_limit_s)


def check_gspo_loss(function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
                    ) -> ExerciseResult:  # fmt: skip
    """Check ``gspo_loss(logp_new, logp_old, advantages, mask, eps_low, eps_high)``."""
    return check("gspo", function, time_limit_s)


def check(exercise: str, function: Callable[..., Any], time_limit_s: float) -> ExerciseResult:
    """Run ``function`` on each batch (one sandboxed call each, none after a timeout); name its
    mistakes.  Nothing the function does is raised."""
    name, batches = f"{exercise}_loss", battery(exercise)
    if not callable(function):
        text = f"check_{name} expects your function (its name, without parentheses)."
        return ExerciseResult(name, "loss", (finding("error", text),), batches=len(batches))
    calls: list[Call] = []
    for batch in batches:
        calls += call_battery(_Bound(function, batch), "loss", [batch], time_limit_s)
        if calls[-1].timed_out:
            break
    printed = next((f"Your function printed: {c.printed!r}" for c in calls if c.printed), "")
    if all(c.not_implemented for c in calls):
        findings: tuple[Finding, ...] = (finding("not_implemented"),)
        return ExerciseResult(name, "loss", findings, printed=printed, batches=len(batches))
    answers = [(c.batch, float(c.answer[0])) for c in calls if isinstance(c.answer, np.ndarray)]
    matching = sum(_agrees(got, _answer(exercise, b, frozenset())) for b, got in answers)
    found = _call_findings(exercise, calls)
    if matching < len(answers):
        found += _value_findings(exercise, answers)
    return ExerciseResult(name, "loss", tuple(found), matching_core=matching, printed=printed,
                          batches=len(batches))  # fmt: skip


def _call_findings(exercise: str, calls: list[Call]) -> list[Finding]:
    """What the calls show besides their values: an error, a timeout, a wrong type, a change."""
    found = []
    if failed := next((c for c in calls if c.error), None):
        text = f"On {failed.batch.label} your function {failed.error}. {error_hint(failed.error)}"
        found.append(finding("error", text.strip()))
    if late := next((c for c in calls if c.timed_out), None):
        late_text = f"On {late.batch.label} your function did not return within the time limit."
        found.append(finding("timeout", late_text))
    if wrong := next((c for c in calls if isinstance(c.answer, str)), None):
        found.append(finding("wrong_type", f"Your function returned {wrong.answer}."))
    if changed := next((c for c in calls if c.changed), None):
        argument = "rewards" if exercise == "grpo" and changed.changed[0] == "advantages" else (
            changed.changed[0])  # fmt: skip
        evidence = f"It changed {argument} on {changed.batch.label}."
        found.append(finding("mutated", evidence=evidence))
    return found


def _value_findings(exercise: str, answers: list[tuple[ExerciseBatch, float]]) -> list[Finding]:
    """The fewest mistakes that explain every answer, each shown on a batch; or a mismatch."""
    for mistakes in mistake_sets(exercise)[1:]:
        if all(_agrees(got, _answer(exercise, b, mistakes)) for b, got in answers):
            return [_shown(exercise, key, mistakes, answers) for key in sorted(mistakes)]
    b, got = next((b, g) for b, g in answers if not _agrees(g, _answer(exercise, b, frozenset())))
    expected = exact(_answer(exercise, b, frozenset()))
    text = "Your answers match none of the mistakes this checker knows. "
    text += f"On {b.label} llm_clip gives {expected}, your function {exact(got)}."
    return [Finding("mismatch", "Differs from the reference", text)]


def _shown(exercise: str, key: str, mistakes: frozenset[str],
           answers: list[tuple[ExerciseBatch, float]]) -> Finding:  # fmt: skip
    """Mistake ``key``'s finding, shown on a batch where leaving it out changes the answer."""
    title, text = MISTAKES[key]
    shows = [(b, g) for b, g in answers if not _agrees(g, _answer(exercise, b, mistakes - {key}))]
    b, got = (shows or answers)[0]
    expected = rounded(_answer(exercise, b, frozenset()), 6)
    evidence = f"On {b.label}: llm_clip gives {expected}, your function {rounded(got, 6)}."
    return Finding(key, title, text, evidence)
