"""Notebook 7's two smaller apps: length bias under each aggregation, and the clip fractions.

* :class:`LengthBiasExplorer`: a short and a long answer with the same advantage and ratio 1;
  under each aggregation of :mod:`llm_clip`, a stack of blocks per answer, one block per token,
  as tall as that token's push (so the stack is the answer's total push).
* :class:`ClipFractionExplorer`: every token of the batch by its ratio and advantage at update
  ``mu``, coloured by what the clip does with it, and the clip fraction as CleanRL, verl and
  TRL log it.  At ``mu = 1`` every ratio is exactly 1 and every fraction is 0.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import llm_clip
from ppo_viz.app import InputError, LiveFigure
from ppo_viz.controls import checked_number, slider
from ppo_viz.html import Markup, tag
from ppo_viz.llm.batch import MAX_LEN, MAX_MU, WEIGHTS, response_batch
from ppo_viz.llm.tokens import Setting, breakdown
from ppo_viz.numbers import count, rounded
from ppo_viz.style import COLORS, figure_size, figure_style, legend_below


def two_answers(short: int, long: int, advantage: float) -> dict[str, np.ndarray]:
    """Each token's push (2 x MAX_LEN, 0 on padding) under each aggregation, for a short and a
    long answer with the same advantage and ratio 1: ``-llm_clip.policy_loss_grad``."""
    try:
        for name, value in (("short", short), ("long", long)):
            checked_number(name, value, (1, MAX_LEN), whole=True)
        mask, logp = np.arange(MAX_LEN) < np.array([[short], [long]]), np.zeros((2, MAX_LEN))
        batch = (logp, logp, [advantage] * 2, mask)
        options = {"objective": "ppo", "max_len": MAX_LEN}
        return {
            name: -llm_clip.policy_loss_grad(*batch, aggregation=name, **options)
            for name in WEIGHTS
        }
    except (TypeError, ValueError) as error:  # a length, or llm_clip refuses the advantage
        raise InputError(str(error)) from None


class LengthBiasExplorer(LiveFigure):
    """A short and a long answer under the three aggregations; sliders for their lengths and
    their (shared) advantage."""

    description = "Per-token and per-answer push under three aggregations"

    def __init__(self, short: int = 2, long: int = 8, advantage: float = 1.0) -> None:
        two_answers(short, long, advantage)  # refuses a bad start by name
        self.blocks, self.labels, self.shown = {}, {}, {}
        with figure_style():
            figure = Figure(figsize=figure_size((9.0, 3.6), (9.6, 3.6)), layout="constrained")
            axes = figure.subplots(1, 3, sharey=True)
            for ax, (name, weight) in zip(axes, WEIGHTS.items(), strict=True):
                self.blocks[name] = ax.add_collection(PolyCollection([], edgecolor="white", lw=1))
                self.labels[name] = [
                    ax.text(x, 0, "", ha="center", fontsize="small") for x in (0, 1)
                ]
                ax.axhline(0.0, color=COLORS["zero_line"], lw=0.8)
                ax.set(xlim=(-0.6, 1.6), ylim=(-1.25, 1.25), title=f"{name}\nw = {weight}")
                ax.set_xticks((0, 1), ("short answer", "long answer"))
                ax.grid(axis="x", visible=False)
            axes[0].set_ylabel("push on the answer's tokens\n(one block per token)")
        controls = {
            "short": slider("short answer: tokens", short, (1, MAX_LEN), 1, integer=True),
            "long": slider("long answer: tokens", long, (1, MAX_LEN), 1, integer=True),
            "advantage": slider("A (both answers)", advantage, (-1.0, 1.0), 0.5),
        }
        moving = [*self.blocks.values(), *(t for pair in self.labels.values() for t in pair)]
        rows = [["short", "long"], ["advantage"]]
        super().__init__(figure, self.update, controls, moving=moving, rows=rows)

    def update(self, short: int, long: int, advantage: float) -> Markup:
        """Stack each answer's blocks under each aggregation; compare per-token pushes."""
        self.shown = two_answers(short, long, advantage)
        lengths = (short, long)
        for name, push in self.shown.items():
            stacks = []
            for row, label in enumerate(self.labels[name]):
                tops = np.cumsum(push[row, : lengths[row]])
                x0, x1 = row - 0.3, row + 0.3  # the stack's sides
                ends = zip(tops - push[row, : lengths[row]], tops, strict=True)
                stacks += [[(x0, low), (x1, low), (x1, top), (x0, top)] for low, top in ends]
                total = tops[-1]
                text = f"{lengths[row]} × {rounded(push[row, 0], 3)}\n= {rounded(total, 3)}"
                place = "bottom" if total >= 0 else "top"
                label.set(text=text, y=total + np.copysign(0.06, total), va=place)
            self.blocks[name].set_verts(stacks)
            colour = COLORS["push_down"] if advantage < 0 else COLORS["push_up"]
            self.blocks[name].set_facecolor(colour)
        grpo = self.shown["seq-mean-token-mean"][:, 0]
        text = "Same lengths or A = 0: every aggregation treats the two alike."
        if grpo[1] != 0 and short != long:
            text = (
                f"Per token, seq-mean-token-mean pushes the short answer "
                f"{rounded(grpo[0] / grpo[1], 3)} times as hard as the long one; token-mean and "
                "the constant push every token alike, so the long answer moves "
                f"{rounded(long / short, 3)} times as much in total."
            )
        return tag("div", text, classes="ppo")


