"""Two variants of the clip on notebook 1's panels: :class:`VariantsExplorer`.

* Asymmetric bounds ("clip-higher", as in DAPO, Yu et al. 2025, arXiv
  2503.14476): the band becomes ``[1 - eps_low, 1 + eps_high]``.
* Dual clip (Ye et al. 2020, arXiv 1912.09729): for ``A < 0`` the kept term
  never falls below ``c * A``, so beyond ``r = c`` it is flat and its
  gradient is zero.

:class:`VariantsFigure` draws notebook 1's objective/gradient panels
(:mod:`ppo_viz.panels`) for ``A = +1`` and ``A = -1`` with the variant
keywords passed to :func:`ppo_clip.ratio_sweep`, on a ratio axis extended to
4 so that verl's default cap ``c = 3`` shows; :class:`VariantsExplorer` adds
sliders for ``eps_low``, ``eps_high`` and ``c`` and a switch for the cap.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import ppo_clip
from ppo_viz.app import App, InputError, main_control, slider
from ppo_viz.html import Markup, tag
from ppo_viz.numbers import rounded
from ppo_viz.numerics.layers import drawn_below_the_data
from ppo_viz.panels import (
    PanelArtists,
    draw_objective_panel,
    legend_entries,
    set_fixed_limits,
    update_objective_panel,
)
from ppo_viz.style import COLORS, SCREEN_SIZE, SLIDE_SIZE, figure_style

#: The symmetric clip size the panels start from (the variants replace its bounds).
EPS = ppo_clip.DEFAULT_EPS
#: The ratio axis: wider than notebook 1's, so that the dual-clip cap c = 3
#: shows with room (verl's default ``clip_ratio_c``, read in
#: ``verl/trainer/ppo/core_algos.py`` at commit 012be9d).
VARIANT_R_MAX = 4.0
#: Fixed y limits of the figure for A = +1 and A = -1.
VARIANT_REACH = 4.2
#: DAPO's "clip-higher" bounds (as in verl's ``recipe/dapo/run_dapo_qwen2.5_32b.sh`` at
#: commit e2e729f), and verl's default cap.
DEFAULT_EPS_LOW = 0.2
DEFAULT_EPS_HIGH = 0.28
DEFAULT_CAP = 3.0
#: The cap slider stops short of the axis end, so the flat part always shows.
CAP_RANGE = (1.05, VARIANT_R_MAX - 0.1)
COLUMN_TITLES = {
    +1: "A = +1: an action that did better than expected",
    -1: "A = −1: an action that did worse than expected",
}


class VariantsFigure:
    """Notebook 1's objective/gradient panels for A = +1 and A = -1, with the variants.

    Each column is drawn by :func:`ppo_viz.panels.draw_objective_panel` with
    ``eps_low``, ``eps_high`` and ``dual_clip`` passed to
    :func:`ppo_clip.ratio_sweep`; the panels shade the dual-clip region
    (A < 0, r > c) on its own, and a dash-dot line marks ``r = c``.
    :meth:`update` moves both columns; ``sweeps`` holds what they were drawn
    from.  With ``slides=True`` the figure is 16:9 with larger type.
    """

    def __init__(
        self,
        eps_low: float = DEFAULT_EPS_LOW,
        eps_high: float = DEFAULT_EPS_HIGH,
        dual_clip: float | None = DEFAULT_CAP,
        *,
        slides: bool = False,
    ) -> None:
        with figure_style(slides):
            self.figure = Figure(
                figsize=SLIDE_SIZE if slides else SCREEN_SIZE, layout="constrained"
            )
            axes = self.figure.subplots(2, 2, sharex="col")
            self.columns: dict[int, PanelArtists] = {}
            self.cap_lines: dict[int, tuple[Line2D, Line2D]] = {}
            for column, sign in enumerate((+1, -1)):
                top, bottom = axes[0, column], axes[1, column]
                panel = draw_objective_panel(top, bottom, float(sign), EPS, r_max=VARIANT_R_MAX)
                for band in panel.bands:
                    band.set_label("clip band [1 − ε_low, 1 + ε_high]")
                panel.objective.set_label("top: PPO with the variant")
                top.set_title(COLUMN_TITLES[sign])
                drawn_below_the_data(top.title)
                self.columns[sign] = panel
                self.cap_lines[sign] = (self._cap_line(top), self._cap_line(bottom))
                set_fixed_limits(top, bottom, sign, reach=VARIANT_REACH, r_max=VARIANT_R_MAX)
            self.cap_lines[-1][0].set_label("dual-clip cap r = c")
            handles, labels = legend_entries(axes[0, 1], axes[1, 1])
            shown = [i for i, name in enumerate(labels) if "worked-example" not in name]
            self.figure.legend(
                [handles[i] for i in shown],
                [labels[i] for i in shown],
                loc="outside lower center",
                ncols=3 if slides else 4,  # a slide's larger type needs a narrower legend
                frameon=False,
            )
        self.sweeps: dict[int, ppo_clip.ClipBreakdown] = {}
        self.update(eps_low, eps_high, dual_clip)

    @staticmethod
    def _cap_line(ax: Axes) -> Line2D:
        return ax.axvline(np.nan, color=COLORS["threshold"], ls="-.", lw=1.5)

    def update(self, eps_low: float, eps_high: float, dual_clip: float | None) -> None:
        """Redraw both columns; ``ValueError`` (from :mod:`ppo_clip`) on bad settings.

        The settings are checked before anything moves.
        """
        variant = {"eps_low": eps_low, "eps_high": eps_high, "dual_clip": dual_clip}
        ppo_clip.ratio_sweep([1.0], 1.0, EPS, **variant)  # raises before anything moves
        for sign, panel in self.columns.items():
            self.sweeps[sign] = update_objective_panel(
                panel, float(sign), EPS, r_max=VARIANT_R_MAX, **variant
            )
            cap_x = dual_clip if (dual_clip is not None and sign < 0) else np.nan
            for line in self.cap_lines[sign]:
                line.set_xdata([cap_x, cap_x])


class VariantsExplorer(App):
    """Sliders for ``eps_low``, ``eps_high`` and the dual-clip cap over :class:`VariantsFigure`."""

    description = "PPO's clipped objective with asymmetric bounds and a dual-clip cap"
    slide_name = "ppo_clip_variants"

    def __init__(
        self,
        eps_low: float = DEFAULT_EPS_LOW,
        eps_high: float = DEFAULT_EPS_HIGH,
        dual_clip: float | None = DEFAULT_CAP,
    ) -> None:
        ppo_clip.clip_band(EPS, eps_low, eps_high)  # a ValueError naming a bad bound
        if dual_clip is not None and not CAP_RANGE[0] <= dual_clip <= CAP_RANGE[1]:
            raise ValueError(
                f"dual_clip must be from {CAP_RANGE[0]} to {CAP_RANGE[1]} (or None), "
                f"got {dual_clip!r}"
            )
        eps = (0.0, 1.0)
        self.eps_low = slider("ε_low (lower bound)", eps_low, eps, 0.01, name="eps-low")
        self.eps_high = slider("ε_high (upper bound)", eps_high, eps, 0.01, name="eps-high")
        cap = DEFAULT_CAP if dual_clip is None else dual_clip
        self.cap = slider("dual-clip cap c", cap, CAP_RANGE, 0.05, name="cap")
        self.cap_on = main_control(
            widgets.Checkbox(value=dual_clip is not None, description="dual clip on", indent=False),
            "cap-on",
        )
        self.readout = widgets.HTML()
        super().__init__(
            controls=[[self.eps_low, self.eps_high], [self.cap, self.cap_on]],
            readouts=[self.readout],
        )

    @property
    def dual_clip(self) -> float | None:
        """The cap currently in force, or ``None`` when dual clip is off."""
        return float(self.cap.value) if self.cap_on.value else None

    def make_plot(self, slides: bool) -> VariantsFigure:
        return VariantsFigure(slides=slides)  # draw() then moves it to the controls' values

    def draw(self, plot: VariantsFigure) -> None:
        self.cap.disabled = not self.cap_on.value
        try:
            plot.update(float(self.eps_low.value), float(self.eps_high.value), self.dual_clip)
        except ValueError as error:
            raise InputError(f"Could not use these settings: {error}.") from None

    def update_readouts(self) -> None:
        self.readout.value = variants_readout_html(self.plot.sweeps)


def where_flat(sign: int, sweep: ppo_clip.ClipBreakdown) -> str:
    """Where one column's term is flat (clipped), from its sweep's own band and cap."""
    if sign > 0:
        return f"A = +1: flat (clipped) where r > {rounded(sweep.upper, 3)}"
    parts = []
    if sweep.lower > 0.0:
        parts.append(f"r < {rounded(sweep.lower, 3)}")
    if sweep.dual_clip is not None:
        parts.append(f"r > {rounded(sweep.dual_clip, 3)}")
    if not parts:
        return f"A = −1: never clipped (1 − ε_low = {rounded(sweep.lower, 3)})"
    return "A = −1: flat (clipped) where " + " or ".join(parts)


def variants_readout_html(sweeps: dict[int, ppo_clip.ClipBreakdown]) -> Markup:
    """The band, the cap and where each column is flat, from the sweeps' own values."""
    sweep = sweeps[-1]
    lower, upper = rounded(sweep.lower, 3), rounded(sweep.upper, 3)
    eps_low, eps_high = rounded(1.0 - sweep.lower, 3), rounded(sweep.upper - 1.0, 3)
    cap = (
        f"dual clip on: for A < 0 the term is capped at c·A beyond r = "
        f"{rounded(sweep.dual_clip, 3)}"
        if sweep.dual_clip is not None
        else "dual clip off: for A < 0 the term r·A keeps falling as r grows"
    )
    flat = ". ".join(where_flat(sign, sweeps[sign]) for sign in (+1, -1))
    return tag(
        "div",
        tag(
            "div",
            "Clip band ",
            tag("b", f"[{lower}, {upper}]"),
            f" (ε_low = {eps_low}, ε_high = {eps_high}); {cap}.",
        ),
        tag("div", f"{flat}."),
        classes="ppo",
    )
