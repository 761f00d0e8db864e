"""How notebook 3's figure looks: colours, line widths, z-orders and the two geometries.

:data:`SCREEN` is the figure in the notebook (12 by 10 inches, the metric
panels under the three columns); :data:`SLIDE` is the 16:9 slide that
``EpochsExplorer.save`` writes (larger type, the metric panels stacked on the
right).  :mod:`.figure` builds the figure from these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from ppo_viz.epochs.bandit import default_bandit
from ppo_viz.epochs.training import EPOCHS_RANGE
from ppo_viz.style import COLORS, FORMULAS, NAMES, PALETTE, SLIDE_SIZE

#: The colour of each arm, in the ratio lines, the sample labels and the legend.
ARM_COLORS = (PALETTE["green"], PALETTE["purple"], PALETTE["black"], PALETTE["grey"])
#: The gradient map's colours: none is an objective's colour, an arm's, or the pink that
#: means "clipped: zero gradient" in notebooks 1 and 2.  Sky blue against yellow stays
#: distinct under the common colour-vision deficiencies.
PUSH_COLORS = {
    "down": PALETTE["yellow"],  # the sample pushes its log-probability down (A < 0)
    "zero": "white",  # no gradient of its own
    "up": PALETTE["sky_blue"],  # the sample pushes its log-probability up (A > 0)
}
PUSH_CMAP = ListedColormap([PUSH_COLORS["down"], PUSH_COLORS["zero"], PUSH_COLORS["up"]])
#: Line widths of the bottom row: the wider line underneath, so coinciding runs stay visible.
METRIC_WIDTHS = {"clipped": 2.9, "unclipped": 1.9, "clip_only": 1.1}
#: Every panel's x-axis spans the epochs slider's whole range, so changing the number of
#: epochs never moves an axis; the epochs past the requested number are veiled in grey.
EPOCH_AXIS_MAX = EPOCHS_RANGE[1]
#: The veil lies over everything in its panel.
VEIL = {"facecolor": COLORS["guide"], "alpha": 0.16, "lw": 0, "zorder": 6}
#: Largest ratio any arm can reach: 1 / (smallest old probability).
RATIO_MAX = 1.0 / float(default_bandit().old_probs.min())
KL_LIMITS = (1e-4, 5.0)
#: Moving cells and patches sit above the ticks and grid (z-order 0.5), so a redraw
#: need not repaint those; titles and spines sit below every moving artist.
ABOVE_GRID = 0.6
BELOW_MOVING = 0.55
#: Static marks inside a panel with moving lines (z-order 2) lie under them.
BELOW_LINES = 1.5


@dataclass(frozen=True)
class Geometry:
    """Where everything goes, on screen or on a slide (fractions of the figure, points)."""

    size: tuple[float, float]
    #: ``add_gridspec`` keywords of the three columns (ratios over maps).
    columns: dict[str, float]
    #: Rows and columns of the three metric panels, and their ``add_gridspec`` keywords.
    metrics_shape: tuple[int, int]
    metrics: dict[str, float]
    #: Anchors (figure fractions) of the legend rows: arms, gradient map, objectives.
    legend_anchors: tuple[tuple[float, float], ...]
    legend_size: float
    #: Font sizes (points): the columns' titles (titles and the maps' label on two
    #: lines if ``stacked_titles``),
    #: the metric panels' titles, axis labels, tick labels, notes inside the panels
    #: and the sample labels.
    title_size: float
    stacked_titles: bool
    metric_title_size: float
    label_size: float
    tick_size: float
    note_size: float
    sample_label_size: float
    #: Where the sample labels start, and the room for them and the map's label
    #: (points left of the first map).
    sample_label_start: float
    sample_label_room: float


SCREEN = Geometry(
    size=(12.0, 10.0),
    columns={"left": 0.16, "right": 0.985, "top": 0.885, "bottom": 0.40, "hspace": 0.06},
    metrics_shape=(1, 3),
    metrics={"left": 0.16, "right": 0.985, "top": 0.262, "bottom": 0.052, "wspace": 0.22},
    legend_anchors=((0.57, 0.995), (0.57, 0.962), (0.57, 0.352)),
    legend_size=9.0,
    title_size=11.0,
    stacked_titles=False,
    metric_title_size=10.0,
    label_size=10.0,
    tick_size=9.0,
    note_size=8.5,
    sample_label_size=8.0,
    sample_label_start=92.0,
    sample_label_room=122.0,
)
SLIDE = Geometry(
    size=SLIDE_SIZE,
    columns={"left": 0.16, "right": 0.74, "top": 0.77, "bottom": 0.075, "hspace": 0.05},
    metrics_shape=(3, 1),
    metrics={"left": 0.81, "right": 0.99, "top": 0.80, "bottom": 0.075, "hspace": 0.5},
    legend_anchors=((0.5, 1.0), (0.5, 0.957), (0.5, 0.914)),
    legend_size=12.0,
    title_size=14.0,
    stacked_titles=True,
    metric_title_size=12.0,
    label_size=11.5,
    tick_size=12.0,
    note_size=10.0,
    sample_label_size=10.0,
    sample_label_start=112.0,
    sample_label_room=118.0,
)


def column_title(objective: str, *, stacked: bool = False) -> str:
    """``PPO: min(r·A, clip(r)·A)``, ``unclipped: r·A``, ``clip-only: clip(r)·A``.

    ``stacked`` puts the formula on a second line.
    """
    name = "PPO" if objective == "clipped" else NAMES[objective]
    return f"{name}\n{FORMULAS[objective]}" if stacked else f"{name}: {FORMULAS[objective]}"


def coast_marker_style(color: str) -> dict[str, Any]:
    """A hollow circle: an epoch where no sample of the arm has a gradient of its own."""
    return {"ls": "none", "marker": "o", "ms": 5.5, "mfc": "white", "mec": color, "mew": 1.3}


def add_veil(ax: Axes) -> Rectangle:
    """A grey veil over the epochs not run (placed by :func:`veil_after`)."""
    veil = Rectangle(
        (EPOCH_AXIS_MAX + 0.5, 0.0), 0.0, 1.0, transform=ax.get_xaxis_transform(), **VEIL
    )
    ax.add_patch(veil)
    return veil


def veil_after(veil: Rectangle, last_epoch: int) -> None:
    """Place ``veil`` over epochs ``last_epoch + 1 .. EPOCH_AXIS_MAX`` (hidden if none)."""
    veil.set_visible(last_epoch < EPOCH_AXIS_MAX)
    veil.set_x(last_epoch + 0.5)
    veil.set_width(EPOCH_AXIS_MAX - last_epoch)
