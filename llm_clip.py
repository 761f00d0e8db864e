"""PPO's clip as LLM trainers apply it: per-token ratios, masks, aggregations and objectives.

:mod:`ppo_clip` clips N independent samples.  This module applies the same clip to a batch of
B responses of up to T tokens, as GRPO-family trainers do (contract: ``docs/contract.md``,
section "llm_clip"), in float64 numpy.

Inputs: ``logp_new`` and ``logp_old`` (B, T), each token's log-probability under the policy
being trained and under the one that sampled it; ``advantages`` (B,), one per response and
broadcast to its tokens, or (B, T); ``mask`` (B, T), True on response tokens.  Padding (mask
False) is never read: it may hold ``-inf`` or NaN.  Every response has at least one token.
Inputs are never modified.

With ``r = exp(logp_new - logp_old)`` per token, the loss is ``-sum(w * term)`` over the
unmasked tokens, where (PPO, GRPO, Dr. GRPO, DAPO)

    term = min(r*A, clip(r, 1 - eps_low, 1 + eps_high)*A) - kl_coef*k3,
    k3   = exp(d) - d - 1  with  d = logp_ref - logp_new      (only with ``logp_ref``)

and a token of response i (n_i tokens) has the weight w of the aggregation:

    token-mean                w = 1 / (unmasked tokens in the batch)   PPO, DAPO, CISPO
    seq-mean-token-mean       w = 1 / (B * n_i)                        GRPO, GSPO, SAPO, GMPO
    seq-mean-token-sum-norm   w = 1 / (B * max_len)                    Dr. GRPO

GSPO clips one ratio per response instead (the geometric mean of its tokens' ratios); CISPO
multiplies ``logp_new`` by the clipped ratio held constant, so no token's gradient is
switched off; SAPO replaces the clip by a soft gate; GMPO clips each ``log r`` to
``[-eps_low, eps_high]`` (eps bounds ``log r``, not ``r``) and takes the geometric mean per
response.  The file reads top to bottom:

1. **The textbook**: :func:`policy_loss`, :func:`policy_loss_grad` and :func:`token_breakdown`
   (each token's ratio, clip decision, term, weight and gradient, e.g. for a heat map).
2. **The objectives**: one :class:`ObjectiveSpec` each in :data:`SPECS` (its parts function,
   default aggregation and band, label, formula, paper and the trainer lines it follows), in
   :mod:`llm_objectives` with the sources each follows and where the libraries differ;
   re-exported here.
3. **Around the loss**: the clip fraction as CleanRL, verl and TRL each log it
   (:func:`clip_fraction_cleanrl`, :func:`clip_fraction_verl`, :func:`clip_ratio_trl`).
   Re-exported from their own modules: :func:`group_advantages` (GRPO's and Dr. GRPO's) and
   :func:`gae` (PPO's, from a value model) from :mod:`llm_advantages`; the rollout engine's
   corrections :func:`rollout_weights` and :func:`off_policy_keep` (passed to the loss as
   ``rollout_weights=`` and ``keep=``) and :data:`ROLLOUT_MODES` from :mod:`rollout_correction`.
4. **Float64's limits**, decided by :mod:`ppo_clip`'s rules: never NaN; a token with
   ``A == 0`` adds exactly 0 even where its ratio overflowed; an overflowed ratio with
   ``A < 0`` (or an overflowed ``exp(d)`` in k3) makes the loss ``+inf``; any other loss or
   gradient entry that float64 overflowed on the way to is the exact value rounded once
   (:mod:`ppo_clip_exact`'s arithmetic, as :mod:`ppo_clip`'s), and so is a response's sum of
   log-ratios wherever float64's could have lost digits, overflowing or cancelling
   (:func:`ppo_clip_exact.row_sums`).  Underflow is float64's: a term ``(r*A) * weight`` (TRL's
   order) whose ``r*A`` falls below 2.2e-308 loses digits, to 0 below 5e-324, though the
   rollout weight would bring it back into range (``r = 1.3e-300``, ``A = 1e-300``, weight
   ``1e300``: a loss of 0.0 for -1.3e-300); every order of the three factors flushes some batch.
   Finite log-probabilities further apart than float64 reaches give ``log r = +-inf`` (as in
   :mod:`ppo_clip`), and ``d = +-inf`` makes k3 ``+inf``.
   SAPO's gate is bounded (``4 / tau``) and its gradient vanishes as ``tau*r`` overflows; GMPO's
   ratio overflows only with ``A < 0`` (or ``eps_high`` above 709: the loss is then ``-inf``).

Bad input raises a ``TypeError`` or ``ValueError`` naming the argument (:mod:`llm_clip_inputs`).
Where the contract is silent this module does what TRL does: the KL term is added per token and
aggregated with the objective's own aggregation, for GSPO and CISPO too
(TRL 1.16.0 ``grpo_trainer.py`` L3149-3150; its default ``use_bias_correction_kl`` also
multiplies k3 by the token's ratio r, L3104-3105: here, as with it False, it is not); an
aggregation given to GSPO is applied to its per-token loss (TRL 1.16.0 L3152-3184; verl
``b178a3c`` ignores it and always uses seq-mean-token-mean, ``core_algos.py`` L1312).
SAPO's ``tau_pos``/``tau_neg`` are refused by the other objectives, and ``eps_low``/``eps_high``
by SAPO, which has no band: a setting never silently does nothing.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip_inputs as checks
from llm_advantages import gae, group_advantages
from llm_clip_inputs import NO_ADVANTAGES, Batch
from llm_objectives import (
    AGGREGATIONS,
    DAPO_EPS_HIGH,
    DEFAULT_EPS,
    OBJECTIVES,
    SPECS,
    Aggregation,
    Objective,
    ObjectiveSpec,
    Parts,
    checked,
)
from ppo_clip_exact import exact_loss, gradient_entry, row_sums, times_advantage
from ppo_clip_exact import float64_limits_handled_below as _float64_limits_handled_below
from rollout_correction import ROLLOUT_MODES, off_policy_keep, rollout_weights

if TYPE_CHECKING:  # Python 3.10's typing has no Unpack; annotations are strings at run time
    from typing_extensions import Unpack

__all__ = [
    "AGGREGATIONS",
    "DAPO_EPS_HIGH",
    "DEFAULT_EPS",
    "OBJECTIVES",
    "ROLLOUT_MODES",
    "SPECS",
    "ObjectiveSpec",
    "Options",
    "TokenBreakdown",
    "clip_fraction_cleanrl",
    "clip_fraction_verl",
    "clip_ratio_trl",
    "gae",
    "group_advantages",
    "off_policy_keep",
    "policy_loss",
    "policy_loss_grad",
    "rollout_weights",
    "token_breakdown",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

# --------------------------------------------------------------------------
# 1. The textbook: the loss, its gradient, and every per-token quantity
# --------------------------------------------------------------------------


class Options(TypedDict, total=False):
    """The keyword arguments of :func:`policy_loss`, :func:`policy_loss_grad` and
    :func:`token_breakdown`; ``objective`` is required.

    ``objective``: one of :data:`OBJECTIVES`.  The band is ``[1 - eps_low, 1 + eps_high]`` on
    the ratio (GMPO: ``[-eps_low, eps_high]`` on ``log r``; SAPO has none and refuses them):
    ``eps_low`` in [0, 1], ``eps_high`` any finite number >= 0 (defaults: the objective's
    entry in :data:`SPECS`; 0.2, ``eps_high`` = ``eps_low``, DAPO 0.28, GMPO 0.4).
    ``aggregation``: one of :data:`AGGREGATIONS` (default: the objective's own); ``max_len``, a
    whole number no less than the longest response, is required by ``seq-mean-token-sum-norm``
    and ignored otherwise.
    ``kl_coef``: beta >= 0, which needs ``logp_ref`` unless 0.  ``tau_pos``, ``tau_neg``: SAPO's
    temperatures for ``A > 0`` and ``A <= 0`` (default 1.0 and 1.05; refused by the others).
    ``rollout_weights``: (B, 1) or (B, T), at least 0 (:func:`rollout_weights`), multiplies each
    token's policy term before the aggregation, as TRL multiplies ``per_token_loss``
    (``grpo_trainer.py`` 1.16.0 L3146-3147); the KL term is not weighted (TRL 1.16's default
    ``use_bias_correction_kl`` multiplies it by the token's ratio r instead, L3104-3105; this
    module adds k3 as TRL does with it False).  ``keep``: (B,)
    booleans (:func:`off_policy_keep`): a dropped response's policy terms are 0, its tokens still
    count in the aggregation's denominators (TRL 1.16.0 L3140-3141).  A weight of 0 makes a
    term exactly 0, even an overflowed one.
    """

    objective: Objective
    eps_low: float | None
    eps_high: float | None
    aggregation: Aggregation | None
    max_len: int | None
    logp_ref: ArrayLike | None
    kl_coef: float
    tau_pos: float | None
    tau_neg: float | None
    rollout_weights: ArrayLike | None
    keep: ArrayLike | None


def policy_loss(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, mask: ArrayLike,
    **options: Unpack[Options],
) -> float:  # fmt: skip
    """The loss to minimize, ``-sum(w * term)`` over unmasked tokens (module docstring).

    ``+inf`` where a ratio overflows with ``A < 0`` or k3 overflows; never NaN.  Arguments
    (:class:`Options`) and errors as in :func:`token_breakdown`.
    """
    return token_breakdown(logp_new, logp_old, advantages, mask, **options).loss


def policy_loss_grad(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, mask: ArrayLike,
    **options: Unpack[Options],
) -> FloatArray:  # fmt: skip
    """``d loss / d logp_new`` as autograd computes it where its arithmetic stays finite (where
    autograd would form ``inf * 0``, e.g. ``A == 0`` with an overflowed ratio, and give NaN, this
    is the limit, 0), shape (B, T), 0 on padding (CISPO: its weight ``clip(r)`` held constant, so
    not the derivative of the returned loss; see :attr:`TokenBreakdown.grad`)."""
    return token_breakdown(logp_new, logp_old, advantages, mask, **options).grad


@dataclass(frozen=True, eq=False)
class TokenBreakdown:
    """Every per-token quantity of one objective on one batch: arrays (B, T), 0 on padding.

    ``ratio`` is what the clip sees (GSPO: the response's ``s_i``; GMPO: the response's ratio,
    from the clipped log-ratios); ``is_clipped`` where the clip switches the policy gradient
    off (strict, as in :mod:`ppo_clip`; CISPO: where its weight ``clip(r)`` differs from ``r``,
    the gradient kept; SAPO: nowhere); ``term`` the policy term (CISPO:
    ``clip(r)*A*logp_new``; SAPO: ``f(r)*A``); ``kl`` k3 (0 without ``logp_ref``); ``weight`` the
    aggregation's ``w``; ``grad`` is ``d loss / d logp_new`` as autograd gives it where finite
    (CISPO: with the detached weight ``clip(r)`` a constant, as in verl and TRL); ``loss`` is
    ``-sum(weight * (rollout_weight * term - kl_coef * kl))`` summed as the libraries sum, with
    ``rollout_weight`` the ``rollout_weights`` times ``keep`` (1 where neither is given).
    """

    mask: BoolArray
    ratio: FloatArray
    is_clipped: BoolArray
    term: FloatArray
    kl: FloatArray
    weight: FloatArray
    grad: FloatArray
    loss: float
    rollout_weight: FloatArray


def token_breakdown(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike, mask: ArrayLike,
    **options: Unpack[Options],
) -> TokenBreakdown:  # fmt: skip
    """Each token's ratio, clip decision, term, weight and gradient, and the loss.

    ``logp_new``, ``logp_old``, ``mask``, ``logp_ref``: (B, T), ``mask`` boolean (or 0/1),
    unmasked entries finite.  ``advantages``: (B,) or (B, 1), one per response, or (B, T), used
    as given (never normalized); GSPO and GMPO need the same value on each response's tokens.
    The keyword arguments are :class:`Options`.
    """
    b = checked(logp_new, logp_old, advantages, mask, **options)
    rollout = np.where(b.mask, 1.0, 0.0) if b.rollout_weight is None else b.rollout_weight
    spec = SPECS[b.objective]
    grad_weight = rollout
    if spec.per_response and b.rollout_weight is not None:
        # a response's ratio moves with each of its tokens: their weights reach it as their mean
        grad_weight = np.broadcast_to(row_sums(rollout, b.mask, b.lengths)[:, None], rollout.shape)
    with _float64_limits_handled_below():
        parts = spec.parts(b)
        term = times_advantage(math.prod(parts.term_factors), b.advantages)
        kl = _k3(b.ref_gap)
        slope = -times_advantage(parts.grad_factor, b.advantages)  # -(d term / d logp_new)
        per_token = -times_advantage(term, rollout)  # the loss is sum(w * per_token)
        slope = times_advantage(slope, grad_weight)
        if b.kl_coef:  # skipped at 0: 0 * inf would be NaN
            per_token = per_token + b.kl_coef * kl
            slope = slope - b.kl_coef * np.expm1(b.ref_gap)  # d k3 / d logp_new = 1 - exp(d)
        grad = np.where(b.mask, slope / b.denominator[:, None], 0.0)  # w = 1 / denominator
    if not np.isfinite(grad).all():  # float64 overflowed on the way: part 4 decides
        _gradient_beyond_float64(grad, parts, b, grad_weight)
    loss = _aggregate(per_token, b)
    if not math.isfinite(loss):  # part 4: a true infinity, else the exact sum rounded once
        m = b.mask
        divisors = np.broadcast_to(b.denominator[:, None], m.shape)[m]
        factors = [f[m] for f in (*parts.term_factors, rollout)]
        advantage = np.where(rollout == 0, 0.0, b.advantages)[m]  # a weight of 0: no policy part
        loss = exact_loss(factors, advantage, divisors, kl=kl[m], kl_coef=b.kl_coef)
    weight = np.where(b.mask, 1.0 / b.denominator[:, None], 0.0)
    ratio = np.where(b.mask, parts.ratio, 0.0)
    return TokenBreakdown(
        b.mask, ratio, parts.is_clipped & b.mask, term, kl, weight, grad + 0.0, loss + 0.0, rollout
    )


def _k3(d: FloatArray) -> FloatArray:
    """``exp(d) - d - 1`` (0 on padding, where d = 0): ``+inf`` where ``d`` itself overflowed,
    either way (``inf - inf`` is never formed)."""
    return np.where(np.isposinf(d), np.inf, np.expm1(d) - d)


def _aggregate(per_token: FloatArray, b: Batch) -> float:
    """``sum(w * per_token)`` as TRL sums it (``grpo_trainer.py`` f2cd577 L3125, L3135, L3141).

    seq-mean-token-mean: each response's sum over n_i, then the mean over responses; the
    others: the sum over unmasked tokens over one number.  With one token per response each
    is ``ppo_clip_loss``'s ``-sum(terms) / N`` bit for bit (sum-norm with ``max_len=1``).
    """
    with _float64_limits_handled_below():
        if b.aggregation == "seq-mean-token-mean":
            return float((per_token.sum(axis=1) / b.lengths).mean())
        return float(per_token[b.mask].sum() / b.denominator[0])


# --------------------------------------------------------------------------
# 3. Around the loss: the three clip fractions (2, the objectives, is llm_objectives; the
#    advantages are llm_advantages; the rollout engine's corrections rollout_correction)
# --------------------------------------------------------------------------


def clip_fraction_cleanrl(
    logp_new: ArrayLike, logp_old: ArrayLike, mask: ArrayLike, *, eps: float = DEFAULT_EPS
) -> dict[str, float]:
    """CleanRL's ``losses/clipfrac``: the share of tokens with ``|r - 1| > eps``, any A.

    ``cleanrl/ppo.py`` L258: ``((ratio - 1.0).abs() > args.clip_coef).float().mean()``, here
    over the unmasked tokens as one minibatch.  Sign-blind: a token that moved the
    unfavourable way counts, although its gradient flows.
    """
    b = checked(logp_new, logp_old, NO_ADVANTAGES, mask, objective="ppo")
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

    PPO, GRPO, Dr. GRPO, DAPO (``compute_policy_loss_vanilla``, ``core_algos.py`` b178a3c):
    ``pg_losses2 > pg_losses1``, i.e. ``-A*clip(r) > -A*r`` (L1227) on
    ``r = exp(clamp(log r, -20, 20))`` (L1212), and the lower fraction ``A < 0`` with
    ``max(pg_losses1, pg_losses2) > -A*dual_clip`` (L1231, ``clip_ratio_c``).  GSPO: the same
    comparison on each token's sequence ratio, its log clamped at 10 (L1298, L1317), so a
    clipped response counts once per token.  CISPO:
    ``r != clip(r)``, sign-blind (L1761).  No lower fraction for GSPO and CISPO (0).  verl 0.9.1:
    SAPO logs 0 for both (``core_algos.py`` L1693-1694); GMPO counts ``log r`` outside
    ``[-eps_low, eps_high]``, either side, with ``A > 0`` and (lower) ``A < 0`` (L2003-2005).
    An objective verl does not have (``in_verl`` False in its entry) logs nothing: ``{}``.
    """
    options = {"objective": objective, "eps_low": eps_low, "eps_high": eps_high}
    b = checked(logp_new, logp_old, advantages, mask, aggregation="token-mean", **options)
    cap = checks.checked_dual_clip(dual_clip)
    if not SPECS[b.objective].in_verl:
        return {}
    kind, a = SPECS[b.objective].clip_kind, b.advantages
    if kind in ("soft", "log-ratio"):  # a soft gate has no band: nothing lies outside it
        outside = (kind == "log-ratio") & ((b.log_ratio < -b.eps_low) | (b.log_ratio > b.eps_high))
        upper, lower = outside & (a > 0), outside & (a < 0)
        return {
            "actor/pg_clipfrac": _token_mean(upper, b),
            "actor/pg_clipfrac_lower": _token_mean(lower, b),
        }
    with _float64_limits_handled_below():
        if kind == "sequence":
            log_s = row_sums(b.logp_new, b.mask, b.lengths, minus=b.logp_old)
            ratio = np.exp(np.minimum(log_s, 10.0))[:, None] * np.ones_like(a)
        else:
            ratio = np.exp(np.clip(b.log_ratio, -20.0, 20.0))
        if kind == "detached":
            outside = ratio != np.clip(ratio, b.lower, b.upper)
            return {"actor/pg_clipfrac": _token_mean(outside, b), "actor/pg_clipfrac_lower": 0.0}
        pg_losses1, pg_losses2 = -a * ratio, -a * np.clip(ratio, b.lower, b.upper)
        lower = 0.0
        if kind == "token" and cap is not None:
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
    ``region = low or high`` (``grpo_trainer.py`` f2cd577 L3244-3246): their token means, and the
    smallest share of low-clipped and largest share of high-clipped tokens in one response
    (``low_min``, ``high_max``, L3250-3253).  GSPO (``importance_sampling_level="sequence"``):
    one decision per response, means over responses (L3224-3233).  CISPO logs only
    ``cispo_clip_ratio``: ``r > 1 + eps_high and A > 0`` (L3255, TRL's ``epsilon_high`` being
    the cap ``1 + eps_high``).  TRL's GRPOTrainer has no PPO; ``"ppo"`` is read as token-level.
    It logs no clip metric for SAPO and has no GMPO: ``{}`` for both (TRL 1.16.0 L3276-3290).
    """
    options = {"objective": objective, "eps_low": eps_low, "eps_high": eps_high}
    b = checked(logp_new, logp_old, advantages, mask, aggregation="token-mean", **options)
    spec = SPECS[b.objective]
    if not spec.in_trl or spec.clip_kind == "soft":
        return {}
    with _float64_limits_handled_below():
        a, ratio = b.advantages, spec.parts(b).ratio
    if spec.clip_kind == "detached":
        return {f"{spec.name}_clip_ratio": _token_mean((ratio > b.upper) & (a > 0), b)}
    low, high = (ratio < b.lower) & (a < 0), (ratio > b.upper) & (a > 0)
    per_response = [(x & b.mask).sum(axis=1) / b.lengths for x in (low, high, low | high)]
    if spec.clip_kind == "sequence":  # one decision per response: its share is 0 or 1
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


def _gradient_beyond_float64(grad: FloatArray, parts: Parts, b: Batch, rollout: FloatArray) -> None:
    """Decide, in place, the gradient entries float64 left not finite
    (:func:`ppo_clip_exact.gradient_entry`: ``-(g*A*rollout + kl_coef*expm1(d)) / D``)."""
    for i, t in zip(*np.nonzero(~np.isfinite(grad)), strict=True):
        with _float64_limits_handled_below():
            exp_d = float(np.expm1(b.ref_gap[i, t])) if b.kl_coef else 0.0  # exp(d) - 1
        g, a = float(parts.grad_factor[i, t]), float(b.advantages[i, t])
        at, n = f"logp_new[{i}, {t}]", int(b.denominator[i])
        grad[i, t] = gradient_entry(g, a, n, b.kl_coef, exp_d, at, float(rollout[i, t]))
