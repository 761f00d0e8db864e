"""Notebook 9's figures: the engine's sliders (:class:`MismatchExplorer`) and the study's curves,
every number from :mod:`ppo_viz.mismatch.measures` or ``experiments/mismatch_study.json``."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ppo_viz.app import InputError, LiveFigure
from ppo_viz.controls import selection
from ppo_viz.html import Markup, tag
from ppo_viz.mismatch import measures
from ppo_viz.numbers import rounded
from ppo_viz.results import RESULTS_DIR, load_results
from ppo_viz.style import COLORS, PALETTE, figure_size, figure_style, legend_below
from tiny_lm import Engine

RESULTS_JSON = RESULTS_DIR / "mismatch_study.json"
#: Batches the live figure draws at each setting (32 responses each), and their seed.
RUNS, SEED = 8, 0
#: Gap bins on a symmetric log axis (linear within 1e-4 of 0); gaps beyond go to the end bins.
LINEAR = 1e-4
EDGES = np.concatenate([-np.logspace(0.5, -4, 10), [0.0], np.logspace(-4, 0.5, 10)])
#: How each correction is drawn, everywhere in the notebook.
STYLES = {
    "none": (PALETTE["black"], "o"),
    "token_truncate": (PALETTE["blue"], "s"),
    "token_mask": (PALETTE["sky_blue"], "x"),
    "sequence_truncate": (PALETTE["vermillion"], "^"),
    "sequence_mask": (PALETTE["orange"], "v"),
    "opsm": (PALETTE["green"], "D"),
    "negatives_dropped": (PALETTE["purple"], "P"),
}
TITLES = {"top_p": "top-p", "steps_per_generation": "steps per batch"}
TICKS = [-1.0, -1e-2, -1e-4, 0.0, 1e-4, 1e-2, 1.0]
SLIDERS = {"bits": "logits' bits", "top_p": "top-p", "stale": "stale (iterations)"}
#: The sliders' positions: the study's sizes ("exact" bits is 0, for None).
BITS = [("exact", 0), *((str(b), b) for b in measures.SOURCES["bits"][1:])]
SIZES = {**measures.SOURCES, "bits": BITS}


@cache
def settled(bits: Any, top_p: float, stale: int) -> measures.MismatchBatch:
    """The live figure's batches at one setting (computed once)."""
    return measures.mismatch_batch(Engine(bits=bits, top_p=top_p), RUNS, SEED, stale)


def committed_bias(bits: Any, top_p: float, stale: int) -> dict[str, dict[str, float]] | None:
    """The study's gradient bias per correction here, if it measured it (one source on), or None."""
    on = {"bits": bits, "top_p": top_p, "stale": stale}
    changed = [s for s, v in on.items() if v != measures.SOURCES[s][0]] or ["bits"]
    if len(changed) > 1 or (curves := study_curves()) is None:
        return None
    return curves[changed[0]][measures.SOURCES[changed[0]].index(on[changed[0]])]["bias"]


@cache
def study_curves() -> dict[str, Any] | None:
    """The committed study's curves (read once: a third of ``update``'s time at each), or None."""
    return load_results(RESULTS_JSON)["curves"] if RESULTS_JSON.exists() else None


def refuse_unmeasured(**settings: object) -> None:
    """An :class:`InputError` naming a setting that is not one of the study's sizes."""
    for name, value in settings.items():
        sizes = [size for _, size in SIZES[name]] if name == "bits" else list(SIZES[name])
        if value not in sizes:
            listed = ", ".join(map(str, sizes))
            exact = " (0: exact)" if name == "bits" else ""
            raise InputError(f"{SLIDERS[name]} must be one of {listed}{exact}, got {value!r}")


