"""Exercises with checks that teach (notebook 5).

A learner writes their own ``ppo_clip_loss``, ``clip_fraction`` and
``ppo_clip_grad`` and hands each to :func:`check_loss`,
:func:`check_clip_fraction` or :func:`check_grad`.  The checker runs the
function on a battery of batches (the worked example, ratios exactly on the
band's edges, an overflowing ratio with ``A = 0``, read-only inputs, ``N = 1``
up to ``N = 257``, ``eps = 0`` and ``eps = 1``, advantages with a nonzero mean)
and compares every answer with :mod:`ppo_clip`, the reference solution.

When an answer is wrong, the checker does not stop at "wrong": it names the
mistake by its symptom.  Each common mistake is described as a *variant* of
the reference, computed from :func:`ppo_clip.clip_breakdown` (the loss with its
sign flipped, without the ``1/N``, with sign-blind clipping, with ``>=``
instead of ``>``, ...).  The learner's answers are matched against those
variants, single mistakes first, then pairs and triples, so an answer with
two mistakes gets both named.  Problems that show in other ways (an
exception, a wrong return type, changed inputs, NaN where an overflowing
ratio meets ``A = 0``) are recognised directly.

:class:`ConceptQuestion` is a short multiple-choice question whose right answer
is decided by :mod:`ppo_clip` and which explains it after a choice;
:func:`exercise_summary` runs every check and gives a text a learner can
paste to a teacher.

>>> import ppo_clip
>>> check_loss(ppo_clip.ppo_clip_loss).passed
True
>>> def loss_without_minus(logp_new, logp_old, advantages, eps=0.2):
...     return -ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
>>> check_loss(loss_without_minus).mistakes
('sign',)
"""

from __future__ import annotations

import html
import itertools
import math
import numbers
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Literal

import ipywidgets as widgets
import numpy as np
from numpy.typing import NDArray

import ppo_clip
from ppo_viz.display import App, message_html

__all__ = [
    "Batch",
    "CheckResult",
    "ConceptQuestion",
    "ExerciseSummary",
    "Finding",
    "battery",
    "check",
    "check_clip_fraction",
    "check_grad",
    "check_loss",
    "concept_questions",
    "exercise_summary",
]

Kind = Literal["loss", "clip_fraction", "grad"]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: The name of the learner's function for each kind of exercise.
FUNCTION_NAMES: dict[str, str] = {
    "loss": "ppo_clip_loss",
    "clip_fraction": "clip_fraction",
    "grad": "ppo_clip_grad",
}

#: Tolerances: answers match the reference when ``np.isclose`` with these holds.
RTOL, ATOL = 1e-9, 1e-12
#: Looser tolerances for the normalized-advantage variant (codes add 1e-8 to the std).
NORMALIZED_RTOL, NORMALIZED_ATOL = 1e-6, 1e-9


# --------------------------------------------------------------------------
# The battery of batches
# --------------------------------------------------------------------------


