"""The figures of notebook 4: PPO's loop on the bandit (part A) and on CartPole (part B).

Each figure is built once and then updated in place from runs
(:meth:`BanditLoopFigure.update`, :meth:`CartPoleFigure.update`): every
method has one line per panel (the mean over seeds) and a shaded band (the
middle half of the seeds, 25th to 75th percentile).  Colours and names come
from :mod:`ppo_viz.style` through :class:`~ppo_viz.why_clip.methods.Method`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ppo_viz.style import COLORS, SCREEN_SIZE, SLIDE_SIZE, figure_style
from ppo_viz.why_clip.bandit_loop import (
    BEST_REWARD,
    COLLAPSE_PROBABILITY,
    RANDOM_REWARD,
    BanditLoopHistory,
)
from ppo_viz.why_clip.cartpole_ppo import CURVE_EPISODES, RANDOM_RETURN, CartPoleRuns
from ppo_viz.why_clip.methods import METHODS, FloatArray, Spread, spread

#: Fixed margins (fractions of the figure): a constrained layout would cost more than the
#: rest of a redraw.
SCREEN_MARGINS = {
    "left": 0.055,
    "right": 0.99,
    "top": 0.955,
    "bottom": 0.2,
    "hspace": 0.5,
    "wspace": 0.22,
}
SLIDE_MARGINS = {
    "left": 0.06,
    "right": 0.99,
    "top": 0.95,
    "bottom": 0.24,
    "hspace": 0.55,
    "wspace": 0.25,
}
RESULTS_MARGINS = {"left": 0.045, "right": 0.99, "top": 0.92, "bottom": 0.24, "wspace": 0.18}
CARTPOLE_MARGINS = {"left": 0.06, "right": 0.99, "top": 0.9, "bottom": 0.24, "wspace": 0.25}
#: Shading of the middle half of the seeds.
BAND_ALPHA = 0.16
#: Only the three objectives at ε = 0.2 get a band; the other clip sizes and plain PG are
#: lines only, so the bands stay readable.
BANDED = ("ppo", "unclipped", "clip_only")
#: The lowest KL the log-scaled axes show (a KL of exactly 0 is drawn there).
KL_FLOOR = 1e-5


@dataclass
class SpreadArtists:
    """One method's line (mean over seeds) and band (25th to 75th percentile) in one panel."""

    line: Line2D
    band: PolyCollection
    banded: bool

    def show(self, x: FloatArray, values: Spread, floor: float | None = None) -> None:
        """Move the line and the band to ``values`` (optionally raised to ``floor``)."""
        mean, low, high = values.mean, values.low, values.high
        if floor is not None:
            mean, low, high = (np.maximum(v, floor) for v in (mean, low, high))
        self.line.set_data(x, mean)
        self.band.set_verts([_band_polygon(x, low, high)])

    def set_visible(self, visible: bool) -> None:
        self.line.set_visible(visible)
        self.band.set_visible(visible and self.banded)


def _band_polygon(x: FloatArray, low: FloatArray, high: FloatArray) -> FloatArray:
    """The outline of the area between ``low`` and ``high`` (NaN points left out)."""
    keep = np.isfinite(low) & np.isfinite(high)
    x, low, high = x[keep], low[keep], high[keep]
    return np.column_stack([np.concatenate([x, x[::-1]]), np.concatenate([low, high[::-1]])])


def _add_spread(ax: Axes, key: str) -> SpreadArtists:
    method = METHODS[key]
    (line,) = ax.plot(
        [], [], color=method.color, ls=method.linestyle, lw=1.8, label=method.label, zorder=3
    )
    band = ax.fill_between([1.0], [1.0], [1.0], color=method.color, alpha=BAND_ALPHA, lw=0)
    band.set_zorder(2)
    band.set_visible(key in BANDED)
    return SpreadArtists(line, band, banded=key in BANDED)


class SpreadPanels:
    """A grid of panels, each with one :class:`SpreadArtists` per method."""

    def __init__(self, figure: Figure, axes: Sequence[Axes], keys: Sequence[str]) -> None:
        self.figure = figure
        self.axes = list(axes)
        self.keys = tuple(keys)
        self.artists = [{key: _add_spread(ax, key) for key in keys} for ax in self.axes]

    def show_methods(self, shown: Sequence[str]) -> None:
        """Show only the methods in ``shown``."""
        for panel in self.artists:
            for key, artists in panel.items():
                artists.set_visible(key in shown)

    def legend(self, slides: bool) -> None:
        """One legend for all panels, centred at the bottom of the figure."""
        handles = [self.artists[0][key].line for key in self.keys]
        self.figure.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, 0.0),
            ncols=min(len(handles), 3 if slides else 6),
            frameon=False,
        )


