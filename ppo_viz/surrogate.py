"""Notebook 1: the clipped surrogate and its gradient against the ratio, for A > 0 and A < 0.

:class:`SurrogateExplorer` draws two :mod:`ppo_viz.panels` columns side by side, one for a
positive and one for a negative advantage, each with the objective term on top and the gradient
of the loss below, every value taken from :func:`ppo_clip.ratio_sweep`, under an ``eps``
slider, an advantage slider and a switch for the worked example's points.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from matplotlib.text import Annotation

import ppo_clip
from ppo_viz.app import LiveFigure
from ppo_viz.controls import checkbox, checked_flag, checked_number, slider
from ppo_viz.html import Markup, tag
from ppo_viz.numbers import rounded
from ppo_viz.panels import flat_where, legend_entries, objective_figure, ratio_grid
from ppo_viz.style import COLORS, SCREEN_SIZE, figure_style, legend_below, presenting

#: The ratio axis of notebook 1's figure: change it here and the figure, the sliders' story and
#: the tests follow.
RATIO_AXIS = (0.0, 3.0)
#: The advantage slider's range (a magnitude; the two columns use +A and -A).
ADVANTAGE_RANGE = (0.25, 2.0)
DEFAULT_ADVANTAGE = 1.0
DEFAULT_EPS = ppo_clip.DEFAULT_EPS
#: Vertical reach of the axes: the largest flat level, ``(1 + eps) * |A|`` at the sliders'
#: ends, with a little room, so the axes never move.
REACH = 2.0 * ADVANTAGE_RANGE[1] * 1.08


#: Where the worked example's labels go, per column and by ratio, clear of the curves and of the
#: dotted line r = 1: offset in points, alignment, and what separates "sample t" from "(A = ...)".
LABEL_PLACES = {
    +1: [((7, 5), "left", "bottom", " "), ((7, 5), "left", "bottom", " ")],
    -1: [((-4, -5), "right", "top", "\n"), ((16, 0), "left", "center", " ")],
}
#: How a "sample t (A = ...)" label is drawn, at its place's offset in points from its point.
SAMPLE_LABEL = {
    "textcoords": "offset points",
    "fontsize": "small",
    "fontweight": "bold",
    "color": COLORS["sample"],
    # On a white ground: readable where it crosses a curve or the band.
    "bbox": {"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
}


class SurrogateExplorer(LiveFigure):
    """The 2x2 figure, objective (top) and gradient (bottom) for A > 0 and A < 0, under sliders
    for ``eps`` and the advantage's magnitude and a switch for the worked example's points.

    :meth:`update` moves the figure to new settings and returns the readout; :attr:`sweeps`
    holds the :class:`ppo_clip.ClipBreakdown` each column was drawn from.
    """

    description = "PPO's clipped objective and its gradient against the ratio"

    def __init__(
        self,
        advantage: float = DEFAULT_ADVANTAGE,
        eps: float = DEFAULT_EPS,
        *,
        show_worked_example: bool = True,
    ) -> None:
        checked_number("advantage", advantage, ADVANTAGE_RANGE)
        checked_number("eps", eps, (0.0, 1.0))
        checked_flag("show_worked_example", show_worked_example)
        #: The worked example's four samples, each a batch of one (as every point of a sweep).
        self.example = replace(ppo_clip.clip_breakdown(*ppo_clip.worked_example()), batch_size=1)
        signs = np.sign(self.example.advantages)
        #: Per column, the worked example's samples of its sign, by ratio.
        self.indices = {
            s: np.flatnonzero(signs == s)[np.argsort(self.example.ratio[signs == s])]
            for s in (+1, -1)
        }
        self.sweeps: dict[int, ppo_clip.ClipBreakdown] = {}
        self.sample_labels: dict[int, list[Annotation]] = {}
        with figure_style():
            figure, self.columns = objective_figure(SCREEN_SIZE, RATIO_AXIS, reach=REACH)
            for sign, panel in self.columns.items():
                top = panel.objective_ax
                top.set_title(" ")  # the text is set by update(); the font follows the style
                self.sample_labels[sign] = [
                    top.annotate("", (0, 0), xytext=offset, ha=ha, va=va, **SAMPLE_LABEL)
                    for offset, ha, va, _ in LABEL_PLACES[sign]
                ]
            handles, labels = legend_entries(self.columns[+1])
            legend_below(figure, 2 if presenting() else 3, handles=handles, labels=labels)
        moving = []
        for sign, panel in self.columns.items():
            moving += [*panel.moving, panel.objective_ax.title, *self.sample_labels[sign]]
        controls = {
            "eps": slider("ε (clip size)", eps, (0.0, 1.0), 0.01),
            "advantage": slider("|A| (advantage)", advantage, ADVANTAGE_RANGE, 0.25),
            "worked_example": checkbox("worked-example points", show_worked_example),
        }
        rows = [["eps", "advantage"], ["worked_example"]]
        super().__init__(figure, self.update, controls, moving=moving, rows=rows)

    def update(self, eps: float, advantage: float, worked_example: bool = True) -> Markup:
        """Redraw both columns for ``eps`` and the advantage's magnitude; return the readout.

        One sweep of ``ppo_clip`` gives the A > 0 column; the A < 0 column is the same
        breakdown with the advantages' sign flipped; the worked example's points are the
        example's four samples, each a batch of one, in the sweep's band.
        """
        grid = ratio_grid(eps, r_axis=RATIO_AXIS)  # the band's edges and 1 on the grid
        sweep = ppo_clip.ratio_sweep(grid, advantage, eps)
        self.sweeps = {+1: sweep, -1: replace(sweep, advantages=-sweep.advantages)}
        samples = replace(self.example, lower=sweep.lower, upper=sweep.upper)
        for sign, panel in self.columns.items():
            panel.show(self.sweeps[sign], samples, self.indices[sign] if worked_example else [])
            flat = flat_where(self.sweeps[sign], sign, "{:.2f}".format)
            panel.objective_ax.title.set_text(f"A = {sign * advantage:+.2f}: {flat}")
            labels = self.sample_labels[sign], LABEL_PLACES[sign]
            for t, label, (*_, gap) in zip(self.indices[sign], *labels, strict=True):
                text = f"sample {t}{gap}(A = {samples.advantages[t]:+g})"
                label.set_text(text if worked_example else "")
                label.xy = (samples.ratio[t], samples.objective_term[t])
        return readout_html(sweep)


def readout_html(sweep: ppo_clip.ClipBreakdown) -> Markup:
    """The band, from the sweep's own edges; where each sign's gradient is zero is in the titles
    (:func:`ppo_viz.panels.flat_where`), not spelled a second time here."""
    band = tag("b", f"[{rounded(sweep.lower, 3)}, {rounded(sweep.upper, 3)}]")
    rest = (
        ". A column's gradient is zero only where its title says the term is flat; "
        "moves the other way always keep their full gradient."
    )
    return tag("div", "Clip band: ", band, rest, classes="ppo")