#: What the clip does with a token: its label and colour in the scatter.
TOKEN_KINDS = {
    "clipped": ("switched off (clipped): counted by all three", COLORS["zero_grad"]),
    "outside": ("outside the band, not switched off: CleanRL counts it", COLORS["clip_only"]),
    "inside": ("inside the band", COLORS["guide"]),
}
FRACTIONS = ("CleanRL\nclipfrac", "verl\npg_clipfrac", "TRL\nregion_mean")
#: The band's look, on the scatter and in its legend.
BAND = {"color": COLORS["band"], "alpha": 0.25}


class ClipFractionExplorer(LiveFigure):
    """The batch's tokens by ratio and advantage, and its three clip fractions; sliders for
    the update ``mu`` and ``eps``."""

    description = "The batch's token ratios and three clip fractions"

    def __init__(self, mu: int = 1, eps: float = 0.2) -> None:
        checked_number("mu", mu, (1, MAX_MU), whole=True)
        checked_number("eps", eps, (0.0, 0.5))
        self.batch = b = response_batch(4)
        spread = (np.arange(MAX_LEN) - (MAX_LEN - 1) / 2) * 0.025  # an answer's tokens apart
        self.height = (b.advantages()[:, None] + spread)[b.mask]
        ratios = [breakdown(Setting(mu=m)).ratio[b.mask] for m in range(1, MAX_MU + 1)]
        reach = 0.08 + max(np.abs(r - 1).max() for r in ratios)
        with figure_style():
            figure = Figure(figsize=figure_size((9.0, 4.0), (9.6, 4.0)), layout="constrained")
            left, right = figure.subplots(1, 2, width_ratios=(1.9, 1.2))
            self.band = left.axvspan(0.8, 1.2, lw=0, **BAND)
            self.points = {
                kind: left.plot([], [], "o", ms=4.5, color=colour, label=label)[0]
                for kind, (label, colour) in TOKEN_KINDS.items()
            }
            left.axvline(1.0, color=COLORS["start"], lw=0.8, ls=":")
            left.set(xlim=(1 - reach, 1 + reach), ylim=(-1.9, 1.9), xlabel="token ratio r")
            left.set_ylabel("advantage A of its answer\n(its tokens drawn a little apart)")
            band = Line2D([], [], lw=8, label="band 1 ± ε", **BAND)
            legend_below(figure, 2, handles=[*self.points.values(), band], fontsize="small")
            self.bars = right.bar(FRACTIONS, [0, 0, 0], color=COLORS["zero_grad"]).patches
            self.bars[0].set_color(COLORS["clip_only"])
            self.bar_texts = [right.text(i, 0, "", ha="center", va="bottom") for i in range(3)]
            right.set(ylim=(0, 1.05), title="clip fraction as logged")
            right.set_ylabel("share of the batch's tokens")
            right.tick_params(axis="x", labelsize="small")
        self.shown: dict[str, float] = {}
        controls = {
            "mu": slider("μ (updates)", mu, (1, MAX_MU), 1, integer=True),
            "eps": slider("ε", eps, (0.0, 0.5), 0.01),
        }
        moving = [self.band, *self.points.values(), *self.bars, *self.bar_texts]
        super().__init__(figure, self.update, controls, moving=moving, rows=[["mu", "eps"]])

    def update(self, mu: int, eps: float) -> Markup:
        """Place the tokens and the band for ``mu`` and ``eps``; bars for the fractions."""
        parts, b = breakdown(Setting(mu=mu, eps_low=eps, eps_high=eps)), self.batch
        args = (b.logp_new[mu - 1], b.logp_old, b.advantages(), b.mask)
        as_grpo = {"objective": "grpo", "eps_low": eps}
        cleanrl = llm_clip.clip_fraction_cleanrl(*args[:2], b.mask, eps=eps)["losses/clipfrac"]
        verl = llm_clip.clip_fraction_verl(*args, **as_grpo)["actor/pg_clipfrac"]
        trl = llm_clip.clip_ratio_trl(*args, **as_grpo)["clip_ratio/region_mean"]
        self.shown = dict(zip(FRACTIONS, (cleanrl, verl, trl), strict=True))
        ratio, clipped = parts.ratio[b.mask], parts.is_clipped[b.mask]
        outside = ~clipped & (np.abs(ratio - 1) > eps)
        for kind, chosen in zip(TOKEN_KINDS, (clipped, outside, ~clipped & ~outside), strict=True):
            self.points[kind].set_data(ratio[chosen], self.height[chosen])
        self.band.set(x=1 - eps, width=2 * eps)
        for bar, label, value in zip(self.bars, self.bar_texts, self.shown.values(), strict=True):
            bar.set_height(value)
            label.set(y=value, text=rounded(value, 3))
        if mu == 1:
            text = (
                f"μ = 1: the policy has not changed since it sampled the batch, so every ratio "
                f"is exactly 1 (largest |r − 1| = {rounded(np.abs(ratio - 1).max())}) and "
                "every clip fraction is 0."
            )
        else:
            text = (
                f"μ = {mu}, after {count(mu - 1, 'step')} on this batch: "
                f"{clipped.sum()} of {ratio.size} tokens switched off, {outside.sum()} more "
                "outside the band but not switched off."
            )
        return tag("div", text, classes="ppo")
