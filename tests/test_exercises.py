"""Notebook 6's checker: it passes right answers, names each mistake, and survives any learner.

Every wrong implementation below is a learner-style numpy function with deliberate mistakes
(one, or two at once); the checker must report exactly those mistakes' keys, and no mistake
where a placeholder (``return 0.0``) only happens to equal a combination of them.  Correct code
(the module itself, a careful learner's, the plain-Python reference with ``math.exp``) passes
with no note, on this CPU and under the simulated other ones; the textbook numpy loss, the
PyTorch-style form and a log-space clip pass the core batches and get one "going further"
note.  One table (:data:`CASES`) holds every function handed to a check with the diagnosis it
must get, run through one test.  A learner's function that loops, sleeps, swallows every
exception, raises anything, prints a flood or changes the process gets a finding within its
time limit, never an exception or a frozen kernel, and leaves the process as it was; a real
Ctrl-C stops the check.  The concept questions are decided by ppo_clip, and the notebook runs
headless with its exercise bodies empty and filled in.
"""

from __future__ import annotations

import ast
import html
import inspect
import itertools
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import nbformat
import numpy as np
import pytest
import reference
from helpers import assert_states
from notebook_runner import execute_notebook, output_problems, printed_text, run_committed

import ppo_clip
from ppo_viz.exercises import (
    TIME_LIMIT_S,
    ConceptQuestion,
    battery,
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
    concept_questions,
    exercise_summary,
    llm,
    sandbox,
)
from ppo_viz.exercises.advice import EXPLANATIONS, IN_EXERCISE, words
from ppo_viz.exercises.battery import (
    FUNCTION_NAMES,
    NUMERICS_NOTEBOOK,
    OVERFLOW_LESSON,
    TOKENS_LESSON,
    UNDERFLOW_LESSON,
    CheckBatch,
)
from ppo_viz.exercises.mistakes import EXERCISES, TOLERANCES, VALUE_MISTAKES, predict
from ppo_viz.export import WIDGET_VIEW_MIME
from ppo_viz.numbers import exact, rounded, vector

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_exercises.ipynb"
KINDS = ("loss", "clip_fraction", "grad")
REFERENCE = {
    "loss": ppo_clip.ppo_clip_loss,
    "clip_fraction": ppo_clip.clip_fraction,
    "grad": ppo_clip.ppo_clip_grad,
}
CORE, ROBUST = len(battery("core")), len(battery("robustness"))
EXAMPLE = ppo_clip.worked_example()

# --------------------------------------------------------------------------
# Learner-style implementations with switchable mistakes
# --------------------------------------------------------------------------


def _ratio(logp_new, logp_old, mistakes):
    if "float32_math" in mistakes:  # computed in float32, handed back as float64
        return np.exp((logp_new - logp_old).astype(np.float32)).astype(np.float64)
    if "ratio_underflow" in mistakes:
        return np.exp(logp_new) / np.exp(logp_old)
    if "mutated" in mistakes:
        logp_new -= logp_old  # writes into the caller's array
        return np.exp(logp_new)
    log_ratio = logp_old - logp_new if "ratio_inverted" in mistakes else logp_new - logp_old
    return log_ratio if "no_exp" in mistakes else np.exp(log_ratio)


def _advantages(advantages, mistakes):
    a = np.asarray(advantages, dtype=float)
    if "normalized" in mistakes:
        return (a - a.mean()) / (a.std() + 1e-8)
    if "normalized_torch_style" in mistakes:  # unbiased std, no epsilon
        return (a - a.mean()) / a.std(ddof=1)
    return a


def _times(values, advantages, mistakes):
    if "nan_overflow" in mistakes:
        return values * advantages  # inf * 0 is NaN
    return np.multiply(values, advantages, out=np.zeros_like(values), where=advantages != 0)


def _is_clipped(ratio, a, eps, mistakes):
    lower, upper = 1 - eps, 1 + eps
    if "non_strict" in mistakes:
        above, below = ratio >= upper, ratio <= lower
    else:
        above, below = ratio > upper, ratio < lower
    if "sign_blind" in mistakes or "clip_only" in mistakes:
        return above | below
    if "min_of_ratios" in mistakes:  # what np.minimum(r, clip(r)) * A clips
        return above
    if "no_negative_branch" in mistakes:
        return (a > 0) & above
    if "upper_sign_blind" in mistakes:
        return above | ((a < 0) & below)
    if "zero_advantage_else" in mistakes:  # A = 0 falls into the test for A < 0
        return np.where(a > 0, above, below)
    positive = a >= 0 if "zero_advantage" in mistakes else a > 0
    if "max_for_min" in mistakes:  # the wrong side
        return (positive & below) | ((a < 0) & above)
    return (positive & above) | ((a < 0) & below)


def learner_loss(*mistakes: str) -> Callable[..., Any]:
    def ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2):
        eps = 0.2 if "fixed_eps" in mistakes else eps
        a = _advantages(advantages, mistakes)
        r = _ratio(logp_new, logp_old, mistakes)
        low, high = (1 + eps, 1 - eps) if "clip_swapped" in mistakes else (1 - eps, 1 + eps)
        clipped_term = _times(np.clip(r, low, high), a, mistakes)
        unclipped_term = _times(r, a, mistakes)
        if "unclipped" in mistakes:
            terms = unclipped_term
        elif "clip_only" in mistakes:  # np.clip without the min
            terms = clipped_term
        elif "max_for_min" in mistakes:
            terms = np.maximum(unclipped_term, clipped_term)
        elif "min_of_ratios" in mistakes:
            terms = _times(np.minimum(r, np.clip(r, low, high)), a, mistakes)
        elif "no_negative_branch" in mistakes:
            terms = np.where(a > 0, _times(np.minimum(r, high), a, mistakes), unclipped_term)
        elif "upper_sign_blind" in mistakes:
            terms = np.where(r > high, (1 + eps) * a, np.where((a < 0) & (r < low), low * a, r * a))
        else:
            terms = np.minimum(unclipped_term, clipped_term)
        total = np.sum(terms) if "no_mean" in mistakes else np.mean(terms)
        return float(total if "sign" in mistakes else -total)

    return ppo_clip_loss


def learner_clip_fraction(*mistakes: str) -> Callable[..., Any]:
    def clip_fraction(logp_new, logp_old, advantages, eps=0.2):
        eps = 0.2 if "fixed_eps" in mistakes else eps
        a = _advantages(advantages, mistakes)
        r = _ratio(logp_new, logp_old, mistakes)
        clipped = _is_clipped(r, a, eps, mistakes)
        if "no_mean" in mistakes:
            return int(np.count_nonzero(clipped))
        return float(np.mean(clipped))

    return clip_fraction


def learner_grad(*mistakes: str) -> Callable[..., Any]:
    def ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2):
        eps = 0.2 if "fixed_eps" in mistakes else eps
        a = _advantages(advantages, mistakes)
        r = _ratio(logp_new, logp_old, mistakes)
        n = len(a)
        grad = -a / n if "minus_A" in mistakes else -_times(r, a, mistakes) / n
        if "unclipped" in mistakes:
            clipped = np.zeros(n, dtype=bool)
        else:
            clipped = _is_clipped(r, a, eps, mistakes)
        if "clipped_ratio_on_clipped" in mistakes:  # -clip(r)*A/N where clipped
            grad = np.where(clipped, -_times(np.clip(r, 1 - eps, 1 + eps), a, ()) / n, grad)
        elif "grad_on_clipped" not in mistakes:
            grad = np.where(clipped, 0.0, grad)
        if "sign" in mistakes:
            grad = -grad
        if "no_mean" in mistakes:
            grad = grad * n
        return grad

    return ppo_clip_grad


def finite_difference_grad(logp_new, logp_old, advantages, eps=0.2, h=1e-6):
    """The gradient by central differences of the textbook loss, one sample at a time."""
    grad = np.empty(len(logp_new))
    for t in range(len(logp_new)):
        step = np.zeros(len(logp_new))
        step[t] = h
        ahead, behind = (
            textbook_loss(logp_new + d, logp_old, advantages, eps) for d in (step, -step)
        )
        grad[t] = (ahead - behind) / (2 * h)
    return grad


