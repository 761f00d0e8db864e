"""Why PPO uses a ratio and clips it, on notebook 3's bandit and batch.

* :class:`UpdateLine`: the three objectives along the straight line through PPO's update,
  the analogue of the PPO paper's Figure 2 (Schulman et al. 2017):
  ``theta(t) = theta_old + t * (theta_PPO - theta_old)``, each objective minus
  :func:`ppo_clip.surrogate_loss` at ``theta(t)``, with the exact KL from the old policy.
* :func:`small_step_study`: PPO with the step size halved again and again and the epochs
  doubled, so that ``step size * epochs`` stays :data:`TOTAL_MOVEMENT`; with tiny steps the
  soft band behaves like the hard constraint
  :func:`~ppo_viz.epochs.training.hard_constraint_optimum` solves; on some batches with an arm
  whose samples all have one sign (:data:`DRIFTING_SEED`), it does not.
* :func:`estimator_studies`: the KL estimators k1, k2, k3 over many fresh batches, against
  the exact KL (tabled by :func:`ppo_viz.epochs.text.kl_estimator_table`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

import ppo_clip
from bandit import ARM_MEANS, KL_TERMS, Batch, FloatArray, IntArray, exact_kl, softmax
from ppo_viz.epochs.training import (
    DEFAULT_EPS,
    STEP_SIZES,
    TOTAL_MOVEMENT,
    Settings,
    batch_of,
    draw_batches,
    outside_band,
    policies_per_epoch,
    run_all,
)

#: The interpolation factors: -1 to 3 in steps of 0.02 (0 and 1 exactly on the grid).
FACTORS = np.arange(-50, 151) / 50.0
#: How many fresh batches :func:`estimator_studies` draws by default.
STUDY_BATCHES = 1000


# -- the line through one update ----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class UpdateLine:
    """The line ``theta(t) = start + t * (end - start)`` through one update, on one batch."""

    batch: Batch
    start: FloatArray
    end: FloatArray
    end_label: str
    factors: FloatArray = field(default_factory=lambda: FACTORS)

    def logits_at(self, factor: float | FloatArray) -> FloatArray:
        """``theta(factor)``; for a column of factors, one row of logits each."""
        return self.start + factor * (self.end - self.start)

    @functools.cached_property
    def sample_logps(self) -> FloatArray:
        """``(len(factors), N)``: every sample's log-probability at every factor."""
        return self.batch.logp(self.logits_at(self.factors[:, None]))

    @functools.lru_cache(maxsize=512)  # noqa: B019 (few lines, kept by ppo_update_line anyway)
    def objective(self, objective: ppo_clip.Objective, eps: float) -> FloatArray:
        """The objective to maximise at each factor: minus ppo_clip's loss there (kept)."""
        b = self.batch
        loss = functools.partial(ppo_clip.surrogate_loss, objective=objective)
        return -np.array([loss(logp, b.logp_old, b.advantages, eps) for logp in self.sample_logps])

    @functools.cached_property
    def kl(self) -> FloatArray:
        """The exact ``KL(old || new)`` at each factor."""
        return exact_kl(softmax(self.start), softmax(self.logits_at(self.factors[:, None])))

    def peak(self, eps: float) -> tuple[float, float, float]:
        """``(factor, value, KL)`` where PPO's clipped objective is largest on the grid."""
        clipped = self.objective("clipped", eps)
        best = int(np.argmax(clipped))
        return float(self.factors[best]), float(clipped[best]), float(self.kl[best])


@functools.lru_cache(maxsize=4)
def ppo_update_line(settings: Settings | None = None) -> UpdateLine:
    """The line through PPO's update in the run with these settings (default: notebook 3's)."""
    run = run_all(settings or Settings())["clipped"]
    label = f"after PPO's {run.epochs_run} epochs"
    return UpdateLine(run.batch, run.logits[0], run.logits[-1], label)


# -- the small-step limit ----------------------------------------------------------------


