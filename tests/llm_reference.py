"""``docs/contract.md`` ("llm_clip") in plain Python, one response and one token at a time.

The independent implementation :mod:`llm_clip` is compared with: written from the contract's
sentences, with the ``math`` and ``fractions`` modules only (no numpy, no code shared with the
module; only the defaults, aggregation and band, are read from its registry ``SPECS``).
Ratios are ``math.exp`` of the float64 log-ratio (``inf`` where it overflows), GSPO's and a
sequence weight's of the exact mean or sum of the exact differences; from there every sum and
product is exact (``Fraction``), so a test can bound the module's rounding.
An infinite factor times a nonzero advantage is an infinity of the product's sign; times a
zero advantage it is 0, as the contract says.

Each token's gradient is written out by the chain rule, not reused from the loss:

* clipped term (PPO, GRPO, Dr. GRPO, DAPO): ``d loss / d logp_new_t = -w_t * r_t * A_t``, or 0
  where the token is clipped;
* GSPO: ``s_i = exp(mean_t(logp_new - logp_old))``, so ``d s_i / d logp_new_t = s_i / n_i``, and
  ``d loss / d logp_new_t = -sum_u w_u * [response i not clipped] * A_i * s_i / n_i``;
* CISPO: the weight ``c_t = clip(r_t)`` is a constant: ``-w_t * c_t * A_t``;
* SAPO: ``f(r) = sigmoid(tau * (r - 1)) * 4 / tau``, so ``d f(r) / d logp_new = r * f'(r) =
  4 * r * sigmoid(x) * sigmoid(-x)`` with ``x = tau * (r - 1)``: ``-w_t * A_t`` times that;
* GMPO: ``l'_t`` is ``min(l_t, eps_high)`` (A > 0) or ``max(l_t, -eps_low)`` (A < 0), ``l_t`` the
  log-ratio; ``g_i = exp(mean_t l'_t)``; ``d g_i / d logp_new_t = g_i / n_i`` where ``l'_t = l_t``
  and 0 where it was clipped, so ``-w * g_i * A_i`` or 0, as for GSPO;
* KL: ``d (w * beta * k3) / d logp_new = w * beta * (1 - exp(d))``.

Rollout weights ``rho_t`` (and ``keep_i``, a 0 or 1) multiply each token's policy term, not its
KL term: the token objectives' slopes are multiplied by ``rho_t``; GSPO's and GMPO's sum over
the response's tokens becomes ``sum_u w_u * rho_u``.  A weight of 0 makes the term 0.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

from llm_clip import SPECS

Number = Fraction | float  # a Fraction, or a float that is +-inf


class Result(NamedTuple):
    """The reference's loss and gradient, and what a comparison needs to know."""

    loss: float
    grad: list[list[float]]
    scale: float  # sum of |w * each part of the loss|: what the loss's rounding is relative to
    grad_scale: list[list[float]]  # |policy part| + |KL part| of each gradient entry
    near_edge: list[list[bool]]  # ratio within 1e-9 of a clip edge: a last bit decides there


def exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def times(x: float | Fraction, a: float | Fraction) -> Number:
    """``x * a`` exactly; 0 where ``a == 0`` (even for an infinite ``x``)."""
    if a == 0 or x == 0:
        return Fraction(0)
    if isinstance(x, float) and math.isinf(x):
        return math.copysign(math.inf, x) * (1 if a > 0 else -1)
    return Fraction(x) * Fraction(a)


def sigmoid(x: float) -> float:
    return 1 / (1 + exp(-x)) if x >= 0 else exp(x) / (1 + exp(x))


def r_times_sigmoid_of_minus(log_r: float, x: float) -> float:
    """``r * sigmoid(-x)`` as ``exp(log r - log(1 + exp(x)))``: 0 where ``r`` overflows."""
    softplus = x + math.log1p(exp(-x)) if x > 0 else math.log1p(exp(x))
    return exp(log_r - softplus)


def to_float(value: Number) -> float:
    if isinstance(value, float):
        return value
    try:
        return value.numerator / value.denominator
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def mean_gap(a: list[float], b: list[float], ts: list[int], mean: bool = True) -> float:
    """The exact mean (or sum) over the tokens ``ts`` of ``a - b``, rounded once: the contract's
    sums are of the exact differences, however far float64's would cancel."""
    gap = sum((Fraction(a[t]) - Fraction(b[t]) for t in ts), Fraction(0))
    return to_float(gap / len(ts) if mean else gap)


