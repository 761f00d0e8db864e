"""Notebook 1: the clipped surrogate and its gradient against the ratio, for A > 0 and A < 0.

:class:`SurrogateFigure` draws two :mod:`ppo_viz.panels` columns side by side,
one for a positive and one for a negative advantage, each with the objective
term on top and the gradient of the loss below, every value taken from
:func:`ppo_clip.ratio_sweep`.  :class:`SurrogateExplorer` wires it to an
``eps`` slider, an advantage slider and a switch for the worked example's
points.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.text import Annotation

import ppo_clip
from ppo_viz.app import App, checked_flag, checked_number, main_control, slider
from ppo_viz.html import Markup, tag
from ppo_viz.numbers import rounded
from ppo_viz.panels import (
    R_MAX,
    PanelArtists,
    draw_objective_panel,
    legend_entries,
    set_fixed_limits,
    update_objective_panel,
)
from ppo_viz.style import COLORS, SCREEN_SIZE, SLIDE_SIZE, figure_style

#: The right end of the ratio axis (it starts at 0): change it here for notebook 1's figure.
RATIO_AXIS_END = R_MAX
#: The advantage slider's range (a magnitude; the two columns use +A and -A).
ADVANTAGE_RANGE = (0.25, 2.0)
DEFAULT_ADVANTAGE = 1.0
DEFAULT_EPS = ppo_clip.DEFAULT_EPS
#: Vertical reach of the on-screen axes: the largest flat level, ``(1 + eps) * |A|``
#: at the sliders' ends, with a little room, so the axes never move.
SCREEN_REACH = 2.0 * ADVANTAGE_RANGE[1] * 1.08


def slide_reach(advantage: float, eps: float) -> float:
    """Vertical reach of a slide: fitted to the chosen ``|A|`` and ``eps``, not the sliders."""
    return max(1.0 + eps, 1.5) * abs(advantage) * 1.15


class SurrogateFigure:
    """The 2x2 figure: objective (top) and gradient (bottom), for A > 0 and A < 0.

    ``update(advantage, eps)`` moves every artist in place; ``sweeps`` holds
    the :class:`ppo_clip.ClipBreakdown` each column was drawn from.  With
    ``slides=True`` the figure is 16:9 with larger type and its y axes fit
    the advantage it is first drawn for.
    """

    def __init__(
        self,
        advantage: float = DEFAULT_ADVANTAGE,
        eps: float = DEFAULT_EPS,
        *,
        slides: bool = False,
        show_worked_example: bool = True,
    ) -> None:
        self.example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
        self.show_worked_example = show_worked_example
        reach = slide_reach(advantage, eps) if slides else SCREEN_REACH
        with figure_style(slides):
            self.figure = Figure(
                figsize=SLIDE_SIZE if slides else SCREEN_SIZE, layout="constrained"
            )
            axes = self.figure.subplots(2, 2, sharex="col")
            self.columns: dict[int, PanelArtists] = {}
            self.sample_labels: dict[int, list[Annotation]] = {}
            for column, sign in enumerate((+1, -1)):
                top, bottom = axes[0, column], axes[1, column]
                self.columns[sign] = draw_objective_panel(
                    top, bottom, sign * advantage, eps, r_max=RATIO_AXIS_END
                )
                top.set_title(" ")  # the text is set by update(); the font follows the style
                self.sample_labels[sign] = [self._sample_label(top, sign, p) for p in range(2)]
                set_fixed_limits(top, bottom, sign, reach=reach, r_max=RATIO_AXIS_END)
            self.figure.legend(
                *legend_entries(axes[0, 0], axes[1, 0]),
                loc="outside lower center",
                ncols=3 if slides else 4,
                frameon=False,
            )
        self.sweeps: dict[int, ppo_clip.ClipBreakdown] = {}
        self.update(advantage, eps)

    def update(self, advantage: float, eps: float) -> None:
        """Redraw both columns for advantage magnitude ``advantage`` and ``eps``."""
        for sign, panel in self.columns.items():
            indices = self._sample_indices(sign)
            ratios = self.example.ratio[indices]
            sweep = update_objective_panel(
                panel, sign * advantage, eps, ratios, r_max=RATIO_AXIS_END
            )
            self.sweeps[sign] = sweep
            panel.objective_ax.title.set_text(column_title(sign * advantage, sweep))
            self._place_sample_labels(sign, indices)

    def _sample_indices(self, sign: int) -> np.ndarray:
        """The worked example's samples of this sign, by ratio (none when hidden)."""
        if not self.show_worked_example:
            return np.array([], dtype=int)
        chosen = np.flatnonzero(np.sign(self.example.advantages) == sign)
        return chosen[np.argsort(self.example.ratio[chosen])]

    @staticmethod
    def _sample_label(ax, sign: int, position: int) -> Annotation:
        """A "sample t" label for the column's ``position``-th point (by ratio).

        Labels sit on the side of the curve away from it: above the rising
        A > 0 curve, and for A < 0 below the flat part (left) and above the
        falling part (right).
        """
        left = position == 0
        above = sign if left else 1
        return ax.annotate(
            "",
            (0, 0),
            xytext=(-7 if left else 7, above * 7),
            textcoords="offset points",
            fontsize="small",
            color=COLORS["sample"],
            fontweight="bold",
            ha="right" if left else "left",
            va="bottom" if above > 0 else "top",
        )

    def _place_sample_labels(self, sign: int, indices: np.ndarray) -> None:
        xs, ys = self.columns[sign].samples[0].get_data()
        for position, label in enumerate(self.sample_labels[sign]):
            shown = position < len(indices)
            label.set_text(f"sample {indices[position]}" if shown else "")
            label.xy = (xs[position], ys[position]) if shown else (0.0, 0.0)
            label.stale = True  # xy is a plain attribute: tell matplotlib it moved


