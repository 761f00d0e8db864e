"""One visual language: the palette reads apart under colour-vision deficiencies, and no figure
or notebook cell falls back to matplotlib's default colours.

Dichromacy is simulated with the severity-1.0 matrices of Machado, Oliveira and Fernandes
(2009), "A physiologically-based model for simulation of color vision deficiency" (IEEE TVCG
15(6)), applied to linear sRGB; colours are compared by their CIE76 distance in CIELAB, where
about 2.3 is just noticeable and 10 is clearly different.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from ppo_viz.style import ARM_COLORS, COLOR_CYCLE, COLORS, LINES, arm_styles

MACHADO_2009 = {
    "protanopia": [
        [0.152286, 1.052583, -0.204868],
        [0.114503, 0.786281, 0.099216],
        [-0.003882, -0.048116, 1.051998],
    ],
    "deuteranopia": [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ],
    "tritanopia": [
        [1.255528, -0.076749, -0.178779],
        [-0.078411, 0.930809, 0.147602],
        [0.004733, 0.691367, 0.303900],
    ],
}
#: The colours a reader must tell apart in one figure: the objectives and the panel's marks.
MEANINGS = ("clipped", "unclipped", "clip_only", "band", "zero_grad", "sample")
#: What notebook 3 draws beside the arms' ratios: the objectives, the band, the pushes.
BESIDE_ARMS = ("clipped", "unclipped", "clip_only", "band", "push_up", "push_down")
NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def lab(linear_rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of linear sRGB."""
    xyz = np.array(
        [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]
    ) @ np.clip(linear_rgb, 0.0, 1.0)
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen(colour: str, deficiency: str | None) -> np.ndarray:
    rgb = linear(np.array(to_rgb(colour)))
    if deficiency is not None:
        rgb = np.array(MACHADO_2009[deficiency]) @ rgb
    return lab(rgb)


def distance(first: str, second: str, deficiency: str | None) -> float:
    return float(np.linalg.norm(seen(first, deficiency) - seen(second, deficiency)))


@pytest.mark.parametrize("deficiency", [None, *MACHADO_2009])
def test_the_colours_that_mean_different_things_stay_apart(deficiency):
    for first, second in itertools.combinations(MEANINGS, 2):
        apart = distance(COLORS[first], COLORS[second], deficiency)
        assert apart >= 10, f"{first} and {second}: {apart:.1f} apart ({deficiency})"


@pytest.mark.parametrize("deficiency", [None, *MACHADO_2009])
def test_every_arm_stays_apart_from_the_others_and_from_what_is_drawn_beside_it(deficiency):
    """Up to six arms: each has its own colour, none close to an objective's, the band's or a
    push's, and its own marker besides."""
    beside = [COLORS[meaning] for meaning in BESIDE_ARMS]
    pairs = [*itertools.combinations(ARM_COLORS, 2), *itertools.product(ARM_COLORS, beside)]
    for first, second in pairs:
        apart = distance(first, second, deficiency)
        assert apart >= 10, f"{first} and {second}: {apart:.1f} apart ({deficiency})"
    styles = arm_styles(len(ARM_COLORS))
    assert len({s["marker"] for s in styles}) == len(styles) == 6
    with pytest.raises(ValueError, match=r"^k must be between 1 and 6 arms, got 7$"):
        arm_styles(7)


def test_the_objectives_also_differ_in_line_style():
    """Unclipped and clip-only read apart without colour, on a projector that washes it out."""
    styles = [LINES[name]["ls"] for name in ("clipped", "unclipped", "clip_only")]
    assert len({str(style) for style in styles}) == 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_cells_use_the_palette_never_matplotlibs_defaults(path):
    """A cell that draws names colours from ppo_viz.style, or sets its style with style.use()."""
    code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    for source in code:
        assert not re.search(r"color\s*=\s*['\"]C\d['\"]|['\"]C\d['\"]", source), source[:200]
        assert not re.search(r"#[0-9A-Fa-f]{6}\b", source), source[:200]
    draws = any(re.search(r"\bplt\.|\.plot\(|\.scatter\(|\.fill_between\(", s) for s in code)
    if draws:
        assert any("style.use()" in s or "figure_style(" in s for s in code), path.name


def test_the_default_colour_cycle_is_the_palette():
    assert COLOR_CYCLE[:3] == [COLORS["clipped"], COLORS["unclipped"], COLORS["clip_only"]]
