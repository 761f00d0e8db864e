"""Notebook 5's tables, notes and readouts: the numbers of :mod:`.model` put into words.

Each demo the notebook calls returns a :class:`Demo`, a table with notes under it built from
a result of :mod:`.model` (kept as ``.result``).  Every sentence is built from the numbers, so
the notes that depend on this machine's last bits (where a ratio landed at the band's edge)
say what this machine computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import ppo_clip
from ppo_viz.html import Markup, page, table, tag
from ppo_viz.numbers import exact, listing, rounded
from ppo_viz.numerics import model
from ppo_viz.panels import flat_where

#: The summary line of the collapsed float32 table.
FLOAT32_SUMMARY = "For implementers: the same ratio with float32 on the way"


@dataclass(frozen=True, repr=False)
class Demo:
    """A result shown in a notebook as a table with notes under it.

    ``columns`` maps each column's heading to its cells.  ``kinds`` gives each note a colour
    (``"error"`` or ``"ok"``; plain by default) and ``clipped`` marks the clipped rows.  With
    a ``summary`` the demo starts collapsed under that line, for implementers.
    """

    result: Any
    columns: dict[str, list[str]]
    notes: list[str]
    clipped: Sequence[bool] = ()
    kinds: Sequence[str] = ()
    summary: str | None = None

    @property
    def rows(self) -> list[tuple[str, ...]]:
        """The table's rows of text."""
        return list(zip(*self.columns.values(), strict=True))

    def _repr_html_(self) -> str:
        row_classes = ["ppo-row-clipped" if flag else "" for flag in self.clipped] or None
        kinds = [*self.kinds, *[""] * len(self.notes)]
        notes = [
            tag("div", text, classes=f"ppo-note ppo-{kind}-note" if kind else "ppo-note")
            for text, kind in zip(self.notes, kinds, strict=False)
        ]
        content = page(table(self.columns, self.rows, row_classes=row_classes), *notes)
        if self.summary is None:
            return str(content)
        return str(tag("details", tag("summary", self.summary, classes="ppo-strong"), content))


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def overflow_demo() -> Demo:
    """A batch whose ratio overflows: the naive formula's NaN next to ppo_clip's loss."""
    result = model.overflow_result()
    module = result.module
    columns = {
        "sample": [str(i) for i in range(module.n)],
        "tokens": [str(n) for n in result.lengths],
        "log π_new": [rounded(x, 5) for x in result.logp_new],
        "log π_old": [rounded(x, 5) for x in result.logp_old],
        "log-ratio": [rounded(x, 5) for x in module.log_ratio],
        "A": [rounded(a) for a in module.advantages],
        "ratio r": [rounded(r) for r in module.ratio],
        "naive term": [rounded(term) for term in result.naive_terms],
        "ppo_clip term": [rounded(term) for term in module.objective_term],
        "clipped": [yes_no(flag) for flag in module.is_clipped],
    }
    overflowed = listing(np.flatnonzero(np.isinf(module.ratio)))
    poisoned = listing(np.flatnonzero(np.isnan(result.naive_terms)))
    warned = "; ".join(f"'{text}'" for text in dict.fromkeys(result.naive_warnings)) or "nothing"
    notes = [
        f"Overflow: the log-ratio of sample {overflowed} is above "
        f"{rounded(model.FLOAT64_EXP_LIMIT, 5)}, so exp gives inf in float64.",
        f"Naive formula: min(r·A, clip(r)·A) for sample {poisoned} computes inf × 0 = NaN, so "
        f"the naive loss is {exact(result.naive_loss)}. numpy warned {warned}.",
        "ppo_clip puts an exact 0 in place of the ratio wherever A = 0 before multiplying by A, "
        "so inf × 0 is never formed and a zero advantage contributes exactly 0; the gradient "
        f"leaves those samples out the same way. The loss is {exact(module.loss)}.",
    ]
    return Demo(result, columns, notes, module.is_clipped, kinds=("error", "error", "ok"))


def ratio_text(case: model.BoundaryCase) -> str:
    """The ratio as the table prints it: exact, and a float32 one also as float32 prints it."""
    if case.float32:
        return f"{np.float32(case.ratio)!s} (float32; as float64 {exact(case.ratio)})"
    return exact(case.ratio)


