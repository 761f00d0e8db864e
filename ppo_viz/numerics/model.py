"""Notebook 5's numbers: a synthetic RLHF response, and what large log-ratios do to the clip.

No language model is involved, and every ratio, clip decision, loss and gradient comes from
:mod:`ppo_clip`, except in :func:`naive_loss_terms` and :func:`naive_float32_case`:
deliberately careless code that shows how an implementation fails.  In order of the notebook:
the response (:func:`synthetic_response`, :func:`token_view`, :func:`length_survey`), an
overflowing batch (:func:`overflow_result`), the band's edge (:func:`boundary_cases`,
:func:`edge_slopes`), a response outside the band (:func:`outside_band`) and a rare token
carried past the upper edge (:func:`rare_token_runs`).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

import ppo_clip
from bandit import Batch, Method, epochs_on_batch, softmax
from ppo_clip import FloatArray
from ppo_viz.controls import checked_number

Breakdown = ppo_clip.ClipBreakdown

#: ``exp(x)`` overflows to ``inf`` in float64 for ``x`` above this (about 709.78).
FLOAT64_EXP_LIMIT = float(np.log(np.finfo(np.float64).max))
#: ``exp(x)`` overflows to ``inf`` in float32 for ``x`` above this (about 88.72).
FLOAT32_EXP_LIMIT = float(np.log(np.float64(np.finfo(np.float32).max)))
EPS = ppo_clip.DEFAULT_EPS
#: The longest synthetic response, in tokens, and the seed of the one the notebook shows.
MAX_TOKENS, RESPONSE_SEED = 1000, 0
#: The seed of :func:`length_survey`'s responses, how many there are, and the lengths it uses.
SURVEY_SEED, SURVEY_RESPONSES = 1234, 64
SURVEY_LENGTHS = np.unique(np.concatenate([[1, 2, 5, 10, 15], np.arange(25, MAX_TOKENS + 1, 25)]))
#: Spread of the random per-token change of the policy, in log-odds.
TOKEN_NOISE = 0.12
#: The largest policy shift the token app offers, in log-odds per token.
MAX_SHIFT = 4.0


def token_logprobs(rng: np.random.Generator, tokens: int) -> FloatArray:
    """The old policy's log-probability of each of ``tokens`` sampled tokens.

    About half the tokens are near-certain (a few hundredths below 0, like the rest of a
    word); the others are genuine choices with probabilities from 0.03 to 0.95.  The mean is
    about -0.9 per token, so 1000 tokens add up to roughly -900 to -1000.
    """
    confident = rng.random(tokens) < 0.5
    near_certain = -np.maximum(rng.exponential(0.03, tokens), 1e-6)
    uncertain = rng.uniform(math.log(0.03), math.log(0.95), tokens)
    return np.where(confident, near_certain, uncertain)


def shifted_logprobs(logp_old: ArrayLike, shift: float, noise: ArrayLike) -> FloatArray:
    """New log-probabilities after each token's log-odds ``log(p / (1 - p))`` moved.

    Token t's log-odds move by ``shift + noise[t]``, so the result is a valid
    log-probability (at most 0): near-certain tokens barely change, uncertain ones most.
    """
    old = np.asarray(logp_old, dtype=np.float64)
    log_odds = old - np.log(-np.expm1(old))
    return -np.logaddexp(0.0, -(log_odds + shift + np.asarray(noise, dtype=np.float64)))


@dataclass(frozen=True)
class SyntheticResponse:
    """A seeded response: the old policy's ``logp_old[t]`` and the random change ``noise[t]``.

    :meth:`logp_new` adds a *policy shift*: the same change of log-odds for every token.
    """

    logp_old: FloatArray
    noise: FloatArray

    def logp_new(self, shift: float) -> FloatArray:
        """The new policy's per-token log-probabilities for a log-odds ``shift``."""
        return shifted_logprobs(self.logp_old, shift, self.noise)


def synthetic_response(seed: int = RESPONSE_SEED, tokens: int = MAX_TOKENS) -> SyntheticResponse:
    """A deterministic synthetic response of ``tokens`` tokens (no model is downloaded or run)."""
    rng = np.random.default_rng(int(checked_number("seed", seed, (0, 2**63 - 1), whole=True)))
    logp_old = token_logprobs(rng, int(checked_number("tokens", tokens, (1, 10**6), whole=True)))
    return SyntheticResponse(logp_old, TOKEN_NOISE * rng.standard_normal(len(logp_old)))


