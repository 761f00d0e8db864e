"""PPO's clip as LLM trainers apply it: per-token ratios, masks, aggregations, eight objectives.

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
   default aggregation and band, label, formula, paper and the trainer lines it follows).
   Sources, read at these commits: TRL ``f2cd577`` (``trl/trainer/grpo_trainer.py``), verl
   ``b178a3c`` (``verl/trainer/ppo/core_algos.py``), CleanRL ``fe8d8a0`` (``cleanrl/ppo.py``),
   the RLHF book ``a66b0bf`` (``book/chapters/06-policy-gradients.md``); SAPO and GMPO from
   the packages TRL 1.16.0 and verl 0.9.1 (PyPI wheels).  Where the libraries differ:

   * PPO follows verl's ``compute_policy_loss_vanilla`` without its log-ratio clamp to
     [-20, 20] (L1212) and its dual clip ``clip_ratio_c = 3`` for ``A < 0`` (L1229-1235; see
     ``ppo_clip.clip_breakdown``).  GRPO's A is usually :func:`group_advantages`.
   * Dr. GRPO: advantages not divided by the group's std (``scale_by_std=False``); verl's
     ``seq-mean-token-sum-norm`` divides by ``max_len`` only, not by B (L1076).
   * DAPO: the normalizer is the batch's token count; its dynamic sampling and overlong
     shaping are outside the loss.  GSPO's paper uses tiny ranges: ``eps_low=3e-4,
     eps_high=4e-4``.
   * CISPO: TRL clips one side only, at ``epsilon_high`` itself (``clamp(coef_1,
     max=epsilon_high)``, L3081; recommended 5.0): here ``eps_low=1, eps_high=4``.
   * SAPO follows TRL (no clamp of ``log r``); verl clamps ``log r`` to [-20, 20] first
     (L1666), which zeroes the (already vanishing) gradient beyond, and divides by
     ``n_i + 1e-8`` (``agg_loss`` L1196).  Both always aggregate seq-mean-token-mean.
   * GMPO follows verl, but divides by ``n_i``, not ``n_i + 1e-8`` (L1984, L1987), and applies an
     ``aggregation`` given to it to its per-token loss, as for GSPO (verl always takes the mean
     over responses, L2000).  TRL 1.16.0 has no GMPO.
   * Run on CPU on random masked batches (a scratch check, not a test): verl 0.9.1's own
     SAPO and GMPO functions agree with this module's loss and autograd gradient to 7e-8
     relative (its ``+ 1e-8`` denominators), TRL 1.16.0's SAPO lines to 3e-15.

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
   (:mod:`ppo_clip_exact`'s arithmetic, as :mod:`ppo_clip`'s).
   Finite log-probabilities further apart than float64 reaches give ``log r = +-inf`` (as in
   :mod:`ppo_clip`), and ``d = +-inf`` makes k3 ``+inf``.
   SAPO's gate is bounded (``4 / tau``) and its gradient vanishes as ``r`` overflows; GMPO's
   ratio overflows only with ``A < 0`` (or ``eps_high`` above 709: the loss is then ``-inf``).

Bad input raises a ``TypeError`` or ``ValueError`` naming the argument (:mod:`llm_clip_inputs`).
Where the contract is silent this module does what TRL does: the KL term is added per token and
aggregated with the objective's own aggregation, for GSPO and CISPO too
(``grpo_trainer.py`` L3121; TRL 1.16.0's default ``use_bias_correction_kl`` also multiplies
k3 by the token's ratio r, L3104-3105: here, as with it False, it is not); an aggregation given
to GSPO is applied to its per-token loss (TRL L3124-3142; verl ignores it and always uses
seq-mean-token-mean, ``core_algos.py`` L1312).
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, TypedDict, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip_inputs as checks
from llm_advantages import gae, group_advantages
from llm_clip_inputs import NO_ADVANTAGES, Batch, checked_batch, checked_choice
from ppo_clip_exact import exact_loss, gradient_entry, row_sums, times_advantage
from ppo_clip_exact import float64_limits_handled_below as _float64_limits_handled_below
from rollout_correction import ROLLOUT_MODES, off_policy_keep, rollout_weights

if TYPE_CHECKING:  # Python 3.10's typing has no Unpack; annotations are strings at run time
    from typing_extensions import Unpack

__all__ = [
    "AGGREGATIONS",
    "DAPO_EPS_HIGH",
    "DEFAULT_AGGREGATION",
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
Objective = str  #: a key of :data:`SPECS`
Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]

AGGREGATIONS: tuple[Aggregation, ...] = get_args(Aggregation)
#: ``eps_low``'s default, unless the objective's entry says otherwise.
DEFAULT_EPS = 0.2


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
    count in the aggregation's denominators (TRL L3140-3141).  A weight of 0 makes a term exactly
    0, even an overflowed one.
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
    """``d loss / d logp_new`` as autograd computes it, shape (B, T), 0 on padding (CISPO: its
    weight ``clip(r)`` held constant, so not the derivative of the returned loss; see
    :attr:`TokenBreakdown.grad`)."""
    return token_breakdown(logp_new, logp_old, advantages, mask, **options).grad


@dataclass(frozen=True, eq=False)
class TokenBreakdown:
    """Every per-token quantity of one objective on one batch: arrays (B, T), 0 on padding.

    ``ratio`` is what the clip sees (GSPO: the response's ``s_i``; GMPO: the response's ratio,
    from the clipped log-ratios); ``is_clipped`` where the clip switches the policy gradient
    off (strict, as in :mod:`ppo_clip`; CISPO: where its weight ``clip(r)`` differs from ``r``,
    the gradient kept; SAPO: nowhere); ``term`` the policy term (CISPO:
    ``clip(r)*A*logp_new``; SAPO: ``f(r)*A``); ``kl`` k3 (0 without ``logp_ref``); ``weight`` the
    aggregation's ``w``; ``grad`` is ``d loss / d logp_new`` as autograd gives it (CISPO: with
    the detached weight ``clip(r)`` a constant, as in verl and TRL); ``loss`` is
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
    b = _checked(logp_new, logp_old, advantages, mask, **options)
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
# 2. The objectives: one registry entry each, and what their terms are made of
# --------------------------------------------------------------------------