def column_title(advantage: float, sweep: ppo_clip.ClipBreakdown) -> str:
    """Where the column's objective is flat, using the sweep's own band."""
    if advantage > 0:
        return f"A = {advantage:+.2f} > 0: flat (clipped) where r > {sweep.upper:.2f}"
    if sweep.lower <= 0.0:
        return f"A = {advantage:+.2f} < 0: never clipped, since 1 − ε = {sweep.lower:.2f}"
    return f"A = {advantage:+.2f} < 0: flat (clipped) where r < {sweep.lower:.2f}"


class SurrogateExplorer(App):
    """Sliders for ``eps`` and the advantage's magnitude over :class:`SurrogateFigure`."""

    description = "PPO's clipped objective and its gradient against the ratio"
    slide_name = "ppo_clipped_objective"

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
        self.eps = slider("ε (clip size)", eps, (0.0, 1.0), 0.01, name="eps")
        self.advantage = slider(
            "|A| (advantage)", advantage, ADVANTAGE_RANGE, 0.25, name="advantage"
        )
        self.worked_example = main_control(
            widgets.Checkbox(
                value=show_worked_example, description="worked-example points", indent=False
            ),
            "worked-example",
        )
        self.readout = widgets.HTML()
        super().__init__(
            controls=[[self.eps, self.advantage], self.worked_example], readouts=[self.readout]
        )

    def make_plot(self, slides: bool) -> SurrogateFigure:
        return SurrogateFigure(
            self.advantage.value,
            self.eps.value,
            slides=slides,
            show_worked_example=self.worked_example.value,
        )

    def draw(self, plot: SurrogateFigure) -> None:
        plot.show_worked_example = self.worked_example.value
        plot.update(self.advantage.value, self.eps.value)

    def update_readouts(self) -> None:
        self.readout.value = readout_html(self.plot.sweeps[+1])


def readout_html(sweep: ppo_clip.ClipBreakdown) -> Markup:
    """The band and where each sign's gradient switches off, from the sweep's own band."""
    lower, upper = rounded(sweep.lower, 3), rounded(sweep.upper, 3)
    negative = (
        f"with A < 0 once r < {lower}"
        if sweep.lower > 0
        else "with A < 0 never, since no ratio is below 1 − ε = 0"
    )
    return tag(
        "div",
        "Clip band: ",
        tag("b", f"[{lower}, {upper}]"),
        f". With A > 0 the gradient is zero once r > {upper}; {negative}. "
        "Moves the other way always keep their full gradient.",
        classes="ppo",
    )


__all__ = [
    "RATIO_AXIS_END",
    "SurrogateExplorer",
    "SurrogateFigure",
    "column_title",
    "readout_html",
]
