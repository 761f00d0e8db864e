"""The batches every check runs a learner's function on, and what each one tests.

Core batches test the contract on realistic inputs and decide the pass; robustness batches test
float64's edges and ``N = 4096``, and what goes wrong there is a "going further" note naming the
section of notebook 5 it relates to.  Reference answers come from :data:`reference`, the
checker's own copy of :mod:`ppo_clip`: a learner who replaces ``ppo_clip.ppo_clip_loss`` (or a
helper it calls) changes nothing the checker compares with.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from types import ModuleType
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

import llm_clip
import ppo_clip
from ppo_viz.numbers import exact

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
#: The exercises: notebook 6's three, by the kind of value their function returns, notebook 7's
#: two losses (:mod:`.llm`) and notebook 8's GAE (:mod:`.gae`).
Kind = Literal["loss", "clip_fraction", "grad", "grpo", "gspo", "gae", "rollout"]
#: What a batch is there to test: the contract on realistic inputs, or float64's edges.
Role = Literal["core", "robustness"]
#: The name of the learner's function for each exercise.
FUNCTION_NAMES = dict(loss="ppo_clip_loss", clip_fraction="clip_fraction", grad="ppo_clip_grad")

#: The notebook "Numerics and the RLHF setting", and the sections the robustness batches need.
NUMERICS_NOTEBOOK = "notebook 5"
UNDERFLOW_LESSON = f"{NUMERICS_NOTEBOOK}, section 1 (Where −1000 comes from)"
OVERFLOW_LESSON = f"{NUMERICS_NOTEBOOK}, section 2 (Overflow: when exp gives up)"
TOKENS_LESSON = f"{NUMERICS_NOTEBOOK}, section 4 (Token-level versus sequence-level ratios)"
#: What the robustness batches are, said once above their notes.
GOING_FURTHER = (
    "Going further: the robustness batches test float64's edges and the contract's largest "
    f"batch. They do not decide the pass; each note names the section of {NUMERICS_NOTEBOOK}."
)
#: What each batch tests, quoted when a function fails on it.
LESSONS = {
    "worked example": "the worked example: ratios [1.4, 1.1, 0.6, 0.9]; samples 0 and 2 clipped",
    "one sample": "one sample with r = 0.5 and A > 0, a move the unfavourable way: not clipped",
    "ratios exactly on the band's edges": "r = 1.2 with A > 0 and r = 0.8 with A < 0, where exp "
    "lands exactly: on the edge a sample is not clipped",
    "eps = 0": "eps = 0: every sample that moved the favourable way is clipped; r == 1 is not",
    "eps = 1": "eps = 1: the band is [0, 2], so no negative-advantage sample is ever clipped",
    "clipping depends on the advantage's sign": "r = [1.5, 1.5, 0.5, 0.5], A = [+1, -1, +1, -1]: "
    "only samples 0 and 3 are clipped",
    "advantages with a nonzero mean": "every advantage is positive (mean 4): used as given",
    "advantages of exactly 0": "A = 0 (common in GRPO) is never clipped, even at r = 1.5, 3.5, 0.5",
    "random batch": "random ratios and advantages, in read-only arrays: writing into them fails",
    "large random batch": "random ratios around 1 and advantages of both signs",
    "A = 0 with an overflowing ratio": "r = exp(1000) = inf and A = 0: it adds 0, not NaN",
    "A < 0 with an overflowing ratio": "r = inf and A < 0: not clipped, so the loss is +inf, the "
    "true float64 value, and so is its gradient",
    "tiny probabilities": "log-probabilities near -1000: exp(logp) underflows, the ratio is fine",
    "4096 tokens": "N = 4096: a sample per token of 16 answers, each with its answer's advantage "
    "(exactly 0 where a prompt's answers tie, as in GRPO)",
}


def lesson_of(batch: Any, which: str = "") -> str:
    """``That batch tests this: <its lesson>.`` (``The <which> batch where they differ ...``)."""
    where = f"The {which} batch where they differ" if which else "That batch"
    return f"{where} tests this: {batch.lesson}."


def _private_copy(module: ModuleType) -> ModuleType:
    """``module`` executed again from its file, as a module no learner's code refers to."""
    name = f"{__name__}._{module.__name__}"
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    copy = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[copy.__name__] = copy  # as an import does: its dataclasses look the module up
    spec.loader.exec_module(copy)  # type: ignore[union-attr]
    return copy


#: The checkers' own ``ppo_clip`` and ``llm_clip``: every reference answer and variant is computed
#: with them, so a learner's notebook that rebinds ``llm_clip.gae`` cannot make a check pass.
reference: ModuleType = _private_copy(ppo_clip)
llm_reference: ModuleType = _private_copy(llm_clip)


