"""Notebook 4's figures: the score against the step size, and the curves over training.

* :func:`range_figure` is the one figure of per-step-size results: per sweep, each method's
  mean final score against its step size (log axis) over both seed sets together, with the
  10th to 90th percentile of those seeds, and under it a strip that marks the step sizes where
  at least 90% of the seeds succeed on *each* set (:func:`results_figure`: the study's file);
* :class:`SpreadPanels` puts one line (mean over seeds) and one band (25th to 75th percentile)
  per method in each of a list of panels: the apps' curves over iterations.

Colours and line styles come from :data:`~ppo_viz.why_clip.methods.METHOD_LINES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure

from bandit_loop import BanditLoopHistory
from ppo_viz.style import COLORS, figure_style, legend_below
from ppo_viz.why_clip.methods import MAIN_METHODS, METHOD_LINES, METHODS, FloatArray, Spread, spread
from ppo_viz.why_clip.results import SYMBOLS, pooled_cells

#: Only PPO and the unclipped objective get a band: the other methods are lines only.
BANDED = ("ppo", "unclipped")
#: The lowest KL the log-scaled axes show (a KL of exactly 0 is drawn there).
KL_FLOOR = 1e-5
#: The headline figure: both tasks' learning-rate sweeps, the six main methods.
HEADLINE = (("bandit", MAIN_METHODS), ("cartpole", MAIN_METHODS))
#: The epochs as a factor: PPO and the unclipped surrogate on CartPole at K = 1, 4 and 10.
EPOCH_PANELS = tuple(
    (name, ("ppo", "unclipped")) for name in ("cartpole_k1", "cartpole", "cartpole_k10")
)
AXIS_NAMES = {"step_size": "step size α", "learning_rate": "Adam's learning rate"}


def range_figure(
    results: Mapping[str, Any],
    panels: Sequence[tuple[str, Sequence[str]]] = HEADLINE,
    figure: Figure | SubFigure | None = None,
) -> Figure | SubFigure:
    """Per ``(sweep, methods)`` panel: mean final score against step size over every seed set
    together, and the strip of step sizes stable on each set (see the module's docstring).  One
    legend under the panels when they show the same methods, else one in each.  Drawn into
    ``figure`` (a new one by default)."""
    with figure_style():
        if figure is None:
            figure = Figure(figsize=(9.0, 4.6), layout="constrained")
        grid = figure.add_gridspec(2, len(panels), height_ratios=(3.0, 1.0))
        shared = len({tuple(methods) for _, methods in panels}) == 1
        first = None
        for column, (name, methods) in enumerate(panels):
            top = figure.add_subplot(grid[0, column])
            strip = figure.add_subplot(grid[1, column], sharex=top)
            draw_sweep(top, strip, results["sweeps"][name], methods, results["stable_share"])
            first = first or top
            if not shared:
                top.legend(loc="lower left", fontsize="small")
        if shared:
            handles, labels = first.get_legend_handles_labels()
            ncols = min(len(handles), 3)
            legend_below(figure, ncols, handles=handles, labels=labels)
    return figure


def results_figure(results: Mapping[str, Any]) -> Figure:
    """The study's figure (``why_clip.png``): the headline's two panels, and under them
    PPO and the unclipped surrogate on CartPole at K = 1, 4 and 10."""
    with figure_style():
        figure = Figure(figsize=(10.0, 9.6), layout="constrained")
        top, bottom = figure.subfigures(2, 1, height_ratios=(1.0, 0.95))
    range_figure(results, HEADLINE, top)
    range_figure(results, EPOCH_PANELS, bottom)
    bottom.suptitle("The epochs per rollout K as a factor: CartPole at K = 1, 4 and 10")
    return figure


def draw_sweep(
    top: Axes, strip: Axes, sweep: Mapping[str, Any], methods: Sequence[str], share: float
) -> None:
    """One sweep: the mean scores over every seed set in ``top``; in ``strip`` where at least
    ``share`` of the seeds succeed on each set."""
    x = np.array(sweep["values"])
    sets = len(sweep["sets"])
    for row, key in enumerate(methods):
        cells, line = pooled_cells(sweep, key), METHOD_LINES[key]
        mean = np.array([c["mean"] for c in cells])
        top.plot(x, mean, **line, marker="o", ms=3.5, label=METHODS[key].label, gid=key)
        if key in BANDED:
            low, high = ([c[q] for c in cells] for q in ("p10", "p90"))
            top.fill_between(x, low, high, color=line["color"], alpha=0.13, lw=0, gid=key)
        stable = np.array([min(c["shares"]) >= share for c in cells])
        marks = np.where(stable, row, np.nan)
        strip.plot(x, marks, color=line["color"], lw=3.0, marker="o", ms=4.5, gid=key)
    top.set(xscale="log", ylabel="final score", ylim=(min(-0.05, top.get_ylim()[0]), 1.05))
    top.axhline(0.0, color=COLORS["guide"], lw=0.8, ls=":")
    seeds = " + ".join([str(sweep["seeds"])] * sets)
    top.set_title(f"{sweep['title']}, {seeds} seeds", fontsize="medium")
    top.tick_params(labelbottom=False)
    strip.set(ylim=(len(methods) - 0.5, -0.5), yticks=[], xlabel=AXIS_NAMES[sweep["swept"]])
    symbol = SYMBOLS[sweep["swept"]]
    where = "succeed on each set" if sets > 1 else "of the seeds succeed"
    strip.set_title(f"{symbol} where ≥ {share:.0%} {where}", fontsize="small")
    strip.grid(axis="y", visible=False)


class SpreadPanels:
    """A figure of panels against training (``panels``: each one's ``Axes.set`` arguments; a
    log axis is read by decade, without minor ticks), dotted guide lines at ``guides`` in the
    first; in each panel, per method, a line (the mean over seeds) and a band (25th to 75th
    percentile, for the methods in :data:`BANDED`); one legend under the panels."""

    def __init__(
        self, panels: Sequence[Mapping[str, Any]], xlabel: str, guides: Sequence[float] = ()
    ) -> None:
        keys = MAIN_METHODS
        with figure_style():
            self.figure = Figure(figsize=(9.0, 3.9), layout="constrained")
            self.axes = list(self.figure.subplots(1, len(panels), sharex=True))
            for ax, panel in zip(self.axes, panels, strict=True):
                ax.set(xlabel=xlabel, **panel)
                if panel.get("yscale") == "log":
                    ax.minorticks_off()  # 56 minor ticks would cost a third of each redraw
            for level in guides:
                self.axes[0].axhline(level, color=COLORS["guide"], lw=0.8, ls=":")
            self.lines = [
                {k: ax.plot([], [], **METHOD_LINES[k], label=METHODS[k].label)[0] for k in keys}
                for ax in self.axes
            ]
            handles = list(self.lines[0].values())
            legend_below(self.figure, min(len(handles), 3), handles=handles)
            colors = {key: METHOD_LINES[key]["color"] for key in keys if key in BANDED}
            self.bands = [
                {k: ax.fill_between([0], [0], color=c, alpha=0.16, lw=0) for k, c in colors.items()}
                for ax in self.axes
            ]

    @property
    def moving(self) -> list[Any]:
        return [a for panel in (*self.bands, *self.lines) for a in panel.values()]

    def show(
        self, panel: int, key: str, x: FloatArray, values: Spread, floor: float = -np.inf
    ) -> None:
        """Move one method's line and band in one panel (values raised to ``floor``)."""
        mean, low, high = (np.maximum(v, floor) for v in (values.mean, values.low, values.high))
        self.lines[panel][key].set_data(x, mean)
        if key in self.bands[panel]:
            keep = np.isfinite(low) & np.isfinite(high)
            outline = (
                np.concatenate([x[keep], x[keep][::-1]]),
                np.concatenate([low[keep], high[keep][::-1]]),
            )
            self.bands[panel][key].set_verts([np.column_stack(outline)])

    def show_only(self, shown: Sequence[str]) -> None:
        """Show the methods in ``shown``, hide the others."""
        for panel in (*self.lines, *self.bands):
            for key, artist in panel.items():
                artist.set_visible(key in shown)


def bandit_panels(arm_means: Sequence[float]) -> SpreadPanels:
    """The bandit's three panels against iterations: the true reward (the best arm's and the
    uniform policy's marked), the KL per update, the clip fraction."""
    low, high = min(arm_means), max(arm_means)
    reward = {"title": "true expected reward", "ylim": (low - 0.05, high + 0.05)}
    kl = {"title": "approx. KL, policy i → i + 1", "yscale": "log", "ylim": (KL_FLOOR, 5.0)}
    clip = {"title": "clip fraction", "ylim": (-0.02, 0.6)}
    return SpreadPanels([reward, kl, clip], "iteration", (high, float(np.mean(arm_means))))


def show_bandit_runs(panels: SpreadPanels, runs: Mapping[str, BanditLoopHistory]) -> None:
    """The bandit's curves: reward per policy, KL and clip fraction per update."""
    iterations = next(iter(runs.values())).settings.iterations
    policy_x, update_x = np.arange(iterations + 1.0), np.arange(iterations) + 0.5
    for key, run in runs.items():
        panels.show(0, key, policy_x, spread(run.true_reward))
        panels.show(1, key, update_x, spread(run.approx_kl), floor=KL_FLOOR)
        panels.show(2, key, update_x, spread(run.clip_fraction))
    panels.axes[0].set_xlim(0.0, float(iterations))  # the panels share it


def cartpole_panels(random_return: float, episodes: int) -> SpreadPanels:
    """CartPole's three panels against steps: episode return (a random policy's marked), clip
    fraction and KL."""
    returns = {"title": f"episode return (last {episodes} episodes)", "ylim": (0.0, 520.0)}
    clip = {"title": "clip fraction (PPO's rule)", "ylim": (-0.005, 0.4)}
    kl = {"title": "approx. KL per iteration", "yscale": "log", "ylim": (KL_FLOOR, 300.0)}
    return SpreadPanels([returns, clip, kl], "environment steps", (random_return,))


def show_cartpole_curves(
    panels: SpreadPanels, steps: FloatArray, curves: Mapping[str, Mapping[str, Sequence[Any]]]
) -> None:
    """CartPole's stored curves: per method the return's mean, 25th and 75th percentile over
    seeds, the clip fraction's and the KL's mean."""
    for key, stored in curves.items():
        for panel, name in enumerate(("return_curve", "clip_fraction", "approx_kl")):
            rows = [np.array(row, dtype=float) for row in stored[name]]
            values = Spread(*rows) if len(rows) == 3 else Spread(rows[0], rows[0], rows[0])
            panels.show(panel, key, steps, values, floor=KL_FLOOR if panel == 2 else -np.inf)
    panels.axes[0].set_xlim(0.0, float(steps[-1]))  # the panels share it