class _Parts(NamedTuple):
    """One objective's per-token pieces: ``term = product(term_factors) * A`` and
    ``d term / d logp_new = grad_factor * A`` (GSPO's, GMPO's: what reaches each token)."""

    ratio: FloatArray
    is_clipped: BoolArray
    term_factors: tuple[FloatArray, ...]
    grad_factor: FloatArray


@dataclass(frozen=True)
class ObjectiveSpec:
    """Everything about one objective, read by this module, its tests, the widgets and
    notebook 7: adding an objective is its ``parts`` function and one entry in :data:`SPECS`
    (plus its formula in the independent reference, ``tests/llm_reference.py``).

    ``parts`` computes each token's term and gradient (:class:`_Parts`); ``aggregation`` is its
    default; ``eps_low``/``eps_high`` the default band (``eps_high`` None: ``eps_low``'s
    value), on the ratio (``band="ratio"``: ``[1 - eps_low, 1 + eps_high]``), on ``log r``
    (``"log-ratio"``: ``[-eps_low, eps_high]``) or none (``None``: ``eps_*`` refused);
    ``tau`` SAPO's default ``(tau_pos, tau_neg)`` (None: ``tau_*`` refused); ``per_response``:
    one advantage per response; ``detached_weight``: the ratio enters as a weight held constant
    (stop-gradient, CISPO), so a token outside the band keeps its push.  ``label``, ``formula``,
    ``paper`` (arXiv id) and ``follows`` (the trainer lines, version or commit first) are for
    tables; ``in_trl``: TRL's ``GRPOTrainer`` has this loss (``clip_ratio_trl`` reports ``{}``
    otherwise; PPO, not in TRL, is read there as token-level).  What verl logs as its clip
    fraction follows from ``band``, ``per_response`` and ``detached_weight``
    (:meth:`clip_kind`).
    """

    name: str
    label: str
    parts: Callable[[Batch], _Parts]
    aggregation: Aggregation
    formula: str
    paper: str
    follows: str
    eps_low: float | None = DEFAULT_EPS
    eps_high: float | None = None
    band: Literal["ratio", "log-ratio"] | None = "ratio"
    tau: tuple[float, float] | None = None
    per_response: bool = False
    detached_weight: bool = False
    in_trl: bool = True

    @property
    def clip_kind(self) -> Literal["token", "sequence", "detached", "soft", "log-ratio"]:
        """How the objective limits a ratio: a hard clip per token or per response, a detached
        clipped weight, a soft gate (no band) or a clip of ``log r``."""
        if self.band is None:
            return "soft"
        if self.band == "log-ratio":
            return "log-ratio"
        if self.detached_weight:
            return "detached"
        return "sequence" if self.per_response else "token"

    @property
    def default_band(self) -> tuple[float, float] | None:
        """``(eps_low, eps_high)`` when neither is given; None for an objective without a band."""
        if self.band is None:
            return None
        return self.eps_low, self.eps_low if self.eps_high is None else self.eps_high


