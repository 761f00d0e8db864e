"""A synthetic RLHF response: per-token log-probabilities that add up to about -1000.

No language model is involved.  :func:`synthetic_response` draws, from a
seed, the old policy's log-probability of each of 1000 tokens, and a small
random change of each token's log-odds; :meth:`SyntheticResponse.logp_new`
adds a *policy shift* (the same change of log-odds for every token) to give
the new policy's log-probabilities.  From those:

* :func:`token_view` computes, with :mod:`ppo_clip`, the per-token ratios of
  the first ``length`` tokens, the sequence ratio and their geometric mean;
* :func:`length_survey` asks, for 64 such responses, how often the sequence
  ratio (and a single token's ratio) leaves the clip band, by length;
* :func:`response_figure` draws the response's log-probabilities and their
  running sum, which heads for the contract's floor of -1000.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.numbers import rounded
from ppo_viz.style import COLORS, figure_style

FloatArray = NDArray[np.float64]

#: ``exp(x)`` overflows to ``inf`` in float64 for ``x`` above this (about 709.78).
FLOAT64_EXP_LIMIT = float(np.log(np.finfo(np.float64).max))
#: ``exp(x)`` overflows to ``inf`` in float32 for ``x`` above this (about 88.72).
FLOAT32_EXP_LIMIT = float(np.log(np.float64(np.finfo(np.float32).max)))

#: The longest synthetic response, in tokens.
MAX_TOKENS = 1000
#: The seed of the response shown in the notebook.
RESPONSE_SEED = 0
#: The seed of the responses of :func:`length_survey`, and how many there are.
SURVEY_SEED = 1234
SURVEY_RESPONSES = 64
#: Spread of the random per-token change of the policy, in log-odds.
TOKEN_NOISE = 0.12
#: The largest policy shift the token app offers, in log-odds per token.
MAX_SHIFT = 4.0
EPS = ppo_clip.DEFAULT_EPS
#: Response lengths at which :func:`length_survey` evaluates the sequence ratio.
SURVEY_LENGTHS = np.unique(np.concatenate([[1, 2, 5, 10, 15], np.arange(25, MAX_TOKENS + 1, 25)]))


# --------------------------------------------------------------------------
# The response
# --------------------------------------------------------------------------


def token_logprobs(rng: np.random.Generator, tokens: int) -> FloatArray:
    """The old policy's log-probability of each of ``tokens`` sampled tokens.

    About half the tokens are near-certain (log-probability a few hundredths
    below 0, like punctuation or the end of a word); the others are genuine
    choices with probabilities spread between 0.03 and 0.95.  The mean is
    about -0.9 per token, so 1000 tokens add up to roughly -900 to -1000.
    """
    confident = rng.random(tokens) < 0.5
    near_certain = -np.maximum(rng.exponential(0.03, tokens), 1e-6)
    uncertain = rng.uniform(math.log(0.03), math.log(0.95), tokens)
    return np.where(confident, near_certain, uncertain)


def shifted_logprobs(logp_old: ArrayLike, shift: float, noise: ArrayLike) -> FloatArray:
    """New per-token log-probabilities after the policy moved each token's log-odds.

    Token t's log-odds ``log(p / (1 - p))`` moves by ``shift + noise[t]``, so
    the result is always a valid log-probability (at most 0): near-certain
    tokens barely change, uncertain ones change most.
    """
    old = np.asarray(logp_old, dtype=np.float64)
    log_odds = old - np.log(-np.expm1(old))
    return -np.logaddexp(0.0, -(log_odds + shift + np.asarray(noise, dtype=np.float64)))


@dataclass(frozen=True)
class SyntheticResponse:
    """A seeded response scored by an old and a new policy.

    ``logp_old[t]`` is the old policy's log-probability of token t;
    ``noise[t]`` the random part of the policy change at token t (log-odds).
    :meth:`logp_new` gives the new policy's log-probabilities for a shift.
    """

    logp_old: FloatArray
    noise: FloatArray

    @property
    def tokens(self) -> int:
        """The response's length."""
        return len(self.logp_old)

    def logp_new(self, shift: float) -> FloatArray:
        """The new policy's per-token log-probabilities for a log-odds ``shift``."""
        return shifted_logprobs(self.logp_old, shift, self.noise)

    def sequence_logprobs(self, length: int, shift: float) -> tuple[float, float]:
        """``(sum of new, sum of old)`` log-probabilities of the first ``length`` tokens."""
        return float(np.sum(self.logp_new(shift)[:length])), float(np.sum(self.logp_old[:length]))


