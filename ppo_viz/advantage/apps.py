"""Notebook 8's figures: :class:`AdvantageExplorer` (gamma and lambda on sliders) and the
static figures of the critic and of CleanRL's value clipping.
Every number comes from :mod:`.study` (and through it from ``llm_clip`` and the agent)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from experiments.cartpole_agent import value_loss
from ppo_viz import style
from ppo_viz.advantage import study
from ppo_viz.app import InputError, LiveFigure
from ppo_viz.controls import selection, slider
from ppo_viz.numbers import rounded
from ppo_viz.style import COLORS, PALETTE, figure_size, figure_style, legend_below

#: The curves of the bias-variance panel: label and look.
CURVES = {
    "action_bias2": ("bias² between the actions", {"color": PALETTE["blue"], "lw": 2.4}),
    "bias2": ("bias² with the critic's offset", {"color": PALETTE["blue"], "ls": "--"}),
    "variance": ("variance", {"color": PALETTE["vermillion"], "lw": 2.4}),
}
REFERENCE = {"color": PALETTE["black"], "lw": 1.8}
ESTIMATE = {"color": PALETTE["blue"], "lw": 1.6}
OWN = {"color": PALETTE["vermillion"], "ls": "none", "marker": "o", "ms": 4}
TARGET = {"color": PALETTE["green"], "ls": ":", "lw": 2.0}


def _band(ax, look: dict, label: str):
    """An empty shaded band, updated by ``set_data``."""
    return ax.fill_between([0.0], [0.0], [0.0], color=look["color"], alpha=0.18, lw=0, label=label)


class AdvantageExplorer(LiveFigure):
    """The episode's advantages at the sliders' gamma and lambda against the reference (top),
    and bias squared and variance of GAE(lambda) over lambda at that gamma (bottom)."""

    description = "GAE(λ) against a Monte Carlo reference on one CartPole episode"

    def __init__(self, gamma: float = 0.99, lam: float = 0.95) -> None:
        try:
            self.row_of(gamma, lam)
        except InputError as error:  # the start values, refused as a slider would not
            raise ValueError(f"AdvantageExplorer: {error}") from None
        self.studies = {g: study.gamma_study(g) for g in study.GAMMAS}
        with figure_style():  # the fonts of presentation mode, for every text
            self._build(lam)
        moving = [self.reference, self.target, self.band, self.mean, self.own, self.marker]
        moving += [*self.curves.values(), *self.intervals.values()]
        controls = {
            "gamma": selection("γ (discount)", study.GAMMAS, gamma),
            "lam": slider("λ (GAE)", lam, (0.0, 1.0), 0.05),
        }
        super().__init__(self.figure, self.update, controls, moving=moving)

    def _build(self, lam: float) -> None:
        size = figure_size((9.0, 6.6), present=(9.6, 5.44))
        self.figure = Figure(figsize=size, layout="constrained")
        top, bottom = self.figure.subplots(2, 1, height_ratios=(1.2, 1))
        self.critic = study.play_outs()[0].values
        steps = np.arange(len(self.critic))
        self.steps, self.top, self.bottom = steps, top, bottom
        self.reference = top.plot(steps, steps * 0.0, **REFERENCE, label="reference Q − V")[0]
        self.target = top.plot(steps, steps * 0.0, **TARGET, label="Q − critic's V")[0]
        self.band = _band(top, ESTIMATE, "GAE(λ) ± 1 std over continuations")
        self.mean = top.plot(steps, steps * 0.0, **ESTIMATE, label="GAE(λ), mean")[0]
        self.own = top.plot(steps, steps * 0.0, **OWN, label="GAE(λ) of this episode")[0]
        top.set(xlabel="step t of the episode", ylabel="advantage of a_t")
        top.axhline(0.0, color=COLORS["zero_line"], lw=0.6)
        self.curves, self.intervals = {}, {}
        for name, (label, look) in CURVES.items():
            self.intervals[name] = _band(bottom, look, None)
            self.curves[name] = bottom.plot(study.LAMBDAS, study.LAMBDAS, **look, label=label)[0]
        self.marker = bottom.axvline(lam, color=COLORS["guide"], lw=1.2)
        bottom.set_yscale("symlog", linthresh=1.0)
        highest = max((m + h).max() for g in self.studies.values() for m, h in g.curves.values())
        bottom.set_ylim(-1, 2 * highest)  # at every gamma: a step of gamma redraws only the top
        bottom.set(xlabel="λ", ylabel=f"mean over the {len(steps)} states", xlim=(0, 1))
        top.legend(loc="upper right", fontsize="small", ncols=2)
        legend_below(self.figure, ncols=3, handles=list(self.curves.values()))

    @staticmethod
    def row_of(gamma: object, lam: object) -> int:
        """The row of :data:`study.LAMBDAS` for ``lam``; an :class:`InputError` for a ``gamma``
        or ``lam`` the study has no numbers for."""
        if gamma not in study.GAMMAS:
            raise InputError(f"γ must be one of {', '.join(map(str, study.GAMMAS))}, got {gamma!r}")
        row = round(lam * 20) if isinstance(lam, (int, float)) and 0 <= lam <= 1 else -1
        if row < 0 or abs(lam - study.LAMBDAS[row]) > 1e-6:
            raise InputError(f"λ must be a multiple of 0.05 from 0 to 1, got {lam!r}")
        return row

    def update(self, gamma: float, lam: float) -> str:
        row = self.row_of(gamma, lam)  # first: a setting without numbers moves nothing
        s = self.studies[gamma]
        self.reference.set_ydata(s.reference)
        self.target.set_ydata(s.reference + s.policy_values - self.critic)
        self.mean.set_ydata(s.mean[row])
        self.own.set_ydata(s.own[row])
        self.band.set_data(self.steps, s.mean[row] - s.std[row], s.mean[row] + s.std[row])
        for name, line in self.curves.items():
            mean, half = s.curves[name]
            line.set_ydata(mean)
            self.intervals[name].set_data(study.LAMBDAS, mean - half, mean + half)
        self.marker.set_xdata([lam, lam])
        every = np.concatenate([s.reference, (s.mean - s.std).ravel(), (s.mean + s.std).ravel()])
        every = np.concatenate([every, s.reference + s.policy_values - self.critic])
        if self.top.get_ylim() != (every.min() - 1, every.max() + 1):  # a new gamma
            self.top.set_ylim(every.min() - 1, every.max() + 1)
            self.redraw_axes(self.top)  # only this axes: the other keeps its limits
        said = {name: rounded(s.curves[name][0][row], 3) for name in CURVES}
        return (
            f"γ = {gamma:g}, λ = {lam:.2f}: over the states, bias² between the actions "
            f"{said['action_bias2']}, variance {said['variance']}, bias² with the critic's "
            f"offset {said['bias2']}"
        )


def critic_figure(gamma: float = 0.99, shift: float = study.SHIFT) -> Figure:
    """Left: the critics' values along the episode, the realised discounted return and the
    reference V; middle and right: the advantages at lambda 0 and 1 under each critic."""
    episode, critics = study.play_outs()[0], study.critics(shift)
    with figure_style():
        figure = Figure(figsize=figure_size((9.0, 3.6), (9.6, 4.2)), layout="constrained")
        axes = figure.subplots(1, 3)
        steps = np.arange(len(episode))
        returns = study.advantages_of(episode, gamma, 1.0)[1]
        axes[0].plot(steps, returns, **REFERENCE, label="realised return")
        axes[0].plot(
            steps, study.gamma_study(gamma).policy_values, **TARGET, label="V of the policy"
        )
        for (label, values), color in zip(critics.items(), CRITIC_COLORS, strict=True):
            axes[0].plot(steps, values, color=color, label=label)
            for ax, lam in zip(axes[1:], (0.0, 1.0), strict=True):
                ax.plot(steps, study.advantages_of(episode, gamma, lam, values)[0], color=color)
        axes[0].set(title="values along the episode", xlabel="step t", ylabel=f"V (γ = {gamma:g})")
        for ax, lam in zip(axes[1:], (0, 1), strict=True):
            ax.set(title=f"advantages at λ = {lam}", xlabel="step t")
        legend_below(figure, ncols=3, handles=axes[0].lines)
    return figure


CRITIC_COLORS = (PALETTE["blue"], PALETTE["orange"], PALETTE["purple"])


def value_clip_figure(clip_coef: float = 0.2) -> Figure:
    """One sample's value loss against the new value V: unclipped and CleanRL's clipped, for
    the episode's first state (old value from the critic, target its GAE return at lambda 0.95,
    as the agent trains)."""
    episode = study.play_outs()[0]
    old, target = episode.values[0], study.advantages_of(episode, 0.99, 0.95)[1][0]
    grid = np.linspace(old - 5, target + 5, 801)[:, None]
    shape = np.ones_like(grid)
    plain = value_loss(grid, target * shape)[0]
    clipped = value_loss(grid, target * shape, old_values=old * shape, clip_coef=clip_coef)[0]
    with figure_style():
        figure = Figure(figsize=figure_size((9.0, 3.4), (9.6, 4.0)), layout="constrained")
        ax = figure.subplots()
        ax.plot(grid, plain, **style.LINES["unclipped"], label="0.5 (V − R)²")
        ax.plot(grid, clipped, **style.LINES["clipped"], label=f"clip_vloss, ε = {clip_coef:g}")
        ax.axvspan(old - clip_coef, old + clip_coef, color=COLORS["band"], alpha=0.4, lw=0)
        ax.axvline(old, color=COLORS["guide"], ls=":", label=f"V_old = {rounded(old, 3)}")
        ax.axvline(
            target,
            color=COLORS["start"],
            ls=":",
            label=f"target R (λ = 0.95) = {rounded(target, 3)}",
        )
        ax.set(xlabel="new value V of the first state", ylabel="value loss of this sample")
        ax.legend(loc="center right", fontsize="small")
    return figure
