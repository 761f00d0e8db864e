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
from matplotlib.patches import Rectangle

import llm_clip
from ppo_viz.app import InputError, LiveFigure, slider
from ppo_viz.html import Markup, tag
from ppo_viz.llm.batch import MAX_LEN, MAX_MU, response_batch
from ppo_viz.numbers import rounded
from ppo_viz.style import COLORS, PALETTE, figure_style, presenting

#: The three aggregations, with the objectives that use each by default.
AGGREGATIONS = {
    "token-mean": "token-mean\n(PPO, DAPO, CISPO)",
    "seq-mean-token-mean": "seq-mean-token-mean\n(GRPO, GSPO)",
    "seq-mean-token-sum-norm": f"constant B·L, L = {MAX_LEN}\n(Dr. GRPO)",
}


def two_answers(short: int, long: int, advantage: float) -> dict[str, np.ndarray]:
    """Each token's push (B = 2, T = MAX_LEN; 0 on padding) under each aggregation, for a
    short and a long answer with the same advantage and ratio 1 (llm_clip's gradients)."""
    lengths = [checked_length("short", short), checked_length("long", long)]
    mask = np.arange(MAX_LEN) < np.array(lengths)[:, None]
    logp = np.zeros((2, MAX_LEN))
    return {
        name: -llm_clip.policy_loss_grad(
            logp,
            logp,
            [advantage, advantage],
            mask,
            objective="ppo",
            aggregation=name,
            max_len=MAX_LEN,
        )
        for name in AGGREGATIONS
    }


def checked_length(name: str, value: object) -> int:
    if not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_LEN:
        raise InputError(
            f"{name} must be a whole number of tokens from 1 to {MAX_LEN}, got {value!r}"
        )
    return int(value)


def _stack(push: np.ndarray, x: float) -> list[np.ndarray]:
    """One block per token at ``x``, each as tall as its push, stacked from 0."""
    tops = np.cumsum(push)
    bottoms = tops - push
    return [
        np.array([[x - 0.3, lo], [x + 0.3, lo], [x + 0.3, hi], [x - 0.3, hi]])
        for lo, hi in zip(bottoms, tops, strict=True)
    ]


class LengthBiasExplorer(LiveFigure):
    """A short and a long answer under the three aggregations; sliders for their lengths and
    their (shared) advantage."""

    def __init__(self, short: int = 2, long: int = 8, advantage: float = 1.0) -> None:
        two_answers(short, long, advantage)  # refuses bad arguments by name
        with figure_style():
            figure = Figure(
                figsize=(9.6, 3.6) if presenting() else (9.0, 3.6), layout="constrained"
            )
            axes = figure.subplots(1, 3, sharey=True)
        self.blocks, self.labels = {}, {}
        for ax, (name, title) in zip(axes, AGGREGATIONS.items(), strict=True):
            self.blocks[name] = PolyCollection(
                [], facecolor=COLORS["clipped"], edgecolor="white", linewidth=1.0
            )
            ax.add_collection(self.blocks[name])
            self.labels[name] = [ax.text(x, 0, "", ha="center", fontsize="small") for x in (0, 1)]
            ax.axhline(0.0, color=COLORS["zero_line"], lw=0.8)
            ax.set(xlim=(-0.6, 1.6), ylim=(-1.25, 1.25), title=title)
            ax.set_xticks((0, 1), ("short answer", "long answer"))
            ax.grid(axis="x", visible=False)
        axes[0].set_ylabel("push on the answer's tokens\n(one block per token)")
        self.shown: dict[str, np.ndarray] = {}
        controls = {
            "short": slider("short answer: tokens", short, (1, MAX_LEN), 1, integer=True),
            "long": slider("long answer: tokens", long, (1, MAX_LEN), 1, integer=True),
            "advantage": slider("A (both answers)", advantage, (-1.0, 1.0), 0.5),
        }
        moving = [*self.blocks.values(), *(t for pair in self.labels.values() for t in pair)]
        super().__init__(
            figure,
            self.update,
            controls,
            moving=moving,
            rows=[["short", "long"], ["advantage"]],
            description="Per-token and per-answer push under three aggregations",
        )

    def update(self, short: int, long: int, advantage: float) -> Markup:
        """Draw each aggregation's blocks; the readout compares per-token pushes."""
        try:
            self.shown = two_answers(short, long, advantage)
        except ValueError as error:  # llm_clip's refusal of an advantage, say
            raise InputError(str(error)) from None
        lengths = (short, long)
        colour = COLORS["clipped"] if advantage >= 0 else PALETTE["vermillion"]
        for name, push in self.shown.items():
            self.blocks[name].set_facecolor(colour)
            blocks = [b for row in range(2) for b in _stack(push[row, : lengths[row]], row)]
            self.blocks[name].set_verts(blocks)
            for row, label in enumerate(self.labels[name]):
                total, each = push[row].sum(), push[row, 0]
                label.set_text(f"{lengths[row]} × {rounded(each, 3)}\n= {rounded(total, 3)}")
                label.set_y(total + (0.06 if total >= 0 else -0.06))
                label.set_va("bottom" if total >= 0 else "top")
        return length_readout(self.shown, short, long)


