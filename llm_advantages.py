"""Where the advantages come from: GRPO's group advantages and PPO's GAE(lambda), in numpy.

:mod:`llm_clip`'s loss takes the advantages as given; this module computes them (contract:
``docs/contract.md``, sections "Around the loss" and "Where the advantage comes from: gae").
:func:`group_advantages` is GRPO's and Dr. GRPO's critic-free advantage, :func:`gae` PPO's from
a value model, operation for operation as CleanRL's ``ppo.py``.  Both are re-exported by
:mod:`llm_clip` (``llm_clip.gae``, ``llm_clip.group_advantages``).  Bad input raises a
``TypeError`` or ``ValueError`` naming the argument (:mod:`ppo_clip_inputs`'s checks).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip_inputs as checks

__all__ = ["MAX_REWARD", "gae", "group_advantages"]

FloatArray = NDArray[np.float64]

MAX_REWARD = 1e150  #: the largest |reward| (gae: |value| too): squares and sums fit float64


def group_advantages(
    rewards: ArrayLike, group_size: int, *, scale_by_std: bool = True, std_eps: float = 1e-4
) -> FloatArray:
    """GRPO's advantages: each reward minus its group's mean, over the group's std + std_eps.

    The ``group_size`` responses to one prompt are consecutive, as TRL's
    ``rewards.view(-1, num_generations)`` (``grpo_trainer.py`` L2685-2707).  GRPO
    (arXiv 2402.03300) divides by the std; Dr. GRPO (arXiv 2503.20783) does
    not (``scale_by_std=False``).  The std is the sample std (ddof=1) of TRL's ``nanstd``
    (``trl/trainer/utils.py`` L873-879) and verl's ``torch.std`` (``core_algos.py`` L320);
    ``std_eps`` is TRL's 1e-4 (verl's is 1e-6, L271).

    >>> group_advantages([1.0, 0.0, 0.0, 0.0], 4).round(4)
    array([ 1.4997, -0.4999, -0.4999, -0.4999])
    >>> group_advantages([1.0, 0.0, 0.0, 0.0], 4, scale_by_std=False)
    array([ 0.75, -0.25, -0.25, -0.25])
    """
    values = checks.checked_finite_vector("rewards", rewards)
    if np.abs(values).max() > MAX_REWARD:
        raise ValueError(f"rewards must be at most {MAX_REWARD:g} in magnitude")
    size = checks.checked_count("group_size", group_size, len(values))
    if size < 2 or len(values) % size:
        raise ValueError(
            f"group_size must be at least 2 and divide the {len(values)} rewards, got {size}"
        )
    if not isinstance(scale_by_std, (bool, np.bool_)):  # "False" or None would read as a truth
        raise TypeError(f"scale_by_std must be True or False, got {scale_by_std!r}")
    small = checks.checked_real("std_eps", std_eps)
    if small <= 0:
        raise ValueError(f"std_eps must be positive, got {small!r}")
    groups = values.reshape(-1, size)
    with np.errstate(under="ignore"):  # a tiny reward's square may underflow to 0: harmless
        centered = groups - groups.mean(axis=1, keepdims=True)
        if scale_by_std:
            centered = centered / (groups.std(axis=1, ddof=1, keepdims=True) + small)
    return centered.reshape(-1) + 0.0


def gae(
    rewards: ArrayLike,
    values: ArrayLike,
    dones: ArrayLike,
    last_value: ArrayLike,
    last_done: ArrayLike,
    *,
    gamma: float,
    lam: float,
) -> tuple[FloatArray, FloatArray]:
    """PPO's advantages by GAE(lambda) (arXiv 1506.02438) and value targets: ``(A, A + V)``.

    Time is the first axis: ``rewards``, ``values`` (V of each observation) and ``dones`` are
    (T,), or (T, N) for N environments; ``last_value`` and ``last_done``, of the observation
    after the rollout, are numbers or (N,).  ``dones[t]`` says observation t *starts* an
    episode (CleanRL's ``next_done``): the episode ended at step t - 1.  From the last step
    back, with ``next_value, next_done = values[t + 1], dones[t + 1]`` (``last_value,
    last_done`` at the last step)::

        delta = rewards[t] + gamma * next_value * (1 - next_done) - values[t]
        A[t]  = delta + gamma * lam * (1 - next_done) * A[t + 1]        (A[T] = 0)

    as CleanRL's ``ppo.py`` (``fe8d8a0``, L217-231), operation for operation: the same floats.
    ``lam = 0`` gives the one-step TD error, ``lam = 1`` the discounted return minus V.

    A *termination* (the pole fell, EOS) has no future: its step is ``r - V(s)``.  A
    *truncation* (a time limit, CartPole's 500 steps) cuts a state that has one, so it should
    be bootstrapped from V of the truncated observation, which is not in ``values`` (the
    environment has reset).  Both mark the next observation as a start; the CartPole agent
    (``experiments/cartpole_agent.py``) puts a truncation's bootstrap in its reward, adding
    ``gamma * V(final observation)``.  CleanRL does not (L206): a time limit counts as a
    failure there.  :mod:`tiny_rlhf` calls this with ``gamma`` 1 on each response's tokens,
    ``last_value`` 0 and V and r 0 on padding: a response ends by termination.

    >>> advantages, returns = gae([1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0, 0, 1, 0],
    ...                           last_value=2.0, last_done=False, gamma=0.5, lam=1.0)
    >>> advantages  # step 1 ends an episode; step 3 is bootstrapped from last_value
    array([1. , 0.5, 1.5, 1.5])
    >>> returns  # lam = 1: the discounted returns, 1 + 0.5 * 1 and 1 + 0.5 * 2
    array([1.5, 1. , 2. , 2. ])
    >>> gae([1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0, 0, 1, 0],
    ...     last_value=2.0, last_done=True, gamma=0.5, lam=1.0)[1]  # terminated at the end
    array([1.5, 1. , 1.5, 1. ])

    Bad input (a shape, a NaN, ``dones`` not 0/1, ``gamma`` or ``lam`` outside [0, 1], a reward
    or value beyond :data:`MAX_REWARD` in magnitude, where the sums could overflow) raises a
    ``TypeError`` or ``ValueError`` naming the argument.
    """
    r = _rollout_array("rewards", rewards)
    shapes = [(), r.shape[1:]]  # last_value and last_done: a number, or one per environment
    v = _rollout_array("values", values, [r.shape])
    starts = _rollout_array("dones", dones, [r.shape], flags=True)
    next_value = _rollout_array("last_value", last_value, shapes)
    for name, array in (("rewards", r), ("values", v), ("last_value", next_value)):
        if np.abs(array).max() > MAX_REWARD:
            raise ValueError(f"{name} must be at most {MAX_REWARD:g} in magnitude")
    next_nonterminal = 1.0 - _rollout_array("last_done", last_done, shapes, flags=True)
    gamma, lam = checks.checked_eps("gamma", gamma), checks.checked_eps("lam", lam)
    advantages = np.zeros_like(r)
    following = 0.0
    with np.errstate(under="ignore"):  # a product below 1e-308 rounds to 0: harmless
        for t in reversed(range(len(r))):
            delta = r[t] + gamma * next_value * next_nonterminal - v[t]
            advantages[t] = following = delta + gamma * lam * next_nonterminal * following
            next_value, next_nonterminal = v[t], 1.0 - starts[t]
    return advantages, advantages + v


def _rollout_array(
    name: str, value: object, shapes: list[tuple[int, ...]] | None = None, *, flags: bool = False
) -> FloatArray:
    """``value`` as float64, checked by :mod:`ppo_clip_inputs`'s rules: of one of ``shapes``
    (``None``: any (T,) or (T, N)); ``flags``: booleans, or 0 and 1 only."""
    try:
        ndim = np.ndim(value)
        if flags and np.asarray(value).dtype == bool:
            value = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):  # ragged: named by real_array
        ndim = 1
    if ndim == 0 and shapes is not None and () in shapes:
        array = np.array(checks.checked_real(name, value))
    else:
        array = checks.real_array(name, value, 2 if ndim == 2 else 1, "(T,) or (T, N)")
        array = checks.float64_of(name, array)
    if shapes is not None and array.shape not in shapes:
        wanted = " or ".join("a number" if not s else str(s) for s in dict.fromkeys(shapes))
        raise ValueError(f"{name} has shape {array.shape}; with these rewards it must be {wanted}")
    if flags and not np.isin(array, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold booleans (or 0 and 1 only)")
    return array