def total(values: list[Number]) -> Number:
    """An exact sum; infinities of one sign win; both signs: NaN (the reference has no answer)."""
    infinities = {math.copysign(1, v) for v in values if isinstance(v, float)}
    if len(infinities) == 2:
        return math.nan
    if infinities:
        return math.inf * infinities.pop()
    return sum(values, Fraction(0))


def loss_and_grad(
    logp_new: list[list[float]],
    logp_old: list[list[float]],
    advantages: list[float] | list[list[float]],
    mask: list[list[bool]],
    *,
    objective: str,
    eps_low: float | None = None,
    eps_high: float | None = None,
    aggregation: str | None = None,
    max_len: int | None = None,
    logp_ref: list[list[float]] | None = None,
    kl_coef: float = 0.0,
    tau_pos: float | None = None,
    tau_neg: float | None = None,
    rollout_weights: list[list[float]] | None = None,
    keep: list[bool] | None = None,
) -> Result:
    """The contract's loss and ``d loss / d logp_new`` for one batch (lists of lists)."""
    spec = SPECS[objective]
    eps_low = (spec.eps_low or 0.0) if eps_low is None else eps_low
    if eps_high is None:
        eps_high = eps_low if spec.eps_high is None else spec.eps_high
    aggregation = aggregation or spec.aggregation
    taus = spec.tau or (1.0, 1.0)
    tau_pos, tau_neg = tau_pos or taus[0], tau_neg or taus[1]
    lower, upper = 1.0 - eps_low, 1.0 + eps_high
    batch = len(mask)
    tokens = [[t for t, kept in enumerate(row) if kept] for row in mask]
    all_tokens = sum(len(ts) for ts in tokens)

    def weight(i: int) -> Fraction:
        if aggregation == "token-mean":
            return Fraction(1, all_tokens)
        if aggregation == "seq-mean-token-mean":
            return Fraction(1, batch * len(tokens[i]))
        return Fraction(1, batch * max_len)

    def advantage(i: int, t: int) -> float:
        row = advantages[i]
        return row[t] if isinstance(row, list) else row

    def rho(i: int, t: int) -> Fraction:
        """The token's rollout weight times its response's keep."""
        kept = Fraction(1 if keep is None else int(keep[i]))
        if rollout_weights is None:
            return kept
        row = rollout_weights[i]
        return Fraction(row[t] if len(row) > 1 else row[0]) * kept

    contributions: list[Number] = []
    scale = 0.0
    grad = [[0.0] * len(row) for row in mask]
    grad_scale = [[0.0] * len(row) for row in mask]
    near_edge = [[False] * len(row) for row in mask]
    for i, ts in enumerate(tokens):
        w = weight(i)
        if objective in ("gspo", "gmpo"):
            a = advantage(i, ts[0])
            log_ratios = [logp_new[i][t] - logp_old[i][t] for t in ts]
            if objective == "gmpo":  # each log-ratio clipped on the pessimistic side
                cut = {t: (a > 0 and lr > eps_high) or (a < 0 and lr < -eps_low)
                       for t, lr in zip(ts, log_ratios, strict=True)}  # fmt: skip
                log_ratios = [
                    min(lr, eps_high) if a > 0 else max(lr, -eps_low) if a < 0 else 0.0
                    for lr in log_ratios
                ]
                s = exp(math.fsum(log_ratios) / len(ts))
            else:  # GSPO: the exact mean of the exact differences
                s = exp(mean_gap(logp_new[i], logp_old[i], ts))
            if objective == "gspo":
                kept = min(max(s, lower), upper)
                response_term = min(times(s, a), times(kept, a))  # on each of the response's tokens
                clipped = (a > 0 and s > upper) or (a < 0 and s < lower)
            else:
                response_term, clipped = times(s, a), False
            # chain rule: d/d logp_new_t of sum_u w_u * term(s_i), with d s_i / d logp_new_t = s/n
            ds = Fraction(0) if clipped else times(s, a)  # d term / d s_i * s_i
            weights = sum(w * rho(i, u) for u in ts)  # sum_u w_u * rho_u
            if isinstance(ds, float):  # an infinity: its sign, unless no token weighs anything
                response_slope = ds if weights else Fraction(0)
            else:
                response_slope = weights * ds / len(ts)
        for t in ts:
            a = advantage(i, t)
            if objective in ("gspo", "gmpo"):
                ratio, term, slope = s, response_term, response_slope
                if objective == "gmpo" and cut[t]:
                    slope = Fraction(0)
            else:
                log_ratio = logp_new[i][t] - logp_old[i][t]
                ratio = exp(log_ratio)
                kept = min(max(ratio, lower), upper)
                if objective == "sapo":  # f(r) * A, slope r * f'(r) * A
                    tau = tau_pos if a > 0 else tau_neg
                    x = tau * (ratio - 1) if ratio < math.inf else exp(log_ratio + math.log(tau))
                    gate = Fraction(sigmoid(x)) * 4 / Fraction(tau)
                    term = times(gate, a)
                    r_sig = Fraction(r_times_sigmoid_of_minus(log_ratio, x))
                    slope = times(4 * Fraction(sigmoid(x)) * r_sig, a)
                elif objective == "cispo":  # sg[clip(r)] * A * logp_new: slope sg[clip(r)] * A
                    term = times(kept, a) * Fraction(logp_new[i][t])
                    slope = times(kept, a)
                else:
                    clipped = (a > 0 and ratio > upper) or (a < 0 and ratio < lower)
                    term = min(times(ratio, a), times(kept, a))
                    slope = Fraction(0) if clipped else times(ratio, a)
                slope = (
                    times(slope, rho(i, t)) if isinstance(slope, float) else w * slope * rho(i, t)
                )
            term = times(term, rho(i, t)) if isinstance(term, float) else term * rho(i, t)
            has_edges = objective not in ("sapo", "gmpo")  # GMPO's are on l, computed as here
            near_edge[i][t] = has_edges and any(
                abs(ratio - edge) <= 1e-9 * edge for edge in (lower, upper)
            )
            per_token = [-term if isinstance(term, float) else -w * term]
            scale += abs(to_float(per_token[0]))
            grad_parts = [-slope]
            if kl_coef:
                d = logp_ref[i][t] - logp_new[i][t]
                exp_d_minus_1 = expm1(d)
                k3 = exp_d_minus_1 - d  # exp(d) - d - 1
                per_token.append(k3 if math.isinf(k3) else w * Fraction(kl_coef) * Fraction(k3))
                # k3 = (exp(d) - 1) - d cancels: its rounding is relative to its two parts
                scale += float(w * Fraction(kl_coef)) * (abs(exp_d_minus_1) + abs(d))
                # d k3 / d logp_new = 1 - exp(d)
                slope_kl = -exp_d_minus_1
                grad_parts.append(
                    slope_kl if math.isinf(slope_kl) else w * Fraction(kl_coef) * Fraction(slope_kl)
                )
            contributions.extend(per_token)
            grad[i][t] = to_float(total(grad_parts))
            grad_scale[i][t] = sum(abs(to_float(x)) for x in grad_parts)
    return Result(to_float(total(contributions)), grad, scale, grad_scale, near_edge)


