"""Part A: PPO's real loop on notebook 3's bandit, for many seeds side by side.

The bandit and the training step are :mod:`ppo_viz.bandit`'s.  One iteration of the loop:

1. the current policy pulls a batch of ``batch_size`` arms (:func:`ppo_viz.bandit.pull`);
2. each sample's advantage is its reward minus the batch's mean reward (never normalized);
3. ``epochs`` full-batch gradient steps on the batch with the method's objective
   (:func:`ppo_viz.bandit.epochs_on_batch`, every ratio and gradient from :mod:`ppo_clip`);
4. the new policy collects the next batch.

Every seed draws its random numbers up front and all methods share them (*common random
numbers*): the first batch of seed ``s`` is the same for every method.  Runs over seeds are
computed side by side, one row per seed; a seed's numbers do not depend on the seeds beside
it.  Because the true means are known, each policy is scored by its true expected reward.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ppo_viz.bandit import (
    ARM_MEANS,
    FloatArray,
    Method,
    checked_fields,
    epochs_on_batch,
    pull,
    random_numbers,
    softmax,
)
from ppo_viz.why_clip.methods import METHODS, joined_runs

#: A policy *sits on a wrong arm* when an arm other than the best has at least this
#: probability.  It is hard to leave: a batch of one arm only has advantages summing to zero.
COLLAPSE_PROBABILITY = 0.95
#: The range of each setting: (low, high, whole number?).
SETTING_RANGES = {
    "epochs": (1, 40, True),
    "step_size": (0.05, 5.0, False),
    "batch_size": (2, 128, True),
    "iterations": (5, 100, True),
}
#: The methods of part A, in the order of legends and tables.
BANDIT_METHODS = ("ppo", "ppo_eps_0.1", "ppo_eps_0.3", "unclipped", "clip_only", "plain_pg")


@dataclass(frozen=True)
class BanditLoopSettings:
    """What a run depends on besides the method and the seed (checked on creation).

    ``epochs`` is K, the updates per batch; ``step_size`` the gradient step on the logits;
    ``batch_size`` the pulls per batch; ``iterations`` how many batches are collected;
    ``arm_means`` the bandit.  A value out of range raises :class:`~ppo_viz.app.InputError`.
    """

    epochs: int = 20
    step_size: float = 1.0
    batch_size: int = 16
    iterations: int = 50
    arm_means: tuple[float, ...] = ARM_MEANS

    def __post_init__(self) -> None:
        checked_fields(self, SETTING_RANGES)
        object.__setattr__(self, "arm_means", tuple(float(mu) for mu in self.arm_means))

    @property
    def random_reward(self) -> float:
        """The uniform policy's true reward: the 0 of the normalized score."""
        return float(np.mean(self.arm_means))

    @property
    def best_reward(self) -> float:
        """The best arm's true mean: the 1 of the normalized score."""
        return max(self.arm_means)


@dataclass(frozen=True)
class BanditLoopHistory:
    """What happened over the iterations, one row per seed.

    Column ``i`` of ``probs`` is the policy that collects batch ``i`` (column ``iterations``
    is the final policy); column ``i`` of the other arrays is what the updates on batch ``i``
    did.
    """

    method: Method
    settings: BanditLoopSettings
    seeds: tuple[int, ...]
    #: Per policy: the arms' probabilities, shape (seeds, iterations + 1, arms).
    probs: FloatArray
    #: Per update: the k3 estimate of KL(policy i || policy i + 1) on batch i.
    approx_kl: FloatArray
    #: Per update: the share of batch i that PPO's rule clips, averaged over the steps.
    clip_fraction: FloatArray

    def joined(self, other: BanditLoopHistory) -> BanditLoopHistory:
        """These runs and ``other``'s (same method and settings) as one set of seeds."""
        return joined_runs(self, other, ("probs", "approx_kl", "clip_fraction"))

    @property
    def true_reward(self) -> FloatArray:
        """Per policy, ``sum_k pi_k * mu_k``: shape (seeds, iterations + 1)."""
        return self.probs @ np.array(self.settings.arm_means)

    @property
    def entropy(self) -> FloatArray:
        """Per policy, ``-sum_k pi_k log pi_k`` in nats (log K for the uniform policy)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self.probs > 0, self.probs * np.log(self.probs), 0.0)
        return -terms.sum(axis=-1)

    @property
    def collapsed(self) -> NDArray[np.bool_]:
        """Per policy, whether it sits on a wrong arm (see :data:`COLLAPSE_PROBABILITY`)."""
        wrong = np.array(self.settings.arm_means) < self.settings.best_reward
        return self.probs[..., wrong].max(axis=-1) >= COLLAPSE_PROBABILITY

    @property
    def score(self) -> FloatArray:
        """Per seed, the final policy's true reward normalized: uniform policy 0, best arm 1."""
        s = self.settings
        return (self.true_reward[:, -1] - s.random_reward) / (s.best_reward - s.random_reward)


def run_bandit_loop(
    method: Method, settings: BanditLoopSettings, seeds: tuple[int, ...]
) -> BanditLoopHistory:
    """Run PPO's loop with ``method`` for every seed side by side."""
    shape = (settings.iterations, settings.batch_size)
    drawn = [random_numbers(seed, shape) for seed in seeds]
    uniforms, noise = np.stack([u for u, _ in drawn]), np.stack([z for _, z in drawn])
    logits = np.zeros((len(seeds), len(settings.arm_means)))
    probs, approx_kl, clip_fraction = [], [], []
    for iteration in range(settings.iterations):
        probs.append(softmax(logits))
        batch = pull(logits, uniforms[:, iteration], noise[:, iteration], settings.arm_means)
        clipped, steps = np.zeros(len(seeds)), np.zeros(len(seeds))
        for step in epochs_on_batch(logits, batch, method, settings.step_size, settings.epochs):
            clipped += np.where(step.moving, step.clipped.mean(axis=-1), 0.0)
            steps += step.moving
        logits = step.logits
        approx_kl.append(step.approx_kl)
        clip_fraction.append(clipped / steps)
    probs.append(softmax(logits))
    return BanditLoopHistory(
        method=method,
        settings=settings,
        seeds=tuple(seeds),
        probs=np.stack(probs, axis=1),
        approx_kl=np.stack(approx_kl, axis=1),
        clip_fraction=np.stack(clip_fraction, axis=1),
    )


@functools.lru_cache(maxsize=32)
def run_bandit_methods(
    settings: BanditLoopSettings, seeds: tuple[int, ...], methods: tuple[str, ...] = BANDIT_METHODS
) -> dict[str, BanditLoopHistory]:
    """Every method of part A on the same seeds (cached per settings and seeds)."""
    return {key: run_bandit_loop(METHODS[key], settings, seeds) for key in methods}