@dataclass(frozen=True)
class StepSizeRun:
    """One run of the study: per epoch, every arm's ratio (on one batch, or on many side by
    side: then each property has one entry per batch)."""

    objective: ppo_clip.Objective
    step_size: float
    eps: float
    arm_ratios: FloatArray

    @property
    def n_epochs(self) -> int:
        """How many gradient steps the run took."""
        return len(self.arm_ratios) - 1

    @property
    def movement(self) -> FloatArray:
        """``step size * epochs so far``: the x axis on which runs of any step size compare."""
        return self.step_size * np.arange(self.n_epochs + 1)

    @property
    def largest_excursion(self) -> float | FloatArray:
        """How far any arm's ratio ever got outside the band (0 if never)."""
        return np.maximum(self._beyond.max(axis=(0, -1)), 0.0)

    @property
    def farthest_arm(self) -> int | IntArray:
        """The arm whose ratio ends farthest from the band."""
        return np.argmax(self._beyond[-1], axis=-1)

    @property
    def _beyond(self) -> FloatArray:
        return outside_band(self.arm_ratios, ppo_clip.clip_band(self.eps))


def small_step_study(
    objectives: Sequence[ppo_clip.Objective] = ("clipped", "clip_only"),
    step_sizes: Sequence[float] = STEP_SIZES,
    *,
    total: float = TOTAL_MOVEMENT,
    eps: float = DEFAULT_EPS,
    batch: Batch | None = None,
) -> dict[ppo_clip.Objective, list[StepSizeRun]]:
    """For each objective, one run per step size on ``batch`` (default: notebook 3's), each for
    ``total / step size`` epochs (a whole number), so that every run moves as far."""
    batch, runs = batch or batch_of(Settings().seed), {o: [] for o in objectives}
    for step_size in step_sizes:
        n_epochs = total / step_size
        if n_epochs != round(n_epochs) or n_epochs < 1:
            raise ValueError(
                f"total / step_size must be a whole number of epochs, got {total} / {step_size}"
            )
        for objective in objectives:
            probs = policies_per_epoch(batch, objective, step_size, round(n_epochs), eps)
            runs[objective].append(StepSizeRun(objective, step_size, eps, probs / probs[0]))
    return runs


#: The batch seed of the dashed line in notebook 3's small-step figure: the first on which PPO's
#: band stays soft however small the steps, by this rule (tests/epochs_rule.py's
#: ``drifting_problems``; ``python tests/epochs_rule.py`` finds the seed for new ``ARM_MEANS``).
#: Its batch (1) draws every arm at least twice; in :func:`small_step_study`, (2) PPO's largest
#: excursion outside the band at the smallest step size is at least half that at step size 1, and
#: over five times :data:`HARD_MARGIN` (clip-only's "not hard"), and (3) the arm that ends farthest
#: from the band has samples all of one sign (the rule's ``one_signed_arms``), ends past the edge
#: where all of them are clipped, at 0.95 of that excursion or more: none of them pulls it back;
#: (4) in that run another arm ends inside the band, its ratio over :data:`HARD_MARGIN` from where
#: it was halfway: still moving, it carries the clipped arm (on seed 1, whose arms all end at an
#: edge, none does).
DRIFTING_SEED = 6


# -- the KL estimators -------------------------------------------------------------------


@dataclass(frozen=True)
class EstimatorStudy:
    """The estimators of KL(old || new) for one new policy on many fresh batches: each
    estimator's estimates, one per batch, and the exact KL they estimate."""

    label: str
    exact: float
    estimates: dict[str, FloatArray]

    def bias_in_standard_errors(self, name: str) -> float:
        """How far the estimates' mean lies from the exact KL, in standard errors of the mean."""
        values = self.estimates[name]
        return (values.mean() - self.exact) / (values.std(ddof=1) / np.sqrt(values.size))


def estimator_studies(
    policies: Mapping[str, ArrayLike], seeds: Sequence[int] = range(STUDY_BATCHES)
) -> list[EstimatorStudy]:
    """For each new policy (label: logits), k1, k2 and k3 on one fresh batch per seed.

    Each batch is the one the explorer's batch seed draws; every policy is estimated on the
    same batches, and none of the policies learned from them.
    """
    batches = draw_batches(seeds)
    old = softmax(np.zeros(len(ARM_MEANS)))
    studies = []
    for label, logits in policies.items():
        log_ratio = batches.logp(logits) - batches.logp_old
        estimates = {name: term(log_ratio).mean(axis=-1) for name, term in KL_TERMS.items()}
        studies.append(EstimatorStudy(label, float(exact_kl(old, softmax(logits))), estimates))
    return studies