class MismatchExplorer(LiveFigure):
    """Gaps, each mode's weights, OPSM's dropped responses and the gradient's bias, live.

    The sliders follow a drag: a setting's batches take milliseconds the first time (the stale
    policies are trained once, for every staleness, by :func:`measures.policies_ahead`), and its
    redraw a few tens of them."""

    description = "An inference engine's mismatch: gaps, weights, OPSM and the gradient's bias"

    def __init__(self, bits: int = 0, top_p: float = 1.0, stale: int = 2) -> None:
        start = {"bits": bits, "top_p": top_p, "stale": stale}  # bits 0: exact
        try:
            refuse_unmeasured(**start)
        except InputError as error:  # the start values, refused as a slider would not
            raise ValueError(str(error)) from None
        controls = {
            k: selection(v, SIZES[k], start[k], continuous_update=True) for k, v in SLIDERS.items()
        }
        with figure_style():  # every artist made inside: presentation mode's type sizes
            figure = Figure(figsize=figure_size((9.0, 6.2), (9.6, 5.44)), layout="constrained")
            self.panels(figure)
        moving = [self.hist, *self.weights.values(), self.kept, self.dropped, *self.bars]
        super().__init__(figure, self.update, controls, moving=[*moving, self.floor, self.note],
                         rows=[list(SLIDERS)])  # fmt: skip

    def panels(self, figure: Figure) -> None:
        """The four panels and their moving artists."""
        gap_ax, weight_ax, opsm_ax, bias_ax = figure.subplots(2, 2).ravel()
        for ax in (gap_ax, weight_ax, opsm_ax):
            ax.set_xscale("symlog", linthresh=LINEAR)
            ax.set_xlim(EDGES[0], EDGES[-1])
            ax.set_xticks(TICKS, ["−1", "−0.01", "", "0", "", "0.01", "1"])
        self.hist = gap_ax.stairs(np.zeros(len(EDGES) - 1), EDGES, fill=True, color=COLORS["band"])
        gap_ax.set(title="gaps logp_old − logp_rollout", ylabel="share of tokens", ylim=(0, 1))
        self.weights = {m: weight_ax.scatter([], [], **marks(m)) for m in measures.MODES}
        weight_ax.axhline(measures.CLIP_MAX, color=COLORS["threshold_alt"], ls=":", lw=1)
        weight_ax.set(title="each token's weight (batch 1)", ylim=(-0.1, 3.4), xlabel="gap")
        self.kept = opsm_ax.scatter([], [], s=16, color=STYLES["opsm"][0], label="kept")
        self.dropped = opsm_ax.scatter([], [], s=30, color=COLORS["error"], marker="x",
                                       label="dropped by OPSM")  # fmt: skip
        opsm_ax.axvline(measures.OPSM_THRESHOLD, color=COLORS["threshold"], ls="--", lw=1)
        opsm_ax.set(title="responses (all batches)", ylim=(-3.2, 3.2), ylabel="advantage",
                    xlabel="mean of logp_rollout − logp_new (= logp_old at μ = 1)")  # fmt: skip
        x = np.arange(len(measures.CORRECTIONS))
        bias_ax.set(yscale="log", ylim=(3e-3, 3.0))
        self.bars = bias_ax.bar(x, np.full(len(x), 1.0), color=[STYLES[c][0] for c in STYLES])
        (self.floor,) = bias_ax.plot(x, np.full(len(x), 1.0), "_", ms=22, color=COLORS["threshold"])
        self.note = bias_ax.text(0.5, 0.6, "", transform=bias_ax.transAxes, ha="center")
        bias_ax.set_xticks(x, [c.replace("_", "\n").replace("uence", "") for c in STYLES])
        bias_ax.set_title("gradient bias (study; — its floor)")
        legend_below(figure, ncols=3, handles=[*self.weights.values(), self.kept, self.dropped])

    def update(self, bits: int, top_p: float, stale: int) -> Markup:
        """Move every artist to the batches at this setting; the readout's numbers."""
        refuse_unmeasured(bits=bits, top_p=top_p, stale=stale)
        bits = bits or None  # 0: exact
        batch = settled(bits, top_p, stale)
        gaps = measures.gaps(batch)
        counts, _ = np.histogram(np.clip(gaps, EDGES[0], EDGES[-1]), EDGES)
        self.hist.set_data(counts / gaps.size)
        chosen = measures.corrections(batch, 0)
        mask, token_gaps = batch.mask[0], (batch.logp_old - batch.logp_rollout)[0]
        for mode, scatter in self.weights.items():
            w = np.broadcast_to(chosen[mode]["rollout_weights"], mask.shape)
            scatter.set_offsets(np.column_stack([token_gaps[mask], w[mask]]))
        keep, points = opsm_points(batch)
        self.kept.set_offsets(points[keep])
        self.dropped.set_offsets(points[~keep])
        bias = committed_bias(bits, top_p, stale)
        for bar, name in zip(self.bars, measures.CORRECTIONS, strict=True):
            bar.set_height(0.0 if bias is None else min(bias[name]["bias"], 3.0))
        self.floor.set_ydata([np.nan if not bias else bias[c]["floor"] for c in STYLES])
        self.note.set_text("" if bias else "measured one source at a time")
        clip = rounded(measures.ratio_at_mu1(batch)["clipped"], 3)
        text = f"{gaps.size} tokens in {RUNS} batches; clipped at μ = 1 with the engine's "
        text += f"log-probs as old: {clip}; OPSM drops {(~keep).sum()} of {keep.size} responses."
        return tag("div", text, classes="ppo")


