"""Notebook 3's explorer: the objectives of :data:`~ppo_viz.epochs.training.COLUMNS` trained
on one batch, epoch by epoch.

One column per objective (PPO's clipped ``min``, the unclipped ``r*A``, the clip-only
``clip(r)*A``, and any a teacher adds to ``COLUMNS``): on top each arm's ratio against the
epoch, with the clip band shaded and a hollow circle where no sample of the arm has a gradient
of its own; below, a map of which way each sample pushes (grey: epochs the run did not take).
The bottom row overlays the runs: the share of samples with zero gradient, the KL between the
old and the new policy (k3 estimate and exact), and the true expected reward.  The epoch axis
spans the epochs slider's whole range, so no axis ever moves.

:class:`InterpolationExplorer` is notebook 3's analogue of the PPO paper's Figure 2, with ε on a
slider.  Against the interpolation factor ``t`` of
:class:`~ppo_viz.epochs.foundations.UpdateLine`: the unclipped surrogate, the clip-only term
and PPO's clipped objective (all to maximise, minus :func:`ppo_clip.surrogate_loss`) and the
exact KL from the old policy, with the clipped objective's maximum marked.  The slider moves ε
in the objectives; the line stays PPO's update at the default settings.
"""

from __future__ import annotations

import numbers
from typing import Any

import ipywidgets as widgets
import numpy as np
import traitlets
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import ppo_clip
from bandit import ARM_MEANS
from ppo_viz import style
from ppo_viz.app import InputError, LiveFigure
from ppo_viz.controls import checkbox, checked_number, control_layout, slider
from ppo_viz.epochs.foundations import UpdateLine, ppo_update_line
from ppo_viz.epochs.text import sample_label, summary_html
from ppo_viz.epochs.training import (
    COLUMNS,
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_STEP_SIZE,
    DEFAULT_TARGET_KL,
    MISLEADING_SEED,
    SETTING_RANGES,
    Run,
    Settings,
    n_samples,
    run_all,
)
from ppo_viz.html import Markup, tag
from ppo_viz.numbers import rounded, signed
from ppo_viz.style import COLORS, FORMULAS, LINES, NAMES, arm_styles, figure_style, legend_below

#: The gradient map's colours: a sample pushes its arm's probability down, not at all, up
#: (none is an objective's or an arm's colour); grey cells are epochs the run did not take.
PUSH_MAP = ListedColormap([COLORS["push_down"], "white", COLORS["push_up"]]).with_extremes(
    bad=(*to_rgb(COLORS["guide"]), 0.3)
)
#: Every epoch axis ends here (the epochs slider's maximum).
EPOCH_AXIS_MAX = SETTING_RANGES["n_epochs"][1]
KL_LIMITS = (1e-4, 5.0)
TARGET_KL_RANGE = SETTING_RANGES["target_kl"][:2]
#: How the figure draws an arm's ratios, an arm with no gradient, a sample's label.
ARM_LINE = {"lw": 1.8, "ms": 3.5}
HOLLOW = {"ls": "none", "marker": "o", "ms": 5.5, "mfc": "white", "mew": 1.3}
#: The exact KL in the KL panel, beside each objective's k3 line.
DOTS = {"ls": "none", "marker": "o", "ms": 2.5}
ROW_LABELS = {"labelfontfamily": "monospace", "labelsize": "small", "pad": 5}
CELLS = {"cmap": PUSH_MAP, "vmin": -1.5, "vmax": 1.5}
#: The control of each setting whose name differs (a message names a setting by its control).
CONTROL_OF = {"n_epochs": "epochs"}


