"""The clipped surrogate and its gradient against the ratio (notebook 1).

:class:`SurrogateFigure` draws, for a positive and a negative advantage side by
side, one sample's objective term over a grid of ratios with its gradient
directly below, every value taken from :func:`ppo_clip.ratio_sweep`.
:class:`SurrogateExplorer` wires it to an ``eps`` slider and an advantage
slider; :func:`draw_objective_panel` and :func:`draw_gradient_panel` are the
building blocks other notebooks reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import matplotlib as mpl
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

import ppo_clip
from ppo_viz.display import SLIDE_DPI, App, FigureView, figure_to_png
from ppo_viz.style import COLORS, figure_style

#: The ratio axis of every objective plot.
R_MAX = 3.0
#: The advantage slider's range (a magnitude; the two columns use +A and -A).
ADVANTAGE_RANGE = (0.25, 2.0)
DEFAULT_ADVANTAGE = 1.0
DEFAULT_EPS = ppo_clip.DEFAULT_EPS


def ratio_grid(
    eps: float, *, r_max: float = R_MAX, points: int = 601, **variant: float | None
) -> np.ndarray:
    """An even grid over ``[0, r_max]`` that also contains 1 and the kinks exactly.

    Including the band edges (and a dual-clip cap, if given in ``variant``)
    puts the kinks of the curves on the grid, so corners are drawn sharp
    instead of cut off.  ``variant`` takes ``ratio_sweep``'s keywords.
    """
    band = ppo_clip.ratio_sweep([1.0], 1.0, eps, **variant)
    kinks = [1.0, band.lower, band.upper]
    if band.dual_clip is not None and band.dual_clip <= r_max:
        kinks.append(band.dual_clip)
    grid = np.linspace(0.0, r_max, points)
    return np.unique(np.concatenate([grid, kinks]))


def _span(mask: np.ndarray, grid: np.ndarray, r_max: float) -> tuple[float, float]:
    """The ``[first, last]`` ratio where ``mask`` holds, or an empty span.

    A span that reaches the grid's end is drawn past the axis edge.
    """
    if not mask.any():
        return (0.0, 0.0)
    chosen = grid[mask]
    right = float(chosen.max())
    return (float(chosen.min()), r_max * 1.05 if right == grid[-1] else right)


def _clipped_spans(
    sweep: ppo_clip.ClipBreakdown, advantage: float, r_max: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Where the sweep is clipped on the favourable side of r = 1, and on the other side.

    The favourable side is ``r > 1`` for ``A > 0`` and ``r < 1`` for ``A < 0``;
    the other side is only ever clipped by a dual-clip cap.
    """
    grid = sweep.ratio
    favourable = grid > 1.0 if advantage > 0 else grid < 1.0
    return (
        _span(sweep.is_clipped & favourable, grid, r_max),
        _span(sweep.is_clipped & ~favourable, grid, r_max),
    )


def _set_vspan(patch: Rectangle, left: float, right: float) -> None:
    patch.set_x(left)
    patch.set_width(right - left)


@dataclass
class PanelArtists:
    """The artists of one objective panel and the gradient panel below it."""

    objective_ax: Axes
    gradient_ax: Axes
    objective: Line2D
    unclipped: Line2D
    clip_only: Line2D
    gradient: Line2D
    gradient_unclipped: Line2D
    gradient_clip_only: Line2D
    bands: tuple[Rectangle, Rectangle]
    zero_grad: tuple[Rectangle, Rectangle]
    zero_grad_other_side: tuple[Rectangle, Rectangle]
    samples: tuple[Line2D, Line2D]

    def dynamic_artists(self) -> list[Artist]:
        """Everything that changes with the settings, in drawing order."""
        return [
            *self.bands,
            *self.zero_grad,
            *self.zero_grad_other_side,
            self.unclipped,
            self.clip_only,
            self.objective,
            self.gradient_unclipped,
            self.gradient_clip_only,
            self.gradient,
            *self.samples,
            self.objective_ax.title,
        ]


def _zero_gradient_span(ax: Axes, label: str | None = None) -> Rectangle:
    return ax.axvspan(
        0,
        0,
        facecolor=COLORS["zero_grad"],
        alpha=0.16,
        hatch="//",
        edgecolor=COLORS["zero_grad"],
        lw=0,
        label=label,
    )


