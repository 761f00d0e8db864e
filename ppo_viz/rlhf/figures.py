"""The RLHF study's figures, drawn from its results or from live runs.

* :func:`score_figure`: per mu, each method's mean final accuracy against the learning rate
  (log axis), the reference's accuracy dotted;
* :func:`effects_figure`: each finding's curve, the paired difference against the learning
  rate per mu, with its simultaneous 95% band (confirmation seeds), a point filled where all
  three sets' bands exclude 0;
* :func:`draw_curves`: batch reward, response length, the wrong
  responses' length minus the right response's (so that the prompts drawn do not move it) and
  entropy per token over training, one line per method (the mean over seeds).

Each method keeps one colour and line style everywhere (:data:`METHOD_LINES`): GRPO as PPO's
clipped objective elsewhere in the bundle (thick blue), the unclipped control dashed
vermillion; DAPO orange, solid with clip-higher and dotted without.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ppo_viz.numbers import count
from ppo_viz.rlhf.results import cell_of, label
from ppo_viz.style import COLORS, LINES, PALETTE, figure_size, figure_style, legend_below

METHOD_LINES: dict[str, dict[str, Any]] = {
    "grpo": LINES["clipped"],
    "unclipped": LINES["unclipped"],
    "ppo": {"color": PALETTE["black"], "lw": 1.4, "ls": (0, (5, 2, 1, 2))},
    "dr_grpo": {"color": PALETTE["green"], "lw": 2.0, "ls": "-"},
    "dapo": {"color": PALETTE["orange"], "lw": 2.0, "ls": "-"},
    "dapo_sym": {"color": PALETTE["orange"], "lw": 1.6, "ls": (0, (1, 1.5))},
    "gspo": {"color": PALETTE["purple"], "lw": 2.0, "ls": (0, (4, 1.5))},
    "cispo": {"color": PALETTE["sky_blue"], "lw": 2.0, "ls": (0, (6, 1.5, 1.5, 1.5))},
    # the controls: thin, in the colour of the method each changes by one thing
    "grpo_tight": {"color": PALETTE["blue"], "lw": 1.2, "ls": (0, (1, 1.5))},
    "gspo_wide": {"color": PALETTE["purple"], "lw": 1.2, "ls": (0, (1, 1.5))},
    "dr_grpo_agg": {"color": PALETTE["green"], "lw": 1.2, "ls": (0, (4, 1.5))},
    "grpo_mean": {"color": PALETTE["green"], "lw": 1.2, "ls": (0, (1, 1.5))},
}
#: Each mu's colour in :func:`effects_figure`.
MU_COLORS = {1: PALETTE["olive"], 2: PALETTE["sky_blue"], 4: PALETTE["blue"], 8: PALETTE["black"]}
#: The curves over training: what each panel shows, its title and its y limits.
CURVE_PANELS = (
    ("reward", "batch reward", (-0.1, 1.02)),
    ("length", "response length (tokens)", (2.5, 6.5)),
    ("wrong_excess", "wrong responses: length minus the right one's", (-2.5, 2.5)),
    ("entropy", "entropy (nats)", (0.0, 0.75)),
)


def score_figure(results: Mapping[str, Any], seed_set: str = "confirmation") -> Figure:
    """Final accuracy against the learning rate, one panel per mu, on one seed set."""
    mus, lrs = results["updates"], np.array(results["learning_rates"])
    seeds, reference = results["sets"][seed_set]["seeds"], results["reference_accuracy"]
    with figure_style():
        figure = Figure(figsize=figure_size((9.0, 6.0), (9.6, 5.2)), layout="constrained")
        rows, columns = -(-len(mus) // 2), min(2, len(mus))
        grid = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False).flat
        for ax in grid[len(mus) :]:
            ax.remove()
        for ax, mu in zip(grid, mus, strict=False):
            for method in results["methods"]:
                cells = [cell_of(results, seed_set, method, lr, mu) for lr in lrs]
                means = [cell["mean"]["score"]["mean"] for cell in cells]
                style = {**METHOD_LINES[method], "marker": "o", "ms": 3.5}
                ax.plot(lrs, means, **style, label=label(results, method), gid=method)
            ax.axhline(reference, color=COLORS["guide"], lw=1.0, ls=":")
            ax.set(xscale="log", ylim=(0.0, 1.0), title=f"μ = {count(mu, 'update')} per batch")
            ax.set_xticks(lrs, [f"{lr:g}" for lr in lrs], minor=False)
            ax.minorticks_off()
        axes = list(figure.axes)
        for ax in axes[-2:]:
            ax.set_xlabel("Adam's learning rate")
            ax.tick_params(labelbottom=True)
        for ax in axes[::2]:
            ax.set_ylabel("final accuracy")
        offset = {"xytext": (2, 3), "textcoords": "offset points"}  # just above the line's start
        axes[0].annotate(
            "reference", (lrs[0], reference), **offset, fontsize="small", color=COLORS["guide"]
        )
        figure.suptitle(f"Final accuracy (exact), mean over {seeds} {seed_set} seeds per point")
        legend_below(figure, 4, handles=[line for line in axes[0].get_lines() if line.get_gid()])
    return figure


def draw_curves(
    figure: Figure,
    iterations: np.ndarray,
    curves: Mapping[str, Mapping[str, Sequence[float]]],
    labels: Mapping[str, str],
    columns: int = 2,
) -> dict[str, list[Any]]:
    """The four panels over training, titled and limited (two by two, or in one row with
    ``columns=4``, titles wrapped to the narrower panels), one line per method in each
    (``curves[method][name]`` against ``iterations``), the methods' legend below; the lines
    by method."""
    axes = list(figure.subplots(len(CURVE_PANELS) // columns, columns, sharex=True).flat)
    for ax, (_, title, limits) in zip(axes, CURVE_PANELS, strict=True):
        ax.set(title=title if columns < 4 else "\n".join(textwrap.wrap(title, 24)), ylim=limits)
    for ax in axes[-columns:]:
        ax.set_xlabel("iteration")
    axes[2].axhline(0.0, color=COLORS["guide"], lw=0.8, ls=":")
    lines: dict[str, list[Any]] = {}
    for method, values in curves.items():
        for ax, (name, _, _) in zip(axes, CURVE_PANELS, strict=True):
            y = np.array(values[name], dtype=float)  # None (no wrong response) is NaN
            style = {**METHOD_LINES[method], "label": labels[method], "gid": method}
            lines.setdefault(method, []).append(ax.plot(iterations, y, **style)[0])
    axes[0].set_xlim(0.0, float(iterations[-1]))  # the panels share it
    legend_below(figure, 4, handles=[group[0] for group in lines.values()])
    return lines


def curves_figure(results: Mapping[str, Any], lr: float, mu: int) -> Figure:
    """The curves over training of every method at one cell (confirmation seeds)."""
    iterations = np.array(results["curve_iterations"], dtype=float)
    curves = {m: cell_of(results, "confirmation", m, lr, mu)["curves"] for m in results["methods"]}
    labels = {m: label(results, m) for m in results["methods"]}
    seeds = results["sets"]["confirmation"]["seeds"]
    with figure_style():
        figure = Figure(figsize=figure_size((9.0, 5.6), (9.6, 5.0)), layout="constrained")
        draw_curves(figure, iterations, curves, labels)
        figure.suptitle(f"lr {lr:g}, μ = {mu}: means over {seeds} confirmation seeds")
    return figure


def effects_figure(results: Mapping[str, Any]) -> Figure:
    """One panel per finding: its paired difference against the learning rate, a line per mu
    (the confirmation seeds' mean) in its simultaneous 95% band, a filled point where the
    discovery, confirmation and third sets' bands all exclude 0 on one side, 0 dotted."""
    findings, lrs = results["findings"], np.array(results["learning_rates"])
    with figure_style():
        figure = Figure(figsize=figure_size((11.0, 11.0), (9.6, 5.44)), layout="constrained")
        columns = 4
        grid = figure.subplots(-(-len(findings) // columns), columns, sharex=True).flat
        for ax in grid[len(findings) :]:
            ax.remove()
        for ax, finding in zip(grid, findings, strict=False):
            settings, curves = [tuple(s) for s in finding["settings"]], finding["curves"]
            band = curves["confirmation"]
            for mu in dict.fromkeys(mu for mu, _ in settings):
                at = [settings.index((mu, lr)) for lr in lrs]
                mean = np.array(band["mean"])[at]
                low, high = np.array(band["low"])[at], np.array(band["high"])[at]
                color = MU_COLORS.get(mu, PALETTE["grey"])
                ax.fill_between(lrs, low, high, color=color, alpha=0.15, lw=0)
                ax.plot(lrs, mean, color=color, lw=1.3, label=f"μ = {mu}", gid=str(mu))
                agree = [
                    len({c["sign"][i] for c in curves.values()} - {0}) == 1
                    and all(c["sign"][i] for c in curves.values())
                    for i in at
                ]
                ax.plot(lrs, np.where(agree, mean, np.nan), "o", color=color, ms=3.5)
            ax.axhline(0.0, color=COLORS["guide"], lw=0.8, ls=":")
            ax.set(
                xscale="log", title="\n".join(textwrap.wrap(finding["key"].replace("_", " "), 28))
            )
            ax.set_xticks(lrs[::2], [f"{lr:g}" for lr in lrs[::2]], minor=False)
            ax.minorticks_off()
            ax.tick_params(labelbottom=True, labelsize="x-small")
            ax.title.set_fontsize("small")
        figure.supylabel("method minus its comparison (the finding's metric)")
        figure.suptitle(
            "Each finding's paired difference against Adam's learning rate:\n"
            "mean and simultaneous 95% band over "
            f"{results['sets']['confirmation']['seeds']} confirmation seeds; filled: all three "
            "sets agree"
        )
        lines = [[ln for ln in ax.get_lines() if ln.get_gid()] for ax in figure.axes]
        handles = max(lines, key=len)
        legend_below(figure, 4, handles=handles)
    return figure
