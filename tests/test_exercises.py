"""Notebook 6's checker: it passes right answers and names each mistake (and notebooks 7 to 9's:
:func:`assert_diagnosis` reads every check's card).

Every wrong implementation below is a learner-style numpy function with deliberate mistakes;
the checker must report exactly those mistakes' keys, and no mistake where a placeholder
(``return 0.0``) only happens to equal a combination of them.  Correct code (the module itself, a
careful learner's, the plain-Python reference with ``math.exp``) passes with no note, on this CPU
and under the simulated other ones; the textbook numpy loss, the PyTorch-style form and a
log-space clip pass the core batches and get one "going further" note.  One table
(:data:`CASES`) holds every function handed to a check with the diagnosis it must get, run
through one test.  Pairs of mistakes and the sandbox: ``test_exercise_checker.py``; the battery,
the questions and the notebook: ``test_exercise_notebook.py``.
"""

from __future__ import annotations

import html
import math
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import reference

import ppo_clip
from ppo_viz.exercises import (
    battery,
    check,
)
from ppo_viz.exercises.advice import EXPLANATIONS, words
from ppo_viz.exercises.battery import (
    FUNCTION_NAMES,
    OVERFLOW_LESSON,
    TOKENS_LESSON,
)
from ppo_viz.exercises.mistakes import EXERCISES, ROBUSTNESS_MISTAKES, VALUE_MISTAKES
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


def _inputs(logp_new, logp_old, advantages, eps, mistakes):
    """eps, the advantages and the ratio as the learner's code has them."""
    a = np.asarray(advantages, dtype=float)
    if "normalized" in mistakes:
        a = (a - a.mean()) / (a.std() + 1e-8)
    elif "normalized_torch_style" in mistakes:  # unbiased std, no epsilon
        a = (a - a.mean()) / a.std(ddof=1)
    return 0.2 if "fixed_eps" in mistakes else eps, a, _ratio(logp_new, logp_old, mistakes)


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
        eps, a, r = _inputs(logp_new, logp_old, advantages, eps, mistakes)
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
        eps, a, r = _inputs(logp_new, logp_old, advantages, eps, mistakes)
        clipped = _is_clipped(r, a, eps, mistakes)
        if "no_mean" in mistakes:
            return int(np.count_nonzero(clipped))
        return float(np.mean(clipped))

    return clip_fraction


def learner_grad(*mistakes: str) -> Callable[..., Any]:
    def ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2):
        eps, a, r = _inputs(logp_new, logp_old, advantages, eps, mistakes)
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
    "float32_math": "precision",
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

#: Each kind's learner codes, one mistake each, in :func:`learner_loss`'s (and the others') words.
CODES = {
    "loss": "sign no_mean normalized mutated ratio_inverted no_exp fixed_eps unclipped clip_only "
    "max_for_min clip_swapped min_of_ratios no_negative_branch upper_sign_blind float32_math "
    "normalized_torch_style nan_overflow ratio_underflow non_strict",
    "clip_fraction": "no_mean sign_blind non_strict ratio_inverted no_exp fixed_eps max_for_min "
    "zero_advantage min_of_ratios no_negative_branch upper_sign_blind zero_advantage_else "
    "normalized normalized_torch_style mutated ratio_underflow",
    "grad": "sign no_mean non_strict minus_A ratio_inverted no_exp fixed_eps unclipped clip_only "
    "max_for_min mutated min_of_ratios no_negative_branch upper_sign_blind float32_math sign_blind "
    "grad_on_clipped clipped_ratio_on_clipped normalized normalized_torch_style nan_overflow "
    "ratio_underflow",
}
#: Where a kind names another key than :data:`KEY_OF`'s: on the edge both terms of the loss's min
#: are equal (nothing to name); a gradient zero outside the band on both sides is clip-only's.
KIND_KEY_OF = {("loss", "non_strict"): "", ("grad", "sign_blind"): "clip_only"}


def named(kind: str, code: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The core mistakes and the notes the checker names for ``code`` (a float64 edge's note)."""
    keys = tuple(KIND_KEY_OF.get((kind, code), KEY_OF.get(code, code)).split())
    return ((), keys) if set(keys) & set(ROBUSTNESS_MISTAKES) else (keys, ())


#: (kind, how the learner's code is wrong, the core mistakes and the notes the checker names)
WRONG_IMPLEMENTATIONS = [(k, c, *named(k, c)) for k in CODES for c in CODES[k].split()]


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


def _defined(source: str, name: str = "ppo_clip_loss") -> Callable[..., Any]:
    """Function ``name`` of a learner's cell ``source`` (numpy imported as np)."""
    namespace = {"np": np}
    exec(source, namespace)
    return namespace[name]


def _learner_cell(body: str) -> Callable[..., Any]:
    """A learner's cell defining ``ppo_clip_loss`` whose last line is ``body``."""
    head = "def ppo_clip_loss(logp_new, logp_old, a, eps=0.2):\n    r = np.exp(logp_new - logp_old)"
    return _defined(f"{head}\n    {body}\n")


def _constant(value):
    return lambda logp_new, logp_old, advantages, eps=0.2: value


def raising(error_factory):
    def function(logp_new, logp_old, advantages, eps=0.2):
        raise error_factory()

    return function


class BrokenMessageError(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def _empty(body: str) -> Callable[..., Any]:
    """The template (``raise NotImplementedError``), or its body emptied: a docstring and
    ``body``."""
    head = 'def empty(logp_new, logp_old, advantages, eps=0.2):\n    """Doc."""'
    return _defined(f"{head}\n    {body}\n", "empty")


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
    "SystemExit": (raising(lambda: SystemExit(3)), "raised SystemExit: 3"),
    "KeyboardInterrupt": (raising(KeyboardInterrupt), "raised KeyboardInterrupt"),
    "broken __str__": (raising(BrokenMessageError), "raised BrokenMessageError: <its message"),
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
    values = {"precision", *(m for g in own.groups for m in g)} if own else {"precision"}
    values |= set(VALUE_MISTAKES.get(result.kind, ()))
    for found in result.findings + result.notes:
        title, explanation = words(found.key, result.kind if found.key in values else "")
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
