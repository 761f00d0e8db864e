"""The look of the bundle in one place: colours, names, figure defaults, stylesheet.

Change a colour, a name or a font size here and every figure, legend, table
and exported page follows:

* :data:`PALETTE` is Okabe and Ito's palette, chosen to stay distinguishable
  for the common forms of colour blindness; :data:`COLORS` says what each
  colour means everywhere in the bundle.
* :data:`NAMES` holds the names of the three objectives and of the parts of
  the figures, as legends, titles and tables print them.
* :data:`LINES` says how each objective's curve is drawn (colour *and* line style), and
  :func:`arm_styles` how each arm of the bandit is (colour *and* marker).
* :func:`figure_style` applies the matplotlib defaults (white backgrounds,
  so figures stay readable in JupyterLab's dark theme), and :func:`use` makes
  them a notebook's defaults; in presentation mode (``PPO_PRESENT=1``, set by
  ``python -m ppo_viz.present``) both give larger type at a higher resolution.
* :func:`stylesheet` is the CSS of every app's HTML and of the exported
  pages (``style.css`` next to this file, with the palette as CSS variables).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib as mpl
from cycler import cycler

if TYPE_CHECKING:  # matplotlib.figure takes 0.2 s to import; the palette alone needs none of it
    from matplotlib.figure import Figure, SubFigure
    from matplotlib.legend import Legend

#: Okabe and Ito's colours (plus a grey, and three of Paul Tol's "muted" colours that serve
#: the bandit's arms past the third), by name.
PALETTE = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#7F7F7F",
    "wine": "#882255",
    "indigo": "#332288",
    "olive": "#999933",
}

#: What each colour means, everywhere in the bundle.
COLORS = {
    # The three objectives, in every figure and table.
    "clipped": PALETTE["blue"],
    "unclipped": PALETTE["vermillion"],
    "clip_only": PALETTE["orange"],
    # The parts of notebook 1's panels, reused by notebooks 2 and 4.
    "band": PALETTE["sky_blue"],
    "zero_grad": PALETTE["purple"],
    "start": PALETTE["black"],
    "sample": PALETTE["green"],
    "current": PALETTE["yellow"],
    "guide": PALETTE["grey"],
    "zero_line": "#555555",
    # Notebook 3's gradient map: a sample pushes its arm's probability up, or down.
    "push_up": PALETTE["sky_blue"],
    "push_down": PALETTE["yellow"],
    # Thresholds that are not objectives (overflow limits, caps): black and grey.
    "threshold": PALETTE["black"],
    "threshold_alt": PALETTE["grey"],
    # Messages and verdicts in HTML.
    "error": PALETTE["vermillion"],
    "info": PALETTE["blue"],
    "ok": PALETTE["green"],
}

#: The names of the objectives and of the figures' parts, as every legend prints them.
NAMES = {
    "clipped": "PPO (clipped)",
    "unclipped": "unclipped",
    "clip_only": "clip-only",
}

#: The formula of each objective's per-sample term, for titles and legends.
FORMULAS = {
    "clipped": "min(r·A, clip(r)·A)",
    "unclipped": "r·A",
    "clip_only": "clip(r)·A",
}

#: How each objective's curve is drawn, everywhere: PPO thick and solid; the unclipped
#: surrogate dashed and the clip-only term dotted, so the two read apart without colour too.
LINES = {
    "clipped": {"color": COLORS["clipped"], "lw": 2.6, "ls": "-"},
    "unclipped": {"color": COLORS["unclipped"], "lw": 1.5, "ls": (0, (6, 3))},
    "clip_only": {"color": COLORS["clip_only"], "lw": 1.8, "ls": (0, (1, 2))},
}


#: The arms' colours and markers, arm 0 first: none an objective's, the band's or a push's
#: colour, and every arm with a marker of its own, so the arms read apart without colour too.
ARM_COLORS = tuple(
    PALETTE[name] for name in ("green", "purple", "black", "wine", "indigo", "olive")
)
ARM_MARKERS = ("o", "s", "^", "D", "v", "P")


def arm_styles(k: int) -> list[dict[str, str]]:
    """How each of K arms is drawn: matplotlib's ``color`` and ``marker`` (at most six arms).

    >>> arm_styles(2)
    [{'color': '#009E73', 'marker': 'o'}, {'color': '#CC79A7', 'marker': 's'}]
    """
    if not 1 <= k <= len(ARM_COLORS):
        raise ValueError(f"k must be between 1 and {len(ARM_COLORS)} arms, got {k}")
    return [{"color": c, "marker": m} for c, m in zip(ARM_COLORS[:k], ARM_MARKERS, strict=False)]


#: The colours matplotlib cycles through when a cell does not name one: the palette, in the
#: order of the objectives, so a plain ``ax.plot`` never falls back to matplotlib's defaults.
COLOR_CYCLE = [
    PALETTE[name]
    for name in ("blue", "vermillion", "orange", "green", "sky_blue", "purple", "black", "grey")
]

BASE_RC = {
    "axes.prop_cycle": cycler(color=COLOR_CYCLE),
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.edgecolor": "#333333",
    "axes.labelcolor": "#111111",
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#DDDDDD",
    "grid.linewidth": 0.6,
    "xtick.color": "#333333",
    "ytick.color": "#333333",
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.framealpha": 0.92,
    "font.size": 10,
}

#: Presentation mode (``python -m ppo_viz.present``): the same figures drawn at
#: :data:`PRESENT_DPI` with every text at least 10.8 pt (``"small"`` is 0.833 of 13 pt), so that
#: on a 1280 x 800 projector every figure text is at least 14 pt (10.8 pt at 125 dpi is 18.75
#: screen pixels; 14 pt is 18.7) and a 9 x 5.6 inch figure (1125 x 700 pixels) fits under its
#: sliders.
PRESENT_RC = {
    **BASE_RC,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "font.size": 13,
}
#: The environment variable that turns presentation mode on in a kernel.
PRESENT_VARIABLE = "PPO_PRESENT"

#: Figure size in inches (900 pixels wide on screen: it fits JupyterLab's output area).
SCREEN_SIZE = (9.0, 5.6)
#: Resolutions: on screen, and in presentation mode.
SCREEN_DPI = 100
PRESENT_DPI = 125
#: The width of a figure saved for a slide, in pixels.
SLIDE_WIDTH_PX = 2000
#: Presentation mode's largest figure in inches: 1200 x 680 pixels at :data:`PRESENT_DPI`, so
#: that on a 1280 x 800 screen a figure and the controls above it are in view together.
PRESENT_MAX_SIZE = (9.6, 5.44)


def presenting() -> bool:
    """Whether this kernel runs in presentation mode (set by ``python -m ppo_viz.present``)."""
    return os.environ.get(PRESENT_VARIABLE, "") == "1"


def screen_dpi() -> float:
    """The resolution figures are shown at: larger in presentation mode."""
    return PRESENT_DPI if presenting() else SCREEN_DPI


def figure_size(screen: tuple[float, float], present: tuple[float, float]) -> tuple[float, float]:
    """A figure's size in inches: ``screen`` in JupyterLab, ``present`` in presentation mode
    (at most :data:`PRESENT_MAX_SIZE`)."""
    if not presenting():
        return screen
    if present[0] > PRESENT_MAX_SIZE[0] or present[1] > PRESENT_MAX_SIZE[1]:
        raise ValueError(f"present must fit in {PRESENT_MAX_SIZE} inches, got {present}")
    return present


def rc() -> dict:
    """The bundle's matplotlib settings: the screen's, or presentation mode's."""
    return {**(PRESENT_RC if presenting() else BASE_RC), "figure.dpi": screen_dpi()}