def length_readout(pushes: dict[str, np.ndarray], short: int, long: int) -> Markup:
    """How much more each token of the short answer moves than each of the long one."""
    grpo = pushes["seq-mean-token-mean"][:, 0]
    if grpo[1] == 0 or short == long:
        return tag(
            "div", "Same lengths or A = 0: every aggregation treats the two alike.", classes="ppo"
        )
    return tag(
        "div",
        f"Per token, seq-mean-token-mean pushes the short answer {rounded(grpo[0] / grpo[1], 3)}"
        f" times as hard as the long one ({long}/{short}); token-mean and the constant push "
        f"every token alike, so the long answer moves {rounded(long / short, 3)} times as much "
        "in total.",
        classes="ppo",
    )


# -- the clip fractions --------------------------------------------------------------------------

#: What the clip does with a token, and its colour in the scatter.
TOKEN_KINDS = {
    "clipped": ("switched off (clipped): counted by all three", COLORS["zero_grad"]),
    "outside": ("outside the band, gradient kept: CleanRL counts it", COLORS["clip_only"]),
    "inside": ("inside the band", COLORS["guide"]),
}
FRACTIONS = ("CleanRL\nclipfrac", "verl\npg_clipfrac", "TRL clip_ratio/\nregion_mean")


def clip_fractions(mu: int, eps: float, group_size: int = 4) -> dict[str, float]:
    """The batch's clip fraction at update ``mu`` as each library logs it (GRPO's advantages,
    the band ``[1 - eps, 1 + eps]``), from llm_clip's three functions."""
    batch = response_batch(group_size)
    logp_new, a = batch.logp_new[mu - 1], batch.advantages()
    arguments = (logp_new, batch.logp_old, a, batch.mask)
    return {
        FRACTIONS[0]: llm_clip.clip_fraction_cleanrl(logp_new, batch.logp_old, batch.mask, eps=eps)[
            "losses/clipfrac"
        ],
        FRACTIONS[1]: llm_clip.clip_fraction_verl(*arguments, objective="grpo", eps_low=eps)[
            "actor/pg_clipfrac"
        ],
        FRACTIONS[2]: llm_clip.clip_ratio_trl(*arguments, objective="grpo", eps_low=eps)[
            "clip_ratio/region_mean"
        ],
    }


