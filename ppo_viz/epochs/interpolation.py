"""Notebook 3's analogue of the PPO paper's Figure 2, with ε on a slider.

Against the interpolation factor ``t`` of :class:`~ppo_viz.epochs.foundations.UpdateLine`:
the unclipped surrogate, the clip-only term and PPO's clipped objective (all to maximise,
minus :func:`ppo_clip.surrogate_loss`) and the exact KL from the old policy, with the clipped
objective's maximum marked.  The slider moves ε in the objectives; the line stays PPO's
update at the default settings.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

import ppo_clip
from ppo_viz.app import LiveFigure, checked_number, slider
from ppo_viz.epochs.foundations import UpdateLine, ppo_update_line
from ppo_viz.epochs.training import SETTING_RANGES
from ppo_viz.html import Markup, tag
from ppo_viz.numbers import rounded
from ppo_viz.style import COLORS, FORMULAS, LINES, NAMES, figure_style, legend_below

#: The range of the ε slider (the epochs explorer's).
EPS_RANGE = SETTING_RANGES["eps"][:2]
#: How the figure draws the exact KL, PPO's maximum, its label and the labels of t = 0 and 1.
KL_LINE = {"color": COLORS["start"], "lw": 1.4, "ls": "-.", "label": "KL(π_old ‖ π_θ), exact"}
PEAK = {"ls": "none", "marker": "o", "ms": 9, "mfc": COLORS["clipped"], "mec": "white"}
PEAK_LABEL = {"textcoords": "offset points", "ha": "right", "color": COLORS["clipped"]}
PEAK_LABEL |= {"fontweight": "bold", "zorder": 6}
END_LABEL = {"xytext": (4, 6), "textcoords": "offset points", "fontsize": "small"}


def value_range(line: UpdateLine) -> tuple[float, float]:
    """Limits that hold every curve at every ε of the slider, so the axes never move.

    Each sample's clipped term grows with ε, so PPO's curves at the slider's ends bound the
    others; a clip-only term can move either way, so its curves at the ends bound it only
    roughly: 6% of room on each side (the tests check a fine grid of ε in between).
    """
    curves = [line.objective("unclipped", 0.0), line.kl, np.zeros(1)]
    curves += [line.objective(o, eps) for o in ("clipped", "clip_only") for eps in EPS_RANGE]
    low, high = min(c.min() for c in curves), max(c.max() for c in curves)
    return low - 0.06 * (high - low), high + 0.06 * (high - low)


def _label(objective: str) -> str:
    return f"{NAMES[objective]}: mean of {FORMULAS[objective]}"


class InterpolationExplorer(LiveFigure):
    """An ε slider over the objectives along the line through PPO's update."""

    description = "PPO's objectives along the line through one update (the paper's Figure 2)"

    def __init__(self, eps: float = ppo_clip.DEFAULT_EPS) -> None:
        checked_number("eps", eps, EPS_RANGE)
        self.line = line = ppo_update_line()
        with figure_style():
            figure = Figure(figsize=(9.0, 5.2), layout="constrained")
            ax = self.ax = figure.add_subplot()
            ax.set(xlim=(line.factors[0], line.factors[-1]), ylim=value_range(line))
            ax.set(xlabel="interpolation factor t:  θ = θ_old + t · (θ_PPO − θ_old)")
            ax.set_ylabel("objective (to maximise) and KL")
            ax.axhline(0.0, color=COLORS["guide"], lw=0.8)
            for factor, text in ((0.0, "θ_old"), (1.0, f"θ_PPO:\n{line.end_label}")):
                ax.axvline(factor, color=COLORS["start"], lw=0.9, ls=":")
                ax.annotate(text, (factor, 0.0), xycoords=("data", "axes fraction"), **END_LABEL)
            self.curves = {  # the unclipped curve is the same at every ε
                objective: ax.plot([], [], **LINES[objective], label=_label(objective))[0]
                for objective in ("unclipped", "clip_only", "clipped")
            }
            ax.plot(line.factors, line.kl, **KL_LINE)
            self.peak = ax.plot([], [], **PEAK, zorder=5)[0]
            self.peak_text = ax.annotate("", (0, 0), xytext=(-10, 12), **PEAK_LABEL)
            legend_below(figure, 2)
        controls = {"figure2_eps": slider("ε (clip size)", eps, EPS_RANGE, 0.01)}
        moving = [*self.curves.values(), self.peak, self.peak_text]
        super().__init__(figure, self.update, controls, moving=moving)

    def update(self, figure2_eps: float) -> Markup:
        """Draw the objectives at ε and the clipped one's maximum; return where it lies."""
        eps = float(figure2_eps)  # in range: the slider clamps, and LiveFigure refuses NaN
        for objective, artist in self.curves.items():
            artist.set_data(self.line.factors, self.line.objective(objective, eps))
        factor, value, kl = self.line.peak(eps)
        self.peak.set_data([factor], [value])
        self.peak_text.xy = (factor, value)
        self.peak_text.set_text(f"PPO's maximum\nKL {rounded(kl, 3)}")
        factors, ends = self.line.factors, {o: c.get_ydata()[-1] for o, c in self.curves.items()}
        return tag(
            "div",
            f"At ε = {rounded(eps, 2)} PPO's clipped objective is largest at t = ",
            tag("b", rounded(factor, 3)),
            f" (on a grid of step {rounded(factors[1] - factors[0], 2)}), where KL(π_old ‖ π_θ) = "
            f"{rounded(kl, 3)}. At t = {rounded(factors[-1], 2)} the unclipped surrogate is "
            f"{rounded(ends['unclipped'], 3)}, PPO's {rounded(ends['clipped'], 3)}.",
            classes="ppo",
        )
