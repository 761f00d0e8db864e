"""What the clip does outside the band, for a whole response and for a rare token.

* :func:`outside_band_demo`: one response's sequence ratio at several
  log-ratios, for ``A = +1`` and ``A = -1``.  Outside the band is not the
  same as clipped: on the favourable side the gradient is 0, on the other
  side it is ``-r*A/N`` with ``r`` far from 1, so tiny below the band and huge
  above it.
* :func:`rare_token_demo`: plain gradient steps on PPO's loss for a softmax
  over three tokens of one context, whose first token is rare.  The upper
  bound ``1 + eps`` is where the push of the rare token's own sample stops,
  not a cap on its probability: one large step, or another sample of the
  same context, carries it past the edge.

Every ratio, clip decision and gradient comes from :mod:`ppo_clip`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

import ppo_clip
from ppo_viz.html import page, table, tag
from ppo_viz.numbers import rounded
from ppo_viz.numerics.demos import yes_no
from ppo_viz.numerics.response import EPS

FloatArray = NDArray[np.float64]


# --------------------------------------------------------------------------
# A response's ratio outside the band, for both signs of the advantage
# --------------------------------------------------------------------------

#: Sequence log-ratios of the demo: far below, below, inside, above and far above the band.
OUTSIDE_LOG_RATIOS = (-20.0, -3.0, 0.1, 3.0, 20.0)
#: The old log-probability of the demo's response (a long response's, well within the contract).
SEQUENCE_LOGP_OLD = -600.0


@dataclass(frozen=True, repr=False)
class OutsideBandDemo:
    """One response (N = 1) at each of ``log_ratios``, with ``A = +1`` and with ``A = -1``.

    ``positive[i]`` and ``negative[i]`` are :func:`ppo_clip.clip_breakdown`
    of the response at ``log_ratios[i]`` with each advantage.
    """

    log_ratios: tuple[float, ...]
    positive: tuple[ppo_clip.ClipBreakdown, ...]
    negative: tuple[ppo_clip.ClipBreakdown, ...]

    HEADER = (
        "log-ratio",
        "ratio r",
        "A = +1: clipped",
        "A = +1: d loss / d log π_new",
        "A = −1: clipped",
        "A = −1: d loss / d log π_new",
    )

    def rows(self) -> list[list[str]]:
        """One row of text per log-ratio, as the table shows it."""
        return [
            [
                rounded(log_ratio),
                rounded(plus.ratio[0]),
                yes_no(plus.is_clipped[0]),
                rounded(plus.grad[0]),
                yes_no(minus.is_clipped[0]),
                rounded(minus.grad[0]),
            ]
            for log_ratio, plus, minus in zip(
                self.log_ratios, self.positive, self.negative, strict=True
            )
        ]

    def notes(self) -> list[str]:
        """The table in words, built from its numbers."""
        lower, upper = self.positive[0].lower, self.positive[0].upper
        inside = [p for p in self.positive if lower <= p.ratio[0] <= upper]
        below = [i for i, p in enumerate(self.positive) if p.ratio[0] < lower]
        above = [i for i, p in enumerate(self.positive) if p.ratio[0] > upper]
        smallest, largest = self.positive[below[0]], self.negative[above[-1]]
        return [
            f"Inside the band (r = {rounded(inside[0].ratio[0])}) both signs keep "
            "−r·A, close to the push the response gets at r = 1.",
            f"Below the band (r < {rounded(lower)}): with A < 0 the response is clipped; with "
            "A > 0 it moved the unfavourable way and is not clipped, but its gradient −r·A is "
            f"scaled down by r, to {rounded(smallest.grad[0])} at r = "
            f"{rounded(smallest.ratio[0])}.",
            f"Above the band (r > {rounded(upper)}): with A > 0 the response is clipped; with "
            "A < 0 it is not, and its gradient −r·A is scaled up by r, to "
            f"{rounded(largest.grad[0])} at r = {rounded(largest.ratio[0])}.",
        ]

    def _repr_html_(self) -> str:
        notes = [tag("div", text, classes="ppo-note") for text in self.notes()]
        return page(table(self.HEADER, self.rows()), *notes)

    def __repr__(self) -> str:
        return "\n".join(self.notes())


def outside_band_demo(
    log_ratios: tuple[float, ...] = OUTSIDE_LOG_RATIOS, eps: float = EPS
) -> OutsideBandDemo:
    """:class:`OutsideBandDemo` of one response at each sequence log-ratio (N = 1)."""

    def response(log_ratio: float, advantage: float) -> ppo_clip.ClipBreakdown:
        logp_new = SEQUENCE_LOGP_OLD + log_ratio
        return ppo_clip.clip_breakdown([logp_new], [SEQUENCE_LOGP_OLD], [advantage], eps)

    return OutsideBandDemo(
        log_ratios=tuple(float(x) for x in log_ratios),
        positive=tuple(response(x, +1.0) for x in log_ratios),
        negative=tuple(response(x, -1.0) for x in log_ratios),
    )


# --------------------------------------------------------------------------
# A rare token and the upper bound
# --------------------------------------------------------------------------

#: The old policy's probabilities of three tokens in one context: a rare token, then two others.
RARE_P_OLD = (0.01, 0.9, 0.09)
#: The runs of the demo: (description, batch as (token, advantage) pairs, step size, steps).
RARE_RUNS = (
    ("the rare token's sample alone, small steps", ((0, 1.0),), 0.05, 200),
    ("the rare token's sample alone, one large step", ((0, 1.0),), 0.5, 1),
    (
        "with a sample of the likely token 1 (A = −1) in the same batch, small steps",
        ((0, 1.0), (1, -1.0)),
        0.05,
        200,
    ),
)


def softmax_log(logits: FloatArray) -> FloatArray:
    """``log softmax(logits)``: the log-probabilities of a softmax policy."""
    return logits - np.logaddexp.reduce(logits)


def ppo_steps(
    p_old: tuple[float, ...],
    batch: tuple[tuple[int, float], ...],
    step: float,
    steps: int,
    eps: float = EPS,
) -> FloatArray:
    """The new policy's probabilities after ``steps`` gradient steps on one batch.

    The policy is a softmax over the tokens of one context with its own
    logits ``z``, starting at ``log p_old``.  Each step takes
    ``d loss / d log pi_new`` of every sample of ``batch`` (token, advantage)
    from :func:`ppo_clip.ppo_clip_grad`, turns it into a gradient on the
    logits by the chain rule (``d log p_a / d z = onehot(a) - p``), and moves
    ``z`` by ``-step`` times that gradient.
    """
    logp_old = np.log(np.asarray(p_old, dtype=np.float64))
    tokens = np.array([token for token, _ in batch])
    advantages = np.array([advantage for _, advantage in batch])
    onehot = np.eye(len(logp_old))[tokens]
    logits = logp_old.copy()
    for _ in range(steps):
        logp_new = softmax_log(logits)
        grad = ppo_clip.ppo_clip_grad(logp_new[tokens], logp_old[tokens], advantages, eps)
        logits -= step * (grad @ (onehot - np.exp(logp_new)))
    return np.exp(softmax_log(logits))


@dataclass(frozen=True)
class RareTokenRun:
    """One run of :func:`rare_token_demo`: where the rare token's probability ended."""

    description: str
    step: float
    steps: int
    p_new: FloatArray
    #: Whether the rare token's own sample (A > 0) is clipped at the end.
    clipped: bool

    @property
    def rare_probability(self) -> float:
        return float(self.p_new[0])

    @property
    def rare_ratio(self) -> float:
        """The rare token's ``pi_new / pi_old`` at the end (from :mod:`ppo_clip`)."""
        return float(
            ppo_clip.clip_breakdown(
                np.log(self.p_new[:1]), np.log(RARE_P_OLD[:1]), [1.0], EPS
            ).ratio[0]
        )