def _token_clip(b: Batch) -> _Parts:
    """PPO's clipped term on each token's ratio ``r = exp(logp_new - logp_old)``: PPO, GRPO,
    Dr. GRPO, DAPO differ only in their aggregation and band (:data:`SPECS`)."""
    return _clipped(np.exp(b.log_ratio), b)


def _gspo(b: Batch) -> _Parts:
    """GSPO: PPO's clip on ``s_i = exp((1/n_i) sum_t (logp_new - logp_old))``, one per response.

    Since ``d s_i / d logp_new_t = s_i / n_i``, every token of an unclipped response gets
    ``-w * s_i * A_i``: the gradient of verl's GSPO-token form too (``core_algos.py`` L1297).
    """
    log_s = row_sums(b.logp_new, b.mask, b.lengths, minus=b.logp_old)
    sequence_ratio = np.exp(log_s)[:, None] * np.ones_like(b.log_ratio)  # s_i
    return _clipped(sequence_ratio, b)


def _cispo(b: Batch) -> _Parts:
    """CISPO: ``term = sg[clip(r)] * A * logp_new``; each token's gradient ``-w * clip(r) * A``
    is never 0 unless A is (``is_clipped``: where the weight differs from ``r``)."""
    ratio = np.exp(b.log_ratio)
    weight = np.clip(ratio, b.lower, b.upper)  # sg[clip(r)]: a constant to the gradient
    return _Parts(ratio, weight != ratio, (weight, b.logp_new), weight)


def _sapo(b: Batch) -> _Parts:
    """SAPO's soft gate: ``term = f(r) * A``, ``f(r) = sigmoid(tau * (r - 1)) * 4 / tau``.

    ``f(1) = 2 / tau`` and ``f'(1) = 1``: near ``r = 1`` it is the unclipped surrogate; far
    from 1 the gradient ``r * f'(r) * A = 4 * r * s * (1 - s) * A`` (``s`` the sigmoid) fades
    but is 0 only where float64 underflows.  Sigmoids as ``exp(-logaddexp(0, -x))``, so an
    overflowed ratio gives ``f = 4 / tau`` and a gradient of 0, never NaN.  No token is clipped.
    For ``tau`` far below 1 the loss's float64 value loses digits: each term carries ``2/tau * A``,
    which cancels between answers whose advantages sum to 0 (the gradient does not).
    """
    ratio = np.exp(b.log_ratio)
    tau = np.where(b.advantages > 0, b.tau_pos, b.tau_neg)
    x = tau * (ratio - 1.0)
    gate = np.exp(-np.logaddexp(0.0, -x))  # sigmoid(x)
    # r * sigmoid(x) * sigmoid(-x), the ratio taken inside the exp: 0, not inf * 0, at r = inf
    slope = 4.0 * gate * np.exp(b.log_ratio - np.logaddexp(0.0, x))
    slope[np.isposinf(b.log_ratio)] = 0.0  # log r itself overflowed: inf - inf above
    return _Parts(ratio, np.zeros_like(b.mask), (gate * (4.0 / tau),), slope)


def _gmpo(b: Batch) -> _Parts:
    """GMPO: each token's ``log r`` clipped in log space on the pessimistic side, then
    ``ratio_i = exp(mean of the clipped log-ratios)`` per response, ``term = ratio_i * A_i``.

    ``sgn(A) * min(sgn(A) * log r, sgn(A) * clamp(log r, -eps_low, eps_high))`` is
    ``min(log r, eps_high)`` for ``A > 0``, ``max(log r, -eps_low)`` for ``A < 0`` and 0 for
    ``A == 0`` (its ratio is 1).  A token clipped there passes no gradient; the others get
    ``-w * ratio_i * A_i`` (``d ratio_i / d logp_new_t = ratio_i / n_i``).
    """
    a, log_ratio = b.advantages, b.log_ratio
    low, high = np.where(a < 0, -b.eps_low, -np.inf), np.where(a > 0, b.eps_high, np.inf)
    clipped = (log_ratio < low) | (log_ratio > high)  # the pessimistic side only
    kept = np.where(a == 0, 0.0, np.clip(log_ratio, low, high))
    ratio = np.exp(row_sums(kept, b.mask, b.lengths))[:, None] * np.ones_like(log_ratio)
    return _Parts(ratio, clipped, (ratio,), np.where(clipped, 0.0, ratio))