def _frozen(values: Iterable[float]) -> FloatArray:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Batch:
    """One test batch: inputs, ``eps``, and what it is there to test (``lesson``).

    ``read_only`` batches hand the learner read-only arrays; every other batch
    hands out fresh writable copies and checks afterwards that they are unchanged.
    """

    name: str
    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float
    lesson: str
    read_only: bool = False

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.advantages.shape[0])

    @property
    def label(self) -> str:
        """``batch 'name' (N = .., eps = ..)``, for messages."""
        return f"batch '{self.name}' (N = {self.n}, eps = {self.eps:g})"

    def inputs(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Fresh copies of the three arrays for one call (read-only if ``read_only``)."""
        copies = (self.logp_new.copy(), self.logp_old.copy(), self.advantages.copy())
        if self.read_only:
            for array in copies:
                array.setflags(write=False)
        return copies

    @cached_property
    def breakdown(self) -> ppo_clip.ClipBreakdown:
        """The reference breakdown of this batch."""
        return ppo_clip.clip_breakdown(self.logp_new, self.logp_old, self.advantages, self.eps)

    @cached_property
    def has_overflowing_zero_advantage(self) -> BoolArray:
        """Samples with ``A == 0`` whose ratio overflowed to ``inf``."""
        b = self.breakdown
        return (b.advantages == 0) & np.isinf(b.ratio)

    @cached_property
    def underflows(self) -> BoolArray:
        """Samples where ``exp(logp_new)`` and ``exp(logp_old)`` both underflow to 0.

        Code that divides probabilities gets ``0 / 0 = NaN`` as their ratio.
        """
        with np.errstate(under="ignore"):
            return (np.exp(self.logp_new) == 0) & (np.exp(self.logp_old) == 0)

    def reference(self, kind: Kind) -> float | FloatArray:
        """What :mod:`ppo_clip` returns for this batch."""
        function = {
            "loss": ppo_clip.ppo_clip_loss,
            "clip_fraction": ppo_clip.clip_fraction,
            "grad": ppo_clip.ppo_clip_grad,
        }[kind]
        return function(self.logp_new, self.logp_old, self.advantages, self.eps)

    def normalized_breakdown(self, ddof: int) -> ppo_clip.ClipBreakdown | None:
        """The breakdown with advantages ``(A - mean) / std(ddof)``; None if std is 0."""
        if self.n <= ddof:
            return None
        std = float(self.advantages.std(ddof=ddof))
        if not std > 0:
            return None
        normalized = (self.advantages - self.advantages.mean()) / std
        return ppo_clip.clip_breakdown(self.logp_new, self.logp_old, normalized, self.eps)


def _from_probabilities(
    name: str,
    p_new: Sequence[float],
    p_old: Sequence[float],
    advantages: Sequence[float],
    eps: float,
    lesson: str,
) -> Batch:
    return Batch(
        name, _frozen(np.log(p_new)), _frozen(np.log(p_old)), _frozen(advantages), eps, lesson
    )


def _random_batch(name: str, n: int, eps: float, seed: int, *, read_only: bool = False) -> Batch:
    rng = np.random.default_rng(seed)
    logp_old = rng.uniform(-4.0, -0.5, n)
    logp_new = np.minimum(logp_old + rng.normal(0.0, 0.35, n), 0.0)
    advantages = rng.normal(0.4, 1.2, n)
    lesson = "random ratios around 1 and advantages of both signs"
    if read_only:
        lesson = "the input arrays are read-only, so a function that writes into them fails"
    return Batch(
        name,
        _frozen(logp_new),
        _frozen(logp_old),
        _frozen(advantages),
        eps,
        lesson,
        read_only=read_only,
    )


@cache
def battery() -> tuple[Batch, ...]:
    """Every batch a check runs, smallest first within the hand-made ones."""
    example = ppo_clip.worked_example()
    return (
        Batch(
            "worked example",
            _frozen(example.logp_new),
            _frozen(example.logp_old),
            _frozen(example.advantages),
            example.eps,
            "the contract's worked example: ratios [1.4, 1.1, 0.6, 0.9]; samples 0 and 2 "
            "are clipped",
        ),
        _from_probabilities(
            "one sample",
            [0.3],
            [0.6],
            [2.5],
            0.2,
            "a batch of one sample: r = 0.5 although A > 0, a move the unfavourable way, "
            "so it is not clipped",
        ),
        _from_probabilities(
            "ratios exactly on the band's edges",
            [0.6, 0.4, 0.5],
            [0.5, 0.5, 0.5],
            [1.5, -2.0, 0.7],
            0.2,
            "r = 1.2 with A > 0 and r = 0.8 with A < 0, exactly (in float64 "
            "exp(log(0.6) - log(0.5)) is 1.2): on the edge a sample is not clipped",
        ),
        _from_probabilities(
            "eps = 0",
            [0.5, 0.5, 0.55, 0.45, 0.55, 0.45],
            [0.5] * 6,
            [1.0, -1.0, 1.0, -1.0, -1.0, 1.0],
            0.0,
            "eps = 0: every sample that moved the favourable way is clipped; r == 1 exactly is not",
        ),
        _from_probabilities(
            "eps = 1",
            [0.01, 0.1, 0.5, 0.3, 0.6],
            [0.2] * 5,
            [-1.0, -2.0, 1.0, 0.5, -1.0],
            1.0,
            "eps = 1: the band is [0, 2], so no negative-advantage sample is ever clipped",
        ),
        _from_probabilities(
            "clipping depends on the advantage's sign",
            [0.75, 0.75, 0.25, 0.25],
            [0.5] * 4,
            [1.0, -1.0, 1.0, -1.0],
            0.2,
            "r = [1.5, 1.5, 0.5, 0.5], A = [+1, -1, +1, -1]: all four ratios are outside "
            "the band, but only samples 0 and 3 are clipped",
        ),
        _from_probabilities(
            "advantages with a nonzero mean",
            [0.65, 0.35, 0.52, 0.62, 0.45],
            [0.5] * 5,
            [3.0, 5.0, 4.0, 6.0, 2.0],
            0.2,
            "every advantage is positive (mean 4); they are used as given, never normalized",
        ),
        Batch(
            "A = 0 with an overflowing ratio",
            _frozen([0.0, math.log(0.5), math.log(0.5), math.log(0.3), math.log(0.6)]),
            _frozen([-1000.0, math.log(0.4), math.log(0.6), math.log(0.6), math.log(0.4)]),
            _frozen([0.0, 1.0, -1.0, 0.0, 0.0]),
            0.2,
            "sample 0 has logp_new - logp_old = 1000, so r = exp(1000) overflows to inf, "
            "and A = 0: it must add exactly 0 (inf * 0 is NaN in IEEE arithmetic)",
        ),
        Batch(
            "A < 0 with an overflowing ratio",
            _frozen([0.0, math.log(0.5)]),
            _frozen([-1000.0, math.log(0.5)]),
            _frozen([-1.0, 1.0]),
            0.2,
            "sample 0 has r = inf and A < 0: it is not clipped, so the loss is +inf (the "
            "true float64 value) and its gradient is +inf",
        ),
        Batch(
            "tiny probabilities",
            _frozen([-749.8, -900.1, -999.95]),
            _frozen([-750.0, -900.0, -1000.0]),
            _frozen([1.0, -0.5, 2.0]),
            0.2,
            "log-probabilities near -1000, as for whole sequences in RLHF: exp(logp) "
            "underflows to 0, but exp(logp_new - logp_old) is fine",
        ),
        _random_batch("read-only inputs", 8, 0.2, seed=7, read_only=True),
        _random_batch("random batch", 16, 0.1, seed=11),
        _random_batch("large random batch", 257, 0.2, seed=5),
    )


# --------------------------------------------------------------------------
# The mistakes, described as variants of the reference
# --------------------------------------------------------------------------

#: Mistakes detected by comparing values with a variant of the reference,
#: in the order they are reported.  Which apply to which exercise:
VALUE_MISTAKES: dict[str, tuple[str, ...]] = {
    "loss": ("sign", "no_mean", "sign_blind", "normalized", "ratio_underflow"),
    "clip_fraction": ("no_mean", "sign_blind", "non_strict", "normalized", "ratio_underflow"),
    "grad": (
        "sign",
        "no_mean",
        "sign_blind",
        "non_strict",
        "grad_on_clipped",
        "minus_A",
        "normalized",
        "ratio_underflow",
    ),
}

#: Pairs that describe nothing new together (the gradient of clipped samples is free
#: under "grad_on_clipped", so how clipping is decided does not show).
_REDUNDANT = {
    frozenset({"grad_on_clipped", "sign_blind"}),
    frozenset({"grad_on_clipped", "non_strict"}),
}

_MAX_MISTAKES = 3


@dataclass(frozen=True)
class Prediction:
    """What an implementation with some mistakes returns on one batch.

    ``free`` marks gradient entries the variant makes no claim about (the
    clipped samples, for "non-zero gradient on clipped samples").
    """

    value: float | FloatArray
    breakdown: ppo_clip.ClipBreakdown
    free: BoolArray | None = None
    loose: bool = False


def _clip_decision(b: ppo_clip.ClipBreakdown, *, sign_blind: bool, non_strict: bool) -> BoolArray:
    """Which samples a (possibly mistaken) implementation treats as clipped."""
    if not non_strict:
        return b.outside_band if sign_blind else b.is_clipped
    above, below = b.ratio >= b.upper, b.ratio <= b.lower
    if sign_blind:
        return above | below
    return ((b.advantages > 0) & above) | ((b.advantages < 0) & below)


def predict(batch: Batch, kind: Kind, mistakes: Iterable[str], ddof: int = 0) -> Prediction | None:
    """What an implementation with exactly these ``mistakes`` returns on ``batch``.

    With no mistakes this is :mod:`ppo_clip`'s own answer.  ``ddof`` chooses the
    std of the "normalized" variant.  None when the variant is undefined on the
    batch (normalizing advantages whose std is 0).
    """
    flags = frozenset(mistakes)
    b = batch.normalized_breakdown(ddof) if "normalized" in flags else batch.breakdown
    if b is None:
        return None
    loose = "normalized" in flags
    clipped = _clip_decision(
        b, sign_blind="sign_blind" in flags, non_strict="non_strict" in flags
    ).copy()
    # exp(logp_new) / exp(logp_old) is 0/0 = NaN where both underflow; NaN compares False.
    nan_ratio = batch.underflows if "ratio_underflow" in flags else np.zeros(b.n, dtype=bool)
    clipped &= ~nan_ratio
    per_batch = b.n if "no_mean" in flags else 1
    if kind == "clip_fraction":
        return Prediction(np.count_nonzero(clipped) / b.n * per_batch, b, loose=loose)
    scale = (-1.0 if "sign" in flags else 1.0) * per_batch
    if kind == "loss":
        if nan_ratio.any():
            loss = math.nan
        elif "sign_blind" in flags:  # out-of-band samples all take clip(r)*A: the clip-only loss
            loss = ppo_clip.surrogate_loss(
                batch.logp_new, batch.logp_old, b.advantages, batch.eps, objective="clip_only"
            )
        else:
            loss = b.loss
        return Prediction(scale * loss, b, loose=loose)
    if "minus_A" in flags:  # d(r*A)/dlogp_new taken as A instead of r*A
        unclipped_grad = -b.advantages / b.n
    else:
        unclipped_grad = ppo_clip.objective_terms(b, "unclipped")[1]
    unclipped_grad = np.where(nan_ratio, math.nan, unclipped_grad)
    if "grad_on_clipped" in flags:
        return Prediction(scale * unclipped_grad, b, free=b.is_clipped, loose=loose)
    return Prediction(scale * np.where(clipped, 0.0, unclipped_grad), b, loose=loose)


def _candidate_mistake_sets(kind: Kind) -> list[frozenset[str]]:
    """Every combination of up to three mistakes, fewest first."""
    names = VALUE_MISTAKES[kind]
    sets: list[frozenset[str]] = []
    for size in range(_MAX_MISTAKES + 1):
        for combo in itertools.combinations(names, size):
            chosen = frozenset(combo)
            if not any(pair <= chosen for pair in _REDUNDANT):
                sets.append(chosen)
    return sets


# --------------------------------------------------------------------------
# What the learner is told
# --------------------------------------------------------------------------

TITLES: dict[str, str] = {
    "not_implemented": "Not implemented yet",
    "error": "Your function raised an error",
    "wrong_type": "Wrong return type or shape",
    "sign": "Objective instead of loss (the sign)",
    "no_mean": "Forgot the 1/N",
    "sign_blind": "Counted |r - 1| > eps as clipped",
    "non_strict": "Non-strict comparisons at r = 1 ± eps",
    "grad_on_clipped": "Non-zero gradient on clipped samples",
    "minus_A": "-A/N instead of -r*A/N",
    "normalized": "Normalized the advantages",
    "nan_overflow": "NaN for A = 0 with an overflowing ratio",
    "ratio_underflow": "Ratio computed from probabilities",
    "mutated": "Changed the input arrays",
    "mismatch": "Differs from the reference",
}

_NORMALIZED = (
    "You normalize the advantages ((A - mean) / std). Many PPO codes do that once per "
    "batch before the loss, but this function uses the advantages as given. Normalizing "
    "here shifts them, can flip their signs, and so changes which samples are clipped: "
    "remove it."
)

EXPLANATIONS: dict[str, dict[str, str]] = {
    "sign": {
        "loss": "Your values have the opposite sign of the loss: you return the mean of "
        "min(r*A, clip(r)*A), the objective PPO maximizes. The loss to minimize is its "
        "negative: L = -(1/N) * sum of min(r*A, clip(r)*A).",
        "grad": "Your gradient has the opposite sign. It is the gradient of the loss (the "
        "quantity minimized), so an unclipped sample gets -r*A/N: a positive advantage gives "
        "a negative gradient, and gradient descent raises logp_new.",
    },
    "no_mean": {
        "loss": "Your values are N times the loss: you sum over the batch instead of "
        "averaging. The loss is a mean: multiply the sum by 1/N (or use np.mean), so it does "
        "not grow with the batch size.",
        "clip_fraction": "You return the number of clipped samples, not the fraction. "
        "Divide by N, so the result lies in [0, 1].",
        "grad": "Your gradient is N times too large. The loss is a mean over N samples, so "
        "each sample's gradient carries the 1/N: -r*A/N.",
    },
    "sign_blind": {
        "loss": "Your loss uses clip(r)*A for every sample, as if every sample with "
        "|r - 1| > eps were clipped (or as if the min were missing). For a sample that moved "
        "the unfavourable way (A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps), "
        "min(r*A, clip(r)*A) is r*A, the pessimistic choice: keep np.minimum of both terms.",
        "clip_fraction": "You count every sample with |r - 1| > eps as clipped, whatever the "
        "sign of its advantage. (Stable-Baselines3 and CleanRL log that number, but this "
        "contract counts something else.) A sample is clipped only when A > 0 and "
        "r > 1 + eps, or A < 0 and r < 1 - eps: only then does clipping switch its "
        "gradient off.",
        "grad": "You set the gradient to 0 for every sample with |r - 1| > eps. A sample "
        "outside the band that moved the unfavourable way (A > 0 with r < 1 - eps, or "
        "A < 0 with r > 1 + eps) is not clipped: the min keeps r*A, so its gradient stays "
        "-r*A/N. That is how PPO pulls back a sample that strayed the wrong way.",
    },
    "non_strict": {
        "clip_fraction": "You count a sample whose ratio is exactly on the edge (r = 1 + eps "
        "with A > 0, or r = 1 - eps with A < 0) as clipped. The comparisons are strict: "
        "clipped means r > 1 + eps or r < 1 - eps. With eps = 0 this decides every sample "
        "with r == 1 exactly.",
        "grad": "You zero the gradient of a sample whose ratio is exactly on the edge "
        "(r = 1 + eps with A > 0, or r = 1 - eps with A < 0). The comparisons are strict: "
        "on the edge the sample is not clipped and keeps -r*A/N. With eps = 0 this decides "
        "every sample with r == 1 exactly.",
    },
    "grad_on_clipped": {
        "grad": "Your gradient is not 0 on clipped samples. Where the clipped term wins the "
        "min, it is clip(r)*A = (1 ± eps)*A, a constant that does not depend on logp_new, "
        "so its gradient is 0: use np.where(clipped, 0.0, -r*A/N).",
    },
    "minus_A": {
        "grad": "You use -A/N as the gradient of an unclipped sample; it is -r*A/N. The loss "
        "depends on logp_new through r = exp(logp_new - logp_old), and dr/dlogp_new = r "
        "(the derivative of exp is exp). The two agree only where r = 1, as in the first update "
        "on a freshly collected batch.",
    },
    "normalized": {"loss": _NORMALIZED, "clip_fraction": _NORMALIZED, "grad": _NORMALIZED},
    "nan_overflow": {
        "loss": "You return NaN when a sample has A = 0 and a ratio that overflowed: "
        "r = exp(1000) is inf in float64, and inf * 0 is NaN. Such a sample contributes "
        "exactly 0: multiply only where A != 0, e.g. "
        "np.multiply(r, A, out=np.zeros_like(r), where=A != 0).",
        "grad": "Your gradient is NaN for a sample with A = 0 whose ratio overflowed: "
        "r = exp(1000) is inf in float64, and inf * 0 is NaN. Its gradient is exactly 0: "
        "multiply only where A != 0, e.g. np.multiply(r, A, out=np.zeros_like(r), "
        "where=A != 0).",
    },
    "ratio_underflow": {
        "clip_fraction": "You miss clipped samples when the log-probabilities are very "
        "negative (-750 to -1000, normal for whole sequences in RLHF): exp(logp) underflows "
        "to 0 there, so exp(logp_new) / exp(logp_old) is 0/0 = NaN, and NaN > 1 + eps is "
        "False. Compute the ratio from the difference: r = np.exp(logp_new - logp_old).",
        "any": "You get NaN when the log-probabilities are very negative (-750 to -1000, "
        "normal for whole sequences in RLHF): exp(logp) underflows to 0 there, so "
        "exp(logp_new) / exp(logp_old) is 0/0. Compute the ratio from the difference: "
        "r = np.exp(logp_new - logp_old).",
    },
    "mutated": {
        "any": "Your function changes its input arrays. The caller reuses them (PPO runs "
        "several epochs on one batch), so every call must leave them as they were. Write "
        "x = x - y instead of x -= y, or work on a copy (x = np.array(x, dtype=float)).",
    },
    "not_implemented": {
        "any": "The function's body is still empty (it raises NotImplementedError or "
        "returns nothing). Write your implementation in the cell above, run that cell, then "
        "run this check again.",
    },
}


def explanation(key: str, kind: Kind) -> str:
    """The explanation of mistake ``key`` for one exercise."""
    texts = EXPLANATIONS.get(key, {})
    return texts.get(kind) or texts.get("any", "")


@dataclass(frozen=True)
class Finding:
    """One problem found: a stable ``key``, a title, the explanation and evidence."""

    key: str
    title: str
    message: str
    evidence: str = ""

    def text(self) -> str:
        """Plain text: title, explanation, evidence."""
        lines = [f"{self.title}: {self.message}"]
        if self.evidence:
            lines.append(f"  {self.evidence}")
        return "\n".join(lines)


def _num(value: float) -> str:
    """A short, readable number (``0`` for -0.0)."""
    x = float(value)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    return f"{x:.6g}"


def _exact(value: float) -> str:
    x = float(value)
    return "0.0" if x == 0 else repr(x)


def _pair(expected: float, got: float) -> tuple[str, str]:
    """Readable expected/got, with every digit when the short forms look equal."""
    short = _num(expected), _num(got)
    return short if short[0] != short[1] else (_exact(expected), _exact(got))


def _array_text(values: Iterable[float], limit: int = 8) -> str:
    items = list(values)
    shown = ", ".join(_num(x) for x in items[:limit])
    more = f", ... ({len(items)} values)" if len(items) > limit else ""
    return f"[{shown}{more}]"


def _value_text(value: object) -> str:
    if isinstance(value, np.ndarray):
        return _array_text(value.ravel())
    if isinstance(value, numbers.Real):
        return _num(float(value))
    return repr(value)


# --------------------------------------------------------------------------
# Calling the learner's function safely
# --------------------------------------------------------------------------

_NOT_IMPLEMENTED = object()


@dataclass
class _Call:
    """What one call of the learner's function did."""

    batch: Batch
    value: Any = None
    error: Exception | None = None
    mutated: tuple[str, ...] = ()
    before_after: tuple[FloatArray, FloatArray] | None = None

    @property
    def read_only_failure(self) -> bool:
        return (
            self.batch.read_only
            and isinstance(self.error, ValueError)
            and "read-only" in str(self.error)
        )


def _call(function: Callable[..., Any], batch: Batch) -> _Call:
    """Run the learner's function once, quietly (no warnings printed)."""
    inputs = batch.inputs()
    originals = (batch.logp_new, batch.logp_old, batch.advantages)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = function(*inputs, batch.eps)
    except NotImplementedError as error:  # an empty body, or a case left for later
        return _Call(batch, value=_NOT_IMPLEMENTED, error=error)
    except Exception as error:  # the learner's code may raise anything; report it readably
        return _Call(batch, error=error)
    names = ("logp_new", "logp_old", "advantages")
    changed = [
        (name, original, after)
        for name, original, after in zip(names, originals, inputs, strict=True)
        if after.shape != original.shape or not np.array_equal(after, original)
    ]
    if value is None or value is Ellipsis:
        value = _NOT_IMPLEMENTED
    return _Call(
        batch,
        value=value,
        mutated=tuple(name for name, _, _ in changed),
        before_after=(changed[0][1], changed[0][2]) if changed else None,
    )


def _error_text(error: Exception, function: Callable[..., Any]) -> str:
    """``Type: message`` plus the line of the learner's code that raised it."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if len(message) > 200:
        message = message[:197] + "..."
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    code = getattr(function, "__code__", None)
    if code is None:
        return text
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename == code.co_filename
    ]
    if frames:
        frame = frames[-1]
        line = (frame.line or "").strip()
        text += f" (in {frame.name}, line {frame.lineno}" + (f": {line})" if line else ")")
    return text


def _type_problem(kind: Kind, value: object, n: int) -> str | None:
    """Why ``value`` is not the right type or shape, or None if it is."""
    if kind == "grad":
        return _array_problem(value, n)
    what = "loss" if kind == "loss" else "clip fraction"
    if isinstance(value, (bool, np.bool_)):
        return f"a bool ({value}); the {what} is a float"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return "a 0-d numpy array; return a plain float, e.g. float(...)"
        if value.shape == (n,) and n > 1:
            return (
                f"an array of shape {value.shape}, one value per sample; the {what} is one "
                "number for the whole batch (a mean over the samples)"
            )
        return f"an array of shape {value.shape}; the {what} is a single float"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}; the {what} is a single float"
    if isinstance(value, np.floating) and not isinstance(value, np.float64):
        return f"a {type(value).__name__}; compute in float64 (numpy's default)"
    if not isinstance(value, numbers.Real):
        return f"a {type(value).__name__}; the {what} is a float"
    return None


def _array_problem(value: object, n: int) -> str | None:
    if not isinstance(value, np.ndarray):
        if isinstance(value, (list, tuple)):
            return (
                f"a {type(value).__name__}; return a numpy array of shape ({n},), "
                "e.g. np.asarray(...)"
            )
        if isinstance(value, numbers.Real):
            return (
                f"a single number; the gradient has one entry per sample, an array of shape ({n},)"
            )
        return f"a {type(value).__name__}; return a numpy array of shape ({n},)"
    if value.shape != (n,):
        return f"an array of shape {value.shape}; expected shape ({n},), one entry per sample"
    if value.dtype != np.float64:
        return f"an array of dtype {value.dtype}; the gradient is a float64 array"
    return None


# --------------------------------------------------------------------------
# Comparing answers
# --------------------------------------------------------------------------


def _as_values(kind: Kind, value: Any) -> FloatArray:
    """The learner's answer as a float array (shape (1,) for a scalar)."""
    if kind == "grad":
        return np.asarray(value, dtype=np.float64)
    return np.array([float(value)])


def _close(got: FloatArray, expected: FloatArray, loose: bool = False) -> BoolArray:
    """Elementwise agreement; infinities must agree exactly, NaN matches only NaN."""
    rtol, atol = (NORMALIZED_RTOL, NORMALIZED_ATOL) if loose else (RTOL, ATOL)
    with np.errstate(invalid="ignore"):
        return np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


@dataclass
class _Observed:
    """One batch's answer, ready to compare; ``masked`` entries are ignored."""

    batch: Batch
    got: FloatArray
    masked: BoolArray

    @property
    def fully_masked(self) -> bool:
        return bool(self.masked.all())


def _matches(observed: list[_Observed], kind: Kind, flags: frozenset[str], ddof: int) -> bool:
    """Whether an implementation with exactly ``flags`` explains every answer."""
    shows_free_gradient = False
    for item in observed:
        if item.fully_masked:
            continue
        prediction = predict(item.batch, kind, flags, ddof)
        if prediction is None:
            continue
        expected = np.atleast_1d(np.asarray(prediction.value, dtype=np.float64))
        ignore = item.masked.copy()
        if prediction.free is not None:
            ignore |= prediction.free
            nonzero = ~_close(item.got, np.zeros_like(item.got))
            shows_free_gradient |= bool((prediction.free & nonzero & ~item.masked).any())
        if not _close(item.got, expected, prediction.loose)[~ignore].all():
            return False
    return "grad_on_clipped" not in flags or shows_free_gradient


def _find_mistakes(observed: list[_Observed], kind: Kind) -> tuple[frozenset[str], int] | None:
    """The smallest set of mistakes that explains every answer, and its ddof."""
    for flags in _candidate_mistake_sets(kind):
        for ddof in (0, 1) if "normalized" in flags else (0,):
            if _matches(observed, kind, flags, ddof):
                return flags, ddof
    return None


def _differences(item: _Observed, kind: Kind) -> BoolArray:
    expected = np.atleast_1d(np.asarray(item.batch.reference(kind), dtype=np.float64))
    return ~_close(item.got, expected) & ~item.masked


def _evidence(item: _Observed, kind: Kind, index: int | None = None) -> str:
    """``On batch ..: expected .., got ..`` for one batch (one sample for the gradient)."""
    batch = item.batch
    expected = np.atleast_1d(np.asarray(batch.reference(kind), dtype=np.float64))
    if kind != "grad":
        e, g = _pair(expected[0], item.got[0])
        return f"On {batch.label}: expected {e}, got {g}."
    if index is None:
        index = int(np.flatnonzero(_differences(item, kind))[0])
    b = batch.breakdown
    e, g = _pair(expected[index], item.got[index])
    return (
        f"On {batch.label}, sample {index} (r = {_num(b.ratio[index])}, "
        f"A = {_num(b.advantages[index])}): expected {e}, got {g}."
    )


def _flag_evidence(
    observed: list[_Observed], kind: Kind, flags: frozenset[str], flag: str, ddof: int
) -> str:
    """Evidence for one of the mistakes ``flags``: the smallest batch where it shows.

    A batch shows ``flag`` where the answer differs from the reference and the
    variant with all of ``flags`` differs from the one without ``flag``.
    """
    for item in sorted(observed, key=lambda o: o.batch.n):
        if item.fully_masked:
            continue
        differs = _differences(item, kind)
        with_flag = predict(item.batch, kind, flags, ddof)
        without_flag = predict(item.batch, kind, flags - {flag}, ddof)
        if with_flag is None or without_flag is None:
            continue
        if flag == "grad_on_clipped":
            shows = differs & with_flag.breakdown.is_clipped
        else:
            shows = differs & ~_close(
                np.atleast_1d(np.asarray(with_flag.value, dtype=np.float64)),
                np.atleast_1d(np.asarray(without_flag.value, dtype=np.float64)),
            )
        if shows.any():
            return _evidence(item, kind, _first(shows))
    return ""


def _mismatch_finding(observed: list[_Observed], kind: Kind) -> Finding | None:
    failing = [item for item in observed if _differences(item, kind).any()]
    if not failing:
        return None
    item = min(failing, key=lambda o: o.batch.n)
    batch = item.batch
    message = (
        "Your answers differ from the reference and match none of the common mistakes this "
        f"checker knows. The smallest batch where they differ tests this: {batch.lesson}."
    )
    inputs = (
        f"{_evidence(item, kind)} Inputs: logp_new = {_array_text(batch.logp_new)}, "
        f"logp_old = {_array_text(batch.logp_old)} (ratios "
        f"{_array_text(batch.breakdown.ratio)}), advantages = "
        f"{_array_text(batch.advantages)}, eps = {batch.eps:g}."
    )
    return Finding("mismatch", TITLES["mismatch"], message, inputs)


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    """The outcome of checking one function: findings (empty when it passed)."""

    exercise: str
    kind: str
    findings: tuple[Finding, ...]
    batches: int
    matching_batches: int

    @property
    def passed(self) -> bool:
        """True when no problem was found."""
        return not self.findings

    @property
    def implemented(self) -> bool:
        """False while the function's body is still empty."""
        return not any(f.key == "not_implemented" for f in self.findings)

    @property
    def mistakes(self) -> tuple[str, ...]:
        """The keys of the findings, in report order (empty when it passed)."""
        return tuple(f.key for f in self.findings)

    @property
    def status(self) -> str:
        """``passed``, ``not implemented yet`` or ``needs work``."""
        if self.passed:
            return "passed"
        return "needs work" if self.implemented else "not implemented yet"

    def headline(self) -> str:
        """One line: the function and how it did."""
        if self.passed:
            return (
                f"{self.exercise}: passed. It matches the reference on all {self.batches} batches."
            )
        if not self.implemented:
            return f"{self.exercise}: not implemented yet."
        count = len(self.findings)
        problems = "1 problem" if count == 1 else f"{count} problems"
        return (
            f"{self.exercise}: {problems} found (it matches the reference on "
            f"{self.matching_batches} of {self.batches} batches)."
        )

    def __str__(self) -> str:
        lines = [self.headline()]
        if not self.implemented:
            return "\n".join([*lines, "  " + self.findings[0].message])
        for number, finding in enumerate(self.findings, start=1):
            prefix = f"{number}. " if len(self.findings) > 1 else "- "
            lines.append(prefix + finding.text().replace("\n", "\n   "))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        kind = "ok" if self.passed else ("info" if not self.implemented else "error")
        fg, bg, border = _HTML_COLOURS[kind]
        items = "".join(
            f'<li style="margin:4px 0"><b>{html.escape(f.title)}.</b> '
            f"{html.escape(f.message)}"
            + (
                f'<br><span style="font-family:monospace;font-size:12px">'
                f"{html.escape(f.evidence)}</span>"
                if f.evidence
                else ""
            )
            + "</li>"
            for f in self.findings
        )
        body = f'<ul style="margin:4px 0 2px 0;padding-left:20px">{items}</ul>' if items else ""
        if not self.implemented:
            body = f'<div style="margin-top:2px">{html.escape(self.findings[0].message)}</div>'
        return (
            f'<div class="ppo-check ppo-check-{self.status.replace(" ", "-")}" '
            f'style="color:{fg};background:{bg};border-left:4px solid {border};'
            f'padding:6px 10px;margin:2px 0;font-family:sans-serif;font-size:13px">'
            f"<b>{html.escape(self.headline())}</b>{body}</div>"
        )


_HTML_COLOURS = {
    "error": ("#8A1C00", "#FBEAE5", "#D55E00"),
    "info": ("#083D5C", "#E8F3FA", "#0072B2"),
    "ok": ("#004D38", "#E6F5F0", "#009E73"),
}


def check(kind: Kind, function: Callable[..., Any]) -> CheckResult:
    """Run ``function`` on every batch of :func:`battery` and name its mistakes.

    ``kind`` is ``"loss"``, ``"clip_fraction"`` or ``"grad"``; ``function`` takes
    ``(logp_new, logp_old, advantages, eps)`` like the :mod:`ppo_clip` function
    of that name.  Exceptions raised by ``function`` are caught and reported;
    warnings it triggers are silenced.  Never raises for a bad ``function``.
    """
    if kind not in FUNCTION_NAMES:
        raise ValueError(f"kind must be one of {tuple(FUNCTION_NAMES)}, got {kind!r}")
    name = FUNCTION_NAMES[kind]
    batches = battery()

    def result(findings: list[Finding], matching: int = 0) -> CheckResult:
        return CheckResult(name, kind, tuple(findings), len(batches), matching)

    if not callable(function):
        message = (
            f"check_{'grad' if kind == 'grad' else kind} expects your function (the name "
            f"after def, without parentheses), got {function!r:.60}."
        )
        return result([Finding("error", TITLES["error"], message)])
    calls = [_call(function, batch) for batch in batches]
    if any(c.value is _NOT_IMPLEMENTED for c in calls if c.batch is batches[0]) or all(
        c.value is _NOT_IMPLEMENTED for c in calls
    ):
        return result([_finding("not_implemented", kind)])
    return _diagnose(kind, function, calls, result)


def _finding(key: str, kind: Kind, message: str | None = None, evidence: str = "") -> Finding:
    return Finding(key, TITLES[key], message or explanation(key, kind), evidence)


def _diagnose(
    kind: Kind,
    function: Callable[..., Any],
    calls: list[_Call],
    result: Callable[..., CheckResult],
) -> CheckResult:
    findings: list[Finding] = []
    errors = [c for c in calls if c.error is not None and not c.read_only_failure]
    if errors:
        first = min(errors, key=lambda c: c.batch.n)
        message = (
            f"On {first.batch.label} your function raised "
            f"{_error_text(first.error, function)}. That batch tests this: "  # type: ignore[arg-type]
            f"{first.batch.lesson}."
        )
        findings.append(_finding("error", kind, message))
    answered = [c for c in calls if c.error is None]
    typed: list[_Call] = []
    for c in answered:
        if c.value is _NOT_IMPLEMENTED:
            problem = "None (is a return statement missing?)"
        else:
            problem = _type_problem(kind, c.value, c.batch.n)
        if problem is None:
            typed.append(c)
        elif not any(f.key == "wrong_type" for f in findings):
            message = f"Your function returned {problem}."
            findings.append(_finding("wrong_type", kind, message, f"Seen on {c.batch.label}."))
    observed = [_observe(c, kind) for c in typed]
    findings.extend(_value_findings(observed, kind))
    findings.extend(_mutation_findings(calls, function))
    matching = sum(
        1
        for item, c in zip(observed, typed, strict=True)
        if not c.mutated and not item.masked.any() and not _differences(item, kind).any()
    )
    return result(findings, matching)


def _observe(call: _Call, kind: Kind) -> _Observed:
    got = _as_values(kind, call.value)
    return _Observed(call.batch, got, np.zeros(got.shape, dtype=bool))


def _value_findings(observed: list[_Observed], kind: Kind) -> list[Finding]:
    """Mask the NaN symptoms, then find the mistakes that explain the rest."""
    findings: list[Finding] = []
    nan_evidence = ""
    for item in observed:
        batch = item.batch
        unexpected_nan = np.isnan(item.got)
        if not unexpected_nan.any():
            continue
        overflow = batch.has_overflowing_zero_advantage
        if kind == "grad":
            at_overflow = unexpected_nan & overflow
        else:
            at_overflow = unexpected_nan & overflow.any()
        if at_overflow.any():
            nan_evidence = nan_evidence or _evidence(item, kind, _first(at_overflow))
            item.masked |= at_overflow
    found = _find_mistakes(observed, kind)
    if found is None:
        mismatch = _mismatch_finding(observed, kind)
        if mismatch is not None:
            findings.append(mismatch)
    else:
        flags, ddof = found
        for flag in VALUE_MISTAKES[kind]:
            if flag in flags:
                evidence = _flag_evidence(observed, kind, flags, flag, ddof)
                findings.append(_finding(flag, kind, evidence=evidence))
    if nan_evidence:
        findings.append(_finding("nan_overflow", kind, evidence=nan_evidence))
    return findings


def _first(mask: BoolArray) -> int:
    return int(np.flatnonzero(mask)[0])


def _mutation_findings(calls: list[_Call], function: Callable[..., Any]) -> list[Finding]:
    """One finding if any call changed its inputs or failed on read-only ones."""
    evidence = []
    changed = next((c for c in calls if c.mutated and c.before_after is not None), None)
    if changed is not None and changed.before_after is not None:
        before, after = changed.before_after
        evidence.append(
            f"On {changed.batch.label}, {changed.mutated[0]} was {_array_text(before)} before "
            f"the call and {_value_text(after)} after it."
        )
    read_only = next((c for c in calls if c.read_only_failure), None)
    if read_only is not None and read_only.error is not None:
        evidence.append(
            f"On {read_only.batch.label}, whose arrays are read-only, your function raised "
            f"{_error_text(read_only.error, function)}."
        )
    if not evidence:
        return []
    return [_finding("mutated", "grad", evidence=" ".join(evidence))]


def check_loss(function: Callable[..., Any]) -> CheckResult:
    """Check a learner's ``ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("loss", function)


def check_clip_fraction(function: Callable[..., Any]) -> CheckResult:
    """Check a learner's ``clip_fraction(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("clip_fraction", function)


def check_grad(function: Callable[..., Any]) -> CheckResult:
    """Check a learner's ``ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("grad", function)


# --------------------------------------------------------------------------
# Concept questions
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One answer: its label, what it claims, and a note on why it is (not) right.

    ``claims`` maps a :class:`ppo_clip.ClipBreakdown` attribute (``is_clipped``,
    ``grad``, ``objective_term``, ``clip_fraction``) to the value the option
    says it has (sample 0 for per-sample attributes).
    """

    label: str
    claims: Mapping[str, float | bool]
    note: str = ""


def _claim_holds(breakdown: ppo_clip.ClipBreakdown, attribute: str, claimed: float) -> bool:
    actual = getattr(breakdown, attribute)
    value = actual[0] if isinstance(actual, np.ndarray) else actual
    if isinstance(claimed, bool):
        return bool(value) is claimed
    return bool(np.isclose(float(value), float(claimed), rtol=1e-12, atol=0.0))


class ConceptQuestion(App):
    """A multiple-choice question whose answer :mod:`ppo_clip` decides.

    Choosing an option (the ``choice`` radio buttons) shows whether it is right,
    a note on that option and the explanation.  The right option is the one
    whose claims all hold for ``truth``; there must be exactly one.
    """

    description = "Concept question"

    def __init__(
        self,
        key: str,
        title: str,
        prompt: str,
        options: Sequence[Option],
        truth: ppo_clip.ClipBreakdown,
        explanation: str,
    ) -> None:
        self.key = key
        self.title = title
        self.prompt = prompt
        self.options = tuple(options)
        self.explanation = explanation
        self.description = f"Concept question: {prompt}"
        right = [
            i
            for i, option in enumerate(self.options)
            if all(_claim_holds(truth, a, v) for a, v in option.claims.items())
        ]
        if len(right) != 1:
            raise ValueError(f"question {key!r} must have exactly one right option, got {right}")
        self.answer = right[0]
        self.attempts: list[int] = []
        self.prompt_html = widgets.HTML(
            f'<div style="font-family:sans-serif;font-size:14px;margin:2px 0;line-height:1.45">'
            f"<b>Question.</b> {html.escape(prompt)}</div>"
        )
        self.choice = widgets.RadioButtons(
            options=[(f"({_LETTERS[i]}) {o.label}", i) for i, o in enumerate(self.options)],
            value=None,
            layout=widgets.Layout(width="auto"),
        )
        self.choice.add_class("ppo-quiz-choice")
        self.feedback = widgets.HTML("")
        self.feedback.add_class("ppo-quiz-feedback")
        self.widget = widgets.VBox([self.prompt_html, self.choice, self.feedback])
        self.widget.add_class("ppo-quiz")
        self.choice.observe(self._on_choice, names="value")

    def choose(self, index: int) -> None:
        """Pick option ``index``, as a click would."""
        self.choice.value = index

    @property
    def answered(self) -> bool:
        """Whether any option was chosen."""
        return bool(self.attempts)

    @property
    def right_first_time(self) -> bool:
        """Whether the first choice was the right one."""
        return bool(self.attempts) and self.attempts[0] == self.answer

    @property
    def outcome(self) -> str:
        """``right at the first try``, ``right after N tries``, ``not yet right`` or
        ``not answered``."""
        if not self.attempts:
            return "not answered"
        if self.right_first_time:
            return "right at the first try"
        if self.answer in self.attempts:
            tries = self.attempts.index(self.answer) + 1
            return f"right after {tries} tries"
        return "not yet right"

    def feedback_text(self, index: int) -> str:
        """What the learner reads after choosing option ``index``."""
        if index == self.answer:
            return f"Right. {self.explanation}"
        label = self.options[self.answer].label
        answer = f"The answer is ({_LETTERS[self.answer]}) {label.rstrip('.')}."
        note = self.options[index].note
        return " ".join(part for part in ("Not quite.", note, answer, self.explanation) if part)

    def _on_choice(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index is None:
            return
        self.attempts.append(int(index))
        kind = "ok" if index == self.answer else "error"
        message = message_html(self.feedback_text(int(index)), kind)
        self.feedback.value = f'<div style="line-height:1.45">{message}</div>'

    def static_fallback(self) -> dict[str, Any]:
        """The question and its options as HTML, the answer folded away."""
        items = "".join(
            f"<li>({_LETTERS[i]}) {html.escape(o.label)}</li>" for i, o in enumerate(self.options)
        )
        answer = html.escape(
            f"({_LETTERS[self.answer]}) {self.options[self.answer].label} {self.explanation}"
        )
        return {
            "html_fallback": (
                f'<div class="ppo-quiz" style="font-family:sans-serif;font-size:14px">'
                f"<p><b>Question.</b> {html.escape(self.prompt)}</p>"
                f'<ul style="list-style:none;padding-left:12px">{items}</ul>'
                f"<details><summary>Show the answer</summary><p>{answer}</p></details></div>"
            )
        }


_LETTERS = "abcdefgh"


def _single(ratio: float, advantage: float, eps: float = 0.2) -> ppo_clip.ClipBreakdown:
    return ppo_clip.ratio_sweep([ratio], advantage, eps)


def concept_questions() -> dict[str, ConceptQuestion]:
    """Fresh concept questions, keyed by a short name, in teaching order."""
    favourable = _single(1.3, 2.0)
    wrong_way = _single(1.5, -1.0)
    edge = _single(1.2, 1.0)
    overflow = ppo_clip.clip_breakdown([0.0], [-1000.0], [0.0])
    four = ppo_clip.clip_breakdown(
        np.log([0.75, 0.75, 0.25, 0.25]), np.log([0.5] * 4), [1.0, -1.0, 1.0, -1.0]
    )
    questions = [
        ConceptQuestion(
            "favourable",
            "A = +2, r = 1.3",
            "A sample has advantage A = +2 and its ratio is now r = 1.3 (eps = 0.2, a batch "
            "of N = 1). Is it clipped, and what is d loss / d logp_new?",
            [
                Option("Clipped; the gradient is 0.", {"is_clipped": True, "grad": 0.0}),
                Option(
                    "Not clipped; the gradient is -r*A = -2.6.",
                    {"is_clipped": False, "grad": -2.6},
                    "r*A = 2.6 is larger than clip(r)*A = 2.4, so the min does not keep it.",
                ),
                Option(
                    "Clipped; the gradient is -(1 + eps)*A = -2.4.",
                    {"is_clipped": True, "grad": -2.4},
                    "(1 + eps)*A is a constant: it does not change when logp_new does.",
                ),
                Option(
                    "Not clipped; the gradient is -A = -2.",
                    {"is_clipped": False, "grad": -2.0},
                    "-A is the derivative with respect to r. With respect to logp_new it is -r*A, "
                    "which equals -A only at r = 1. And this sample is clipped anyway, so its "
                    "gradient is 0.",
                ),
            ],
            favourable,
            f"With A > 0 the objective rewards making the action more likely, and r = 1.3 is "
            f"already past 1 + eps = {favourable.upper:g}. The min keeps the clipped term "
            f"clip(r)*A = {favourable.clipped_term[0]:g}, a constant, so the gradient is "
            f"{_num(favourable.grad[0])}: no further push from this sample.",
        ),
        ConceptQuestion(
            "wrong_way",
            "A = -1, r = 1.5",
            "A sample has advantage A = -1 and its ratio is now r = 1.5 (eps = 0.2, N = 1). "
            "Is it clipped, and what is d loss / d logp_new?",
            [
                Option(
                    "Clipped, since r is outside the band; the gradient is 0.",
                    {"is_clipped": True, "grad": 0.0},
                    "Being outside the band is not enough: the direction matters.",
                ),
                Option(
                    "Not clipped; the gradient is -r*A = 1.5.",
                    {"is_clipped": False, "grad": 1.5},
                ),
                Option(
                    "Not clipped; the gradient is -A = 1.",
                    {"is_clipped": False, "grad": 1.0},
                    "dr/dlogp_new = r, so the gradient carries the factor r = 1.5.",
                ),
                Option(
                    "Clipped; the gradient is -(1 + eps)*A = 1.2.",
                    {"is_clipped": True, "grad": 1.2},
                    "A clipped sample has gradient 0, and this one is not clipped.",
                ),
            ],
            wrong_way,
            f"A < 0 means the action was worse than expected, yet r = 1.5 made it more "
            f"likely: a move the unfavourable way. The min is min(r*A, clip(r)*A) = "
            f"min({wrong_way.unclipped_term[0]:g}, {wrong_way.clipped_term[0]:g}) = "
            f"{wrong_way.objective_term[0]:g}, the unclipped term, so the gradient is "
            f"-r*A/N = {_num(wrong_way.grad[0])} > 0 and gradient descent lowers logp_new, "
            f"pulling the sample back. For A < 0 only r < 1 - eps = {wrong_way.lower:g} is "
            f"clipped.",
        ),
        ConceptQuestion(
            "edge",
            "A = +1, r = 1.2 exactly",
            "A sample has A = +1 and its ratio is exactly on the edge: r = 1 + eps = 1.2 "
            "(eps = 0.2, N = 1). Is it clipped, and what is its gradient?",
            [
                Option(
                    "Clipped; the gradient is 0.",
                    {"is_clipped": True, "grad": 0.0},
                    "Clipping needs r > 1 + eps, strictly.",
                ),
                Option(
                    "Not clipped; the gradient is -r*A = -1.2.",
                    {"is_clipped": False, "grad": -1.2},
                ),
                Option(
                    "Not clipped; the gradient is -A = -1.",
                    {"is_clipped": False, "grad": -1.0},
                    "dr/dlogp_new = r, so the gradient carries the factor r = 1.2.",
                ),
            ],
            edge,
            f"The comparisons are strict: clipped means r > 1 + eps. On the edge both terms "
            f"of the min are equal ({edge.unclipped_term[0]:g}) and the sample keeps the "
            f"gradient of r*A: -r*A/N = {_num(edge.grad[0])}, as PyTorch's autograd gives "
            f"for the usual max(-A*r, -A*clip(r)). In float64 this case is real: "
            f"exp(log(0.6) - log(0.5)) is exactly 1.2.",
        ),
        ConceptQuestion(
            "overflow",
            "A = 0, r = inf",
            "A sample has A = 0 and logp_new - logp_old = 1000, so r = exp(1000) overflows "
            "to inf. What does it add to the loss, and what is its gradient?",
            [
                Option(
                    "NaN to both: inf * 0 is undefined.",
                    {"objective_term": math.nan},
                    "That is what naive code computes, and one NaN spoils the whole loss.",
                ),
                Option(
                    "0 to the loss and a gradient of 0: with A = 0 it carries no signal.",
                    {"objective_term": 0.0, "grad": 0.0, "is_clipped": False},
                ),
                Option(
                    "It is clipped, so it adds clip(r)*A = 0 and its gradient is 0.",
                    {"objective_term": 0.0, "grad": 0.0, "is_clipped": True},
                    "The numbers are right, but a sample with A = 0 is never clipped.",
                ),
                Option(
                    "+inf to the loss: r*A with r = inf.",
                    {"objective_term": math.inf},
                    "inf times 0 is not inf.",
                ),
            ],
            overflow,
            f"A sample with A = 0 is never clipped (clipping needs A > 0 or A < 0) and adds "
            f"exactly {_num(overflow.objective_term[0])} to the loss and to the gradient, "
            f"even when r is inf. IEEE arithmetic says inf * 0 is NaN, so code must not "
            f"compute that product: multiply only where A != 0.",
        ),
        ConceptQuestion(
            "fraction",
            "clip fraction of four samples",
            "Four samples have r = [1.5, 1.5, 0.5, 0.5] and A = [+1, -1, +1, -1], "
            "eps = 0.2. What does clip_fraction return?",
            [
                Option("0", {"clip_fraction": 0.0}, "Two samples moved the favourable way."),
                Option("0.25", {"clip_fraction": 0.25}, "Check both signs of A."),
                Option("0.5", {"clip_fraction": 0.5}),
                Option(
                    "1.0",
                    {"clip_fraction": 1.0},
                    "That is mean(|r - 1| > eps), which ignores the advantage's sign.",
                ),
            ],
            four,
            f"All four ratios are outside [0.8, 1.2], but only sample 0 (A > 0, r > 1.2) and "
            f"sample 3 (A < 0, r < 0.8) moved the favourable way, so only their gradients "
            f"are switched off: {four.clip_fraction:g}. Samples 1 and 2 keep r*A and their "
            f"full gradient. Stable-Baselines3, CleanRL, OpenAI Baselines and Spinning Up "
            f"log mean(|r - 1| > eps) instead, which is {four.band_fraction:g} here; TRL, "
            f"verl and this project count {four.clip_fraction:g}.",
        ),
    ]
    return {question.key: question for question in questions}


# --------------------------------------------------------------------------
# The summary for a teacher
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExerciseSummary:
    """Every check and concept question in one text to paste to a teacher."""

    results: tuple[CheckResult, ...]
    questions: tuple[ConceptQuestion, ...] = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        """Whether every exercise passed."""
        return all(result.passed for result in self.results)

    def lines(self) -> list[str]:
        """The summary, line by line."""
        passed = sum(result.passed for result in self.results)
        lines = [
            "PPO clipped loss: exercise summary",
            f"Exercises passed: {passed} of {len(self.results)}",
        ]
        width = max(len(result.exercise) for result in self.results)
        for result in self.results:
            status = result.status
            if result.implemented and not result.passed:
                status += ": " + "; ".join(f.title for f in result.findings)
            elif result.passed:
                status += f" (all {result.batches} batches match the reference)"
            lines.append(f"  {result.exercise.ljust(width)}  {status}")
        if self.questions:
            right = sum(q.right_first_time for q in self.questions)
            lines.append(
                f"Concept questions right at the first try: {right} of {len(self.questions)}"
            )
            width = max(len(q.title) for q in self.questions)
            for question in self.questions:
                lines.append(f"  {question.title.ljust(width)}  {question.outcome}")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return (
            '<pre class="ppo-summary" style="font-size:13px;padding:6px 10px;'
            f'background:#F4F4F4;border-left:4px solid #0072B2">{html.escape(str(self))}</pre>'
        )


def exercise_summary(
    loss: Callable[..., Any],
    clip_fraction: Callable[..., Any],
    grad: Callable[..., Any],
    questions: Mapping[str, ConceptQuestion] | Iterable[ConceptQuestion] = (),
) -> ExerciseSummary:
    """Check all three functions and collect the concept questions' outcomes."""
    results = (check_loss(loss), check_clip_fraction(clip_fraction), check_grad(grad))
    chosen = questions.values() if isinstance(questions, Mapping) else questions
    return ExerciseSummary(results, tuple(chosen))
