"""The batches every check runs a learner's function on, and what each is there to test.

A :class:`CheckBatch` holds the inputs of one call (read-only copies), the
clip size, a sentence saying what it tests (its ``lesson``, quoted when the
learner's function fails on it) and its ``role``:

* ``"core"`` batches test the contract on realistic inputs: the worked
  example, a batch of one, ratios exactly on the band's edges, ``eps = 0``
  and ``eps = 1``, advantages of both signs, of exactly 0 or with a nonzero
  mean, random batches up to ``N = 257``, read-only arrays.  Passing them is
  passing the exercise;
* ``"robustness"`` batches test what float64 does at the contract's edges:
  a ratio that overflows to ``inf`` (with ``A = 0`` and with ``A < 0``),
  log-probabilities near -1000, whose probabilities underflow to 0, and the
  contract's largest batch, ``N = 4096``.  What goes wrong there is shown as
  "going further", with the lesson of notebook 5 it relates to (``further``).

:data:`BATTERY` lists them all, core batches first.  It is built, and every
reference answer computed, when this module is imported, with the checker's
own copy of :mod:`ppo_clip` (:data:`.reference`): a learner's code that later
replaces a function of ``ppo_clip`` cannot change them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ppo_viz.exercises.reference import reference
from ppo_viz.numbers import exact

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: The three exercises, by the kind of value their function returns.
Kind = Literal["loss", "clip_fraction", "grad"]
#: What a batch is there to test: the contract on realistic inputs, or float64's edges.
Role = Literal["core", "robustness"]
ROLES: tuple[Role, ...] = ("core", "robustness")

#: The name of the learner's function for each exercise.
FUNCTION_NAMES: dict[str, str] = {
    "loss": "ppo_clip_loss",
    "clip_fraction": "clip_fraction",
    "grad": "ppo_clip_grad",
}

#: The reference solution of each exercise (from the checker's own copy of ppo_clip).
REFERENCES: dict[str, Callable[..., Any]] = {
    "loss": reference.ppo_clip_loss,
    "clip_fraction": reference.clip_fraction,
    "grad": reference.ppo_clip_grad,
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


@dataclass(frozen=True, eq=False)
class CheckBatch:
    """One batch of a check: inputs, ``eps``, what it tests (``lesson``) and its ``role``.

    The arrays are stored as read-only float64 copies.  ``read_only`` batches
    hand the learner read-only arrays; every other batch hands out fresh
    writable copies (see :meth:`inputs`), which the checker compares with the
    originals after the call.  A robustness batch names the lesson of
    notebook 5 it relates to in ``further``.  The reference answers are
    computed when the batch is made.  Raises ``ValueError`` or ``TypeError``
    (naming the argument) for inputs outside the contract, as :mod:`ppo_clip`
    does, and ``ValueError`` for an unknown ``role`` or a robustness batch
    without ``further``.
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
        object.__setattr__(self, "eps", float(self.eps))
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if self.role == "robustness" and not self.further:
            raise ValueError("a robustness batch needs `further`: the lesson it relates to")
        _ = self.breakdown  # checks the arrays and eps against the contract
        _ = self.answers  # every reference answer, now

    @classmethod
    def from_probabilities(
        cls,
        prob_new: Sequence[float],
        prob_old: Sequence[float],
        advantages: Sequence[float],
        eps: float,
        *,
        name: str,
        lesson: str,
        role: Role = "core",
        further: str = "",
    ) -> CheckBatch:
        """A batch given by probabilities in (0, 1] instead of log-probabilities."""
        return cls(
            name=name,
            logp_new=_log_of_probabilities("prob_new", prob_new),
            logp_old=_log_of_probabilities("prob_old", prob_old),
            advantages=np.asarray(advantages, dtype=np.float64),
            eps=eps,
            lesson=lesson,
            role=role,
            further=further,
        )

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.advantages.shape[0])

    @property
    def label(self) -> str:
        """``batch 'name' (N = .., eps = ..)``, for messages."""
        return f"batch '{self.name}' (N = {self.n}, eps = {exact(self.eps)})"

    def inputs(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Fresh copies of the three arrays for one call (read-only if ``read_only``)."""
        copies = (self.logp_new.copy(), self.logp_old.copy(), self.advantages.copy())
        if self.read_only:
            for array in copies:
                array.setflags(write=False)
        return copies

    @cached_property
    def breakdown(self) -> Any:
        """The reference breakdown of this batch (a ``ppo_clip.ClipBreakdown``)."""
        return reference.clip_breakdown(self.logp_new, self.logp_old, self.advantages, self.eps)

    @cached_property
    def answers(self) -> dict[str, float | FloatArray]:
        """The reference answer of each exercise, computed once (arrays read-only)."""
        answers = {
            kind: function(self.logp_new, self.logp_old, self.advantages, self.eps)
            for kind, function in REFERENCES.items()
        }
        answers["grad"] = _frozen(answers["grad"])
        return answers

    def reference(self, kind: Kind) -> float | FloatArray:
        """What :mod:`ppo_clip` returns for this batch in exercise ``kind``."""
        return self.answers[kind]

    @cached_property
    def overflowing_zero_advantage(self) -> BoolArray:
        """Samples with ``A == 0`` whose ratio overflowed to ``inf`` (``inf * 0`` is NaN)."""
        b = self.breakdown
        return (b.advantages == 0) & np.isinf(b.ratio)

    @cached_property
    def underflows(self) -> BoolArray:
        """Samples where ``exp(logp_new)`` and ``exp(logp_old)`` both underflow to 0.

        Code that divides probabilities gets ``0 / 0 = NaN`` as their ratio.
        """
        with np.errstate(under="ignore"):
            return (np.exp(self.logp_new) == 0) & (np.exp(self.logp_old) == 0)


def _frozen(values: ArrayLike) -> FloatArray:
    """A read-only float64 copy of ``values``."""
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def _log_of_probabilities(name: str, values: Sequence[float]) -> FloatArray:
    """``log(values)``, or a ``ValueError`` naming ``name`` if a value is not in (0, 1]."""
    probabilities = np.asarray(values, dtype=np.float64)
    outside = ~((probabilities > 0) & (probabilities <= 1))
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(
            f"{name}[{index}] is {probabilities.flat[index]}; probabilities must be in (0, 1]"
        )
    return np.log(probabilities)


def _random_batch(
    name: str, n: int, eps: float, seed: int, *, read_only: bool = False
) -> CheckBatch:
    """``n`` random ratios around 1 and advantages of both signs, from ``seed``."""
    rng = np.random.default_rng(seed)
    logp_old = rng.uniform(-4.0, -0.5, n)
    logp_new = np.minimum(logp_old + rng.normal(0.0, 0.35, n), 0.0)
    advantages = rng.normal(0.4, 1.2, n)
    lesson = "random ratios around 1 and advantages of both signs"
    if read_only:
        lesson = "the input arrays are read-only, so a function that writes into them fails"
    return CheckBatch(
        name=name,
        logp_new=logp_new,
        logp_old=logp_old,
        advantages=advantages,
        eps=eps,
        lesson=lesson,
        read_only=read_only,
    )


def _token_batch() -> CheckBatch:
    """4096 per-token samples: 4 prompts x 4 answers of 256 tokens, advantages as in GRPO.

    About half the tokens are near-certain; the others have probabilities
    from 0.03 to 0.95.  Each answer's advantage is its reward standardized
    within its prompt's group and copied to its tokens; one prompt's answers
    tie, so their advantages are exactly 0.
    """
    rng = np.random.default_rng(4096)
    rewards = np.array([[1, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], dtype=float)
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    spread = rewards.std(axis=1, keepdims=True)
    per_answer = np.divide(centred, spread, out=np.zeros_like(rewards), where=spread > 0)
    n = rewards.size * 256
    near_certain = rng.random(n) < 0.5
    logp_old = np.where(
        near_certain, rng.uniform(-0.05, 0.0, n), np.log(rng.uniform(0.03, 0.95, n))
    )
    return CheckBatch(
        name="4096 tokens",
        logp_new=np.minimum(logp_old + rng.normal(0.0, 0.12, n), 0.0),
        logp_old=logp_old,
        advantages=np.repeat(per_answer.ravel(), 256),
        eps=0.2,
        lesson="N = 4096, the contract's largest batch: one sample per token of 16 answers, "
        "each token carrying its answer's advantage (exactly 0 for a prompt whose answers "
        "tie, as in GRPO)",
        role="robustness",
        further=TOKENS_LESSON,
    )


def _battery() -> tuple[CheckBatch, ...]:
    """Every batch a check runs: the core batches, then the robustness ones."""
    example = reference.worked_example()
    log = math.log
    return (
        CheckBatch(
            name="worked example",
            logp_new=example.logp_new,
            logp_old=example.logp_old,
            advantages=example.advantages,
            eps=example.eps,
            lesson="the contract's worked example: ratios [1.4, 1.1, 0.6, 0.9]; samples 0 "
            "and 2 are clipped",
        ),
        CheckBatch.from_probabilities(
            [0.3],
            [0.6],
            [2.5],
            0.2,
            name="one sample",
            lesson="a batch of one sample: r = 0.5 although A > 0, a move the unfavourable "
            "way, so it is not clipped",
        ),
        CheckBatch.from_probabilities(
            [0.6, 0.4, 0.5],
            [0.5, 0.5, 0.5],
            [1.5, -2.0, 0.7],
            0.2,
            name="ratios exactly on the band's edges",
            lesson="r = 1.2 with A > 0 and r = 0.8 with A < 0, exactly (in float64 "
            "exp(log(0.6) - log(0.5)) is 1.2): on the edge a sample is not clipped",
        ),
        CheckBatch.from_probabilities(
            [0.5, 0.5, 0.55, 0.45, 0.55, 0.45],
            [0.5] * 6,
            [1.0, -1.0, 1.0, -1.0, -1.0, 1.0],
            0.0,
            name="eps = 0",
            lesson="eps = 0: every sample that moved the favourable way is clipped; r == 1 "
            "exactly is not",
        ),
        CheckBatch.from_probabilities(
            [0.01, 0.1, 0.5, 0.3, 0.6],
            [0.2] * 5,
            [-1.0, -2.0, 1.0, 0.5, -1.0],
            1.0,
            name="eps = 1",
            lesson="eps = 1: the band is [0, 2], so no negative-advantage sample is ever clipped",
        ),
        CheckBatch.from_probabilities(
            [0.75, 0.75, 0.25, 0.25],
            [0.5] * 4,
            [1.0, -1.0, 1.0, -1.0],
            0.2,
            name="clipping depends on the advantage's sign",
            lesson="r = [1.5, 1.5, 0.5, 0.5], A = [+1, -1, +1, -1]: all four ratios are "
            "outside the band, but only samples 0 and 3 are clipped",
        ),
        CheckBatch.from_probabilities(
            [0.65, 0.35, 0.52, 0.62, 0.45],
            [0.5] * 5,
            [3.0, 5.0, 4.0, 6.0, 2.0],
            0.2,
            name="advantages with a nonzero mean",
            lesson="every advantage is positive (mean 4); they are used as given, never normalized",
        ),
        CheckBatch.from_probabilities(
            [0.75, 0.7, 0.25, 0.65, 0.65],
            [0.5, 0.2, 0.5, 0.5, 0.5],
            [0.0, 0.0, 0.0, 1.5, -0.5],
            0.2,
            name="advantages of exactly 0",
            lesson="A = 0 with r = 1.5, 3.5 and 0.5, all outside the band (A = 0 is common in "
            "GRPO, when every answer to a prompt got the same reward): a sample with A = 0 is "
            "never clipped; only sample 3 (A > 0, r = 1.3) is",
        ),
        _random_batch("read-only inputs", 8, 0.2, seed=7, read_only=True),
        _random_batch("random batch", 16, 0.1, seed=11),
        _random_batch("large random batch", 257, 0.2, seed=5),
        CheckBatch(
            name="A = 0 with an overflowing ratio",
            logp_new=[0.0, log(0.5), log(0.5), log(0.3), log(0.6)],
            logp_old=[-1000.0, log(0.4), log(0.6), log(0.6), log(0.4)],
            advantages=[0.0, 1.0, -1.0, 0.0, 0.0],
            eps=0.2,
            lesson="sample 0 has logp_new - logp_old = 1000, so r = exp(1000) overflows to "
            "inf, and A = 0: it must add exactly 0 (inf * 0 is NaN in IEEE arithmetic)",
            role="robustness",
            further=OVERFLOW_LESSON,
        ),
        CheckBatch(
            name="A < 0 with an overflowing ratio",
            logp_new=[0.0, log(0.5)],
            logp_old=[-1000.0, log(0.5)],
            advantages=[-1.0, 1.0],
            eps=0.2,
            lesson="sample 0 has r = inf and A < 0: it is not clipped, so the loss is +inf "
            "(the true float64 value) and its gradient is +inf",
            role="robustness",
            further=OVERFLOW_LESSON,
        ),
        CheckBatch(
            name="tiny probabilities",
            logp_new=[-749.8, -900.1, -999.95],
            logp_old=[-750.0, -900.0, -1000.0],
            advantages=[1.0, -0.5, 2.0],
            eps=0.2,
            lesson="log-probabilities near -1000, as for whole sequences in RLHF: exp(logp) "
            "underflows to 0, but exp(logp_new - logp_old) is fine",
            role="robustness",
            further=UNDERFLOW_LESSON,
        ),
        _token_batch(),
    )


#: Every batch a check runs, core batches first; built when the checker is imported.
BATTERY: tuple[CheckBatch, ...] = _battery()


def battery(role: Role | None = None) -> tuple[CheckBatch, ...]:
    """The batches of :data:`BATTERY` (only those of ``role``, if given)."""
    if role is None:
        return BATTERY
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    return tuple(batch for batch in BATTERY if batch.role == role)
