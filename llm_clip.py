"""PPO's clip as LLM trainers apply it: per-token ratios, masks, aggregations, six objectives.

:mod:`ppo_clip` clips N independent samples.  This module applies the same clip to a batch of
B responses of up to T tokens, as GRPO-family trainers do (contract: ``shared/LLM_CLIP.md``),
in float64 numpy.

Inputs: ``logp_new`` and ``logp_old`` (B, T), each token's log-probability under the policy
being trained and under the one that sampled it; ``advantages`` (B,), one per response and
broadcast to its tokens, or (B, T); ``mask`` (B, T), True on response tokens.  Padding (mask
False) is never read: it may hold ``-inf`` or NaN.  Every response has at least one token.
Inputs are never modified.

With ``r = exp(logp_new - logp_old)`` per token, the loss is ``-sum(w * term)`` over the
unmasked tokens, where

    term = min(r*A, clip(r, 1 - eps_low, 1 + eps_high)*A) - kl_coef*k3,
    k3   = exp(d) - d - 1  with  d = logp_ref - logp_new      (only with ``logp_ref``)

and a token of response i (n_i tokens) has the weight w of the aggregation:

    token-mean                w = 1 / (unmasked tokens in the batch)   PPO, DAPO, CISPO
    seq-mean-token-mean       w = 1 / (B * n_i)                        GRPO, GSPO
    seq-mean-token-sum-norm   w = 1 / (B * max_len)                    Dr. GRPO

GSPO clips one ratio per response instead (the geometric mean of its tokens' ratios); CISPO
multiplies ``logp_new`` by the clipped ratio held constant, so no token's gradient is
switched off.  The file reads top to bottom:

1. **The textbook**: :func:`policy_loss`, :func:`policy_loss_grad` and :func:`token_breakdown`
   (each token's ratio, clip decision, term, weight and gradient, e.g. for a heat map).
2. **The six objectives**, each with its formula, its paper and the line of TRL or verl it
   follows.  Sources, read at these commits: TRL ``f2cd577`` (``trl/trainer/grpo_trainer.py``),
   verl ``b178a3c`` (``verl/trainer/ppo/core_algos.py``), CleanRL ``fe8d8a0``
   (``cleanrl/ppo.py``), the RLHF book ``a66b0bf`` (``book/chapters/06-policy-gradients.md``).
3. **Around the loss**: :func:`group_advantages` (GRPO's and Dr. GRPO's) and the clip fraction
   as CleanRL, verl and TRL each log it (:func:`clip_fraction_cleanrl`,
   :func:`clip_fraction_verl`, :func:`clip_ratio_trl`).
4. **Float64's limits**, decided by :mod:`ppo_clip`'s rules: never NaN; a token with
   ``A == 0`` adds exactly 0 even where its ratio overflowed; an overflowed ratio with
   ``A < 0`` (or an overflowed ``exp(d)`` in k3) makes the loss ``+inf``; any other loss or
   gradient entry that float64 overflowed on the way to is the exact value rounded once.

Bad input raises a ``TypeError`` or ``ValueError`` naming the argument (:mod:`llm_clip_inputs`).
Where the contract is silent this module does what TRL does: the KL term is added per token and
aggregated with the objective's own aggregation, for GSPO and CISPO too
(``grpo_trainer.py`` L3121); an aggregation given to GSPO is applied to its per-token loss
(TRL L3124-3142; verl ignores it and always uses seq-mean-token-mean, ``core_algos.py`` L1312).

>>> import numpy as np
>>> logp_old = np.log([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])
>>> logp_new = np.log([[0.7, 0.55, 0.3], [0.3, 0.45, 1.0]])
>>> mask = np.array([[True, True, True], [True, True, False]])  # response 2 has two tokens
>>> b = token_breakdown(logp_new, logp_old, [1.0, -1.0], mask, objective="grpo")
>>> b.is_clipped  # A > 0 and r = 1.4 > 1.2; A < 0 and r = 0.6 < 0.8
array([[ True, False, False],
       [ True, False, False]])
>>> b.weight  # seq-mean-token-mean: 1 / (B * n_i)
array([[0.16666667, 0.16666667, 0.16666667],
       [0.25      , 0.25      , 0.        ]])
>>> np.round(b.grad, 6)  # -w * r * A where not clipped, 0 where clipped and on padding
array([[ 0.      , -0.183333, -0.1     ],
       [ 0.      ,  0.225   ,  0.      ]])
>>> round(b.loss, 6)  # -(1/2) * ((1.2 + 1.1 + 0.6) / 3 + (-0.8 - 0.9) / 2)
-0.058333
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, NamedTuple, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip_inputs as checks
from llm_clip_inputs import Batch, checked_batch, checked_choice

__all__ = [
    "AGGREGATIONS",
    "DAPO_EPS_HIGH",
    "DEFAULT_AGGREGATION",
    "DEFAULT_EPS",
    "OBJECTIVES",
    "TokenBreakdown",
    "clip_fraction_cleanrl",
    "clip_fraction_verl",
    "clip_ratio_trl",
    "group_advantages",
    "policy_loss",
    "policy_loss_grad",
    "token_breakdown",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Objective = Literal["ppo", "grpo", "dr_grpo", "dapo", "gspo", "cispo"]
Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]

OBJECTIVES: tuple[Objective, ...] = get_args(Objective)
AGGREGATIONS: tuple[Aggregation, ...] = get_args(Aggregation)
#: Each objective's own aggregation, used when ``aggregation`` is None.
DEFAULT_AGGREGATION: dict[Objective, Aggregation] = {
    "ppo": "token-mean",
    "grpo": "seq-mean-token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
    "dapo": "token-mean",
    "gspo": "seq-mean-token-mean",
    "cispo": "token-mean",
}
#: ``eps_low``'s default; ``eps_high`` defaults to ``eps_low``, except DAPO's.
DEFAULT_EPS = 0.2
#: DAPO's clip-higher (arXiv 2503.14476): ``eps_high`` defaults to 0.28.
DAPO_EPS_HIGH = 0.28


# --------------------------------------------------------------------------
# 1. The textbook: the loss, its gradient, and every per-token quantity
# --------------------------------------------------------------------------


def policy_loss(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    objective: Objective,
    eps_low: float | None = None,
    eps_high: float | None = None,
    aggregation: Aggregation | None = None,
    max_len: int | None = None,
    logp_ref: ArrayLike | None = None,
    kl_coef: float = 0.0,
) -> float:
    """The loss to minimize, ``-sum(w * term)`` over unmasked tokens (module docstring).

    ``+inf`` where a ratio overflows with ``A < 0`` or k3 overflows; never NaN.  Arguments
    and errors as in :func:`token_breakdown`.
    """
    return token_breakdown(
        logp_new, logp_old, advantages, mask, objective=objective, eps_low=eps_low,
        eps_high=eps_high, aggregation=aggregation, max_len=max_len, logp_ref=logp_ref,
        kl_coef=kl_coef,
    ).loss  # fmt: skip


def policy_loss_grad(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    objective: Objective,
    eps_low: float | None = None,
    eps_high: float | None = None,
    aggregation: Aggregation | None = None,
    max_len: int | None = None,
    logp_ref: ArrayLike | None = None,
    kl_coef: float = 0.0,
) -> FloatArray:
    """``d loss / d logp_new`` as autograd computes it, shape (B, T), 0 on padding (CISPO: its
    weight ``clip(r)`` held constant, so not the derivative of the returned loss; see
    :attr:`TokenBreakdown.grad`)."""
    return token_breakdown(
        logp_new, logp_old, advantages, mask, objective=objective, eps_low=eps_low,
        eps_high=eps_high, aggregation=aggregation, max_len=max_len, logp_ref=logp_ref,
        kl_coef=kl_coef,
    ).grad  # fmt: skip


@dataclass(frozen=True, eq=False)
class TokenBreakdown:
    """Every per-token quantity of one objective on one batch: arrays (B, T), 0 on padding.

    ``ratio`` is what the clip sees (GSPO: the response's ``s_i``); ``is_clipped`` where the
    clip switches the policy gradient off (strict, as in :mod:`ppo_clip`; CISPO: where its
    weight ``clip(r)`` differs from ``r``, the gradient kept); ``term`` the policy term
    (CISPO: ``clip(r)*A*logp_new``); ``kl`` k3 (0 without ``logp_ref``); ``weight`` the
    aggregation's ``w``; ``grad`` is ``d loss / d logp_new`` as autograd gives it (CISPO: with
    the detached weight ``clip(r)`` a constant, as in verl and TRL); ``loss`` is
    ``-sum(weight * (term - kl_coef * kl))`` summed as the libraries sum.
    """

    mask: BoolArray
    ratio: FloatArray
    is_clipped: BoolArray
    term: FloatArray
    kl: FloatArray
    weight: FloatArray
    grad: FloatArray
    loss: float


def token_breakdown(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    objective: Objective,
    eps_low: float | None = None,
    eps_high: float | None = None,
    aggregation: Aggregation | None = None,
    max_len: int | None = None,
    logp_ref: ArrayLike | None = None,
    kl_coef: float = 0.0,
) -> TokenBreakdown:
    """Each token's ratio, clip decision, term, weight and gradient, and the loss.

    ``logp_new``, ``logp_old``, ``mask``, ``logp_ref``: (B, T), ``mask`` boolean (or 0/1),
    unmasked entries finite.  ``advantages``: (B,) or (B, T), used as given (never
    normalized); GSPO needs the same value on each response's tokens.  ``objective``: one of
    :data:`OBJECTIVES`.  The band is ``[1 - eps_low, 1 + eps_high]``: ``eps_low`` in [0, 1]
    (default 0.2), ``eps_high`` any finite number >= 0 (default ``eps_low``, DAPO 0.28).
    ``aggregation``: one of :data:`AGGREGATIONS` (default: the objective's own); ``max_len``, a
    whole number >= 1, is required by ``seq-mean-token-sum-norm`` and ignored otherwise.
    ``kl_coef``: beta >= 0, which needs ``logp_ref`` unless 0.
    """
    b = _checked(
        logp_new, logp_old, advantages, mask, objective, eps_low, eps_high, aggregation,
        max_len, logp_ref, kl_coef,
    )  # fmt: skip
    with _float64_limits_handled_below():
        parts = _OBJECTIVE_PARTS[b.objective](b)
        term = _times_advantage(math.prod(parts.term_factors), b.advantages)
        kl = np.expm1(b.ref_gap) - b.ref_gap  # k3 = exp(d) - d - 1 (0 on padding, where d = 0)
        slope = -_times_advantage(parts.grad_factor, b.advantages)  # -(d term / d logp_new)
        per_token = -term  # the loss is sum(w * per_token)
        if b.kl_coef:  # skipped at 0: 0 * inf would be NaN
            per_token = per_token + b.kl_coef * kl
            slope = slope - b.kl_coef * np.expm1(b.ref_gap)  # d k3 / d logp_new = 1 - exp(d)
        grad = np.where(b.mask, slope / b.denominator[:, None], 0.0)  # w = 1 / denominator
    if not np.isfinite(grad).all():  # float64 overflowed on the way: part 4 decides
        _gradient_beyond_float64(grad, parts, b)
    loss = _aggregate(per_token, b)
    if not math.isfinite(loss):
        loss = _loss_beyond_float64(parts, kl, b)
    weight = np.where(b.mask, 1.0 / b.denominator[:, None], 0.0)
    ratio = np.where(b.mask, parts.ratio, 0.0)
    return TokenBreakdown(
        b.mask, ratio, parts.is_clipped & b.mask, term, kl, weight, grad + 0.0, loss + 0.0
    )


def _aggregate(per_token: FloatArray, b: Batch) -> float:
    """``sum(w * per_token)`` summed as TRL sums (``grpo_trainer.py`` L3125, L3135, L3141).

    seq-mean-token-mean: each response's sum over n_i, then the mean over responses; the
    others: the sum over unmasked tokens over one number.  With one token per response each
    is ``ppo_clip_loss``'s ``-sum(terms) / N`` bit for bit (sum-norm with ``max_len=1``).
    """
    with _float64_limits_handled_below():
        if b.aggregation == "seq-mean-token-mean":
            return float((per_token.sum(axis=1) / b.lengths).mean())
        return float(per_token[b.mask].sum() / b.denominator[0])


# --------------------------------------------------------------------------
# 2. The six objectives: what each token's term and gradient are made of
# --------------------------------------------------------------------------


class _Parts(NamedTuple):
    """One objective's per-token pieces: ``term = product(term_factors) * A`` and
    ``d term / d logp_new = grad_factor * A`` (GSPO's: what reaches each token)."""

    ratio: FloatArray
    is_clipped: BoolArray
    term_factors: tuple[FloatArray, ...]
    grad_factor: FloatArray


def _ppo(b: Batch) -> _Parts:
    """PPO (Schulman et al. 2017, arXiv 1707.06347), per token, aggregated by token-mean.

    ``term = min(r*A, clip(r, 1 - eps_low, 1 + eps_high)*A)``, ``r = exp(logp_new - logp_old)``;
    clipped where ``A > 0 and r > 1 + eps_high`` or ``A < 0 and r < 1 - eps_low``.  Follows
    verl's ``compute_policy_loss_vanilla`` (``core_algos.py`` L1216-1227; token-mean, the
    default, ``agg_loss`` L1055-1058) without its log-ratio clamp to [-20, 20] (L1212) and its
    dual-clip ``clip_ratio_c = 3`` for ``A < 0`` (L1229-1235; see ``ppo_clip.clip_breakdown``).
    """
    return _clipped(np.exp(b.log_ratio), b)


def _grpo(b: Batch) -> _Parts:
    """GRPO (DeepSeekMath, arXiv 2402.03300): PPO's per-token term, seq-mean-token-mean.

    ``loss = -(1/B) sum_i (1/n_i) sum_t min(r*A, clip(r)*A)``, A usually
    :func:`group_advantages` of the response's reward.  Follows TRL ``loss_type="grpo"``
    (``grpo_trainer.py`` L3084-3091 for the term, L3125 for the aggregation).
    """
    return _clipped(np.exp(b.log_ratio), b)


def _dr_grpo(b: Batch) -> _Parts:
    """Dr. GRPO (arXiv 2503.20783): PPO's term, seq-mean-token-sum-norm (no 1/n_i bias).

    ``loss = -(1/(B * max_len)) sum_i sum_t min(r*A, clip(r)*A)``, with advantages not divided
    by the group's std (``group_advantages(..., scale_by_std=False)``).  Follows TRL
    ``loss_type="dr_grpo"`` (L3135, ``max_len`` = ``max_completion_length``); verl's
    ``seq-mean-token-sum-norm`` divides by ``max_len`` only, not by B (``core_algos.py`` L1076).
    """
    return _clipped(np.exp(b.log_ratio), b)


def _dapo(b: Batch) -> _Parts:
    """DAPO (arXiv 2503.14476): PPO's term with clip-higher (``eps_high`` 0.28), token-mean.

    ``loss = -(1 / sum_i n_i) sum_i sum_t min(r*A, clip(r, 1 - eps_low, 1 + eps_high)*A)``.
    Follows TRL ``loss_type="dapo"`` (L3139-3141, the normalizer being the batch's token count);
    DAPO's dynamic sampling and overlong shaping are outside the loss.
    """
    return _clipped(np.exp(b.log_ratio), b)


def _gspo(b: Batch) -> _Parts:
    """GSPO (arXiv 2507.18071): one ratio per response, seq-mean-token-mean.

    ``s_i = exp((1/n_i) sum_t (logp_new - logp_old))``; ``loss = -(1/B) sum_i min(s_i*A_i,
    clip(s_i)*A_i)``.  Since ``d s_i / d logp_new_t = s_i / n_i``, every token of an unclipped
    response gets ``-w * s_i * A_i``: the gradient of verl's GSPO-token form too (L1297).
    Follows TRL ``importance_sampling_level="sequence"`` (L3058) with ``loss_type="grpo"``.
    The paper's ranges are tiny: ``eps_low=3e-4, eps_high=4e-4``.
    """
    mean_log_ratio = b.log_ratio.sum(axis=1) / b.lengths  # (1/n_i) sum_t (new - old)
    sequence_ratio = np.exp(mean_log_ratio)[:, None] * np.ones_like(b.log_ratio)  # s_i per token
    return _clipped(sequence_ratio, b)


def _cispo(b: Batch) -> _Parts:
    """CISPO (MiniMax-M1, arXiv 2506.13585): the clipped ratio as a constant weight, token-mean.

    ``term = sg[clip(r, 1 - eps_low, 1 + eps_high)] * A * logp_new``; the gradient per token
    is ``-w * clip(r) * A``, never 0 unless A is.  Follows verl's
    ``compute_policy_loss_cispo`` (L1753-1758).  TRL clips one side only, at
    ``epsilon_high`` itself (``clamp(coef_1, max=epsilon_high)``, L3081; recommended 5.0):
    here ``eps_low=1, eps_high=4``.
    """
    ratio = np.exp(b.log_ratio)
    weight = np.clip(ratio, b.lower, b.upper)  # sg[clip(r)]: a constant to the gradient
    return _Parts(ratio, weight != ratio, (weight, b.logp_new), weight)


def _clipped(ratio: FloatArray, b: Batch) -> _Parts:
    """PPO's clipped term on ``ratio`` (a token's or a response's)."""
    advantages = b.advantages
    # min(r*A, clip(r)*A) = A * min(r, upper) for A > 0 and A * max(r, lower) for A < 0
    kept = np.where(advantages > 0, np.minimum(ratio, b.upper), np.maximum(ratio, b.lower))
    clipped = ((advantages > 0) & (ratio > b.upper)) | ((advantages < 0) & (ratio < b.lower))
    return _Parts(ratio, clipped, (kept,), np.where(clipped, 0.0, ratio))


_OBJECTIVE_PARTS: dict[str, Callable[[Batch], _Parts]] = dict(
    zip(OBJECTIVES, (_ppo, _grpo, _dr_grpo, _dapo, _gspo, _cispo), strict=True)
)


# --------------------------------------------------------------------------
# 3. Around the loss: group advantages and the three clip fractions
# --------------------------------------------------------------------------

MAX_REWARD = 1e150  #: the largest |reward|: the squares in the std fit float64


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
    small = checks.checked_real("std_eps", std_eps)
    if small <= 0:
        raise ValueError(f"std_eps must be positive, got {small!r}")
    groups = values.reshape(-1, size)
    centered = groups - groups.mean(axis=1, keepdims=True)
    if scale_by_std:
        centered = centered / (groups.std(axis=1, ddof=1, keepdims=True) + small)
    return centered.reshape(-1) + 0.0


def clip_fraction_cleanrl(
    logp_new: ArrayLike, logp_old: ArrayLike, mask: ArrayLike, *, eps: float = DEFAULT_EPS
) -> dict[str, float]:
    """CleanRL's ``losses/clipfrac``: the share of tokens with ``|r - 1| > eps``, any A.

    ``cleanrl/ppo.py`` L258: ``((ratio - 1.0).abs() > args.clip_coef).float().mean()``, here
    over the unmasked tokens as one minibatch.  Sign-blind: a token that moved the
    unfavourable way counts, although its gradient flows.
    """
    b = _checked(logp_new, logp_old, None, mask, "ppo")
    clip_coef = checks.checked_eps("eps", eps)
    with _float64_limits_handled_below():
        outside = np.abs(np.exp(b.log_ratio) - 1.0) > clip_coef
    return {"losses/clipfrac": _token_mean(outside, b)}


def clip_fraction_verl(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    objective: Objective = "ppo",
    eps_low: float | None = None,
    eps_high: float | None = None,
    dual_clip: float | None = 3.0,
) -> dict[str, float]:
    """verl's ``actor/pg_clipfrac`` and ``actor/pg_clipfrac_lower``, token means.

    PPO, GRPO, Dr. GRPO, DAPO (``compute_policy_loss_vanilla``): ``pg_losses2 > pg_losses1``,
    i.e. ``-A*clip(r) > -A*r`` (L1227) on ``r = exp(clamp(log r, -20, 20))`` (L1212), and the
    lower fraction ``A < 0`` with ``max(pg_losses1, pg_losses2) > -A*dual_clip`` (L1231,
    ``clip_ratio_c``).  GSPO: the same comparison on each token's sequence ratio, its log
    clamped at 10 (L1298, L1317), so a clipped response counts once per token.  CISPO:
    ``r != clip(r)``, sign-blind (L1761).  No lower fraction for GSPO and CISPO (0).
    """
    b = _checked(logp_new, logp_old, advantages, mask, objective, eps_low, eps_high, "token-mean")
    cap = checks.checked_dual_clip(dual_clip)
    a, lower = b.advantages, 0.0
    with _float64_limits_handled_below():
        if b.objective == "gspo":
            mean_log_ratio = b.log_ratio.sum(axis=1) / b.lengths
            ratio = np.exp(np.minimum(mean_log_ratio, 10.0))[:, None] * np.ones_like(a)
        else:
            ratio = np.exp(np.clip(b.log_ratio, -20.0, 20.0))
        if b.objective == "cispo":
            return {
                "actor/pg_clipfrac": _token_mean(ratio != np.clip(ratio, b.lower, b.upper), b),
                "actor/pg_clipfrac_lower": 0.0,
            }
        pg_losses1, pg_losses2 = -a * ratio, -a * np.clip(ratio, b.lower, b.upper)
        if b.objective != "gspo" and cap is not None:
            floor = np.maximum(pg_losses1, pg_losses2) > -a * cap
            lower = _token_mean(floor & (a < 0), b)
        return {
            "actor/pg_clipfrac": _token_mean(pg_losses2 > pg_losses1, b),
            "actor/pg_clipfrac_lower": lower,
        }


def clip_ratio_trl(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    objective: Objective = "grpo",
    eps_low: float | None = None,
    eps_high: float | None = None,
) -> dict[str, float]:
    """TRL's ``clip_ratio/*`` metrics: clipped below with A < 0, above with A > 0.

    ``low = r < 1 - eps_low and A < 0``, ``high = r > 1 + eps_high and A > 0``,
    ``region = low or high`` (``grpo_trainer.py`` L3244-3246): their token means, and the
    smallest share of low-clipped and largest share of high-clipped tokens in one response
    (``low_min``, ``high_max``, L3250-3253).  GSPO (``importance_sampling_level="sequence"``):
    one decision per response, means over responses (L3224-3233).  CISPO logs only
    ``cispo_clip_ratio``: ``r > 1 + eps_high and A > 0`` (L3255, TRL's ``epsilon_high`` being
    the cap ``1 + eps_high``).  TRL's GRPOTrainer has no PPO; ``"ppo"`` is read as token-level.
    """
    b = _checked(logp_new, logp_old, advantages, mask, objective, eps_low, eps_high, "token-mean")
    with _float64_limits_handled_below():
        a, ratio = b.advantages, _OBJECTIVE_PARTS[b.objective](b).ratio
    if b.objective == "cispo":
        return {"cispo_clip_ratio": _token_mean((ratio > b.upper) & (a > 0), b)}
    low, high = (ratio < b.lower) & (a < 0), (ratio > b.upper) & (a > 0)
    per_response = [(x & b.mask).sum(axis=1) / b.lengths for x in (low, high, low | high)]
    if b.objective == "gspo":  # one decision per response: its share is 0 or 1
        means = [float(share.mean()) for share in per_response]
    else:
        means = [_token_mean(x, b) for x in (low, high, low | high)]
    return {
        "clip_ratio/low_mean": means[0],
        "clip_ratio/high_mean": means[1],
        "clip_ratio/region_mean": means[2],
        "clip_ratio/low_min": float(per_response[0].min()),
        "clip_ratio/high_max": float(per_response[1].max()),
    }


def _token_mean(flags: BoolArray, b: Batch) -> float:
    """The share of unmasked tokens where ``flags`` holds (verl's ``masked_mean``)."""
    return float(np.count_nonzero(flags & b.mask) / b.mask.sum())


# --------------------------------------------------------------------------
# 4. Float64's limits: ppo_clip's rules, where the textbook lines overflowed
# --------------------------------------------------------------------------


def _float64_limits_handled_below() -> np.errstate:
    """No warning for ``inf`` on the way: results are checked, and decided in this part."""
    return np.errstate(over="ignore", invalid="ignore")


def _times_advantage(values: FloatArray, advantages: FloatArray) -> FloatArray:
    """``values * A`` with an exact 0 wherever ``A == 0`` (``inf * 0`` is never formed)."""
    return np.where(advantages == 0, 0.0, values) * advantages


def _loss_beyond_float64(parts: _Parts, kl: FloatArray, b: Batch) -> float:
    """The loss where float64 overflowed: ``+inf`` for a true infinity, else exact.

    Only an overflowed ratio with ``A < 0`` (kept as ``max(r, lower)``) or ``exp(d)`` in k3 is
    infinite, and adds ``+inf``; else the exact sum is rounded once (``+-inf`` beyond float64).
    """
    tokens = b.mask & (b.advantages != 0)
    if any(np.isinf(f[tokens]).any() for f in parts.term_factors) or (
        b.kl_coef and np.isinf(kl[b.mask]).any()
    ):
        return math.inf
    total = Fraction(0)
    for i, t in zip(*np.nonzero(b.mask), strict=True):
        contribution = Fraction(b.kl_coef) * Fraction(kl[i, t]) if b.kl_coef else Fraction(0)
        if b.advantages[i, t] != 0:
            term = Fraction(b.advantages[i, t])
            for factor in parts.term_factors:
                term *= Fraction(factor[i, t])
            contribution -= term
        total += contribution / int(b.denominator[i])
    return _rounded(total)


def _gradient_beyond_float64(grad: FloatArray, parts: _Parts, b: Batch) -> None:
    """Decide, in place, the gradient entries float64 left not finite.

    ``-(g*A + kl_coef*expm1(d)) / D``: an infinite ``g`` (an overflowed ratio, A < 0) gives
    ``+inf``, an overflowed ``exp(d)`` gives ``-inf``; both at once is undefined
    (``ValueError``); otherwise the exact value rounded once.
    """
    for i, t in zip(*np.nonzero(~np.isfinite(grad)), strict=True):
        g, a = float(parts.grad_factor[i, t]), float(b.advantages[i, t])
        with _float64_limits_handled_below():
            exp_d = float(np.expm1(b.ref_gap[i, t])) if b.kl_coef else 0.0  # exp(d) - 1
        policy_inf, kl_inf = a != 0 and math.isinf(g), math.isinf(exp_d)
        if policy_inf and kl_inf:
            raise ValueError(
                f"the gradient at logp_new[{i}, {t}] is undefined: its ratio and "
                "exp(logp_ref - logp_new) both overflow (inf - inf)"
            )
        if policy_inf or kl_inf:
            grad[i, t] = -math.copysign(math.inf, a) if policy_inf else -math.inf
            continue
        exact = Fraction(b.kl_coef) * Fraction(exp_d) + (Fraction(g) * Fraction(a) if a else 0)
        grad[i, t] = _rounded(-exact / int(b.denominator[i]))


def _rounded(value: Fraction) -> float:
    """``value`` rounded once to float64 (Python's int division rounds so); ``+-inf`` beyond."""
    try:
        return value.numerator / value.denominator + 0.0
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _checked(
    logp_new: object,
    logp_old: object,
    advantages: object,
    mask: object,
    objective: object,
    eps_low: object = None,
    eps_high: object = None,
    aggregation: object = None,
    max_len: object = None,
    logp_ref: object = None,
    kl_coef: object = 0.0,
) -> Batch:
    """The inputs checked (:mod:`llm_clip_inputs`), with the contract's defaults filled in."""
    objective = checked_choice("objective", objective, OBJECTIVES)
    eps_low = DEFAULT_EPS if eps_low is None else eps_low
    if eps_high is None:
        eps_high = DAPO_EPS_HIGH if objective == "dapo" else eps_low
    if aggregation is None:
        aggregation = DEFAULT_AGGREGATION[objective]
    return checked_batch(
        logp_new, logp_old, advantages, mask, objective=objective, eps_low=eps_low,
        eps_high=eps_high, aggregation=checked_choice("aggregation", aggregation, AGGREGATIONS),
        max_len=max_len, logp_ref=logp_ref, kl_coef=kl_coef,
    )  # fmt: skip
