"""The look of the bundle in one place: colours, names, figure defaults, stylesheet.

Change a colour, a name or a font size here and every figure, legend, table
and exported page follows:

* :data:`PALETTE` is Okabe and Ito's palette, chosen to stay distinguishable
  for the common forms of colour blindness; :data:`COLORS` says what each
  colour means everywhere in the bundle.
* :data:`NAMES` holds the names of the three objectives and of the parts of
  the figures, as legends, titles and tables print them.
* :func:`figure_style` applies the matplotlib defaults (white backgrounds,
  so figures stay readable in JupyterLab's dark theme); ``slides=True`` gives
  the larger type used for slides.
* :func:`stylesheet` is the CSS of every app's HTML and of the exported
  pages (``style.css`` next to this file, with the palette as CSS variables).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import matplotlib as mpl
from cycler import cycler

#: Okabe and Ito's colours (plus a grey), by name.
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

#: Larger type for figures saved for slides (about 18 pt at a 1280 px width).
SLIDE_RC = {
    **BASE_RC,
    "axes.titlesize": 18,
    "axes.labelsize": 16,
    "xtick.labelsize": 14,
    "ytick.labelsize": 14,
    "legend.fontsize": 13,
    "font.size": 15,
    "lines.linewidth": 2.5,
}

#: Figure sizes in inches: on screen, and a 16:9 slide.
SCREEN_SIZE = (10.0, 6.6)
SLIDE_SIZE = (40 / 3, 7.5)  # 2000 x 1125 pixels at SLIDE_DPI
#: Resolutions: on screen (what the apps show), and for saved slides.
SCREEN_DPI = 100
SLIDE_DPI = 150
#: The width of a figure saved for a slide, in pixels.
SLIDE_WIDTH_PX = 2000


def use() -> None:
    """Make the bundle's look matplotlib's default in this kernel (for a notebook's own cells)."""
    mpl.rcParams.update(BASE_RC)


@contextmanager
def figure_style(slides: bool = False) -> Iterator[None]:
    """Apply the bundle's matplotlib defaults (or the larger slide ones) in a block."""
    with mpl.rc_context(SLIDE_RC if slides else BASE_RC):
        yield


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
