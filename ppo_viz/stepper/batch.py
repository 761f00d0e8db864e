"""The batch the stepper walks through, and the three preset batches.

A :class:`StepperBatch` holds the inputs of :func:`ppo_clip.clip_breakdown`
(log-probabilities, advantages, ``eps``) and, when it was typed as
probabilities, those probabilities too, so the readout can show both.  Its
:attr:`~StepperBatch.breakdown` is the module's computation: every number the
stepper shows is read from it.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip

FloatArray = NDArray[np.float64]

#: The contract's largest batch.
MAX_SAMPLES = 4096
#: The contract's lowest log-probability.
LOGP_MIN = -1000.0
#: The largest advantage (in magnitude) the stepper draws.  Its figure draws ``r*A`` and
#: ``clip(r)*A`` for ratios up to 6, so every drawn value stays finite, with readable ticks.
#: Advantages are usually within ±100, so this refuses only typing slips.
MAX_ABS_ADVANTAGE = 1e6


@dataclass(frozen=True, eq=False)
class StepperBatch:
    """One batch for the stepper: the inputs of :func:`ppo_clip.clip_breakdown`.

    The module checks the inputs when the batch is made (a ``ValueError`` or
    ``TypeError`` names the argument), so a batch that exists can be walked.
    ``prob_new``/``prob_old`` are the probabilities the batch was typed as,
    if it was typed as probabilities (see :meth:`from_probabilities`).
    """

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float
    name: str = "your batch"
    prob_new: FloatArray | None = None
    prob_old: FloatArray | None = None

    #: The module's per-sample computation for this batch (made, and so checked, up front).
    breakdown: ppo_clip.ClipBreakdown = field(init=False, repr=False)

    def __post_init__(self) -> None:
        breakdown = ppo_clip.clip_breakdown(self.logp_new, self.logp_old, self.advantages, self.eps)
        for argument in ("logp_new", "logp_old", "advantages"):
            object.__setattr__(self, argument, np.asarray(getattr(self, argument), dtype=float))
        object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "breakdown", breakdown)

    @classmethod
    def from_probabilities(
        cls,
        prob_new: ArrayLike,
        prob_old: ArrayLike,
        advantages: ArrayLike,
        eps: float = ppo_clip.DEFAULT_EPS,
        *,
        name: str = "your batch",
    ) -> StepperBatch:
        """A batch typed as probabilities, each in (0, 1]; the logs are taken here.

        Raises ``ValueError`` naming the argument for a probability outside
        (0, 1], and the module's errors for anything else.
        """
        new = _probabilities("prob_new", prob_new)
        old = _probabilities("prob_old", prob_old)
        return cls(
            logp_new=np.log(new),
            logp_old=np.log(old),
            advantages=advantages,
            eps=eps,
            name=name,
            prob_new=new,
            prob_old=old,
        )

    @property
    def n(self) -> int:
        """The number of samples N."""
        return self.breakdown.n

    @property
    def typed_as_probabilities(self) -> bool:
        """Whether the batch was typed as probabilities (they are shown next to the logs)."""
        return self.prob_new is not None and self.prob_old is not None

    def arguments(self) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        """``(logp_new, logp_old, advantages, eps)``, the contract functions' arguments."""
        return self.logp_new, self.logp_old, self.advantages, self.eps


def checked_step(batch: StepperBatch, step: int) -> int:
    """``step`` if it is a sample of ``batch``; else a ``TypeError``/``ValueError`` naming it."""
    if not isinstance(batch, StepperBatch):
        raise TypeError(f"batch must be a StepperBatch, got {type(batch).__name__}")
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"step must be an integer, got {type(step).__name__}")
    if not 0 <= step < batch.n:
        raise ValueError(f"step must be between 0 and {batch.n - 1}, got {step}")
    return int(step)


def _probabilities(name: str, values: ArrayLike) -> FloatArray:
    """``values`` as a float array of probabilities in (0, 1], or a ``ValueError`` naming it."""
    array = np.asarray(values, dtype=float)
    outside = ~((array > 0.0) & (array <= 1.0))
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(f"{name}[{index}] is {array.flat[index]}; a probability is in (0, 1]")
    return array


class Preset(NamedTuple):
    """A preset batch as typed: its button's label, probabilities, advantages and ``eps``."""

    label: str
    prob_new: Sequence[float]
    prob_old: Sequence[float]
    advantages: Sequence[float]
    eps: float


#: The presets, by name.
PRESETS: dict[str, Preset] = {
    "worked example": Preset(
        "Worked example", [0.7, 0.55, 0.3, 0.45], [0.5] * 4, [1.0, 2.0, -1.0, -0.5], 0.2
    ),
    "two clip fractions": Preset(
        "Clip fractions disagree", [0.75, 0.75, 0.25, 0.25], [0.5] * 4, [1.0, -1.0, 1.0, -1.0], 0.2
    ),
    "edge cases": Preset(
        "Edge cases", [0.6, 0.4, 0.9, 0.2, 0.5], [0.5] * 5, [1.0, -1.0, -1.0, 1.0, 0.0], 0.2
    ),
}


def preset_batch(name: str) -> StepperBatch:
    """One of :data:`PRESETS` as a batch.

    ``"worked example"`` is the contract's example (the same arrays as
    :func:`ppo_clip.worked_example`); ``"two clip fractions"`` has ratios
    [1.5, 1.5, 0.5, 0.5] with A = [+1, -1, +1, -1], where the two
    clip-fraction definitions give 0.5 and 1; ``"edge cases"`` has ratios
    exactly on both band edges, two moves in the unfavourable direction and
    an A = 0.
    """
    if name not in PRESETS:
        raise ValueError(f"name must be one of {list(PRESETS)}, got {name!r}")
    preset = PRESETS[name]
    return StepperBatch.from_probabilities(
        preset.prob_new, preset.prob_old, preset.advantages, preset.eps, name=name
    )
