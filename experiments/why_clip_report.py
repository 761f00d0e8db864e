"""What the why-clip command writes: ``why_clip.json``, ``RESULTS.md`` and ``why_clip.png``
(:func:`experiments.report.write_report`).

The markdown's tables are the notebook's (:mod:`ppo_viz.why_clip.results`), the figure holds
the notebook's (:func:`ppo_viz.why_clip.figures.results_figure`), so the three files and the
notebook always show the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.claims import FLIP_HEDGED, FLIP_PLAIN, FLIP_RESAMPLES, keeps_every_verdict
from experiments.evidence import STABLE_SHARE
from experiments.report import INTERVALS, document, json_text, machine_line, write_report
from ppo_viz.results import Table
from ppo_viz.why_clip.figures import HEADLINE, range_figure, results_figure
from ppo_viz.why_clip.methods import MAIN_METHODS, METHODS
from ppo_viz.why_clip.results import (
    PAPER,
    RESULTS_FIGURE,
    RESULTS_JSON,
    RESULTS_MARKDOWN,
    claims_table,
    difference,
    in_tier,
    one_set,
    range_table,
    seed_sets,
    seeds_text,
    settings_lines,
    step_text,
    table_1,
)


def sweep_table(results: Mapping[str, Any], name: str, paired: bool = False) -> Table:
    """Per method and step size (one seed set, :func:`one_set`): the mean score, and how many
    seeds succeeded and collapsed; ``paired``: the score minus PPO's (ε = 0.2), seed by seed."""
    sweep = results["sweeps"][name]
    header = ["method", *(step_text(v) for v in sweep["values"])]
    rows = [
        [METHODS[key].label]
        + [
            difference(c["vs_ppo"])
            if paired
            else f"{c['mean']:.3f} ({c['solved']}, {c['collapsed']})"
            for c in entry["cells"]
        ]
        for key, entry in sweep["methods"].items()
        if not (paired and key == "ppo")
    ]
    return header, rows


def header(results: Mapping[str, Any]) -> list[str]:
    """How, when and where the results were made: the title and two paragraphs."""
    machine, sweeps = results["machine"], results["sweeps"]
    sets = seed_sets(results)
    seeds = "; ".join(
        f"{s['title']}: " + ", ".join(f"{seeds_text(s, n)} ({n})" for n in sets)
        for s in sweeps.values()
    )
    cpu = results.get("cpu_seconds", 0)
    return [
        "# Why PPO clips, measured as a range of step sizes, on two sets of seeds",
        f"Written by `{results['command']}` in {results['seconds']} s with {results['jobs']} "
        f"worker processes on a shared machine; the cells took {cpu} CPU seconds in all "
        f"(about {cpu / 120:.0f} minutes on 2 free cores). Seeds: {seeds}.",
        machine_line(
            machine,
            "numpy's exp, log and tanh can differ in the last bit on another CPU or SIMD level, "
            "and a CartPole run is chaotic: one such bit changes its returns from then on. The "
            "bandit's numbers reproduce anywhere to 1e-6 (its per-seed scores are kept to six "
            "decimals); CartPole's exactly only on a machine with this fingerprint, and "
            "elsewhere as aggregates over seeds.",
        ),
    ]


DESIGN = [
    "## Design",
    "Each sweep varies one step size with everything else fixed: the bandit's gradient step on "
    "the logits, CartPole's Adam learning rate. The epochs per batch K are a factor of their "
    "own: the bandit at K = 20; CartPole at K = 4 for six methods, and at K = 1 and K = 10 for "
    "PPO and the unclipped surrogate (plain policy gradient is the unclipped surrogate at "
    "K = 1). Every method runs on the same seeds, and a seed's random numbers are the same for "
    "every method. Scores are normalized: 0 for a uniform random policy, 1 for the best "
    "possible one (the bandit's best arm: the final policy's true expected reward; CartPole: "
    "500 steps, the mean return of the last 20 episodes). A seed succeeds with a bandit score "
    "of at least 0.95, or a CartPole return of at least 475; it collapses when its final bandit "
    "policy puts at least 0.95 on a wrong arm, or its CartPole return is below a random "
    f"policy's. A method is stable at a step size where at least {STABLE_SHARE:.0%} of its "
    f"seeds succeed. Intervals are {INTERVALS} of the mean, or of the "
    "mean paired difference; a difference whose interval holds 0 is *not distinguishable* with "
    "that many seeds (n.d.), which does not make the two equal.",
    "**Replication.** Every cell ran on two sets of seeds. The claims below were chosen on the "
    "*discovery* set and committed before the *confirmation* set's results, as many other "
    "seeds, were read (its cells had started to run); on the bandit, seeds 400 to 799 had "
    "served once before, to check this study's first version, so there the confirmation set "
    "was not unseen. A claim is stated only where the confirmation set gives the same verdict. "
    "A method's "
    "best step size is chosen on the discovery set and scored on both, so the confirmation "
    "set's score at the best is free of the winner's curse (choosing on the seeds one scores). "
    "Ranges are compared by their upper ends: their lower ends are the grid's edge on the "
    "bandit (0.05) for most methods, and a budget limit on CartPole (with 50,000 steps a small "
    "learning rate learns too slowly: at CleanRL's 2.5e-4 no seed of any method solves it).",
    "**How often a verdict would flip.** For each claim, fresh sets of as many seeds are drawn "
    f"({FLIP_RESAMPLES:,} times, with replacement) from both sets pooled, each judged by the "
    "normal-approximation 95% interval of a difference (a quick stand-in for the percentile "
    "bootstrap that judges each set: where the two disagree near an interval's edge, the flip "
    "chance partly measures that); the share of draws with another verdict is the claim's "
    "*flip chance*, a rough plug-in estimate. A claim that holds on "
    f"both sets is stated when its flip chance is at most {FLIP_PLAIN:.0%}; up to "
    f"{FLIP_HEDGED:.0%} it is a tendency, given with its flip chance; beyond, it is not stated.",
    "CartPole's agent is CleanRL's `ppo.py` in numpy with three deviations: the value loss is "
    "not clipped, a truncated episode is bootstrapped from its last observation, and the "
    "learning rate falls to 0 over the run's 50,000 steps (CleanRL: 500,000). Early stopping "
    "is Stable-Baselines3's rule at `target_kl = 0.01`: before each minibatch step, the k3 "
    "estimate of the KL on that minibatch is compared with 1.5 x 0.01 = 0.015, and once it "
    "exceeds it the run takes no more steps on that rollout (on the bandit, a minibatch is the "
    "whole batch).",
]