class BanditLoopFigure:
    """Part A: true reward, KL, clip fraction, entropy, collapses and final scores per iteration."""

    def __init__(self, keys: Sequence[str], *, slides: bool = False) -> None:
        with figure_style(slides):
            self.figure = Figure(figsize=SLIDE_SIZE if slides else SCREEN_SIZE)
            margins = SLIDE_MARGINS if slides else SCREEN_MARGINS
            axes = self.figure.subplots(2, 3, gridspec_kw=margins).ravel()
            self.panels = SpreadPanels(self.figure, axes[:4], keys)
            self._runs_drawn: Mapping[str, BanditLoopHistory] | None = None
            self.collapse_ax, self.score_ax = axes[4], axes[5]
            self.collapse_lines = {
                key: self.collapse_ax.plot(
                    [], [], color=METHODS[key].color, ls=METHODS[key].linestyle, lw=1.8
                )[0]
                for key in keys
            }
            self.score_dots = {
                key: self.score_ax.plot(
                    [], [], ls="none", marker="o", ms=4, alpha=0.55, color=METHODS[key].color
                )[0]
                for key in keys
            }
            self.score_means = {
                key: self.score_ax.plot(
                    [], [], ls="none", marker="_", ms=22, mew=2.5, color=METHODS[key].color
                )[0]
                for key in keys
            }
            self._label_axes(axes, keys)
            self.panels.legend(slides)

    def _label_axes(self, axes: Sequence[Axes], keys: Sequence[str]) -> None:
        reward, kl, clip, entropy, collapse, score = axes
        reward.set_title("true expected reward")
        reward.axhline(BEST_REWARD, color=COLORS["guide"], lw=0.8, ls=":")
        reward.axhline(RANDOM_REWARD, color=COLORS["guide"], lw=0.8, ls=":")
        reward.set_ylim(-0.55, 1.05)
        kl.set_title("approx. KL, policy i → i + 1")
        kl.set_yscale("log")
        kl.set_ylim(KL_FLOOR, 5.0)
        clip.set_title("clip fraction")
        clip.set_ylim(-0.02, 0.6)
        entropy.set_title("entropy (nats)")
        entropy.set_ylim(-0.05, np.log(4) + 0.1)
        collapse.set_title(f"seeds on a wrong arm (p ≥ {COLLAPSE_PROBABILITY:g})")
        collapse.set_ylim(-0.03, 1.03)
        for ax in (reward, kl, clip, entropy, collapse):
            ax.set_xlabel("iteration")
        score.set_title("final score per seed")
        score.set_xticks(range(len(keys)))
        score.set_xticklabels([METHODS[k].label for k in keys], rotation=30, ha="right")
        score.set_xlim(-0.6, len(keys) - 0.4)
        score.set_ylim(-1.05, 1.08)
        score.axhline(0.0, color=COLORS["guide"], lw=0.8, ls=":")
        score.grid(axis="x", visible=False)

    def update(self, runs: Mapping[str, BanditLoopHistory], shown: Sequence[str]) -> None:
        """Draw ``runs`` (by method key), showing the methods in ``shown``.

        The curves are computed again only for other runs than last time: a
        method's checkbox only shows or hides what is drawn.
        """
        if runs is not self._runs_drawn:
            self._draw_runs(runs)
            self._runs_drawn = runs
        self.panels.show_methods(shown)
        for key in runs:
            for artists in (self.collapse_lines, self.score_dots, self.score_means):
                artists[key].set_visible(key in shown)

    def _draw_runs(self, runs: Mapping[str, BanditLoopHistory]) -> None:
        iterations = next(iter(runs.values())).settings.iterations
        policy_x = np.arange(iterations + 1, dtype=float)
        update_x = np.arange(iterations, dtype=float) + 0.5
        for ax in [*self.panels.axes, self.collapse_ax]:
            if ax.get_xlim() != (0.0, float(iterations)):
                ax.set_xlim(0.0, float(iterations))
        reward, kl, clip, entropy = self.panels.artists
        for position, (key, run) in enumerate(runs.items()):
            reward[key].show(policy_x, spread(run.true_reward))
            kl[key].show(update_x, spread(run.approx_kl), floor=KL_FLOOR)
            clip[key].show(update_x, spread(run.clip_fraction))
            entropy[key].show(policy_x, spread(run.entropy))
            self.collapse_lines[key].set_data(policy_x, run.collapsed.mean(axis=0))
            jitter = np.linspace(-0.22, 0.22, len(run.seeds)) if len(run.seeds) > 1 else [0.0]
            self.score_dots[key].set_data(position + np.asarray(jitter), run.score)
            self.score_means[key].set_data([position], [run.score.mean()])