class EpochsExplorer(LiveFigure):
    """Controls for ε, step size, epochs, batch seed and early stop over the runs, one per
    objective of :data:`~ppo_viz.epochs.training.COLUMNS`.

    Every change trains the objectives again (cached per settings) and moves the
    figure and the summary table above it.  A setting the app cannot use (a seed out of
    range, a NaN set from code) shows a message and keeps the last good runs.  The arguments
    are the controls' starting values (the seed: :data:`MISLEADING_SEED`); one out of range
    raises a ``ValueError`` naming it, rather than being clamped by a slider.
    """

    description = "Several epochs of PPO on one batch: the objectives side by side"

    def __init__(
        self,
        eps: float = DEFAULT_EPS,
        step_size: float = DEFAULT_STEP_SIZE,
        n_epochs: int = DEFAULT_EPOCHS,
        seed: int = MISLEADING_SEED,
        target_kl: float | None = None,
    ) -> None:
        #: The settings on screen (the last good ones while an entry is bad).
        self.settings = Settings(eps, step_size, n_epochs, seed, target_kl)
        self.runs: dict[str, Run] = {}
        start = target_kl or DEFAULT_TARGET_KL
        target = slider("target KL", start, TARGET_KL_RANGE, 0.05, log=True, readout_format=".3f")
        early = checkbox("stop early when k3 KL > target", target_kl is not None)
        # Linked before LiveFigure observes the box: the slider is enabled before the redraw.
        widgets.dlink((early, "value"), (target, "disabled"), lambda on: not on)
        ranges = {name: SETTING_RANGES[name][:2] for name in SETTING_RANGES}
        controls = {
            "eps": slider("ε (clip size)", eps, ranges["eps"], 0.01),
            "step_size": slider("step size", step_size, ranges["step_size"], 0.05),
            "epochs": slider("epochs", n_epochs, ranges["n_epochs"], 1, integer=True),
            # One redraw on Enter, not one per digit typed.
            "seed": WholeNumberText(
                seed, description="batch seed", continuous_update=False, **control_layout()
            ),
            "early_stop": early,
            "target_kl": target,
        }
        self._build_figure(len(ARM_MEANS), n_samples())
        rows = [["eps", "step_size"], ["epochs", "seed"], ["early_stop", "target_kl"]]
        super().__init__(self.figure, self.update, controls, moving=self.moving_artists, rows=rows)

    # -- the figure ---------------------------------------------------------------------------

    def _build_figure(self, k: int, n: int) -> None:
        arms = arm_styles(k)
        presenting = style.presenting()
        with figure_style():
            size = style.figure_size((9.0, 7.4), present=style.PRESENT_MAX_SIZE)
            self.figure = Figure(figsize=size, layout="constrained")
            heights = (1.2, 0.8, 1.4) if presenting else (2.4, 0.17 * n, 1.8)
            rows = self.figure.add_gridspec(3, 1, height_ratios=heights)
            columns = rows[:2].subgridspec(2, len(COLUMNS), height_ratios=heights[:2])
            top, maps = columns.subplots(sharex=True)  # the top row's epoch axis is the map's
            metrics = list(rows[2].subgridspec(1, 3).subplots())
            for ax in metrics:
                ax.sharex(top[0])
            self.columns = {
                key: self._column(COLUMNS[key], ratio_ax, map_ax, arms, n)
                for key, ratio_ax, map_ax in zip(COLUMNS, top, maps, strict=True)
            }
            if presenting:  # the metrics' epoch axis serves the maps too
                for ax in maps:
                    ax.set_xlabel("")
                    ax.tick_params(labelbottom=False)
            top[0].set(ylabel="ratio of each arm", ylim=(0.0, k * 1.04))  # r <= K
            #: The first map labels its rows with its y ticks (:meth:`_label_rows`).
            self.labelled_map = maps[0]
            maps[0].tick_params(axis="y", length=0, **ROW_LABELS)
            self._build_metrics(metrics)
            top[0].set_xlim(-0.5, EPOCH_AXIS_MAX + 0.5)
            for rows, where in zip(self._legends(arms), ("upper", "lower"), strict=True):
                self.figure.legend(
                    handles=in_columns(*rows),
                    loc=f"outside {where} center",
                    ncols=max(map(len, rows)),
                    frameon=False,
                )
        self._labelled_seed: int | None = None

    def _column(self, column: Any, ratio_ax: Any, map_ax: Any, arms: list[dict], n: int):
        """One objective's ratio panel and gradient map, and the artists that move in them."""
        name = column.name.removesuffix(" (clipped)")  # PPO's title carries its formula
        joint = ": " if len(COLUMNS) <= 3 else "\n"  # four titles fit only on two lines
        ratio_ax.set_title(f"{name}{joint}{column.formula}", color=column.line["color"])
        ratio_ax.axhline(1.0, color=COLORS["start"], lw=0.8, ls=":")
        ratio_ax.sharey(self.figure.axes[0])
        map_ax.set(ylim=(n - 0.5, -0.5), yticks=[], xlabel="epoch")
        map_ax.grid(False)
        edges = np.arange(EPOCH_AXIS_MAX + 2) - 0.5, np.arange(n + 1) - 0.5
        return {
            "band": ratio_ax.axhspan(0.8, 1.2, color=COLORS["band"], alpha=0.3, lw=0),
            "arms": [ratio_ax.plot([], [], **arm, **ARM_LINE)[0] for arm in arms],
            "hollow": [ratio_ax.plot([], [], mec=arm["color"], **HOLLOW)[0] for arm in arms],
            "stop": ratio_ax.axvline(0.0, color=COLORS["start"], lw=1.2, ls="--"),
            "cells": map_ax.pcolormesh(*edges, blank_cells(n), **CELLS),
            "separators": [map_ax.axhline(0, color=COLORS["threshold"]) for _ in arms[1:]],
        }

    def _build_metrics(self, axes: list[Any]) -> None:
        """The bottom row: zero-gradient share, KL (log scale) and true reward, per run."""
        zero, kl, reward = axes
        means = np.array(ARM_MEANS)
        zero.set(title="zero-gradient share", ylim=(-0.02, 1.02), xlabel="epoch")
        kl.set(title="KL(old ‖ new): k3, exact", xlabel="epoch")
        kl.set_yscale("log", nonpositive="mask")
        kl.set_ylim(*KL_LIMITS)
        reward.set(title="true reward", ylim=(means.min() - 0.1, means.max() + 0.1), xlabel="epoch")
        reward.axhline(means.mean(), color=COLORS["start"], lw=0.8, ls=":")
        reward.axhline(means.max(), color=COLORS["guide"], lw=0.8, ls="--")
        self.metric_lines = {
            key: {
                "zero_grad_fraction": zero.plot([], [], **c.line)[0],
                "approx_kl": kl.plot([], [], **c.line)[0],
                "exact_kl": kl.plot([], [], **DOTS, color=c.line["color"])[0],
                "true_reward": reward.plot([], [], **c.line)[0],
            }
            for key, c in COLUMNS.items()
        }
        self.target = kl.axhline(DEFAULT_TARGET_KL, color=COLORS["threshold"], ls=(0, (4, 2)))

    @staticmethod
    def _legends(styles: list[dict]) -> tuple[tuple[list[Any], ...], tuple[list[Any], ...]]:
        """Two legends of two rows each: the arms (four to a row), and the marks of the top
        row; the map's colours, and the objectives' lines of the bottom row."""
        arms = [
            Line2D([], [], **look, **ARM_LINE, label=f"arm {arm} (m = {signed(mu, 2)})")
            for arm, (look, mu) in enumerate(zip(styles, ARM_MEANS, strict=True))
        ]
        band = Patch(color=COLORS["band"], alpha=0.45, label="clip band [1−ε, 1+ε]")
        hollow = Line2D([], [], mec=COLORS["guide"], **HOLLOW, label="arm with no gradient")
        pushes = [
            Patch(color=PUSH_MAP(1.0), label="sample pushes its arm up"),
            Patch(color=PUSH_MAP(0.0), label="pushes it down"),
            Patch(facecolor="white", edgecolor=COLORS["guide"], label="no gradient"),
            Line2D([], [], color=COLORS["guide"], **DOTS, label="exact KL (k3: line)"),
        ]
        lines = [Line2D([], [], **c.line, label=c.name) for c in COLUMNS.values()]
        return (arms[:4], [*arms[4:], band, hollow]), (pushes, lines)  # 4 arms to a row

    @property
    def moving_artists(self) -> list[Any]:
        """Every artist :meth:`update` changes."""
        moving = [self.target]
        for column in self.columns.values():
            moving += [column["band"], column["stop"], column["cells"], *column["separators"]]
            moving += [*column["arms"], *column["hollow"]]
        return moving + [line for lines in self.metric_lines.values() for line in lines.values()]

    # -- updating -------------------------------------------------------------------------------

    def update(
        self,
        eps: float,
        step_size: float,
        epochs: int,
        seed: int,
        early_stop: bool,
        target_kl: float,
    ) -> Any:
        """Train the objectives at these settings and move every artist to their runs."""
        try:
            # The log slider's ends are a rounding off the range's (10 ** log10(0.2) is
            # 0.20000000000000004): clipped back to them.
            target = float(np.clip(target_kl, *TARGET_KL_RANGE)) if early_stop else None
            settings = Settings(eps, step_size, epochs, seed, target)
        except (TypeError, ValueError) as error:
            name, problem = str(error).split(" ", 1)
            words = self.controls[CONTROL_OF.get(name, name)].description
            raise InputError(
                f"The {words} {problem}. The figure still shows the last valid settings. "
                f"Fix the {words} to apply other changes."
            ) from error
        self.settings, self.runs = settings, run_all(settings)
        for objective, run in self.runs.items():
            self._show_column(self.columns[objective], run)
            for name, line in self.metric_lines[objective].items():
                line.set_data(run.epochs, getattr(run, name))
        self.target.set_visible(target is not None)
        self.target.set_ydata([target or DEFAULT_TARGET_KL] * 2)
        self._label_rows(settings.seed, self.runs["clipped"].batch)
        return summary_html(self.runs)

    def _label_rows(self, seed: int, batch: Any) -> None:
        """Label the first gradient map's rows for the batch of ``seed``: each sample, or in
        presentation mode (no room for twelve lines of large type) each arm, at the middle of
        its rows.  The labels are drawn with the figure's static part, not at every blit (text
        is slow to draw): a new batch draws the map again, labels and all, into the kept
        background once."""
        if seed == self._labelled_seed:
            return
        self._labelled_seed = seed
        colors = [arm["color"] for arm in arm_styles(len(ARM_MEANS))]
        rows = [
            (t, sample_label(t, arm, batch.advantages[t]), colors[arm])
            for t, arm in enumerate(batch.actions)
        ]
        if style.presenting():
            rows = [
                (np.flatnonzero(batch.actions == arm).mean(), f"arm {arm}", color)
                for arm, color in enumerate(colors)
                if (batch.actions == arm).any()
            ]
        ys, texts, colors = zip(*rows, strict=True)
        self.labelled_map.set_yticks(ys, texts)
        for label, color in zip(self.labelled_map.get_yticklabels(), colors, strict=True):
            label.set_color(color)
        self.redraw_axes(self.labelled_map)

    @staticmethod
    def _show_column(column: dict[str, Any], run: Run) -> None:
        lower, upper = run.band
        column["band"].set(y=lower, height=upper - lower)
        ratios, silent = run.arm_ratios(), run.arms_without_gradient()
        for arm, (line, hollow) in enumerate(zip(column["arms"], column["hollow"], strict=True)):
            line.set_data(run.epochs, ratios[:, arm])
            hollow.set_data(run.epochs, np.where(silent[:, arm], ratios[:, arm], np.nan))
        column["stop"].set(visible=run.stopped_early, xdata=[run.epochs_run] * 2)
        cells = blank_cells(run.batch.n)
        cells[:, : run.epochs_run + 1] = run.push_directions()
        column["cells"].set_array(cells)
        edges = np.cumsum(np.bincount(run.batch.actions, minlength=len(ARM_MEANS)))[:-1] - 0.5
        for line, y in zip(column["separators"], edges, strict=True):
            line.set_ydata([y, y])