LEARNERS = {"loss": learner_loss, "clip_fraction": learner_clip_fraction, "grad": learner_grad}
#: How a learner's code is written -> the key the checker must name (the same where absent).
KEY_OF = {
    "normalized_torch_style": "normalized",
    "zero_advantage_else": "zero_advantage",
    "clipped_ratio_on_clipped": "grad_on_clipped",
    "grad_on_clipped": "unclipped",  # -r*A/N everywhere: the unclipped objective's gradient
}


def plain_python(kind: str) -> Callable[..., Any]:
    """The contract's plain-Python reference as a learner would hand it in (one loop per call)."""

    def function(logp_new, logp_old, advantages, eps=0.2):
        loss, fraction, grad = reference.contract(
            list(logp_new), list(logp_old), list(advantages), eps
        )
        return {"loss": loss, "clip_fraction": fraction, "grad": np.array(grad)}[kind]

    return function


def textbook_loss(logp_new, logp_old, advantages, eps=0.2):
    """What every course writes: np.clip, then np.minimum, the mean, a minus."""
    r = np.exp(logp_new - logp_old)
    return -np.mean(np.minimum(r * advantages, np.clip(r, 1 - eps, 1 + eps) * advantages))


def pytorch_style_loss(logp_new, logp_old, advantages, eps=0.2):
    """CleanRL's max(-A*r, -A*clip(r)).mean(), written in numpy."""
    ratio = np.exp(logp_new - logp_old)
    return np.maximum(-advantages * ratio, -advantages * np.clip(ratio, 1 - eps, 1 + eps)).mean()


def log_space_clip_loss(logp_new, logp_old, advantages, eps=0.2):
    """The clip applied to the log-ratio, between log(1 - eps) and log(1 + eps)."""
    log_ratio = logp_new - logp_old
    clipped = np.exp(np.clip(log_ratio, np.log(1 - eps), np.log(1 + eps)))
    return float(-np.mean(np.minimum(np.exp(log_ratio) * advantages, clipped * advantages)))


def whole_numbers(text: str) -> list[int]:
    """The whole numbers a text states, in order."""
    return [int(number) for number in re.findall(r"\d+", text)]


# --------------------------------------------------------------------------
# Each function gets its diagnosis: right ones pass, each mistake is named
# --------------------------------------------------------------------------

#: Half of the rule: np.minimum(r, clip(r)) * A, the A < 0 branch forgotten, every r > 1 + eps
#: clipped whatever A's sign.
HALF_RULES = ("min_of_ratios", "no_negative_branch", "upper_sign_blind")
#: The forms of the clipping rule the learner code writes one at a time.
RULE_FORMS = {
    *HALF_RULES,
    *("unclipped", "clip_only", "max_for_min", "zero_advantage", "grad_on_clipped", "clip_swapped"),
}
#: (kind, how the learner's code is wrong, the core mistakes and the notes the checker names)
WRONG_IMPLEMENTATIONS = [
    *[("loss", code, (code,), ()) for code in ("sign", "no_mean", "normalized", "mutated")],
    *[("loss", code, (code,), ()) for code in ("ratio_inverted", "no_exp", "fixed_eps")],
    ("loss", "unclipped", ("unclipped",), ()),
    *[("loss", code, (code,), ()) for code in ("clip_only", "max_for_min", "clip_swapped")],
    *[("loss", code, (code,), ()) for code in HALF_RULES],
    ("loss", "float32_math", ("precision",), ()),
    ("loss", "normalized_torch_style", ("normalized",), ()),
    ("loss", "nan_overflow", (), ("nan_overflow",)),
    ("loss", "ratio_underflow", (), ("ratio_underflow",)),
    ("loss", "non_strict", (), ()),  # on the edge both terms of the min are equal
    *[("clip_fraction", code, (code,), ()) for code in ("no_mean", "sign_blind", "non_strict")],
    *[("clip_fraction", code, (code,), ()) for code in ("ratio_inverted", "no_exp", "fixed_eps")],
    *[("clip_fraction", code, (code,), ()) for code in ("max_for_min", "zero_advantage")],
    *[("clip_fraction", code, (code,), ()) for code in HALF_RULES],
    ("clip_fraction", "zero_advantage_else", ("zero_advantage",), ()),
    ("clip_fraction", "normalized", ("normalized",), ()),
    ("clip_fraction", "normalized_torch_style", ("normalized",), ()),
    ("clip_fraction", "mutated", ("mutated",), ()),
    ("clip_fraction", "ratio_underflow", (), ("ratio_underflow",)),
    *[("grad", code, (code,), ()) for code in ("sign", "no_mean", "non_strict", "minus_A")],
    *[("grad", code, (code,), ()) for code in ("ratio_inverted", "no_exp", "fixed_eps")],
    ("grad", "unclipped", ("unclipped",), ()),
    *[("grad", code, (code,), ()) for code in ("clip_only", "max_for_min", "mutated")],
    *[("grad", code, (code,), ()) for code in HALF_RULES],
    ("grad", "float32_math", ("precision",), ()),
    ("grad", "sign_blind", ("clip_only",), ()),  # zero outside the band on both sides
    ("grad", "grad_on_clipped", ("unclipped",), ()),  # -r*A/N everywhere
    ("grad", "clipped_ratio_on_clipped", ("grad_on_clipped",), ()),
    ("grad", "normalized", ("normalized",), ()),
    ("grad", "normalized_torch_style", ("normalized",), ()),
    ("grad", "nan_overflow", (), ("nan_overflow",)),
    ("grad", "ratio_underflow", (), ("ratio_underflow",)),
]


#: What some of those implementations' findings must also show, by (kind, code): evidence, and
#: the words of the exercise whose code shows the mistake (a loss has no gradient to take).
EVIDENCE = {
    ("loss", "float32_math"): (re.compile(r"\A(?![\s\S]*finite differences)"),),
    ("clip_fraction", "no_mean"): ("Counted the clipped samples, not", "np.mean(clipped)"),
    ("clip_fraction", "max_for_min"): ("where r*A < clip(r)*A", "TRL 0.16", "notebook 2"),
    ("clip_fraction", "min_of_ratios"): ("Counted only r > 1 + eps as clipped",),
    ("clip_fraction", "no_negative_branch"): ("You count only samples with A > 0",),
    ("grad", "no_mean"): ("-r*A/N, not -r*A.",),
    **dict.fromkeys([("grad", "unclipped"), ("grad", "grad_on_clipped")], ("on every sample",)),
    ("grad", "sign_blind"): ("zero the gradient wherever r is outside the band",),
    ("grad", "max_for_min"): ("zero the gradient of the samples that moved the unfavourable",),
    ("grad", "min_of_ratios"): ("zero the gradient wherever r > 1 + eps",),
    ("grad", "no_negative_branch"): ("zero the gradient only of samples with A > 0",),
    ("grad", "float32_math"): ("not by finite differences",),
    ("loss", "sign"): ("On batch 'one sample' (N = 1, eps = 0.2): expected -1.25, got 1.25.",),
    ("grad", "clip_only"): (
        "zero the gradient wherever r is outside the band",
        "sample 0 (r = 0.5, A = 2.5): expected -1.25, got 0.",
    ),
    ("loss", "normalized"): ("norm_adv", "normalize_advantage"),  # where each library does it
    ("clip_fraction", "non_strict"): (  # two of its three samples
        "ratios exactly on the band's edges",
        f"expected 0, got {rounded(2 / 3)}.",
    ),
    ("loss", "mutated"): (
        f"logp_new was {vector(EXAMPLE.logp_new, each=rounded)} before the call and "
        f"{vector(EXAMPLE.logp_new - EXAMPLE.logp_old, each=rounded)} after it.",
        "read-only",
        "logp_new -= logp_old",  # the line that wrote into the caller's array
    ),
}


def _zero_advantage_evidence() -> str:
    batch = next(b for b in battery("core") if b.name == "advantages of exactly 0")
    wrong = np.mean((batch.advantages >= 0) & (batch.breakdown.ratio > 1.2))
    expected = rounded(batch.answers["clip_fraction"])
    return f"On {batch.label}: expected {expected}, got {rounded(wrong)}."


