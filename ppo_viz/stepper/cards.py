"""The stepper's HTML: the sample card, the running totals, the two clip fractions, the table.

Every fragment is built with :mod:`ppo_viz.html` and styled by the bundle's
stylesheet; numbers are printed by :mod:`ppo_viz.numbers`, exactly, with a
rounder form next to a ragged value (``0.5999999999999999 (≈ 0.6)``).
"""

from __future__ import annotations

import numpy as np

import ppo_clip
from ppo_viz.app import image_tag
from ppo_viz.html import Markup, join, page, table, tag
from ppo_viz.numbers import approx, count, exact, listing, vector
from ppo_viz.stepper.batch import StepperBatch
from ppo_viz.stepper.readout import (
    ModuleCheck,
    RunningTotals,
    SampleReadout,
    clip_fractions_verdict,
    compare_with_module,
    running_totals,
    sample_readout,
)

__all__ = [
    "batch_table_html",
    "clip_fractions_html",
    "fallback_html",
    "position_html",
    "sample_card_html",
    "sample_view_html",
    "totals_html",
]

#: The readout rows printed in bold: what the sample adds to the loss and the gradient.
EMPHASIZED = ("kept_term", "contribution", "grad")
#: The whole-batch table shows at most this many rows.
TABLE_ROWS = 200


def number_html(value: float, *, strong: bool = False) -> Markup:
    """``value`` exactly, followed by a grey ``(≈ 0.6)`` where the exact value is ragged."""
    exact_part = tag("span", exact(value), classes="ppo-num ppo-strong" if strong else "ppo-num")
    short = approx(value)
    if short is None:
        return exact_part
    # No-break spaces keep the value and its rounder form on one line.
    return exact_part + "\u00a0" + tag("span", f"(≈\u00a0{short})", classes="ppo-num ppo-muted")


def _card(title: object, *content: object, classes: str = "") -> Markup:
    return tag(
        "div", tag("div", title, classes="ppo-title"), *content, classes=f"ppo-card {classes}"
    )


# --------------------------------------------------------------------------
# The current sample and the walk so far
# --------------------------------------------------------------------------


def sample_view_html(batch: StepperBatch, step: int) -> Markup:
    """What the readout shows at ``step``: the sample's card next to the running totals."""
    totals = running_totals(batch, step)
    check = compare_with_module(batch) if totals.complete else None
    return tag(
        "div",
        sample_card_html(sample_readout(batch, step)),
        totals_html(totals, check),
        classes="ppo ppo-row",
    )


def sample_card_html(readout: SampleReadout) -> Markup:
    """The current sample's card: its numbers with notes, then the clip rule in its numbers."""
    clipped = readout.is_clipped
    badge = tag(
        "span",
        "clipped" if clipped else "not clipped",
        classes="ppo-badge ppo-clipped-badge" if clipped else "ppo-badge",
    )
    title = join(
        [
            f"Sample {readout.step} ",
            tag("span", f"({readout.step + 1} of {readout.n})", classes="ppo-muted"),
            " ",
            badge,
        ]
    )
    rows = [
        (
            row.label,
            number_html(row.value, strong=row.key in EMPHASIZED),
            tag("span", row.note, classes="ppo-muted ppo-small"),
        )
        for row in readout.rows
    ]
    rule_classes = "ppo-note ppo-rule" + (" ppo-clipped-note" if clipped else "")
    return _card(
        title,
        table([], rows, classes="ppo-key-value"),
        tag("div", readout.rule, classes=rule_classes),
        classes="ppo-wide",
    )


def totals_html(totals: RunningTotals, check: ModuleCheck | None = None) -> Markup:
    """The running totals; at the last step (``check`` given) also the module's three values."""
    n = totals.n
    seen = "sample 0" if totals.step == 0 else f"samples 0–{totals.step}"
    clipped = len(totals.clipped_samples)
    lines = [
        tag("div", f"Kept terms of {seen}, summed: ", number_html(totals.kept_sum)),
        tag("div", f"Loss so far = −(1/{n}) × sum = ", number_html(totals.loss, strong=True)),
        tag(
            "div",
            "Clipped so far: ",
            tag("b", str(clipped)),
            f" of {totals.seen} seen (samples: {listing(totals.clipped_samples)})",
        ),
        tag(
            "div",
            "Gradient so far: ",
            tag("span", vector(totals.grad, unseen=n - totals.seen), classes="ppo-num"),
        ),
    ]
    if check is None or totals.clip_fraction is None:
        lines.append(
            tag(
                "div",
                f"{n - totals.seen} more to go; at sample {n - 1} these totals become the "
                "module's loss, clip fraction and gradient.",
                classes="ppo-muted",
            )
        )
        return _card("Running totals", *lines)
    lines.append(
        tag(
            "div",
            f"Clip fraction = {clipped}/{n} = ",
            number_html(totals.clip_fraction, strong=True),
        )
    )
    return _card("Totals: the whole batch", *lines, _check_note(check))


def _check_note(check: ModuleCheck) -> Markup:
    """The final check: the module's three values, and whether the walk equals them."""
    verdict = (
        "✔ All three equal the module's ppo_clip_loss, clip_fraction and ppo_clip_grad exactly:"
        if check.all_equal
        else "✘ These totals differ from the module:"
    )
    values = [
        tag("div", f"{name}: {module}", classes="ppo-num") for name, _, module, _ in check.rows
    ]
    kind = "ppo-ok-note" if check.all_equal else "ppo-error-note"
    return tag("div", tag("div", verdict), *values, classes=f"ppo-note {kind} ppo-final-check")