#: Each tier of claims (:func:`ppo_viz.why_clip.results.claim_tier`) under its heading.
TIER_TITLES = {"Stated": "stated", "Held on both sets, not robust": "hedged", "Not stated": "other"}


def claims_blocks(results: Mapping[str, Any]) -> list[str | Table]:
    """The claims: each with both sets' estimates, intervals and verdicts, its flip chance and
    whether it is stated."""
    claims = results.get("claims", [])
    if not claims:
        return []
    shown, tendencies = in_tier(results, "stated"), in_tier(results, "hedged")
    flips = sum(c["flip"] for c in shown)
    return [
        "## Claims, checked on a second set of seeds",
        f"{len(shown)} of {len(claims)} claims are stated: each held on both sets and would flip "
        f"on at most {FLIP_PLAIN:.0%} of fresh sets. By their flip chances, a re-run on other "
        f"fresh seeds would fail to confirm about {flips:.2f} of them on average, and confirm "
        f"every one with a chance of about {keeps_every_verdict(results):.0%} (rough: plug-in "
        f"flip chances, taken as independent). {len(tendencies)} more held on "
        f"both sets but would flip on more than {FLIP_PLAIN:.0%} (up to {FLIP_HEDGED:.0%}) of "
        "fresh sets: tendencies, given with their flip chance, not findings. The rest are not "
        "stated.",
        *(
            block
            for title, tier in TIER_TITLES.items()
            for block in (f"### {title}", claims_table(results, tier=tier))
        ),
    ]


def sweep_blocks(results: Mapping[str, Any], name: str) -> list[str | Table]:
    """One sweep: its ranges on each set, then per set its means and paired differences."""
    sweep = results["sweeps"][name]
    blocks = [
        f"## {sweep['title']}: each method's stable range",
        range_table(results, name),
        f"n.d.: not distinguishable with {sweep['seeds']} seeds (the 95% interval holds 0).",
    ]
    for seed_set in seed_sets(results):
        view = one_set(results, seed_set)
        where = f"{seed_set} set ({seeds_text(sweep, seed_set)})"
        blocks += [f"Mean score per step size, {where} (seeds that succeeded, that collapsed):"]
        blocks += [sweep_table(view, name)]
        if "ppo" in sweep["methods"] and len(sweep["methods"]) > 1:
            blocks += [f"Score minus PPO's (ε = 0.2) at the same step size, {where}:"]
            blocks += [sweep_table(view, name, paired=True)]
    return blocks


def results_markdown(results: Mapping[str, Any]) -> str:
    """RESULTS.md: how and where it was made, the design, the claims, the figure, every table."""
    figure = (
        f"![Final score against step size, every seed set together; lines are means, the "
        f"shading (PPO and unclipped) the 10th to 90th percentile of the seeds; the strips "
        f"mark the step sizes where at least {STABLE_SHARE:.0%} of the seeds succeed on each "
        f"set]({RESULTS_FIGURE.name})"
    )
    sweeps = [b for name in results["sweeps"] for b in sweep_blocks(results, name)]
    table_1s = [
        block
        for seed_set in seed_sets(results)
        for block in (f"On the {seed_set} set:", table_1(one_set(results, seed_set)))
    ]
    settings = [f"- {line}" for line in settings_lines(results)]
    return document(
        *header(results), *DESIGN, *claims_blocks(results), figure, *sweeps, *TABLE_1, *table_1s,
        "## Settings", settings,
    )  # fmt: skip


TABLE_1 = [
    "## Next to the PPO paper's Table 1",
    f"{PAPER}: the average normalized score over seven MuJoCo tasks (one million steps, "
    "3 seeds each; 0 a random policy, 1 the best result; the paper notes that one task, "
    "HalfCheetah, pulls the unclipped row below 0). The paper ran every task with one shared "
    "set of hyperparameters (its Table 3: Adam 3e-4, 10 epochs, minibatches of 64, "
    "horizon 2048), searching only ε, β and d_targ. Here: mean ± half the 95% interval, at "
    "a fixed step size or at the method's best on the discovery set. Magnitudes do not "
    "compare across these columns or with the paper's: each task normalizes differently, "
    "is easier or harder, and runs another budget; only the order of the methods within a "
    "column can be compared, and where two methods' intervals overlap, not even that.",
]


def figure_panels(results: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The range figure's panels for a partial run: the sweeps and methods it ran."""
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
    """The three files, into ``output`` (:func:`experiments.report.write_report`).  The full
    plan's figure is :func:`results_figure`; a partial run's shows what it ran."""
    full = {"bandit", "cartpole", "cartpole_k1", "cartpole_k10"} <= set(results["sweeps"])
    figure = results_figure(results) if full else range_figure(results, figure_panels(results))
    text = {RESULTS_JSON: json_text(results), RESULTS_MARKDOWN: results_markdown(results)}
    write_report(output, {**text, RESULTS_FIGURE: (figure, 100)})
