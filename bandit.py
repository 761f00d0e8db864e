"""The bandit of notebooks 3 and 4, and the training step they and the CartPole agent share.

A softmax policy over K arms whose mean rewards are known (:data:`ARM_MEANS`: change the
means, and with them the number of arms, here and both notebooks' figures follow; then
``python tests/epochs_rule.py`` finds the two batch seeds notebook 3 chose by its rules again,
and the tests name the numbers its prose states; notebook 4's committed study says the arms it
ran with).  Everything works
on one batch (arrays of shape ``(n,)``) or on many runs side by side (``(runs, n)``): the last
axis holds a batch's samples or a policy's arms, and nothing mixes the rows.

* the policy: :func:`log_softmax`, :func:`softmax`, and the chain rule from the samples'
  log-probabilities to the logits (:func:`chain_through_softmax`);
* how far a policy moved: :data:`KL_TERMS` (k1, k2, k3 from the log-ratios of the batch) and
  :func:`exact_kl`;
* batches: :func:`random_numbers` (a seed's uniforms and Gaussians) and :func:`pull`, which
  turns them into arms, rewards and advantages under a policy;
* training: a :class:`Method` (an objective of :mod:`ppo_clip` as data, optionally with the PPO
  paper's KL penalty) and :func:`epochs_on_batch`, full-batch gradient steps on one batch, every
  ratio and every ``d loss / d logp_new`` from :mod:`ppo_clip` (:func:`sample_gradients`); the
  penalty's own gradient is :func:`kl_penalty_grad` and its adaptive coefficient
  :func:`adapted_kl_coef`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: The bandit, declared once: the true mean reward of each arm (the learner never sees
#: these).  Their number is the number of arms K (notebook 3's figures draw up to six).
ARM_MEANS: tuple[float, ...] = (1.0, 0.5, 0.0, -0.5)
#: Standard deviation of the Gaussian noise on every reward.
REWARD_NOISE = 1.0
#: The contract's largest batch: one call to ppo_clip never gets more samples.
MAX_SAMPLES_PER_CALL = 4096


def log_softmax(logits: ArrayLike) -> FloatArray:
    """``log softmax`` over the last axis, computed stably (subtracting the max first).

    >>> log_softmax([0.0, 0.0]).round(4)
    array([-0.6931, -0.6931])
    """
    z = np.asarray(logits, dtype=np.float64)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits: ArrayLike) -> FloatArray:
    """The categorical probabilities ``exp(logits) / sum(exp(logits))`` over the last axis."""
    return np.exp(log_softmax(logits))


def chain_through_softmax(
    dloss_dlogp: FloatArray, actions: IntArray, probs: FloatArray
) -> FloatArray:
    """Chain ``d loss / d logp_t`` to ``d loss / d logits`` through the softmax.

    With ``logp_t = logits[a_t] - logsumexp(logits)``, ``d logp_t / d logits_k =
    [a_t == k] - pi_k``, so ``d loss / d logits_k = sum_{t: a_t = k} g_t - pi_k * sum_t g_t``.
    The first sum adds each arm's ``g_t`` in the order of the samples (``np.bincount``), as
    a sum over a one-hot matrix would, without its products by 0.
    """
    lead = np.broadcast_shapes(dloss_dlogp.shape[:-1], actions.shape[:-1], probs.shape[:-1])
    probs = np.broadcast_to(probs, (*lead, probs.shape[-1]))
    return _chained(
        np.broadcast_to(dloss_dlogp, (*lead, actions.shape[-1])),
        arm_bins(actions, probs.shape),
        probs,
    )


def arm_bins(actions: IntArray, policies: tuple[int, ...]) -> IntArray:
    """Where each sample's arm sits in policies of shape ``policies`` flattened: run ``i``'s
    sample ``t`` at ``i * K + a_t`` (``actions`` broadcast to the runs)."""
    lead, k = policies[:-1], policies[-1]
    rows = np.arange(int(np.prod(lead, dtype=np.int64))).reshape((*lead, 1))
    return rows * k + np.broadcast_to(actions, (*lead, actions.shape[-1]))


def _chained(dloss_dlogp: FloatArray, bins: IntArray, probs: FloatArray) -> FloatArray:
    """:func:`chain_through_softmax` with the arms' bins (:func:`arm_bins`) given."""
    per_arm = np.bincount(bins.ravel(), dloss_dlogp.ravel(), minlength=probs.size)
    return per_arm.reshape(probs.shape) - probs * dloss_dlogp.sum(axis=-1, keepdims=True)


