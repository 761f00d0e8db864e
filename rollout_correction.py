"""The rollout engine's log-probabilities: TRL's importance weights and DeepSeek-V3.2's OPSM.

An inference engine (vLLM, SGLang) samples the tokens; its log-probabilities ``logp_rollout``
(B, T) differ from the trainer's recomputation ``logp_old`` (other kernels, lower precision,
top-p, a policy a few updates old).  :func:`rollout_weights` and :func:`off_policy_keep` are the
two corrections as TRL 1.16 defines them (contract: ``docs/contract.md``, section "The rollout
engine's log-probabilities"); pass them to :func:`llm_clip.policy_loss` as ``rollout_weights=``
and ``keep=``.  Both are re-exported by :mod:`llm_clip`.  Inputs as :mod:`llm_clip`'s (padding
never read, inputs never modified); bad input raises a ``TypeError`` or ``ValueError`` naming
the argument (:mod:`llm_clip_inputs`).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip_inputs as checks
from llm_clip_inputs import NO_ADVANTAGES, checked_batch
from ppo_clip_exact import float64_limits_handled_below, row_sums

__all__ = ["ROLLOUT_MODES", "checked_bounds", "off_policy_keep", "rollout_weights"]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


RolloutMode = Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
ROLLOUT_MODES: tuple[RolloutMode, ...] = get_args(RolloutMode)


def rollout_weights(
    logp_old: ArrayLike,
    logp_rollout: ArrayLike,
    mask: ArrayLike,
    *,
    mode: RolloutMode,
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> FloatArray:
    """The importance weights that correct for the rollout engine, as TRL computes them.

    The engine (vLLM, SGLang) sampled each token with log-probability ``logp_rollout``; the
    trainer's own recomputation is ``logp_old``.  With ``d = logp_old - logp_rollout`` on unmasked
    tokens (0 on padding), ``token_*`` modes give ``exp(d)`` per token, (B, T), and
    ``sequence_*`` modes ``exp(sum_t d)`` per response, (B, 1): the product of its tokens'
    ratios.  ``*_truncate`` clamps the weights to ``[clip_min, clip_max]`` (truncated importance
    sampling, TIS); ``*_mask`` sets every weight outside it to 0 (IcePop-style).  ``None``
    leaves that side open.  TRL 1.16.0 ``grpo_trainer.py`` L2660-2707 (its default:
    ``sequence_mask``, ``clip_max`` 3).  verl 0.9.1 (``rollout_corr_helper.py`` L522-596)
    differs: it clamps ``d`` (or the sum) to [-20, 20] before ``exp``, sets padding to 0, its
    truncation has an upper bound only (default 2) and its mask keeps ``[lower, upper]``.

    >>> old = np.log([[0.5, 0.5], [0.5, 0.5]])
    >>> engine = np.log([[0.25, 0.5], [0.5, 1.0]])  # the engine's probabilities
    >>> rollout_weights(old, engine, [[True, True], [True, False]], mode="token_truncate")
    array([[2., 1.],
           [1., 1.]])
    >>> rollout_weights(old, engine, [[True, True], [True, True]], mode="sequence_mask",
    ...                 clip_min=0.4, clip_max=1.5)  # 2 * 1 is above 1.5: masked
    array([[0. ],
           [0.5]])

    Bad input raises a ``TypeError`` or ``ValueError`` naming the argument; ``clip_min`` and
    ``clip_max`` are None or numbers >= 0 with ``clip_min <= clip_max``.  Where ``exp``
    overflows the weight is ``inf`` before the bound (truncated to ``clip_max``, masked to 0).
    """
    mode = checks.checked_choice("mode", mode, ROLLOUT_MODES)
    low, high = checked_bounds(clip_min, clip_max)
    b = checked_batch(
        logp_old, logp_rollout, NO_ADVANTAGES, mask, names=("logp_old", "logp_rollout")
    )
    gap = b.log_ratio  # d per token; per response, sum_t d:
    if mode.startswith("sequence"):
        gap = row_sums(b.logp_new, b.mask, minus=b.logp_old)[:, None]
    with float64_limits_handled_below():
        weight = np.exp(gap)
    if mode.endswith("truncate"):
        return np.clip(weight, low, high)
    return np.where((weight < low) | (weight > high), 0.0, weight)


def checked_bounds(clip_min: object, clip_max: object) -> tuple[float, float]:
    """``(clip_min, clip_max)`` of :func:`rollout_weights` as floats, None read as the open side
    (``-inf``, ``inf``); each a number >= 0, ``clip_min <= clip_max``, else a ``TypeError`` or
    ``ValueError`` naming it."""
    low = -math.inf if clip_min is None else checks.checked_real("clip_min", clip_min)
    high = math.inf if clip_max is None else checks.checked_real("clip_max", clip_max)
    for name, bound in (("clip_min", low), ("clip_max", high)):
        if -math.inf < bound < 0:
            raise ValueError(f"{name} must be at least 0, got {bound!r}")
    if low > high:
        raise ValueError(f"clip_min ({low!r}) must not exceed clip_max ({high!r})")
    return low, high


def off_policy_keep(
    logp_new: ArrayLike,
    logp_rollout: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    threshold: float,
) -> BoolArray:
    """DeepSeek-V3.2's off-policy sequence masking (OPSM): which responses to keep, (B,).

    A response is kept if its advantage is >= 0 or the mean over its unmasked tokens of
    ``logp_rollout - logp_new`` (an estimate of KL(rollout || current)) is <= ``threshold``: a
    response that is both far off-policy and pushed down is dropped (TRL 1.16.0
    ``GRPOTrainer.get_off_policy_mask``, ``grpo_trainer.py`` L2945-2968).  Note the level: the
    *mean* gap over tokens, where a ``sequence_*`` rollout weight is the *sum*'s ``exp``.
    ``advantages``: (B,), or (B, T) with one value per response.  Pass the result as
    ``keep=`` to :func:`policy_loss`.

    >>> new = np.log([[0.5, 0.5], [0.5, 0.5]])
    >>> engine = np.log([[0.9, 0.9], [0.9, 0.9]])  # mean gap log(1.8) = 0.59 on both
    >>> off_policy_keep(new, engine, [1.0, -1.0], [[True, True], [True, True]], threshold=0.5)
    array([ True, False])
    """
    limit = checks.checked_real("threshold", threshold)
    b = checked_batch(logp_new, logp_rollout, advantages, mask, objective="off_policy_keep",
                      per_response=True, names=("logp_new", "logp_rollout"))  # fmt: skip
    first = b.advantages[np.arange(len(b.mask)), np.argmax(b.mask, axis=1)]
    mean_gap = row_sums(b.logp_new, b.mask, b.lengths, minus=b.logp_old)  # logp_new - rollout
    return (first >= 0) | (-mean_gap <= limit)