@dataclass(frozen=True, eq=False)
class ExerciseBatch:
    """One batch of a check: the ``arrays`` handed to each call as fresh copies (read-only if
    ``read_only``, else writable, and a change is reported), then read-only copies of the
    ``extras``, then the ``keywords``; what it tests (``lesson``).  A ``core`` batch decides the
    pass; a ``robustness`` one gives a note, ``further`` naming the section of notebook 5 it
    relates to.  ``entries`` names each entry of an answer, if more than one.  Notebook 7 to 9's
    exercises (:mod:`.llm`, :mod:`.gae`, :mod:`.rollout`) have core batches only."""

    name: str
    lesson: str
    arrays: dict[str, np.ndarray]
    extras: tuple[Any, ...] = ()
    keywords: dict[str, Any] = field(default_factory=dict)
    entries: tuple[str, ...] = ()
    role: Role = "core"
    further: str = ""
    read_only: bool = False

    n = property(lambda self: next(iter(self.arrays.values())).size)
    label = property(lambda self: f"batch '{self.name}' ({self.lesson})")

    def inputs(self) -> tuple[Any, ...]:
        """One call's positional arguments: copies of the arrays, read-only copies of extras."""
        copy = partial(read_only_copy, dtype=None) if self.read_only else np.copy
        extras = [read_only_copy(x, None) if isinstance(x, np.ndarray) else x for x in self.extras]
        return (*map(copy, self.arrays.values()), *extras)


@dataclass(frozen=True, eq=False)
class CheckBatch(ExerciseBatch):
    """One batch of notebook 6's checks: its ``arrays`` are ``logp_new``, ``logp_old`` and
    ``advantages`` (kept as read-only float64 copies), its ``extras`` ``(eps,)``.

    The reference answers are computed when the batch is made: inputs outside the contract
    raise ``ValueError``/``TypeError`` as :mod:`ppo_clip` does.
    """

    def __post_init__(self) -> None:
        arrays = {argument: read_only_copy(values) for argument, values in self.arrays.items()}
        object.__setattr__(self, "arrays", arrays)
        _ = self.answers

    logp_new = property(lambda self: self.arrays["logp_new"])
    logp_old = property(lambda self: self.arrays["logp_old"])
    advantages = property(lambda self: self.arrays["advantages"])
    eps = property(lambda self: self.extras[0])
    label = property(lambda self: f"batch '{self.name}' (N = {self.n}, eps = {exact(self.eps)})")

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
            "grad": read_only_copy(reference.ppo_clip_grad(*arguments)),
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
        """Samples clipped or not depending on how the ratio is computed: either is accepted.

        numpy's ``exp`` differs in the last bit between CPUs and from ``math.exp``: a ratio within
        an ulp of an edge computed another way (``math.exp`` of the log-ratio, or the
        probabilities divided) may fall on the edge's other side.
        """
        b = self.breakdown
        with np.errstate(all="ignore"):
            others = (
                np.array([math.exp(x) if x < 709 else math.inf for x in b.log_ratio]),
                np.exp(self.logp_new) / np.exp(self.logp_old),
            )
        flips = [np.isfinite(r) & (replace(b, ratio=r).is_clipped != b.is_clipped) for r in others]
        return np.any(flips, axis=0)


def in_float32(batch: ExerciseBatch) -> ExerciseBatch:
    """``batch`` with its float arrays rounded to float32: float32 arithmetic answers it as
    ``batch``, a float64 formula a little off does not (how a checker tells the two apart)."""
    arrays = {k: np.float32(a).astype(float) if a.dtype.kind == "f" else a
              for k, a in batch.arrays.items()}  # fmt: skip
    lesson = f"{batch.lesson}, rounded to float32"
    return replace(batch, name=f"{batch.name}, in float32", lesson=lesson, arrays=arrays)


def read_only_copy(values: ArrayLike, dtype: DTypeLike = np.float64) -> NDArray[Any]:
    """A read-only copy of ``values``, as float64 (or ``dtype``: None keeps an array's own): a
    view of a read-only array, so that ``setflags(write=True)`` cannot make it writable."""
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array[...]


def _on_the_edge(ratio: float) -> tuple[float, float]:
    """``(logp_new, logp_old)``, one of them 0, whose ratio by numpy's ``exp`` is ``ratio``.

    Whether ``exp(log(1.2))`` is exactly 1.2 depends on the ``exp``: of the float neighbours of
    ``log(ratio)``, one where numpy's lands is taken, preferring one where ``math.exp`` and
    dividing the probabilities land too (where one still misses, the sample is undecided)."""

    def np_exp(x: float) -> float:  # numpy's exp, through the array path the reference takes
        return float(np.exp(np.array([x]))[0])

    x = math.log(ratio)
    nearest = sorted((x + k * math.ulp(x) for k in range(-4, 5)), key=lambda y: abs(y - x))
    pairs = [(y, 0.0) if y < 0 else (0.0, -y) for y in nearest]
    landing = [(new, old) for new, old in pairs if np_exp(new - old) == ratio] or pairs
    ways = (lambda new, old: math.exp(new - old), lambda new, old: np_exp(new) / np_exp(old))
    return max(landing, key=lambda pair: sum(way(*pair) == ratio for way in ways))