#: Per-sample terms of the three estimates of KL(old || new) from the log-ratio ``log r``
#: of samples the old policy drew; each estimate is the batch's mean of its term.  k3's
#: ``r - 1`` is ``expm1(log r)``: written ``exp(log r) - 1``, a term comes out slightly
#: negative once ``r`` rounds to 1 (for ``log r = 1e-20`` it is ``-1e-20``).
KL_TERMS: dict[str, Callable[[FloatArray], FloatArray]] = {
    "k1": lambda log_ratio: -log_ratio,
    "k2": lambda log_ratio: 0.5 * log_ratio**2,
    "k3": lambda log_ratio: np.expm1(log_ratio) - log_ratio,
}
KL_FORMULAS = {"k1": "−log r", "k2": "(log r)² / 2", "k3": "(r − 1) − log r"}


def approx_kl(log_ratio: ArrayLike, estimator: str = "k3") -> FloatArray:
    """The batch's mean of an estimator's term (k3: ``mean((r - 1) - log r)``), per run.

    The samples come from the old policy, so ``E_old[r] = 1`` and k3 estimates
    ``KL(old || new) = -E_old[log r]`` without bias (for a policy that did not learn from
    these samples), every term ``>= 0``.  Stable-Baselines3 and CleanRL log it as ``approx_kl``.

    >>> float(approx_kl(np.log([0.5, 2.0])).round(4))
    0.25
    """
    return np.mean(KL_TERMS[estimator](np.asarray(log_ratio, dtype=np.float64)), axis=-1)


def exact_kl(old_probs: ArrayLike, new_probs: ArrayLike) -> FloatArray:
    """``KL(old || new) = sum_k old_k * log(old_k / new_k)`` over the last axis."""
    p, q = np.asarray(old_probs, dtype=np.float64), np.asarray(new_probs, dtype=np.float64)
    return np.sum(p * (np.log(p) - np.log(q)), axis=-1)


def kl_penalty_grad(old_probs: ArrayLike, new_probs: ArrayLike) -> FloatArray:
    """``d KL(old || new) / d logits`` of the new softmax policy: ``new - old``.

    ``KL = sum_j p_j log p_j - sum_j p_j log q_j`` with ``log q_j = z_j - logsumexp(z)``, so
    ``d KL / d z_k = -sum_j p_j ([j == k] - q_k) = q_k - p_k`` (the ``p_j`` sum to 1).
    """
    return np.asarray(new_probs, dtype=np.float64) - np.asarray(old_probs, dtype=np.float64)


def adapted_kl_coef(kl_coef: ArrayLike, kl: ArrayLike, kl_target: float) -> FloatArray:
    """The PPO paper's rule (section 4), per run, after an update that moved the policy by
    ``kl``: halve ``beta`` if ``kl < d_targ / 1.5``, double it if ``kl > d_targ * 1.5``.

    >>> adapted_kl_coef([1.0, 1.0, 1.0], [0.001, 0.01, 0.1], 0.01).tolist()
    [0.5, 1.0, 2.0]
    """
    beta, d = np.asarray(kl_coef, dtype=np.float64), np.asarray(kl, dtype=np.float64)
    return np.where(d < kl_target / 1.5, beta / 2, np.where(d > kl_target * 1.5, beta * 2, beta))


