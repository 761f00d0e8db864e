"""The RLHF study's committed results, and the sentences and tables made from them.

``python -m experiments.rlhf_study`` writes ``experiments/rlhf_study.json``
(:func:`load_results`); each table here is data (a header and rows of text) that the notebook
shows and the command writes as markdown, and :func:`finding_sentence` states a finding with
both sets' numbers.  A paired difference whose interval holds 0 reads "not distinguishable
with N seeds".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ppo_viz import results as shared
from ppo_viz.results import RESULTS_DIR, SEED_SETS, Table, estimate

RESULTS_JSON = RESULTS_DIR / "rlhf_study.json"
RESULTS_MARKDOWN = RESULTS_DIR / "RESULTS_LLM.md"
SCORE_FIGURE = RESULTS_DIR / "rlhf_study.png"
CURVES_FIGURE = RESULTS_DIR / "rlhf_curves.png"
#: Every file the study's command writes: the results first, its cache of finished cells last.
FILES = (RESULTS_JSON, RESULTS_MARKDOWN, SCORE_FIGURE, CURVES_FIGURE)
FILES += (RESULTS_DIR / "rlhf_study.cells.jsonl",)
#: How each verdict is written.
VERDICTS = {
    "reproduces": "reproduces",
    "reproduces, other side unsettled": "reproduces; in other cells the discovery seeds went "
    "against it, unconfirmed",
    "depends on the setting": "reproduces in some cells, reversed in others",
    "reversed": "reversed",
    "not reproduced": "does not reproduce",
}
#: A finding's two sides, and how a sentence introduces each.
SIDES = {"supports": "where it holds most", "against": "where it goes most against"}


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The committed results (written by the study command)."""
    return shared.load_results(path)


def settings_lines(results: Mapping[str, Any]) -> list[str]:
    """What the study ran with, as stored: its methods (each llm_clip objective), grid,
    training settings, model and seeds."""
    sets = results["sets"]
    first = {s: sets[s]["first_seed"] for s in SEED_SETS}
    seeds = (f"{s} {first[s]}–{first[s] + sets[s]['seeds'] - 1}" for s in SEED_SETS)
    methods = (f"{m['label']} ({m['objective']})" for m in results["methods"].values())
    return [
        f"{len(results['methods'])} methods: " + ", ".join(methods),
        "learning rates " + ", ".join(f"{lr:g}" for lr in results["learning_rates"]),
        "μ = " + ", ".join(str(mu) for mu in results["updates"]),
        f"training: {shared.ran_with(results['settings'])}",
        f"model: {shared.ran_with(results['model'])}",
        "seeds: " + ", ".join(seeds),
    ]


def cell_of(results: Mapping[str, Any], seed_set: str, method: str, lr: float, mu: int) -> dict:
    """The stored cell of ``method`` at learning rate ``lr`` and ``mu`` on a seed set."""
    wanted = (seed_set, method, lr, mu)
    for cell in results["cells"]:
        if (cell["set"], cell["method"], cell["learning_rate"], cell["updates"]) == wanted:
            return cell
    raise KeyError(f"no cell {seed_set}, {method}, lr {lr:g}, mu {mu}")


def label(results: Mapping[str, Any], method: str) -> str:
    return results["methods"][method]["label"]


def difference(paired: Mapping[str, Any]) -> str:
    """A paired difference as a sentence writes it, with its number of seeds ``n``
    (:func:`ppo_viz.results.difference`)."""
    return shared.difference(paired, paired["n"])


def where_text(where: Mapping[str, Any], best_vs_best: bool = False) -> str:
    """``lr 0.01, μ 4``, or with each method at its best learning rate ``μ 4, each at its
    best lr (0.01 against 0.003)``."""
    lr, other = where["learning_rate"], where["versus_learning_rate"]
    if not best_vs_best:
        return f"lr {lr:g}, μ {where['updates']}"
    both = f"{lr:g} for both" if lr == other else f"{lr:g} against {other:g}"
    return f"μ {where['updates']}, each at its best lr ({both})"


def side_text(results: Mapping[str, Any], finding: Mapping[str, Any], name: str) -> str:
    """One side of a finding: where discovery put it, and both sets' differences."""
    entry, sets = finding[name], results["sets"]
    found, checked = difference(entry["discovery"]), difference(entry["confirmation"])
    return (
        f"{where_text(entry['where'], finding['best_vs_best'])}: {found} on the "
        f"{sets['discovery']['seeds']} discovery seeds, {checked} on the "
        f"{sets['confirmation']['seeds']} confirmation seeds"
    )