def _batch(name: str, *arrays: Any, eps: float = 0.2, further: str = "", **more: Any) -> CheckBatch:
    """Batch ``name`` from its logp_new, logp_old, advantages; a robustness one if ``further``."""
    role = "robustness" if further else "core"
    named = dict(zip(("logp_new", "logp_old", "advantages"), arrays, strict=True))
    return CheckBatch(name, LESSONS[name], named, (eps,), role=role, further=further, **more)


def _p(name: str, new: list[float], old: list[float], a: Any, eps: float = 0.2) -> CheckBatch:
    """A core batch given by its probabilities ``new`` and ``old``."""
    return _batch(name, np.log(new), np.log(old), a, eps=eps)


def _random(name: str, n: int, eps: float, seed: int, read_only: bool = False) -> CheckBatch:
    """``n`` random ratios around 1 and advantages of both signs, from ``seed``."""
    rng = np.random.default_rng(seed)
    old = rng.uniform(-4.0, -0.5, n)
    new = np.minimum(old + rng.normal(0.0, 0.35, n), 0.0)
    return _batch(name, new, old, rng.normal(0.4, 1.2, n), eps=eps, read_only=read_only)


def _tokens() -> CheckBatch:
    """4096 per-token samples, 4 prompts x 4 answers x 256 tokens, half of them near-certain;
    each answer's advantage is its reward standardized within its prompt's group, GRPO's
    :func:`llm_clip.group_advantages` (one prompt's answers tie: their advantages are exactly 0)."""
    rng = np.random.default_rng(4096)
    rewards = [1, 0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0]  # 4 prompts, 4 answers each
    certain = rng.random(4096) < 0.5
    old = np.where(certain, rng.uniform(-0.05, 0.0, 4096), np.log(rng.uniform(0.03, 0.95, 4096)))
    new = np.minimum(old + rng.normal(0.0, 0.12, 4096), 0.0)
    a = np.repeat(llm_clip.group_advantages(rewards, 4), 256)  # per token, its answer's advantage
    return _batch("4096 tokens", new, old, a, further=TOKENS_LESSON)


def _battery() -> tuple[CheckBatch, ...]:
    """Every batch a check runs: the core batches, then the robustness ones."""
    (up_new, up_old), (down_new, down_old) = _on_the_edge(1.2), _on_the_edge(0.8)
    half, edges = math.log(0.5), "ratios exactly on the band's edges"
    sign, mean = "clipping depends on the advantage's sign", "advantages with a nonzero mean"
    overflow_0, overflow_neg = "A = 0 with an overflowing ratio", "A < 0 with an overflowing ratio"
    new, old = [0, half, half, math.log(0.3), math.log(0.6)], [-1000, *np.log([0.4, 0.6, 0.6, 0.4])]
    tiny = [-749.8, -900.1, -999.95], [-750, -900, -1000], [1, -0.5, 2]
    zero, example = "advantages of exactly 0", reference.worked_example()
    return (
        _batch("worked example", *example[:3], eps=example.eps),
        _p("one sample", [0.3], [0.6], [2.5]),
        _batch(edges, [up_new, down_new, half], [up_old, down_old, half], [1.5, -2, 0.7]),
        _p("eps = 0", [0.5, 0.5, 0.55, 0.45, 0.55, 0.45], [0.5] * 6, [1, -1, 1, -1, -1, 1], 0.0),
        _p("eps = 1", [0.01, 0.1, 0.5, 0.3, 0.6], [0.2] * 5, [-1, -2, 1, 0.5, -1], 1.0),
        _p(sign, [0.75, 0.75, 0.25, 0.25], [0.5] * 4, [1, -1, 1, -1]),
        _p(mean, [0.65, 0.35, 0.52, 0.62, 0.45], [0.5] * 5, [3, 5, 4, 6, 2]),
        _p(zero, [0.75, 0.7, 0.25, 0.65, 0.65], [0.5, 0.2, 0.5, 0.5, 0.5], [0, 0, 0, 1.5, -0.5]),
        _random("random batch", 16, 0.1, 11, read_only=True),
        _random("large random batch", 257, 0.2, 5),
        _batch(overflow_0, new, old, [0, 1, -1, 0, 0], further=OVERFLOW_LESSON),
        _batch(overflow_neg, [0, half], [-1000, half], [-1, 1], further=OVERFLOW_LESSON),
        _batch("tiny probabilities", *tiny, further=UNDERFLOW_LESSON),
        _tokens(),
    )


#: Every batch a check runs, core batches first; built when the checker is imported.
BATTERY: tuple[CheckBatch, ...] = _battery()


def battery(role: Role | None = None) -> tuple[CheckBatch, ...]:
    """The batches of :data:`BATTERY` (only those of ``role``, if given)."""
    if role not in (None, "core", "robustness"):
        raise ValueError(f"role must be 'core', 'robustness' or None, got {role!r}")
    return tuple(batch for batch in BATTERY if role in (None, batch.role))
