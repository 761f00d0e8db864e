"""The stepper's figure: notebook 1's panels with the current sample highlighted.

Two columns of :mod:`ppo_viz.panels` (objective on top, the gradient of a
one-sample batch below): ``A > 0`` on the left, ``A < 0`` on the right, each
drawn for one advantage of its sign.  The current sample is a large yellow
point at the term the ``min`` keeps, with open diamonds at its two
candidates; the batch's other samples are faint points at their ratios.

:meth:`StepperFigure.show` moves the figure to a sample of a batch.  The
axis limits depend only on the batch (:func:`figure_limits`), so they stay
put while the reader steps, and a batch whose values cannot be drawn is
refused with an :class:`~ppo_viz.stepper.entry.EntryError` before anything
moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text

import ppo_clip
from ppo_viz.numbers import exact, exact_or_approx, listing
from ppo_viz.panels import (
    R_MAX,
    PanelArtists,
    draw_objective_panel,
    legend_entries,
    update_objective_panel,
)
from ppo_viz.stepper.batch import MAX_ABS_ADVANTAGE, StepperBatch, checked_step
from ppo_viz.stepper.entry import EntryError
from ppo_viz.style import COLORS, PALETTE, SCREEN_SIZE, SLIDE_SIZE, figure_style

__all__ = ["FigureLimits", "StepperFigure", "figure_limits"]

#: The ratio axis is at least [0, R_MAX] and widens for larger ratios up to this.
R_AXIS_CAP = 6.0
#: Faint points get their sample number written next to them up to this many per column.
LABELLED_POINTS = 12
#: Above this many samples in a column, its limits fit 95 % of them (the rest are pinned).
ROBUST_LIMITS_FROM = 20
SIGNS = (+1, -1)


# --------------------------------------------------------------------------
# Limits: fixed for a batch
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class FigureLimits:
    """The figure's axis limits for one batch (see :func:`figure_limits`)."""

    r_end: float
    #: Per advantage sign: ``(objective_ylim, gradient_ylim)``.
    ylims: dict[int, tuple[tuple[float, float], tuple[float, float]]]


def figure_limits(batch: StepperBatch) -> FigureLimits:
    """The axis limits the figure uses for ``batch``, computed without touching any figure.

    The ratio axis is ``[0, 3]``, widened for larger ratios up to ``[0, 6]``;
    each column's y axes fit its samples' values.  Raises :class:`EntryError`
    (a message for the reader) if a limit is not a finite, drawable number.
    """
    r_end = _ratio_axis_end(batch)
    ylims = {}
    for sign in SIGNS:
        reach = _column_reach(batch, sign, r_end)
        if not (math.isfinite(reach) and reach <= R_AXIS_CAP * MAX_ABS_ADVANTAGE):
            kind = "positive" if sign > 0 else "negative"
            raise EntryError(
                f"The {kind} advantages reach {exact(reach)} on the plot, too large to draw; "
                "advantages are usually within ±100."
            )
        room, pad = 1.22 * reach, 0.14 * reach
        ylims[sign] = ((-pad, room), (-room, pad)) if sign > 0 else ((-room, pad), (-pad, room))
    return FigureLimits(r_end=r_end, ylims=ylims)


def _ratio_axis_end(batch: StepperBatch) -> float:
    """Right end of the ratio axis: R_MAX, widened for larger ratios up to R_AXIS_CAP."""
    ratios = batch.breakdown.ratio
    finite = ratios[np.isfinite(ratios)]
    largest = float(finite.max()) if finite.size else 1.0
    return float(min(max(R_MAX, math.ceil(largest * 1.1 * 2) / 2), R_AXIS_CAP))


def _column_reach(batch: StepperBatch, sign: int, r_end: float) -> float:
    """How far a column's values reach: ``|A| * max(r, 1 + eps)`` over its samples.

    The largest such value for a small batch; for a large one the 95th
    percentile, so one extreme sample does not flatten everyone else's curve.
    """
    b = batch.breakdown
    chosen = np.sign(b.advantages) == sign
    if not chosen.any():
        return b.upper
    with np.errstate(over="ignore"):  # an overflow gives inf, which figure_limits refuses
        reach = np.abs(b.advantages[chosen]) * np.maximum(
            np.minimum(b.ratio[chosen], r_end), b.upper
        )
    if reach.size > ROBUST_LIMITS_FROM:
        return float(np.quantile(reach, 0.95))
    return float(reach.max())


