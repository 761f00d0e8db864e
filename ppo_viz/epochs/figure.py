"""The figure of notebook 3: three objectives trained on one batch, epoch by epoch.

:class:`EpochsFigure` has one column per objective (PPO's clipped ``min``,
the unclipped ``r*A``, the clip-only ``clip(r)*A``): on top every arm's ratio
against the epoch, with the clip band shaded, and below it a map of which
samples still have a gradient of their own.  Under the columns, three panels
overlay the three runs: the fraction of samples with zero gradient (for PPO,
its clip fraction), the approximate and the exact KL, and the true expected
reward.  Every limit is fixed (the epoch axis spans the epochs slider's whole
range and the epochs not run are veiled in grey), so no axis ever moves and a
redraw only repaints what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Annotation, Text
from matplotlib.ticker import MaxNLocator, NullLocator
from matplotlib.transforms import offset_copy

import ppo_clip
from ppo_viz.epochs.bandit import N_SAMPLES, BanditBatch, default_bandit
from ppo_viz.epochs.layout import (
    ABOVE_GRID,
    ARM_COLORS,
    BELOW_LINES,
    BELOW_MOVING,
    EPOCH_AXIS_MAX,
    KL_LIMITS,
    METRIC_WIDTHS,
    PUSH_CMAP,
    PUSH_COLORS,
    RATIO_MAX,
    SCREEN,
    SLIDE,
    VEIL,
    add_veil,
    coast_marker_style,
    column_title,
    veil_after,
)
from ppo_viz.epochs.text import arm_label, sample_label
from ppo_viz.epochs.training import (
    DEFAULT_TARGET_KL,
    OBJECTIVES,
    Run,
    Settings,
    run_all,
)
from ppo_viz.numbers import rounded
from ppo_viz.style import COLORS, NAMES, figure_style


@dataclass
class ObjectiveColumn:
    """One objective's ratio panel and gradient map: the artists :meth:`EpochsFigure.show` moves."""

    ratio_ax: Axes
    map_ax: Axes
    band: Rectangle
    arm_lines: list[Line2D]
    coast_markers: list[Line2D]
    stop_line: Line2D
    stop_text: Text
    cells: QuadMesh
    separators: list[Line2D]
    veils: list[Rectangle]


