"""The reproduced table: parts A and B at many seeds, next to the PPO paper's Table 1.

``python -m experiments.why_clip`` writes the results as plain data to
``experiments/why_clip.json`` and, as a table, to ``experiments/RESULTS.md``; the notebook
reads them back (:func:`load_results`) and shows :func:`comparison_table`.

Table 1 (Schulman et al. 2017) averages a normalized score over seven MuJoCo tasks: the mean
return of the last 100 episodes, scaled so that a random policy scores 0 and the best setting
1.  Here a random policy scores 0 and the best possible policy 1: the bandit's best arm,
CartPole's 500 steps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from IPython.display import HTML

from ppo_viz.html import page, table
from ppo_viz.why_clip.cartpole_ppo import CartPoleRuns, CartPoleSettings
from ppo_viz.why_clip.methods import METHODS

RESULTS_DIR = Path(__file__).resolve().parents[2] / "experiments"
RESULTS_JSON = RESULTS_DIR / "why_clip.json"
RESULTS_MARKDOWN = RESULTS_DIR / "RESULTS.md"
RESULTS_FIGURE = RESULTS_DIR / "why_clip.png"
#: The names of part B's two settings: CleanRL's, and ten times the step size with 10 epochs.
CLEANRL, BIGGER_STEPS = "CleanRL", "bigger steps"
#: Table 1 of the PPO paper: average normalized score over seven MuJoCo tasks.
PAPER_TABLE_1 = {"unclipped": -0.39, "ppo_eps_0.1": 0.76, "ppo": 0.82, "ppo_eps_0.3": 0.70}
PAPER = "Schulman et al. (2017), Proximal Policy Optimization Algorithms, Table 1"
#: The table's rows, in order.
TABLE_METHODS = ("unclipped", "ppo_eps_0.1", "ppo", "ppo_eps_0.3", "clip_only", "plain_pg")


def standard_error(values: np.ndarray) -> float:
    """The standard error of the mean over seeds (0 for a single seed)."""
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The committed results (written by the results command)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def stored_cartpole_runs(results: Mapping[str, Any], setting: str) -> dict[str, CartPoleRuns]:
    """Part B's committed runs of one setting, by method key, as :class:`CartPoleRuns`."""
    stored = results["cartpole"][setting]
    settings = CartPoleSettings(**stored["settings"])
    return {
        key: CartPoleRuns(
            METHODS[key],
            settings,
            tuple(stored["seeds"]),
            **{name: np.array(values, dtype=float) for name, values in record.items()},
        )
        for key, record in stored["methods"].items()
    }


def comparison_rows(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows: one row per method, one column per experiment, each cell
    the mean score ± its standard error over seeds ("–" where the method did not run)."""
    columns = {"PPO paper, Table 1": {key: f"{v:.2f}" for key, v in results["paper"].items()}}
    for name, part in results["bandit"].items():
        columns[f"bandit, {name}"] = {
            key: f"{row['score']:.3f} ± {row['score_se']:.3f}"
            for key, row in part["methods"].items()
        }
    for name, part in results["cartpole"].items():
        scores = {
            k: CartPoleRuns.score_of(np.array(r["final_return"]))
            for k, r in part["methods"].items()
        }
        columns[f"CartPole, {name}"] = {
            key: f"{score.mean():.3f} ± {standard_error(score):.3f}"
            for key, score in scores.items()
        }
    rows = [
        [METHODS[key].label, *(cells.get(key, "–") for cells in columns.values())]
        for key in TABLE_METHODS
    ]
    return ["method", *columns], rows


def markdown_table(results: Mapping[str, Any]) -> list[str]:
    """The table's lines in markdown."""
    header, rows = comparison_rows(results)
    lines = [header, ["---"] * len(header), *rows]
    return ["| " + " | ".join(line) + " |" for line in lines]


def comparison_table(results: Mapping[str, Any]) -> HTML:
    """The comparison of ``results`` with Table 1, as a table under its caption."""
    header, rows = comparison_rows(results)
    return HTML(str(page(table(header, rows, caption=table_caption(results)))))


def table_caption(results: Mapping[str, Any]) -> str:
    """What the table's numbers are: the scale, the bandit, the seeds, the steps, the paper."""
    parts = []
    for bandit in list(results["bandit"].values())[:1]:
        means = ", ".join(f"{mu:g}" for mu in bandit["settings"]["arm_means"])
        parts.append(f"bandit with arm means ({means}), {bandit['seeds']} seeds (final policy)")
    for cartpole in list(results["cartpole"].values())[:1]:
        steps = cartpole["settings"]["total_steps"]
        parts.append(
            f"CartPole {len(cartpole['seeds'])} seeds × {steps:,} steps (last 20 episodes)"
        )
    return (
        "Normalized score (0: uniform random policy, 1: best possible), mean ± standard error "
        f"over seeds: {'; '.join(parts)}. Paper: {PAPER}."
    )