@dataclass(frozen=True)
class TokenView:
    """The first ``length`` tokens of a response at one policy shift, all from ppo_clip.

    ``tokens`` holds the per-token ratios (A = +1 each); ``sequence`` and ``sequence_negative``
    the sequence ratio as one sample with A = +1 and with A = -1.
    """

    length: int
    tokens: Breakdown
    sequence: Breakdown
    sequence_negative: Breakdown
    #: ``exp(mean of the per-token log-ratios)``: a length-normalised sequence ratio.
    geometric_mean: float
    #: The per-token ratios multiplied one by one (``inf`` once the product overflows).
    product: float
    logp_new_sum: float
    logp_old_sum: float

    @property
    def running_log_ratio(self) -> FloatArray:
        """The log of the sequence ratio after 1, 2, ... ``length`` tokens."""
        return np.cumsum(self.tokens.log_ratio)


def token_view(response: SyntheticResponse, length: int, shift: float) -> TokenView:
    """Per-token and sequence ratios of the first ``length`` tokens, from :mod:`ppo_clip`.

    The sequence ratio is ``clip_breakdown([sum new], [sum old], [A]).ratio``; the geometric
    mean is the ratio of the mean log-probabilities.  Errors name a bad argument.
    """
    if not isinstance(response, SyntheticResponse):
        raise TypeError(f"response must be a SyntheticResponse, got {type(response).__name__}")
    length = int(checked_number("length", length, (1, len(response.logp_old)), whole=True))
    new = response.logp_new(checked_number("shift", shift, (-1e6, 1e6)))[:length]
    old = response.logp_old[:length]
    tokens = ppo_clip.clip_breakdown(new, old, np.ones(length))
    new_sum, old_sum = float(np.sum(new)), float(np.sum(old))
    mean = ppo_clip.clip_breakdown([new_sum / length], [old_sum / length], [1.0])
    with np.errstate(over="ignore", under="ignore"):
        product = float(np.prod(tokens.ratio))
    plus, minus = (ppo_clip.clip_breakdown([new_sum], [old_sum], [a]) for a in (1.0, -1.0))
    return TokenView(length, tokens, plus, minus, float(mean.ratio[0]), product, new_sum, old_sum)


@functools.cache
def survey_responses() -> tuple[FloatArray, FloatArray]:
    """``(logp_old, noise)`` of the survey's responses, one row per response."""
    rng = np.random.default_rng(SURVEY_SEED)
    old = np.stack([token_logprobs(rng, MAX_TOKENS) for _ in range(SURVEY_RESPONSES)])
    return old, TOKEN_NOISE * rng.standard_normal(old.shape)


def length_survey(shift: float) -> dict[str, FloatArray]:
    """How often the sequence ratio (and a token's ratio) is outside the band, by length.

    The first ``length`` tokens of each survey response form a sequence; :mod:`ppo_clip`
    decides whether its ratio is outside the band and whether it overflowed.  Returns the
    ``"lengths"`` and, at each, the fraction (in [0, 1]) of sequences ``"sequence_outside"``,
    of tokens ``"token_outside"``, and of sequences whose ratio overflows float32 or float64
    (``"float32_overflow"``, ``"float64_overflow"``).
    """
    return _length_survey(float(checked_number("shift", shift, (-1e6, 1e6))))


@functools.lru_cache(maxsize=256)
def _length_survey(shift: float) -> dict[str, FloatArray]:
    old, noise = survey_responses()
    new = shifted_logprobs(old, shift, noise)
    shape, ends = (old.shape[0], SURVEY_LENGTHS.size), SURVEY_LENGTHS - 1
    sums_new, sums_old = (np.cumsum(x, axis=1)[:, ends].ravel() for x in (new, old))
    sequences = ppo_clip.clip_breakdown(sums_new, sums_old, np.ones_like(sums_new))
    tokens = [ppo_clip.clip_breakdown(n, o, np.ones_like(n)) for n, o in zip(new, old, strict=True)]
    tokens_so_far = np.cumsum(sum(response.outside_band for response in tokens))[ends]
    return {
        "lengths": SURVEY_LENGTHS,
        "sequence_outside": sequences.outside_band.reshape(shape).mean(axis=0),
        "token_outside": tokens_so_far / (shape[0] * SURVEY_LENGTHS),
        "float32_overflow": (sequences.log_ratio > FLOAT32_EXP_LIMIT).reshape(shape).mean(axis=0),
        "float64_overflow": np.isinf(sequences.ratio).reshape(shape).mean(axis=0),
    }


#: The four responses of the overflow batch: (seed, length, shift, advantage).
OVERFLOW_BATCH = (
    (11, 40, 0.0, 1.0),
    (12, 1000, 4.0, 0.0),
    (13, 120, 0.0, -0.5),
    (14, 400, 1.0, 2.0),
)