def column_advantage(batch: StepperBatch, sign: int, step: int) -> tuple[float, int | None]:
    """The advantage a column's curve is drawn for at ``step``, and whose it is.

    The current sample's if it has this sign; otherwise the latest earlier
    sample of this sign, else the first later one; ``(±1, None)`` if none.
    """
    advantages = batch.breakdown.advantages
    chosen = np.flatnonzero(np.sign(advantages) == sign)
    if chosen.size == 0:
        return float(sign), None
    earlier = chosen[chosen <= step]
    owner = int(earlier[-1]) if earlier.size else int(chosen[0])
    return float(advantages[owner]), owner


# --------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------


@dataclass
class CurrentSampleMarks:
    """The artists marking the current sample in one column, and the faint points' numbers."""

    point: Line2D
    gradient_point: Line2D
    unclipped: Line2D
    clip_only: Line2D
    guides: tuple[Line2D, Line2D]
    label: Annotation
    point_labels: list[Annotation]


class StepperFigure:
    """Objective (top) and gradient (bottom) for A > 0 (left) and A < 0 (right).

    The figure starts at sample 0 of ``batch``; :meth:`show` moves it to a
    sample of any batch, and ``batch``, ``step`` and ``limits`` say what it
    shows.  ``slides=True`` gives a 16:9 figure with larger type.
    """

    def __init__(self, batch: StepperBatch, *, slides: bool = False) -> None:
        limits = figure_limits(batch)  # refuse a batch that cannot be drawn before drawing
        with figure_style(slides):
            self.figure = Figure(
                figsize=SLIDE_SIZE if slides else SCREEN_SIZE, layout="constrained"
            )
            axes = self.figure.subplots(2, 2, sharex="col")
            self.columns: dict[int, PanelArtists] = {}
            self.marks: dict[int, CurrentSampleMarks] = {}
            self.curve_notes: dict[int, Text] = {}
            for column, sign in enumerate(SIGNS):
                panel = draw_objective_panel(
                    axes[0, column], axes[1, column], float(sign), ppo_clip.DEFAULT_EPS
                )
                for line in panel.samples:
                    line.set_alpha(0.55)
                panel.samples[0].set_label("other samples (at their ratios)")
                # The text is set per batch (the font follows the style).  Titles sit outside
                # the plot, so a z-order below the moving curves costs nothing in looks and
                # keeps them out of each step's redraw.
                panel.objective_ax.set_title(" ", zorder=1)
                self.columns[sign] = panel
                self.marks[sign] = _current_sample_marks(panel, sign)
                self.curve_notes[sign] = _curve_note(panel.objective_ax, sign)
            # Above the legend (z-order 5), so that a new headline does not redraw the legend.
            self.headline = self.figure.suptitle(" ", fontsize="large", fontweight="bold", zorder=6)
            handles, labels = legend_entries(axes[0, 0], axes[1, 0])
            # The marks of the current sample share legend columns; the other samples come last.
            order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("other"))
            self.figure.legend(
                [handles[i] for i in order],
                [labels[i] for i in order],
                loc="outside lower center",
                ncols=3 if slides else 4,  # larger type on a slide needs more room
                frameon=False,
            )
        self.batch, self.limits, self.step = batch, limits, 0
        self._set_batch(batch, limits)
        self._show_step(0)

    def show(self, batch: StepperBatch, step: int) -> None:
        """Draw sample ``step`` of ``batch``; a new batch first gets its own limits.

        Raises :class:`EntryError` for a batch that cannot be drawn, before
        any artist moves.
        """
        step = checked_step(batch, step)
        if batch is not self.batch:
            limits = figure_limits(batch)
            self._set_batch(batch, limits)
        self._show_step(step)

    # -- a batch ------------------------------------------------------------

    def _set_batch(self, batch: StepperBatch, limits: FigureLimits) -> None:
        """Limits, titles and point sizes for ``batch``: they stay put while stepping."""
        self.batch, self.limits = batch, limits
        b = batch.breakdown
        for sign, panel in self.columns.items():
            objective_ylim, gradient_ylim = limits.ylims[sign]
            panel.objective_ax.set_ylim(*objective_ylim)
            panel.gradient_ax.set_ylim(*gradient_ylim)
            panel.objective_ax.set_xlim(0.0, limits.r_end)
            for line in panel.samples:
                line.set_markersize(7 if batch.n <= ROBUST_LIMITS_FROM else 4)
            if sign > 0:
                title = f"A > 0: flat (clipped) where r > {exact(b.upper)}"
            elif b.lower <= 0.0:
                title = "A < 0: never clipped, since 1 − ε = 0"
            else:
                title = f"A < 0: flat (clipped) where r < {exact(b.lower)}"
            panel.objective_ax.title.set_text(title)

    # -- a step -------------------------------------------------------------

    def _show_step(self, step: int) -> None:
        self.step = step
        batch, b = self.batch, self.batch.breakdown
        current_sign = int(np.sign(b.advantages[step]))
        for sign, panel in self.columns.items():
            advantage, owner = column_advantage(batch, sign, step)
            indices = np.flatnonzero((np.sign(b.advantages) == sign) & np.isfinite(b.ratio))
            update_objective_panel(
                panel, advantage, batch.eps, b.ratio[indices], r_max=self.limits.r_end
            )
            self._number_the_points(sign, indices, step)
            self._write_curve_note(sign, advantage, owner, active=sign == current_sign)
            if sign == current_sign:
                self._mark_current(sign, step)
            else:
                self._hide_current(sign)
        self.headline.set_text(self._headline(step))

    def _number_the_points(self, sign: int, indices: np.ndarray, step: int) -> None:
        """Write each faint point's sample number next to it (not the current one's)."""
        labels = self.marks[sign].point_labels
        xs, ys = self.columns[sign].samples[0].get_data()
        numbered = len(indices) <= LABELLED_POINTS
        for position, label in enumerate(labels):
            shown = numbered and position < len(indices) and int(indices[position]) != step
            if shown:
                label.set_text(str(int(indices[position])))
                label.xy = (float(xs[position]), float(ys[position]))
                label.stale = True  # xy is a plain attribute: tell matplotlib it moved
            label.set_visible(shown)

    def _write_curve_note(self, sign: int, advantage: float, owner: int | None, active: bool):
        """Say whose advantage the column's curve is drawn for."""
        note = self.curve_notes[sign]
        if owner is None:
            note.set_text(f"no sample has A {'>' if sign > 0 else '<'} 0 (curve for A = {sign:+d})")
        else:
            whose = "this sample" if active else f"sample {owner}"
            note.set_text(f"curve for A {exact_or_approx(advantage)} ({whose})")
        note.set_color(PALETTE["black"] if active else COLORS["guide"])

    def _hide_current(self, sign: int) -> None:
        marks = self.marks[sign]
        for line in (marks.point, marks.gradient_point, marks.unclipped, marks.clip_only):
            line.set_data([], [])
        for guide in marks.guides:
            guide.set_data([], [])
        marks.label.set_visible(False)

    def _mark_current(self, sign: int, step: int) -> None:
        """The yellow points at (r, kept term) and (r, N = 1 gradient), and the candidates."""
        b, eps, r_end = self.batch.breakdown, self.batch.eps, self.limits.r_end
        marks, panel = self.marks[sign], self.columns[sign]
        top, bottom = panel.objective_ax, panel.gradient_ax
        r = float(b.ratio[step])
        if math.isfinite(r):
            gradient_n1 = float(ppo_clip.ratio_sweep([r], b.advantages[step], eps).grad[0])
        else:  # an overflowed ratio: the batch's entry has the N = 1 gradient's sign (or is 0)
            gradient_n1 = float(b.grad[step])
        off_right = r > r_end
        x = r_end if off_right else r
        # Each mark, its value, its axes, its marker; a value off an axis is pinned to the
        # edge with an arrow-like marker (the yellow points point right past the ratio axis).
        for line, value, ax, inside in (
            (marks.point, b.objective_term[step], top, "o"),
            (marks.gradient_point, gradient_n1, bottom, "o"),
            (marks.unclipped, b.unclipped_term[step], top, "D"),
            (marks.clip_only, b.clipped_term[step], top, "D"),
        ):
            y, marker = _clamp(float(value), ax.get_ylim(), inside)
            line.set_data([x], [y])
            line.set_marker(">" if off_right and inside == "o" else marker)
        for guide, ax in zip(marks.guides, (top, bottom), strict=True):
            guide.set_data([x, x], list(ax.get_ylim()))
        where = f" (r = {exact(r)}, off the axis)" if off_right else ""
        left = x > 0.62 * r_end
        marks.label.set_text(f"sample {step}{where}")
        marks.label.xy = (x, marks.point.get_ydata()[0])
        marks.label.stale = True
        marks.label.set_horizontalalignment("right" if left else "left")
        marks.label.set_position((-12 if left else 12, -16 * sign))
        marks.label.set_visible(True)

    def _headline(self, step: int) -> str:
        b = self.batch.breakdown
        a = float(b.advantages[step])
        if a == 0:
            return f"Sample {step}: A = 0, so it adds 0 to loss and gradient (on neither curve)"
        state = "clipped" if b.is_clipped[step] else "not clipped"
        text = f"Sample {step}: A {exact_or_approx(a)}, r {exact_or_approx(b.ratio[step])}, {state}"
        zeros = np.flatnonzero(b.advantages == 0)
        if zeros.size:
            text += f"   (A = 0, not drawn: {listing(zeros)})"
        return text


