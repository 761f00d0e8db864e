"""The RLHF study's committed results, and the sentences and tables made from them.

``python -m experiments.rlhf_study`` writes ``experiments/rlhf_study.json``
(:func:`load_results`); each table here is data (a header and rows of text) that the notebook
shows and the command writes as markdown, and :func:`finding_sentence` states a finding as the
settings where its simultaneous bands exclude 0 on all three sets of seeds (:func:`grid_text`);
a side with no such setting reads "not detectable here", never "equal".
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ppo_viz import results as shared
from ppo_viz.numbers import count
from ppo_viz.results import RESULTS_DIR, Table

RESULTS_JSON = RESULTS_DIR / "rlhf_study.json"
RESULTS_MARKDOWN = RESULTS_DIR / "RESULTS_LLM.md"
SCORE_FIGURE = RESULTS_DIR / "rlhf_study.png"
CURVES_FIGURE = RESULTS_DIR / "rlhf_curves.png"
EFFECTS_FIGURE = RESULTS_DIR / "rlhf_effects.png"
#: Every file the study's command writes: the results first, its cache of finished cells last.
FILES = (RESULTS_JSON, RESULTS_MARKDOWN, SCORE_FIGURE, CURVES_FIGURE, EFFECTS_FIGURE)
FILES += (RESULTS_DIR / "rlhf_study.cells.jsonl",)
#: Each set's mark in a curve table: its band above 0, below 0, or holding 0.
MARKS = {1: "+", -1: "−", 0: "·"}


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The committed results (written by the study command)."""
    return shared.load_results(path)


def settings_lines(results: Mapping[str, Any]) -> list[str]:
    """What the study ran with, as stored: its methods (each llm_clip objective), grid,
    training settings, model and seeds."""
    sets = results["sets"]
    seeds = (f"{s} {v['first_seed']}–{v['first_seed'] + v['seeds'] - 1}" for s, v in sets.items())
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


def grid_text(settings: Sequence[Sequence[float]], learning_rates: Sequence[float]) -> str:
    """Settings ``[mu, lr]`` as a sentence says them, mu by mu, neighbouring learning rates of
    the grid as a range: ``μ 4 at lr 0.02; μ 8 at lr 0.01–0.05`` ("nowhere" for none).

    >>> grid_text([[8, 0.01], [8, 0.02], [8, 0.05], [4, 0.02]], [0.01, 0.02, 0.03, 0.05])
    'μ 4 at lr 0.02; μ 8 at lr 0.01–0.02 and 0.05'
    """
    parts = []
    for mu in sorted({int(m) for m, _ in settings}):
        at = sorted(learning_rates.index(lr) for m, lr in settings if m == mu)
        neighbours = itertools.groupby(enumerate(at), lambda pair: pair[1] - pair[0])
        runs = [[i for _, i in run] for _, run in neighbours]
        text = [
            f"{learning_rates[r[0]]:g}" + (f"–{learning_rates[r[-1]]:g}" if len(r) > 1 else "")
            for r in runs
        ]
        parts.append(
            f"μ {mu} at lr " + (", ".join(text[:-1]) + " and " if text[1:] else "") + text[-1]
        )
    return "; ".join(parts) or "nowhere"


def side_text(results: Mapping[str, Any], finding: Mapping[str, Any], name: str) -> str:
    """Where one side of a finding is stated (discovery and confirmation agree), and what the
    third set says there; "not detectable here" where no setting is stated."""
    side, lrs = finding[name], results["learning_rates"]
    if not side["stated"]:
        return "not detectable here"
    held, stated = len(side["held"]), len(side["stated"])
    text = f"{grid_text(side['held'], lrs)} ({held} of the {count(stated, 'setting')} "
    text += "both sets agree on"
    if side["contradicted"]:
        text += f"; the third set goes the other way at {grid_text(side['contradicted'], lrs)}"
    unconfirmed = [s for s in side["stated"] if s not in side["held"] + side["contradicted"]]
    if unconfirmed:
        text += f"; the third set's band holds 0 at {grid_text(unconfirmed, lrs)}"
    return text + ")"


def finding_sentence(results: Mapping[str, Any], finding: Mapping[str, Any]) -> str:
    """The finding as one paragraph: the claim in its paper's words (a control: what it
    isolates), what is compared, and where each side holds on all three sets of seeds."""
    metric = results["metrics"][finding["metric"]]
    a, b = label(results, finding["method"]), label(results, finding["versus"])
    n = {s: v["seeds"] for s, v in results["sets"].items()}
    said = "its paper" if finding["kind"] == "claim" else "the control"
    return (
        f"**{finding['claim']}** ({finding['source']}; {said}: {finding['quote']}). {metric}, "
        f"{a} minus {b}, at {count(len(finding['settings']), 'setting')}, on "
        f"{' + '.join(map(str, n.values()))} seeds. Its way on all three sets: "
        f"{side_text(results, finding, 'supports')}. The other way: "
        f"{side_text(results, finding, 'against')}."
    )


def findings_table(results: Mapping[str, Any]) -> Table:
    """Per finding: the claim or control, the comparison, and where each side holds on all
    three sets of seeds (with how many of the settings the first two agree on the third
    confirms)."""
    header = ["claim or control (source)", "compared", "its way, on all three sets"]
    header.append("the other way, on all three sets")
    rows = []
    for f in results["findings"]:
        compared = f"{label(results, f['method'])} − {label(results, f['versus'])}: {f['metric']}"
        rows.append(
            [
                f"{f['claim']} ({f['source']})",
                compared,
                side_text(results, f, "supports"),
                side_text(results, f, "against"),
            ]
        )
    return header, rows


def curve_table(results: Mapping[str, Any], finding: Mapping[str, Any]) -> Table:
    """A finding's curves: per mu (rows) and learning rate (columns), the confirmation set's
    mean difference and each set's band as a mark (:data:`MARKS`: discovery, confirmation,
    third)."""
    lrs, settings = results["learning_rates"], [tuple(s) for s in finding["settings"]]
    curves = finding["curves"]
    rows = []
    for mu in dict.fromkeys(mu for mu, _ in settings):
        row = [f"μ {mu}"]
        for lr in lrs:
            i = settings.index((mu, lr))
            marks = "".join(MARKS[curves[s]["sign"][i]] for s in curves)
            row.append(f"{curves['confirmation']['mean'][i]:+.3f} {marks}")
        rows.append(row)
    return ["", *(f"lr {lr:g}" for lr in lrs)], rows


def score_table(results: Mapping[str, Any], seed_set: str, mu: int) -> Table:
    """Per method: the mean final accuracy at each learning rate, at one mu."""
    lrs = results["learning_rates"]
    rows = [
        [label(results, m)]
        + [f"{cell_of(results, seed_set, m, lr, mu)['mean']['score']['mean']:.3f}" for lr in lrs]
        for m in results["methods"]
    ]
    return ["method", *(f"lr {lr:g}" for lr in lrs)], rows
