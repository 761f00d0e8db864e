"""Notebook 7's heat map: which tokens each objective pushes, and how hard.

:class:`TokenPushExplorer` draws every token of :func:`.response_batch` as a cell coloured by its
*push*, ``-d loss / d logp_new`` from :func:`llm_clip.token_breakdown` (sky blue raises the
token's log-probability, yellow lowers it: notebook 3's ``push_up`` and ``push_down``), with a
purple frame where the clip switches the token's gradient off (dashed where the objective's
weight is detached, as CISPO's: capped, its gradient kept).  Beside it, each answer's advantage
and the sum of its tokens' pushes.  Controls: the objective, ``mu`` (updates on the batch), the
band, ``beta`` with the KL in the loss (k3, GRPO) or in the reward (k1, PPO for RLHF), and the
group size.  Choosing an objective moves the band's sliders to its own default band (DAPO's
clip-higher, GMPO's band on ``log r``), and greys them out for SAPO, which has none: the same
0.2 means another band on ``log r`` than on ``r``.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import ipywidgets as widgets
import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import LinearSegmentedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Patch
from matplotlib.path import Path
from matplotlib.textpath import TextPath

import llm_clip
import tiny_rlhf
from ppo_clip_inputs import checked_choice
from ppo_viz.app import InputError, LiveFigure
from ppo_viz.controls import checked_number, control_layout, slider
from ppo_viz.html import Markup, tag
from ppo_viz.llm.batch import MAX_GROUP, MAX_LEN, MAX_MU, VOCAB, ResponseBatch, response_batch
from ppo_viz.numbers import count, rounded, signed
from ppo_viz.style import COLORS, figure_size, figure_style, legend_below

#: The choices of the two dropdowns, label to key: the objectives (llm_clip's registry), and
#: where the KL goes (k3 per token in the loss, as GRPO; each answer's k1 = log pi_old -
#: log pi_ref summed over its tokens and taken off its reward, as PPO for RLHF).
OBJECTIVES = {spec.label: key for key, spec in llm_clip.SPECS.items()}
KL_PLACES = {"in the loss (k3, GRPO)": "loss", "in the reward (k1, PPO-RLHF)": "reward"}
#: Each control's description and its choices (label to key) or its range (whole numbers where
#: the bounds are).
CONTROLS = {
    "objective": ("objective", OBJECTIVES),
    "mu": ("μ (updates)", (1, MAX_MU)),
    "eps_low": ("ε_low", (0.0, 1.0)),
    "eps_high": ("ε_high", (0.0, 1.0)),
    "beta": ("β (KL weight)", (0.0, 0.5)),
    "kl_place": ("KL to the reference", KL_PLACES),
    "group_size": ("group size G", (2, MAX_GROUP)),
}
#: The objectives whose advantages skip the group's std: Dr. GRPO's, as tiny_rlhf trains it
#: (its controls mix objectives and advantages, so they do not decide it).
UNSCALED = {tiny_rlhf.METHODS["dr_grpo"].objective}
PADDING = "#E6E6E6"
#: A push down, none, up: notebook 3's colours, light enough that every token's text is dark.
PUSH_COLORS = LinearSegmentedColormap.from_list(
    "push", [COLORS["push_down"], "#FFFFFF", COLORS["push_up"]]
).with_extremes(bad=PADDING)
GLYPH_COLOR = "#222222"
FRAME = {"facecolor": "none", "edgecolor": COLORS["zero_grad"], "linewidth": 1.8}


class Setting(NamedTuple):
    """What the heat map shows: every control's value."""

    objective: str = "grpo"
    mu: int = 3
    eps_low: float = 0.2
    eps_high: float = 0.2
    beta: float = 0.0
    kl_place: str = "loss"
    group_size: int = 4


def band_of(objective: str) -> dict[str, float]:
    """The objective's default band as slider values (its entry in ``llm_clip.SPECS``); ``{}``
    for an objective without one (SAPO)."""
    band = llm_clip.SPECS[objective].default_band
    return {} if band is None else dict(zip(("eps_low", "eps_high"), band, strict=True))


