"""The batches every check runs a learner's function on, and what each is there to test.

A :class:`CheckBatch` holds the inputs of one call (read-only), the clip size, a sentence saying
what it tests (its ``lesson``, quoted when a function fails on it) and its ``role``: ``"core"``
batches test the contract on realistic inputs (passing them is passing the exercise);
``"robustness"`` batches test float64's edges and ``N = 4096``, and what goes wrong there is a
"going further" note naming the lesson of notebook 5 it relates to (``further``).

:data:`BATTERY` lists them, core batches first, each with its reference answers, computed when
the checker is imported with :data:`reference`, the checker's own copy of :mod:`ppo_clip`:
loaded again from the same file, so a learner who replaces ``ppo_clip.ppo_clip_loss`` (or a
helper it calls) in the notebook changes nothing the checker compares with.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from dataclasses import dataclass, replace
from functools import cached_property
from types import ModuleType
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.numbers import exact

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
#: The three exercises, by the kind of value their function returns.
Kind = Literal["loss", "clip_fraction", "grad"]
#: What a batch is there to test: the contract on realistic inputs, or float64's edges.
Role = Literal["core", "robustness"]
#: The name of the learner's function for each exercise.
FUNCTION_NAMES = {
    "loss": "ppo_clip_loss",
    "clip_fraction": "clip_fraction",
    "grad": "ppo_clip_grad",
}
ARGUMENT_NAMES = ("logp_new", "logp_old", "advantages")

#: The notebook "Numerics and the RLHF setting", whose lessons the robustness batches relate to.
NUMERICS_NOTEBOOK = "notebook 5"
OVERFLOW_LESSON = (
    f"{NUMERICS_NOTEBOOK}, section 2 (Overflow: when exp gives up): exp overflows to inf above "
    "a log-ratio of about 709.78, and inf * 0 is NaN in IEEE arithmetic"
)
UNDERFLOW_LESSON = (
    f"{NUMERICS_NOTEBOOK}, section 1 (Where −1000 comes from): a whole response's "
    "log-probability is a sum over its tokens and reaches -1000, where exp(logp) underflows to 0"
)
TOKENS_LESSON = (
    f"{NUMERICS_NOTEBOOK}, section 4 (Token-level versus sequence-level ratios): RLHF codes "
    "clip each token's ratio, so one batch holds a sample per token, thousands of them"
)


def _private_copy(module: ModuleType) -> ModuleType:
    """``module`` executed again from its file, as a module no learner's code refers to."""
    name = f"{__name__}._reference_{module.__name__}"
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    if spec is None or spec.loader is None:  # pragma: no cover - ppo_clip is a plain .py file
        raise ImportError(f"cannot load a copy of {module.__file__}")
    copy = importlib.util.module_from_spec(spec)
    sys.modules[name] = copy  # as an import does: its dataclasses look the module up
    spec.loader.exec_module(copy)
    return copy


#: The checker's own ``ppo_clip``: every reference answer and variant is computed with it.
reference: ModuleType = _private_copy(ppo_clip)