@dataclass(frozen=True, repr=False)
class RareTokenDemo:
    """The runs of :data:`RARE_RUNS` from :data:`RARE_P_OLD`, with the edge ``(1 + eps) p_old``."""

    runs: tuple[RareTokenRun, ...]
    edge: float

    HEADER = ("run", "step size × steps", "π_new(rare token)", "ratio r", "own sample clipped")

    def rows(self) -> list[list[str]]:
        """One row of text per run, as the table shows it."""
        return [
            [
                run.description,
                f"{rounded(run.step)} × {run.steps}",
                rounded(run.rare_probability, 3),
                rounded(run.rare_ratio, 3),
                yes_no(run.clipped),
            ]
            for run in self.runs
        ]

    def _repr_html_(self) -> str:
        note = tag(
            "div",
            f"The rare token's sample stops pushing once π_new > (1 + ε)·π_old = "
            f"{rounded(self.edge, 3)}; nothing in the loss pulls it back.",
            classes="ppo-note",
        )
        return page(table(self.HEADER, self.rows()), note)

    def __repr__(self) -> str:
        return "\n".join(" | ".join(row) for row in self.rows())


def rare_token_demo(eps: float = EPS) -> RareTokenDemo:
    """Run :data:`RARE_RUNS`: how far a rare token's probability gets past ``(1 + eps) p_old``."""
    runs = []
    logp_old_rare = np.log(RARE_P_OLD[:1])
    for description, batch, step, steps in RARE_RUNS:
        p_new = ppo_steps(RARE_P_OLD, batch, step, steps, eps)
        own = ppo_clip.clip_breakdown(np.log(p_new[:1]), logp_old_rare, [1.0], eps)
        runs.append(RareTokenRun(description, step, steps, p_new, bool(own.is_clipped[0])))
    _, upper = ppo_clip.clip_band(eps)
    return RareTokenDemo(runs=tuple(runs), edge=upper * RARE_P_OLD[0])