EVIDENCE["clip_fraction", "zero_advantage"] = (_zero_advantage_evidence(),)


def _learner_cell(body: str) -> Callable[..., Any]:
    """A learner's cell defining ``ppo_clip_loss`` whose last line is ``body``."""
    namespace = {"np": np}
    exec(
        "def ppo_clip_loss(logp_new, logp_old, a, eps=0.2):\n"
        f"    r = np.exp(logp_new - logp_old)\n    {body}\n",
        namespace,
    )
    return namespace["ppo_clip_loss"]


def _constant(value):
    return lambda logp_new, logp_old, advantages, eps=0.2: value


def _raises(error_factory):
    def function(logp_new, logp_old, advantages, eps=0.2):
        raise error_factory()

    return function


class BrokenMessageError(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def _empty(body: str) -> Callable[..., Any]:
    """The template (``raise NotImplementedError``), or its body emptied: a docstring and
    ``body``."""
    namespace = {"np": np}
    exec(
        f'def empty(logp_new, logp_old, advantages, eps=0.2):\n    """Doc."""\n    {body}\n',
        namespace,
    )
    return namespace["empty"]


def _placeholder(kind: str, function: Any, value: float) -> None:
    """``return 0.0`` equals what three mistakes together give; it is a placeholder, not them:
    told so on the smallest core batch whose reference answer differs."""
    for batch in sorted(battery("core"), key=lambda b: b.n):
        expected = np.atleast_1d(batch.answers[kind])
        if not np.array_equal(expected, np.full_like(expected, value), equal_nan=True):
            break
    expected = expected[int(np.argmax(expected != value))]
    shown = f"an array of {exact(value)}s" if kind == "grad" else exact(value)
    texts = (f"returns {shown} on every batch", batch.lesson, f"On {batch.label}")
    evidence = f"expected {rounded(expected)}, got {rounded(value)}."
    case(kind, "mismatch", "", *texts, evidence)(function, f"placeholder {kind} {value}")


#: Echoed inputs differ and match no mistake; a right value in the wrong form is a wrong type.
ECHOES = {
    "loss": [
        lambda new, *_: float(new[0]),
        lambda *x: float(np.mean(x[2])),
        lambda *x: float(x[3]),
    ],
    "clip_fraction": [lambda *x: float(x[3])],
    "grad": [lambda new, *_: new, lambda *x: x[2], lambda new, old, *_: np.exp(new - old)],
}
WRONG_FORMS = {  # one entry per sample, or one for the batch; an array, a list, float16
    "loss": [
        lambda *x: np.array([ppo_clip.ppo_clip_loss(*x)]),
        lambda *x: np.array(ppo_clip.ppo_clip_loss(*x)),
        lambda *x: ppo_clip.clip_breakdown(*x).clipped_term,
    ],
    "clip_fraction": [
        lambda *x: np.array([ppo_clip.clip_fraction(*x)]),
        lambda *x: ppo_clip.clip_breakdown(*x).is_clipped,
    ],
    "grad": [
        lambda *x: ppo_clip.ppo_clip_grad(*x).tolist(),
        lambda *x: ppo_clip.ppo_clip_grad(*x)[None, :],
        lambda *x: ppo_clip.ppo_clip_grad(*x)[:, None],
        lambda *x: ppo_clip.ppo_clip_grad(*x).astype(np.float16),
        lambda *x: float(ppo_clip.ppo_clip_grad(*x).sum()),
    ],
}


class Case(NamedTuple):
    """A function handed to a check, the keys of the findings and notes the learner must read,
    and texts (or patterns) the result must show."""

    id: str
    kind: str
    function: Any
    mistakes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    texts: tuple[str | re.Pattern[str], ...] = ()


#: Every function a test hands to a check, with the diagnosis it must get.
CASES = [
    Case(f"{kind}-{code}", kind, LEARNERS[kind](code), m, n, EVIDENCE.get((kind, code), ()))
    for kind, code, m, n in WRONG_IMPLEMENTATIONS
]


def case(kind: str, mistakes: str = "", notes: str = "", *texts: Any) -> Any:
    """Add the decorated function to :data:`CASES`: its findings' and notes' keys (separated by
    spaces) and the texts its result shows."""

    def add(function: Any, name: str = "") -> Any:
        name = name or getattr(function, "__name__", repr(function))
        keys = tuple(mistakes.split()), tuple(notes.split())
        CASES.append(Case(name, kind, function, *keys, texts))
        return function

    return add


PASSED = f"passed. It matches the reference on all {CORE} core batches"
OVERFLOW_NOTE = f"See {OVERFLOW_LESSON}."
for kind in KINDS:
    rights = {"module": REFERENCE[kind], "learner": LEARNERS[kind](), "python": plain_python(kind)}
    for name, right in rights.items():
        case(kind, "", "", f"{PASSED}, and on the {ROBUST} robustness")(right, f"{kind}-{name}")
    for body in ("raise NotImplementedError", "...", "pass", "return ..."):
        shown = f"{FUNCTION_NAMES[kind]}: not implemented yet."
        case(kind, "not_implemented", "", shown)(_empty(body), f"{kind}-empty-{body}")
    forgets = _empty("r = np.exp(logp_new - logp_old)")  # a body, and no return
    shown = "returned None (is a return statement missing?)"
    case(kind, "wrong_type", "", shown)(forgets, f"{kind}-forgets its return")
for form in (textbook_loss, pytorch_style_loss, log_space_clip_loss):
    case("loss", "", "nan_overflow", f"{PASSED}.", "Going further", OVERFLOW_NOTE)(form)


NAIVE = f"ppo_clip_loss: 1 problem found (it matches the reference on 1 of {CORE} core batches)."


@case("loss", "no_mean", "nan_overflow", NAIVE)  # the batch of N = 1 matches: its sum is its mean
def naive_sum(logp_new, logp_old, advantages, eps=0.2):
    r = np.exp(logp_new - logp_old)
    return -np.sum(np.minimum(r * advantages, np.clip(r, 1 - eps, 1 + eps) * advantages))


@case("loss", "", "mismatch", "batch '4096 tokens' (N = 4096", TOKENS_LESSON)
def off_for_huge_batches(logp_new, logp_old, advantages, eps=0.2):
    loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
    return loss + 0.5 if len(advantages) > 1000 else loss


@case("loss", "error", "", "ZeroDivisionError: float division by zero", "return 1.0 / n")
def crashes(logp_new, logp_old, advantages, eps=0.2):
    n = len(advantages) - len(advantages)
    return 1.0 / n


@case("loss", "sign no_mean", "error", "OverflowError: math range", "overflowing", OVERFLOW_NOTE)
def overflows_in_a_loop(logp_new, logp_old, advantages, eps=0.2):
    r = np.array([math.exp(x - y) for x, y in zip(logp_new, logp_old, strict=True)])
    terms = np.minimum(r * advantages, np.clip(r, 1 - eps, 1 + eps) * advantages)
    return float(np.sum(terms))


EPS_0 = "batch 'eps = 0'", "NotImplementedError: eps = 0 is not handled yet"


@case("loss", "error", "", *EPS_0, f"the reference on {CORE - 1} of {CORE} core batches")
def leaves_eps_0_for_later(logp_new, logp_old, advantages, eps=0.2):
    if eps == 0:
        raise NotImplementedError("eps = 0 is not handled yet")
    return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)


@case("loss")  # silenced: pytest's configuration makes a RuntimeWarning that reaches it an error
def warns(logp_new, logp_old, advantages, eps=0.2):
    warnings.warn("noisy", RuntimeWarning, stacklevel=1)
    return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)


@case("loss", "wrong_type", "", "None (is a return statement missing?)")
def forgets_a_return(logp_new, logp_old, advantages, eps=0.2):
    if len(advantages) > 1:
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)


@case("loss", "error mismatch")
def answers_once(logp_new, logp_old, advantages, eps=0.2):
    """``return 0.0`` on the one batch it answers: three mistakes together give that too."""
    if len(advantages) != 4:
        raise ValueError("not yet")
    return 0.0