def finding_sentence(results: Mapping[str, Any], finding: Mapping[str, Any]) -> str:
    """The finding, its verdict and the numbers that decide it, as one paragraph."""
    metric = results["metrics"][finding["metric"]]
    a, b = label(results, finding["method"]), label(results, finding["versus"])
    verdict = VERDICTS[finding["verdict"]]
    head = f"**{finding['claim']}** ({finding['source']}): {verdict}. {metric}, {a} minus {b}"
    counts = finding["discovery_sides"]
    tested = "values of μ tested" if finding["best_vs_best"] else "cells tested"
    scope = (
        f"On the discovery seeds {counts['supports']} of {counts['of']} {tested} show the "
        f"claimed sign at 95% and {counts['against']} the opposite one."
    )
    parts = []
    for name, where in SIDES.items():
        side = finding[name]
        if side["discovered"]:
            parts.append(f"{where}, {side_text(results, finding, name)}")
            if side["confirmed"]:
                parts[-1] += strength_text(side["replication_chance"])
        elif name == "supports":
            parts.append(f"no cell supports it; closest, {side_text(results, finding, name)}")
    return f"{head}: {'; '.join(parts)}. {scope}"


def chance_text(chance: float) -> str:
    """``nearly always`` or ``about 6 times in 10``: how often a fresh set of seeds would
    confirm a side (a cautious guess, :func:`experiments.rlhf_findings.replication_chance`)."""
    times = round(10 * chance)
    return "nearly always" if chance >= 0.95 else f"about {times} time{'s' * (times != 1)} in 10"


def strength_text(chance: float) -> str:
    """How firmly a confirmed side stands, as a parenthesis after its numbers."""
    weak = "" if chance >= 0.95 else "weak: "
    return f" ({weak}a fresh set of seeds would confirm it {chance_text(chance)})"


def findings_table(results: Mapping[str, Any]) -> Table:
    """Per finding: the claim, the verdict, and the cell that decided it with both sets'
    paired differences (the supporting side, or the opposing one for a reversal)."""
    header = ["claim (source)", "verdict", "where (chosen on discovery)", "discovery"]
    header += ["confirmation (fresh seeds)", "a third set of seeds would confirm it"]
    rows = []
    for f in results["findings"]:
        name = "against" if f["verdict"] == "reversed" else "supports"
        entry, claim = f[name], f"{f['claim']} ({f['source']})"
        where = where_text(entry["where"], f["best_vs_best"])
        found, checked = difference(entry["discovery"]), difference(entry["confirmation"])
        chances = "; ".join(
            f"{'the claim' if side == 'supports' else 'against it'}: "
            f"{chance_text(f[side]['replication_chance'])}"
            for side in SIDES
            if f[side]["confirmed"]
        )
        rows.append([claim, VERDICTS[f["verdict"]], where, found, checked, chances or "–"])
    return header, rows


def best_table(results: Mapping[str, Any], mu: int) -> Table:
    """Per method at one mu: its best learning rate on the discovery seeds, its final
    accuracy there on both sets, and (confirmation) minus GRPO's at GRPO's best."""
    header = ["method", "best lr (discovery)", "accuracy, discovery", "accuracy, confirmation"]
    header.append("minus GRPO's best (confirmation, paired)")
    rows = []
    for method, per_mu in results["best"].items():
        entry = per_mu[str(mu)]
        row = [label(results, method), f"{entry['learning_rate']:g}"]
        for seed_set in SEED_SETS:
            row.append(estimate(entry[seed_set]["mean"], entry[seed_set]["ci"]))
        row.append(difference(entry["vs_grpo_best"]) if "vs_grpo_best" in entry else "–")
        rows.append(row)
    return header, rows


def score_table(results: Mapping[str, Any], seed_set: str, mu: int) -> Table:
    """Per method: the mean final accuracy at each learning rate, at one mu."""
    return per_learning_rate(
        results, seed_set, mu, lambda cell: f"{cell['mean']['score']['mean']:.3f}"
    )


def versus_grpo_table(results: Mapping[str, Any], seed_set: str, mu: int) -> Table:
    """Per method but GRPO: its final accuracy minus GRPO's at each learning rate, at one mu,
    seed by seed."""
    return per_learning_rate(
        results, seed_set, mu, lambda cell: difference(cell["vs_grpo"]), "grpo"
    )


def per_learning_rate(
    results: Mapping[str, Any], seed_set: str, mu: int, text: Callable[[dict], str], but: str = ""
) -> Table:
    """Per method (but ``but``), ``text`` of its cell at each learning rate, at one mu."""
    lrs = results["learning_rates"]
    header = ["method", *(f"lr {lr:g}" for lr in lrs)]
    methods = [m for m in results["methods"] if m != but]
    cells = {m: [cell_of(results, seed_set, m, lr, mu) for lr in lrs] for m in methods}
    rows = [[label(results, m), *map(text, cells[m])] for m in methods]
    return header, rows
