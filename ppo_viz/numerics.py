"""Numerics and the RLHF setting (notebook 4).

In RLHF the "action" is a response of hundreds of tokens and its
log-probability is the sum of the tokens' log-probabilities, so it easily
reaches -1000.  This module builds the figures and demos of notebook 4:

* :func:`synthetic_response` and :class:`ResponseFigure`: a seeded, synthetic
  response (no model involved) whose per-token log-probabilities add up to a
  sequence log-probability near -1000;
* :func:`overflow_demo`: a batch whose ratio overflows to ``inf``; the naive
  formula returns NaN, :mod:`ppo_clip` the right loss; the floating-point
  errors are caught with :func:`numpy.errstate` and explained, never printed;
* :func:`boundary_demo`: a ratio exactly on ``1 + eps`` in float64 (kept, as
  the contract says) and the same computation in float32 (clipped);
* :class:`TokenRatioExplorer`: per-token ratios, their product (the sequence
  ratio) and their geometric mean, with a slider for the response length;
* :class:`VariantsExplorer`: asymmetric bounds and the dual-clip cap, drawn on
  notebook 1's panels (:func:`ppo_viz.surrogate.draw_objective_panel`).

Every ratio, clip decision, loss and gradient shown comes from :mod:`ppo_clip`.
The only exceptions are the functions named ``naive_*``: deliberately naive
formulas that exist to show how a careless implementation fails.  The module
itself computes in float64.
"""

from __future__ import annotations

import base64
import functools
import html
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.display import App, FigureView, figure_to_png, message_html
from ppo_viz.style import BLACK, BLUE, COLORS, GREEN, GREY, VERMILLION, figure_style
from ppo_viz.surrogate import (
    PanelArtists,
    draw_objective_panel,
    set_fixed_limits,
    update_objective_panel,
)

FloatArray = NDArray[np.float64]

#: ``exp(x)`` overflows to ``inf`` in float64 for ``x`` above this (about 709.78).
FLOAT64_EXP_LIMIT = float(np.log(np.finfo(np.float64).max))
#: ``exp(x)`` overflows to ``inf`` in float32 for ``x`` above this (about 88.72).
FLOAT32_EXP_LIMIT = float(np.log(np.float64(np.finfo(np.float32).max)))

#: The longest synthetic response, in tokens.
MAX_TOKENS = 1000
#: The seed of the response shown in the notebook.
RESPONSE_SEED = 0
#: The seed of the 64 responses of :func:`length_survey`.
SURVEY_SEED = 1234
SURVEY_RESPONSES = 64
#: Spread of the random per-token change of the policy, in log-odds.
TOKEN_NOISE = 0.12
#: The largest policy shift offered by the slider, in log-odds per token.
MAX_SHIFT = 4.0
EPS = ppo_clip.DEFAULT_EPS

#: Response lengths at which :func:`length_survey` evaluates the sequence ratio.
SURVEY_LENGTHS = np.unique(np.concatenate([[1, 2, 5, 10, 15], np.arange(25, MAX_TOKENS + 1, 25)]))


# --------------------------------------------------------------------------
# A synthetic response
# --------------------------------------------------------------------------


def _token_logprobs(rng: np.random.Generator, tokens: int) -> FloatArray:
    """The old policy's log-probability of each sampled token.

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
    """A seeded response of :data:`MAX_TOKENS` tokens scored by an old and a new policy.

    ``logp_old[t]`` is the old policy's log-probability of token t;
    ``noise[t]`` the random part of the policy change at token t (log-odds).
    :meth:`logp_new` gives the new policy's log-probabilities for a shift.
    """

    logp_old: FloatArray
    noise: FloatArray

    def logp_new(self, shift: float) -> FloatArray:
        """The new policy's per-token log-probabilities for a log-odds ``shift``."""
        return shifted_logprobs(self.logp_old, shift, self.noise)

    def sequence_logprobs(self, length: int, shift: float) -> tuple[float, float]:
        """``(sum of new, sum of old)`` log-probabilities of the first ``length`` tokens."""
        return float(np.sum(self.logp_new(shift)[:length])), float(np.sum(self.logp_old[:length]))


def synthetic_response(seed: int = RESPONSE_SEED, tokens: int = MAX_TOKENS) -> SyntheticResponse:
    """A deterministic synthetic response (no language model is downloaded or run)."""
    rng = np.random.default_rng(seed)
    logp_old = _token_logprobs(rng, tokens)
    noise = TOKEN_NOISE * rng.standard_normal(tokens)
    return SyntheticResponse(logp_old=logp_old, noise=noise)


# --------------------------------------------------------------------------
# Small display helpers
# --------------------------------------------------------------------------


class StaticFigure:
    """A matplotlib figure that displays itself as a PNG (no pyplot, shown once)."""

    def __init__(self, figure: Figure, description: str) -> None:
        self.figure = figure
        self.description = description

    def _repr_png_(self) -> bytes:
        return figure_to_png(self.figure)

    def __repr__(self) -> str:
        return f"<figure: {self.description}>"