@dataclass(frozen=True, eq=False)
class CheckBatch:
    """One batch of a check: inputs, ``eps``, what it tests (``lesson``) and its ``role``.

    The arrays are kept as read-only float64 copies; :meth:`inputs` hands out fresh copies
    (read-only ones if ``read_only``).  The reference answers are computed when the batch is
    made: inputs outside the contract raise ``ValueError``/``TypeError`` as :mod:`ppo_clip` does.
    """

    name: str
    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float
    lesson: str
    role: Role = "core"
    further: str = ""
    read_only: bool = False

    def __post_init__(self) -> None:
        for argument in ARGUMENT_NAMES:
            object.__setattr__(self, argument, _frozen(getattr(self, argument)))
        _ = self.answers

    @property
    def n(self) -> int:
        """The number of samples N."""
        return len(self.advantages)

    @property
    def label(self) -> str:
        """``batch 'name' (N = .., eps = ..)``, for messages."""
        return f"batch '{self.name}' (N = {self.n}, eps = {exact(self.eps)})"

    def inputs(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Fresh copies of the three arrays for one call (read-only if ``read_only``)."""
        copies = (self.logp_new.copy(), self.logp_old.copy(), self.advantages.copy())
        for array in copies:
            array.setflags(write=not self.read_only)
        return copies

    @cached_property
    def breakdown(self) -> Any:
        """The reference breakdown of this batch (a ``ppo_clip.ClipBreakdown``)."""
        return reference.clip_breakdown(self.logp_new, self.logp_old, self.advantages, self.eps)

    @cached_property
    def answers(self) -> dict[str, Any]:
        """The reference answer of each exercise (the gradient read-only)."""
        arguments = (self.logp_new, self.logp_old, self.advantages, self.eps)
        return {
            "loss": reference.ppo_clip_loss(*arguments),
            "clip_fraction": reference.clip_fraction(*arguments),
            "grad": _frozen(reference.ppo_clip_grad(*arguments)),
        }

    @cached_property
    def overflowing_zero_advantage(self) -> BoolArray:
        """Samples with ``A == 0`` whose ratio overflowed to ``inf`` (``inf * 0`` is NaN)."""
        return (self.advantages == 0) & np.isinf(self.breakdown.ratio)

    @cached_property
    def underflows(self) -> BoolArray:
        """Samples whose ``exp(logp_new)`` and ``exp(logp_old)`` are both 0 (their ratio 0/0)."""
        with np.errstate(under="ignore"):
            return (np.exp(self.logp_new) == 0) & (np.exp(self.logp_old) == 0)

    @cached_property
    def undecided(self) -> BoolArray:
        """Samples whose clip decision depends on how the ratio is computed.

        numpy's ``exp`` differs in the last bit between CPUs and from ``math.exp``, so a ratio
        within an ulp of a band's edge may be clipped when computed one way (``math.exp`` of the
        log-ratio, or the probabilities divided) and not another.  Either verdict is accepted.
        """
        b = self.breakdown
        with np.errstate(all="ignore"):
            others = (
                np.array([math.exp(x) if x < 709 else math.inf for x in b.log_ratio]),
                np.exp(self.logp_new) / np.exp(self.logp_old),
            )
        found = np.zeros(self.n, dtype=bool)
        for ratio in others:
            found |= np.isfinite(ratio) & (replace(b, ratio=ratio).is_clipped != b.is_clipped)
        return found


def _frozen(values: ArrayLike) -> FloatArray:
    """A read-only float64 copy of ``values``."""
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def _numpy_exp(x: float) -> float:
    """numpy's ``exp`` of one value, through the array code path the reference takes."""
    return float(np.exp(np.array([x]))[0])


def _on_the_edge(ratio: float, p_old: float) -> tuple[float, float]:
    """``(logp_new, logp_old)`` near ``log(ratio * p_old)``, ``log(p_old)``, landing on ``ratio``.

    Whether ``exp(log(0.6) - log(0.5))`` is exactly 1.2 depends on the ``exp``.  Of the float
    neighbours tried, a pair on which numpy's ``exp`` gives exactly ``ratio`` (the reference's
    ratio) is taken, preferring one where ``math.exp`` and dividing the probabilities land there
    too; where some way still misses, the sample is :attr:`CheckBatch.undecided`.
    """
    new0, old0 = math.log(ratio * p_old), math.log(p_old)
    steps = sorted(itertools.product(range(-4, 5), repeat=2), key=lambda s: abs(s[0]) + abs(s[1]))
    best, best_score = (new0, old0), -1
    for i, j in steps:
        new, old = new0 + i * math.ulp(new0), old0 + j * math.ulp(old0)
        if _numpy_exp(new - old) != ratio:
            continue
        score = (math.exp(new - old) == ratio) + (_numpy_exp(new) / _numpy_exp(old) == ratio)
        if score > best_score:
            best, best_score = (new, old), score
    return best


