"""The small-step limit: with tiny steps, PPO's soft band behaves like a hard constraint (here).

PPO switches off the gradient of a sample whose ratio has left the band in
its favourable direction; nothing stops a step from carrying a ratio past
the edge first.  :func:`small_step_study` trains on notebook 3's batch with
the step size halved again and again and the number of epochs doubled, so
that ``step size * epochs`` (how far the runs may move in all) stays
:data:`TOTAL_MOVEMENT`, and records how far each run's ratios ever get
outside the band (:attr:`StepSizeRun.largest_excursion`).

:func:`hard_constraint_optimum` solves the problem the hard constraint
poses: the best unclipped surrogate when no arm's ratio may leave
``[1 - eps, 1 + eps]``, a small linear program.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import ppo_clip
from ppo_viz.epochs.bandit import Bandit, BanditBatch, FloatArray, cached_batch, default_bandit
from ppo_viz.epochs.training import DEFAULT_EPS, DEFAULT_SEED, descend

#: The step sizes of the study: 4, 2, 1, ..., 1/32 (each half the one before).
STEP_SIZES: tuple[float, ...] = tuple(4.0 / 2.0**k for k in range(8))
#: ``step size * epochs`` of every run of the study (the explorer's default run has 0.5 * 30).
TOTAL_MOVEMENT = 16.0


@dataclass(frozen=True)
class StepSizeRun:
    """One run of the study: per epoch, every arm's ratio and the exact KL."""

    objective: ppo_clip.Objective
    step_size: float
    eps: float
    arm_ratios: FloatArray
    exact_kl: FloatArray

    @property
    def n_epochs(self) -> int:
        """How many gradient steps the run took."""
        return int(self.arm_ratios.shape[0] - 1)

    @property
    def movement(self) -> FloatArray:
        """``step size * epochs so far``: the x axis on which runs of any step size compare."""
        return self.step_size * np.arange(self.n_epochs + 1)

    @property
    def excursion(self) -> FloatArray:
        """Per epoch, how far the arm furthest outside the band is beyond its edge (0 inside)."""
        lower, upper = ppo_clip.clip_band(self.eps)
        beyond = np.maximum(self.arm_ratios - upper, lower - self.arm_ratios)
        return np.maximum(beyond.max(axis=1), 0.0)

    @property
    def largest_excursion(self) -> float:
        """The largest :attr:`excursion` over the whole run."""
        return float(self.excursion.max())


def run_with_step_size(
    objective: ppo_clip.Objective,
    step_size: float,
    *,
    total: float = TOTAL_MOVEMENT,
    eps: float = DEFAULT_EPS,
    batch: BanditBatch | None = None,
) -> StepSizeRun:
    """Train ``objective`` with ``step_size`` for ``total / step_size`` epochs (a whole number)."""
    n_epochs = total / step_size
    if n_epochs != round(n_epochs) or n_epochs < 1:
        raise ValueError(
            f"total / step_size must be a whole number of epochs, got {total} / {step_size}"
        )
    batch = batch or cached_batch(DEFAULT_SEED)
    history, _ = descend(batch, objective, eps=eps, step_size=step_size, n_epochs=round(n_epochs))
    probs = history["probs"]
    return StepSizeRun(objective, step_size, eps, probs / probs[0], history["exact_kl"])


def small_step_study(
    objectives: Sequence[ppo_clip.Objective] = ("clipped", "clip_only"),
    step_sizes: Sequence[float] = STEP_SIZES,
    *,
    total: float = TOTAL_MOVEMENT,
    eps: float = DEFAULT_EPS,
) -> dict[ppo_clip.Objective, list[StepSizeRun]]:
    """For each objective, one run per step size on notebook 3's batch, same total movement."""
    return {
        objective: [
            run_with_step_size(objective, step, total=total, eps=eps) for step in step_sizes
        ]
        for objective in objectives
    }


def hard_constraint_optimum(
    batch: BanditBatch | None = None, eps: float = DEFAULT_EPS, bandit: Bandit | None = None
) -> FloatArray:
    """The arm ratios that maximise the unclipped surrogate with every ratio in the band.

    The unclipped surrogate is ``sum_k r_k * S_k / N``, with ``S_k`` the sum
    of arm k's advantages; the ratios must satisfy ``1 - eps <= r_k <= 1 + eps``
    and keep the probabilities summing to one, ``sum_k pi_old(k) * r_k = 1``.
    A linear program of this shape is solved greedily: start every arm at
    ``1 - eps`` and raise the arms in order of ``S_k / pi_old(k)``, best
    first, each as far as ``1 + eps``, until the probabilities sum to one.
    """
    batch = batch or cached_batch(DEFAULT_SEED)
    bandit = bandit or default_bandit()
    lower, upper = ppo_clip.clip_band(eps)
    old = bandit.old_probs
    sums = np.bincount(batch.actions, weights=batch.advantages, minlength=bandit.k)
    ratios = np.full(bandit.k, lower)
    room = 1.0 - float(old @ ratios)  # probability still to hand out
    for arm in np.argsort(-sums / old, kind="stable"):
        raise_by = min(upper - lower, max(room, 0.0) / old[arm])
        ratios[arm] += raise_by
        room -= raise_by * old[arm]
    return ratios