@case("loss", "mismatch patched_module", "", "ppo_clip.clip_breakdown, ppo_clip.ppo_clip_loss")
def cheats(logp_new, logp_old, advantages, eps=0.2):
    ppo_clip.ppo_clip_loss = lambda *args, **kwargs: 42.0
    ppo_clip.clip_breakdown = None
    return float(len(advantages))


@case("loss", "error", "", "math.exp(logp_new - logp_old)", "write np.exp")
def math_exp_on_arrays(logp_new, logp_old, advantages, eps=0.2):
    r = math.exp(logp_new - logp_old)
    return -float(np.mean(np.minimum(r * advantages, np.clip(r, 1 - eps, 1 + eps) * advantages)))


@case("loss", "error", "", "takes 3 positional arguments but 4", "keep them all")
def forgets_eps(logp_new, logp_old, advantages):
    r = np.exp(logp_new - logp_old)
    return -float(np.mean(np.minimum(r * advantages, np.clip(r, 0.8, 1.2) * advantages)))


DIGITS = re.compile(r"to about ([4-9]|10) significant digits")
case("grad", "precision", "mismatch", "finite differences", DIGITS)(finite_difference_grad)
case("grad", "not_a_function", "", "expects your function")(3, "not a function")
case("loss", "wrong_type", "", "an integer too large for float64")(_constant(10**400), "10**400")
for body in ("np.min(r * a, ", "min(r * a, "):  # np.min reads b as the axis
    function = _learner_cell(f"return -np.mean({body}np.clip(r, 1 - eps, 1 + eps) * a))")
    case("loss", "error", "", "np.minimum(a, b)")(function, body)
for kind, rule in [("clip_fraction", "a > 0 & r > 1 + eps"), ("grad", "a < 0 | r < 1 - eps")]:
    function = _learner_cell(f"clipped = {rule}")  # raises on this line
    case(kind, "error", "", "(A > 0) & (r > 1 + eps)")(function, f"{kind}: {rule}")
for name, (function, shown) in {  # anything raised, and the process ending, is a finding
    "SystemExit": (_raises(lambda: SystemExit(3)), "raised SystemExit: 3"),
    "KeyboardInterrupt": (_raises(KeyboardInterrupt), "raised KeyboardInterrupt"),
    "broken __str__": (_raises(BrokenMessageError), "raised BrokenMessageError: <its message"),
    "os._exit": (lambda *args: os._exit(3), "ended the Python process it ran in (exit code 3)"),
}.items():
    case("loss", "error", "", f"your function {shown}")(function, name)
for kind, value in [("loss", 0.0), ("loss", 0), ("loss", -1.0), ("loss", math.nan)]:
    _placeholder(kind, _constant(value), value)
for value in (0.0, 1):
    _placeholder("clip_fraction", _constant(value), value)
_placeholder("grad", lambda logp_new, *_: np.zeros_like(logp_new), 0.0)
_placeholder("grad", lambda logp_new, *_: np.full(len(logp_new), np.nan), np.nan)
for kind, functions in ECHOES.items():
    for i, function in enumerate(functions):
        case(kind, "mismatch", "", "match none of the common mistakes")(
            function, f"{kind}-echo {i}"
        )
for kind, functions in WRONG_FORMS.items():
    for i, function in enumerate(functions):
        case(kind, "wrong_type")(function, f"{kind}-wrong form {i}")
for kind, function in REFERENCE.items():  # a float32 result is read, and called close
    float32 = re.compile(r"to about [67] significant digits")
    case(kind, "precision", "", float32)(lambda *x, f=function: np.float32(f(*x)), f"{kind}-f32")
#: The findings whose explanation is about the call itself rather than a mistake's own text.
OWN_WORDS = {"error", "timeout", "wrong_type", "mismatch"}


@pytest.mark.parametrize("row", CASES, ids=[row.id for row in CASES])
def test_each_function_gets_its_diagnosis(row):
    """Its diagnosis (:func:`assert_diagnosis`), and ppo_clip as the notebook had it."""
    module = dict(vars(ppo_clip))
    result = check(row.kind, row.function)
    assert vars(ppo_clip).keys() == module.keys()
    assert all(vars(ppo_clip)[name] is value for name, value in module.items())
    assert_diagnosis(result, row.mistakes, row.notes, row.texts)


def assert_diagnosis(result: Any, mistakes: tuple, notes: tuple = (), texts: Any = ()) -> None:
    """Every check's card (notebooks 6 to 9): the keys of its findings and notes; their titles
    and explanations, the exercise's own for its value mistakes; their evidence, on the batch
    where each shows; the card's colour; the texts (or patterns) it must show; no traceback."""
    text, card = str(result), html.unescape(result._repr_html_())
    assert (result.mistakes, result.note_keys) == (mistakes, notes), text
    assert result.passed == (not mistakes)
    assert result.matching_core == result.core_batches or not result.passed
    colour = {"passed": "ok", "needs work": "error", "not implemented yet": "info"}[result.status]
    assert f"ppo-check-{result.status.replace(' ', '-')}" in card
    assert f"ppo-message-{colour}" in card
    assert result.headline() in card
    assert text == result.headline() or result.findings or result.notes
    own = EXERCISES.get(result.kind)
    values = own.titles if own else (*VALUE_MISTAKES[result.kind], "precision")
    for found in result.findings + result.notes:
        mine = own is not None and found.key in own.titles
        title, explanation = (
            (own.titles[found.key], own.explanations[found.key])
            if mine
            else words(found.key, result.kind)
        )
        assert found.further in card
        assert found.title == title
        assert found.key in OWN_WORDS or found.message == explanation
        assert found.evidence or found.key in {"error", "timeout", "not_implemented"}
        assert (
            found.key not in values
            or found.evidence.startswith("On batch")
            or ("agree with" in found.evidence)
        )
        assert found.evidence in card
        assert found.title in card or not result.implemented
    assert "Traceback" not in text
    assert "File " not in text
    assert result.kind not in ("clip_fraction", "grad") or "np.minimum(r * A" not in text
    for shown in texts:
        assert shown.search(text) if isinstance(shown, re.Pattern) else shown in text, shown


def test_every_listed_mistake_has_a_test_and_an_explanation():
    tested = {(row.kind, key) for row in CASES for key in row.mistakes + row.notes}
    for kind, names in VALUE_MISTAKES.items():
        for name in names:
            assert (kind, name) in tested, f"no wrong {kind} implementation shows {name!r}"
            assert EXPLANATIONS[name], f"no explanation of {name!r}"
    for kind in KINDS:
        for shared in ("mutated", "wrong_type"):
            assert (kind, shared) in tested


#: Pairs whose answers on every batch equal those of one of the two mistakes alone, so no
#: checker could see both: the log-ratio is never exactly on an edge; the sign-blind count
#: ignores A; normalized advantages are never exactly 0.
INVISIBLE_TOGETHER = [
    {"no_exp", "non_strict"},
    {"sign_blind", "normalized"},
    {"zero_advantage", "normalized"},
    {"min_of_ratios", "normalized"},  # sign-blind too: only the advantages' signs move
    # With the log-ratio as the ratio nothing is above 1 + eps, where these rules differ.
    {"no_exp", "min_of_ratios"},
    {"no_exp", "no_negative_branch"},
    {"no_exp", "upper_sign_blind"},
    {"no_exp", "fixed_eps"},  # and the batches' log-ratios get one verdict under eps and 0.2
]
CODE_VARIANTS = {
    kind: [
        c for k, c, m, n in WRONG_IMPLEMENTATIONS if k == kind and m and m[0] in VALUE_MISTAKES[k]
    ]
    for kind in KINDS
}