def _decorate(ax: Axes) -> tuple[Rectangle, Rectangle, Rectangle]:
    """Band, two zero-gradient spans and the r = 1 marker; returns the three patches."""
    band = ax.axvspan(0, 0, color=COLORS["band"], alpha=0.22, lw=0, label="clip band [1-ε, 1+ε]")
    zero = _zero_gradient_span(ax, label="clipped: zero gradient")
    other_side = _zero_gradient_span(ax)
    ax.axvline(
        1.0, color=COLORS["start"], ls=":", lw=1.2, label="r = 1 (where a fresh batch starts)"
    )
    ax.axhline(0.0, color="#555555", lw=0.8)
    return band, zero, other_side


def draw_objective_panel(
    objective_ax: Axes,
    gradient_ax: Axes,
    advantage: float,
    eps: float,
    *,
    r_max: float = R_MAX,
    **variant: float | None,
) -> PanelArtists:
    """Draw one sample's objective term (top) and loss gradient (bottom) against r.

    The thick line is the term PPO keeps, ``min(r*A, clip(r)*A)``; thin dashed
    lines are the unclipped ``r*A`` and the clip-only ``clip(r)*A``.  Curves
    span ``[0, r_max]``.  Use :func:`update_objective_panel` to move it to new
    settings.
    """
    objective_band, objective_zero, objective_other = _decorate(objective_ax)
    gradient_band, gradient_zero, gradient_other = _decorate(gradient_ax)
    thin = {"lw": 1.3, "ls": (0, (5, 3))}
    artists = PanelArtists(
        objective_ax=objective_ax,
        gradient_ax=gradient_ax,
        unclipped=objective_ax.plot(
            [], [], color=COLORS["unclipped"], label="unclipped r·A", **thin
        )[0],
        clip_only=objective_ax.plot(
            [], [], color=COLORS["clip_only"], label="clip-only clip(r)·A", **thin
        )[0],
        objective=objective_ax.plot(
            [], [], color=COLORS["objective"], lw=2.6, label="PPO: min of the two"
        )[0],
        gradient_unclipped=gradient_ax.plot([], [], color=COLORS["unclipped"], **thin)[0],
        gradient_clip_only=gradient_ax.plot([], [], color=COLORS["clip_only"], **thin)[0],
        gradient=gradient_ax.plot([], [], color=COLORS["objective"], lw=2.6)[0],
        bands=(objective_band, gradient_band),
        zero_grad=(objective_zero, gradient_zero),
        zero_grad_other_side=(objective_other, gradient_other),
        samples=(
            objective_ax.plot(
                [],
                [],
                "o",
                ms=8,
                mfc=COLORS["sample"],
                mec="white",
                mew=1.2,
                zorder=5,
                label="worked-example samples",
            )[0],
            gradient_ax.plot(
                [], [], "o", ms=8, mfc=COLORS["sample"], mec="white", mew=1.2, zorder=5
            )[0],
        ),
    )
    objective_ax.set_ylabel("objective term")
    gradient_ax.set_ylabel("d loss / d log π_new  (N = 1)")
    gradient_ax.set_xlabel("ratio r = π_new / π_old")
    update_objective_panel(artists, advantage, eps, r_max=r_max, **variant)
    return artists


def update_objective_panel(
    artists: PanelArtists,
    advantage: float,
    eps: float,
    sample_ratios: Sequence[float] = (),
    *,
    r_max: float = R_MAX,
    **variant: float | None,
) -> ppo_clip.ClipBreakdown:
    """Move a panel to new settings; every y value comes from ``ppo_clip``.

    ``sample_ratios`` are drawn as points on the curves, which span
    ``[0, r_max]``.  ``variant`` takes :func:`ppo_clip.ratio_sweep`'s keywords
    (``eps_low``, ``eps_high``, ``dual_clip``).  Returns the sweep the curves
    were drawn from.

    The zero-gradient shading has two spans: ``zero_grad`` on the favourable
    side of r = 1 (where the band clips) and ``zero_grad_other_side``, which is
    empty unless a dual-clip cap clips ``A < 0`` samples above ``c``.
    """
    grid = ratio_grid(eps, r_max=r_max, **variant)
    sweep = ppo_clip.ratio_sweep(grid, advantage, eps, **variant)
    unclipped, unclipped_grad = ppo_clip.objective_terms(sweep, "unclipped")
    clip_only, clip_only_grad = ppo_clip.objective_terms(sweep, "clip_only")
    artists.objective.set_data(grid, sweep.objective_term)
    artists.unclipped.set_data(grid, unclipped)
    artists.clip_only.set_data(grid, clip_only)
    artists.gradient.set_data(grid, sweep.grad)
    artists.gradient_unclipped.set_data(grid, unclipped_grad)
    artists.gradient_clip_only.set_data(grid, clip_only_grad)
    favourable, other_side = _clipped_spans(sweep, advantage, r_max)
    for band, zero, other in zip(
        artists.bands, artists.zero_grad, artists.zero_grad_other_side, strict=True
    ):
        _set_vspan(band, sweep.lower, sweep.upper)
        _set_vspan(zero, *favourable)
        _set_vspan(other, *other_side)
    if len(sample_ratios) > 0:
        points = ppo_clip.ratio_sweep(sample_ratios, advantage, eps, **variant)
        artists.samples[0].set_data(points.ratio, points.objective_term)
        artists.samples[1].set_data(points.ratio, points.grad)
    else:
        for line in artists.samples:
            line.set_data([], [])
    return sweep


