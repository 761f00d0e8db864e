"""The study's committed results and the tables made from them (for the notebook and RESULTS.md).

``python -m experiments.why_clip`` writes the results to ``experiments/why_clip.json``
(:func:`load_results` reads them back).  Every sweep ran on two sets of seeds, *discovery* and
*confirmation*; :func:`one_set` gives the results of one set in the shape of a single run
(``results["sweeps"][name]["methods"][key]``), which is what most tables take.  Each table here
is data (:data:`ppo_viz.results.Table`) that the notebook shows and the command writes as
markdown, its numbers written as :mod:`ppo_viz.results` writes them: a paired difference whose
interval holds 0 is marked ``n.d.``, not distinguishable with that set's seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bandit_loop import BanditLoopSettings
from ppo_viz import results as shared
from ppo_viz.results import (
    RESULTS_DIR,
    SEED_SETS,
    Table,
    decimals,
    difference,
    estimate,
    ran_with,
)
from ppo_viz.why_clip.methods import METHODS

RESULTS_JSON = RESULTS_DIR / "why_clip.json"
RESULTS_MARKDOWN = RESULTS_DIR / "RESULTS.md"
RESULTS_FIGURE = RESULTS_DIR / "why_clip.png"
#: Every file the study's command writes: the results first, its cache of finished cells last.
FILES = (RESULTS_JSON, RESULTS_MARKDOWN, RESULTS_FIGURE, RESULTS_DIR / "why_clip.cells.jsonl")
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
#: (heading, sweep, step size or None for each method's best on the discovery set, state
#: PPO's clip activity?).
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


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The committed results (written by the results command)."""
    return shared.load_results(path)


def one_set(results: Mapping[str, Any], seed_set: str) -> dict[str, Any]:
    """The results of one seed set, shaped as a run on one set: ``sweeps[name]["methods"]``
    holds that set's methods, ``sweeps[name]["first_seed"]`` its first seed."""
    sweeps = {}
    for name, sweep in results["sweeps"].items():
        if seed_set in sweep["sets"]:
            chosen = sweep["sets"][seed_set]
            meta = {k: v for k, v in sweep.items() if k not in ("sets", "methods")}
            sweeps[name] = meta | {key: chosen[key] for key in ("first_seed", "methods")}
    return {**results, "seed_set": seed_set, "sweeps": sweeps}


def seed_sets(results: Mapping[str, Any]) -> list[str]:
    """The seed sets the results hold, in order."""
    return [s for s in SEED_SETS if s in results.get("seed_sets", SEED_SETS)]


def seeds_text(sweep: Mapping[str, Any], seed_set: str) -> str:
    """``seeds 400–799``: the seeds one set of a sweep ran on."""
    first = sweep["sets"][seed_set]["first_seed"]
    return f"seeds {first}–{first + sweep['seeds'] - 1}"


def settings_lines(results: Mapping[str, Any]) -> list[str]:
    """What each sweep ran with, as stored: its settings (the bandit's arm means, CartPole's
    budget, the epochs K), the step sizes it swept and its methods (``results["methods"]``:
    each as data)."""
    return [
        f"{sweep['title']}: {ran_with(sweep['settings'])}; {sweep['swept']} in "
        + ", ".join(step_text(v) for v in sweep["values"])
        + "; "
        + ", ".join(results["methods"][k]["label"] for k in sweep["methods"])
        for sweep in results["sweeps"].values()
    ]


def bandit_note(results: Mapping[str, Any]) -> str:
    """Empty when today's bandit (``bandit.ARM_MEANS``: the live runs') is the study's; else
    ``the study ran with 4 arms (1, 0.5, 0, -0.5); today's bandit has 5 arms (...)``."""
    both = (results["sweeps"]["bandit"]["settings"]["arm_means"], BanditLoopSettings().arm_means)
    ran, today = (f"{len(m)} arms ({', '.join(f'{v:g}' for v in m)})" for m in both)
    return "" if ran == today else f"the study ran with {ran}; today's bandit has {today}"


