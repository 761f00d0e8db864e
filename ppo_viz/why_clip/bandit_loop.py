"""Part A: PPO's real loop on a bandit whose answer is known, over many seeds at once.

The bandit is notebook 3's: four arms with true mean rewards
:data:`ARM_MEANS` and Gaussian noise of standard deviation 1; the policy is a
softmax over four logits, starting uniform.  PPO's loop, for many iterations:

1. collect a batch of ``batch_size`` pulls with the current policy;
2. estimate each sample's advantage from the batch: its reward minus the
   batch's mean reward (noisy, never normalized);
3. run ``epochs`` full-batch gradient steps on the batch with the method's
   objective (``logits -= step_size * d loss / d logits``), every ratio and
   ``d loss / d logp_new`` from :mod:`ppo_clip`;
4. repeat with the new policy.

Every seed has its own random numbers, drawn up front and shared by all
methods (*common random numbers*): the first batch of seed ``s`` is the
same for every method, and the differences that follow come from the methods.
Runs over seeds are computed side by side (one row per seed); a seed's numbers
do not depend on which other seeds run with it.

Because the true means are known, each policy is scored by its true expected
reward, which a real agent never sees.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ppo_viz.why_clip.methods import (
    METHODS,
    FloatArray,
    Method,
    checked_settings,
    joined_runs,
    k3_kl,
    surrogate_gradients,
)

#: True mean reward of each arm; arm 0 is the best.
ARM_MEANS = np.array([1.0, 0.5, 0.0, -0.5])
REWARD_NOISE = 1.0
#: A policy *sits on a wrong arm* when one arm other than arm 0 has at least this
#: probability.  It is hard to leave: a batch that holds one arm only has advantages
#: summing to zero and no gradient, so only a batch that happens to pull another arm
#: can move the policy away.
COLLAPSE_PROBABILITY = 0.95
#: The uniform policy's true reward and the best arm's: the 0 and 1 of the normalized score.
RANDOM_REWARD = float(ARM_MEANS.mean())
BEST_REWARD = float(ARM_MEANS.max())

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

    ``epochs`` is K, the updates per batch; ``step_size`` the gradient step on
    the logits; ``batch_size`` the pulls per batch; ``iterations`` how many
    batches are collected.  A value out of range raises :class:`InputError`.
    """

    epochs: int = 20
    step_size: float = 1.0
    batch_size: int = 16
    iterations: int = 50

    def __post_init__(self) -> None:
        checked_settings(self, SETTING_RANGES)


@dataclass(frozen=True)
class BanditLoopHistory:
    """What happened over the iterations, one row per seed.

    Column ``i`` of the per-policy arrays is the policy that collects batch
    ``i`` (column ``iterations`` is the final policy); column ``i`` of the
    per-update arrays is what the updates on batch ``i`` did.
    """

    method: Method
    settings: BanditLoopSettings
    seeds: tuple[int, ...]
    #: Per policy: probabilities of the arms, shape (seeds, iterations + 1, arms).
    probs: FloatArray
    #: Per update: the k3 estimate of KL(policy i || policy i + 1) on batch i.
    approx_kl: FloatArray
    #: Per update: the share of batch i that PPO's rule clips, averaged over the K updates.
    clip_fraction: FloatArray

    def joined(self, other: BanditLoopHistory) -> BanditLoopHistory:
        """These runs and ``other``'s (same method and settings) as one set of seeds."""
        return joined_runs(self, other, ("probs", "approx_kl", "clip_fraction"))

    @property
    def true_reward(self) -> FloatArray:
        """Per policy, ``sum_k pi_k * mu_k``: shape (seeds, iterations + 1)."""
        return self.probs @ ARM_MEANS

    @property
    def entropy(self) -> FloatArray:
        """Per policy, ``-sum_k pi_k log pi_k`` in nats (log 4 = 1.386 for the uniform policy)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self.probs > 0, self.probs * np.log(self.probs), 0.0)
        return -terms.sum(axis=-1)

    @property
    def collapsed(self) -> NDArray[np.bool_]:
        """Per policy, whether it sits on a wrong arm (see :data:`COLLAPSE_PROBABILITY`)."""
        return self.probs[..., 1:].max(axis=-1) >= COLLAPSE_PROBABILITY

    @property
    def score(self) -> FloatArray:
        """Per seed, the final policy's true reward normalized: uniform policy 0, best arm 1."""
        return (self.true_reward[:, -1] - RANDOM_REWARD) / (BEST_REWARD - RANDOM_REWARD)