def use() -> None:
    """Make the bundle's look matplotlib's default in this kernel (for a notebook's own cells)."""
    mpl.rcParams.update(rc())


def figure_style() -> AbstractContextManager[None]:
    """Apply the bundle's matplotlib settings in a block: the screen's or presentation mode's."""
    return mpl.rc_context(rc())


def legend_below(figure: Figure | SubFigure, ncols: int = 3, **options: object) -> Legend:
    """One legend for every panel, under them, ``ncols`` entries to a row, without a frame;
    ``options`` are ``Figure.legend``'s (``handles``, ``labels``, ``fontsize``, ...)."""
    return figure.legend(loc="outside lower center", ncols=ncols, frameon=False, **options)


@cache
def stylesheet() -> str:
    """The bundle's CSS: :data:`PALETTE` and :data:`COLORS` as variables, then ``style.css``.

    Each colour becomes ``--ppo-<name>`` (``--ppo-blue``, ``--ppo-clipped``)
    and each meaning a class ``.ppo-text-<meaning>`` that sets the text colour.
    """
    colours = {**PALETTE, **COLORS}
    variables = "".join(f"--ppo-{_css_name(name)}:{hex};" for name, hex in colours.items())
    text_classes = "".join(
        f".ppo-text-{_css_name(name)}{{color:var(--ppo-{_css_name(name)})}}" for name in COLORS
    )
    css = Path(__file__).with_name("style.css").read_text(encoding="utf-8")
    return f":root{{{variables}}}\n{text_classes}\n{css}"


def _css_name(name: str) -> str:
    return name.replace("_", "-")