def _clamp(value: float, limits: tuple[float, float], inside: str) -> tuple[float, str]:
    """``value`` pulled into ``limits``, and the marker: ``inside``, or ^/v where pulled in."""
    low, high = limits
    if value > high:
        return high, "^"
    if value < low:
        return low, "v"
    return value, inside


def _current_sample_marks(panel: PanelArtists, sign: int) -> CurrentSampleMarks:
    top, bottom = panel.objective_ax, panel.gradient_ax
    black = PALETTE["black"]
    big = {"ms": 14, "mfc": COLORS["current"], "mec": black, "mew": 1.8, "zorder": 8, "ls": "none"}
    small = {"ms": 7, "mfc": "white", "mew": 1.8, "zorder": 7, "ls": "none", "marker": "D"}
    # Guides above the shaded spans (z-order 1), so that moving them leaves the spans cached.
    guide = {"color": COLORS["guide"], "lw": 1.0, "ls": (0, (2, 2)), "zorder": 1.5}
    return CurrentSampleMarks(
        point=top.plot([], [], marker="o", label="current sample: kept term", **big)[0],
        gradient_point=bottom.plot([], [], marker="o", **big)[0],
        unclipped=top.plot([], [], mec=COLORS["unclipped"], label="current sample: r·A", **small)[
            0
        ],
        clip_only=top.plot(
            [], [], mec=COLORS["clip_only"], label="current sample: clip(r)·A", **small
        )[0],
        guides=(top.plot([], [], **guide)[0], bottom.plot([], [], **guide)[0]),
        label=top.annotate(
            "",
            (0, 0),
            xytext=(12, -16 * sign),
            textcoords="offset points",
            fontweight="bold",
            color=black,
            va="top" if sign > 0 else "bottom",
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "none", "alpha": 0.85},
            zorder=9,
        ),
        point_labels=[_point_label(top, sign) for _ in range(LABELLED_POINTS)],
    )


def _point_label(ax: Axes, sign: int) -> Annotation:
    """A faint point's sample number, above it (A > 0) or below it (A < 0)."""
    return ax.annotate(
        "",
        (0, 0),
        xytext=(0, 9 * sign),
        textcoords="offset points",
        ha="center",
        va="bottom" if sign > 0 else "top",
        fontsize="small",
        color=COLORS["sample"],
        fontweight="bold",
    )


def _curve_note(ax: Axes, sign: int) -> Text:
    """The box at the bottom of a column saying whose advantage its curve is drawn for."""
    return ax.text(
        0.98 if sign > 0 else 0.02,
        0.04,
        "",
        transform=ax.transAxes,
        ha="right" if sign > 0 else "left",
        va="bottom",
        fontsize="small",
        bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": COLORS["guide"], "lw": 0.6},
        zorder=9,
    )