#: Pairs where the learner code above lets one mistake override the other (its if/elif picks
#: one objective; with no clipping at all, how clipping is decided does not matter): only the
#: one that takes effect shows in the answers, and only it is named.
TAKES_EFFECT = {
    frozenset(pair): effect
    for pair, effect in [
        (("unclipped", "clip_only"), "unclipped"),
        (("unclipped", "max_for_min"), "unclipped"),
        (("unclipped", "clip_swapped"), "unclipped"),
        (("unclipped", "non_strict"), "unclipped"),
        (("unclipped", "fixed_eps"), "unclipped"),
        (("grad_on_clipped", "fixed_eps"), "unclipped"),
        (("clip_only", "max_for_min"), "clip_only"),
        (("grad_on_clipped", "non_strict"), "unclipped"),
        (("grad_on_clipped", "clip_only"), "unclipped"),
        (("grad_on_clipped", "max_for_min"), "unclipped"),
    ]
}


#: Pairs whose answers get a note on the robustness batches: a gradient of 0 on every batch
#: (the log-ratio never leaves the band, and clip-only zeroes it inside) reads as a placeholder.
NOTED = {("grad", frozenset({"no_exp", "clip_only"})): ("mismatch",)}


@pytest.mark.parametrize("kind", KINDS)
def test_every_visible_pair_of_mistakes_in_learner_code_is_named(kind):
    """Each pair, issue 14's mistakes (max_for_min, clip_swapped, ratio_inverted, no_exp,
    zero_advantage, unclipped, clip_only) with every other among them, each with evidence."""
    wrong = []
    for first, second in itertools.combinations(CODE_VARIANTS[kind], 2):
        keys = {KEY_OF.get(first, first), KEY_OF.get(second, second)}
        if len(keys) < 2 or keys in INVISIBLE_TOGETHER:
            continue
        keys = {TAKES_EFFECT.get(frozenset({first, second}))} - {None} or keys
        if {first, second} & {"sign_blind", "clipped_ratio_on_clipped"} or (
            "zero_advantage_else" in {first, second} and {first, second} & RULE_FORMS
        ):
            continue  # the learner code above does not combine these forms with others
        if {first, second} & set(HALF_RULES) and {first, second} <= RULE_FORMS:
            continue  # each is a whole rule of its own in the learner code above
        result = check(kind, LEARNERS[kind](first, second))
        named = (set(result.mistakes), result.note_keys, all(f.evidence for f in result.findings))
        if named != (keys, NOTED.get((kind, frozenset({first, second})), ()), True):
            wrong.append((first, second, named))
    assert not wrong, "\n".join(map(str, wrong))


def test_an_unknown_error_falls_back_to_the_smallest_failing_batch():
    def off_for_big_batches(logp_new, logp_old, advantages, eps=0.2):
        loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
        return loss + 0.001 if len(advantages) >= 5 else loss

    result = check_loss(off_for_big_batches)
    assert result.mistakes == ("mismatch",)
    evidence = result.findings[0].evidence
    smallest = min((b for b in battery("core") if b.n >= 5), key=lambda b: b.n)
    assert f"batch '{smallest.name}' (N = 5" in evidence
    expected = smallest.answers["loss"]
    assert f"expected {rounded(expected)}, got {rounded(expected + 0.001)}" in evidence
    assert "logp_new = [" in evidence
    b = smallest.breakdown
    for i in range(smallest.n):  # every sample with its r, A and the contract's verdict
        verdict = "clipped" if b.is_clipped[i] else "not clipped"
        sample = f"sample {i} (r = {rounded(b.ratio[i])}, A = {rounded(b.advantages[i])})"
        assert f"{sample}: {verdict}" in evidence


def test_a_tiny_difference_is_close_but_not_float64_and_shown_with_the_digits_that_differ():
    def nudged(logp_new, logp_old, advantages, eps=0.2):
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps) * (1 + 1e-8)

    result = check_loss(nudged)
    assert result.mistakes == ("precision",), str(result)
    evidence = result.findings[0].evidence
    assert "to about 7 significant digits" in evidence
    batch = next(b for b in battery("core") if b.label in evidence)
    expected = batch.answers["loss"]
    shown = re.search(r"expected (\S+), got (\S+)\.", evidence).groups()  # type: ignore[union-attr]
    assert shown[0] != shown[1], evidence  # 4 digits would show -0.5375 twice
    assert math.isclose(float(shown[0]), expected, rel_tol=1e-9), evidence
    assert math.isclose(float(shown[1]), expected * (1 + 1e-8), rel_tol=1e-9), evidence


@pytest.mark.parametrize("check_function", [check_grad, llm.check_grpo_loss])
@pytest.mark.parametrize("limit", [0, -1.0, math.nan, math.inf, 1e7, True, "3"], ids=repr)
def test_a_time_limit_that_is_not_a_positive_number_up_to_a_day_is_refused_before_any_call(
    limit, check_function
):
    """1e7 s passed the check and then overflowed the wait for the first call."""
    calls = []
    with pytest.raises(ValueError, match=r"^time_limit_s must be a positive number"):
        check_function(lambda *args: calls.append(args), time_limit_s=limit)
    assert not calls


def test_html_is_escaped():
    def shouts(logp_new, logp_old, advantages, eps=0.2):
        print("<b>loud</b>")
        raise ValueError("<script>alert(1)</script>")

    page = check_loss(shouts)._repr_html_()
    assert "<script>" not in page
    assert "<b>loud" not in page
    assert "&lt;script&gt;" in page


# --------------------------------------------------------------------------
# The checker survives any learner: time limit, Ctrl-C, exceptions, output (issue 24, section 2)
# --------------------------------------------------------------------------

#: A short limit keeps these tests quick.
QUICK_LIMIT_S = 0.2
#: What a check may take beyond waiting for the learner: a fork, the diagnosis, a busy machine.
MARGIN_S = 1.0


def endless(logp_new, logp_old, advantages, eps=0.2):
    while True:
        pass


def sleeps(logp_new, logp_old, advantages, eps=0.2):
    time.sleep(600)


def swallows_everything(logp_new, logp_old, advantages, eps=0.2):
    while True:
        try:
            time.sleep(0.05)
            raise ValueError
        except:  # noqa: E722 - the learner's loop of issue 24
            continue


def ignores_signals(logp_new, logp_old, advantages, eps=0.2):
    for number in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    endless(logp_new, logp_old, advantages, eps)


def timed_check(function, **keywords) -> tuple[Any, float]:
    started = time.monotonic()
    result = check_loss(function, **keywords)
    return result, time.monotonic() - started


@pytest.mark.parametrize("function", [swallows_everything, endless, sleeps, ignores_signals])
def test_whatever_a_function_catches_it_is_stopped_at_its_limit(function):
    """A loop in Python, a sleep in C, issue 24's loop that catches every exception (it was still
    running at 15 s; whatever a function catches, in an except, a finally or a suppress, the
    child's timer ends it with os._exit, which none catches) and one that ignores the signals
    (the checker kills it after the grace period)."""
    result, seconds = timed_check(function, time_limit_s=QUICK_LIMIT_S)
    assert seconds < QUICK_LIMIT_S + sandbox.GRACE_S + MARGIN_S
    assert result.mistakes == ("timeout",)
    assert result.findings[0].message.startswith(
        f"On {battery()[0].label} your function did not return within {exact(QUICK_LIMIT_S)} s, "
        "the checker's time limit for one call."
    )
    assert "The checker stopped it" in result.findings[0].message
    if function is swallows_everything:  # where it was: the learner's own line
        assert "The checker stopped it (in swallows_everything, line " in result.findings[0].message
    assert f"It was not called on the {len(battery()) - 1} batches after that one." in str(result)
    assert not multiprocessing.active_children()


def test_the_time_limit_is_the_documented_one_by_default():
    for function in (check, check_loss, check_clip_fraction, check_grad, exercise_summary):
        default = inspect.signature(function).parameters["time_limit_s"].default
        assert default == TIME_LIMIT_S


def test_ctrl_c_stops_the_check_at_once():
    """A real SIGINT means "stop the check", not "your function raised KeyboardInterrupt"."""
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        check_loss(swallows_everything, time_limit_s=5.0)
    assert time.monotonic() - started < 0.3 + MARGIN_S
    assert not multiprocessing.active_children()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _state() -> dict[str, Any]:
    """What a check must leave as it found it."""
    return {
        "signal handlers": {n: signal.getsignal(n) for n in signal.valid_signals()},
        "streams": (sys.stdout, sys.stderr),
        "sys.modules": dict(sys.modules),
        "ppo_clip": dict(vars(ppo_clip)),
        "numpy": dict(vars(np)),
        "numpy error state": np.geterr(),
        "numpy print options": np.get_printoptions(),
        "warning filters": list(warnings.filters),
        "working directory": os.getcwd(),
    }


