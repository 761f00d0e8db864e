"""Notebook 3's analogue of the PPO paper's Figure 2, with eps on a slider.

:class:`InterpolationFigure` plots, against the interpolation factor ``t``
of :class:`~ppo_viz.epochs.interpolation.UpdateLine`, the unclipped
surrogate, the clip-only term, PPO's clipped objective (all to maximise,
minus :func:`ppo_clip.surrogate_loss`) and the exact KL from the old policy,
with the clipped objective's maximum marked.  Where the curves coincide the
widest lies underneath, so all stay visible.
:class:`InterpolationExplorer` moves eps; the line itself stays PPO's update
at the default settings.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

import ppo_clip
from ppo_viz.app import App, InputError, slider
from ppo_viz.epochs.interpolation import (
    EPS_RANGE,
    Peak,
    UpdateLine,
    clipped_peak,
    ppo_update_line,
)
from ppo_viz.html import Markup, tag
from ppo_viz.numbers import exact, rounded
from ppo_viz.style import COLORS, FORMULAS, NAMES, SLIDE_SIZE, figure_style

#: The curves that move with eps, and their look (PPO's widest, on top).
MOVING = {
    "clipped": {"lw": 3.6, "ls": "-", "zorder": 2.5},
    "clip_only": {"lw": 2.2, "ls": (0, (5, 2)), "zorder": 3},
}
KL_STYLE = {"color": COLORS["start"], "lw": 1.6, "ls": "-."}
#: The figure's size on screen (inches).
SCREEN_FIGSIZE = (10.0, 5.8)
#: Room above and below the curves, as a fraction of their range.
PADDING = 0.06


def curve_label(objective: str) -> str:
    """``PPO (clipped): mean of min(r·A, clip(r)·A)`` and so on."""
    return f"{NAMES[objective]}: mean of {FORMULAS[objective]}"


def value_range(line: UpdateLine) -> tuple[float, float]:
    """Limits that hold every curve at every eps of the slider, so the axes never move.

    Every sample's clipped term ``min(r*A, clip(r)*A)`` grows with eps, so
    PPO's curves at the slider's two ends bound all the others.  A clip-only
    term moves up or down with eps depending on its sample, so its curve at
    the two ends bounds it only roughly: the padding leaves room, and the
    tests check a fine grid of eps in between.
    """
    curves = [line.unclipped, line.kl, np.zeros(1)]
    curves += [line.objective(o, eps) for o in MOVING for eps in EPS_RANGE]
    low = min(float(c.min()) for c in curves)
    high = max(float(c.max()) for c in curves)
    room = PADDING * (high - low)
    return low - room, high + room


class InterpolationFigure:
    """The objectives and the KL along the line through PPO's update.

    ``show(eps)`` moves the clip-only and clipped curves and the maximum's
    marker; ``curves`` holds the values on screen and ``peak`` the maximum.
    """

    def __init__(self, line: UpdateLine, eps: float, *, slides: bool = False) -> None:
        self.line = line
        self.curves: dict[str, np.ndarray] = {"unclipped": line.unclipped, "kl": line.kl}
        with figure_style(slides):
            size = SLIDE_SIZE if slides else SCREEN_FIGSIZE
            self.figure = Figure(figsize=size, layout="constrained")
            self.ax = self.figure.add_subplot()
            self._decorate()
            factors = line.factors
            self.unclipped_line = self.ax.plot(
                factors,
                line.unclipped,
                color=COLORS["unclipped"],
                lw=1.5,
                zorder=4,
                label=curve_label("unclipped"),
            )[0]
            self.moving = {
                objective: self.ax.plot(
                    [], [], color=COLORS[objective], label=curve_label(objective), **style
                )[0]
                for objective, style in MOVING.items()
            }
            self.kl_line = self.ax.plot(
                factors, line.kl, **KL_STYLE, zorder=2, label="KL(π_old ‖ π_θ), exact"
            )[0]
            self.peak_marker = self.ax.plot(
                [],
                [],
                ls="none",
                marker="o",
                ms=9,
                mfc=COLORS["clipped"],
                mec="white",
                mew=1.5,
                zorder=5,
            )[0]
            self.peak_drop = self.ax.plot([], [], color=COLORS["clipped"], lw=1.0, ls=":")[0]
            self.peak_text = self.ax.annotate(
                "",
                (0.0, 0.0),
                xytext=(-10, 12),
                textcoords="offset points",
                ha="right",
                va="bottom",
                color=COLORS["clipped"],
                fontweight="bold",
                zorder=6,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0, "alpha": 0.85},
            )
            # Outside the axes, so that no moving curve lies under it (no repaint per redraw).
            self.figure.legend(loc="outside lower center", ncols=2, frameon=False)
        self.peak: Peak | None = None
        self.show(eps)

    def _decorate(self) -> None:
        """Axes, limits and the two marked factors: 0 (the old policy) and 1 (PPO's update)."""
        ax, line = self.ax, self.line
        ax.set_xlim(line.factors[0], line.factors[-1])
        ax.set_ylim(*value_range(line))
        ax.set_xlabel("interpolation factor t:  θ = θ_old + t · (θ_PPO − θ_old)")
        ax.set_ylabel("objective (to maximise) and KL")
        ax.axhline(0.0, color=COLORS["guide"], lw=0.8, zorder=1)
        for factor, text in ((0.0, "θ_old"), (1.0, f"θ_PPO:\n{line.end_label}")):
            ax.axvline(factor, color=COLORS["start"], lw=0.9, ls=":", zorder=1)
            ax.annotate(
                text,
                (factor, 0.0),
                xycoords=("data", "axes fraction"),
                xytext=(4, 6),
                textcoords="offset points",
                ha="left",
                va="bottom",
                fontsize="small",
            )

    def show(self, eps: float) -> None:
        """Draw the clip-only and clipped curves at ``eps``, and the clipped one's maximum."""
        for objective, artist in self.moving.items():
            values = self.line.objective(objective, eps)
            self.curves[objective] = values
            artist.set_data(self.line.factors, values)
        peak = clipped_peak(self.line, self.curves["clipped"])
        self.peak = peak
        self.peak_marker.set_data([peak.factor], [peak.value])
        self.peak_drop.set_data([peak.factor, peak.factor], [peak.value, peak.kl])
        self.peak_text.xy = (peak.factor, peak.value)
        self.peak_text.set_text(f"PPO's maximum\nKL {rounded(peak.kl, 3)}")
        self.peak_text.stale = True  # xy is a plain attribute: tell matplotlib it moved


class InterpolationExplorer(App):
    """An eps slider over :class:`InterpolationFigure`, with a readout of the maximum."""

    description = "PPO's objectives along the line through one update (the PPO paper's Figure 2)"
    slide_name = "ppo_objectives_along_the_update"

    def __init__(self, eps: float = ppo_clip.DEFAULT_EPS) -> None:
        """Start at ``eps``; a value outside :data:`EPS_RANGE` raises :class:`InputError`."""
        self.line = ppo_update_line()
        self.eps = slider("ε (clip size)", checked_eps(eps), EPS_RANGE, 0.01, name="figure2-eps")
        self.readout = widgets.HTML()
        super().__init__(controls=[self.eps], readouts=[self.readout])

    def make_plot(self, slides: bool) -> InterpolationFigure:
        return InterpolationFigure(self.line, self.eps.value, slides=slides)

    def draw(self, plot: InterpolationFigure) -> None:
        plot.show(checked_eps(self.eps.value))

    def update_readouts(self) -> None:
        self.readout.value = str(peak_readout(self.eps.value, self.plot))


def checked_eps(eps: object) -> float:
    """``eps`` as a float in :data:`EPS_RANGE`, or an :class:`InputError` saying why not."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise InputError(f"eps must be a number, got {type(eps).__name__}")
    low, high = EPS_RANGE
    if not (math.isfinite(eps) and low <= eps <= high):
        raise InputError(f"eps must be between {exact(low)} and {exact(high)}, got {eps!r}")
    return float(eps)


def peak_readout(eps: float, plot: InterpolationFigure) -> Markup:
    """Where PPO's objective peaks along the line, and what the other curves do there."""
    peak = plot.peak
    assert peak is not None
    factors = plot.line.factors
    return tag(
        "div",
        f"At ε = {rounded(eps, 2)} PPO's clipped objective is largest at t = ",
        tag("b", rounded(peak.factor, 3)),
        f" (on a grid of step {rounded(factors[1] - factors[0], 2)}), where "
        f"KL(π_old ‖ π_θ) = {rounded(peak.kl, 3)}. "
        f"At t = {rounded(factors[-1], 2)} the unclipped surrogate is "
        f"{rounded(plot.curves['unclipped'][-1], 3)}, PPO's "
        f"{rounded(plot.curves['clipped'][-1], 3)}.",
        classes="ppo",
    )