def synthetic_response(seed: int = RESPONSE_SEED, tokens: int = MAX_TOKENS) -> SyntheticResponse:
    """A deterministic synthetic response of ``tokens`` tokens (no model is downloaded or run)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens must be a whole number of at least 1, got {tokens!r}")
    rng = np.random.default_rng(seed)
    logp_old = token_logprobs(rng, tokens)
    noise = TOKEN_NOISE * rng.standard_normal(tokens)
    return SyntheticResponse(logp_old=logp_old, noise=noise)


# --------------------------------------------------------------------------
# Per-token ratios and the sequence ratio of one response
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenView:
    """What the token app shows for the first ``length`` tokens at one policy shift.

    ``tokens`` holds the per-token ratios (A = +1 for each); ``sequence`` and
    ``sequence_negative`` the sequence ratio as one sample with A = +1 and
    A = -1; all three come from :func:`ppo_clip.clip_breakdown`.
    """

    length: int
    tokens: ppo_clip.ClipBreakdown
    sequence: ppo_clip.ClipBreakdown
    sequence_negative: ppo_clip.ClipBreakdown
    #: ``exp(mean of the per-token log-ratios)``: a length-normalised sequence ratio.
    geometric_mean: float
    #: The per-token ratios multiplied one by one (``inf`` once the product overflows).
    product: float
    logp_new_sum: float
    logp_old_sum: float
    #: The log of the sequence ratio after 1, 2, ... ``length`` tokens.
    running_log_ratio: FloatArray

    @property
    def sequence_ratio(self) -> float:
        """``exp(sum of new - sum of old)``; ``inf`` once that overflows float64."""
        return float(self.sequence.ratio[0])

    @property
    def log_ratio(self) -> float:
        """The log of the sequence ratio, ``sum of new - sum of old``."""
        return float(self.sequence.log_ratio[0])

    @property
    def tokens_outside(self) -> int:
        """How many of the per-token ratios are outside the clip band."""
        return int(np.count_nonzero(self.tokens.outside_band))


def token_view(
    response: SyntheticResponse, length: int, shift: float, eps: float = EPS
) -> TokenView:
    """Per-token and sequence ratios of the first ``length`` tokens, from :mod:`ppo_clip`.

    The sequence ratio is ``clip_breakdown([sum new], [sum old], [A]).ratio``
    (for A = +1 and A = -1); the geometric mean of the per-token ratios is the
    ratio of the mean log-probabilities; ``product`` multiplies the
    per-token ratios (it overflows exactly when the sequence ratio does).

    Raises ``ValueError`` for a ``length`` outside 1 to ``response.tokens`` or
    a ``shift`` that is not a finite number.
    """
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
        raise ValueError(f"length must be a whole number of tokens, got {length!r}")
    if not 1 <= length <= response.tokens:
        raise ValueError(f"length must be from 1 to {response.tokens} tokens, got {length}")
    if not math.isfinite(shift):
        raise ValueError(f"shift must be a finite number, got {shift!r}")
    new = response.logp_new(shift)[:length]
    old = response.logp_old[:length]
    tokens = ppo_clip.clip_breakdown(new, old, np.ones(length), eps)
    new_sum, old_sum = float(np.sum(new)), float(np.sum(old))
    mean = ppo_clip.clip_breakdown([new_sum / length], [old_sum / length], [1.0], eps)
    with np.errstate(over="ignore", under="ignore"):
        product = float(np.prod(tokens.ratio))
    return TokenView(
        length=int(length),
        tokens=tokens,
        sequence=ppo_clip.clip_breakdown([new_sum], [old_sum], [1.0], eps),
        sequence_negative=ppo_clip.clip_breakdown([new_sum], [old_sum], [-1.0], eps),
        geometric_mean=float(mean.ratio[0]),
        product=product,
        logp_new_sum=new_sum,
        logp_old_sum=old_sum,
        running_log_ratio=np.cumsum(new) - np.cumsum(old),
    )


# --------------------------------------------------------------------------
# How often a sequence ratio leaves the band, by length
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class LengthSurvey:
    """How often the sequence ratio of :data:`SURVEY_RESPONSES` responses leaves the band.

    Every array is indexed like ``lengths`` and holds a fraction in [0, 1].
    """

    lengths: NDArray[np.int_]
    sequence_outside: FloatArray
    token_outside: FloatArray
    float32_overflow: FloatArray
    float64_overflow: FloatArray


@functools.cache
def survey_responses() -> tuple[FloatArray, FloatArray]:
    """``(logp_old, noise)`` of the survey's responses, one row per response."""
    rng = np.random.default_rng(SURVEY_SEED)
    old = np.stack([token_logprobs(rng, MAX_TOKENS) for _ in range(SURVEY_RESPONSES)])
    noise = TOKEN_NOISE * rng.standard_normal(old.shape)
    return old, noise