class EpochsFigure:
    """Per objective a column (ratios, gradient map); beside them zero gradients, KL, reward.

    Build it once, then :meth:`show` the three runs of :func:`run_all`: only
    data, the band, the veils and labels change.  The three columns share
    their axes so the objectives compare at a glance.  On screen the three
    metric panels lie under the columns; ``slides=True`` gives a 16:9 figure
    with larger type and the metric panels stacked on the right.
    """

    def __init__(self, settings: Settings | None = None, *, slides: bool = False) -> None:
        settings = settings or Settings()
        self.bandit = default_bandit()
        self.geometry = SLIDE if slides else SCREEN
        with figure_style(slides):
            self.figure = Figure(figsize=self.geometry.size)
            columns = self.figure.add_gridspec(
                2, 3, height_ratios=[3.0, 2.0], wspace=0.1, **self.geometry.columns
            )
            self.columns: dict[str, ObjectiveColumn] = {}
            for index, objective in enumerate(OBJECTIVES):
                self.columns[objective] = self._build_column(columns, index, objective)
            self.sample_labels = self._build_sample_labels(self.columns[OBJECTIVES[0]].map_ax)
            self._build_metrics()
            self._build_legends()
            self._fix_epoch_axis()
            self._keep_frames_below_moving()
        self.runs: dict[str, Run] = {}
        self.batch: BanditBatch | None = None
        self.show(run_all(settings), settings.n_epochs)

    # -- construction ------------------------------------------------------

    def _build_column(self, grid: Any, index: int, objective: str) -> ObjectiveColumn:
        """The objective's ratio panel over its gradient map; both share the first column's axes."""
        first = self.columns.get(OBJECTIVES[0])
        ratio_ax = self.figure.add_subplot(
            grid[0, index],
            sharex=first.ratio_ax if first else None,
            sharey=first.ratio_ax if first else None,
        )
        map_ax = self.figure.add_subplot(
            grid[1, index], sharex=ratio_ax, sharey=first.map_ax if first else None
        )
        ratio_ax.set_title(
            column_title(objective, stacked=self.geometry.stacked_titles),
            color=COLORS[objective],
            fontweight="bold",
            fontsize=self.geometry.title_size,
        )
        if first is None:
            self._label_first_column(ratio_ax, map_ax)
        else:
            ratio_ax.tick_params(labelleft=False)
        return ObjectiveColumn(
            ratio_ax=ratio_ax,
            map_ax=map_ax,
            **self._build_ratio_panel(ratio_ax),
            **self._build_gradient_map(map_ax),
            veils=[add_veil(ratio_ax), add_veil(map_ax)],
        )

    def _build_ratio_panel(self, ax: Axes) -> dict[str, Any]:
        """The band, each arm's ratio line with its hollow circles, and the early-stop mark."""
        ax.set_ylim(0.0, RATIO_MAX * 1.04)
        ax.set_yticks(np.arange(0.0, RATIO_MAX + 0.5, 0.5))
        ax.tick_params(labelbottom=False)
        ax.axhline(1.0, color=COLORS["start"], lw=0.8, ls=":", zorder=1)
        band = Rectangle(
            (0.0, 0.8),
            1.0,
            0.4,
            transform=ax.get_yaxis_transform(),
            facecolor=COLORS["band"],
            alpha=0.3,
            lw=0,
            zorder=ABOVE_GRID,
        )
        ax.add_patch(band)
        return {
            "band": band,
            "arm_lines": [
                ax.plot([], [], color=color, lw=1.8, marker="o", ms=2.6, zorder=3)[0]
                for color in ARM_COLORS
            ],
            "coast_markers": [
                ax.plot([], [], zorder=4, **coast_marker_style(color))[0] for color in ARM_COLORS
            ],
            "stop_line": ax.axvline(0.0, color=COLORS["start"], lw=1.2, ls="--", visible=False),
            "stop_text": ax.text(
                0.0,
                0.97,
                "",
                transform=ax.get_xaxis_transform(),
                va="top",
                fontsize=self.geometry.note_size,
                visible=False,
            ),
        }

    def _build_gradient_map(self, ax: Axes) -> dict[str, Any]:
        """One cell per sample (rows) and epoch (columns), and lines between the arms."""
        ax.set_ylim(N_SAMPLES - 0.5, -0.5)
        ax.set_yticks([])
        ax.grid(False)
        ax.set_xlabel("epoch", fontsize=self.geometry.label_size)
        cells = ax.pcolormesh(
            np.arange(EPOCH_AXIS_MAX + 2) - 0.5,
            np.arange(N_SAMPLES + 1) - 0.5,
            blank_cells(N_SAMPLES),
            cmap=PUSH_CMAP,
            vmin=-1.5,
            vmax=1.5,
            antialiased=False,
            zorder=ABOVE_GRID,
        )
        separators = [ax.axhline(0.0, color=COLORS["threshold"], lw=0.9) for _ in ARM_COLORS[1:]]
        return {"cells": cells, "separators": separators}

    def _label_first_column(self, ratio_ax: Axes, map_ax: Axes) -> None:
        """The y labels, left of the first column only (the columns share their axes)."""
        ratio_ax.set_ylabel(
            "ratio r = π_new / π_old of each arm\n(its samples all share it)",
            fontsize=self.geometry.label_size,
        )
        stacked = self.geometry.stacked_titles
        map_ax.set_ylabel(
            "each sample's\nown gradient" if stacked else "each sample's own gradient",
            labelpad=self.geometry.sample_label_room,
            fontsize=self.geometry.label_size,
        )

    def _build_sample_labels(self, map_ax: Axes) -> list[Annotation]:
        """One label per sample, left of the first map: number, arm and advantage.

        The labels change only with the batch; they lie below the map's cells
        in z-order, so redraws for other controls never repaint them.
        """
        return [
            map_ax.annotate(
                "",
                xy=(0.0, t),
                xycoords=map_ax.get_yaxis_transform(),
                xytext=(-self.geometry.sample_label_start, 0.0),
                textcoords="offset points",
                ha="left",
                va="center",
                family="monospace",
                fontsize=self.geometry.sample_label_size,
                annotation_clip=False,
                zorder=BELOW_MOVING,
            )
            for t in range(N_SAMPLES)
        ]

    def _build_metrics(self) -> None:
        """The three panels that overlay the runs: zero gradients, KL and true reward."""
        rows, cols = self.geometry.metrics_shape
        grid = self.figure.add_gridspec(rows, cols, **self.geometry.metrics)
        self.clip_ax = self.figure.add_subplot(grid[0])
        self.kl_ax = self.figure.add_subplot(grid[1], sharex=self.clip_ax)
        self.reward_ax = self.figure.add_subplot(grid[2], sharex=self.clip_ax)
        panels = (self.clip_ax, self.kl_ax, self.reward_ax)
        titles = (
            "samples with zero gradient\n(PPO: its clip fraction)",
            "KL(old ‖ new), log scale",
            "true expected reward\nΣ π_k μ_k (dotted: start)",
        )
        for ax, title in zip(panels, titles, strict=True):
            ax.set_title(title, fontsize=self.geometry.metric_title_size)
            if rows == 1 or ax is self.reward_ax:
                ax.set_xlabel("epoch", fontsize=self.geometry.label_size)
            else:
                ax.tick_params(labelbottom=False)
        self.clip_ax.set_ylim(-0.02, 1.02)
        self.clip_ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        self.kl_ax.set_yscale("log", nonpositive="mask")
        self.kl_ax.set_ylim(*KL_LIMITS)
        self.kl_ax.set_yticks([1e-4, 1e-3, 1e-2, 1e-1, 1.0])
        self.kl_ax.yaxis.set_minor_locator(NullLocator())
        self._decorate_reward_panel()
        self.metric_veils = [add_veil(ax) for ax in panels]
        self._build_metric_lines()

    def _build_metric_lines(self) -> None:
        """Each run's line in the three panels, its final reward, and the target KL."""
        self.metric_lines: dict[str, dict[str, Line2D]] = {}
        self.end_labels: dict[str, Text] = {}
        for slot, objective in enumerate(OBJECTIVES):
            color, width = COLORS[objective], METRIC_WIDTHS[objective]
            self.metric_lines[objective] = {
                "zero_grad_fraction": self.clip_ax.plot([], [], color=color, lw=width)[0],
                "approx_kl": self.kl_ax.plot([], [], color=color, lw=width)[0],
                "exact_kl": self.kl_ax.plot([], [], color=color, lw=1.0, ls="--")[0],
                "true_reward": self.reward_ax.plot([], [], color=color, lw=width)[0],
            }
            below_final = offset_copy(
                self.reward_ax.transAxes,
                self.figure,
                y=-1.35 * self.geometry.note_size * (slot + 1),
                units="points",
            )
            self.end_labels[objective] = self.reward_ax.text(
                0.98,
                0.9,
                "",
                transform=below_final,
                color=color,
                ha="right",
                va="top",
                fontsize=self.geometry.note_size,
                fontweight="bold",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0, "alpha": 0.85},
            )
        self.target_line = self.kl_ax.axhline(
            DEFAULT_TARGET_KL, color=COLORS["threshold"], lw=1.0, ls=(0, (4, 2)), visible=False
        )
        self.target_text = self.kl_ax.text(
            0.98,
            DEFAULT_TARGET_KL,
            "target KL",
            transform=self.kl_ax.get_yaxis_transform(),
            ha="right",
            va="bottom",
            fontsize=self.geometry.note_size,
            visible=False,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8},
        )

    def _decorate_reward_panel(self) -> None:
        """Limits at the arms' means; the start and the best arm marked (under the lines)."""
        ax, means = self.reward_ax, self.bandit.true_means
        ax.set_ylim(means.min() - 0.1, means.max() + 0.1)
        ax.set_yticks(np.arange(means.min(), means.max() + 0.01, 0.25))
        start = self.bandit.expected_reward(self.bandit.old_probs)
        ax.axhline(start, color=COLORS["start"], lw=0.8, ls=":", zorder=BELOW_LINES)
        ax.axhline(means.max(), color=COLORS["guide"], lw=0.8, ls="--", zorder=BELOW_LINES)
        ax.text(
            0.01,
            means.max(),
            "best arm",
            transform=ax.get_yaxis_transform(),
            va="top",
            fontsize=self.geometry.note_size,
            color=COLORS["guide"],
            zorder=BELOW_LINES,
        )
        ax.text(
            0.98,
            0.9,
            "final",
            transform=ax.transAxes,
            fontsize=self.geometry.note_size,
            ha="right",
            va="top",
            zorder=BELOW_LINES,
        )

    def _build_legends(self) -> None:
        """Three legend rows outside the panels: arms, the gradient map, objectives and KL.

        Outside the panels nothing moves over them, so a redraw never repaints them.
        """
        arms = [
            Line2D(
                [],
                [],
                color=ARM_COLORS[arm],
                lw=1.8,
                marker="o",
                ms=3,
                label=arm_label(arm, self.bandit.true_means[arm]),
            )
            for arm in range(self.bandit.k)
        ]
        band = Patch(facecolor=COLORS["band"], alpha=0.45, label="clip band [1−ε, 1+ε]")
        pushes = [
            Patch(facecolor=PUSH_COLORS["up"], label="sample pushes its arm up (A > 0)"),
            Patch(facecolor=PUSH_COLORS["down"], label="pushes it down (A < 0)"),
            Patch(facecolor=PUSH_COLORS["zero"], edgecolor=COLORS["guide"], label="no gradient"),
            Line2D(
                [],
                [],
                **coast_marker_style(COLORS["guide"]),
                label="no sample of the arm has a gradient",
            ),
            Patch(**{**VEIL, "label": "epochs not run"}),
        ]
        runs = [
            Line2D([], [], color=COLORS[o], lw=METRIC_WIDTHS[o], label=NAMES[o]) for o in OBJECTIVES
        ]
        estimators = [
            Line2D([], [], color=COLORS["guide"], lw=1.8, label="k3 KL estimate on the batch"),
            Line2D([], [], color=COLORS["guide"], lw=1.0, ls="--", label="exact KL"),
        ]
        rows = ([*arms, band], pushes, [*runs, *estimators])
        for handles, anchor in zip(rows, self.geometry.legend_anchors, strict=True):
            self.figure.legend(
                handles=handles,
                loc="upper center",
                ncol=len(handles),
                bbox_to_anchor=anchor,
                frameon=False,
                handlelength=1.8,
                columnspacing=1.2,
                fontsize=self.geometry.legend_size,
            )

    def _fix_epoch_axis(self) -> None:
        """Every panel spans epochs ``0..EPOCH_AXIS_MAX``, whatever the number of epochs run."""
        ticks = MaxNLocator(nbins=7, integer=True).tick_values(0, EPOCH_AXIS_MAX)
        ticks = ticks[(ticks >= 0) & (ticks <= EPOCH_AXIS_MAX)]
        for ax in (self.columns[OBJECTIVES[0]].ratio_ax, self.clip_ax):
            ax.set_xlim(-0.5, EPOCH_AXIS_MAX + 0.5)
            ax.set_xticks(ticks)
        for ax in self.figure.axes:
            ax.tick_params(labelsize=self.geometry.tick_size)

    def _keep_frames_below_moving(self) -> None:
        """Titles and spines under every moving artist, so a redraw never repaints them."""
        for ax in self.figure.axes:
            ax.title.set_zorder(BELOW_MOVING)
            for spine in ax.spines.values():
                spine.set_zorder(BELOW_MOVING)

    # -- showing runs ------------------------------------------------------

    def show(self, runs: dict[str, Run], n_epochs: int) -> None:
        """Show ``runs`` (from :func:`run_all`) trained for up to ``n_epochs`` epochs.

        The bottom row is veiled after ``n_epochs``; each column's own
        panels are veiled from where its run ended, so an early stop's blank
        epochs never read as white "no gradient" cells.
        """
        self.runs = runs
        for objective, run in runs.items():
            self._show_column(self.columns[objective], run)
            for name, line in self.metric_lines[objective].items():
                line.set_data(run.epochs, getattr(run, name))
            self.end_labels[objective].set_text(rounded(run.true_reward[-1], 3))
        for veil in self.metric_veils:
            veil_after(veil, n_epochs)
        batch = runs[OBJECTIVES[0]].batch
        if batch is not self.batch:
            self.batch = batch
            self._label_samples(batch)
        target = runs[OBJECTIVES[0]].settings.target_kl
        self.target_line.set_visible(target is not None)
        self.target_text.set_visible(target is not None)
        if target is not None:
            self.target_line.set_ydata([target, target])
            self.target_text.set_y(target)

    def _show_column(self, column: ObjectiveColumn, run: Run) -> None:
        """The band at ``eps``, each arm's ratios, the early stop, the gradient map, the veils."""
        lower, upper = ppo_clip.clip_band(run.settings.eps)
        column.band.set_y(lower)
        column.band.set_height(upper - lower)
        ratios, silent = run.arm_ratios(), run.arms_without_gradient()
        for arm, (line, markers) in enumerate(
            zip(column.arm_lines, column.coast_markers, strict=True)
        ):
            line.set_data(run.epochs, ratios[:, arm])
            markers.set_data(run.epochs, np.where(silent[:, arm], ratios[:, arm], np.nan))
        self._show_stop(column, run)
        for veil in column.veils:
            veil_after(veil, run.epochs_run)
        column.cells.set_array(push_map(run))
        column.cells.stale = True  # set_array does not mark the mesh as changed
        boundaries = np.cumsum(run.batch.arm_counts())[:-1] - 0.5
        for line, y in zip(column.separators, boundaries, strict=True):
            line.set_ydata([y, y])

    @staticmethod
    def _show_stop(column: ObjectiveColumn, run: Run) -> None:
        """A dashed line where the early stop triggered, labelled with the k3 KL it saw."""
        column.stop_line.set_visible(run.stopped_early)
        column.stop_text.set_visible(run.stopped_early)
        if not run.stopped_early:
            return
        column.stop_line.set_xdata([run.epochs_run, run.epochs_run])
        on_left = run.epochs_run < 0.4 * EPOCH_AXIS_MAX
        column.stop_text.set_horizontalalignment("left" if on_left else "right")
        column.stop_text.set_x(run.epochs_run + (0.4 if on_left else -0.4))
        column.stop_text.set_text(f"early stop:\nk3 KL {rounded(run.approx_kl[-1], 3)}")

    def _label_samples(self, batch: BanditBatch) -> None:
        """Each sample's number, arm and advantage, in its arm's colour."""
        for t, label in enumerate(self.sample_labels):
            arm = int(batch.actions[t])
            text = sample_label(t, arm, batch.advantages[t])
            label.set_text(text)
            label.set_color(ARM_COLORS[arm])


def push_map(run: Run) -> np.ma.MaskedArray:
    """The gradient map's cells: ``run.push_directions()``, blank (masked) after the run."""
    cells = blank_cells(run.batch.n)
    cells[:, : run.epochs_run + 1] = run.push_directions()
    return cells


def blank_cells(rows: int) -> np.ma.MaskedArray:
    """A gradient map with every cell blank: masked, over zeros.

    Not ``np.ma.masked_all``: its hidden values are uninitialised memory, and
    the colour map's normalisation computes with them (a NaN there warns).
    """
    return np.ma.array(np.zeros((rows, EPOCH_AXIS_MAX + 1)), mask=True)
