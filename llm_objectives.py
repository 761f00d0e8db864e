"""The objectives of :mod:`llm_clip`: one :class:`ObjectiveSpec` each in :data:`SPECS`.

Each entry holds the objective's parts function (each token's term and gradient, from a checked
:class:`llm_clip_inputs.Batch`), its default aggregation and band, what kind of limit it puts on
a ratio, its label, formula, paper and the trainer lines it follows; :func:`checked` checks a
call's inputs with the objective's defaults filled in.  :mod:`llm_clip` re-exports every public
name here and turns the parts into the loss, its gradient and the clip fractions (contract:
``docs/contract.md``, section "llm_clip").

Sources, read at these commits: TRL ``f2cd577`` (``trl/trainer/grpo_trainer.py``), verl
``b178a3c`` (``verl/trainer/ppo/core_algos.py``), CleanRL ``fe8d8a0`` (``cleanrl/ppo.py``),
the RLHF book ``a66b0bf`` (``book/chapters/06-policy-gradients.md``); SAPO and GMPO from
the packages TRL 1.16.0 and verl 0.9.1 (PyPI wheels).  Where the libraries differ:

* PPO follows verl's ``compute_policy_loss_vanilla`` without its log-ratio clamp to
  [-20, 20] (L1212) and its dual clip ``clip_ratio_c = 3`` for ``A < 0`` (L1229-1235; see
  ``ppo_clip.clip_breakdown``).  GRPO's A is usually :func:`llm_advantages.group_advantages`.
* Dr. GRPO: advantages not divided by the group's std (``scale_by_std=False``); verl's
  ``seq-mean-token-sum-norm`` divides by ``max_len`` only, not by B (L1076).
* DAPO: the normalizer is the batch's token count; its dynamic sampling and overlong
  shaping are outside the loss.  GSPO's paper uses tiny ranges: ``eps_low=3e-4,
  eps_high=4e-4``.
* CISPO: TRL clips one side only, at ``epsilon_high`` itself (``clamp(coef_1,
  max=epsilon_high)``, L3081; recommended 5.0), in this module's terms ``eps_low=1,
  eps_high=4``; this module's own CISPO default is ``eps_low = eps_high = 0.2``.
* SAPO follows TRL (no clamp of ``log r``); verl clamps ``log r`` to [-20, 20] first
  (L1666), which zeroes the (already vanishing) gradient beyond, and divides by
  ``n_i + 1e-8`` (``agg_loss`` L1196).  Both always aggregate seq-mean-token-mean.
* GMPO follows verl, but divides by ``n_i``, not ``n_i + 1e-8`` (L1984, L1987), and applies an
  ``aggregation`` given to it to its per-token loss, as for GSPO (verl always takes the mean
  over responses, L2000).  TRL 1.16.0 has no GMPO.
* Run on CPU on random masked batches (a scratch check, not a test): verl 0.9.1's own
  SAPO and GMPO functions agree with llm_clip's loss and autograd gradient to 7e-8
  relative (its ``+ 1e-8`` denominators), TRL 1.16.0's SAPO lines to 3e-15.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import numpy as np
from numpy.typing import NDArray

from llm_clip_inputs import Batch, checked_batch
from ppo_clip_exact import clipped_where, kept_ratio, row_sums
from ppo_clip_inputs import checked_choice

__all__ = [
    "AGGREGATIONS",
    "DAPO_EPS_HIGH",
    "DEFAULT_EPS",
    "OBJECTIVES",
    "SPECS",
    "ObjectiveSpec",
    "Parts",
    "checked",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Objective = str  #: a key of :data:`SPECS`
Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]

AGGREGATIONS: tuple[Aggregation, ...] = get_args(Aggregation)
#: ``eps_low``'s default, unless the objective's entry says otherwise.
DEFAULT_EPS = 0.2


class Parts(NamedTuple):
    """One objective's per-token pieces: ``term = product(term_factors) * A`` and
    ``d term / d logp_new = grad_factor * A`` (GSPO's, GMPO's: what reaches each token)."""

    ratio: FloatArray
    is_clipped: BoolArray
    term_factors: tuple[FloatArray, ...]
    grad_factor: FloatArray


@dataclass(frozen=True)
class ObjectiveSpec:
    """Everything about one objective, read by this module, its tests, the widgets and
    notebook 7: adding an objective is its ``parts`` function and one entry in :data:`SPECS`;
    the README's paragraph on a new objective lists what else states it (the independent
    reference ``tests/llm_reference.py``, ``docs/contract.md``, notebook 7's section 2).

    ``parts`` computes each token's term and gradient (:class:`Parts`); ``aggregation`` is its
    default; ``eps_low``/``eps_high`` the default band (``eps_high`` None: ``eps_low``'s
    value), on the ratio (``band="ratio"``: ``[1 - eps_low, 1 + eps_high]``), on ``log r``
    (``"log-ratio"``: ``[-eps_low, eps_high]``) or none (``None``: ``eps_*`` refused);
    ``tau`` SAPO's default ``(tau_pos, tau_neg)`` (None: ``tau_*`` refused); ``per_response``:
    one advantage per response; ``detached_weight``: the ratio enters as a weight held constant
    (stop-gradient, CISPO), so a token outside the band keeps its push.  ``label``, ``formula``,
    ``paper`` (arXiv id) and ``follows`` (the trainer lines, version or commit first) are for
    tables; ``in_trl``: TRL's ``GRPOTrainer`` has this loss (``clip_ratio_trl`` reports ``{}``
    otherwise; PPO, not in TRL, is read there as token-level); ``in_verl``: verl has it
    (``clip_fraction_verl`` reports ``{}`` otherwise), and what it logs as its clip fraction
    follows from ``band``, ``per_response`` and ``detached_weight`` (:meth:`clip_kind`).
    """

    name: str
    label: str
    parts: Callable[[Batch], Parts]
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
    in_verl: bool = True

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


def _token_clip(b: Batch) -> Parts:
    """PPO's clipped term on each token's ratio ``r = exp(logp_new - logp_old)``: PPO, GRPO,
    Dr. GRPO, DAPO differ only in their aggregation and band (:data:`SPECS`)."""
    return _clipped(np.exp(b.log_ratio), b)


def _gspo(b: Batch) -> Parts:
    """GSPO: PPO's clip on ``s_i = exp((1/n_i) sum_t (logp_new - logp_old))``, one per response.

    Since ``d s_i / d logp_new_t = s_i / n_i``, every token of an unclipped response gets
    ``-w * s_i * A_i``: the gradient of verl's GSPO-token form too (``core_algos.py`` L1297).
    """
    log_s = row_sums(b.logp_new, b.mask, b.lengths, minus=b.logp_old)
    sequence_ratio = np.exp(log_s)[:, None] * np.ones_like(b.log_ratio)  # s_i
    return _clipped(sequence_ratio, b)


def _cispo(b: Batch) -> Parts:
    """CISPO: ``term = sg[clip(r)] * A * logp_new``; each token's gradient ``-w * clip(r) * A``
    is never 0 unless A is (``is_clipped``: where the weight differs from ``r``)."""
    ratio = np.exp(b.log_ratio)
    weight = np.clip(ratio, b.lower, b.upper)  # sg[clip(r)]: a constant to the gradient
    return Parts(ratio, weight != ratio, (weight, b.logp_new), weight)


def _sapo(b: Batch) -> Parts:
    """SAPO's soft gate: ``term = f(r) * A``, ``f(r) = sigmoid(tau * (r - 1)) * 4 / tau``.

    ``f(1) = 2 / tau`` and ``f'(1) = 1``: near ``r = 1`` it is the unclipped surrogate; far
    from 1 the gradient ``r * f'(r) * A = 4 * r * s * (1 - s) * A`` (``s`` the sigmoid) fades
    but is 0 only where float64 underflows.  Sigmoids as ``exp(-logaddexp(0, -x))``, the ratio
    taken inside the ``exp``, and ``x = tau * r`` as ``exp(log r + log tau)`` where only ``r``
    overflows: with ``tau = 1e-306`` and ``log r = 709.79`` the gradient is ``-1.6e230 * A * w``,
    not 0.  Where ``tau * r`` overflows too, ``f = 4 / tau`` and the gradient is 0 (its limit),
    never NaN.  No token is clipped.
    For ``tau`` far below 1 the loss's float64 value loses digits: each term carries ``2/tau * A``,
    which cancels between answers whose advantages sum to 0 (the gradient does not).
    """
    ratio = np.exp(b.log_ratio)
    tau = np.where(b.advantages > 0, b.tau_pos, b.tau_neg)
    x = tau * (ratio - 1.0)
    far = np.isposinf(ratio)  # r overflowed, tau * r need not (tau below 1): exp(log r + log tau)
    x[far] = np.exp(b.log_ratio[far] + np.log(tau[far]))
    gate = np.exp(-np.logaddexp(0.0, -x))  # sigmoid(x)
    # r * sigmoid(x) * sigmoid(-x), the ratio taken inside the exp: 0, not inf * 0, at r = inf
    slope = 4.0 * gate * np.exp(b.log_ratio - np.logaddexp(0.0, x))
    slope[np.isposinf(b.log_ratio)] = 0.0  # log r itself overflowed: inf - inf above
    return Parts(ratio, np.zeros_like(b.mask), (gate * (4.0 / tau),), slope)


def _gmpo(b: Batch) -> Parts:
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
    return Parts(ratio, clipped, (ratio,), np.where(clipped, 0.0, ratio))


def _clipped(ratio: FloatArray, b: Batch) -> Parts:
    """PPO's clipped term on ``ratio`` (a token's or a response's)."""
    # min(r*A, clip(r)*A) = A * min(r, upper) for A > 0 and A * max(r, lower) for A < 0
    kept = kept_ratio(ratio, b.advantages, b.lower, b.upper)
    clipped = clipped_where(ratio, b.advantages, b.lower, b.upper)
    return Parts(ratio, clipped, (kept,), np.where(clipped, 0.0, ratio))


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
#: DAPO's clip-higher (arXiv 2503.14476): its ``eps_high`` defaults to 0.28.
DAPO_EPS_HIGH = SPECS["dapo"].eps_high


def checked(
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
        per_response=spec.per_response, log_band=spec.band == "log-ratio",
        eps_low=eps_low, eps_high=eps_high, aggregation=checked_choice(
            "aggregation", spec.aggregation if aggregation is None else aggregation, AGGREGATIONS
        ), max_len=max_len, logp_ref=logp_ref, kl_coef=kl_coef,
        tau=(tau[0] if tau_pos is None else tau_pos, tau[1] if tau_neg is None else tau_neg),
        rollout_weights=rollout_weights, keep=keep,
    )  # fmt: skip