@functools.lru_cache(maxsize=256)
def length_survey(shift: float, eps: float = EPS) -> LengthSurvey:
    """Fractions of sequences (and tokens) outside the band, by response length.

    For each length in :data:`SURVEY_LENGTHS`, the first ``length`` tokens of
    each of the :data:`SURVEY_RESPONSES` seeded responses form a sequence;
    :mod:`ppo_clip` decides whether its ratio is outside ``[1 - eps, 1 + eps]``
    and whether it overflowed.  Token fractions count every token of the first
    ``length`` of each response.
    """
    old, noise = survey_responses()
    new = shifted_logprobs(old, shift, noise)
    responses, lengths = old.shape[0], SURVEY_LENGTHS
    sums_new = np.cumsum(new, axis=1)[:, lengths - 1].ravel()
    sums_old = np.cumsum(old, axis=1)[:, lengths - 1].ravel()
    sequences = ppo_clip.clip_breakdown(sums_new, sums_old, np.ones_like(sums_new), eps)
    outside = sequences.outside_band.reshape(responses, lengths.size)
    overflow64 = np.isinf(sequences.ratio).reshape(responses, lengths.size)
    overflow32 = (sequences.log_ratio > FLOAT32_EXP_LIMIT).reshape(responses, lengths.size)
    token_outside = np.stack(
        [
            ppo_clip.clip_breakdown(n, o, np.ones_like(n), eps).outside_band
            for n, o in zip(new, old, strict=True)
        ]
    )
    tokens_so_far = np.cumsum(token_outside.sum(axis=0))[lengths - 1]
    return LengthSurvey(
        lengths=lengths,
        sequence_outside=outside.mean(axis=0),
        token_outside=tokens_so_far / (responses * lengths),
        float32_overflow=overflow32.mean(axis=0),
        float64_overflow=overflow64.mean(axis=0),
    )


# --------------------------------------------------------------------------
# The figure: where -1000 comes from
# --------------------------------------------------------------------------

#: The token-position axis of every figure of a response.
TOKEN_AXIS = (-10.0, MAX_TOKENS + 10.0)


def response_figure(response: SyntheticResponse | None = None) -> Figure:
    """Per-token log-probabilities of a response (left) and their running sum (right).

    The running sum is the response's log-probability against its length,
    reaching close to the contract's floor of -1000 at 1000 tokens.  The
    figure is a plain matplotlib ``Figure`` (no pyplot): a notebook shows it
    once, as a PNG, when the inline backend is on (``%matplotlib inline``).
    """
    response = response or synthetic_response()
    tokens = np.arange(1, response.tokens + 1)
    running = np.cumsum(response.logp_old)
    colour = COLORS["clipped"]
    with figure_style():
        figure = Figure(figsize=(10.0, 3.6), layout="constrained")
        left, right = figure.subplots(1, 2, width_ratios=(1.0, 1.25))
        left.plot(tokens, response.logp_old, ".", ms=2.5, color=colour, alpha=0.7)
        left.set(
            xlim=TOKEN_AXIS,
            ylim=(-4.0, 0.2),
            xlabel="token position t",
            ylabel="log π_old(token t | earlier tokens)",
            title="Each token: a log-probability between about −3.5 and 0",
        )
        right.plot(tokens, running, color=colour, lw=2.2, label="sum of the first t tokens")
        right.axhline(
            -1000.0, color=COLORS["threshold"], ls="--", lw=1.3, label="contract floor: −1000"
        )
        right.plot([tokens[-1]], [running[-1]], "o", color=colour, ms=7)
        right.annotate(
            f"{rounded(running[-1])} after {tokens[-1]} tokens",
            (tokens[-1], running[-1]),
            xytext=(-10, 14),
            textcoords="offset points",
            ha="right",
            fontsize="small",
            color=colour,
        )
        right.set(
            xlim=(0, MAX_TOKENS * 1.02),
            ylim=(-1080.0, 30.0),
            xlabel="response length (tokens)",
            ylabel="log π_old(response)",
            title="The response: the sum of its tokens' log-probabilities",
        )
        right.legend(loc="lower left")
    return figure
