"""Notebook 7's heat map: which tokens each objective pushes, and how hard.

:class:`TokenPushExplorer` shows every token of :func:`.response_batch` as a cell coloured by its
*push*, ``-d loss / d logp_new`` from :func:`llm_clip.token_breakdown` (blue raises the token's
log-probability, vermillion lowers it), with a purple frame where the clip switches the token's
gradient off (dashed: CISPO's weight capped, its gradient kept).  Beside it, each answer's
advantage and the sum of its tokens' pushes.  Controls: the objective, the update ``mu``, the
band, ``beta`` with the KL in the loss (k3, GRPO) or in the reward (k1, PPO for RLHF), and the
group size.
"""

from __future__ import annotations

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
from ppo_viz.app import InputError, LiveFigure, checked_number, control_layout, slider
from ppo_viz.html import Markup, tag
from ppo_viz.llm.batch import MAX_GROUP, MAX_LEN, MAX_MU, VOCAB, ResponseBatch, response_batch
from ppo_viz.numbers import rounded, signed
from ppo_viz.style import COLORS, PALETTE, figure_style, presenting

#: The objectives as the control lists them.
OBJECTIVES = {
    "PPO": "ppo",
    "GRPO": "grpo",
    "Dr. GRPO": "dr_grpo",
    "DAPO": "dapo",
    "GSPO": "gspo",
    "CISPO": "cispo",
}
#: Where the KL to the reference goes: k3 per token in the loss (GRPO), or each answer's sum
#: of k1 = log pi_old - log pi_ref over its tokens taken off its reward (PPO for RLHF).
KL_PLACES = {"in the loss (k3, GRPO)": "loss", "in the reward (k1, PPO-RLHF)": "reward"}
PADDING = "#E6E6E6"
PUSH_COLORS = LinearSegmentedColormap.from_list(
    "push", [PALETTE["vermillion"], "#FFFFFF", PALETTE["blue"]]
).with_extremes(bad=PADDING)
FRAME = {"facecolors": "none", "edgecolors": COLORS["zero_grad"], "linewidths": 1.8}
LEGEND_FRAME = {"facecolor": "none", "edgecolor": COLORS["zero_grad"], "linewidth": 1.8}


class Setting(NamedTuple):
    """What the heat map shows: every control's value."""

    objective: str = "grpo"
    mu: int = 3
    eps_low: float = 0.2
    eps_high: float = 0.2
    beta: float = 0.0
    kl_place: str = "loss"
    group_size: int = 4


def advantages(batch: ResponseBatch, s: Setting) -> np.ndarray:
    """The advantages the objective gets: GRPO's group advantages (Dr. GRPO's without the
    std), of the rewards minus ``beta`` times each answer's k1 sum when the KL is in the reward
    (verl's ``compute_rewards``: ``token_level_scores - kl * kl_ratio``, ``kl = old - ref``)."""
    rewards = batch.rewards
    if s.kl_place == "reward" and s.beta:
        k1 = np.where(batch.mask, batch.logp_old - batch.logp_ref, 0.0).sum(axis=1)
        rewards = rewards - s.beta * k1
    return llm_clip.group_advantages(rewards, s.group_size, scale_by_std=s.objective != "dr_grpo")


def breakdown(s: Setting) -> llm_clip.TokenBreakdown:
    """Every token's ratio, clip decision, weight and gradient at setting ``s``, from llm_clip
    (:class:`~ppo_viz.app.InputError` for a setting llm_clip refuses)."""
    in_loss = s.kl_place == "loss"
    try:
        batch = response_batch(s.group_size)
        return llm_clip.token_breakdown(
            batch.logp_new[s.mu - 1],
            batch.logp_old,
            advantages(batch, s),
            batch.mask,
            objective=s.objective,
            eps_low=s.eps_low,
            eps_high=s.eps_high,
            max_len=MAX_LEN,
            logp_ref=batch.logp_ref if in_loss else None,
            kl_coef=s.beta if in_loss else 0.0,
        )
    except (TypeError, ValueError) as error:
        raise InputError(str(error)) from None


def _glyph(text: str) -> Path:
    """``text`` as a marker path, centred as a digit is, at one scale for every token
    (matplotlib scales a marker path to its largest coordinate: two invisible MOVETO points
    at a digit's full height set the same one for all)."""
    font = FontProperties(family="DejaVu Sans")
    (_, y0), (_, y1) = TextPath((0, 0), "8", prop=font).get_extents().get_points()
    path = TextPath((0, 0), text, prop=font)
    (x0, _), (x1, _) = path.get_extents().get_points()
    half = (y1 - y0) / 2
    vertices = np.vstack([path.vertices - [(x0 + x1) / 2, (y0 + y1) / 2], [[0, half], [0, -half]]])
    return Path(vertices, [*path.codes, Path.MOVETO, Path.MOVETO])


