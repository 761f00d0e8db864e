"""The three objectives along the straight line through one PPO update (the paper's Figure 2).

Schulman et al. (2017), Figure 2, plot PPO's objectives as the parameters
move along the line from ``theta_old`` through the parameters after one
iteration of PPO and beyond.  :class:`UpdateLine` does the same on notebook
3's bandit and batch:

    ``theta(t) = theta_old + t * (theta_new - theta_old)``,

with ``theta_new`` the logits after PPO's default run (:func:`ppo_update_line`),
so ``t = 0`` is the old policy and ``t = 1`` the policy PPO reached.  At each
factor ``t`` the three objectives are minus :func:`ppo_clip.surrogate_loss`
(the mean of ``r*A``, of ``clip(r)*A`` and of their minimum: quantities to
*maximise*), and the KL from the old policy is exact.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

import ppo_clip
from ppo_viz.epochs.bandit import (
    Bandit,
    BanditBatch,
    FloatArray,
    cached_batch,
    default_bandit,
    read_only,
    softmax,
)
from ppo_viz.epochs.kl import exact_kl
from ppo_viz.epochs.training import Settings, grad_wrt_logits, run_all
from ppo_viz.numbers import count

#: The interpolation factors plotted: -1 to 3 in steps of 0.02 (0 and 1 exactly included).
FACTORS = np.arange(-50, 151) / 50.0
#: The range of the explorer's eps slider.
EPS_RANGE = (0.0, 0.5)


@dataclass(frozen=True, eq=False)
class UpdateLine:
    """The line ``theta(t) = start + t * (end - start)`` through one update, on one batch.

    ``start`` is the old policy's logits (the batch's policy), ``end`` the
    logits after the update, which ``end_label`` describes for the figure.
    Every objective comes from :func:`ppo_clip.surrogate_loss` at ``theta(t)``.
    """

    batch: BanditBatch
    bandit: Bandit
    start: FloatArray
    end: FloatArray
    factors: FloatArray
    end_label: str = "after the update"

    @property
    def direction(self) -> FloatArray:
        """``end - start``: the update itself."""
        return self.end - self.start

    def logits_at(self, factor: float) -> FloatArray:
        """``theta(factor)``."""
        return self.start + factor * self.direction

    @cached_property
    def sample_logps(self) -> FloatArray:
        """``(len(factors), N)``: every sample's log-probability at every factor."""
        return np.array([self.batch.sample_logp(self.logits_at(t)) for t in self.factors])

    def objective(self, objective: ppo_clip.Objective, eps: float) -> FloatArray:
        """The objective to maximise at each factor: minus ppo_clip's loss there (kept)."""
        key = (objective, float(eps))
        if key not in self._curves:
            batch = self.batch
            self._curves[key] = read_only(
                np.array(
                    [
                        -ppo_clip.surrogate_loss(
                            logp, batch.logp_old, batch.advantages, eps, objective=objective
                        )
                        for logp in self.sample_logps
                    ]
                )
            )
        return self._curves[key]

    @cached_property
    def _curves(self) -> dict[tuple[str, float], FloatArray]:
        """The curves computed so far, by objective and eps (a slider revisits its values)."""
        return {}

    @cached_property
    def unclipped(self) -> FloatArray:
        """The unclipped surrogate at each factor (it does not depend on eps)."""
        return self.objective("unclipped", ppo_clip.DEFAULT_EPS)

    @cached_property
    def kl(self) -> FloatArray:
        """The exact ``KL(old || new)`` at each factor."""
        old = self.bandit.old_probs
        return np.array([exact_kl(old, softmax(self.logits_at(t))) for t in self.factors])

    def start_slope(self, objective: ppo_clip.Objective, eps: float) -> float:
        """The objective's slope at factor 0: ``-(d loss / d logits) . direction`` there.

        The gradient is ppo_clip's, chained through the softmax
        (:func:`grad_wrt_logits`).  At ``theta_old`` every ratio is 1, inside
        the band, so the three objectives share it: it is the policy gradient
        along the update.
        """
        return -float(grad_wrt_logits(self.start, self.batch, eps, objective) @ self.direction)


@dataclass(frozen=True)
class Peak:
    """Where PPO's clipped objective is largest along the line, on the grid of factors."""

    factor: float
    value: float
    kl: float


def clipped_peak(line: UpdateLine, clipped: ArrayLike) -> Peak:
    """The grid point where ``clipped`` (PPO's objective along ``line``) is largest."""
    values = np.asarray(clipped, dtype=np.float64)
    index = int(np.argmax(values))
    return Peak(float(line.factors[index]), float(values[index]), float(line.kl[index]))


@functools.lru_cache(maxsize=4)
def ppo_update_line(settings: Settings | None = None) -> UpdateLine:
    """The line through PPO's update in the run with these settings (default: notebook 3's).

    ``end`` is the logits after the run's last epoch: at the defaults, 30
    full-batch steps of size 0.5 with eps = 0.2 on the batch of seed 2115.
    """
    settings = settings or Settings()
    run = run_all(settings)["clipped"]
    bandit = default_bandit()
    label = f"after PPO's {count(run.epochs_run, 'epoch')}"
    return UpdateLine(
        cached_batch(settings.seed), bandit, bandit.old_logits, run.logits[-1], FACTORS, label
    )
