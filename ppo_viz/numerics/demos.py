"""Two numerical demos: a ratio that overflows, and a ratio exactly on the band's edge.

* :func:`overflow_demo`: a batch of four synthetic responses whose sequence
  ratio overflows to ``inf`` for one of them.  The naive formula returns NaN;
  :mod:`ppo_clip` returns the right loss.  numpy's floating-point errors are
  caught with :func:`floating_point_errors` and explained, never printed.
* :func:`boundary_demo`: the ratio 0.6 / 0.5, exactly ``1 + eps`` in float64
  (kept, as the contract says), and :func:`float32_boundary_demo`, the same
  computation with float32 along the way (where rounding decides the clip),
  shown as a collapsed part for implementers.

Each demo displays as a table with notes under it (HTML in a notebook; its
notes as plain text elsewhere).  Every ratio, clip decision, loss and
gradient comes from :mod:`ppo_clip`, except those of the functions named
``naive_*``: deliberately naive formulas that exist to show how a careless
implementation fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.html import Markup, page, table, tag
from ppo_viz.numbers import exact, listing, rounded
from ppo_viz.numerics.response import EPS, FLOAT64_EXP_LIMIT, synthetic_response

FloatArray = NDArray[np.float64]


# --------------------------------------------------------------------------
# Naive formulas, for demonstration only
# --------------------------------------------------------------------------


def naive_ratio(logp_new: ArrayLike, logp_old: ArrayLike) -> FloatArray:
    """DEMONSTRATION ONLY: ``exp(logp_new - logp_old)`` with no care for overflow.

    Exists to show failure: above a log-ratio of about 709.78 it returns
    ``inf`` and numpy signals an overflow.  Use :func:`ppo_clip.clip_breakdown`
    for real work.
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


def naive_float32_is_clipped(ratio: np.float32, eps: float = EPS) -> bool:
    """DEMONSTRATION ONLY: the contract's strict rule for ``A > 0``, ``r > 1 + eps``, in float32."""
    return bool(np.float32(ratio) > np.float32(1.0) + np.float32(eps))


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
# Showing a demo: a table with notes under it
# --------------------------------------------------------------------------


def demo_html(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    clipped: Sequence[bool],
    notes: Sequence[Markup],
) -> Markup:
    """A demo as one HTML page: its table (clipped rows marked), then its notes."""
    row_classes = ["ppo-row-clipped" if flag else "" for flag in clipped]
    return page(table(header, rows, row_classes=row_classes), *notes)


def note(text: str, kind: str = "") -> Markup:
    """One note under a demo's table; ``kind`` is ``"error"``, ``"ok"`` or empty."""
    return tag("div", text, classes=f"ppo-note ppo-{kind}-note" if kind else "ppo-note")


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


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
class OverflowDemo:
    """A batch whose ratio overflows, computed naively and by :mod:`ppo_clip`.

    ``logp_new``/``logp_old`` are sequence log-probabilities (sums over
    tokens); ``naive_*`` hold what the naive formula gives, and
    ``*_errors`` the errors numpy signalled while computing it (caught, not
    printed).  ``module`` is :func:`ppo_clip.clip_breakdown` of the batch.
    """

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    lengths: tuple[int, ...]
    naive_terms: FloatArray
    naive_loss: float
    ratio_errors: tuple[str, ...]
    objective_errors: tuple[str, ...]
    module: ppo_clip.ClipBreakdown
    module_loss: float

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

    def rows(self) -> list[list[str]]:
        """One row of text per sample, as the table shows it."""
        module = self.module
        return [
            [
                str(i),
                str(self.lengths[i]),
                rounded(self.logp_new[i], 5),
                rounded(self.logp_old[i], 5),
                rounded(module.log_ratio[i], 5),
                rounded(self.advantages[i]),
                rounded(module.ratio[i]),
                rounded(self.naive_terms[i]),
                rounded(module.objective_term[i]),
                yes_no(module.is_clipped[i]),
            ]
            for i in range(module.n)
        ]

    def notes(self) -> list[tuple[str, str]]:
        """What happened, in words built from the numbers: ``(kind, text)`` pairs."""
        overflowed = np.flatnonzero(np.isinf(self.module.ratio))
        poisoned = np.flatnonzero(np.isnan(self.naive_terms))
        return [
            (
                "error",
                f"Overflow: the log-ratio of {_samples(overflowed)} is above "
                f"{rounded(FLOAT64_EXP_LIMIT, 5)}, so exp gives inf in float64. numpy "
                f"signalled {_described(self.ratio_errors)} while computing the naive ratio.",
            ),
            (
                "error",
                f"Naive formula: min(r·A, clip(r)·A) for {_samples(poisoned)} computes "
                f"inf × 0 = NaN (numpy signalled {_described(self.objective_errors)}), "
                f"so the naive loss is {exact(self.naive_loss)}.",
            ),
            (
                "ok",
                "ppo_clip: times_advantage replaces the ratio by 0 wherever A = 0 before "
                "multiplying by A, so inf × 0 is never formed and a zero advantage "
                "contributes exactly 0; the gradient leaves the A = 0 samples out of its "
                f"product the same way. The loss is {exact(self.module_loss)}.",
            ),
        ]

    def _repr_html_(self) -> str:
        notes = [note(text, kind) for kind, text in self.notes()]
        return demo_html(self.HEADER, self.rows(), self.module.is_clipped, notes)

    def __repr__(self) -> str:
        return "\n".join(text for _, text in self.notes())