def _cells(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """A square frame inside each cell (row, column), in data coordinates."""
    corners = np.array([[-0.4, -0.4], [0.4, -0.4], [0.4, 0.4], [-0.4, 0.4]])
    return np.stack([columns, rows], axis=-1)[:, None, :] + corners


class TokenPushFigure:
    """The heat map, the advantages and each answer's total push; :meth:`update` redraws."""

    def __init__(self) -> None:
        size = (9.6, 3.9) if presenting() else (9.0, 4.3)
        with figure_style():
            self.figure = Figure(figsize=size, layout="constrained")
            self.ax, self.ax_a, self.ax_sum, cax = self.figure.subplots(
                1, 4, width_ratios=(6.0, 1.3, 1.3, 0.18)
            )
            self.image = self.ax.imshow(
                np.zeros((1, MAX_LEN)),
                cmap=PUSH_COLORS,
                aspect="auto",
                norm=Normalize(-1, 1),
                interpolation="nearest",
            )
            self.glyphs = [
                self.ax.scatter([], [], marker=_glyph(t), s=56, linewidths=0) for t in VOCAB
            ]
            self.frames = PolyCollection([], **FRAME, zorder=3)
            self.capped = PolyCollection([], **FRAME, linestyles="--", zorder=3)
            self.bars_a = LineCollection([], color=COLORS["guide"])
            self.bars_sum = LineCollection([], color=COLORS["clipped"])
            for ax, artist in (
                (self.ax, self.frames),
                (self.ax, self.capped),
                (self.ax_a, self.bars_a),
                (self.ax_sum, self.bars_sum),
            ):
                ax.add_collection(artist)
            self.colorbar = self.figure.colorbar(self.image, cax=cax)
            self.colorbar.set_label("push: −∂loss / ∂log π_new(token)", fontsize="small")
            self.ax.set_xlabel("token position")
            self.ax.set_xticks(range(MAX_LEN), [str(t + 1) for t in range(MAX_LEN)])
            self.ax.grid(False)
            self.ax_a.set_title("advantage A", fontsize="medium")
            self.ax_sum.set_title("Σ push of\nthe answer", fontsize="medium")
            for ax in (self.ax_a, self.ax_sum):
                ax.axvline(0.0, color=COLORS["zero_line"], lw=0.8)
                ax.tick_params(labelleft=False, left=False)
                ax.grid(axis="y", visible=False)
            self.figure.legend(
                handles=[
                    Patch(**LEGEND_FRAME, label="switched off (clipped)"),
                    Patch(**LEGEND_FRAME, ls="--", label="weight capped, gradient kept (CISPO)"),
                    Patch(color=PADDING, label="padding"),
                ],
                loc="outside lower center",
                ncols=3,
                frameon=False,
                fontsize="small",
            )
        self.group_size = 0
        self.shown: llm_clip.TokenBreakdown | None = None

    @property
    def moving(self) -> list:
        return [self.image, *self.glyphs, self.frames, self.capped, self.bars_a, self.bars_sum]

    def _new_group_size(self, group_size: int) -> None:
        """Rows, labels, separators and the colour scale for ``group_size`` answers a prompt
        (the static artists: the axes' limits change, so the figure is drawn anew)."""
        batch = response_batch(group_size)
        rows = len(batch.rewards)
        for ax in (self.ax, self.ax_a, self.ax_sum):
            for line in list(ax.lines)[1 if ax is not self.ax else 0 :]:
                line.remove()
            for g in range(1, rows // group_size):
                ax.axhline(g * group_size - 0.5, color=COLORS["zero_line"], lw=1.2)
            ax.set_ylim(rows - 0.5, -0.5)
        self.ax.set_yticks(
            range(rows),
            [f"{batch.prompt_text(i)}  R={signed(batch.rewards[i])}" for i in range(rows)],
            fontsize="small",
        )
        self.image.set_extent((-0.5, MAX_LEN - 0.5, rows - 0.5, -0.5))
        for v, glyph in enumerate(self.glyphs):
            at = np.argwhere((batch.tokens == v) & batch.mask)
            glyph.set_offsets(at[:, ::-1])
        pushes = [
            -breakdown(Setting(objective=o, mu=mu, group_size=group_size)).grad
            for o in OBJECTIVES.values()
            for mu in range(1, MAX_MU + 1)
        ]
        scale = max(float(np.abs(p).max()) for p in pushes)
        self.image.set_norm(Normalize(-scale, scale))
        reach = max(float(np.abs(p.sum(axis=1)).max()) for p in pushes) * 1.15
        tick = float(f"{0.6 * reach:.1g}")
        self.ax_sum.set(xlim=(-reach, reach), xticks=(-tick, tick))
        self.ax_a.set(xlim=(-2.6, 2.6), xticks=(-2, 0, 2))
        self.group_size = group_size

    def update(self, setting: Setting) -> Markup:
        """Draw the pushes of ``setting``; return the readout."""
        b = breakdown(setting)  # first: a refused setting changes nothing
        if setting.group_size != self.group_size:
            self._new_group_size(setting.group_size)
        batch = response_batch(setting.group_size)
        push = -b.grad
        self.image.set_data(np.ma.masked_array(push, ~b.mask))
        light = np.abs(push) < 0.55 * self.image.norm.vmax
        for v, glyph in enumerate(self.glyphs):
            at = (batch.tokens == v) & batch.mask
            glyph.set_facecolors(np.where(light[at], "#222222", "#FFFFFF"))
        cispo = setting.objective == "cispo"
        clipped = np.argwhere(b.is_clipped)
        self.frames.set_verts([] if cispo else _cells(*clipped.T))
        self.capped.set_verts(_cells(*clipped.T) if cispo else [])
        rows = np.arange(len(batch.rewards))
        height = self.ax.get_position().height * self.figure.get_figheight() * 72 / len(rows)
        a = advantages(batch, setting)
        self.bars_a.set_segments(np.stack([np.stack([0 * a, rows], 1), np.stack([a, rows], 1)], 1))
        total = push.sum(axis=1)
        self.bars_sum.set_segments(
            np.stack([np.stack([0 * total, rows], 1), np.stack([total, rows], 1)], 1)
        )
        for bars in (self.bars_a, self.bars_sum):
            bars.set_linewidth(0.6 * height)
        self.shown = b
        return readout(setting, b, batch)


def readout(s: Setting, b: llm_clip.TokenBreakdown, batch: ResponseBatch) -> Markup:
    """The band, what the clip switched off, the weights and the loss, in one line."""
    name = next(label for label, key in OBJECTIVES.items() if key == s.objective)
    band = f"[{rounded(1 - s.eps_low, 3)}, {rounded(1 + s.eps_high, 3)}]"
    tokens = int(b.mask.sum())
    if s.objective == "cispo":
        off = f"{int(b.is_clipped.sum())} of {tokens} tokens have their weight capped; none is off"
    elif s.objective == "gspo":
        answers = int(b.is_clipped.any(axis=1).sum())
        off = f"{answers} of {len(batch.rewards)} answers switched off (one ratio per answer)"
    else:
        off = f"{int(b.is_clipped.sum())} of {tokens} tokens switched off"
    first = "the ratios are exactly 1 (no update yet)" if s.mu == 1 else f"after {s.mu - 1} "
    first += "" if s.mu == 1 else ("step" if s.mu == 2 else "steps")
    return tag(
        "div",
        tag("b", name),
        f" at update μ = {s.mu} ({first}) · band {band} · {off} · loss {rounded(b.loss, 4)}",
        classes="ppo",
    )


#: Each slider's description and range (integer sliders step 1, the others 0.01).
SLIDERS = {
    "mu": ("update μ", (1, MAX_MU)),
    "eps_low": ("ε_low", (0.0, 0.5)),
    "eps_high": ("ε_high", (0.0, 1.0)),
    "beta": ("β (KL weight)", (0.0, 0.5)),
    "group_size": ("group size G", (2, MAX_GROUP)),
}


class TokenPushExplorer(LiveFigure):
    """The heat map under controls for the objective, mu, the band, beta and the group size."""

    def __init__(self, setting: Setting = Setting()) -> None:  # noqa: B008 (immutable)
        if not isinstance(setting, Setting):
            raise TypeError(f"setting must be a Setting, got {type(setting).__name__}")
        choices = {"objective": OBJECTIVES, "kl_place": KL_PLACES}
        labels = {
            name: {key: label for label, key in options.items()}
            for name, options in choices.items()
        }
        controls: dict[str, widgets.Widget] = {}
        for name in Setting._fields:
            value = getattr(setting, name)
            if name in choices:
                if value not in labels[name]:
                    raise ValueError(f"{name} must be one of {tuple(labels[name])}, got {value!r}")
                controls[name] = widgets.Dropdown(
                    options=list(choices[name]),
                    value=labels[name][value],
                    description=name.replace("_", " ").replace("kl place", "KL to the reference"),
                    **control_layout(),
                )
                continue
            text, bounds = SLIDERS[name]
            whole = name in ("mu", "group_size")
            checked_number(name, value, bounds, whole=whole)
            controls[name] = slider(text, value, bounds, 1 if whole else 0.01, integer=whole)
        self.plot = TokenPushFigure()
        super().__init__(
            self.plot.figure,
            self.update,
            controls,
            moving=self.plot.moving,
            rows=[
                ["objective", "mu"],
                ["eps_low", "eps_high"],
                ["beta", "kl_place"],
                ["group_size"],
            ],
            description="Each token's push under an LLM trainer's objective",
        )

    def setting(self) -> Setting:
        """The controls' values as a :class:`Setting`."""
        values = self.values()
        values["objective"] = OBJECTIVES[values["objective"]]
        values["kl_place"] = KL_PLACES[values["kl_place"]]
        return Setting(**values)

    def update(self, **_values: object) -> Markup:
        return self.plot.update(self.setting())