def _clipped(ratio: FloatArray, b: Batch) -> _Parts:
    """PPO's clipped term on ``ratio`` (a token's or a response's)."""
    advantages = b.advantages
    # min(r*A, clip(r)*A) = A * min(r, upper) for A > 0 and A * max(r, lower) for A < 0
    kept = np.where(advantages > 0, np.minimum(ratio, b.upper), np.maximum(ratio, b.lower))
    clipped = ((advantages > 0) & (ratio > b.upper)) | ((advantages < 0) & (ratio < b.lower))
    return _Parts(ratio, clipped, (kept,), np.where(clipped, 0.0, ratio))


_CLIPPED_TERM = "min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A)"
_TRL, _VERL = "TRL f2cd577 grpo_trainer.py", "verl b178a3c core_algos.py"
_TRL_116, _VERL_091 = "TRL 1.16.0 grpo_trainer.py", "verl 0.9.1 core_algos.py"

#: The objectives, in the order of every menu and table.  Where verl and TRL differ, ``follows``
#: names the one followed; the module docstring's part 2 says what the other does.
SPECS: dict[str, ObjectiveSpec] = {spec.name: spec for spec in (
    ObjectiveSpec("ppo", "PPO", _token_clip, "token-mean", _CLIPPED_TERM, "1707.06347",
                  f"{_VERL} L1216-1227 (compute_policy_loss_vanilla), L1055-1058 (token-mean)"),
    ObjectiveSpec("grpo", "GRPO", _token_clip, "seq-mean-token-mean", _CLIPPED_TERM, "2402.03300",
                  f'{_TRL} L3084-3091, L3125 (loss_type="grpo")'),
    ObjectiveSpec("dr_grpo", "Dr. GRPO", _token_clip, "seq-mean-token-sum-norm", _CLIPPED_TERM,
                  "2503.20783", f'{_TRL} L3135 (loss_type="dr_grpo", max_completion_length)'),
    ObjectiveSpec("dapo", "DAPO", _token_clip, "token-mean", _CLIPPED_TERM, "2503.14476",
                  f'{_TRL} L3139-3141 (loss_type="dapo")', eps_high=0.28),
    ObjectiveSpec("gspo", "GSPO", _gspo, "seq-mean-token-mean",
                  "min(s·A, clip(s, 1 − ε_low, 1 + ε_high)·A), s = exp(mean log r) per answer",
                  "2507.18071", f'{_TRL} L3058 (importance_sampling_level="sequence")',
                  per_response=True),
    ObjectiveSpec("cispo", "CISPO", _cispo, "token-mean",
                  "sg[clip(r, 1 − ε_low, 1 + ε_high)]·A·log π_new", "2506.13585",
                  f"{_VERL} L1753-1758 (compute_policy_loss_cispo)", detached_weight=True),
    ObjectiveSpec("sapo", "SAPO", _sapo, "seq-mean-token-mean",
                  "f(r)·A, f(r) = σ(τ(r − 1))·4/τ, τ = τ_pos if A > 0 else τ_neg", "2511.20347",
                  f'{_TRL_116} L3121-3124, L3153-3154 (loss_type="sapo"); {_VERL_091} L1623-1703',
                  eps_low=None, band=None, tau=(1.0, 1.05)),
    ObjectiveSpec("gmpo", "GMPO", _gmpo, "seq-mean-token-mean",
                  "exp(mean of clip(log r, −ε_low, ε_high), pessimistic side)·A per answer",
                  "2507.20673", f"{_VERL_091} L1929-2011 (compute_policy_loss_geo_mean)",
                  eps_low=0.4, band="log-ratio", per_response=True, in_trl=False),
)}  # fmt: skip
OBJECTIVES: tuple[str, ...] = tuple(SPECS)
#: Each objective's own aggregation, used when ``aggregation`` is None.
DEFAULT_AGGREGATION: dict[str, Aggregation] = {k: s.aggregation for k, s in SPECS.items()}
#: DAPO's clip-higher (arXiv 2503.14476): its ``eps_high`` defaults to 0.28.
DAPO_EPS_HIGH = SPECS["dapo"].eps_high


# --------------------------------------------------------------------------
# 3. Around the loss: the three clip fractions (the advantages: llm_advantages; the rollout
#    engine's corrections: rollout_correction)
# --------------------------------------------------------------------------