def _samples(indices: NDArray[np.intp]) -> str:
    """``"sample 1"``, ``"samples 1, 3"`` or ``"no sample"``."""
    if len(indices) == 0:
        return "no sample"
    return f"sample{'s' if len(indices) > 1 else ''} {listing(indices)}"


def _described(errors: Sequence[str]) -> str:
    """The kinds of error numpy signalled, each once, quoted: ``"'overflow'"``."""
    if not errors:
        return "no error"
    return " and ".join(f"'{kind}'" for kind in dict.fromkeys(errors))


def overflow_batch() -> tuple[FloatArray, FloatArray, FloatArray, tuple[int, ...]]:
    """The overflow batch's sequence log-probabilities, advantages and lengths."""
    new, old = [], []
    for seed, length, shift, _ in OVERFLOW_BATCH:
        response_new, response_old = synthetic_response(seed).sequence_logprobs(length, shift)
        new.append(response_new)
        old.append(response_old)
    advantages = np.array([advantage for *_, advantage in OVERFLOW_BATCH])
    lengths = tuple(length for _, length, _, _ in OVERFLOW_BATCH)
    return np.array(new), np.array(old), advantages, lengths


def overflow_demo(eps: float = EPS) -> OverflowDemo:
    """Compute the overflow batch naively and with :mod:`ppo_clip`; errors are caught."""
    new, old, advantages, lengths = overflow_batch()
    with floating_point_errors() as ratio_errors:
        ratio = naive_ratio(new, old)
    with floating_point_errors() as objective_errors:
        terms = naive_clipped_objective(ratio, advantages, eps)
        loss = naive_loss(terms)
    return OverflowDemo(
        logp_new=new,
        logp_old=old,
        advantages=advantages,
        lengths=lengths,
        naive_terms=terms,
        naive_loss=loss,
        ratio_errors=tuple(ratio_errors),
        objective_errors=tuple(objective_errors),
        module=ppo_clip.clip_breakdown(new, old, advantages, eps),
        module_loss=ppo_clip.ppo_clip_loss(new, old, advantages, eps),
    )


# --------------------------------------------------------------------------
# The exact boundary, in float64 (the main line) and in float32 (for implementers)
# --------------------------------------------------------------------------

#: The boundary demo's probabilities: their ratio is 1 + eps in exact arithmetic.
BOUNDARY_P_NEW, BOUNDARY_P_OLD, BOUNDARY_EPS = 0.6, 0.5, 0.2
#: The header of both boundary tables.
BOUNDARY_HEADER = (
    "how the ratio is computed",
    "ratio r",
    "r > 1.2 ?",
    "clipped",
    "d loss / d log π_new",
)
#: The summary line of the collapsed float32 table.
FLOAT32_SUMMARY = "For implementers: the same ratio with float32 on the way"
#: Significant bits of bfloat16 (1 sign, 8 exponent and 7 stored mantissa bits, plus the
#: implicit leading bit), as in Google Cloud's "The bfloat16 numerical format".
BFLOAT16_SIGNIFICANT_BITS = 8


@dataclass(frozen=True)
class BoundaryCase:
    """One way of computing the ratio of ``p_new = 0.6`` to ``p_old = 0.5`` (1.2 in exact maths).

    ``ratio_text`` is the ratio as the table prints it; ``is_clipped`` and
    ``grad`` are for one sample with A = +1 (N = 1).
    """

    label: str
    ratio: float
    ratio_text: str
    is_clipped: bool
    grad: float