def advantages(batch: ResponseBatch, s: Setting) -> np.ndarray:
    """GRPO's group advantages (Dr. GRPO's without the std) of the rewards, less ``beta`` times
    each answer's k1 sum when the KL is in the reward (verl's ``compute_rewards``)."""
    rewards = batch.rewards
    if s.kl_place == "reward":
        rewards = rewards - s.beta * np.where(batch.mask, batch.logp_old - batch.logp_ref, 0).sum(1)
    scaled = s.objective not in UNSCALED
    return llm_clip.group_advantages(rewards, s.group_size, scale_by_std=scaled)


def breakdown(s: Setting) -> llm_clip.TokenBreakdown:
    """Every token's ratio, clip decision, weight and gradient at ``s``, from llm_clip
    (:class:`~ppo_viz.app.InputError` for a setting llm_clip refuses)."""
    spec = llm_clip.SPECS.get(s.objective)  # an unknown objective: llm_clip's message below
    band = {"eps_low": s.eps_low, "eps_high": s.eps_high} if spec is None or spec.band else {}
    kl = {"logp_ref": None, "kl_coef": 0.0}  # the KL in the reward: in the advantages
    try:
        b = response_batch(s.group_size)
        if s.kl_place == "loss":
            kl = {"logp_ref": b.logp_ref, "kl_coef": s.beta}
        args = (b.logp_new[s.mu - 1], b.logp_old, advantages(b, s), b.mask)
        return llm_clip.token_breakdown(*args, objective=s.objective, max_len=MAX_LEN, **band, **kl)
    except (TypeError, ValueError) as error:
        raise InputError(str(error)) from None


@cache
def push_scales() -> tuple[float, float]:
    """The largest push on a token and (with room) on an answer, over every objective (at its
    default band), update and group size without KL: one colour scale and one axis, so that a
    change of the group size compares."""
    pushes = [
        -breakdown(Setting(objective=o, mu=mu, group_size=g, **band_of(o))).grad
        for o in OBJECTIVES.values()
        for mu in range(1, MAX_MU + 1)
        for g in range(CONTROLS["group_size"][1][0], MAX_GROUP + 1)
    ]
    return max(np.abs(p).max() for p in pushes), 1.15 * max(np.abs(p.sum(1)).max() for p in pushes)


def _glyph(text: str) -> Path:
    """``text`` as a marker, centred as a digit is, all tokens at one scale (matplotlib scales
    a marker path to its largest coordinate: two invisible points at a digit's height)."""
    font = FontProperties(family="DejaVu Sans")
    (_, y0), (_, y1) = TextPath((0, 0), "8", prop=font).get_extents().get_points()
    path = TextPath((0, 0), text, prop=font)
    (x0, _), (x1, _) = path.get_extents().get_points()
    half = (y1 - y0) / 2
    vertices = np.vstack([path.vertices - [(x0 + x1) / 2, (y0 + y1) / 2], [[0, half], [0, -half]]])
    return Path(vertices, [*path.codes, Path.MOVETO, Path.MOVETO])


def _frames(cells: np.ndarray) -> np.ndarray:
    """A square inside each (row, column) cell, in data coordinates."""
    corners = np.array([[-0.4, -0.4], [0.4, -0.4], [0.4, 0.4], [-0.4, 0.4]])
    return cells[:, None, ::-1] + corners


def _bars(values: np.ndarray) -> np.ndarray:
    """Horizontal bars from 0 to each value, one per row."""
    rows = np.arange(len(values))
    return np.stack([np.stack([0 * values, rows], 1), np.stack([values, rows], 1)], 1)