def changes_everything(logp_new, logp_old, advantages, eps=0.2):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, 0)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - a learner's careless line
    sys.modules.pop("ppo_clip", None)
    sys.modules["json"] = None
    ppo_clip.clip_breakdown = None
    np.mean = None
    np.seterr(all="raise")
    np.set_printoptions(precision=2)
    warnings.simplefilter("error")
    os.chdir(os.sep)
    return 0.0


@pytest.mark.parametrize("function", [changes_everything, endless])
def test_the_process_is_left_as_it_was_found(function):
    """Also someone else's SIGALRM handler and running timer (pytest-timeout uses both)."""
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    try:
        before = _state()
        result = check_loss(function, time_limit_s=QUICK_LIMIT_S)
        after = _state()
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert result.findings
    for name, value in before.items():
        assert after[name] == value, name
    assert 25.0 < remaining <= 30.0
    assert not fired


def test_the_reference_answers_do_not_follow_a_replaced_module(monkeypatch):
    monkeypatch.setattr(ppo_clip, "ppo_clip_loss", learner_loss("sign"))
    monkeypatch.setattr(ppo_clip, "clip_breakdown", lambda *args, **kwargs: None)
    assert check_loss(ppo_clip.ppo_clip_loss).mistakes == ("sign",)
    assert check_loss(learner_loss()).passed


def test_outside_the_main_thread_a_function_is_stopped_too():
    results = []
    worker = threading.Thread(
        target=lambda: results.append(timed_check(swallows_everything, time_limit_s=QUICK_LIMIT_S))
    )
    worker.start()
    worker.join(QUICK_LIMIT_S + MARGIN_S)
    assert results, "the check did not return"
    result, _ = results[0]
    assert result.mistakes == ("timeout",)
    assert "The checker stopped it" in result.findings[0].message


def test_printed_output_is_captured_and_shortened(capfd):
    """From Python's streams and from file descriptors 1 and 2: ``os.write`` and a shell's
    output reached the notebook past the capture, once per batch."""

    def chatty(logp_new, logp_old, advantages, eps=0.2):
        print("x" * 200_000)
        os.write(1, b"one\n")
        os.write(2, b"two\n")
        os.system("echo shell")
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    result = check_loss(chatty)
    assert capfd.readouterr() == ("", "")
    assert result.passed
    calls, per_call = len(battery()), len("x" * 200_000 + "\none\ntwo\nshell\n")
    numbers = {str(per_call * calls), str(calls), str(sandbox.OUTPUT_LIMIT)}  # all, calls, cut
    assert numbers <= set(re.findall(r"\d+", result.printed))
    assert f"{'x' * 300!r}" in result.printed
    assert len(str(result)) < 2000


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting for its parent does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_timeout_on_the_largest_batch_is_a_note_and_no_process_outlives_the_check(tmp_path):
    """A ``sleep 600`` started by the function, then a loop, outlived the check."""
    started = tmp_path / "pids"

    def starts_processes(logp_new, logp_old, advantages, eps=0.2):
        with started.open("a") as pids:
            print(subprocess.Popen(["sleep", "600"]).pid, file=pids)
        while len(advantages) > 1000:  # on the largest batch: never returns
            pass
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    result, seconds = timed_check(starts_processes, time_limit_s=QUICK_LIMIT_S)
    assert seconds < QUICK_LIMIT_S + MARGIN_S
    assert result.passed
    assert result.note_keys == ("timeout",)
    assert "batch '4096 tokens'" in result.notes[0].message
    pids = [int(pid) for pid in started.read_text().split()]
    assert len(pids) > 1  # calls that returned, and the one stopped
    deadline = time.monotonic() + MARGIN_S
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [pid for pid in pids if alive(pid)]


def test_the_summary_never_raises_and_keeps_to_the_time_limits():
    started = time.monotonic()
    summary = exercise_summary(
        endless, _raises(KeyboardInterrupt), sleeps, time_limit_s=QUICK_LIMIT_S
    )
    assert time.monotonic() - started < 2 * QUICK_LIMIT_S + MARGIN_S
    text = str(summary)
    assert "Exercises passed (core batches): 0 of 3" in text
    assert text.count("Your function did not return in time") == 2
    assert "Your function raised an error" in text
    assert text.count("robustness: not checked (the check stopped at the time limit)") == 2
    with pytest.raises(TypeError, match="concept_questions"):
        exercise_summary(endless, endless, endless, [3])


# --------------------------------------------------------------------------
# The battery and the variants
# --------------------------------------------------------------------------


def test_battery_covers_the_contracts_edges():
    batches = {b.name: b for b in battery()}
    edge = batches["ratios exactly on the band's edges"]
    assert edge.breakdown.ratio[0] == 1.2, "numpy's exp lands on the edge, on any CPU"
    assert edge.breakdown.ratio[1] == 0.8
    assert not edge.breakdown.is_clipped.any()
    log_ratio = edge.logp_new - edge.logp_old
    ways = {
        "math.exp": np.array([math.exp(x) for x in log_ratio]),
        "divided probabilities": np.exp(edge.logp_new) / np.exp(edge.logp_old),
    }
    clipped_another_way = np.zeros(2, dtype=bool)
    for ratio in ways.values():  # sample 0 has A > 0 (edge 1.2), sample 1 has A < 0 (edge 0.8)
        clipped_another_way |= [ratio[0] > 1.2, ratio[1] < 0.8]
    assert (edge.undecided[:2] == clipped_another_way).all(), "either verdict where they differ"
    assert not any(b.undecided.any() for b in battery() if b is not edge)
    overflow = batches["A = 0 with an overflowing ratio"].breakdown
    assert np.isinf(overflow.ratio[0])
    assert overflow.advantages[0] == 0
    assert batches["A < 0 with an overflowing ratio"].answers["loss"] == np.inf
    zero = batches["advantages of exactly 0"].breakdown
    outside = (zero.advantages == 0) & zero.outside_band
    assert (zero.ratio[outside] > 1.2).sum() == 2
    assert (zero.ratio[outside] < 0.8).sum() == 1
    assert {b.eps for b in battery()} >= {0.0, 0.2, 1.0}
    assert min(b.n for b in battery()) == 1
    assert max(b.n for b in battery()) == 4096
    assert batches["advantages with a nonzero mean"].advantages.mean() == 4.0
    assert [b.name for b in battery() if b.read_only] == ["random batch"]
    assert len({b.name for b in battery()}) == len(battery())
    for batch in battery():
        assert 0 <= batch.eps <= 1
        for logp in (batch.logp_new, batch.logp_old):
            assert ((logp >= -1000) & (logp <= 0)).all(), batch.name


def test_either_verdict_is_accepted_on_an_undecided_sample():
    """Where another exp could put a ratio on the other side of an edge, both answers pass."""
    edge = next(b for b in battery() if b.name == "ratios exactly on the band's edges")
    batch = CheckBatch("copy", "", edge.arrays, edge.extras)
    batch.__dict__["undecided"] = np.array([True, True, False])  # as math.exp may make them
    fractions = sorted({float(v[0]) for v in predict(batch, "clip_fraction").values})
    assert fractions == [0.0, 1 / 3, 2 / 3]
    gradients = predict(batch, "grad").values
    for sample in (0, 1):
        entries = {float(v[sample]) for v in gradients}
        assert entries == {0.0, float(edge.answers["grad"][sample])}
    assert all(v[2] == edge.answers["grad"][2] for v in gradients)


def test_robustness_batches_are_float64s_edges_and_the_largest_batch():
    for batch in battery():
        edges = bool(np.isinf(batch.breakdown.ratio).any() or batch.underflows.any())
        assert (batch.role == "robustness") == (edges or batch.n > 1000), batch.name
        assert bool(batch.further) == (batch.role == "robustness")
    assert [b.role for b in battery()] == ["core"] * CORE + ["robustness"] * ROBUST
    assert battery("robustness")[2].further == UNDERFLOW_LESSON