def boundary_rows(cases: Sequence[BoundaryCase]) -> list[list[str]]:
    """One row of text per case, as the boundary tables show it."""
    upper = 1.0 + BOUNDARY_EPS
    return [
        [
            case.label,
            case.ratio_text,
            yes_no(case.ratio > upper),
            yes_no(case.is_clipped),
            exact(case.grad),
        ]
        for case in cases
    ]


@dataclass(frozen=True, repr=False)
class BoundaryDemo:
    """A sample whose ratio is exactly ``1 + eps`` in float64, from :mod:`ppo_clip` (A = +1, N = 1).

    ``inside_slope`` and ``outside_slope`` are the one-sided slopes of
    :func:`ppo_clip.ppo_clip_loss` at the edge, over a step of ``step`` in
    ``log pi_new``.
    """

    case: BoundaryCase
    inside_slope: float
    outside_slope: float
    step: float

    def rows(self) -> list[list[str]]:
        """The table's one row of text."""
        return boundary_rows([self.case])

    def notes(self) -> list[str]:
        """The table in words, built from its numbers (the first depends on this machine)."""
        return [
            edge_note(self.case),
            "Slopes of ppo_clip_loss just inside and just outside the band (a step of "
            f"{rounded(self.step, 1)} in log π_new): {rounded(self.inside_slope, 7)} and "
            f"{rounded(self.outside_slope)}. The boundary keeps the inside slope.",
        ]

    def _repr_html_(self) -> str:
        notes = [note(text) for text in self.notes()]
        return demo_html(BOUNDARY_HEADER, self.rows(), [self.case.is_clipped], notes)

    def __repr__(self) -> str:
        return "\n".join(self.notes())


def landing_note(row: int, case: BoundaryCase) -> str:
    """Which side of the edge 1 + eps row ``row`` landed on here, and what the clip did.

    A ratio held in float32 is compared with float32's ``1 + eps``, as its clip test does.
    """
    in_float32 = "(float32" in case.ratio_text
    ratio, edge = case.ratio, 1.0 + BOUNDARY_EPS
    if in_float32:
        ratio, edge = np.float32(ratio), np.float32(1.0) + np.float32(BOUNDARY_EPS)
    side = "above" if ratio > edge else "below" if ratio < edge else "exactly on"
    verdict = "clipped" if case.is_clipped else "kept"
    return f"Row {row} landed {side} 1.2 on this machine ({case.ratio_text.split()[0]}): {verdict}."


def edge_note(case: BoundaryCase) -> str:
    """Where this machine's float64 ratio of 0.6 to 0.5 landed, relative to the edge 1 + eps."""
    edge = 1.0 + BOUNDARY_EPS
    verdict = "clipped" if case.is_clipped else "not clipped (strict rule)"
    if case.ratio == edge:
        where = f"exactly {exact(edge)} = 1 + ε: on the boundary"
    else:
        ulps = abs(case.ratio - edge) / math.ulp(edge)
        side = "above" if case.ratio > edge else "below"
        where = f"{exact(case.ratio)}, {rounded(ulps)} ulp {side} 1 + ε = {exact(edge)}"
    return (
        f"On this machine, exp(log 0.6 − log 0.5) in float64 is {where}; {verdict}, "
        f"gradient {exact(case.grad)}."
    )