def naive_loss_terms(
    logp_new: FloatArray, logp_old: FloatArray, advantages: FloatArray, eps: float = EPS
) -> tuple[FloatArray, float, list[str]]:
    """DEMONSTRATION ONLY: ``r = exp(logp_new - logp_old)``, ``min(r*A, clip(r)*A)``, ``-mean``.

    Returns the terms, the loss and numpy's warnings on the way, caught instead of printed:
    ``exp`` overflows to ``inf``, ``inf * 0`` is NaN where A == 0, and so is the mean.
    """
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn", under="ignore"):
        warnings.simplefilter("always")
        ratio = np.exp(logp_new - logp_old)
        terms = np.minimum(ratio * advantages, np.clip(ratio, 1 - eps, 1 + eps) * advantages)
        loss = float(-np.mean(terms))
    return terms, loss, [str(warning.message) for warning in caught]


@dataclass(frozen=True)
class OverflowResult:
    """The overflow batch: sequence log-probabilities, the naive terms and ppo_clip's."""

    logp_new: FloatArray
    logp_old: FloatArray
    lengths: tuple[int, ...]
    naive_terms: FloatArray
    naive_loss: float
    #: What numpy warned while the naive formula ran ("overflow encountered in exp", ...).
    naive_warnings: list[str]
    module: Breakdown


def overflow_result() -> OverflowResult:
    """The overflow batch, computed naively and with :func:`ppo_clip.clip_breakdown`."""
    responses = [(synthetic_response(seed), n, shift) for seed, n, shift, _ in OVERFLOW_BATCH]
    new = np.array([np.sum(r.logp_new(shift)[:n]) for r, n, shift in responses])
    old = np.array([np.sum(r.logp_old[:n]) for r, n, _ in responses])
    advantages = np.array([advantage for *_, advantage in OVERFLOW_BATCH])
    lengths = tuple(n for _, n, _ in responses)
    naive = naive_loss_terms(new, old, advantages)
    return OverflowResult(new, old, lengths, *naive, ppo_clip.clip_breakdown(new, old, advantages))


#: The boundary's probabilities: their ratio is exactly ``1 + BOUNDARY_EPS`` in exact maths.
BOUNDARY_P_NEW, BOUNDARY_P_OLD, BOUNDARY_EPS = 0.6, 0.5, 0.2
#: Significant bits of bfloat16 (7 stored mantissa bits and the implicit one), as in Google
#: Cloud's "The bfloat16 numerical format".
BFLOAT16_SIGNIFICANT_BITS = 8


@dataclass(frozen=True)
class BoundaryCase:
    """One way of computing the ratio of 0.6 to 0.5, for one sample with A = +1 (N = 1).

    ``float32`` says that the ratio is held, and compared with ``1 + eps``, in float32.
    """

    label: str
    ratio: float
    is_clipped: bool
    grad: float
    float32: bool = False

    @property
    def side(self) -> str:
        """Where the ratio landed: ``"above"``, ``"below"`` or ``"exactly on"`` the edge."""
        ratio, edge = self.ratio, 1.0 + BOUNDARY_EPS
        if self.float32:
            ratio, edge = np.float32(ratio), np.float32(1.0) + np.float32(BOUNDARY_EPS)
        return "above" if ratio > edge else "below" if ratio < edge else "exactly on"


def module_case(label: str, logp_new: float, logp_old: float) -> BoundaryCase:
    """The boundary sample computed by :func:`ppo_clip.clip_breakdown` (float64)."""
    sample = ppo_clip.clip_breakdown([logp_new], [logp_old], [1.0], BOUNDARY_EPS)
    ratio, clipped, grad = sample.ratio[0], sample.is_clipped[0], sample.grad[0]
    return BoundaryCase(label, float(ratio), bool(clipped), float(grad))


def naive_float32_case(label: str, ratio: np.float32) -> BoundaryCase:
    """DEMONSTRATION ONLY: the contract's rule ``r > 1 + eps`` applied in float32."""
    clipped = bool(ratio > np.float32(1.0) + np.float32(BOUNDARY_EPS))
    return BoundaryCase(label, float(ratio), clipped, 0.0 if clipped else -float(ratio), True)


def boundary_cases() -> tuple[BoundaryCase, ...]:
    """The ratio 0.6 / 0.5 four ways: float64 by ppo_clip, then three with float32 on the way.

    Float32 throughout (naive); float64 ``log 1.2`` rounded to float32, then ``exp`` (naive);
    ppo_clip on log-probabilities that were computed in float32.
    """
    p_new, p_old = np.float32(BOUNDARY_P_NEW), np.float32(BOUNDARY_P_OLD)
    float64 = math.log(BOUNDARY_P_NEW), math.log(BOUNDARY_P_OLD)
    return (
        module_case("float64 throughout (ppo_clip)", *float64),
        naive_float32_case(
            "float32 throughout: exp(log f32(0.6) − log f32(0.5))",
            np.exp(np.log(p_new) - np.log(p_old)),
        ),
        naive_float32_case("float32: exp(f32(log 1.2))", np.exp(np.float32(np.log(1.2)))),
        module_case("float32 log-probs, then ppo_clip (float64)", np.log(p_new), np.log(p_old)),
    )