def log_softmax(logits: FloatArray) -> FloatArray:
    """``log softmax`` over the last axis, computed stably."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def common_random_numbers(seed: int, settings: BanditLoopSettings) -> tuple[FloatArray, FloatArray]:
    """Seed ``seed``'s uniforms (which arm is pulled) and Gaussians (reward noise)."""
    rng = np.random.default_rng(seed)
    shape = (settings.iterations, settings.batch_size)
    return rng.random(shape), rng.standard_normal(shape)


def pull_arms(probs: FloatArray, uniforms: FloatArray) -> NDArray[np.int64]:
    """The arm each uniform number picks under each row's policy (inverse of the CDF)."""
    cdf = np.cumsum(probs, axis=-1)
    arms = (uniforms[..., None] >= cdf[:, None, :-1]).sum(axis=-1)
    return arms.astype(np.int64)


def logit_gradient(dloss_dlogp: FloatArray, one_hot: FloatArray, probs: FloatArray) -> FloatArray:
    """Chain ``d loss / d logp_t`` to ``d loss / d logits`` through the softmax, per run.

    ``logp_t = logits[a_t] - logsumexp(logits)``, so
    ``d logp_t / d logits_k = [a_t == k] - pi_k`` and
    ``d loss / d logits_k = sum_{t: a_t = k} g_t - pi_k * sum_t g_t``.
    """
    per_arm = (dloss_dlogp[..., None] * one_hot).sum(axis=1)
    return per_arm - probs * dloss_dlogp.sum(axis=1, keepdims=True)


def run_bandit_loop(
    method: Method, settings: BanditLoopSettings, seeds: tuple[int, ...]
) -> BanditLoopHistory:
    """Run PPO's loop with ``method`` for every seed side by side."""
    randomness = [common_random_numbers(seed, settings) for seed in seeds]
    uniforms = np.stack([u for u, _ in randomness])
    noise = np.stack([z for _, z in randomness])
    logits = np.zeros((len(seeds), ARM_MEANS.size))
    probs, approx_kl, clip_fraction = [], [], []
    for iteration in range(settings.iterations):
        logp_all = log_softmax(logits)
        probs.append(np.exp(logp_all))
        arms = pull_arms(probs[-1], uniforms[:, iteration])
        rewards = ARM_MEANS[arms] + REWARD_NOISE * noise[:, iteration]
        advantages = rewards - rewards.mean(axis=1, keepdims=True)
        one_hot = (arms[..., None] == np.arange(ARM_MEANS.size)).astype(np.float64)
        logp_old = np.take_along_axis(logp_all, arms, axis=1)
        clipped_share = np.zeros(len(seeds))
        updates = method.epochs(settings.epochs)
        for _ in range(updates):
            logp_all = log_softmax(logits)
            logp_new = np.take_along_axis(logp_all, arms, axis=1)
            grads, clipped = surrogate_gradients(logp_new, logp_old, advantages, method)
            clipped_share += clipped.mean(axis=1)
            logits = logits - settings.step_size * logit_gradient(grads, one_hot, np.exp(logp_all))
        logp_new = np.take_along_axis(log_softmax(logits), arms, axis=1)
        approx_kl.append(k3_kl(logp_new - logp_old))
        clip_fraction.append(clipped_share / updates)
    probs.append(np.exp(log_softmax(logits)))
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
