"""Colours and figure defaults shared by every figure of the bundle.

The palette is Okabe and Ito's, chosen to stay distinguishable for the common
forms of colour blindness; figures have an opaque white background so they
stay readable in JupyterLab's dark theme too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib as mpl

BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#7F7F7F"

#: What each colour means, everywhere in the bundle.
COLORS = {
    "objective": BLUE,
    "unclipped": VERMILLION,
    "clip_only": ORANGE,
    "band": SKY_BLUE,
    "zero_grad": PURPLE,
    "start": BLACK,
    "sample": GREEN,
    "highlight": VERMILLION,
    "positive": BLUE,
    "negative": VERMILLION,
}

#: Colours for the three objectives compared in the epochs notebook.
OBJECTIVE_COLORS = {"clipped": BLUE, "unclipped": VERMILLION, "clip_only": ORANGE}

BASE_RC = {
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


@contextmanager
def figure_style(slides: bool = False) -> Iterator[None]:
    """Apply the bundle's matplotlib defaults (or the larger slide ones) in a block."""
    with mpl.rc_context(SLIDE_RC if slides else BASE_RC):
        yield