def edge_slopes(step: float = 1e-7) -> tuple[float, float]:
    """The slopes of :func:`ppo_clip.ppo_clip_loss` just inside and just outside ``1 + eps``.

    Measured a step away from the edge, so that where the edge's own ratio landed here (on
    it, or one ulp beside it) does not enter.
    """
    logp_new, logp_old = math.log(BOUNDARY_P_NEW), math.log(BOUNDARY_P_OLD)

    def loss(shift: float) -> float:
        return ppo_clip.ppo_clip_loss([logp_new + shift], [logp_old], [1.0], BOUNDARY_EPS)

    return (loss(-step) - loss(-2 * step)) / step, (loss(2 * step) - loss(step)) / step


#: Sequence log-ratios of the outside-band table: far below, below, inside, above, far above.
OUTSIDE_LOG_RATIOS = (-20.0, -3.0, 0.1, 3.0, 20.0)
#: The old log-probability of that response (a long one's, well within the contract).
SEQUENCE_LOGP_OLD = -600.0


def outside_band(
    log_ratios: Sequence[float] = OUTSIDE_LOG_RATIOS, eps: float = EPS
) -> list[tuple[float, Breakdown, Breakdown]]:
    """One response with ``log pi_old = -600`` at each log-ratio: ``(x, A = +1, A = -1)``.

    Each response is its own batch (N = 1).  A log-ratio must be from -400 to 600, so that
    ``log pi_new`` stays within the contract's [-1000, 0].
    """
    if isinstance(log_ratios, (str, bytes)) or not isinstance(log_ratios, Sequence):
        raise TypeError(f"log_ratios must be a sequence of numbers, got {log_ratios!r}")
    if not log_ratios:
        raise ValueError("log_ratios must hold at least one number")
    checked = [checked_number(f"log_ratios[{i}]", x, (-400, 600)) for i, x in enumerate(log_ratios)]
    old = SEQUENCE_LOGP_OLD
    return [
        (float(x), *(ppo_clip.clip_breakdown([old + x], [old], [a], eps) for a in (1.0, -1.0)))
        for x in checked
    ]


#: The old policy's probabilities of three tokens in one context: a rare token, then two others.
RARE_P_OLD = (0.01, 0.9, 0.09)
#: The runs: (description, batch as (token, advantage) pairs, step size, steps).
RARE_RUNS = (
    ("the rare token's sample alone, small steps", ((0, 1.0),), 0.05, 200),
    ("the rare token's sample alone, one large step", ((0, 1.0),), 0.5, 1),
    ("with token 1's sample (A = −1) too, small steps", ((0, 1.0), (1, -1.0)), 0.05, 200),
)


def ppo_steps(
    p_old: Sequence[float], batch: Sequence[tuple[int, float]], step: float, steps: int, eps: float
) -> FloatArray:
    """The new policy's probabilities after ``steps`` gradient steps on one batch.

    The policy is a softmax over one context's tokens with logits starting at ``log p_old``;
    each step is notebook 3's (:func:`bandit.epochs_on_batch`): every sample's
    ``d loss / d log pi_new`` from :mod:`ppo_clip`, chained through the softmax
    (``d log p_a / d z = onehot(a) - p``), and the logits moved by ``-step`` times that.
    """
    logits = np.log(np.asarray(p_old, dtype=np.float64))
    tokens, advantages = (np.array(column) for column in zip(*batch, strict=True))
    sample = Batch(tokens, advantages, advantages, logits[tokens])  # rewards are not used
    *_, last = epochs_on_batch(logits, sample, Method("ppo", "PPO", "clipped", eps), step, steps)
    return softmax(last.logits)


def rare_token_runs(eps: float = EPS) -> list[tuple[FloatArray, Breakdown]]:
    """For each run of :data:`RARE_RUNS`: the probabilities reached, and the rare token's own
    sample (A = +1) there, as :func:`ppo_clip.clip_breakdown` sees it."""
    ppo_clip.clip_band(eps)  # a ValueError naming eps before any step
    runs = []
    for _, batch, step, steps in RARE_RUNS:
        p_new = ppo_steps(RARE_P_OLD, batch, step, steps, eps)
        own = ppo_clip.clip_breakdown(np.log(p_new[:1]), np.log(RARE_P_OLD[:1]), [1.0], eps)
        runs.append((p_new, own))
    return runs