def test_the_lessons_name_sections_of_the_numerics_notebook_as_they_are():
    numerics = [
        path
        for path in sorted(NOTEBOOK.parent.glob("*.ipynb"))
        if "Numerics and the RLHF setting" in nbformat.read(path, as_version=4).cells[0].source
    ]
    assert len(numerics) == 1
    assert f"notebook {int(numerics[0].name[:2])}" == NUMERICS_NOTEBOOK
    headings = {
        " ".join(line.lstrip("# ").replace("`", "").split())
        for cell in nbformat.read(numerics[0], as_version=4).cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("## ")
    }
    for lesson in (OVERFLOW_LESSON, UNDERFLOW_LESSON, TOKENS_LESSON):
        section, title = re.fullmatch(r"notebook \d+, section (\d+) \((.*)\)", lesson).groups()
        assert f"{section}. {title}" in headings, lesson


def test_the_clip_fractions_trl_story_is_where_its_finding_says():
    """A clip fraction counting r*A < clip(r)*A is told of notebook 2's TRL 0.16 story."""
    cited = re.search(r"notebook (\d+), ([^)]*)\)", IN_EXERCISE["max_for_min", "clip_fraction"][1])
    path = next(NOTEBOOK.parent.glob(f"{int(cited[1]):02d}_*.ipynb"))
    text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    assert_states(text, f"## {cited[2]}\n", "TRL 0.16", "rA < \\operatorname{clip}(r)A")


# --------------------------------------------------------------------------
# Concept questions
# --------------------------------------------------------------------------

ANSWERS = {"favourable": 0, "wrong_way": 1, "why_min": 2, "first_update": 0}
#: Where a sentence ends: a full stop, question or exclamation mark before a capital, or at the end.
SENTENCE_END = r"[.?!](?=\s+[A-Z]|$)"


@pytest.mark.parametrize("key", list(ANSWERS))
def test_the_right_option_is_explained_and_a_wrong_one_names_the_answer(key):
    question = concept_questions()[key]
    assert question.answer == ANSWERS[key]
    question.choose(question.answer)
    feedback = html.unescape(question.feedback.value)
    assert f"Right. {question.explanation}" in feedback
    assert question.right_first_time
    assert question.outcome == "right at the first try"
    question = concept_questions()[key]
    wrong = (question.answer + 1) % len(question.options)
    question.choice.value = wrong  # what a click does
    feedback = html.unescape(question.feedback.value)
    assert feedback.count("Not quite. ") == 1
    assert "Right." not in feedback
    assert f"The answer is {question.option_text(question.answer).rstrip('.')}." in feedback
    assert question.explanation in feedback
    assert not question.right_first_time
    assert question.outcome == "not yet right"
    question.choose(question.answer)
    assert question.outcome == "right after 2 tries"


def test_every_wrong_option_has_a_note_on_one_line_and_every_explanation_two_sentences():
    """A radio button's label does not wrap cleanly: a long one overlaps the next option."""
    explanations = {**EXPLANATIONS, **{key: text for key, (_, text) in IN_EXERCISE.items()}}
    for key, question in concept_questions().items():
        for index, option in enumerate(question.options):
            assert option.note or index == question.answer, option.label
            assert len(question.option_text(index)) <= 100, question.option_text(index)
        explanations[key] = question.explanation
    for key, text in explanations.items():
        assert len(re.findall(SENTENCE_END, text)) <= 2, (key, text)


@pytest.mark.parametrize(
    ("key", "ratio", "advantage"), [("favourable", 1.3, 2.0), ("wrong_way", 1.5, -1.0)]
)
def test_a_single_sample_question_quotes_the_modules_numbers(key, ratio, advantage):
    sample = ppo_clip.ratio_sweep([ratio], advantage)  # a batch of N = 1: no exp, no last bit
    question = concept_questions()[key]
    right = question.options[question.answer].label
    assert_states(right, rounded(sample.grad[0]))
    assert_states(
        question.explanation,
        f"r = {rounded(ratio)}",
        f"clip(r)*A = {rounded(sample.clipped_term[0])}",
        rounded(sample.grad[0]),
    )


def test_why_min_is_decided_by_the_clip_only_gradient():
    strayed = ppo_clip.ratio_sweep([0.5], 1.0)  # r = 0.5, A = +1, N = 1: no exp, no last bit
    clip_only = ppo_clip.objective_terms(strayed, "clip_only")[1]
    assert (clip_only[0], strayed.grad[0], strayed.is_clipped[0]) == (0.0, -0.5, False)
    question = concept_questions()["why_min"]
    assert question.options[question.answer].claims == {"clip_only_grad": 0.0, "is_clipped": False}
    assert_states(question.explanation, "-r*A/N = -0.5", "clip(0.5)*A = 0.8, gradient 0")


def test_the_first_update_is_the_policy_gradient_and_later_ones_are_not():
    example = ppo_clip.worked_example()
    n = len(example.advantages)
    fresh = ppo_clip.ppo_clip_grad(example.logp_old, example.logp_old, example.advantages)
    np.testing.assert_array_equal(fresh, -example.advantages / n)
    moved = ppo_clip.ppo_clip_grad(*example)
    assert_states(
        concept_questions()["first_update"].explanation,
        vector(-example.advantages / n, each=rounded),
        vector(moved, each=rounded),
    )


def test_no_text_says_every_epoch_starts_at_r_equal_one():
    """Only the first update on a freshly collected batch starts at r = 1."""
    texts = [
        text
        for question in concept_questions().values()
        for text in [question.prompt, question.explanation]
        + [part for option in question.options for part in (option.label, option.note)]
    ]
    texts += [*EXPLANATIONS.values(), *(text for _, text in IN_EXERCISE.values())]
    joined = " ".join(texts)
    assert "first update on a freshly collected batch" in joined
    for wrong in ("epoch starts", "every epoch", "of an epoch", "this epoch"):
        assert wrong not in joined


def test_a_question_needs_exactly_one_right_option():
    facts = {"is_clipped": True, "grad": 0.0}
    options = {"clipped": ({"is_clipped": True}, ""), "grad 0": ({"grad": 0.0}, "")}
    with pytest.raises(ValueError, match="exactly one right option"):
        ConceptQuestion("x", facts, "x", "?", options, "")
    yes_no = {"yes": ({"fact": True}, ""), "no {fact}": ({"fact": False}, "")}
    question = ConceptQuestion("y", {"fact": False}, "y", "?", yes_no, "")
    assert (question.answer, question.options[1].label) == (1, "no False")


def test_a_question_starts_unanswered_and_displays_as_html_where_widgets_do_not_run():
    question = concept_questions()["favourable"]
    bundle = question._repr_mimebundle_()
    assert WIDGET_VIEW_MIME in bundle
    page = bundle["text/html"]
    assert "A sample has A = +2 and ratio r = 1.3" in page
    assert "<li>(a) Clipped; the gradient is 0.</li>" in page
    assert "Show the answer" in page
    assert bundle["text/plain"].startswith("Concept question: A sample has A = +2")
    assert "RadioButtons" not in bundle["text/plain"]
    assert "ppo-quiz" in question._dom_classes  # the browser tests look for it
    assert question.choice.value is None
    assert question.outcome == "not answered"


# --------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------


def test_summary_of_a_finished_notebook():
    questions = concept_questions()
    for key, question in questions.items():
        question.choose(question.answer if key != "wrong_way" else 0)
    questions["wrong_way"].choose(questions["wrong_way"].answer)
    functions = (textbook_loss, learner_clip_fraction("sign_blind"), learner_grad())
    text = exercise_summary(*functions, questions)
    results = loss, fraction, grad = [check(*row) for row in zip(KINDS, functions, strict=True)]
    assert [result.passed for result in results] == [True, False, True]
    assert (loss.note_keys, grad.matching_robustness) == (("nan_overflow",), ROBUST)
    lines = text.splitlines()
    assert whole_numbers(lines[1]) == [2, 3]  # passed, of three
    assert fraction.findings[0].title in text  # what the failed one needs
    for result in results:  # each line says how its exercise did, with the numbers
        said = "\n".join(line for line in lines if result.exercise in line)
        assert CORE in whole_numbers(said) or not result.passed
        assert all(note.title in text for note in result.notes)
    at = next(i for i, line in enumerate(lines) if grad.exercise in line)
    assert ROBUST in whole_numbers(lines[at + 1])  # the gradient's robustness line
    answered = next(line for line in lines if "Concept questions" in line)
    assert whole_numbers(answered) == [len(ANSWERS) - 1, len(ANSWERS)]  # right first, of all
    wrong_way = questions["wrong_way"]
    assert re.search(rf"{re.escape(wrong_way.title)}\s+{re.escape(wrong_way.outcome)}", text)
    assert whole_numbers(wrong_way.outcome) == [2]  # tries