def group_advantages(rewards: list[float], group_size: int, scale_by_std: bool = True) -> list:
    """Per group of consecutive rewards: GRPO's (r - mean) / (std + 1e-4), Dr. GRPO's r - mean."""
    result = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start : start + group_size]
        mean = math.fsum(group) / group_size
        std = math.sqrt(math.fsum((r - mean) ** 2 for r in group) / (group_size - 1))
        result += [(r - mean) / (std + 1e-4) if scale_by_std else r - mean for r in group]
    return result


def rollout_weights(
    logp_old: list[list[float]], logp_rollout: list[list[float]], mask: list[list[bool]],
    mode: str, clip_min: float | None = None, clip_max: float | None = 3.0,
) -> list[list[float]]:  # fmt: skip
    """TRL's importance weights: exp(d) per token or exp(sum d) per response, d = old - rollout
    (0 on padding), then clamped (``*_truncate``) or zeroed outside the bounds (``*_mask``)."""
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    gaps = [
        [old - new if kept else 0.0 for old, new, kept in zip(*rows, strict=True)]
        for rows in zip(logp_old, logp_rollout, mask, strict=True)
    ]
    if mode.startswith("sequence"):
        gaps = [
            [mean_gap(old, new, [t for t, k in enumerate(kept) if k], mean=False)]
            for old, new, kept in zip(logp_old, logp_rollout, mask, strict=True)
        ]
    weights = [[exp(g) for g in row] for row in gaps]
    if mode.endswith("truncate"):
        return [[min(max(x, low), high) for x in row] for row in weights]
    return [[x if low <= x <= high else 0.0 for x in row] for row in weights]


def off_policy_keep(
    logp_new: list[list[float]], logp_rollout: list[list[float]], advantages: list[float],
    mask: list[list[bool]], threshold: float,
) -> list[bool]:  # fmt: skip
    """OPSM: keep a response if A >= 0 or mean over its tokens of (rollout - new) <= threshold."""
    keep = []
    for new, rollout, a, kept in zip(logp_new, logp_rollout, advantages, mask, strict=True):
        ts = [t for t, k in enumerate(kept) if k]
        keep.append(a >= 0 or mean_gap(rollout, new, ts) <= threshold)
    return keep