# -- batches ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """Samples drawn by one policy: arms, rewards, advantages and their log-probabilities.

    Arrays have shape ``(..., n)``.  The advantage of sample t is ``A_t = R_t - mean(R)``,
    the reward minus the batch's mean reward: an estimate, noisy, never normalized.
    """

    actions: IntArray
    rewards: FloatArray
    advantages: FloatArray
    logp_old: FloatArray

    @property
    def n(self) -> int:
        """The number of samples N per batch."""
        return int(self.actions.shape[-1])

    def logp(self, logits: ArrayLike) -> FloatArray:
        """``log pi(a_t)`` of every sample under the policy with these logits (the leading
        axes of the two broadcast: one policy on many batches, or many policies on one)."""
        logp_all = log_softmax(logits)
        lead = np.broadcast_shapes(logp_all.shape[:-1], self.actions.shape[:-1])
        return np.take_along_axis(
            np.broadcast_to(logp_all, lead + logp_all.shape[-1:]),
            np.broadcast_to(self.actions, lead + self.actions.shape[-1:]),
            axis=-1,
        )


def random_numbers(seed: int, shape: tuple[int, ...]) -> tuple[FloatArray, FloatArray]:
    """Seed ``seed``'s uniforms (which arm a pull picks) and Gaussians (reward noise).

    Drawn up front, so every method trained on the seed sees the same numbers.
    """
    rng = np.random.default_rng(seed)
    return rng.random(shape), rng.standard_normal(shape)


def pull(
    logits: FloatArray,
    uniforms: FloatArray,
    noise: FloatArray,
    arm_means: tuple[float, ...] = ARM_MEANS,
) -> Batch:
    """A batch under the policy with ``logits``: each uniform number picks an arm (the
    inverse of the policy's CDF), each Gaussian is that pull's noise."""
    logp_all = log_softmax(logits)
    cdf = np.cumsum(np.exp(logp_all), axis=-1)
    actions = (uniforms[..., None] >= cdf[..., None, :-1]).sum(axis=-1).astype(np.int64)
    rewards = np.asarray(arm_means)[actions] + REWARD_NOISE * noise
    return Batch(
        actions=actions,
        rewards=rewards,
        advantages=rewards - rewards.mean(axis=-1, keepdims=True),
        logp_old=np.take_along_axis(logp_all, actions, axis=-1),
    )


# -- training --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One way of turning a batch into policy updates, as data.

    ``objective``, ``eps`` and ``eps_high`` (the band's upper edge is ``1 + eps_high``, as in
    DAPO's clip-higher; None: ``1 + eps``) go to :mod:`ppo_clip`; ``one_step`` makes it plain policy
    gradient (one epoch per batch, whatever the number asked: on the bandit that is one update,
    whose ratios are all 1, so every objective gives the ordinary policy gradient; the CartPole
    agent splits its epoch into minibatch steps, so there it is one epoch of those steps);
    ``target_kl`` stops a run's epochs once the k3 estimate on the batch exceeds it.  For
    objectives without a clip, ``eps`` only sets the band the clip fraction is measured with.

    ``kl_coef`` adds the PPO paper's penalty (section 4): the loss becomes the objective's plus
    ``beta * KL(old || new)``, with ``beta = kl_coef``.  With ``kl_target`` (the paper's
    ``d_targ``) ``kl_coef`` is only the first ``beta``: after each batch the training loop
    adapts it (:func:`adapted_kl_coef`).
    """

    key: str
    label: str
    objective: ppo_clip.Objective
    eps: float = ppo_clip.DEFAULT_EPS
    one_step: bool = False
    target_kl: float | None = None
    kl_coef: float = 0.0
    kl_target: float | None = None
    eps_high: float | None = None

    def epochs(self, epochs: int) -> int:
        """How many passes this method makes over a batch when the setting is ``epochs``."""
        return 1 if self.one_step else epochs


def sample_gradients(
    logp_new: FloatArray,
    logp_old: FloatArray,
    advantages: FloatArray,
    method: Method | Sequence[Method],
) -> tuple[FloatArray, BoolArray]:
    """``(d loss / d logp_new, clipped)`` from ppo_clip, for one batch or many runs at once.

    Arrays have shape ``(..., n)`` (broadcast together); each run's loss is the mean over its
    own ``n`` samples.  Several methods side by side: axis 0 is the method (``logp_new`` of
    shape ``(len(methods), ..., n)``).  ``clipped`` is where PPO's rule at the method's ``eps``
    switches a gradient off (for the other objectives: where it *would*).  Every run gets, bit
    for bit, what ``ppo_clip.surrogate_grad`` returns for its batch alone (see
    :class:`BatchGradients`).
    """
    shape = np.broadcast_shapes(np.shape(logp_new), np.shape(logp_old), np.shape(advantages))
    return BatchGradients(logp_old, advantages, method, shape)(logp_new)


class BatchGradients:
    """ppo_clip's per-sample gradients on one batch whose old log-probabilities and advantages
    stay fixed, for new log-probabilities of ``shape`` (a training loop's every step).

    The runs go to :func:`ppo_clip.clip_breakdown` grouped by the methods' band, ``m`` runs
    of ``n`` samples per call: ``m`` a power of two with ``m * n <= 4096`` (the contract's
    largest batch), a short last chunk padded with rows of zero advantage; each run's gradient
    is its method's :func:`ppo_clip.objective_grad`.  ppo_clip divides by the chunk's ``m * n``
    samples; multiplying by ``m`` gives each run the gradient of its own mean, exactly (both
    steps are powers of two).  What does not change between steps (the padded old
    log-probabilities and advantages, each row's objective) is prepared once.
    """

    def __init__(
        self,
        logp_old: ArrayLike,
        advantages: ArrayLike,
        method: Method | Sequence[Method],
        shape: tuple[int, ...],
    ) -> None:
        methods = tuple(method) if not isinstance(method, Method) else (method,)
        self.shape, n = shape, shape[-1]
        self.rows = (len(methods), -1, n)  # (method, run, sample)
        old, adv = (
            np.reshape(np.broadcast_to(a, shape), self.rows) for a in (logp_old, advantages)
        )
        bands = [(m.eps, m.eps_high) for m in methods]
        rows = [[i for i, b in enumerate(bands) if b == band] for band in dict.fromkeys(bands)]
        self.groups = [_Group(group, methods, old, adv) for group in rows]

    def __call__(self, logp_new: ArrayLike) -> tuple[FloatArray, BoolArray]:
        """``(d loss / d logp_new, clipped)`` for new log-probabilities of the batch's shape
        (broadcast to it)."""
        new = np.reshape(np.broadcast_to(logp_new, self.shape), self.rows)
        grads, clipped = np.empty(new.shape), np.empty(new.shape, dtype=bool)
        for group in self.groups:
            grads[group.methods], clipped[group.methods] = group.gradients(new[group.methods])
        return grads.reshape(self.shape), clipped.reshape(self.shape)


class _Group:
    """The methods of one band (rows ``methods`` of a :class:`BatchGradients`), their runs
    padded to whole chunks of ``size`` runs, and which runs of a chunk take which objective
    (``...``: all of them)."""

    def __init__(
        self, methods: list[int], every: Sequence[Method], old: FloatArray, adv: FloatArray
    ) -> None:
        n, used = old.shape[-1], len(methods) * old.shape[1]
        size = min(1 << (MAX_SAMPLES_PER_CALL // n).bit_length() - 1, 1 << (used - 1).bit_length())
        padded = -(-used // size) * size
        kinds = np.repeat([every[i].objective for i in methods], old.shape[1])
        kinds = np.concatenate([kinds, kinds[-1:].repeat(padded - used)])
        self.chunks = []  # per chunk its slice and, per objective in it, the rows that take it
        for start in range(0, padded, size):
            here = kinds[start : start + size]
            names = dict.fromkeys(here.tolist())
            rows = [(name, here == name if len(names) > 1 else ...) for name in names]
            self.chunks.append((slice(start, start + size), rows))
        self.old, self.advantages = (
            np.concatenate([a[methods].reshape(used, n), np.zeros((padded - used, n))])
            for a in (old, adv)
        )
        self.new = np.zeros(self.old.shape)  # a step's, padded (the padding's rows stay 0)
        self.methods, self.size = methods, size
        self.eps, self.eps_high = every[methods[0]].eps, every[methods[0]].eps_high

    def gradients(self, new: FloatArray) -> tuple[FloatArray, BoolArray]:
        """Gradients and clip decisions of the group's runs ``new`` (``(methods, runs, n)``)."""
        n, size = new.shape[-1], self.size
        used = new.size // n
        self.new[:used] = new.reshape(used, n)
        grads, clipped = np.empty(self.new.shape), np.empty(self.new.shape, dtype=bool)
        for chunk, objectives in self.chunks:
            breakdown = ppo_clip.clip_breakdown(
                self.new[chunk].ravel(),
                self.old[chunk].ravel(),
                self.advantages[chunk].ravel(),
                self.eps,
                eps_high=self.eps_high,
            )
            for objective, rows in objectives:
                grad = ppo_clip.objective_grad(breakdown, objective).reshape(size, n)
                grads[chunk][rows] = grad[rows]
            clipped[chunk] = breakdown.is_clipped.reshape(size, n)
        return (grads[:used] * size).reshape(new.shape), clipped[:used].reshape(new.shape)


class Step(NamedTuple):
    """A policy during training on one batch (before an epoch's step, or after the last):
    its logits ``(..., K)``; per sample ``(..., n)`` ppo_clip's ``d loss / d logp_t`` and
    where PPO's rule clips; per run ``(...)`` the k3 estimate of KL(old || this policy) on the
    batch, and whether the run takes a step from here (not after the last epoch or a stop)."""

    logits: FloatArray
    grads: FloatArray
    clipped: BoolArray
    approx_kl: FloatArray
    moving: BoolArray


def per_method(methods: Sequence[Method], values: Sequence[float], ndim: int) -> FloatArray:
    """One value per method, shaped ``(len(methods), 1, ..., 1)`` to broadcast over ``ndim``
    axes of runs."""
    return np.reshape(np.asarray(values, dtype=np.float64), (len(methods),) + (1,) * ndim)


def epochs_on_batch(
    logits: ArrayLike,
    batch: Batch,
    method: Method | Sequence[Method],
    step_size: float,
    epochs: int,
    kl_coef: ArrayLike | None = None,
) -> Iterator[Step]:
    """Full-batch gradient steps of ``method`` on ``batch``: ``logits -= step_size * grad``.

    Yields the policy before each step and after the last (``method.epochs(epochs) + 1``
    policies).  With ``method.target_kl`` a run stops before a step once the k3 estimate
    exceeds it (so the last KL may overshoot the target, as in practice); its logits stay.
    The first ``logits`` are the old policy of the KL penalty, whose ``beta`` per run is
    ``kl_coef`` (default ``method.kl_coef``; 0: no penalty).

    Several methods side by side: axis 0 of ``logits`` (and of ``kl_coef`` and of everything
    yielded) is the method, the batch is the same for all; each method takes its own number
    of steps (as many policies are yielded as the method with the most needs: the others
    stand still).  Every method's numbers are, bit for bit, what it gives alone.
    """
    several = not isinstance(method, Method)
    methods = tuple(method) if several else (method,)
    logits = np.asarray(logits, dtype=np.float64)
    logits = logits if several else logits[None]
    runs = logits.ndim - 2
    last = per_method(methods, [m.epochs(epochs) for m in methods], runs)
    targets = [np.inf if m.target_kl is None else m.target_kl for m in methods]
    target = per_method(methods, targets, runs)
    if kl_coef is None:
        beta = per_method(methods, [m.kl_coef for m in methods], runs)
    else:
        beta = np.asarray(kl_coef, dtype=np.float64)
        beta = beta if several or beta.ndim == 0 else beta[None]
    beta = np.broadcast_to(beta, logits.shape[:-1])
    moving = np.ones(logits.shape[:-1], dtype=bool)
    penalized = beta > 0
    penalties, stops = penalized.any(), any(m.target_kl is not None for m in methods)
    old_probs = softmax(logits)
    actions = np.broadcast_to(batch.actions, logits.shape[:-1] + batch.actions.shape[-1:])
    gradients = BatchGradients(batch.logp_old, batch.advantages, methods, actions.shape)
    taken = arm_bins(actions, logits.shape)  # log pi(a_t) of every run, picked in one call
    for epoch in range(int(last.max()) + 1):
        logp_all = log_softmax(logits)
        logp = logp_all.reshape(-1)[taken]
        grads, clipped = gradients(logp)
        kl = approx_kl(logp - batch.logp_old)
        moving = moving & (epoch < last)
        if stops:
            moving &= ~(kl > target)
        step = Step(logits, grads, clipped, kl, moving)
        yield step if several else Step(*(a[0] for a in step))
        probs = np.exp(logp_all)
        grad = _chained(grads, taken, probs)
        if penalties:  # the penalty only where a run has one: the others' steps stay exact
            with_penalty = grad + beta[..., None] * kl_penalty_grad(old_probs, probs)
            grad = np.where(penalized[..., None], with_penalty, grad)
        logits = np.where(moving[..., None], logits - step_size * grad, logits)


# -- settings --------------------------------------------------------------------------------


def checked_fields(settings: Any, ranges: dict[str, tuple[float, float, bool]]) -> None:
    """Check (and convert) each field of a frozen settings dataclass named in ``ranges``.

    ``ranges[field] = (low, high, whole)``.  A value that is not a real number, lies outside
    ``[low, high]`` or is not whole when it must be raises a ``TypeError`` or ``ValueError``
    that names the field (an app turns it into a message in place); a whole number stays an
    ``int``, however large.
    """
    for field in fields(settings):
        if field.name not in ranges:
            continue
        low, high, whole = ranges[field.name]
        value = getattr(settings, field.name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{field.name} must be a number, got {type(value).__name__}")
        number = int(value) if isinstance(value, (int, np.integer)) else float(value)
        if not low <= number <= high:  # also refuses NaN and infinities
            raise ValueError(
                f"{field.name} must be between {_end(low)} and {_end(high)}, got {_shown(number)}"
            )
        if whole and number != int(number):
            raise ValueError(f"{field.name} must be a whole number, got {number!r}")
        object.__setattr__(settings, field.name, int(number) if whole else float(number))


def _end(number: float) -> str:
    """A range's end for a message: ``4`` for ``4.0``, ``0.05`` for ``0.05``."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))


def _shown(number: float) -> str:
    """``number`` for a message; a whole number of more than 15 digits by its size."""
    if isinstance(number, int) and abs(number) >= 10**15:
        power = int(abs(number).bit_length() * math.log10(2))
        return f"about {'-' if number < 0 else ''}10^{power}"
    return repr(number)