def clip_fraction_cleanrl(
    logp_new: ArrayLike, logp_old: ArrayLike, mask: ArrayLike, *, eps: float = DEFAULT_EPS
) -> dict[str, float]:
    """CleanRL's ``losses/clipfrac``: the share of tokens with ``|r - 1| > eps``, any A.

    ``cleanrl/ppo.py`` L258: ``((ratio - 1.0).abs() > args.clip_coef).float().mean()``, here
    over the unmasked tokens as one minibatch.  Sign-blind: a token that moved the
    unfavourable way counts, although its gradient flows.
    """
    b = _checked(logp_new, logp_old, NO_ADVANTAGES, mask, objective="ppo")
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
    ``r != clip(r)``, sign-blind (L1761).  No lower fraction for GSPO and CISPO (0).  verl 0.9.1:
    SAPO logs 0 for both (``core_algos.py`` L1693-1694); GMPO counts ``log r`` outside
    ``[-eps_low, eps_high]``, either side, with ``A > 0`` and (lower) ``A < 0`` (L2003-2005).
    """
    options = {"objective": objective, "eps_low": eps_low, "eps_high": eps_high}
    b = _checked(logp_new, logp_old, advantages, mask, aggregation="token-mean", **options)
    cap = checks.checked_dual_clip(dual_clip)
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
    ``region = low or high`` (``grpo_trainer.py`` L3244-3246): their token means, and the
    smallest share of low-clipped and largest share of high-clipped tokens in one response
    (``low_min``, ``high_max``, L3250-3253).  GSPO (``importance_sampling_level="sequence"``):
    one decision per response, means over responses (L3224-3233).  CISPO logs only
    ``cispo_clip_ratio``: ``r > 1 + eps_high and A > 0`` (L3255, TRL's ``epsilon_high`` being
    the cap ``1 + eps_high``).  TRL's GRPOTrainer has no PPO; ``"ppo"`` is read as token-level.
    It logs no clip metric for SAPO and has no GMPO: ``{}`` for both (TRL 1.16.0 L3276-3290).
    """
    options = {"objective": objective, "eps_low": eps_low, "eps_high": eps_high}
    b = _checked(logp_new, logp_old, advantages, mask, aggregation="token-mean", **options)
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


def _gradient_beyond_float64(
    grad: FloatArray, parts: _Parts, b: Batch, rollout: FloatArray
) -> None:
    """Decide, in place, the gradient entries float64 left not finite
    (:func:`ppo_clip_exact.gradient_entry`: ``-(g*A*rollout + kl_coef*expm1(d)) / D``)."""
    for i, t in zip(*np.nonzero(~np.isfinite(grad)), strict=True):
        with _float64_limits_handled_below():
            exp_d = float(np.expm1(b.ref_gap[i, t])) if b.kl_coef else 0.0  # exp(d) - 1
        g, a = float(parts.grad_factor[i, t]), float(b.advantages[i, t])
        at, n = f"logp_new[{i}, {t}]", int(b.denominator[i])
        grad[i, t] = gradient_entry(g, a, n, b.kl_coef, exp_d, at, float(rollout[i, t]))


def _checked(
    logp_new: object, logp_old: object, advantages: object, mask: object, *, objective: object,
    eps_low: object = None, eps_high: object = None, aggregation: object = None,
    max_len: object = None, logp_ref: object = None, kl_coef: object = 0.0,
    tau_pos: object = None, tau_neg: object = None, rollout_weights: object = None,
    keep: object = None,
) -> Batch:  # fmt: skip
    """The inputs checked (:mod:`llm_clip_inputs`), with the objective's defaults filled in.

    A band given to an objective without one (SAPO) and a temperature given to one without
    (all but SAPO) are refused rather than ignored, so that no setting silently does nothing.
    """
    spec = SPECS[checked_choice("objective", objective, OBJECTIVES)]
    for settings, values, default in (
        (("eps_low", "eps_high"), (eps_low, eps_high), spec.band),
        (("tau_pos", "tau_neg"), (tau_pos, tau_neg), spec.tau),
    ):
        for name, value in zip(settings, values, strict=True):
            if value is not None and default is None:
                raise ValueError(f"{name} does not apply to {spec.name}: leave it None")
    if eps_low is None:  # no band (SAPO): the unused edges at 1
        eps_low = 0.0 if spec.eps_low is None else spec.eps_low
    if eps_high is None:
        eps_high = eps_low if spec.eps_high is None else spec.eps_high
    tau = spec.tau or (1.0, 1.0)
    return checked_batch(
        logp_new, logp_old, advantages, mask, objective=spec.name,
        per_response=spec.per_response,
        eps_low=eps_low, eps_high=eps_high, aggregation=checked_choice(
            "aggregation", spec.aggregation if aggregation is None else aggregation, AGGREGATIONS
        ), max_len=max_len, logp_ref=logp_ref, kl_coef=kl_coef,
        tau=(tau[0] if tau_pos is None else tau_pos, tau[1] if tau_neg is None else tau_neg),
        rollout_weights=rollout_weights, keep=keep,
    )  # fmt: skip
