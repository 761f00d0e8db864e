"""What the why-clip command writes: ``why_clip.json``, ``RESULTS.md`` and ``why_clip.png``.

The markdown's tables are the notebook's (:mod:`ppo_viz.why_clip.results`), the figure is
the notebook's first (:func:`ppo_viz.why_clip.figures.range_figure`), so the three files and
the notebook always show the same numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.statistics import LEVEL, RESAMPLES, STABLE_SHARE
from ppo_viz.why_clip.figures import HEADLINE, range_figure
from ppo_viz.why_clip.methods import MAIN_METHODS, METHODS
from ppo_viz.why_clip.results import (
    PAPER,
    RESULTS_FIGURE,
    RESULTS_JSON,
    RESULTS_MARKDOWN,
    Table,
    difference,
    range_table,
    step_text,
    table_1,
)


def markdown(table: Table) -> list[str]:
    """A table's lines in markdown."""
    header, rows = table
    return ["| " + " | ".join(line) + " |" for line in (header, ["---"] * len(header), *rows)]


def sweep_table(results: Mapping[str, Any], name: str) -> Table:
    """Per method and step size: the mean score, and how many seeds succeeded and collapsed."""
    sweep = results["sweeps"][name]
    header = ["method", *(step_text(v) for v in sweep["values"])]
    rows = [
        [METHODS[key].label]
        + [f"{c['mean']:.3f} ({c['solved']}, {c['collapsed']})" for c in entry["cells"]]
        for key, entry in sweep["methods"].items()
    ]
    return header, rows


def paired_table(results: Mapping[str, Any], name: str) -> Table:
    """Per method and step size: its score minus PPO's (ε = 0.2) on the same seeds."""
    sweep = results["sweeps"][name]
    header = ["method", *(step_text(v) for v in sweep["values"])]
    rows = [
        [METHODS[key].label, *(difference(c["vs_ppo"]) for c in entry["cells"])]
        for key, entry in sweep["methods"].items()
        if key != "ppo"
    ]
    return header, rows


def results_markdown(results: Mapping[str, Any]) -> str:
    """RESULTS.md: how and where it was made, the design, the figure and every table."""
    machine, sweeps = results["machine"], results["sweeps"]
    seeds = ", ".join(f"{s['title']}: {s['seeds']}" for s in sweeps.values())
    lines = [
        "# Why PPO clips, measured as a range of step sizes",
        "",
        f"Written by `{results['command']}` in {results['seconds']} s with {results['jobs']} "
        f"worker processes, on seeds from {results['seed_offset']} (seeds per cell: {seeds}).",
        "",
        f"Machine: {machine['cpu']} ({machine['machine']}), numpy {machine['numpy']} with SIMD "
        f"{machine['simd']}. numpy's exp, log and tanh can differ in the last bit on another CPU "
        "or SIMD level, and a CartPole run is chaotic: one such bit changes its returns from "
        "then on. The bandit's numbers reproduce anywhere to 1e-12; CartPole's exactly only on "
        "a machine with this fingerprint, and elsewhere as aggregates over seeds.",
        "",
        "## Design",
        "",
        "Each sweep varies one step size with everything else fixed: the bandit's gradient step "
        "on the logits, CartPole's Adam learning rate; the epochs per batch are a separate "
        "factor (CartPole at K = 4 over the whole grid, at K = 10 at two rates). Every method "
        "runs on the same seeds, and a seed's random numbers are the same for every method. "
        "Scores are normalized: 0 for a uniform random policy, 1 for the best possible one "
        "(the bandit's best arm: the final policy's true expected reward; CartPole: 500 steps, "
        "the mean return of the last 20 episodes). A seed succeeds with a bandit score of at "
        "least 0.95, or a CartPole return of at least 475; it collapses when its final bandit "
        "policy puts at least 0.95 on a wrong arm, or its CartPole return is below a random "
        f"policy's. A method is stable at a step size where at least {STABLE_SHARE:.0%} of its "
        f"seeds succeed. Intervals are percentile bootstrap {LEVEL:.0%} intervals "
        f"({RESAMPLES:,} resamples from a fixed seed) of the mean, or of the mean paired "
        "difference; a difference whose interval contains 0 is a tie. Spreads are given to two "
        "significant figures.",
        "",
        "CartPole's agent is CleanRL's `ppo.py` in numpy with three deviations: the value loss "
        "is not clipped, a truncated episode is bootstrapped from its last observation, and the "
        "learning rate falls to 0 over the run's 50,000 steps (CleanRL: 500,000).",
        "",
        f"![Final score against step size; lines are means over seeds, the shading (PPO and "
        f"unclipped) the 10th to 90th percentile of the seeds; the strips mark the step sizes "
        f"where at least {STABLE_SHARE:.0%} of the seeds succeed]({RESULTS_FIGURE.name})",
        "",
    ]
    for name, sweep in sweeps.items():
        lines += [
            f"## {sweep['title']}: each method's stable range",
            "",
            *markdown(range_table(results, name)),
            "",
        ]
        lines += ["Mean score per step size (seeds that succeeded, seeds that collapsed):", ""]
        lines += [*markdown(sweep_table(results, name)), ""]
        if "ppo" in sweep["methods"] and len(sweep["methods"]) > 1:
            lines += ["Score minus PPO's (ε = 0.2) at the same step size, paired over seeds:", ""]
            lines += [*markdown(paired_table(results, name)), ""]
    lines += [
        "## Next to the PPO paper's Table 1",
        "",
        f"{PAPER}: the average normalized score over seven MuJoCo tasks (one million steps, "
        "3 seeds each; 0 a random policy, 1 the best setting). Here: mean ± half the 95% "
        "interval. Magnitudes do not compare across these columns or with the paper's: each "
        "task normalizes differently, is easier or harder, and runs another budget; only the "
        "order of the methods within a column can be compared, and where two methods' "
        "intervals overlap, not even that.",
        "",
        *markdown(table_1(results)),
        "",
        "## Settings",
        "",
    ]
    for sweep in sweeps.values():
        settings = ", ".join(f"{k} = {v}" for k, v in sweep["settings"].items())
        values = ", ".join(f"{v:g}" for v in sweep["values"])
        lines.append(f"- {sweep['title']}: {settings}; {sweep['swept']} in {values}")
    return "\n".join([*lines, ""])


def json_text(results: Mapping[str, Any]) -> str:
    """``results`` as JSON, one line per list of numbers (so a diff shows which cell moved)."""
    text = json.dumps(results, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", _one_line, text) + "\n"


def _one_line(match: re.Match[str]) -> str:
    return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"


def figure_panels(results: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The range figure's panels for ``results``: the headline's (bandit and CartPole, the six
    main methods), or for a partial run the sweeps and methods it ran."""
    sweeps = results["sweeps"]
    names = [name for name, _ in HEADLINE if name in sweeps] or list(sweeps)
    return [
        (
            name,
            [k for k in MAIN_METHODS if k in sweeps[name]["methods"]]
            or list(sweeps[name]["methods"]),
        )
        for name in names
    ]


def write_results(results: Mapping[str, Any], output: Path) -> None:
    """The three files, into ``output``: the figure first, the table last."""
    range_figure(results, figure_panels(results)).savefig(output / RESULTS_FIGURE.name, dpi=110)
    (output / RESULTS_JSON.name).write_text(json_text(results), encoding="utf-8")
    (output / RESULTS_MARKDOWN.name).write_text(results_markdown(results), encoding="utf-8")