def marks(mode: str) -> dict[str, Any]:
    """A truncating mode's markers large and hollow (a masking one's show through), filled."""
    color, marker = STYLES[mode]
    paint = {"facecolors": "none", "edgecolors": color, "s": 40} if "trunc" in mode else {"s": 12}
    return {"color": color, "marker": marker, "label": mode.replace("_", " ")} | paint


def opsm_points(batch: measures.MismatchBatch) -> tuple[np.ndarray, np.ndarray]:
    """Every response's OPSM decision, and its mean of ``logp_rollout - logp_old`` (mu = 1) and
    advantage as a point."""
    keep = np.concatenate([measures.corrections(batch, r)["opsm"]["keep"] for r in range(RUNS)])
    d = np.where(batch.mask, batch.logp_rollout - batch.logp_old, 0.0).sum(-1) / batch.mask.sum(-1)
    return keep, np.column_stack([d.ravel(), batch.advantages.ravel()])


def study_figure(results: dict[str, Any]) -> Figure:
    """The study: each correction's gradient bias over a source's sizes (the floor shaded), and
    its difference in final accuracy from none (confirmation seeds) with its simultaneous band."""
    with figure_style():  # every artist made inside: presentation mode's type sizes
        figure = Figure(figsize=figure_size((9.0, 6.2), (9.6, 5.44)), layout="constrained")
        axes = figure.subplots(2, len(results["sources"]), sharex="col")
        for column, source in enumerate(results["sources"]):
            draw_source(axes[0, column], axes[1, column], source, results)
        axes[0, 0].set_ylabel("gradient bias")
        axes[1, 0].set_ylabel("Δ final accuracy")
        handles = [*axes[0, 0].get_lines()[:1], *axes[1, 0].get_lines()[: len(STYLES) - 1]]
        legend_below(figure, ncols=3, handles=handles, labels=[s.replace("_", " ") for s in STYLES])
    return figure


def draw_source(top: Any, bottom: Any, source: str, results: dict[str, Any]) -> None:
    """One source's column of :func:`study_figure`."""
    sizes = results["sources"][source]
    x = np.arange(len(sizes))
    if source in results["curves"]:
        curve = results["curves"][source]
        floor = [m["bias"]["none"]["floor"] for m in curve]  # shaded: what noise alone gives
        top.fill_between(x, 0, floor, color=COLORS["guide"], alpha=0.3, lw=0)
        for name, (color, marker) in STYLES.items():
            top.plot(x, [m["bias"][name]["bias"] for m in curve], marker=marker, color=color)
    else:
        top.plot(x, results["trained_clip_fraction"][source], marker="o", color=STYLES["none"][0])
        top.set_ylabel("clipped in training")
    for name, (color, marker) in list(STYLES.items())[1:]:
        band = results["bands"][f"{source}/{name}/score"]["confirmation"]
        bottom.fill_between(x, band["low"], band["high"], color=color, alpha=0.15, lw=0)
        bottom.plot(x, band["mean"], marker=marker, color=color, label=name)
    bottom.axhline(0, color=COLORS["zero_line"], lw=0.8)
    bottom.set_xticks(x, ["off" if i == 0 else str(z) for i, z in enumerate(sizes)])
    top.set_title(TITLES.get(source, source))
    bottom.set_xlabel(TITLES.get(source, source))