def _column_title(advantage: float, sweep: ppo_clip.ClipBreakdown) -> str:
    """Say where the column's objective is flat, using the sweep's own band."""
    if advantage > 0:
        return f"A = {advantage:+.2f} > 0: flat (clipped) where r > {sweep.upper:.2f}"
    if sweep.lower <= 0.0:
        return f"A = {advantage:+.2f} < 0: never clipped, since 1 − ε = {sweep.lower:.2f}"
    return f"A = {advantage:+.2f} < 0: flat (clipped) where r < {sweep.lower:.2f}"


#: Vertical reach of notebook 1's axes: the largest flat level, ``(1 + eps) * |A|``
#: at the slider ends, with a little room.
SURROGATE_REACH = 2.0 * ADVANTAGE_RANGE[1] * 1.08


def set_fixed_limits(
    ax_objective: Axes,
    ax_gradient: Axes,
    sign: int,
    *,
    reach: float = SURROGATE_REACH,
    r_max: float = R_MAX,
) -> None:
    """Limits that never change with the sliders, so axes never jump.

    ``reach`` should fit the largest flat level the controls allow; the
    unbounded unclipped parts may leave the frame, as they do on paper.
    The objective runs upwards for ``sign > 0`` and downwards otherwise, and
    the gradient the opposite way.
    """
    pad = 0.1 * reach
    if sign > 0:
        ax_objective.set_ylim(-pad, reach)
        ax_gradient.set_ylim(-reach, pad)
    else:
        ax_objective.set_ylim(-reach, pad)
        ax_gradient.set_ylim(-pad, reach)
    ax_objective.set_xlim(0.0, r_max)


