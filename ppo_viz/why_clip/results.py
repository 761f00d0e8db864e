"""The study's committed results and the tables made from them (for the notebook and RESULTS.md).

``python -m experiments.why_clip`` writes the results to ``experiments/why_clip.json``
(:func:`load_results` reads them back).  Each table here is data, a header and rows of text,
that the notebook shows (``ppo_viz.epochs.text.html_table``) and the command writes as markdown.
Means carry their bootstrap 95% interval, to two significant figures of its width
(:func:`estimate`); a paired difference whose interval contains 0 is a tie.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ppo_viz.why_clip.methods import METHODS

RESULTS_DIR = Path(__file__).resolve().parents[2] / "experiments"
RESULTS_JSON = RESULTS_DIR / "why_clip.json"
RESULTS_MARKDOWN = RESULTS_DIR / "RESULTS.md"
RESULTS_FIGURE = RESULTS_DIR / "why_clip.png"
PAPER = "Schulman et al. (2017), Proximal Policy Optimization Algorithms, Table 1"
#: Table 1 of the PPO paper: average normalized score over seven MuJoCo tasks, by method.
PAPER_TABLE_1 = {
    "unclipped": -0.39,
    "ppo_eps_0.1": 0.76,
    "ppo": 0.82,
    "ppo_eps_0.3": 0.70,
    "kl_adaptive_0.003": 0.68,
    "kl_adaptive_0.01": 0.74,
    "kl_adaptive_0.03": 0.71,
    "kl_fixed_0.3": 0.62,
    "kl_fixed_1": 0.71,
    "kl_fixed_3": 0.72,
    "kl_fixed_10": 0.69,
}
#: The comparison with Table 1: its rows, then this study's other methods; and its columns:
#: (heading, sweep, step size or None for each method's own best, state PPO's clip activity?).
TABLE_1_ROWS = (*PAPER_TABLE_1, "clip_only", "plain_pg", "early_stop")
TABLE_1_COLUMNS = (
    ("bandit, α = 1", "bandit", 1.0, False),
    ("bandit, best α", "bandit", None, False),
    ("CleanRL's hyperparameters, 50k steps", "cartpole", 2.5e-4, True),
    ("CartPole, K = 4, best lr", "cartpole", None, False),
    ("CartPole, K = 10, lr 0.0025", "cartpole_k10", 2.5e-3, False),
)
#: How each sweep's step size is written.
SYMBOLS = {"step_size": "α", "learning_rate": "lr"}

Table = tuple[list[str], list[list[str]]]


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The committed results (written by the results command)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


# -- numbers as text -------------------------------------------------------------------------


def decimals(width: float) -> int:
    """Decimals that show ``width`` to two significant figures (3 for a width of 0).

    >>> decimals(0.0022), decimals(0.08), decimals(0.0)
    (4, 3, 3)
    """
    return 3 if not width > 0 else max(0, 1 - math.floor(math.log10(width)))


def estimate(mean: float, ci: Sequence[float]) -> str:
    """``mean [low, high]`` to two significant figures of the interval's width.

    >>> estimate(0.98781, [0.98711, 0.98849])
    '0.9878 [0.9871, 0.9885]'
    """
    d = decimals(ci[1] - ci[0])
    return f"{mean:.{d}f} [{ci[0]:.{d}f}, {ci[1]:.{d}f}]"


def difference(paired: Mapping[str, Any]) -> str:
    """A paired difference: ``+0.0032 [+0.0030, +0.0034]``, prefixed ``tie:`` when its
    interval contains 0 (``tie`` alone when every seed gives the same score)."""
    low, high = paired["ci"]
    if low == high == paired["diff"] == 0.0:
        return "tie"
    d = decimals(high - low)
    text = f"{paired['diff']:+.{d}f} [{low:+.{d}f}, {high:+.{d}f}]"
    return f"tie: {text}" if paired["verdict"] == "tie" else text


def step_text(value: float) -> str:
    """A step size as the tables write it: ``0.05``, ``5``, ``0.0025``."""
    return f"{value:g}"


def stable_text(stable: Sequence[float] | None) -> str:
    """A stable range: ``0.1 – 5``, or ``none``."""
    if stable is None:
        return "none"
    low, high = (step_text(v) for v in stable)
    return low if low == high else f"{low} – {high}"


# -- the tables ------------------------------------------------------------------------------


def cell_at(sweep: Mapping[str, Any], key: str, value: float) -> Mapping[str, Any]:
    """The cell of method ``key`` at step size ``value``."""
    return next(c for c in sweep["methods"][key]["cells"] if c["value"] == value)


def range_table(results: Mapping[str, Any], name: str) -> Table:
    """Per method of a sweep: where enough of its seeds succeed (``stable_share``), its best
    step size and mean score there, and that score minus PPO's at PPO's best, seed by seed."""
    sweep, share = results["sweeps"][name], results["stable_share"]
    symbol = SYMBOLS[sweep["swept"]]
    header = ["method", f"{symbol} where ≥ {share:.0%} of seeds succeed", f"best {symbol}"]
    header += ["mean score there [95% interval]", "minus PPO's best (paired)"]
    rows = []
    for key, entry in sweep["methods"].items():
        best = entry["best"]
        rows.append([METHODS[key].label, stable_text(entry["stable"]), step_text(best["value"])])
        versus = difference(best["vs_ppo_best"]) if "vs_ppo_best" in best else "–"
        rows[-1] += [estimate(best["mean"], best["ci"]), versus]
    return header, rows


def table_1(results: Mapping[str, Any]) -> Table:
    """The PPO paper's Table 1 next to this study: per method the mean score ± half its
    95% interval, at a fixed step size or at the method's own best ("–": not run)."""
    header, columns = ["method", "PPO paper, Table 1"], []
    for heading, name, value, activity in TABLE_1_COLUMNS:
        sweep = results["sweeps"].get(name)
        if sweep is not None and (value is None or value in sweep["values"]):
            if activity and "ppo" in sweep["methods"]:
                clipped = cell_at(sweep, "ppo", value)["clip_fraction"]
                heading += f" (PPO clips {100 * clipped:.2g}% of samples)"
            header.append(heading)
            columns.append((sweep, value))
    rows = []
    for key in TABLE_1_ROWS:
        paper = PAPER_TABLE_1.get(key)
        row = [METHODS[key].label, "–" if paper is None else f"{paper:.2f}"]
        for sweep, value in columns:
            entry = sweep["methods"].get(key)
            if entry is None:
                row.append("–")
                continue
            cell = entry["best"] if value is None else cell_at(sweep, key, value)
            half = (cell["ci"][1] - cell["ci"][0]) / 2
            d = decimals(half)
            row.append(f"{cell['mean']:.{d}f} ± {half:.{d}f}")
        rows.append(row)
    return header, rows
