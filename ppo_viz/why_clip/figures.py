"""Notebook 4's figures: per method, the mean over seeds (a line) and their middle half (a band).

:class:`SpreadPanels` puts one line and one band per method in each of a list of panels and
moves them to runs; the apps (:mod:`.apps`) and the results command's figure
(:func:`results_figure`) are built from it.  Colours and line styles come from
:data:`~ppo_viz.why_clip.methods.METHOD_LINES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ppo_viz.style import COLORS, figure_style
from ppo_viz.why_clip.bandit_loop import BanditLoopHistory
from ppo_viz.why_clip.cartpole_ppo import RANDOM_RETURN, CartPoleRuns
from ppo_viz.why_clip.methods import METHOD_LINES, METHODS, FloatArray, Spread, spread

#: Only the three objectives at ε = 0.2 get a band; the other methods are lines only.
BANDED = ("ppo", "unclipped", "clip_only")
#: The lowest KL the log-scaled axes show (a KL of exactly 0 is drawn there).
KL_FLOOR = 1e-5


class SpreadPanels:
    """In each panel, per method, a line (the mean over seeds) and a band (25th to 75th
    percentile, for the methods in :data:`BANDED`)."""

    def __init__(self, axes: Sequence[Axes], keys: Sequence[str]) -> None:
        self.axes = list(axes)
        self.lines = [
            {key: ax.plot([], [], **METHOD_LINES[key], label=METHODS[key].label)[0] for key in keys}
            for ax in self.axes
        ]
        self.bands = [
            {
                key: ax.fill_between(
                    [0.0], [0.0], color=METHOD_LINES[key]["color"], alpha=0.16, lw=0
                )
                for key in keys
                if key in BANDED
            }
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


def legend(figure: Figure, panels: SpreadPanels) -> None:
    """One legend for every panel, under them."""
    handles = list(panels.lines[0].values())
    figure.legend(
        handles=handles, loc="outside lower center", ncols=min(len(handles), 3), frameon=False
    )


def bandit_axes(figure: Figure, settings_means: Sequence[float]) -> list[Axes]:
    """Part A's six panels, titled and limited: reward, KL, clip fraction, entropy, seeds on a
    wrong arm, and the final score per seed."""
    axes = list(figure.subplots(2, 3).ravel())
    reward, kl, clip, entropy, collapse, score = axes
    reward.set(
        title="true expected reward", ylim=(min(settings_means) - 0.05, max(settings_means) + 0.05)
    )
    reward.axhline(max(settings_means), color=COLORS["guide"], lw=0.8, ls=":")
    reward.axhline(float(np.mean(settings_means)), color=COLORS["guide"], lw=0.8, ls=":")
    kl.set(title="approx. KL, policy i → i + 1", yscale="log", ylim=(KL_FLOOR, 5.0))
    clip.set(title="clip fraction", ylim=(-0.02, 0.6))
    entropy.set(title="entropy (nats)", ylim=(-0.05, np.log(len(settings_means)) + 0.1))
    collapse.set(title="seeds on a wrong arm", ylim=(-0.03, 1.03))
    for ax in axes[:5]:
        ax.set_xlabel("iteration")
    score.set(title="final score per seed", ylim=(-1.05, 1.08))
    score.axhline(0.0, color=COLORS["guide"], lw=0.8, ls=":")
    score.grid(axis="x", visible=False)
    return axes


def show_bandit_runs(panels: SpreadPanels, runs: Mapping[str, BanditLoopHistory]) -> None:
    """Part A's curves: reward and entropy per policy, KL and clip fraction per update, the
    share of seeds on a wrong arm (panel 4, a line only)."""
    iterations = next(iter(runs.values())).settings.iterations
    policy_x, update_x = np.arange(iterations + 1.0), np.arange(iterations) + 0.5
    for key, run in runs.items():
        panels.show(0, key, policy_x, spread(run.true_reward))
        panels.show(1, key, update_x, spread(run.approx_kl), floor=KL_FLOOR)
        panels.show(2, key, update_x, spread(run.clip_fraction))
        panels.show(3, key, policy_x, spread(run.entropy))
        share = run.collapsed.mean(axis=0)
        panels.show(4, key, policy_x, Spread(share, share, share))
    for ax in panels.axes:
        ax.set_xlim(0.0, float(iterations))


def cartpole_axes(figure: Figure) -> list[Axes]:
    """Part B's three panels: episode return, clip fraction and KL against steps."""
    returns, clip, kl = axes = list(figure.subplots(1, 3))
    returns.set(title="episode return (last 10 episodes)", ylim=(0.0, 520.0))
    returns.axhline(RANDOM_RETURN, color=COLORS["guide"], lw=0.8, ls=":")
    clip.set(title="clip fraction (PPO's rule)", ylim=(-0.005, 0.4))
    kl.set(title="approx. KL per iteration", yscale="log", ylim=(KL_FLOOR, 300.0))
    for ax in axes:
        ax.set_xlabel("environment steps")
    return axes


def show_cartpole_runs(panels: SpreadPanels, runs: Mapping[str, CartPoleRuns]) -> None:
    """Part B's curves: return, clip fraction and KL against environment steps."""
    for key, run in runs.items():
        steps = run.steps.astype(float)
        panels.show(0, key, steps, spread(run.return_curve))
        panels.show(1, key, steps, spread(run.clip_fraction))
        panels.show(2, key, steps, spread(run.approx_kl), floor=KL_FLOOR)
    last = max(float(run.steps[-1]) for run in runs.values())
    for ax in panels.axes:
        ax.set_xlim(0.0, last)


def results_figure(
    bandit: Mapping[str, Mapping[str, BanditLoopHistory]],
    cartpole: Mapping[str, Mapping[str, CartPoleRuns]],
) -> Figure:
    """The results command's figure: part A's true reward in its first setting and part B's
    returns per setting (the parts that were run); lines are means over seeds, bands their
    middle half (25th to 75th percentile)."""
    name, bandit = next(iter(bandit.items()), ("", {}))
    with figure_style():
        figure = Figure(figsize=(9.0, 3.8), layout="constrained")
        axes = list(np.atleast_1d(figure.subplots(1, bool(bandit) + len(cartpole))))
        keys = list(dict.fromkeys(k for runs in (bandit, *cartpole.values()) for k in runs))
        panels = SpreadPanels(axes, keys)
        if bandit:
            first = next(iter(bandit.values()))
            x = np.arange(first.settings.iterations + 1.0)
            for key, run in bandit.items():
                panels.show(0, key, x, spread(run.true_reward))
            axes[0].relim()
            axes[0].autoscale_view()
            axes[0].set(title=f"bandit, {name} ({len(first.seeds)} seeds)", xlabel="iteration")
            axes[0].set_ylabel("true reward")
        for index, (name, runs) in enumerate(cartpole.items(), start=bool(bandit)):
            for key, run in runs.items():
                panels.show(index, key, run.steps.astype(float), spread(run.return_curve))
            first = next(iter(runs.values()))
            axes[index].set(xlim=(0, first.steps[-1]), ylim=(0, 520), xlabel="environment steps")
            axes[index].set_title(f"CartPole, {name} ({len(first.seeds)} seeds)")
        legend(figure, panels)
    return figure