def in_columns(first: list[Any], second: list[Any]) -> list[Any]:
    """Legend handles that put ``first`` on a legend's first row and ``second`` on its second
    (a legend fills its columns first), an invisible entry where a row is shorter."""
    width = max(len(first), len(second))
    blank = Line2D([], [], alpha=0.0, label=" ")
    padded = [[*row, *[blank] * (width - len(row))] for row in (first, second)]
    return [handle for pair in zip(*padded, strict=True) for handle in pair]


def blank_cells(n: int) -> np.ma.MaskedArray:
    """A gradient map with every cell blank: masked zeros (``np.ma.masked_all`` would hide
    uninitialised memory, which the colour map's normalisation computes with)."""
    return np.ma.array(np.zeros((n, EPOCH_AXIS_MAX + 1)), mask=True)


class _WholeNumber(traitlets.TraitType):
    """A whole number of any size; anything else is refused at assignment."""

    info_text = "a whole number"

    def validate(self, obj: Any, value: Any) -> int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        self.error(obj, value)


class WholeNumberText(widgets.IntText):
    """An ``IntText`` that refuses a non-integer with a ``TraitError`` before anything changes
    (``IntText`` turns 2.5 into 2 without a word); the app says when a number is out of range."""

    value = _WholeNumber(0, help="Int value").tag(sync=True)


# -- the line through PPO's update (the PPO paper's Figure 2) ---------------------------

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
                o: ax.plot([], [], **LINES[o], label=f"{NAMES[o]}: mean of {FORMULAS[o]}")[0]
                for o in ("unclipped", "clip_only", "clipped")
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
