"""PPO's real loop on notebook 3's bandit, for many seeds side by side (notebook 4, the study).

The bandit and the training step are :mod:`bandit`'s.  One iteration of the loop:

1. the current policy pulls a batch of ``batch_size`` arms (:func:`bandit.pull`);
2. each sample's advantage is its reward minus the batch's mean reward (never normalized);
3. ``epochs`` full-batch gradient steps on the batch with the method's objective
   (:func:`bandit.epochs_on_batch`, every ratio and gradient from :mod:`ppo_clip`);
   an adaptive KL penalty then adapts its ``beta`` to the exact KL the steps moved the policy;
4. the new policy collects the next batch.

Every seed draws its random numbers up front and all methods share them (*common random
numbers*): the first batch of seed ``s`` is the same for every method.  Runs over seeds are
computed side by side, one row per seed; a seed's numbers do not depend on the seeds beside
it.  Because the true means are known, each policy is scored by its true expected reward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bandit import (
    ARM_MEANS,
    FloatArray,
    Method,
    adapted_kl_coef,
    checked_fields,
    epochs_on_batch,
    log_softmax,
    per_method,
    pull,
    random_numbers,
    softmax,
)

#: A policy *sits on a wrong arm* when an arm other than the best has at least this
#: probability.  It is hard to leave: a batch of one arm only has advantages summing to zero.
COLLAPSE_PROBABILITY = 0.95
#: The step sizes the study sweeps (three decades) and the app offers.
STEP_SIZES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
#: The range of each setting: (low, high, whole number?).
SETTING_RANGES = {
    "epochs": (1, 40, True),
    "step_size": (0.01, 100.0, False),
    "batch_size": (2, 128, True),
    "iterations": (5, 100, True),
}


@dataclass(frozen=True)
class BanditLoopSettings:
    """What a run depends on besides the method and the seed (checked on creation).

    ``epochs`` is K, the updates per batch; ``step_size`` the gradient step on the logits;
    ``batch_size`` the pulls per batch; ``iterations`` how many batches are collected;
    ``arm_means`` the bandit.  A value out of range raises a ``ValueError`` naming it (a
    ``TypeError``: not a number).
    """

    epochs: int = 20
    step_size: float = 1.0
    batch_size: int = 16
    iterations: int = 50
    arm_means: tuple[float, ...] = ARM_MEANS

    def __post_init__(self) -> None:
        checked_fields(self, SETTING_RANGES)
        object.__setattr__(self, "arm_means", tuple(float(mu) for mu in self.arm_means))


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
    #: Per update: the KL penalty's ``beta`` on batch i (0 without a penalty).
    kl_coef: FloatArray

    @property
    def true_reward(self) -> FloatArray:
        """Per policy, ``sum_k pi_k * mu_k``: shape (seeds, iterations + 1)."""
        return self.probs @ np.array(self.settings.arm_means)

    @property
    def collapsed(self) -> NDArray[np.bool_]:
        """Per policy, whether it sits on a wrong arm (see :data:`COLLAPSE_PROBABILITY`)."""
        wrong = np.array(self.settings.arm_means) < max(self.settings.arm_means)
        return self.probs[..., wrong].max(axis=-1) >= COLLAPSE_PROBABILITY

    @property
    def score(self) -> FloatArray:
        """Per seed, the final policy's true reward normalized: the uniform policy's (the arms'
        mean) 0, the best arm's 1."""
        uniform, best = float(np.mean(self.settings.arm_means)), max(self.settings.arm_means)
        return (self.true_reward[:, -1] - uniform) / (best - uniform)


def run_bandit_loop(
    method: Method, settings: BanditLoopSettings, seeds: tuple[int, ...]
) -> BanditLoopHistory:
    """Run PPO's loop with ``method`` for every seed side by side."""
    return run_side_by_side((method,), settings, seeds)[0]


def run_side_by_side(
    methods: Sequence[Method],
    settings: BanditLoopSettings,
    seeds: tuple[int, ...],
    stop: Callable[[], bool] | None = None,
) -> list[BanditLoopHistory]:
    """Run PPO's loop with each of ``methods`` for every seed, all side by side (axis 0 of
    every array is the method, axis 1 the seed): one pass of Python for all of them, and each
    method's numbers bit for bit what it gives alone.

    ``stop`` (for an app that may no longer need the runs) is asked before each iteration;
    once it answers True the runs are given up: ``concurrent.futures.CancelledError``.
    """
    if stop is not None and not callable(stop):
        raise TypeError(f"stop must be callable or None, got {type(stop).__name__}")
    shape = (settings.iterations, settings.batch_size)
    drawn = [random_numbers(seed, shape) for seed in seeds]
    uniforms, noise = np.stack([u for u, _ in drawn]), np.stack([z for _, z in drawn])
    logits = np.zeros((len(methods), len(seeds), len(settings.arm_means)))
    kl_coef = np.broadcast_to(
        per_method(methods, [m.kl_coef for m in methods], 1), logits.shape[:2]
    )
    adaptive = [m.kl_target is not None for m in methods]
    kl_target = per_method(methods, [m.kl_target or np.nan for m in methods], 1)
    probs, approx_kl, clip_fraction, kl_coefs = [], [], [], []
    for iteration in range(settings.iterations):
        if stop is not None and stop():
            raise CancelledError(f"given up before iteration {iteration}")
        probs.append(softmax(logits))
        kl_coefs.append(kl_coef)
        batch = pull(logits, uniforms[:, iteration], noise[:, iteration], settings.arm_means)
        clipped, steps = np.zeros(logits.shape[:2]), np.zeros(logits.shape[:2])
        updates = epochs_on_batch(
            logits, batch, methods, settings.step_size, settings.epochs, kl_coef
        )
        for step in updates:
            clipped += np.where(step.moving, step.clipped.mean(axis=-1), 0.0)
            steps += step.moving
        if any(adaptive):
            moved = np.sum(probs[-1] * (log_softmax(logits) - log_softmax(step.logits)), axis=-1)
            adapted = adapted_kl_coef(kl_coef, moved, kl_target)
            kl_coef = np.where(per_method(methods, adaptive, 1) > 0, adapted, kl_coef)
        logits = step.logits
        approx_kl.append(step.approx_kl)
        clip_fraction.append(clipped / steps)
    probs.append(softmax(logits))
    arrays = {
        "probs": np.stack(probs, axis=2),
        "approx_kl": np.stack(approx_kl, axis=2),
        "clip_fraction": np.stack(clip_fraction, axis=2),
        "kl_coef": np.stack(kl_coefs, axis=2),
    }
    return [
        BanditLoopHistory(
            method=method,
            settings=settings,
            seeds=tuple(seeds),
            **{name: values[i] for name, values in arrays.items()},
        )
        for i, method in enumerate(methods)
    ]