@dataclass(frozen=True, repr=False)
class Float32BoundaryDemo:
    """The boundary sample computed with float32 somewhere along the way (A = +1, N = 1).

    ``cases[0]`` is the float64 reference (as in :class:`BoundaryDemo`); the
    others are float32 throughout, the log rounded to float32 first, and
    float32 log-probabilities handed to :mod:`ppo_clip`.  It displays as a
    collapsed part (``<details>``) for implementers.
    """

    cases: tuple[BoundaryCase, ...]

    def rows(self) -> list[list[str]]:
        """One row of text per case, as the table shows it."""
        return boundary_rows(self.cases)

    def notes(self) -> list[str]:
        """The table in words, built from its numbers."""
        nearest = float(np.float32(1.0 + BOUNDARY_EPS))
        spacing = 2.0 ** (1 - BFLOAT16_SIGNIFICANT_BITS)  # between neighbours in [1, 2)
        return [
            f"float32 has no number 1.2 (the nearest is {rounded(nearest, 9)}); after float32 "
            "log and exp the ratio lands a rounding step above or below the edge, and the clip "
            "decision follows the rounding, not the maths.",
            *(landing_note(row, case) for row, case in enumerate(self.cases[1:], start=2)),
            f"bfloat16 ({BFLOAT16_SIGNIFICANT_BITS} significant bits) is coarser still: just "
            f"above 1 its neighbouring numbers are {exact(spacing)} apart, so a ratio stored in "
            f"bfloat16 is only known to within ±{rounded(100 * spacing / 2, 2)} %.",
        ]

    def _repr_html_(self) -> str:
        notes = [note(text) for text in self.notes()]
        clipped = [case.is_clipped for case in self.cases]
        content = demo_html(BOUNDARY_HEADER, self.rows(), clipped, notes)
        return tag("details", tag("summary", FLOAT32_SUMMARY, classes="ppo-strong"), content)

    def __repr__(self) -> str:
        return "\n".join(self.notes())


def module_case(label: str, logp_new: float, logp_old: float) -> BoundaryCase:
    """The boundary sample computed by :func:`ppo_clip.clip_breakdown` (float64)."""
    breakdown = ppo_clip.clip_breakdown([logp_new], [logp_old], [1.0], BOUNDARY_EPS)
    ratio = float(breakdown.ratio[0])
    return BoundaryCase(
        label, ratio, exact(ratio), bool(breakdown.is_clipped[0]), float(breakdown.grad[0])
    )


def naive_float32_case(label: str, ratio32: np.float32) -> BoundaryCase:
    """DEMONSTRATION ONLY: the boundary sample with a float32 ratio and a float32 clip test."""
    clipped = naive_float32_is_clipped(ratio32, BOUNDARY_EPS)
    ratio = float(ratio32)
    text = f"{ratio32!s} (float32; as float64 {exact(ratio)})"
    return BoundaryCase(label, ratio, text, clipped, 0.0 if clipped else -ratio)


def float64_case() -> BoundaryCase:
    """The ratio 0.6 / 0.5 from float64 log-probabilities, by :mod:`ppo_clip` (1.2 or near it)."""
    return module_case(
        "float64 throughout (ppo_clip)", math.log(BOUNDARY_P_NEW), math.log(BOUNDARY_P_OLD)
    )


def boundary_demo() -> BoundaryDemo:
    """The ratio 0.6 / 0.5 in float64 (A = +1): where it lands at the edge 1 + eps, and its slopes.

    The one-sided slopes of :func:`ppo_clip.ppo_clip_loss` at the edge show
    the kink, and that the boundary keeps the inside slope.
    """
    logp_new, logp_old = math.log(BOUNDARY_P_NEW), math.log(BOUNDARY_P_OLD)
    step = 1e-7

    def loss(shift: float) -> float:
        return ppo_clip.ppo_clip_loss([logp_new + shift], [logp_old], [1.0], BOUNDARY_EPS)

    # One-sided slopes measured a step away from the edge, so that where exactly the edge's
    # own ratio landed (on it, or one ulp beside it) does not enter.
    inside = (loss(-step) - loss(-2 * step)) / step
    outside = (loss(2 * step) - loss(step)) / step
    return BoundaryDemo(float64_case(), inside, outside, step)


def float32_boundary_demo() -> Float32BoundaryDemo:
    """The ratio 0.6 / 0.5 four ways: float64 (reference) and three with float32 on the way.

    Rows: the module on float64 log-probabilities (see :func:`boundary_demo`); float32
    throughout (naive); float64 ``log(1.2)`` rounded to float32 then ``exp``
    (naive); the module on log-probabilities that were computed in float32.
    """
    p_new, p_old = BOUNDARY_P_NEW, BOUNDARY_P_OLD
    return Float32BoundaryDemo(
        (
            float64_case(),
            naive_float32_case(
                "float32 throughout: exp(log f32(0.6) − log f32(0.5))",
                naive_float32_ratio(p_new, p_old),
            ),
            naive_float32_case(
                "float32: exp(f32(log 1.2))", naive_float32_rounded_ratio(1.0 + BOUNDARY_EPS)
            ),
            module_case(
                "float32 log-probs, then ppo_clip (float64)",
                float(np.log(np.float32(p_new))),
                float(np.log(np.float32(p_old))),
            ),
        )
    )
