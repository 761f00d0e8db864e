"""One sample's objective term and its gradient against the ratio: the bundle's core picture.

:func:`draw_objective_panel` draws, on two axes one above the other, the term
PPO keeps (``min(r*A, clip(r)*A)``, thick) with its two candidates (thin,
dashed), and below it the gradient of the loss with respect to
``log pi_new``; the clip band is shaded, the clipped (zero-gradient) region
hatched, ``r = 1`` marked.  Every y value is read from
:func:`ppo_clip.ratio_sweep`.  :meth:`PanelArtists.show` draws a sweep on a panel
(:meth:`PanelArtists.update` makes the sweep for new settings); :func:`objective_figure`
sets a column of panels for each sign of A side by side, as notebooks 1, 2 and 5 do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

import ppo_clip
from ppo_viz.style import COLORS, FORMULAS, LINES, NAMES, PRESENT_MAX_SIZE, figure_size

#: The ratio axis of every objective plot, unless a figure gives its own.
R_AXIS = (0.0, 3.0)
#: Points on a ratio grid (the band's edges and r = 1 are added exactly).
GRID_POINTS = 601


def ratio_grid(
    eps: float,
    *,
    r_axis: tuple[float, float] = R_AXIS,
    **variant: float | None,
) -> np.ndarray:
    """An even grid of :data:`GRID_POINTS` over ``r_axis`` that also contains 1 and the kinks
    exactly.

    Including the band edges (and a dual-clip cap, if given in ``variant``) puts the kinks of
    the curves on the grid, so corners are drawn sharp instead of cut off.  ``variant`` takes
    ``ratio_sweep``'s keywords.
    """
    low, high = r_axis
    lower, upper = ppo_clip.clip_band(eps, variant.get("eps_low"), variant.get("eps_high"))
    kinks = [k for k in (1.0, lower, upper, variant.get("dual_clip")) if k is not None]
    inside = [k for k in kinks if low <= k <= high]
    return np.unique(np.concatenate([np.linspace(low, high, GRID_POINTS), inside]))


@dataclass
class PanelArtists:
    """The artists of one objective panel and the gradient panel below it.

    :meth:`show` moves them to a sweep; :attr:`moving` lists every artist it changes.
    """

    objective_ax: Axes
    gradient_ax: Axes
    r_axis: tuple[float, float]
    #: The artists, in the order they are drawn (within a zorder: the thick line on top).
    unclipped: Line2D
    clip_only: Line2D
    objective: Line2D
    gradient_unclipped: Line2D
    gradient_clip_only: Line2D
    gradient: Line2D
    bands: tuple[Rectangle, Rectangle]
    zero_grad: tuple[Rectangle, Rectangle]
    zero_grad_other_side: tuple[Rectangle, Rectangle]
    samples: tuple[Line2D, Line2D]
    #: Where PPO's gradient jumps (at 1 ± eps, or a dual-clip cap): a filled marker on
    #: the value the strict rule keeps at the edge, an open one on the clipped side's.
    jump_kept: Line2D
    jump_other_side: Line2D

    @property
    def moving(self) -> list[Artist]:
        """Every artist :meth:`show` changes: the fields after the axes and ``r_axis``."""
        found = [getattr(self, f.name) for f in fields(self)[3:]]
        return [a for item in found for a in (item if isinstance(item, tuple) else (item,))]

    def update(
        self,
        advantage: float,
        eps: float,
        samples: ppo_clip.ClipBreakdown | None = None,
        at: Sequence[int] | np.ndarray = (),
        **variant: float | None,
    ) -> ppo_clip.ClipBreakdown:
        """:meth:`show` :func:`ppo_clip.ratio_sweep` of ``advantage`` over :func:`ratio_grid`;
        ``variant`` takes its keywords (``eps_low``, ``eps_high``, ``dual_clip``).  Returns
        the sweep."""
        grid = ratio_grid(eps, r_axis=self.r_axis, **variant)
        sweep = ppo_clip.ratio_sweep(grid, advantage, eps, **variant)
        self.show(sweep, samples, at)
        return sweep

    def show(
        self,
        sweep: ppo_clip.ClipBreakdown,
        samples: ppo_clip.ClipBreakdown | None = None,
        at: Sequence[int] | np.ndarray = (),
    ) -> None:
        """Draw ``sweep`` (a :func:`ppo_clip.ratio_sweep`, one advantage), and entries ``at`` of
        ``samples`` (a breakdown with ``batch_size`` 1) as points at their own term and gradient.

        The zero-gradient shading has two spans: ``zero_grad`` on the favourable side of
        r = 1 (where the band clips) and ``zero_grad_other_side``, which is empty unless a
        dual-clip cap clips ``A < 0`` samples above ``c``.
        """
        grid = sweep.ratio
        unclipped, unclipped_grad = ppo_clip.objective_terms(sweep, "unclipped")
        clip_only, clip_only_grad = ppo_clip.objective_terms(sweep, "clip_only")
        self.objective.set_data(grid, sweep.objective_term)
        self.unclipped.set_data(grid, unclipped)
        self.clip_only.set_data(grid, clip_only)
        self.gradient.set_data(*broken_at_switches(grid, sweep.grad, sweep.is_clipped))
        self.gradient_unclipped.set_data(grid, unclipped_grad)
        self.gradient_clip_only.set_data(
            *broken_at_switches(grid, clip_only_grad, sweep.outside_band)
        )
        kept, other_side = jumps(grid, sweep.grad, sweep.is_clipped)
        self.jump_kept.set_data(*kept)
        self.jump_other_side.set_data(*other_side)
        favourable, other_side = clipped_spans(sweep)
        for band, zero, other in zip(
            self.bands, self.zero_grad, self.zero_grad_other_side, strict=True
        ):
            _set_span(band, sweep.lower, sweep.upper)
            _set_span(zero, *favourable)
            _set_span(other, *other_side)
        points, at = (sweep, []) if samples is None else (samples, np.asarray(at, dtype=int))
        self.samples[0].set_data(points.ratio[at], points.objective_term[at])
        self.samples[1].set_data(points.ratio[at], points.grad[at])


def draw_objective_panel(
    objective_ax: Axes, gradient_ax: Axes, *, r_axis: tuple[float, float] = R_AXIS
) -> PanelArtists:
    """Draw one sample's objective term (top) and loss gradient (bottom) against r.

    The thick line is the term PPO keeps, ``min(r*A, clip(r)*A)``; thin dashed lines are the
    unclipped ``r*A`` and the clip-only ``clip(r)*A``.  Curves span ``r_axis``.  The curves
    are empty until :meth:`PanelArtists.update` draws them for an advantage and an ``eps``.
    """
    objective_band, objective_zero, objective_other = _decorate(objective_ax)
    gradient_band, gradient_zero, gradient_other = _decorate(gradient_ax)
    sample = {"ls": "none", "marker": "o", "ms": 8, "mfc": COLORS["sample"], "mec": "white"}
    sample |= {"mew": 1.2, "zorder": 5}
    jump = {"ls": "none", "marker": "o", "ms": 6.5, "mec": COLORS["clipped"], "mew": 1.6}
    jump |= {"zorder": 4}
    artists = PanelArtists(
        objective_ax=objective_ax,
        gradient_ax=gradient_ax,
        r_axis=r_axis,
        unclipped=objective_ax.plot([], [], **LINES["unclipped"])[0],
        clip_only=objective_ax.plot([], [], **LINES["clip_only"])[0],
        objective=objective_ax.plot([], [], **LINES["clipped"])[0],
        gradient_unclipped=gradient_ax.plot([], [], **LINES["unclipped"])[0],
        gradient_clip_only=gradient_ax.plot([], [], **LINES["clip_only"])[0],
        gradient=gradient_ax.plot([], [], **LINES["clipped"])[0],
        bands=(objective_band, gradient_band),
        zero_grad=(objective_zero, gradient_zero),
        zero_grad_other_side=(objective_other, gradient_other),
        samples=(objective_ax.plot([], [], **sample)[0], gradient_ax.plot([], [], **sample)[0]),
        jump_kept=gradient_ax.plot([], [], **jump, mfc=COLORS["clipped"])[0],
        jump_other_side=gradient_ax.plot([], [], **jump, mfc="white")[0],
    )
    objective_ax.set_ylabel("objective term")
    gradient_ax.set_ylabel("d loss / d log π_new\n(N = 1)")  # two lines: within its axes
    gradient_ax.set_xlabel("ratio r = π_new / π_old")
    return artists


def objective_figure(
    size: tuple[float, float], r_axis: tuple[float, float] = R_AXIS, *, reach: float | None = None
) -> tuple[Figure, dict[int, PanelArtists]]:
    """A figure of two columns of panels, for ``A > 0`` (left) and ``A < 0`` (right).

    Each column is :func:`draw_objective_panel` on two axes sharing their ratio axis; the
    dict maps each sign (``+1``, ``-1``) to its column.  ``size`` is the figure's size on
    screen (presentation mode's is at most ``PRESENT_MAX_SIZE``).  With ``reach``, each
    column gets :func:`set_fixed_limits`.  Call it inside ``figure_style()``.
    """
    figure = Figure(figsize=figure_size(size, present=PRESENT_MAX_SIZE), layout="constrained")
    axes = figure.subplots(2, 2, sharex="col")
    columns = {}
    for column, sign in enumerate((+1, -1)):
        columns[sign] = draw_objective_panel(*axes[:, column], r_axis=r_axis)
        if reach is not None:
            set_fixed_limits(*axes[:, column], sign, reach=reach, r_axis=r_axis)
    return figure, columns


def _decorate(ax: Axes) -> tuple[Rectangle, Rectangle, Rectangle]:
    """Band, two zero-gradient spans and the r = 1 marker; returns the three patches."""
    band = ax.axvspan(0, 0, color=COLORS["band"], alpha=0.22, lw=0)
    zero = _zero_gradient_span(ax)
    other_side = _zero_gradient_span(ax)
    ax.axvline(1.0, color=COLORS["start"], ls=":", lw=1.2)
    ax.axhline(0.0, color=COLORS["zero_line"], lw=0.8)
    return band, zero, other_side


def _zero_gradient_span(ax: Axes) -> Rectangle:
    colour = COLORS["zero_grad"]
    return ax.axvspan(0, 0, facecolor=colour, alpha=0.16, hatch="//", edgecolor=colour, lw=0)


def legend_entries(panel: PanelArtists) -> tuple[list[Artist], list[str]]:
    """Six entries, enough for a projector: the three objectives, the band, the clipped
    region and the worked-example points.  Each objective's line style is the same in the
    objective row and the gradient row, so one entry names both.
    """
    entries = {
        f"PPO {FORMULAS['clipped']}, and its gradient": panel.objective,
        f"{NAMES['unclipped']} {FORMULAS['unclipped']}, gradient −r·A": panel.unclipped,
        f"{NAMES['clip_only']} {FORMULAS['clip_only']}, gradient 0 outside": panel.clip_only,
        "clip band [1−ε, 1+ε]": panel.bands[0],
        "clipped: zero gradient": panel.zero_grad[0],
        "worked-example samples": panel.samples[0],
    }
    return list(entries.values()), list(entries)


def flat_where(sweep: ppo_clip.ClipBreakdown, sign: int, number: Callable[[float], str]) -> str:
    """Where the term of an advantage of ``sign`` is flat (clipped), from the sweep's own band
    and dual-clip cap, each edge written by ``number``: ``flat (clipped) where r > 1.2``, or
    ``never clipped (lower edge 0)``."""
    edges = [f"r > {number(sweep.upper)}"] if sign > 0 else []
    if sign < 0 and sweep.lower > 0.0:
        edges.append(f"r < {number(sweep.lower)}")
    if sign < 0 and sweep.dual_clip is not None:
        edges.append(f"r > {number(sweep.dual_clip)}")
    if not edges:
        return f"never clipped (lower edge {number(sweep.lower)})"
    return "flat (clipped) where " + " or ".join(edges)


def broken_at_switches(
    grid: np.ndarray, values: np.ndarray, switched_off: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` with a gap (NaN) wherever ``switched_off`` changes between grid points.

    A gradient jumps where clipping switches it off; drawn without the gap, the
    jump would look like a steep stretch of curve.
    """
    cuts = np.flatnonzero(switched_off[1:] != switched_off[:-1]) + 1
    return np.insert(grid, cuts, np.nan), np.insert(values, cuts, np.nan)


def jumps(
    grid: np.ndarray, grad: np.ndarray, clipped: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The ends of each jump of the gradient: ``((x, kept values), (x, clipped values))``.

    At each switch the grid point that is not clipped is the edge itself (the
    edges are on the grid, and the strict rule keeps them): its own value is
    what the edge keeps; its clipped neighbour's value is the limit from the
    other side, drawn at the edge's ratio.
    """
    left = np.flatnonzero(clipped[1:] != clipped[:-1])
    edge = np.where(clipped[left], left + 1, left)
    beyond = np.where(clipped[left], left, left + 1)
    return (grid[edge], grad[edge]), (grid[edge], grad[beyond])


def clipped_spans(
    sweep: ppo_clip.ClipBreakdown,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Where a sweep (one advantage) is clipped on the favourable side of r = 1, and on the
    other side.

    The favourable side is ``r > 1`` for ``A > 0`` and ``r < 1`` for ``A < 0``; the other
    side is only ever clipped by a dual-clip cap.  A span that reaches an end of the grid is
    drawn past that end of the axis; an empty span is ``(0, 0)``.
    """
    grid = sweep.ratio
    favourable = grid > 1.0 if sweep.advantages[0] > 0 else grid < 1.0
    return _span(sweep.is_clipped & favourable, grid), _span(sweep.is_clipped & ~favourable, grid)


def _span(mask: np.ndarray, grid: np.ndarray) -> tuple[float, float]:
    if not mask.any():
        return (0.0, 0.0)
    chosen = grid[mask]
    left, right, margin = float(chosen.min()), float(chosen.max()), grid[-1] - grid[0]
    return (
        left - margin if left == grid[0] else left,
        right + margin if right == grid[-1] else right,
    )


def _set_span(patch: Rectangle, left: float, right: float) -> None:
    patch.set(x=left, width=right - left)


def set_fixed_limits(
    objective_ax: Axes,
    gradient_ax: Axes,
    sign: int,
    *,
    reach: float,
    r_axis: tuple[float, float] = R_AXIS,
    margin: float = 0.1,
) -> None:
    """Limits that never change with the sliders, so axes never jump.

    ``reach`` should fit the largest flat level the controls allow; the unbounded unclipped
    parts may leave the frame, as they do on paper.  The objective runs upwards for
    ``sign > 0`` and downwards otherwise, and the gradient the opposite way; each axis shows
    ``margin`` times ``reach`` on the other side of zero.
    """
    upwards, downwards = (-margin * reach, reach), (-reach, margin * reach)
    objective_ax.set_ylim(*(upwards if sign > 0 else downwards))
    gradient_ax.set_ylim(*(downwards if sign > 0 else upwards))
    objective_ax.set_xlim(*r_axis)