def _table_html(header: Sequence[str], rows: Sequence[Sequence[str]], css_class: str) -> str:
    """A small HTML table with escaped cells."""
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return (
        f'<table class="{css_class}" style="border-collapse:collapse;font-family:monospace;'
        f'font-size:13px"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The same table as aligned plain text."""
    table = [list(header), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    return "\n".join(lines)


def _notes_html(notes: Sequence[str]) -> str:
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return f'<ul style="font-family:sans-serif;font-size:13px;margin:6px 0">{items}</ul>'


class _TableWithNotes:
    """Shows a demo as its table of ``rows()`` under ``HEADER`` followed by its ``notes()``.

    Subclasses set ``HEADER`` and ``CSS_NAME`` and define ``rows()`` and ``notes()``.
    """

    HEADER: tuple[str, ...]
    CSS_NAME: str

    def rows(self) -> list[list[str]]:
        raise NotImplementedError

    def notes(self) -> list[str]:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return (
            f'<div class="{self.CSS_NAME}">'
            + _table_html(self.HEADER, self.rows(), f"{self.CSS_NAME}-table")
            + _notes_html(self.notes())
            + "</div>"
        )

    def __repr__(self) -> str:
        return _text_table(self.HEADER, self.rows()) + "\n" + "\n".join(self.notes())


def format_ratio(value: float) -> str:
    """A ratio for a readout: ``inf`` spelled out, huge and tiny values in e-notation."""
    if math.isinf(value):
        return "inf (overflow)"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3e}"
    return f"{value:.4g}"


# --------------------------------------------------------------------------
# Where -1000 comes from
# --------------------------------------------------------------------------


def response_figure(response: SyntheticResponse | None = None) -> StaticFigure:
    """Per-token log-probabilities of a response and their running sum.

    Left: each token's log-probability under the old policy.  Right: the
    response's log-probability (the running sum) against its length, reaching
    close to the contract's floor of -1000 at 1000 tokens.
    """
    response = response or synthetic_response()
    tokens = np.arange(1, response.logp_old.shape[0] + 1)
    running = np.cumsum(response.logp_old)
    with figure_style():
        figure = Figure(figsize=(10.0, 3.6), layout="constrained")
        left, right = figure.subplots(1, 2, width_ratios=(1.0, 1.25))
        left.plot(tokens, response.logp_old, ".", ms=2.5, color=BLUE, alpha=0.7)
        left.set(
            xlim=TOKEN_AXIS,
            ylim=(-4.0, 0.2),
            xlabel="token position t",
            ylabel="log π_old(token t | earlier tokens)",
            title="Each token: a log-probability between about −3.5 and 0",
        )
        right.plot(tokens, running, color=BLUE, lw=2.2, label="sum of the first t tokens")
        right.axhline(-1000.0, color=BLACK, ls="--", lw=1.3, label="contract floor: −1000")
        right.plot([tokens[-1]], [running[-1]], "o", color=BLUE, ms=7)
        right.annotate(
            f"{running[-1]:.1f} after {tokens[-1]} tokens",
            (tokens[-1], running[-1]),
            xytext=(-10, 14),
            textcoords="offset points",
            ha="right",
            fontsize="small",
            color=BLUE,
        )
        right.set(
            xlim=(0, MAX_TOKENS * 1.02),
            ylim=(-1080.0, 30.0),
            xlabel="response length (tokens)",
            ylabel="log π_old(response)",
            title="The response: the sum of its tokens' log-probabilities",
        )
        right.legend(loc="lower left")
    return StaticFigure(figure, "per-token log-probabilities and their running sum")


# --------------------------------------------------------------------------
# Naive formulas, for demonstration only
# --------------------------------------------------------------------------


def naive_ratio(logp_new: ArrayLike, logp_old: ArrayLike) -> FloatArray:
    """DEMONSTRATION ONLY: ``exp(logp_new - logp_old)`` with no care for overflow.

    Exists to show failure: above a log-ratio of about 709.78 it returns
    ``inf`` and numpy raises an overflow floating-point error.  Use
    :func:`ppo_clip.clip_breakdown` for real work.
    """
    return np.exp(np.asarray(logp_new, dtype=np.float64) - np.asarray(logp_old, dtype=np.float64))


def naive_clipped_objective(
    ratio: ArrayLike, advantages: ArrayLike, eps: float = EPS
) -> FloatArray:
    """DEMONSTRATION ONLY: ``min(r*A, clip(r, 1-eps, 1+eps)*A)`` written the textbook way.

    Exists to show failure: for a sample with ``A == 0`` and ``r == inf`` it
    computes ``inf * 0``, which is NaN in IEEE arithmetic, and the NaN then
    poisons the batch mean.  :mod:`ppo_clip` never forms that product.
    """
    r = np.asarray(ratio, dtype=np.float64)
    a = np.asarray(advantages, dtype=np.float64)
    return np.minimum(r * a, np.clip(r, 1.0 - eps, 1.0 + eps) * a)


def naive_loss(objective_terms: ArrayLike) -> float:
    """DEMONSTRATION ONLY: ``-mean(terms)``; one NaN term makes the whole loss NaN."""
    return float(-np.mean(np.asarray(objective_terms, dtype=np.float64)))


def naive_float32_ratio(p_new: float, p_old: float) -> np.float32:
    """DEMONSTRATION ONLY: the ratio from float32 log-probabilities, computed in float32.

    Exists to show failure: for ``p_new = 0.6, p_old = 0.5`` (a ratio of
    exactly 1.2) numpy's float32 ``log`` and ``exp`` give 1.2000002 on most
    x86 machines (the last digit depends on the library), so a sample that is
    exactly on the boundary in float64 lands on one side of it by rounding.
    """
    return np.exp(np.log(np.float32(p_new)) - np.log(np.float32(p_old)))


def naive_float32_rounded_ratio(ratio: float) -> np.float32:
    """DEMONSTRATION ONLY: ``exp(float32(log(ratio)))``: the log rounded to float32 first.

    For ``ratio = 1.2`` this gives 1.1999999 on most machines: rounding can
    land on either side of the boundary.
    """
    return np.exp(np.float32(np.log(ratio)))


def naive_float32_is_clipped(ratio: np.float32, advantage: float, eps: float = EPS) -> bool:
    """DEMONSTRATION ONLY: the contract's strict clip rule, evaluated in float32."""
    r = np.float32(ratio)
    one, bound = np.float32(1.0), np.float32(eps)
    if advantage > 0:
        return bool(r > one + bound)
    if advantage < 0:
        return bool(r < one - bound)
    return False


@contextmanager
def floating_point_errors() -> Iterator[list[str]]:
    """Catch numpy's floating-point errors in a block instead of printing warnings.

    Yields a list that collects one entry per error numpy signalled
    (``"overflow"``, ``"invalid value"``, ``"divide by zero"``); underflow to
    0 is ignored, as numpy does by default.
    """
    caught: list[str] = []

    def record(kind: str, _flag: int) -> None:
        caught.append(kind)

    with np.errstate(over="call", invalid="call", divide="call", under="ignore", call=record):
        yield caught


# --------------------------------------------------------------------------
# The overflow demo
# --------------------------------------------------------------------------

#: The four responses of the overflow batch: (seed, length, shift, advantage).
OVERFLOW_BATCH = (
    (11, 40, 0.0, 1.0),
    (12, 1000, 4.0, 0.0),
    (13, 120, 0.0, -0.5),
    (14, 400, 1.0, 2.0),
)


@dataclass(frozen=True, repr=False)
class OverflowDemo(_TableWithNotes):
    """A batch whose ratio overflows, computed naively and by :mod:`ppo_clip`.

    ``logp_new``/``logp_old`` are sequence log-probabilities (sums over
    tokens); ``naive_*`` hold what the naive formula gives and the errors
    numpy signalled while computing them (caught, not printed).
    """

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    lengths: tuple[int, ...]
    naive_ratio: FloatArray
    naive_terms: FloatArray
    naive_loss: float
    ratio_errors: tuple[str, ...]
    objective_errors: tuple[str, ...]
    module: ppo_clip.ClipBreakdown
    module_loss: float

    def rows(self) -> list[list[str]]:
        """One row of strings per sample for the tables."""
        rows = []
        for i in range(self.advantages.shape[0]):
            rows.append(
                [
                    str(i),
                    str(self.lengths[i]),
                    f"{self.logp_new[i]:.2f}",
                    f"{self.logp_old[i]:.2f}",
                    f"{self.logp_new[i] - self.logp_old[i]:.2f}",
                    f"{self.advantages[i]:+.1f}",
                    format_ratio(float(self.module.ratio[i])),
                    f"{self.naive_terms[i]:.4g}",
                    f"{self.module.objective_term[i]:.4g}",
                    "yes" if self.module.is_clipped[i] else "no",
                ]
            )
        return rows

    CSS_NAME = "ppo-numerics-overflow"
    HEADER = (
        "sample",
        "tokens",
        "log π_new",
        "log π_old",
        "log-ratio",
        "A",
        "ratio r",
        "naive term",
        "ppo_clip term",
        "clipped",
    )

    def notes(self) -> list[str]:
        """What happened, in words, built from the numbers."""
        overflowed = np.flatnonzero(np.isinf(self.module.ratio))
        poisoned = np.flatnonzero(np.isnan(self.naive_terms))
        notes = [
            f"Overflow: sample(s) {_listed(overflowed)} have a log-ratio above "
            f"{FLOAT64_EXP_LIMIT:.2f}, so exp gives inf in float64. numpy signalled "
            f"{_described(self.ratio_errors)} while computing the naive ratio.",
            f"Naive formula: min(r·A, clip(r)·A) for sample(s) {_listed(poisoned)} computes "
            f"inf × 0 = NaN (numpy signalled {_described(self.objective_errors)}), "
            f"so the naive loss is {self.naive_loss}.",
            f"ppo_clip writes the product r·A only where A ≠ 0 and an exact 0 elsewhere, so "
            f"a zero advantage contributes nothing and the loss is {self.module_loss!r}.",
        ]
        return notes


def _listed(indices: NDArray[np.intp]) -> str:
    return ", ".join(str(int(i)) for i in indices) if len(indices) else "none"


def _described(errors: Sequence[str]) -> str:
    if not errors:
        return "no error"
    kinds = list(dict.fromkeys(errors))
    return " and ".join(f"'{kind}'" for kind in kinds)


def overflow_batch() -> tuple[FloatArray, FloatArray, FloatArray, tuple[int, ...]]:
    """The overflow batch's sequence log-probabilities, advantages and lengths."""
    new, old, advantages, lengths = [], [], [], []
    for seed, length, shift, advantage in OVERFLOW_BATCH:
        response_new, response_old = synthetic_response(seed).sequence_logprobs(length, shift)
        new.append(response_new)
        old.append(response_old)
        advantages.append(advantage)
        lengths.append(length)
    return np.array(new), np.array(old), np.array(advantages), tuple(lengths)


def overflow_demo(eps: float = EPS) -> OverflowDemo:
    """Compute the overflow batch naively and with :mod:`ppo_clip`; errors are caught."""
    new, old, advantages, lengths = overflow_batch()
    with floating_point_errors() as ratio_errors:
        ratio = naive_ratio(new, old)
    with floating_point_errors() as objective_errors:
        terms = naive_clipped_objective(ratio, advantages, eps)
        loss = naive_loss(terms)
    breakdown = ppo_clip.clip_breakdown(new, old, advantages, eps)
    return OverflowDemo(
        logp_new=new,
        logp_old=old,
        advantages=advantages,
        lengths=lengths,
        naive_ratio=ratio,
        naive_terms=terms,
        naive_loss=loss,
        ratio_errors=tuple(ratio_errors),
        objective_errors=tuple(objective_errors),
        module=breakdown,
        module_loss=ppo_clip.ppo_clip_loss(new, old, advantages, eps),
    )


# --------------------------------------------------------------------------
# The exact boundary, in float64 and in float32
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class BoundaryCase:
    """One way of computing the ratio of ``p_new = 0.6`` to ``p_old = 0.5`` (exactly 1.2)."""

    label: str
    ratio: float
    ratio_text: str
    is_clipped: bool
    grad: float


@dataclass(frozen=True, repr=False)
class BoundaryDemo(_TableWithNotes):
    """A sample whose ratio is exactly ``1 + eps``, computed four ways (A = +1, N = 1)."""

    cases: tuple[BoundaryCase, ...]
    inside_slope: float
    outside_slope: float
    step: float

    CSS_NAME = "ppo-numerics-boundary"
    HEADER = (
        "how the ratio is computed",
        "ratio r",
        "r > 1.2 ?",
        "clipped",
        "d loss / d log π_new",
    )

    def rows(self) -> list[list[str]]:
        return [
            [
                case.label,
                case.ratio_text,
                "yes" if case.ratio > 1.2 else "no",
                "yes" if case.is_clipped else "no",
                f"{case.grad:.6g}",
            ]
            for case in self.cases
        ]

    def notes(self) -> list[str]:
        exact = self.cases[0]
        return [
            f"In float64 exp(log 0.6 − log 0.5) is exactly 1.2: on the boundary, not clipped "
            f"(strict rule), gradient −r·A/N = {exact.grad:g}.",
            f"Slopes of ppo_clip_loss just inside and just outside the band "
            f"(step {self.step:g} in log π_new): {self.inside_slope:.6f} and "
            f"{self.outside_slope:g}. The boundary keeps the inside slope.",
            "float32 has no number 1.2 (the nearest is 1.20000005); after float32 log and exp "
            "the ratio lands a rounding step above or below the edge, and the clip decision "
            "follows the rounding, not the maths.",
        ]


def _module_case(label: str, logp_new: float, logp_old: float, eps: float) -> BoundaryCase:
    breakdown = ppo_clip.clip_breakdown([logp_new], [logp_old], [1.0], eps)
    ratio = float(breakdown.ratio[0])
    return BoundaryCase(
        label, ratio, repr(ratio), bool(breakdown.is_clipped[0]), float(breakdown.grad[0])
    )


def _naive_float32_case(label: str, ratio32: np.float32, eps: float) -> BoundaryCase:
    clipped = naive_float32_is_clipped(ratio32, 1.0, eps)
    grad = 0.0 if clipped else -float(ratio32)
    text = f"{ratio32!s} (float32; exactly {float(ratio32):.10f}…)"
    return BoundaryCase(label, float(ratio32), text, clipped, grad)


def boundary_demo() -> BoundaryDemo:
    """The ratio 0.6 / 0.5, exactly 1.2 = 1 + eps in float64, computed four ways (A = +1).

    Rows: the module on float64 log-probabilities (exactly 1.2, kept); float32
    throughout (naive); float64 ``log(1.2)`` rounded to float32 then ``exp``
    (naive); the module on log-probabilities that were computed in float32.
    Also the one-sided slopes of :func:`ppo_clip.ppo_clip_loss` at the edge.
    """
    p_new, p_old, eps = 0.6, 0.5, 0.2
    logp_new, logp_old = math.log(p_new), math.log(p_old)
    cases = (
        _module_case("float64 throughout (ppo_clip)", logp_new, logp_old, eps),
        _naive_float32_case(
            "float32 throughout: exp(log f32(0.6) − log f32(0.5))",
            naive_float32_ratio(p_new, p_old),
            eps,
        ),
        _naive_float32_case("float32: exp(f32(log 1.2))", naive_float32_rounded_ratio(1.2), eps),
        _module_case(
            "float32 log-probs, then ppo_clip (float64)",
            float(np.log(np.float32(p_new))),
            float(np.log(np.float32(p_old))),
            eps,
        ),
    )
    step = 1e-7

    def loss(shift: float) -> float:
        return ppo_clip.ppo_clip_loss([logp_new + shift], [logp_old], [1.0], eps)

    inside = (loss(0.0) - loss(-step)) / step
    outside = (loss(step) - loss(0.0)) / step
    return BoundaryDemo(cases, inside, outside, step)


# --------------------------------------------------------------------------
# Token-level versus sequence-level ratios
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


@functools.lru_cache(maxsize=1)
def _survey_responses() -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(SURVEY_SEED)
    old = np.stack([_token_logprobs(rng, MAX_TOKENS) for _ in range(SURVEY_RESPONSES)])
    noise = TOKEN_NOISE * rng.standard_normal(old.shape)
    return old, noise


@functools.lru_cache(maxsize=256)
def length_survey(shift: float, eps: float = EPS) -> LengthSurvey:
    """Fractions of sequences (and tokens) outside the band, by response length.

    For each length in :data:`SURVEY_LENGTHS`, the first ``length`` tokens of
    each of the :data:`SURVEY_RESPONSES` seeded responses form a sequence; the
    module decides whether its ratio is outside ``[1 - eps, 1 + eps]`` and
    whether it overflowed.  Token fractions count every token of the first
    ``length`` of each response.
    """
    old, noise = _survey_responses()
    new = shifted_logprobs(old, shift, noise)
    responses, lengths = old.shape[0], SURVEY_LENGTHS
    sums_new = np.cumsum(new, axis=1)[:, lengths - 1].ravel()
    sums_old = np.cumsum(old, axis=1)[:, lengths - 1].ravel()
    sequences = ppo_clip.clip_breakdown(sums_new, sums_old, np.ones_like(sums_new), eps)
    outside = sequences.outside_band.reshape(responses, lengths.size)
    overflow64 = np.isinf(sequences.ratio).reshape(responses, lengths.size)
    overflow32 = (sums_new - sums_old > FLOAT32_EXP_LIMIT).reshape(responses, lengths.size)
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


@dataclass(frozen=True)
class TokenView:
    """Everything the token app shows for one response length and shift."""

    length: int
    shift: float
    tokens: ppo_clip.ClipBreakdown
    sequence: ppo_clip.ClipBreakdown
    sequence_negative: ppo_clip.ClipBreakdown
    geometric_mean: float
    product: float
    logp_new_sum: float
    logp_old_sum: float
    running_log_ratio: FloatArray


def token_view(
    response: SyntheticResponse, length: int, shift: float, eps: float = EPS
) -> TokenView:
    """Per-token and sequence ratios of the first ``length`` tokens, from :mod:`ppo_clip`.

    The sequence ratio is ``clip_breakdown([sum new], [sum old], [A]).ratio``
    (for A = +1 and A = -1); the geometric mean of the per-token ratios is the
    ratio of the mean log-probabilities; ``product`` multiplies the
    per-token ratios (it overflows exactly when the sequence ratio does).
    """
    new = response.logp_new(shift)[:length]
    old = response.logp_old[:length]
    tokens = ppo_clip.clip_breakdown(new, old, np.ones(length), eps)
    new_sum, old_sum = float(np.sum(new)), float(np.sum(old))
    sequence = ppo_clip.clip_breakdown([new_sum], [old_sum], [1.0], eps)
    negative = ppo_clip.clip_breakdown([new_sum], [old_sum], [-1.0], eps)
    mean = ppo_clip.clip_breakdown([new_sum / length], [old_sum / length], [1.0], eps)
    with np.errstate(over="ignore", under="ignore"):
        product = float(np.prod(tokens.ratio))
    return TokenView(
        length=length,
        shift=shift,
        tokens=tokens,
        sequence=sequence,
        sequence_negative=negative,
        geometric_mean=float(mean.ratio[0]),
        product=product,
        logp_new_sum=new_sum,
        logp_old_sum=old_sum,
        running_log_ratio=np.cumsum(new) - np.cumsum(old),
    )


#: Fixed axis ranges of the token app (they never move with the sliders).  A
#: token's ratio is at most 1 / (its old probability) <= 1 / 0.03 whatever the
#: shift, and the smallest ratios (shift 0) stay above 0.7.
TOKEN_RATIO_LIMITS = (0.6, 36.0)
#: The token panel's ratio axis is ``asinh(log(r) / TOKEN_STRETCH)``: logarithmic
#: for large ratios, stretched near r = 1, so the band and the ratios around it
#: are as easy to read at shift 0 as the large ratios are at the largest shift.
TOKEN_STRETCH = 0.5
#: Thresholds (not objectives) are drawn in black and grey, told apart by line style.
FLOAT32_STYLE = {"color": GREY, "ls": "--"}
FLOAT64_STYLE = {"color": BLACK, "ls": ":"}
LOG_RATIO_LIMITS = (-40.0, 1500.0)
TOKEN_AXIS = (-10.0, MAX_TOKENS + 10.0)


def stretch_ratio(ratio: ArrayLike) -> FloatArray:
    """The token panel's axis transform: ``asinh(log(r) / TOKEN_STRETCH)`` (monotonic)."""
    r = np.maximum(np.asarray(ratio, dtype=np.float64), np.finfo(np.float64).tiny)
    return np.arcsinh(np.log(r) / TOKEN_STRETCH)


def unstretch_ratio(position: ArrayLike) -> FloatArray:
    """The inverse of :func:`stretch_ratio`."""
    with np.errstate(over="ignore"):
        return np.exp(TOKEN_STRETCH * np.sinh(np.asarray(position, dtype=np.float64)))


class TokenRatioFigure:
    """Per-token ratios (top), the sequence log-ratio (bottom left), the survey (bottom right)."""

    def __init__(self, response: SyntheticResponse | None = None, eps: float = EPS) -> None:
        self.response = response or synthetic_response()
        self.eps = eps
        band = ppo_clip.ratio_sweep([1.0], 1.0, eps)
        self.lower, self.upper = band.lower, band.upper
        with figure_style():
            self.figure = Figure(figsize=(10.0, 7.0), layout="constrained")
            grid = self.figure.add_gridspec(2, 2, height_ratios=(1.0, 1.1))
            self.tokens_ax = self.figure.add_subplot(grid[0, :])
            self.running_ax = self.figure.add_subplot(grid[1, 0])
            self.survey_ax = self.figure.add_subplot(grid[1, 1])
            self._draw_tokens_axes()
            self._draw_running_axes()
            self._draw_survey_axes()
        self.view: TokenView | None = None

    def _draw_tokens_axes(self) -> None:
        ax = self.tokens_ax
        ax.set_yscale("function", functions=(stretch_ratio, unstretch_ratio))
        ax.axhspan(self.lower, self.upper, color=COLORS["band"], alpha=0.3, lw=0)
        ax.axhline(1.0, color=COLORS["start"], ls=":", lw=1.0)
        (self.token_points,) = ax.plot([], [], ".", ms=4, color=BLUE, label="per-token ratio")
        (self.token_outside,) = ax.plot(
            [], [], ".", ms=5, color=VERMILLION, label="per-token ratio outside the band"
        )
        (self.geometric_line,) = ax.plot(
            [], [], color=GREEN, lw=2.4, label="geometric mean of the per-token ratios"
        )
        ax.fill_between(
            [],
            [],
            color=COLORS["band"],
            alpha=0.3,
            label=f"clip band [{self.lower:.1f}, {self.upper:.1f}]",
        )
        ticks = sorted({0.6, self.lower, 1.0, self.upper, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0})
        ax.set_yticks(ticks, [f"{tick:g}" for tick in ticks])
        ax.minorticks_off()
        ax.set(
            xlim=TOKEN_AXIS,
            ylim=TOKEN_RATIO_LIMITS,
            xlabel="token position t",
            ylabel="π_new / π_old of token t",
        )
        # Above the axes, so no dot is ever hidden behind it.
        ax.legend(
            loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=4, fontsize="small", frameon=False
        )
        ax.set_title(
            "Each token's ratio (dots) and their geometric mean (green line); "
            "axis stretched around 1",
            pad=22,
        )

    def _draw_running_axes(self) -> None:
        ax = self.running_ax
        ax.set_yscale("symlog", linthresh=1.0)
        ax.axhspan(
            math.log(self.lower),
            math.log(self.upper),
            color=COLORS["band"],
            alpha=0.45,
            lw=0,
            label="clip band (as a log-ratio)",
        )
        ax.axhline(
            FLOAT32_EXP_LIMIT,
            lw=1.4,
            label=f"float32 overflow ({FLOAT32_EXP_LIMIT:.2f})",
            **FLOAT32_STYLE,
        )
        ax.axhline(
            FLOAT64_EXP_LIMIT,
            lw=1.8,
            label=f"float64 overflow ({FLOAT64_EXP_LIMIT:.2f})",
            **FLOAT64_STYLE,
        )
        (self.running_line,) = ax.plot(
            [], [], color=BLUE, lw=2.0, label="log of the sequence ratio"
        )
        (self.running_end,) = ax.plot([], [], "o", color=BLUE, ms=7)
        ax.set_yticks([-10, -1, 0, 1, 10, 100, 1000], ["−10", "−1", "0", "1", "10", "100", "1000"])
        ax.set(
            xlim=TOKEN_AXIS,
            ylim=LOG_RATIO_LIMITS,
            xlabel="tokens so far",
            ylabel="Σ log π_new − Σ log π_old",
            title="The sequence ratio's log grows with the length",
        )
        ax.legend(loc="lower right", fontsize="small")

    def _draw_survey_axes(self) -> None:
        ax = self.survey_ax
        (self.survey_sequence,) = ax.plot(
            [], [], color=BLUE, lw=2.4, label="sequence ratio outside the band"
        )
        (self.survey_tokens,) = ax.plot(
            [], [], color=GREEN, lw=2.0, label="per-token ratios outside the band"
        )
        (self.survey_f32,) = ax.plot(
            [], [], lw=1.6, label="sequence ratio overflows float32", **FLOAT32_STYLE
        )
        (self.survey_f64,) = ax.plot(
            [], [], lw=1.8, label="sequence ratio overflows float64", **FLOAT64_STYLE
        )
        self.survey_marker = ax.axvline(0.0, color=GREY, lw=1.0, alpha=0.6)
        ax.set(
            xlim=TOKEN_AXIS,
            ylim=(-3, 103),
            xlabel="response length (tokens)",
            ylabel="% of 64 responses (or of their tokens)",
            title="64 responses, same policy change",
        )
        ax.legend(loc="center right", fontsize="small")

    def dynamic_artists(self) -> list[Artist]:
        return [
            self.token_points,
            self.token_outside,
            self.geometric_line,
            self.running_line,
            self.running_end,
            self.survey_sequence,
            self.survey_tokens,
            self.survey_f32,
            self.survey_f64,
            self.survey_marker,
            # Last, so the moving lines pass under the legends, not over them.
            self.running_ax.get_legend(),
            self.survey_ax.get_legend(),
        ]

    def update(self, length: int, shift: float) -> TokenView:
        """Redraw for the first ``length`` tokens and a policy shift; returns the values."""
        view = token_view(self.response, length, shift, self.eps)
        positions = np.arange(1, length + 1)
        outside = view.tokens.outside_band
        self.token_points.set_data(positions[~outside], view.tokens.ratio[~outside])
        self.token_outside.set_data(positions[outside], view.tokens.ratio[outside])
        self.geometric_line.set_data([0.5, length + 0.5], [view.geometric_mean] * 2)
        shown = np.clip(view.running_log_ratio, LOG_RATIO_LIMITS[0], LOG_RATIO_LIMITS[1])
        self.running_line.set_data(positions, shown)
        self.running_end.set_data([length], [shown[-1]])
        survey = length_survey(shift, self.eps)
        self.survey_sequence.set_data(survey.lengths, 100 * survey.sequence_outside)
        self.survey_tokens.set_data(survey.lengths, 100 * survey.token_outside)
        self.survey_f32.set_data(survey.lengths, 100 * survey.float32_overflow)
        self.survey_f64.set_data(survey.lengths, 100 * survey.float64_overflow)
        self.survey_marker.set_xdata([length, length])
        self.view = view
        return view


def _slider_style() -> dict[str, Any]:
    return {
        "style": {"description_width": "150px"},
        "layout": widgets.Layout(width="440px"),
        "continuous_update": True,
    }


class TokenRatioExplorer(App):
    """Sliders for the response length and the policy shift over :class:`TokenRatioFigure`."""

    description = "Per-token ratios versus the sequence ratio of a synthetic response"

    def __init__(self, length: int = MAX_TOKENS, shift: float = 0.0) -> None:
        self.plot = TokenRatioFigure()
        self.view = FigureView(self.plot.figure)
        self.view.animate(self.plot.dynamic_artists())
        self.length = widgets.IntSlider(
            value=length,
            min=1,
            max=MAX_TOKENS,
            step=1,
            description="response length",
            **_slider_style(),
        )
        self.shift = widgets.FloatSlider(
            value=shift,
            min=0.0,
            max=MAX_SHIFT,
            step=0.05,
            readout_format=".2f",
            description="policy shift (log-odds)",
            **_slider_style(),
        )
        for slider, name in ((self.length, "length"), (self.shift, "shift")):
            slider.add_class("ppo-main-slider")
            slider.add_class(f"ppo-numerics-{name}")
        self.readout = widgets.HTML()
        self.readout.add_class("ppo-numerics-token-readout")
        self.message = widgets.HTML()
        self.message.add_class("ppo-error")
        self.widget = widgets.VBox(
            [widgets.HBox([self.length, self.shift]), self.message, self.readout, self.view.output]
        )
        self.length.observe(self._redraw, names="value")
        self.shift.observe(self._redraw, names="value")
        self._redraw()

    def _redraw(self, _change: Any = None) -> None:
        try:
            view = self.plot.update(int(self.length.value), float(self.shift.value))
        except (TypeError, ValueError) as error:
            self.message.value = message_html(f"Could not redraw: {error}")
            return
        self.message.value = ""
        self.readout.value = token_readout_html(view)
        self.view.refresh()

    def static_fallback(self) -> dict[str, Any]:
        return _fallback(self.readout.value, self.view.last_png or figure_to_png(self.plot.figure))


def _fallback(readout: str, png: bytes) -> dict[str, Any]:
    """The PNG, and an HTML page with the readout above the same PNG."""
    image = base64.b64encode(png).decode("ascii")
    tag = f'<img src="data:image/png;base64,{image}" style="max-width:100%">'
    return {"png": png, "html_fallback": readout + tag}


def _sequence_verdict(view: TokenView) -> str:
    ratio = float(view.sequence.ratio[0])
    lower, upper = view.sequence.lower, view.sequence.upper
    if math.isinf(ratio):
        return "with A > 0 clipped (zero gradient); with A < 0 the loss is +inf"
    if bool(view.sequence.outside_band[0]):
        favourable = "A > 0" if ratio > upper else "A < 0"
        other = "A < 0" if ratio > upper else "A > 0"
        weight = format_ratio(ratio)
        return (
            f"outside [{lower:.1f}, {upper:.1f}]: with {favourable} clipped (zero gradient); "
            f"with {other} its gradient is weighted by r = {weight}"
        )
    return f"inside [{lower:.1f}, {upper:.1f}]: not clipped for either sign of A"


def _log_ratio_text(log_ratio: float) -> str:
    if log_ratio > FLOAT64_EXP_LIMIT:
        verdict = f"above {FLOAT64_EXP_LIMIT:.2f}: exp overflows in float64 and float32"
    elif log_ratio > FLOAT32_EXP_LIMIT:
        verdict = f"above {FLOAT32_EXP_LIMIT:.2f}: exp would overflow in float32"
    else:
        verdict = f"below {FLOAT32_EXP_LIMIT:.2f}: no overflow"
    return f"{log_ratio:.2f} ({verdict})"


def token_readout_html(view: TokenView) -> str:
    """The token app's numbers in a small table (all from :mod:`ppo_clip`)."""
    outside = int(np.count_nonzero(view.tokens.outside_band))
    rows = [
        ("sequence log-probability, old policy", f"Σ log π_old = {view.logp_old_sum:.2f}"),
        ("sequence log-probability, new policy", f"Σ log π_new = {view.logp_new_sum:.2f}"),
        ("log of the sequence ratio", _log_ratio_text(view.logp_new_sum - view.logp_old_sum)),
        (
            "sequence ratio exp(Σ log π_new − Σ log π_old)",
            f"{format_ratio(float(view.sequence.ratio[0]))}: {_sequence_verdict(view)}",
        ),
        ("product of the per-token ratios", format_ratio(view.product)),
        ("geometric mean of the per-token ratios", f"{view.geometric_mean:.4f}"),
        (
            "per-token ratios outside the band",
            f"{outside} of {view.length} ({100 * outside / view.length:.1f} %)",
        ),
    ]
    body = "".join(
        f'<tr><td style="padding:1px 10px 1px 0">{html.escape(name)}</td>'
        f"<td><b>{html.escape(value)}</b></td></tr>"
        for name, value in rows
    )
    return f'<table style="font-family:sans-serif;font-size:13px">{body}</table>'


# --------------------------------------------------------------------------
# The variants on notebook 1's axes
# --------------------------------------------------------------------------

#: The ratio axis of the variants figure: wider than notebook 1's, so that the
#: usual dual-clip cap c = 3 (Ye et al. 2020; verl's default) shows with room.
VARIANT_R_MAX = 4.0
#: Fixed y limits of the variants figure for A = +1 and A = -1.
VARIANT_REACH = 4.2
#: DAPO's "clip-higher" bounds.
DEFAULT_EPS_LOW = 0.2
DEFAULT_EPS_HIGH = 0.28
DEFAULT_CAP = 3.0
COLUMN_TITLES = {
    +1: "A = +1: an action that did better than expected",
    -1: "A = −1: an action that did worse than expected",
}
#: The cap slider stops short of the axis end, so the flat part always shows.
CAP_RANGE = (1.05, VARIANT_R_MAX - 0.1)


class VariantsFigure:
    """Notebook 1's objective/gradient panels for A = +1 and A = -1, with the variants.

    Each column is drawn by :func:`ppo_viz.surrogate.draw_objective_panel`
    with ``eps_low``, ``eps_high`` and ``dual_clip`` passed to
    :func:`ppo_clip.ratio_sweep`.  The zero-gradient shading is split into the
    clipped span left of r = 1 and the one right of it, so the dual-clip
    region (A < 0, r > c) is shaded on its own.
    """

    def __init__(
        self,
        eps_low: float = DEFAULT_EPS_LOW,
        eps_high: float = DEFAULT_EPS_HIGH,
        dual_clip: float | None = DEFAULT_CAP,
    ) -> None:
        with figure_style():
            self.figure = Figure(figsize=(10.0, 6.6), layout="constrained")
            axes = self.figure.subplots(2, 2, sharex="col")
            self.columns: dict[int, PanelArtists] = {}
            self.cap_lines: dict[int, tuple[Line2D, Line2D]] = {}
            for column, sign in enumerate((+1, -1)):
                top, bottom = axes[0, column], axes[1, column]
                panel = draw_objective_panel(top, bottom, float(sign), EPS, r_max=VARIANT_R_MAX)
                panel.bands[0].set_label("clip band [1 − ε_low, 1 + ε_high]")
                panel.objective.set_label("kept term (with the variant)")
                top.set_title(COLUMN_TITLES[sign])
                self.columns[sign] = panel
                self.cap_lines[sign] = tuple(
                    ax.axvline(np.nan, color=BLACK, ls="-.", lw=1.5) for ax in (top, bottom)
                )
                set_fixed_limits(top, bottom, sign, reach=VARIANT_REACH, r_max=VARIANT_R_MAX)
            self.cap_lines[-1][0].set_label("dual-clip cap r = c")
            handles, labels = axes[0, 1].get_legend_handles_labels()
            order = [i for i, name in enumerate(labels) if name and "worked-example" not in name]
            self.figure.legend(
                [handles[i] for i in order],
                [labels[i] for i in order],
                loc="outside lower center",
                ncols=4,
                frameon=False,
            )
        self.sweeps: dict[int, ppo_clip.ClipBreakdown] = {}
        self.update(eps_low, eps_high, dual_clip)

    def dynamic_artists(self) -> list[Artist]:
        artists: list[Artist] = []
        for sign, panel in self.columns.items():
            moving = [a for a in panel.dynamic_artists() if a is not panel.objective_ax.title]
            artists += [*self.cap_lines[sign], *moving]
        return artists

    def variant(self, eps_low: float, eps_high: float, dual_clip: float | None) -> dict[str, Any]:
        """The keywords passed to :func:`ppo_clip.ratio_sweep`."""
        return {"eps_low": eps_low, "eps_high": eps_high, "dual_clip": dual_clip}

    def update(self, eps_low: float, eps_high: float, dual_clip: float | None) -> None:
        """Redraw both columns; raises ``ValueError`` (from ppo_clip) on bad settings."""
        variant = self.variant(eps_low, eps_high, dual_clip)
        ppo_clip.ratio_sweep([1.0], 1.0, EPS, **variant)  # validate before moving anything
        for sign, panel in self.columns.items():
            sweep = update_objective_panel(panel, float(sign), EPS, r_max=VARIANT_R_MAX, **variant)
            self.sweeps[sign] = sweep
            cap_x = dual_clip if (dual_clip is not None and sign < 0) else np.nan
            for line in self.cap_lines[sign]:
                line.set_xdata([cap_x, cap_x])


def _where_flat(sign: int, sweep: ppo_clip.ClipBreakdown) -> str:
    """Where one column's term is flat (clipped), from its sweep, for the readout."""
    if sign > 0:
        return f"A = +1: flat (clipped) where r > {sweep.upper:.2f}"
    parts = []
    if sweep.lower > 0.0:
        parts.append(f"r < {sweep.lower:.2f}")
    if sweep.dual_clip is not None:
        parts.append(f"r > {sweep.dual_clip:.2f}")
    if not parts:
        return f"A = −1: never clipped (1 − ε_low = {sweep.lower:.2f})"
    return "A = −1: flat (clipped) where " + " or ".join(parts)


class VariantsExplorer(App):
    """Sliders for ``eps_low``, ``eps_high`` and the dual-clip cap over :class:`VariantsFigure`."""

    description = "PPO's clipped objective with asymmetric bounds and a dual-clip cap"

    def __init__(
        self,
        eps_low: float = DEFAULT_EPS_LOW,
        eps_high: float = DEFAULT_EPS_HIGH,
        dual_clip: float | None = DEFAULT_CAP,
    ) -> None:
        self.plot = VariantsFigure(eps_low, eps_high, dual_clip)
        self.view = FigureView(self.plot.figure)
        self.view.animate(self.plot.dynamic_artists())
        eps_slider = {"min": 0.0, "max": 1.0, "step": 0.01, "readout_format": ".2f"}
        self.eps_low = widgets.FloatSlider(
            value=eps_low, description="ε_low (lower bound)", **eps_slider, **_slider_style()
        )
        self.eps_high = widgets.FloatSlider(
            value=eps_high, description="ε_high (upper bound)", **eps_slider, **_slider_style()
        )
        self.cap = widgets.FloatSlider(
            value=DEFAULT_CAP if dual_clip is None else dual_clip,
            min=CAP_RANGE[0],
            max=CAP_RANGE[1],
            step=0.05,
            readout_format=".2f",
            description="dual-clip cap c",
            disabled=dual_clip is None,
            **_slider_style(),
        )
        self.cap_on = widgets.Checkbox(
            value=dual_clip is not None, description="dual clip on", indent=False
        )
        for control, name in (
            (self.eps_low, "eps-low"),
            (self.eps_high, "eps-high"),
            (self.cap, "cap"),
        ):
            control.add_class("ppo-main-slider")
            control.add_class(f"ppo-numerics-{name}")
        self.cap_on.add_class("ppo-numerics-cap-on")
        self.readout = widgets.HTML()
        self.readout.add_class("ppo-numerics-variants-readout")
        self.message = widgets.HTML()
        self.message.add_class("ppo-error")
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.eps_low, self.eps_high]),
                widgets.HBox([self.cap, self.cap_on]),
                self.message,
                self.readout,
                self.view.output,
            ]
        )
        for control in (self.eps_low, self.eps_high, self.cap, self.cap_on):
            control.observe(self._redraw, names="value")
        self._redraw()

    @property
    def dual_clip(self) -> float | None:
        """The cap currently in force, or ``None`` when dual clip is off."""
        return float(self.cap.value) if self.cap_on.value else None

    def _redraw(self, _change: Any = None) -> None:
        self.cap.disabled = not self.cap_on.value
        try:
            self.plot.update(float(self.eps_low.value), float(self.eps_high.value), self.dual_clip)
        except (TypeError, ValueError) as error:
            self.message.value = message_html(f"Could not use these settings: {error}")
            return
        self.message.value = ""
        self.readout.value = variants_readout_html(self.plot.sweeps)
        self.view.refresh()

    def static_fallback(self) -> dict[str, Any]:
        return _fallback(self.readout.value, self.view.last_png or figure_to_png(self.plot.figure))


def variants_readout_html(sweeps: dict[int, ppo_clip.ClipBreakdown]) -> str:
    """The band, the cap and where each column is flat, from the sweeps' own values."""
    sweep = sweeps[-1]
    cap = (
        f"dual clip on: for A &lt; 0 the term is capped at c·A beyond r = {sweep.dual_clip:.2f}"
        if sweep.dual_clip is not None
        else "dual clip off: for A &lt; 0 the term r·A keeps falling as r grows"
    )
    flat = ". ".join(html.escape(_where_flat(sign, sweeps[sign])) for sign in (+1, -1))
    return (
        '<div style="font-family:sans-serif;font-size:13px">'
        f"Clip band <b>[{sweep.lower:.2f}, {sweep.upper:.2f}]</b> "
        f"(ε_low = {1 - sweep.lower:.2f}, ε_high = {sweep.upper - 1:.2f}); {cap}.<br>"
        f"{flat}.</div>"
    )