def _core(name: str, lesson: str, batch: tuple[list[float], ...], eps: float) -> CheckBatch:
    """A core batch given by its probabilities ``(new, old)`` and advantages."""
    new, old, advantages = batch
    return CheckBatch(name, np.log(new), np.log(old), advantages, eps, lesson)


def _random(name: str, n: int, eps: float, seed: int, lesson: str, **batch: Any) -> CheckBatch:
    """``n`` random ratios around 1 and advantages of both signs, from ``seed``."""
    rng = np.random.default_rng(seed)
    logp_old = rng.uniform(-4.0, -0.5, n)
    logp_new = np.minimum(logp_old + rng.normal(0.0, 0.35, n), 0.0)
    return CheckBatch(name, logp_new, logp_old, rng.normal(0.4, 1.2, n), eps, lesson, **batch)


def _edge(name: str, lesson: str, further: str, batch: tuple[list[float], ...]) -> CheckBatch:
    """A robustness batch given by its log-probabilities ``(new, old)`` and advantages."""
    return CheckBatch(name, *batch, 0.2, lesson, "robustness", further)


def _tokens() -> CheckBatch:
    """4096 per-token samples: 4 prompts x 4 answers of 256 tokens, advantages as in GRPO.

    Half the tokens are near-certain, the others have probabilities from 0.03 to 0.95.  Each
    answer's advantage is its reward standardized within its prompt's group; one prompt's
    answers tie, so their advantages are exactly 0.
    """
    rng = np.random.default_rng(4096)
    rewards = np.array([[1, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], dtype=float)
    spread = rewards.std(axis=1, keepdims=True)
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    advantages = np.divide(centred, spread, out=np.zeros_like(rewards), where=spread > 0)
    certain = rng.random(4096) < 0.5
    old = np.where(certain, rng.uniform(-0.05, 0.0, 4096), np.log(rng.uniform(0.03, 0.95, 4096)))
    new = np.minimum(old + rng.normal(0.0, 0.12, 4096), 0.0)
    lesson = (
        "N = 4096, the contract's largest batch: one sample per token of 16 answers, each token "
        "carrying its answer's advantage (exactly 0 for a prompt whose answers tie, as in GRPO)"
    )
    repeated = np.repeat(advantages.ravel(), 256)
    return CheckBatch("4096 tokens", new, old, repeated, 0.2, lesson, "robustness", TOKENS_LESSON)


def _battery() -> tuple[CheckBatch, ...]:
    """Every batch a check runs: the core batches, then the robustness ones."""
    (up_new, up_old), (down_new, down_old) = _on_the_edge(1.2, 0.5), _on_the_edge(0.8, 0.5)
    log, random_lesson = math.log, "random ratios around 1 and advantages of both signs"
    return (
        CheckBatch(
            "worked example",
            *reference.worked_example(),
            "the contract's worked example: ratios [1.4, 1.1, 0.6, 0.9]; samples 0 and 2 are "
            "clipped",
        ),
        _core(
            "one sample",
            "a batch of one sample: r = 0.5 although A > 0, a move the unfavourable way, so it "
            "is not clipped",
            ([0.3], [0.6], [2.5]),
            0.2,
        ),
        CheckBatch(
            "ratios exactly on the band's edges",
            [up_new, down_new, log(0.5)],
            [up_old, down_old, log(0.5)],
            [1.5, -2.0, 0.7],
            0.2,
            "r = 1.2 with A > 0 and r = 0.8 with A < 0, exactly on the edges (log-probabilities "
            "chosen so that exp lands there): on the edge a sample is not clipped",
        ),
        _core(
            "eps = 0",
            "eps = 0: every sample that moved the favourable way is clipped; r == 1 exactly is not",
            ([0.5, 0.5, 0.55, 0.45, 0.55, 0.45], [0.5] * 6, [1.0, -1.0, 1.0, -1.0, -1.0, 1.0]),
            0.0,
        ),
        _core(
            "eps = 1",
            "eps = 1: the band is [0, 2], so no negative-advantage sample is ever clipped",
            ([0.01, 0.1, 0.5, 0.3, 0.6], [0.2] * 5, [-1.0, -2.0, 1.0, 0.5, -1.0]),
            1.0,
        ),
        _core(
            "clipping depends on the advantage's sign",
            "r = [1.5, 1.5, 0.5, 0.5], A = [+1, -1, +1, -1]: all four ratios are outside the "
            "band, but only samples 0 and 3 are clipped",
            ([0.75, 0.75, 0.25, 0.25], [0.5] * 4, [1.0, -1.0, 1.0, -1.0]),
            0.2,
        ),
        _core(
            "advantages with a nonzero mean",
            "every advantage is positive (mean 4); they are used as given, never normalized",
            ([0.65, 0.35, 0.52, 0.62, 0.45], [0.5] * 5, [3.0, 5.0, 4.0, 6.0, 2.0]),
            0.2,
        ),
        _core(
            "advantages of exactly 0",
            "A = 0 with r = 1.5, 3.5 and 0.5, all outside the band (A = 0 is common in GRPO, "
            "when every answer to a prompt got the same reward): a sample with A = 0 is never "
            "clipped; only sample 3 (A > 0, r = 1.3) is",
            ([0.75, 0.7, 0.25, 0.65, 0.65], [0.5, 0.2, 0.5, 0.5, 0.5], [0, 0, 0, 1.5, -0.5]),
            0.2,
        ),
        _random(
            "read-only inputs",
            8,
            0.2,
            7,
            "the input arrays are read-only, so a function that writes into them fails",
            read_only=True,
        ),
        _random("random batch", 16, 0.1, 11, random_lesson),
        _random("large random batch", 257, 0.2, 5, random_lesson),
        _edge(
            "A = 0 with an overflowing ratio",
            "sample 0 has logp_new - logp_old = 1000, so r = exp(1000) overflows to inf, and "
            "A = 0: it must add exactly 0 (inf * 0 is NaN in IEEE arithmetic)",
            OVERFLOW_LESSON,
            (
                [0.0, log(0.5), log(0.5), log(0.3), log(0.6)],
                [-1000.0, *np.log([0.4, 0.6, 0.6, 0.4])],
                [0.0, 1.0, -1.0, 0.0, 0.0],
            ),
        ),
        _edge(
            "A < 0 with an overflowing ratio",
            "sample 0 has r = inf and A < 0: it is not clipped, so the loss is +inf (the true "
            "float64 value) and its gradient is +inf",
            OVERFLOW_LESSON,
            ([0.0, log(0.5)], [-1000.0, log(0.5)], [-1.0, 1.0]),
        ),
        _edge(
            "tiny probabilities",
            "log-probabilities near -1000, as for whole sequences in RLHF: exp(logp) underflows "
            "to 0, but exp(logp_new - logp_old) is fine",
            UNDERFLOW_LESSON,
            ([-749.8, -900.1, -999.95], [-750.0, -900.0, -1000.0], [1.0, -0.5, 2.0]),
        ),
        _tokens(),
    )


#: Every batch a check runs, core batches first; built when the checker is imported.
BATTERY: tuple[CheckBatch, ...] = _battery()


def battery(role: Role | None = None) -> tuple[CheckBatch, ...]:
    """The batches of :data:`BATTERY` (only those of ``role``, if given)."""
    if role not in (None, "core", "robustness"):
        raise ValueError(f"role must be 'core', 'robustness' or None, got {role!r}")
    return tuple(batch for batch in BATTERY if role in (None, batch.role))