def pooled_cells(sweep: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """Per step size, a method's seeds of every set together: the mean score, its 10th and 90th
    percentiles, and on each set the share of the seeds that succeed (``shares``)."""
    sets = [sweep["sets"][s]["methods"][key]["cells"] for s in SEED_SETS if s in sweep["sets"]]
    pooled = []
    for cells in zip(*sets, strict=True):
        scores = np.concatenate([c["scores"] for c in cells])
        p10, p90 = (float(p) for p in np.percentile(scores, (10.0, 90.0)))
        mean, shares = float(scores.mean()), [c["solved"] / len(c["scores"]) for c in cells]
        pooled.append(dict(value=cells[0]["value"], mean=mean, p10=p10, p90=p90, shares=shares))
    return pooled


# -- numbers as text -------------------------------------------------------------------------


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
    """The cell of method ``key`` at step size ``value`` (``sweep`` of :func:`one_set`)."""
    return next(c for c in sweep["methods"][key]["cells"] if c["value"] == value)


def range_table(results: Mapping[str, Any], name: str) -> Table:
    """Per method of a sweep, on each seed set: the step sizes where enough of its seeds
    succeed (``stable_share``), its best step size (chosen on the discovery set), its mean
    score there, and that score minus PPO's at PPO's best, seed by seed."""
    sweep, share = results["sweeps"][name], results["stable_share"]
    symbol = SYMBOLS[sweep["swept"]]
    sets = [s for s in SEED_SETS if s in sweep["sets"]]
    header = ["method"]
    header += [f"{symbol} where ≥ {share:.0%} of seeds succeed: {s}" for s in sets]
    header += [f"best {symbol} (on {sets[0]})"]
    header += [f"mean score there: {s}" for s in sets]
    header += [f"minus PPO's best (paired): {s}" for s in sets]
    rows = []
    for key in sweep["methods"]:
        entries = [sweep["sets"][s]["methods"][key] for s in sets]
        row = [METHODS[key].label, *(stable_text(e["stable"]) for e in entries)]
        bests = [e["best"] for e in entries]
        row.append(step_text(bests[0]["value"]))
        row += [estimate(best["mean"], best["ci"]) for best in bests]
        row += [difference(best["vs_ppo_best"]) if "vs_ppo_best" in best else "–" for best in bests]
        rows.append(row)
    return header, rows


def table_1(results: Mapping[str, Any]) -> Table:
    """The PPO paper's Table 1 next to this study (one seed set, :func:`one_set`): per method
    the mean score ± half its 95% interval, at a fixed step size or at the method's best on
    the discovery set ("–": not run)."""
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


# -- the claims ------------------------------------------------------------------------------


def claim_estimate(claim: Mapping[str, Any], seed_set: str) -> str:
    """One claim's estimate on one set, with its interval and verdict, as text."""
    found = claim[seed_set]
    verdict = found["verdict"]
    if claim["kind"] in ("difference", "interaction"):
        text = difference({"diff": found["estimate"], "ci": found["ci"]}).removesuffix(" n.d.")
        if verdict == "not distinguishable":
            verdict += f" with {found['seeds']} seeds"
        return f"{text}: {verdict}"
    if claim["kind"] == "stable":
        return f"{estimate(found['estimate'], found['ci'])} succeed: {verdict}"
    tops = [top_text(top, ci) for top, ci in zip(found["estimate"], found["ci"], strict=True)]
    return f"{tops[0]} vs {tops[1]}: {verdict}"


def top_text(top: float | None, ci: Sequence[float | None]) -> str:
    """An upper end and its interval: ``10 [5, 10]``; ``none`` for no stable step size."""
    shown = [step_text(v) if v is not None else "none" for v in (top, *ci)]
    return f"{shown[0]} [{shown[1]}, {shown[2]}]"


def flip_text(flip: float) -> str:
    """A flip chance: ``< 0.1%``, ``2.3%``, ``35%``."""
    if flip < 0.001:
        return "< 0.1%"
    return f"{100 * flip:.2g}%"


def claim_tier(claim: Mapping[str, Any]) -> str:
    """``stated`` (held on both sets, rarely flips), ``hedged`` (held on both sets, flips
    more often: a tendency) or ``other`` (not stated)."""
    if claim["stated"]:
        return "stated"
    return "hedged" if claim["status"].endswith("given with its flip chance") else "other"


def in_tier(results: Mapping[str, Any], tier: str | None) -> list[Mapping[str, Any]]:
    """The claims of one tier (:func:`claim_tier`; None: every claim), in their order."""
    return [c for c in results.get("claims", []) if tier in (None, claim_tier(c))]


def claims_table(results: Mapping[str, Any], tier: str | None = None) -> Table:
    """Per claim (of one tier, :func:`in_tier`; default all): what it says, its estimate with
    interval and verdict on each seed set, its flip chance (how often a fresh set of as many
    seeds would give another verdict) and its status."""
    sets = seed_sets(results)
    header = ["claim", *(f"{s} set" for s in sets), "flip chance", "status"]
    rows = []
    for claim in in_tier(results, tier):
        found = [claim_estimate(claim, s) for s in sets if s in claim]
        flip = flip_text(claim["flip"]) if "flip" in claim else "–"
        rows.append([claim["says"], *found, flip, claim["status"]])
    return header, rows