# --------------------------------------------------------------------------
# The two clip fractions
# --------------------------------------------------------------------------


def clip_fractions_html(batch: StepperBatch) -> Markup:
    """Both definitions of the clip fraction on ``batch``, side by side, and whether they agree."""
    b = batch.breakdown
    disagree = bool((b.outside_band & ~b.is_clipped).any())
    ours = _fraction_box(
        b.clip_fraction,
        "this project, TRL, verl: clip_fraction",
        "gradient switched off",
        "A > 0 and r > 1+ε, or A < 0 and r < 1−ε",
        np.flatnonzero(b.is_clipped),
        batch.n,
    )
    theirs = _fraction_box(
        b.band_fraction,
        "Stable-Baselines3, CleanRL, OpenAI Baselines, Spinning Up: clipfrac",
        "outside the band, sign ignored",
        "mean(|r − 1| > ε)",
        np.flatnonzero(b.outside_band),
        batch.n,
        stands_out=disagree,
    )
    return tag(
        "div",
        _card(
            "Two clip fractions on this batch",
            tag("div", ours, theirs, classes="ppo-row"),
            tag(
                "div",
                clip_fractions_verdict(batch),
                " A logged clip fraction can only be compared between two codes once you "
                "know which of the two they compute.",
            ),
            classes="ppo-clip-fractions",
        ),
        classes="ppo",
    )


def _fraction_box(
    value: float,
    who: str,
    counts: str,
    rule: str,
    counted: np.ndarray,
    n: int,
    *,
    stands_out: bool = False,
) -> Markup:
    colour = "ppo-text-error" if stands_out else "ppo-text-info"
    return tag(
        "div",
        tag("div", who, classes="ppo-small ppo-muted"),
        tag("div", exact(value), classes=f"ppo-big {colour}"),
        tag("div", tag("b", counts), ": ", rule),
        tag(
            "div",
            f"{len(counted)} of {count(n, 'sample')}: {listing(counted)}",
            classes="ppo-muted",
        ),
        classes="ppo-note ppo-error-note" if stands_out else "ppo-note",
    )


# --------------------------------------------------------------------------
# The whole batch
# --------------------------------------------------------------------------


def _cell(value: float) -> Markup:
    """A compact cell: exact when short, else ``≈ 0.6`` with the exact float as a tooltip."""
    short = approx(value)
    if short is None:
        return tag("span", exact(value), classes="ppo-num")
    return tag("span", f"≈ {short}", classes="ppo-num", title=exact(value))


def batch_table_html(batch: StepperBatch, step: int | None = None) -> Markup:
    """Every sample of ``batch`` (the first :data:`TABLE_ROWS`) in one table, from its breakdown.

    ``step`` highlights that row and greys the rows not reached yet.
    """
    b = batch.breakdown
    if batch.prob_new is not None and batch.prob_old is not None:
        typed, old, new = ("π_old", "π_new"), batch.prob_old, batch.prob_new
    else:
        typed, old, new = ("log π_old", "log π_new"), batch.logp_old, batch.logp_new
    header = [
        "t",
        *typed,
        "r",
        "A",
        "r·A",
        "clip(r)·A",
        "kept (min)",
        "clipped?",
        "−kept/N",
        "gradient",
    ]
    shown = range(min(batch.n, TABLE_ROWS))
    rows = []
    for t in shown:
        terms = (b.ratio[t], b.advantages[t], b.unclipped_term[t], b.clipped_term[t])
        rows.append(
            [
                str(t),
                *(_cell(v) for v in (old[t], new[t], *terms, b.objective_term[t])),
                tag("b", "yes") if b.is_clipped[t] else "no",
                _cell(b.loss_contribution[t]),
                _cell(b.grad[t]),
            ]
        )
    key = "Pink rows are clipped"
    if step is not None:
        key += "; the yellow row is the current sample, grey rows are still to come"
    notes = [
        f"{key}. “≈” marks a value rounded for this table (hover for the exact float; the "
        "sample card shows every digit)."
    ]
    if batch.n > TABLE_ROWS:
        notes.insert(0, f"… and {batch.n - TABLE_ROWS} more samples (not listed here). ")
    row_classes = [_row_class(b, t, step) for t in shown]
    return tag(
        "div",
        table(header, rows, classes="ppo-batch-table", row_classes=row_classes),
        tag("div", *notes, classes="ppo-small ppo-muted"),
        classes="ppo ppo-card",
    )


def _row_class(b: ppo_clip.ClipBreakdown, t: int, step: int | None) -> str:
    """Yellow for the current sample, grey for those still to come, pink for clipped ones."""
    if step is not None and t == step:
        return "ppo-row-current"
    if step is not None and t > step:
        return "ppo-row-unseen"
    return "ppo-row-clipped" if b.is_clipped[t] else ""


def position_html(batch: StepperBatch, step: int) -> Markup:
    """``"2 of 4 · worked example"``: where the walk is, next to the slider."""
    return tag("span", f"{step + 1} of {batch.n} · {batch.name}", classes="ppo ppo-muted")


def fallback_html(batch: StepperBatch, png: bytes) -> Markup:
    """The static page for front ends without widgets: table, totals, clip fractions, figure."""
    last = running_totals(batch, batch.n - 1)
    return page(
        tag(
            "div",
            f"{batch.name.capitalize()}: N = {batch.n}, ε = {exact(batch.eps)}",
            classes="ppo-title",
        ),
        batch_table_html(batch),
        tag("div", totals_html(last, compare_with_module(batch)), classes="ppo-row"),
        clip_fractions_html(batch),
        image_tag(png, "the current sample on the clipped objective"),
        classes="ppo-stack",
    )