class SurrogateFigure:
    """The 2x2 figure: objective (top) and gradient (bottom), for A > 0 and A < 0.

    ``update(advantage, eps)`` moves every artist in place; ``sweeps`` holds
    the :class:`ppo_clip.ClipBreakdown` each column was drawn from.
    """

    def __init__(
        self,
        advantage: float = DEFAULT_ADVANTAGE,
        eps: float = DEFAULT_EPS,
        *,
        slides: bool = False,
        show_worked_example: bool = True,
    ) -> None:
        example = ppo_clip.worked_example()
        self.example = ppo_clip.clip_breakdown(*example)
        self.show_worked_example = show_worked_example
        size = (13.33, 7.5) if slides else (10.0, 6.6)
        with figure_style(slides):
            self.figure = Figure(figsize=size, layout="constrained")
            axes = self.figure.subplots(2, 2, sharex="col")
            self.columns: dict[int, PanelArtists] = {}
            for column, sign in enumerate((+1, -1)):
                self.columns[sign] = draw_objective_panel(
                    axes[0, column], axes[1, column], sign * advantage, eps
                )
                set_fixed_limits(axes[0, column], axes[1, column], sign)
            handles, labels = axes[0, 0].get_legend_handles_labels()
            self.figure.legend(handles, labels, loc="outside lower center", ncols=4, frameon=False)
            self.sweeps: dict[int, ppo_clip.ClipBreakdown] = {}
            self.sample_labels: dict[int, list[Any]] = {}
            self._title_size = mpl.rcParams["axes.titlesize"]
            self.update(advantage, eps)

    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes (for fast redraws)."""
        labels = [label for column in self.sample_labels.values() for label in column]
        columns = [
            artist for column in self.columns.values() for artist in column.dynamic_artists()
        ]
        return columns + labels

    def _sample_indices(self, sign: int) -> list[int]:
        if not self.show_worked_example:
            return []
        chosen = np.flatnonzero(np.sign(self.example.advantages) == sign)
        return chosen[np.argsort(self.example.ratio[chosen])].tolist()

    def _sample_ratios(self, sign: int) -> list[float]:
        return self.example.ratio[self._sample_indices(sign)].tolist()

    def _label_samples(self, sign: int) -> None:
        """Put "sample t" next to each worked-example point of a column."""
        artists = self.columns[sign]
        labels = self.sample_labels.setdefault(sign, [])
        indices = self._sample_indices(sign)
        xs, ys = artists.samples[0].get_data()
        for position, (index, x, y) in enumerate(zip(indices, xs, ys, strict=True)):
            if position == len(labels):
                left = position % 2 == 0
                # Labels go on the side of the curve away from it: above the
                # rising A > 0 curve, and for A < 0 below the flat part (left)
                # and above the falling part (right).
                above = sign if left else 1
                labels.append(
                    artists.objective_ax.annotate(
                        f"sample {index}",
                        (0, 0),
                        xytext=(-7 if left else 7, above * 7),
                        textcoords="offset points",
                        fontsize="small",
                        color=COLORS["sample"],
                        fontweight="bold",
                        ha="right" if left else "left",
                        va="bottom" if above > 0 else "top",
                    )
                )
            labels[position].xy = (x, y)

    def update(self, advantage: float, eps: float) -> None:
        """Redraw both columns for advantage magnitude ``advantage`` and ``eps``."""
        for sign, artists in self.columns.items():
            sweep = update_objective_panel(
                artists, sign * advantage, eps, self._sample_ratios(sign)
            )
            self.sweeps[sign] = sweep
            self._label_samples(sign)
            artists.objective_ax.set_title(
                _column_title(sign * advantage, sweep), fontsize=self._title_size
            )


class SurrogateExplorer(App):
    """Sliders for ``eps`` and the advantage's magnitude over :class:`SurrogateFigure`."""

    description = "PPO's clipped objective and its gradient against the ratio"

    def __init__(self, advantage: float = DEFAULT_ADVANTAGE, eps: float = DEFAULT_EPS) -> None:
        self.plot = SurrogateFigure(advantage, eps)
        self.view = FigureView(self.plot.figure)
        self.view.animate(self.plot.dynamic_artists())
        self.eps = widgets.FloatSlider(
            value=eps,
            min=0.0,
            max=1.0,
            step=0.01,
            description="ε (clip size)",
            readout_format=".2f",
            continuous_update=True,
            style={"description_width": "110px"},
            layout=widgets.Layout(width="420px"),
        )
        self.advantage = widgets.FloatSlider(
            value=advantage,
            min=ADVANTAGE_RANGE[0],
            max=ADVANTAGE_RANGE[1],
            step=0.25,
            description="|A| (advantage)",
            readout_format=".2f",
            continuous_update=True,
            style={"description_width": "110px"},
            layout=widgets.Layout(width="420px"),
        )
        self.eps.add_class("ppo-main-slider")
        self.eps.add_class("ppo-surrogate-eps")
        self.advantage.add_class("ppo-main-slider")
        self.advantage.add_class("ppo-surrogate-advantage")
        self.readout = widgets.HTML()
        self.readout.add_class("ppo-surrogate-readout")
        self.widget = widgets.VBox(
            [widgets.HBox([self.eps, self.advantage]), self.readout, self.view.output]
        )
        self.eps.observe(self._redraw, names="value")
        self.advantage.observe(self._redraw, names="value")
        self._redraw()

    def _redraw(self, _change: Any = None) -> None:
        self.plot.update(self.advantage.value, self.eps.value)
        self.readout.value = self._readout_html()
        self.view.refresh()

    def _readout_html(self) -> str:
        sweep = self.plot.sweeps[+1]
        negative = (
            f"with A &lt; 0 once r &lt; {sweep.lower:.2f}"
            if sweep.lower > 0
            else "with A &lt; 0 never, since no ratio is below 1 − ε = 0"
        )
        return (
            '<div style="font-family:sans-serif;font-size:13px">'
            f"Clip band: <b>[{sweep.lower:.2f}, {sweep.upper:.2f}]</b>. "
            f"With A &gt; 0 the gradient is zero once r &gt; {sweep.upper:.2f}; {negative}. "
            "Moves the other way always keep their full gradient.</div>"
        )

    def static_fallback(self) -> dict[str, Any]:
        return {"png": self.view.last_png or figure_to_png(self.plot.figure)}

    def save(self, stem: str | Path = "ppo_clipped_objective") -> tuple[Path, Path]:
        """Save the current settings as slide-sized ``<stem>.png`` and ``<stem>.svg``.

        The slide version uses larger type (18 pt titles, 14 pt ticks) on a
        13.33 x 7.5 inch (16:9) canvas.  Returns the two paths written.
        """
        slides = SurrogateFigure(self.advantage.value, self.eps.value, slides=True)
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
        slides.figure.savefig(png, dpi=SLIDE_DPI // 2 + 50)
        slides.figure.savefig(svg)
        return png, svg