def boundary_columns(cases: Sequence[model.BoundaryCase]) -> dict[str, list[str]]:
    """The boundary cases as a table's columns (A = +1, N = 1)."""
    return {
        "how the ratio is computed": [case.label for case in cases],
        "ratio r": [ratio_text(case) for case in cases],
        "r > 1.2 ?": [yes_no(case.ratio > 1.0 + model.BOUNDARY_EPS) for case in cases],
        "clipped": [yes_no(case.is_clipped) for case in cases],
        "d loss / d log π_new": [exact(case.grad) for case in cases],
    }


def boundary_demo() -> Demo:
    """The ratio 0.6 / 0.5 in float64 (A = +1): where it landed here, and the slopes beside it.

    ``.result`` holds ``(case, inside slope, outside slope)``.
    """
    case, edge, step = model.boundary_cases()[0], 1.0 + model.BOUNDARY_EPS, 1e-7
    if case.ratio == edge:
        where = f"exactly {exact(edge)} = 1 + ε: on the boundary"
    else:
        ulps = rounded(abs(case.ratio - edge) / math.ulp(edge))
        where = f"{exact(case.ratio)}, {ulps} ulp {case.side} 1 + ε = {exact(edge)}"
    verdict = "clipped" if case.is_clipped else "not clipped (strict rule)"
    inside, outside = model.edge_slopes(step)
    notes = [
        f"On this machine, exp(log 0.6 − log 0.5) in float64 is {where}; {verdict}, gradient "
        f"{exact(case.grad)}.",
        "Slopes of ppo_clip_loss just inside and just outside the band (a step of "
        f"{rounded(step, 1)} in log π_new): {rounded(inside, 7)} and {rounded(outside)}. "
        "The boundary keeps the inside slope.",
    ]
    return Demo((case, inside, outside), boundary_columns([case]), notes, [case.is_clipped])


def float32_boundary_demo() -> Demo:
    """The same ratio with float32 on the way, collapsed: where each row landed on this machine."""
    cases = model.boundary_cases()
    spacing = 2.0 ** (1 - model.BFLOAT16_SIGNIFICANT_BITS)  # between neighbours in [1, 2)
    notes = [
        f"Row {row} landed {case.side} 1.2 on this machine ({ratio_text(case).split()[0]}): "
        f"{'clipped' if case.is_clipped else 'kept'}."
        for row, case in enumerate(cases[1:], start=2)
    ]
    notes.append(
        f"bfloat16 ({model.BFLOAT16_SIGNIFICANT_BITS} significant bits) is coarser still: just "
        f"above 1 its neighbouring numbers are {exact(spacing)} apart, so a ratio stored in "
        f"bfloat16 is only known to within ±{rounded(100 * spacing / 2, 2)} %."
    )
    clipped = [case.is_clipped for case in cases]
    return Demo(cases, boundary_columns(cases), notes, clipped, summary=FLOAT32_SUMMARY)


def outside_band_demo(
    log_ratios: Sequence[float] = model.OUTSIDE_LOG_RATIOS, eps: float = model.EPS
) -> Demo:
    """One response (N = 1) at each sequence log-ratio: its gradient for A = ±1, and why."""
    result = model.outside_band(log_ratios, eps)
    columns = {
        "log-ratio": [rounded(x) for x, *_ in result],
        "ratio r": [rounded(plus.ratio[0]) for _, plus, _ in result],
        "A = +1: d loss / d log π_new": [rounded(plus.grad[0]) for _, plus, _ in result],
        "A = −1: d loss / d log π_new": [rounded(minus.grad[0]) for *_, minus in result],
        "what the clip does": [clip_verdict(plus, minus) for _, plus, minus in result],
    }
    return Demo(result, columns, [])


def rare_token_demo(eps: float = model.EPS) -> Demo:
    """How far gradient steps carry a rare token's probability past ``(1 + eps) p_old``."""
    runs = model.rare_token_runs(eps)
    edge = ppo_clip.clip_band(eps)[1] * model.RARE_P_OLD[0]
    settings = model.RARE_RUNS
    columns = {
        "run": [description for description, *_ in settings],
        "step size × steps": [f"{rounded(step)} × {steps}" for *_, step, steps in settings],
        "π_new(rare token)": [rounded(p_new[0], 3) for p_new, _ in runs],
        "ratio r": [rounded(own.ratio[0], 3) for _, own in runs],
        "own sample clipped": [yes_no(own.is_clipped[0]) for _, own in runs],
    }
    note = (
        "The rare token's sample stops pushing once π_new > (1 + ε)·π_old = "
        f"{rounded(edge, 3)}; nothing in the loss pulls it back."
    )
    return Demo((runs, edge), columns, [note])