def test_summary_with_empty_bodies():
    def empty(logp_new, logp_old, advantages, eps=0.2):
        raise NotImplementedError

    text = str(exercise_summary(empty, empty, empty))
    assert text.count("not implemented yet") == 3
    assert "robustness" not in text
    assert "Concept questions" not in text


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------

#: The three exercises' functions, by name.
EXERCISE_NAMES = tuple(FUNCTION_NAMES.values())


def _notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def _exercise_cells(notebook) -> dict[str, Any]:
    cells = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for name in EXERCISE_NAMES:
            if cell.source.lstrip().startswith(f"def {name}("):
                cells[name] = cell
    return cells


def test_exercise_cells_have_the_modules_signatures_and_empty_bodies():
    notebook = _notebook()
    cells = _exercise_cells(notebook)
    assert set(cells) == set(EXERCISE_NAMES)
    for name, cell in cells.items():
        function = ast.parse(cell.source).body[0]
        assert isinstance(function, ast.FunctionDef)
        params = [arg.arg for arg in function.args.args]
        signature = inspect.signature(getattr(ppo_clip, name))
        assert params == list(signature.parameters)
        assert ast.literal_eval(function.args.defaults[0]) == signature.parameters["eps"].default
        # Every stub is the same: a docstring, then `raise NotImplementedError`.
        assert len(function.body) == 2, f"{name}'s body is not empty"
        assert ast.unparse(function.body[1]) == "raise NotImplementedError"
        assert "replace the next line with your code" in cell.source
        following = notebook.cells[notebook.cells.index(cell) + 1]
        check_name = {"ppo_clip_loss": "check_loss", "clip_fraction": "check_clip_fraction"}
        assert following.source == f"{check_name.get(name, 'check_grad')}({name})"
    assert "exercise_summary(" in notebook.cells[-2].source


def test_the_notebook_shows_every_concept_question_once():
    shown = [
        match
        for cell in _notebook().cells
        if cell.cell_type == "code"
        for match in re.findall(r'^questions\["(\w+)"\]$', cell.source)
    ]
    assert sorted(shown) == sorted(concept_questions())


def _markdown(cell: int) -> str:
    """One markdown cell's text with every run of whitespace (line breaks too) as one space."""
    return " ".join(_notebook().cells[cell].source.split())


def test_the_introduction_states_the_battery_the_time_limit_and_the_tolerances():
    core, robust = battery("core"), battery("robustness")
    assert_states(
        _markdown(0),
        f"{len(core)} core batches",
        f"a batch of {max(b.n for b in core)} samples",
        f"{len(robust)} robustness batches",
        f"a batch of {max(b.n for b in robust)} samples",
        f"a time limit of {exact(TIME_LIMIT_S)} s",
        f"the section of {NUMERICS_NOTEBOOK}",
    )

    def power_of_ten(value: float) -> str:
        exponent = round(math.log10(value))
        assert value == 10.0**exponent
        return f"$10^{{{exponent}}}$"

    rtol, atol = TOLERANCES["float64"]
    close = TOLERANCES["precision"][0]
    assert_states(
        _markdown(0),
        f"relative tolerance of {power_of_ten(rtol)} and an absolute one of {power_of_ten(atol)}",
        f"within {power_of_ten(close)} relative",
    )


def test_the_worked_examples_answers_are_the_modules():
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    first, second = np.flatnonzero(example.is_clipped)
    assert_states(
        _markdown(4),
        f"${vector(example.ratio, each=rounded)}$",
        f"${vector(example.advantages, each=rounded)}$",
        f"Samples {first} and {second}",
        f"${rounded(example.loss)}$",
        f"${rounded(example.clip_fraction)}$",
        f"${vector(example.grad, each=rounded)}$",
    )


def test_things_to_try_names_notebook_2s_disagreeing_preset_exactly():
    stepper = pytest.importorskip(
        "ppo_viz.stepper", reason="notebook 2's module does not import", exc_type=ImportError
    )
    label = stepper.PRESETS["two clip fractions"][0]
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    assert example.clip_fraction == example.band_fraction
    agree = f"{rounded(example.clip_fraction)} and {rounded(example.band_fraction)}"
    assert_states(_markdown(-1), agree, f"“{label}” preset")


@pytest.mark.notebook
def test_notebook_runs_with_empty_bodies():
    notebook, _ = run_committed(NOTEBOOK)
    assert not output_problems(notebook)
    printed = printed_text(notebook)
    assert "Exercises passed (core batches): 0 of 3" in printed
    assert printed.count("not implemented yet") == 3
    shown = [
        output["data"].get("text/html", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "execute_result"
    ]
    assert sum(": not implemented yet." in page for page in shown) == 3
    quizzes = [page for page in shown if re.search(r'class="[^"]*\bppo-quiz\b', page)]
    assert len(quizzes) == len(ANSWERS)


@pytest.mark.notebook
def test_notebook_runs_clean_with_correct_bodies():
    """Each body the reference solution, ppo_clip's function (learner-style numpy bodies pass the
    same checks: the ``learner`` rows of :data:`CASES`)."""
    notebook = _notebook()
    for name, cell in _exercise_cells(notebook).items():
        head = cell.source.lstrip().splitlines()[0]  # the exercise's def line
        cell.source = f"{head}\n    return ppo_clip.{name}(logp_new, logp_old, advantages, eps)"
    execute_notebook(notebook)
    assert not output_problems(notebook)
    lines = printed_text(notebook).splitlines()
    passed = next(line for line in lines if "passed" in line and "of 3" in line)
    assert whole_numbers(passed) == [3, 3], lines
    assert [whole_numbers(line) for line in lines if "robustness" in line] == [[ROBUST]] * 3


# --------------------------------------------------------------------------
# Half-done rules, precision, and errors that have a known fix
# --------------------------------------------------------------------------


def test_a_float32_clip_fraction_is_not_blamed_for_an_edge_its_rounding_decides():
    result = check_clip_fraction(learner_clip_fraction("float32_math"))
    assert result.mistakes in ((), ("precision",)), str(result)
    # Where this CPU's float32 exp flips an edge, the finding says so, not "0 digits agree".
    assert "about 0 significant digits" not in str(result)
    if result.mistakes and "significant digits" not in str(result):
        assert "moved a ratio to the other side of the band's edge" in str(result)


def test_the_generic_message_lists_each_differing_sample_with_r_and_a():
    def scaled_grad(logp_new, logp_old, advantages, eps=0.2):
        grad = ppo_clip.ppo_clip_grad(logp_new, logp_old, advantages, eps)
        return grad * np.where(np.arange(len(grad)) % 2 == 1, 1.5, 1.0)  # odd entries off

    result = check_grad(scaled_grad)
    assert result.mistakes == ("mismatch",), str(result)
    evidence = result.findings[0].evidence
    batch = next(b for b in battery("core") if b.label in evidence)
    breakdown, reference_grad = batch.breakdown, batch.answers["grad"]
    listed = [int(i) for i in re.findall(r"sample (\d+) \(r = ", evidence)]
    differing = [i for i in range(1, batch.n, 2) if reference_grad[i] != 0][:8]
    assert listed[1:] == differing  # the first is the evidence's own sample
    for i in differing:
        assert (
            f"r = {rounded(breakdown.ratio[i])}, A = {rounded(breakdown.advantages[i])}" in evidence
        )