class CartPoleFigure:
    """Part B: episode return, clip fraction and approximate KL against environment steps."""

    def __init__(self, keys: Sequence[str], *, slides: bool = False) -> None:
        with figure_style(slides):
            size = SLIDE_SIZE if slides else (SCREEN_SIZE[0], SCREEN_SIZE[1] * 0.62)
            self.figure = Figure(figsize=size)
            axes = self.figure.subplots(1, 3, gridspec_kw=CARTPOLE_MARGINS)
            self.panels = SpreadPanels(self.figure, axes, keys)
            self._runs_drawn: Mapping[str, CartPoleRuns] | None = None
            returns, clip, kl = axes
            returns.set_title(f"episode return (mean of the last {CURVE_EPISODES})")
            returns.set_ylim(0.0, 520.0)
            returns.axhline(RANDOM_RETURN, color=COLORS["guide"], lw=0.8, ls=":")
            clip.set_title("clip fraction (PPO's rule)")
            clip.set_ylim(-0.005, 0.4)
            kl.set_title("approx. KL per iteration")
            kl.set_yscale("log")
            kl.set_ylim(KL_FLOOR, 300.0)
            for ax in axes:
                ax.set_xlabel("environment steps")
            self.panels.legend(slides)

    def update(self, runs: Mapping[str, CartPoleRuns], shown: Sequence[str]) -> None:
        """Draw ``runs`` (by method key), showing the methods in ``shown``.

        As in :meth:`BanditLoopFigure.update`, the curves are computed again
        only for other runs than last time.
        """
        if runs is not self._runs_drawn:
            self._draw_runs(runs)
            self._runs_drawn = runs
        self.panels.show_methods(shown)

    def _draw_runs(self, runs: Mapping[str, CartPoleRuns]) -> None:
        for key, run in runs.items():
            steps = run.steps.astype(float)
            returns, clip, kl = (panel[key] for panel in self.panels.artists)
            returns.show(steps, spread(run.return_curve))
            clip.show(steps, spread(run.clip_fraction))
            kl.show(steps, spread(run.approx_kl), floor=KL_FLOOR)
        last = max(float(run.steps[-1]) for run in runs.values())
        for ax in self.panels.axes:
            if ax.get_xlim() != (0.0, last):
                ax.set_xlim(0.0, last)


class ResultsFigure:
    """The results command's figure: part A's true reward, and part B's returns per setting."""

    def __init__(
        self,
        bandit: Mapping[str, BanditLoopHistory],
        cartpole: Mapping[str, Mapping[str, CartPoleRuns]],
    ) -> None:
        with figure_style():
            self.figure = Figure(figsize=(13.0, 4.4))
            axes = self.figure.subplots(1, 1 + len(cartpole), gridspec_kw=RESULTS_MARGINS)
            bandit_panel = SpreadPanels(self.figure, axes[:1], tuple(bandit))
            first = next(iter(bandit.values()))
            x = np.arange(first.settings.iterations + 1, dtype=float)
            for key, run in bandit.items():
                bandit_panel.artists[0][key].show(x, spread(run.true_reward))
            axes[0].set_title(f"A: bandit, true reward ({len(first.seeds)} seeds)")
            axes[0].set_xlabel("iteration")
            axes[0].set_xlim(0.0, x[-1])
            axes[0].set_ylim(0.2, 1.02)
            for ax, (name, runs) in zip(axes[1:], cartpole.items(), strict=True):
                panel = SpreadPanels(self.figure, [ax], tuple(runs))
                for key, run in runs.items():
                    panel.artists[0][key].show(run.steps.astype(float), spread(run.return_curve))
                seeds = len(next(iter(runs.values())).seeds)
                ax.set_title(f"B: CartPole, {name} ({seeds} seeds)")
                ax.set_xlabel("environment steps")
                ax.set_xlim(0.0, float(max(run.steps[-1] for run in runs.values())))
                ax.set_ylim(0.0, 520.0)
            bandit_panel.legend(slides=False)

    def save(self, path: Path) -> None:
        self.figure.savefig(path, dpi=110)
