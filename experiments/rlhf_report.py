"""What the RLHF study writes: ``rlhf_study.json``, ``RESULTS_LLM.md`` and two figures
(:func:`experiments.report.write_report`).

The markdown's tables and sentences are the notebook's (:mod:`ppo_viz.rlhf.results`), the
figures too (:mod:`ppo_viz.rlhf.figures`), so the files and the notebook show the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.report import INTERVALS, json_text, machine_line, write_report
from ppo_viz.results import Table, markdown
from ppo_viz.rlhf.figures import curves_figure, score_figure
from ppo_viz.rlhf.results import (
    CURVES_FIGURE,
    RESULTS_JSON,
    RESULTS_MARKDOWN,
    SCORE_FIGURE,
    best_table,
    finding_sentence,
    findings_table,
    label,
    score_table,
    versus_grpo_table,
)

#: The cell whose curves over training the second figure shows.
CURVES_CELL = (0.02, 8)


def methods_table(results: Mapping[str, Any]) -> Table:
    """Each method as llm_clip runs it: objective, clip range, advantages."""
    header = ["method", "llm_clip objective", "ε_low, ε_high", "advantages"]
    advantages = {
        "group": "group's, over its std",
        "group_mean": "group's, mean only",
        "gae": "GAE with a value model; KL in the reward",
    }
    rows = []
    for key, m in results["methods"].items():
        low = "default" if m["eps_low"] is None else f"{m['eps_low']:g}"
        high = "default" if m["eps_high"] is None else f"{m['eps_high']:g}"
        if m["eps_high"] is not None and m["eps_high"] > 1e300:
            high = "none (no ratio reaches it)"
        rows.append(
            [label(results, key), m["objective"], f"{low}, {high}", advantages[m["advantages"]]]
        )
    return header, rows


def results_markdown(results: Mapping[str, Any]) -> str:
    """RESULTS_LLM.md: how and where it was made, the design, the findings and every table."""
    machine, sets, s, m = results["machine"], results["sets"], results["settings"], results["model"]
    seeds = sets["discovery"]["seeds"]
    first = sets["discovery"]["first_seed"]
    fresh = sets["confirmation"]["first_seed"]
    cells = len(results["cells"])
    lines = [
        "# RLHF in miniature: GRPO-family trainers on a tiny language model",
        "",
        f"Written by `{results['command']}` in {results['seconds']} s with {results['jobs']} "
        f"worker processes on a shared machine: {results['cpu_seconds']} s of CPU for the "
        f"{cells} cells and {results['summary_cpu_seconds']} s for the statistics, so about "
        f"{(results['cpu_seconds'] / results['jobs'] + results['summary_cpu_seconds']) / 60:.0f} "
        f"minutes on {results['jobs']} cores of its own."
        + (
            f" {results['resumed_cells']} cells were resumed from an earlier session's cache: "
            "their CPU time is counted, and so is the wall time of every session."
            if results.get("resumed_cells")
            else ""
        ),
        "",
        machine_line(
            machine,
            "A training run is chaotic: one last-bit difference in numpy's exp or tanh changes "
            "it from then on, so these numbers reproduce exactly only on a machine with this "
            "fingerprint, and elsewhere as aggregates over seeds.",
        ),
        "",
        "## Design",
        "",
        "**Task** (`tiny_lm.py`): count from a to b. The prompt is two digits a < b (b − a from "
        f"1 to 5, {m['prompts']} prompts); the right response is a, a+1, …, b and then `<eos>`. "
        "Reward 1 for the right response, 0 for a well-formed wrong one (digits, then "
        "`<eos>`), −0.5 for a malformed one (a non-digit token, an empty answer, or no `<eos>` "
        f"within {m['max_len']} tokens). Length and correctness pull apart: a wrong response "
        "can be short (it stopped early) or long (it overshot, or ran on).",
        "",
        f"**Model**: one tanh layer of {m['hidden']} units over one-hot features of the "
        f"prompt's digits, the position and the previous token ({m['vocabulary']}-token "
        f"vocabulary; {m['parameters']:,} parameters), with hand-written backpropagation. "
        "Every run starts from the same reference, distilled "
        "from a noisy teacher, which answers "
        f"{results['reference_accuracy']:.1%} of the prompts right (exact probability, "
        "averaged over prompts); its longer counts are harder.",
        "",
        f"**Training** (`tiny_rlhf.py`): {s['iterations']} iterations; each samples "
        f"{s['group_size']} responses to each of {s['prompts_per_batch']} prompts, then takes "
        "μ Adam steps on that batch, every token's gradient from `llm_clip.token_breakdown`. "
        f"KL to the reference in the loss: β = {s['kl_coef']:g} (PPO's is in its reward, "
        "β = 0.05). No dynamic sampling, overlong shaping, entropy bonus or gradient clipping.",
        "",
        *markdown(methods_table(results)),
        "",
        "**Grid and seeds**: learning rates "
        + ", ".join(f"{v:g}" for v in results["learning_rates"])
        + "; μ = "
        + ", ".join(str(v) for v in results["updates"])
        + f". Each cell runs {seeds} discovery seeds ({first}–{first + seeds - 1}) and "
        f"{seeds} confirmation seeds ({fresh}–{fresh + seeds - 1}); every method of a set "
        "runs on the same seeds with the same prompts and uniform numbers. Per seed: the final "
        "policy's exact probability of answering right, averaged over all prompts (the "
        "*accuracy*), the mean batch reward over training, and over the last quarter of "
        "training the mean response length, its excess over the right response's length (for "
        "all responses and for the wrong ones: which prompts were drawn does not move it) and "
        "the entropy per token; the share of tokens clipped over all updates.",
        "",
        "**Protocol**: a finding is a published claim about two methods and one metric. On the "
        "discovery seeds, among the cells where the claim can be tested, the one with the "
        "strongest paired difference in the claimed direction is chosen, and the one with the "
        "strongest against it; each is checked at the same cell on the confirmation seeds. A "
        "side is confirmed when both sets' 95% intervals exclude 0 on that side. Best learning "
        "rates are chosen on the discovery seeds and scored on the confirmation seeds. "
        f"Intervals are {INTERVALS} of a mean, or of a mean paired difference over seeds; one that "
        f'holds 0 reads "not distinguishable with {seeds} seeds".',
        "",
        f"![Final accuracy against the learning rate, per μ]({SCORE_FIGURE.name})",
        "",
        f"![Batch reward, response length, the wrong responses' excess length and entropy over "
        f"training at lr "
        f"{CURVES_CELL[0]:g}, μ = {CURVES_CELL[1]}]({CURVES_FIGURE.name})",
        "",
        "## Findings",
        "",
        *markdown(findings_table(results)),
        "",
    ]
    for finding in results["findings"]:
        lines += [f"- {finding_sentence(results, finding)}", ""]
    facts = results["facts_at_one_update"]
    if facts and facts["identical"]:
        same = "; ".join(
            f"{group}: {'yes' if ok else 'NO'}" for group, ok in facts["identical"].items()
        )
        lines += [
            "**With μ = 1** the policy that is trained is the one that sampled, so every ratio "
            "is exactly 1: the largest clip fraction of any μ = 1 cell is "
            f"{facts['largest_clip_fraction']:g} (the clip fraction that trainers log is 0, "
            "TRL issue #3120), and methods that differ only in their clip are the same run, "
            f"their stored per-seed values equal in every cell ({same}).",
            "",
        ]
    lines += ["## Each method at its best learning rate", ""]
    for mu in results["updates"]:
        lines += [f"μ = {mu}:", "", *markdown(best_table(results, mu)), ""]
    lines += ["## Final accuracy at every learning rate (confirmation seeds)", ""]
    for mu in results["updates"]:
        lines += [f"μ = {mu}:", "", *markdown(score_table(results, "confirmation", mu)), ""]
    lines += [
        "## Final accuracy minus GRPO's at the same learning rate and μ (paired, confirmation)",
        "",
    ]
    for mu in results["updates"]:
        lines += [f"μ = {mu}:", "", *markdown(versus_grpo_table(results, "confirmation", mu)), ""]
    return "\n".join(lines)


def write_results(results: Mapping[str, Any], output: Path) -> None:
    """The four files, into ``output`` (:func:`experiments.report.write_report`)."""
    files = {RESULTS_JSON: json_text(results), RESULTS_MARKDOWN: results_markdown(results)}
    files[SCORE_FIGURE] = (score_figure(results), 110)
    lr, mu = CURVES_CELL
    if lr in results["learning_rates"] and mu in results["updates"]:
        files[CURVES_FIGURE] = (curves_figure(results, lr, mu), 110)
    write_report(output, files)