def clip_verdict(plus: model.Breakdown, minus: model.Breakdown) -> str:
    """What the clip does with one ratio for A > 0 and for A < 0 (one sample each, ppo_clip's).

    Outside the band the sign of A decides: the favourable side is clipped; the other keeps
    ``-r*A/N``, scaled down by ``r`` below the band and up above it (a loss of ``+inf`` once
    ``r`` overflows with A < 0).
    """
    ratio, band = plus.ratio[0], f"[{rounded(plus.lower)}, {rounded(plus.upper)}]"
    if not plus.outside_band[0]:
        return f"inside {band}: not clipped for either sign of A"
    verdicts = []
    for sign, sample in (("A > 0", plus), ("A < 0", minus)):
        if sample.is_clipped[0]:
            verdicts.append(f"with {sign} clipped (zero gradient)")
        elif math.isinf(sample.loss):
            verdicts.append(f"with {sign} not clipped: the loss is {rounded(sample.loss)}")
        else:
            verdicts.append(
                f"with {sign} not clipped (an unfavourable move): its gradient −r·A/N is scaled "
                f"{'down' if ratio < 1.0 else 'up'} by r = {rounded(ratio)}"
            )
    return f"outside {band}: " + "; ".join(verdicts)


def token_readout_html(view: model.TokenView) -> Markup:
    """The token app's numbers as a two-column table (all from :mod:`ppo_clip`)."""
    log_ratio = view.sequence.log_ratio[0]
    f32, f64 = model.FLOAT32_EXP_LIMIT, model.FLOAT64_EXP_LIMIT
    if log_ratio > f64:
        overflow = f"above {f64:.2f}: exp overflows in float64 and float32"
    elif log_ratio > f32:
        overflow = f"above {f32:.2f}: exp would overflow in float32"
    else:
        overflow = f"below {f32:.2f}: no overflow"
    outside, ratio = int(np.count_nonzero(view.tokens.outside_band)), view.sequence.ratio[0]
    share = rounded(100 * outside / view.length, 3)
    verdict = clip_verdict(view.sequence, view.sequence_negative)
    rows = {
        "sequence log-probability, old policy": f"Σ log π_old = {rounded(view.logp_old_sum, 5)}",
        "sequence log-probability, new policy": f"Σ log π_new = {rounded(view.logp_new_sum, 5)}",
        "log of the sequence ratio": f"{rounded(log_ratio, 5)} ({overflow})",
        "sequence ratio exp(Σ log π_new − Σ log π_old)": f"{rounded(ratio)}: {verdict}",
        "product of the per-token ratios": rounded(view.product),
        "geometric mean of the per-token ratios": rounded(view.geometric_mean, 5),
        "per-token ratios outside the band": f"{outside} of {view.length} ({share} %)",
    }
    header = (f"the first {view.length} tokens of the response", "")
    cells = [(name, tag("b", value)) for name, value in rows.items()]
    return tag("div", table(header, cells, classes="ppo-key-value"), classes="ppo")


def variants_readout_html(sweeps: dict[int, model.Breakdown]) -> Markup:
    """The band, the cap and where each column is flat, from the sweeps' own values."""
    sweep = sweeps[-1]
    bounds = f"ε_low = {rounded(1 - sweep.lower, 3)}, ε_high = {rounded(sweep.upper - 1, 3)}"
    if sweep.dual_clip is not None:
        cap = "dual clip on: for A < 0 the term is capped at c·A beyond r = "
        cap += rounded(sweep.dual_clip, 3)
    else:
        cap = "dual clip off: for A < 0 the term r·A keeps falling as r grows"
    band = tag("b", f"[{rounded(sweep.lower, 3)}, {rounded(sweep.upper, 3)}]")
    up, down = (flat_where(sweeps[sign], sign, lambda x: rounded(x, 3)) for sign in (+1, -1))
    first = tag("div", "Clip band ", band, f" ({bounds}); {cap}.")
    return tag("div", first, tag("div", f"A = +1: {up}. A = −1: {down}."), classes="ppo")