class ClipFractionExplorer(LiveFigure):
    """The batch's tokens by ratio and advantage, and its three clip fractions; sliders for
    the update ``mu`` and ``eps``."""

    def __init__(self, mu: int = 1, eps: float = 0.2) -> None:
        self.batch = response_batch(4)
        tokens = self.batch.mask
        a = np.broadcast_to(self.batch.advantages()[:, None], tokens.shape)
        spread = (np.arange(MAX_LEN) - (MAX_LEN - 1) / 2) * 0.025  # tokens of an answer apart
        self.advantage = a[tokens]
        self.height = (a + spread)[tokens]
        ratios = [np.exp(new - self.batch.logp_old)[tokens] for new in self.batch.logp_new]
        reach = max(float(np.abs(r - 1).max()) for r in ratios) + 0.08
        with figure_style():
            figure = Figure(
                figsize=(9.6, 4.0) if presenting() else (9.0, 4.0), layout="constrained"
            )
            left, right = figure.subplots(1, 2, width_ratios=(2.2, 1.0))
            self.band = left.add_patch(
                Rectangle((0.8, -3), 0.4, 6, color=COLORS["band"], alpha=0.25, lw=0)
            )
            self.points = {
                kind: left.plot([], [], "o", ms=4.5, color=colour, label=label)[0]
                for kind, (label, colour) in TOKEN_KINDS.items()
            }
            left.axvline(1.0, color=COLORS["start"], lw=0.8, ls=":")
            left.set(
                xlim=(1 - reach, 1 + reach),
                ylim=(-1.9, 1.9),
                xlabel="token ratio r",
                ylabel="advantage A of its answer",
            )
            figure.legend(
                handles=[
                    *self.points.values(),
                    Line2D(
                        [], [], lw=8, color=COLORS["band"], alpha=0.25, label="band [1 − ε, 1 + ε]"
                    ),
                ],
                loc="outside lower center",
                ncols=2,
                fontsize="small",
                frameon=False,
            )
            self.bars = right.bar(FRACTIONS, [0, 0, 0], color=COLORS["zero_grad"]).patches
            self.bar_texts = [right.text(i, 0, "", ha="center", va="bottom") for i in range(3)]
            right.set(
                ylim=(0, 1.05),
                ylabel="share of the batch's tokens",
                title="clip fraction as logged",
            )
            right.tick_params(axis="x", labelsize="small")
        self.bars[0].set_color(COLORS["clip_only"])
        self.shown: dict[str, float] = {}
        controls = {
            "mu": slider("update μ", mu, (1, MAX_MU), 1, integer=True),
            "eps": slider("ε", eps, (0.0, 0.5), 0.01),
        }
        moving = [self.band, *self.points.values(), *self.bars, *self.bar_texts]
        super().__init__(
            figure,
            self.update,
            controls,
            moving=moving,
            rows=[["mu", "eps"]],
            description="The batch's token ratios and three clip fractions",
        )

    def update(self, mu: int, eps: float) -> Markup:
        """Place the tokens and the band for ``mu`` and ``eps``; bars for the fractions."""
        try:
            self.shown = clip_fractions(mu, eps)
        except (TypeError, ValueError) as error:
            raise InputError(str(error)) from None
        ratio = np.exp(self.batch.logp_new[mu - 1] - self.batch.logp_old)[self.batch.mask]
        b = llm_clip.token_breakdown(
            self.batch.logp_new[mu - 1],
            self.batch.logp_old,
            self.batch.advantages(),
            self.batch.mask,
            objective="grpo",
            eps_low=eps,
        )
        clipped = b.is_clipped[self.batch.mask]
        outside = ~clipped & (np.abs(ratio - 1) > eps)
        for kind, chosen in (
            ("clipped", clipped),
            ("outside", outside),
            ("inside", ~clipped & ~outside),
        ):
            self.points[kind].set_data(ratio[chosen], self.height[chosen])
        self.band.set_x(1 - eps)
        self.band.set_width(2 * eps)
        for bar, label, value in zip(self.bars, self.bar_texts, self.shown.values(), strict=True):
            bar.set_height(value)
            label.set_y(value)
            label.set_text(rounded(value, 3))
        return clip_readout(mu, ratio, int(clipped.sum()), int(outside.sum()))


def clip_readout(mu: int, ratio: np.ndarray, clipped: int, outside: int) -> Markup:
    if mu == 1:
        text = (
            f"μ = 1: the policy has not changed since it sampled the batch, so every ratio "
            f"is exactly 1 (largest |r − 1| = {rounded(np.abs(ratio - 1).max())}) and every "
            "clip fraction is 0."
        )
    else:
        text = (
            f"μ = {mu}, after {mu - 1} step{'s' if mu > 2 else ''} on this batch: "
            f"{clipped} of {ratio.size} tokens switched off, {outside} more outside the "
            "band with their gradient kept."
        )
    return tag("div", text, classes="ppo")