class TokenPushExplorer(LiveFigure):
    """The heat map under controls for the objective, mu, the band, beta and the group size."""

    description = "Each token's push under an LLM trainer's objective"

    def __init__(self, setting: Setting = Setting()) -> None:  # noqa: B008 (immutable)
        if not isinstance(setting, Setting):
            raise TypeError(f"setting must be a Setting, got {type(setting).__name__}")
        controls: dict[str, widgets.Widget] = {}
        for name, value in setting._asdict().items():
            text, allowed = CONTROLS[name]
            if isinstance(allowed, dict):  # a dropdown: shows each label, holds its key
                checked_choice(name, value, tuple(allowed.values()))
                options = {"options": list(allowed.items()), "description": text}
                controls[name] = widgets.Dropdown(value=value, **options, **control_layout())
            else:
                whole = isinstance(allowed[0], int)
                checked_number(name, value, allowed, whole=whole)
                controls[name] = slider(text, value, allowed, 1 if whole else 0.01, integer=whole)
        self._draw_axes()
        super().__init__(
            self.figure,
            self.update,
            controls,
            moving=[self.image, *self.glyphs, self.frames, self.bars_a, self.bars_sum],
            rows=[
                ["objective", "mu"],
                ["eps_low", "eps_high"],
                ["beta", "kl_place"],
                ["group_size"],
            ],
        )
        self.controls["objective"].observe(self._default_band, names="value")
        self._default_band({"new": setting.objective}, keep=True)

    def _default_band(self, change: dict, keep: bool = False) -> None:
        """A new objective brings its own band to the sliders (the map is drawn once, with it),
        unless ``keep``; an objective without a band (SAPO) greys them out: they would do
        nothing."""
        if change["new"] not in llm_clip.SPECS:  # None, set from code: the refresh refuses it
            return
        for name, value in () if keep else band_of(change["new"]).items():
            self.controls[name].value = value
        for name in ("eps_low", "eps_high"):
            self.controls[name].disabled = llm_clip.SPECS[change["new"]].band is None

    def _draw_axes(self) -> None:
        with figure_style():
            self.figure = Figure(figsize=figure_size((9.0, 4.3), (9.6, 3.9)), layout="constrained")
            self.ax, self.ax_a, self.ax_sum, cax = self.figure.subplots(
                1, 4, width_ratios=(6.0, 1.3, 1.3, 0.18)
            )
            scale, reach = push_scales()
            self.image = self.ax.imshow(
                np.zeros((1, MAX_LEN)), cmap=PUSH_COLORS, aspect="auto", interpolation="nearest"
            )
            self.image.set_norm(Normalize(-scale, scale))
            self.glyphs = [
                self.ax.scatter([], [], marker=_glyph(t), lw=0, color=GLYPH_COLOR) for t in VOCAB
            ]
            self.frames = self.ax.add_collection(PolyCollection([], **FRAME, zorder=3))
            self.bars_a = self.ax_a.add_collection(LineCollection([], color=COLORS["guide"]))
            self.bars_sum = self.ax_sum.add_collection(LineCollection([], color=COLORS["clipped"]))
            colorbar = self.figure.colorbar(self.image, cax=cax)
            colorbar.set_label("push: −∂loss / ∂log π_new(token)", fontsize="small")
            self.ax.set_xlabel("token position")
            self.ax.set_xticks(range(MAX_LEN), [str(t + 1) for t in range(MAX_LEN)])
            self.ax.grid(False)
            self.ax_a.set_title("advantage", fontsize="medium")
            self.ax_sum.set_title("Σ push", fontsize="medium")
            tick = float(f"{0.6 * reach:.1g}")
            self.ax_sum.set(xlim=(-reach, reach), xticks=(-tick, tick))
            self.ax_a.set(xlim=(-2.6, 2.6), xticks=(-2, 0, 2))
            for ax in (self.ax_a, self.ax_sum):
                ax.axvline(0.0, color=COLORS["zero_line"], lw=0.8)
                ax.tick_params(labelleft=False, left=False)
                ax.grid(axis="y", visible=False)
            off = Patch(**FRAME, label="switched off (clipped)")
            detached = ", ".join(s.label for s in llm_clip.SPECS.values() if s.detached_weight)
            capped = Patch(**FRAME, ls="--", label=f"weight capped, gradient kept ({detached})")
            padding = Patch(color=PADDING, label="padding")
            legend_below(self.figure, handles=[off, capped, padding], fontsize="small")
        self.group_size = 0

    def _row_height(self) -> float:
        """A row of the map, in points."""
        rows = len(response_batch(self.group_size).rewards)
        return self.ax.get_position().height * self.figure.get_figheight() * 72 / rows

    def setting(self) -> Setting:
        """The controls' values as a :class:`Setting`."""
        return Setting(**self.values())

    def _new_group_size(self, group_size: int) -> None:
        """Rows, labels and group lines of ``group_size`` answers a prompt: static artists, so
        the three panels are drawn again (the colour bar and the legend stay as they are)."""
        batch, self.group_size = response_batch(group_size), group_size
        rows = len(batch.rewards)
        for ax in (self.ax, self.ax_a, self.ax_sum):
            for line in list(ax.lines)[0 if ax is self.ax else 1 :]:  # side panels keep their 0
                line.remove()
            for g in range(group_size, rows, group_size):
                ax.axhline(g - 0.5, color=COLORS["zero_line"], lw=1.2)
            ax.set_ylim(rows - 0.5, -0.5)
        row_pt = self._row_height()
        labels = [f"{batch.prompt_text(i)}  R={signed(batch.rewards[i])}" for i in range(rows)]
        with figure_style():  # "small" is the style's, as in the rest of the figure
            self.ax.set_yticks(range(rows), labels, fontsize="small")
            if row_pt < 1.3 * self.ax.get_yticklabels()[0].get_size():  # too many rows to label
                firsts = range(0, rows, group_size)
                self.ax.set_yticks(firsts, map(batch.prompt_text, firsts), fontsize="small")
        self.image.set_extent((-0.5, MAX_LEN - 0.5, rows - 0.5, -0.5))
        for v, glyph in enumerate(self.glyphs):
            glyph.set_offsets(np.argwhere((batch.tokens == v) & batch.mask)[:, ::-1])
            glyph.set_sizes([min(56.0, (0.55 * row_pt) ** 2)])
        self.redraw_axes(self.ax, self.ax_a, self.ax_sum)

    def update(self, **_values: object) -> Markup:
        """Draw the pushes of the controls' setting; return the readout."""
        s = self.setting()
        b = breakdown(s)  # first: a refused setting changes nothing
        if s.group_size != self.group_size:
            self._new_group_size(s.group_size)
        batch = response_batch(s.group_size)
        push = -b.grad
        self.image.set_data(np.ma.masked_array(push, ~b.mask))
        self.frames.set_verts(_frames(np.argwhere(b.is_clipped)))
        self.frames.set_linestyle("--" if llm_clip.SPECS[s.objective].detached_weight else "-")
        for bars, values in ((self.bars_a, advantages(batch, s)), (self.bars_sum, push.sum(1))):
            bars.set_segments(_bars(values))
            bars.set_linewidth(0.6 * self._row_height())
        self.bars_sum.set_colors(np.where(push.sum(1) < 0, COLORS["push_down"], COLORS["push_up"]))
        return readout(s, b)


