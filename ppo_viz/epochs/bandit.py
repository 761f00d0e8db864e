"""The toy problem: a softmax policy over a K-armed bandit whose mean rewards are known.

The *old* policy draws one batch of samples (:func:`draw_batch`); each
reward is the arm's true mean plus Gaussian noise, and each advantage is the
reward minus the batch's mean reward: noisy, as advantages always are, and
never normalized.  Because the true means are known, every policy the
training produces can be scored by its true expected reward
(:meth:`Bandit.expected_reward`), something a real agent never sees.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: The bandit: true mean reward of each arm (the learner never sees these).
ARM_MEANS: tuple[float, ...] = (1.0, 0.5, 0.0, -0.5)
#: Standard deviation of the Gaussian noise on every reward.
REWARD_NOISE = 1.0
#: Samples in the one batch.
N_SAMPLES = 12


def log_softmax(logits: ArrayLike) -> FloatArray:
    """``log softmax(logits)``, computed stably (subtracting the max first).

    >>> log_softmax([0.0, 0.0]).round(4)
    array([-0.6931, -0.6931])
    """
    z = np.asarray(logits, dtype=np.float64)
    shifted = z - z.max()
    return shifted - np.log(np.exp(shifted).sum())


def softmax(logits: ArrayLike) -> FloatArray:
    """The categorical probabilities ``exp(logits) / sum(exp(logits))``."""
    return np.exp(log_softmax(logits))


@dataclass(frozen=True)
class Bandit:
    """A K-armed bandit with known mean rewards, and the logits of the old policy."""

    true_means: FloatArray
    old_logits: FloatArray
    reward_noise: float = REWARD_NOISE

    @property
    def k(self) -> int:
        """The number of arms."""
        return int(self.true_means.shape[0])

    @property
    def old_probs(self) -> FloatArray:
        """The old policy's probabilities (the policy that draws the batch)."""
        return softmax(self.old_logits)

    def expected_reward(self, probs: ArrayLike) -> float:
        """The true expected reward ``sum_k pi_k * mu_k`` of a policy."""
        return float(np.dot(np.asarray(probs, dtype=np.float64), self.true_means))


def default_bandit() -> Bandit:
    """Four arms with means :data:`ARM_MEANS`, a uniform old policy, noise :data:`REWARD_NOISE`."""
    return Bandit(np.array(ARM_MEANS), np.zeros(len(ARM_MEANS)), REWARD_NOISE)


@dataclass(frozen=True)
class BanditBatch:
    """One batch drawn from the old policy, sorted by arm, then by advantage (best first).

    Sorting only renumbers the samples (sample 0 is arm 0's best), which
    makes the figures readable; no quantity depends on the order.  The arrays
    are read-only: batches are cached and shared.
    """

    actions: IntArray
    rewards: FloatArray
    advantages: FloatArray
    logp_old: FloatArray
    n_arms: int
    seed: int

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.actions.shape[0])

    def arm_counts(self) -> IntArray:
        """How many samples drew each arm."""
        return np.bincount(self.actions, minlength=self.n_arms)

    def samples_of(self, arm: int) -> IntArray:
        """The indices of the samples that drew ``arm``."""
        return np.flatnonzero(self.actions == arm)

    def sample_logp(self, logits: ArrayLike) -> FloatArray:
        """``log pi(a_t)`` of every sample under the policy with these logits."""
        return log_softmax(logits)[self.actions]


def draw_batch(seed: int, bandit: Bandit | None = None, n_samples: int = N_SAMPLES) -> BanditBatch:
    """Draw ``n_samples`` arms from the old policy, with their noisy rewards (seeded).

    Advantage of sample t: ``A_t = R_t - mean(R)``, the reward minus the
    batch's mean reward.  It is an estimate from the batch (noisy) and is
    used as is: never normalized.
    """
    bandit = bandit or default_bandit()
    rng = np.random.default_rng(seed)
    actions = rng.choice(bandit.k, size=n_samples, p=bandit.old_probs)
    rewards = bandit.true_means[actions] + bandit.reward_noise * rng.standard_normal(n_samples)
    advantages = rewards - rewards.mean()
    order = np.lexsort((-advantages, actions))
    actions, rewards, advantages = actions[order], rewards[order], advantages[order]
    return BanditBatch(
        actions=read_only(actions.astype(np.int64)),
        rewards=read_only(rewards),
        advantages=read_only(advantages),
        logp_old=read_only(log_softmax(bandit.old_logits)[actions]),
        n_arms=bandit.k,
        seed=int(seed),
    )


@functools.lru_cache(maxsize=64)
def cached_batch(seed: int) -> BanditBatch:
    """:func:`draw_batch` for the default bandit, cached per seed."""
    return draw_batch(seed)


def read_only(array: NDArray[Any]) -> NDArray[Any]:
    """Freeze ``array`` in place and return it (batches and runs are cached and shared)."""
    array.flags.writeable = False
    return array