def readout(s: Setting, b: llm_clip.TokenBreakdown) -> Markup:
    """The update, the band, what the clip switched off and the loss, in one line, worded by
    the objective's registry entry (its ``band`` and ``clip_kind``)."""
    spec, off, tokens = llm_clip.SPECS[s.objective], b.is_clipped.sum(), b.mask.sum()
    switched = {
        "detached": f"{off} of {tokens} tokens' weights capped; none switched off",
        "sequence": f"{b.is_clipped.any(axis=1).sum()} of {len(b.mask)} answers switched off",
        "soft": "none switched off",
    }.get(spec.clip_kind, f"{off} of {tokens} tokens switched off")
    band = {
        "ratio": f"band [{rounded(1 - s.eps_low, 3)}, {rounded(1 + s.eps_high, 3)}]",
        "log-ratio": f"band on log r [{rounded(-s.eps_low, 3)}, {rounded(s.eps_high, 3)}]",
        None: "no band but a soft gate",
    }[spec.band]
    steps = (
        f"the last update, after {count(s.mu - 1, 'step')}"
        if s.mu > 1
        else "one update: every ratio is exactly 1"
    )
    details = f" at μ = {s.mu} ({steps}) · {band} · {switched} · loss {rounded(b.loss, 4)}"
    return tag("div", tag("b", spec.label), details, classes="ppo")
