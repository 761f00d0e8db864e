"""What the RLHF study writes: ``rlhf_study.json``, ``RESULTS_LLM.md`` and two figures
(:func:`experiments.report.write_report`).

The markdown's tables and sentences are the notebook's (:mod:`ppo_viz.rlhf.results`), the
figures too (:mod:`ppo_viz.rlhf.figures`), so the files and the notebook show the same numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.evidence import THIRD_SET
from experiments.report import document, json_text, machine_line, third_set_line, write_report
from experiments.rlhf_findings import FINDINGS
from ppo_viz.results import Table
from ppo_viz.rlhf.figures import curves_figure, effects_figure, score_figure
from ppo_viz.rlhf.results import (
    CURVES_FIGURE,
    EFFECTS_FIGURE,
    RESULTS_JSON,
    RESULTS_MARKDOWN,
    SCORE_FIGURE,
    cell_of,
    curve_table,
    finding_sentence,
    findings_table,
    label,
    load_results,
    score_table,
)

#: The cell whose curves over training the second figure shows.
CURVES_CELL = (0.02, 8)
#: The accuracies the transfer check measures, by the prompts they average over.
PROMPT_NAMES = {"held_out": "held-out prompts", "trained": "trained prompts"}
#: The transfer check's results (:mod:`experiments.rlhf_transfer`), shown in this report.
TRANSFER_JSON = RESULTS_JSON.with_name("rlhf_transfer.json")


def methods_table(results: Mapping[str, Any]) -> Table:
    """Each method as llm_clip runs it: objective, clip range, advantages."""
    header = ["method", "llm_clip objective", "ε_low, ε_high", "advantages"]
    advantages = {
        "group": "group's, over its std",
        "group_mean": "group's, mean only",
        "gae": "GAE with a value model; KL in the reward (another algorithm)",
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


def critical_value_line(results: Mapping[str, Any]) -> str:
    """The sentence on the band's one critical value per curve, with the largest and the median
    of the curves' ``c``."""
    c = [curve["c"] for f in results["findings"] for curve in f["curves"].values()]
    if not c:
        return ""
    return (
        "One critical value serves a whole curve, so a setting where most seeds' differences "
        "are exactly 0 can inflate it (each curve's `c` in rlhf_study.json: up to "
        f"{max(c):.2f} here, against a median of {np.median(c):.2f}): such a curve's band is "
        "wider than it needs to be, and its stated ranges understate."
    )


def results_markdown(results: Mapping[str, Any], transfer: Mapping[str, Any] | None = None) -> str:
    """RESULTS_LLM.md: how and where it was made, the design, the findings, the ``transfer``
    check's section (if given) and every table."""
    machine, sets, s, m = results["machine"], results["sets"], results["settings"], results["model"]
    ranges = ", ".join(
        f"{v['seeds']} {name} seeds ({v['first_seed']}–{v['first_seed'] + v['seeds'] - 1})"
        for name, v in sets.items()
    )
    cells = len(results["cells"])
    blocks = [
        "# RLHF in miniature: GRPO-family trainers on a tiny language model",
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
        machine_line(
            machine,
            "A training run is chaotic: one last-bit difference in numpy's exp or tanh changes "
            "it from then on, so these numbers reproduce exactly only on a machine with this "
            "fingerprint, and elsewhere as aggregates over seeds.",
        ),
        "## Design",
        "**Task** (`tiny_lm.py`): count from a to b. The prompt is two digits a < b (b − a from "
        f"1 to 5, {m['prompts']} prompts); the right response is a, a+1, …, b and then `<eos>`. "
        "Reward 1 for the right response, 0 for a well-formed wrong one (digits, then "
        "`<eos>`), −0.5 for a malformed one (a non-digit token, an empty answer, or no `<eos>` "
        f"within {m['max_len']} tokens). Length and correctness pull apart: a wrong response "
        "can be short (it stopped early) or long (it overshot, or ran on).",
        f"**Model**: one tanh layer of {m['hidden']} units over one-hot features of the "
        f"prompt's digits, the position and the previous token ({m['vocabulary']}-token "
        f"vocabulary; {m['parameters']:,} parameters), with hand-written backpropagation. "
        "Every run starts from the same reference (seeds vary the sampling, not the start), "
        "distilled from a noisy teacher, which answers "
        f"{results['reference_accuracy']:.1%} of the prompts right (exact probability, "
        "averaged over prompts); its longer counts are harder.",
        f"**Training** (`tiny_rlhf.py`): {s['iterations']} iterations; each samples "
        f"{s['group_size']} responses to each of {s['prompts_per_batch']} prompts, then takes "
        "μ Adam steps on that batch, every token's gradient from `llm_clip.token_breakdown`. "
        f"KL to the reference in the loss: β = {s['kl_coef']:g} (PPO's is in its reward, "
        "β = 0.05). No dynamic sampling, overlong shaping, entropy bonus or gradient clipping. "
        "Every method runs on the same learning-rate grid, although masking and advantage "
        "scaling change the step each takes: compare curves, not one learning rate.",
        methods_table(results),
        "The last four rows are controls, each one change from a method above it: GRPO with "
        "a token-level band of 0.02, and GSPO at GRPO's 0.2 (is GSPO's gain its sequence ratio "
        "or its band?); Dr. GRPO's aggregation with GRPO's std-scaled advantages, and GRPO's "
        "objective with mean-only advantages (Dr. GRPO's two changes apart). **PPO** is another "
        "algorithm, not a control: it differs from GRPO in four ways at once (GAE advantages "
        "from a value model, the KL in the reward, token-mean aggregation, advantages whitened "
        "over the batch), so no finding compares it.",
        "**Grid and seeds**: learning rates "
        + ", ".join(f"{v:g}" for v in results["learning_rates"])
        + "; μ = "
        + ", ".join(str(v) for v in results["updates"])
        + f". Each cell runs {ranges}; every method of a set runs on the same seeds with the "
        "same prompts and uniform numbers. Per seed: the final policy's exact probability of "
        "answering right, averaged over all prompts (the *accuracy*: the prompts training draws "
        "from, none held out), the mean batch reward over training, and over the last quarter "
        "of training the mean response length, its excess over the right response's length "
        "(for all responses and for the wrong ones: which prompts were drawn does not move it) "
        "and the entropy per token; the share of tokens clipped over all updates.",
        "**Protocol**: a finding is a published claim (as its paper makes it), or a control "
        "that changes one thing, about two methods and one metric. On each set of seeds its "
        "curve is the paired difference, seed by seed, at every learning rate and every μ it "
        "is tested at, with a simultaneous 95% band over all those settings (max-t studentized "
        "bootstrap, 10,000 resamples of whole seeds from a fixed seed: all its points hold their "
        "true values together in about 95% of seed sets). A finding is stated where the "
        "discovery and the confirmation sets' bands both exclude 0 on one side; the third set "
        "tests the statement. A side with no such setting is *not detectable here*. No "
        "best-versus-best comparison is made: every learning rate is shown. "
        + critical_value_line(results),
        f"![Final accuracy against the learning rate, per μ]({SCORE_FIGURE.name})",
        f"![Batch reward, response length, the wrong responses' excess length and entropy over "
        f"training at lr "
        f"{CURVES_CELL[0]:g}, μ = {CURVES_CELL[1]}]({CURVES_FIGURE.name})",
        "## Findings",
        f"![Each finding's paired difference against the learning rate, per μ, with its "
        f"simultaneous 95% band]({EFFECTS_FIGURE.name})",
        findings_table(results),
        third_set_line(results["third_set"], results["sets"].get(THIRD_SET)),
    ]
    blocks += [f"- {finding_sentence(results, finding)}" for finding in results["findings"]]
    facts = results["facts_at_one_update"]
    if facts and facts["identical"]:
        same = "; ".join(
            f"{group}: {'yes' if ok else 'NO'}" for group, ok in facts["identical"].items()
        )
        blocks.append(
            "**With μ = 1** the policy that is trained is the one that sampled, so every ratio "
            "is exactly 1: the largest clip fraction of any μ = 1 cell is "
            f"{facts['largest_clip_fraction']:g} (the clip fraction that trainers log is 0, "
            "TRL issue #3120), and methods that differ only in their clip are the same run, "
            f"their stored per-seed values equal in every cell ({same})."
        )
    blocks += transfer_section(transfer) if transfer else []
    blocks += [
        "## The curves",
        "Per finding, each cell is the confirmation set's mean difference at that learning rate "
        "and μ, then one mark per set (discovery, confirmation, third): + where its simultaneous "
        "band is above 0, − below, · where it holds 0.",
    ]
    for finding in results["findings"]:
        blocks += [f"**{finding['key']}**:", curve_table(results, finding)]
    blocks.append("## Final accuracy at every learning rate (confirmation seeds)")
    for mu in results["updates"]:
        blocks += [f"μ = {mu}:", score_table(results, "confirmation", mu)]
    return document(*blocks)


def transfer_section(t: Mapping[str, Any]) -> list[str | Table]:
    """ "Does it transfer?": the design of the check (:mod:`experiments.rlhf_transfer`), how
    many stated sides hold, and per side and metric its band and verdict."""
    first, n = t["sets"]["transfer"]["first_seed"], t["sets"]["transfer"]["seeds"]
    ref, held = t["reference_accuracy"], t["held_out"]
    trained = t["model"]["prompts"] - len(held)
    grid = f"μ {' and '.join(map(str, t['updates']))} at lr " + ", ".join(
        f"{lr:g}" for lr in t["learning_rates"]
    )
    grid = " and ".join(grid.rsplit(", ", 1))
    names = {k: f"accuracy, {v}" for k, v in PROMPT_NAMES.items()}
    finding_of = {f.key: f for f in FINDINGS}

    def tally(rows: list[dict[str, Any]]) -> str:
        verdicts = [r["verdict"] for r in rows]
        every, turned = verdicts.count("holds"), verdicts.count("reversed")
        nothing = verdicts.count("not detectable here")
        some = len(verdicts) - every - turned - nothing
        return (
            f"of the {len(verdicts)} sides tested, {every} hold at every setting tested, {some} "
            f"at some, {nothing} {'is' if nothing == 1 else 'are'} not detectable here and "
            f"{turned} {'is' if turned == 1 else 'are'} reversed"
        )

    rows = []
    for r in t["transfer"]:
        f, band, metric = finding_of[r["key"]], r["band"], names.get(r["metric"], r["metric"])
        at = [f"μ {mu} lr {lr:g}" for mu, lr in r["settings"]]
        shown = zip(at, band["mean"], band["low"], band["high"], strict=True)
        rows.append(
            [
                r["key"],
                "its way" if r["side"] == "supports" else "the other way",
                f"{label(t, f.method)} − {label(t, f.versus)}: {metric}",
                "; ".join(f"{s}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]" for s, m, lo, hi in shown),
                r["verdict"],
            ]
        )
    main = [r for r in t["transfer"] if r["metric"] != "trained"]
    on_trained = [r for r in t["transfer"] if r["metric"] == "trained"]
    return [
        "## Does it transfer?",
        "Every run above starts from one reference and is scored on the prompts it trains on. "
        f"`{t['command']}` changes both at once on {n} fresh seeds ({first}–{first + n - 1}), "
        f"in {t['cpu_seconds']} s of CPU for its {len(t['cells'])} cells (distilling the "
        "references included): each run starts from, "
        "and keeps its KL to, a reference distilled from the same teacher with the run's own "
        f"seed (these answer {ref['held_out']['per_seed']:.1%} of the held-out prompts right and "
        f"{ref['trained']['per_seed']:.1%} of the others; the shared one "
        f"{ref['held_out']['shared']:.1%} and {ref['trained']['shared']:.1%}), and training draws "
        f"from {trained} of the {t['model']['prompts']} prompts: the {len(held)} whose a + b is "
        "a multiple of 5 (" + ", ".join(f"{a}→{b}" for a, b in held) + ") are held out, and "
        "the accuracy is measured on them, and on the trained ones beside. Each side of a "
        "finding stated above (all three sets agree) is tested at those of its stated settings "
        f"at {grid}, by the same simultaneous 95% band over those settings: it *holds* where "
        "the band excludes 0 on the stated side, is *reversed* where it excludes 0 on the other.",
        f"Judged by the accuracy on the held-out prompts, {tally(main)}; by the accuracy on "
        f"the trained prompts, {tally(on_trained)}. Each row: the mean difference over the "
        "seeds at each setting tested, and its band.",
        (["finding", "side", "compared", "mean [band] per setting", "here"], rows),
        *length_table(t),
        *control_tables(t),
    ]


def length_table(t: Mapping[str, Any]) -> list[str | Table]:
    """GSPO's and GRPO's clip fraction per right-answer length, from the transfer check's runs
    (each cell's mean over its seeds that drew such a prompt); none where they were not kept."""
    per_seed = t["cells"][0]["per_seed"]
    lengths = [k.rpartition("_")[2] for k in per_seed if k.startswith("clip_fraction_")]
    if not lengths or not {"grpo", "gspo"} <= set(t["methods"]):
        return []
    rows = []
    for method, mu, lr in itertools.product(("grpo", "gspo"), t["updates"], t["learning_rates"]):
        values = cell_of(t, "transfer", method, lr, mu)["per_seed"]
        shares = (np.nanmean(np.array(values[f"clip_fraction_{n}"], float)) for n in lengths)
        rows.append([label(t, method), f"{mu}", f"{lr:g}", *(f"{v:.3f}" for v in shares)])
    return [
        "**GSPO's clip fraction against answer length.** In the check's GRPO and GSPO runs, the "
        "share of tokens clipped over all updates in responses to prompts whose right answer has "
        f"{lengths[0]} to {lengths[-1]} tokens (`<eos>` included), each a mean over the seeds:",
        (["method", "μ", "lr", *(f"{n} tokens" for n in lengths)], rows),
    ]


def control_tables(t: Mapping[str, Any]) -> list[str | Table]:
    """The transfer check's two controls (:func:`experiments.rlhf_transfer.control_tests`):
    GSPO against the GRPO that clips as many tokens, and minibatches beside epochs."""
    tests = t.get("control_tests")
    if not tests:
        return []
    names = {k: v["label"] for k, v in (*t["methods"].items(), *t["controls"].items())}
    split = next(v for v in t["controls"].values() if v["minibatches"] > 1)
    grpos = [m for m in tests["clip_match"][0]["clip_fraction"] if m != "gspo"]

    def band(values: Sequence[float]) -> str:
        return "{:+.3f} [{:+.3f}, {:+.3f}]".format(*values)

    def sides(rows: list[dict[str, Any]], name: str) -> str:
        bands = [r[name]["held_out"] for r in rows]
        under, over = sum(b[2] < 0 for b in bands), sum(b[1] > 0 for b in bands)
        return f"below 0 at {under} of {len(rows)} settings and above 0 at {over}"

    matched = [
        [f"{r['setting'][0]}", f"{r['setting'][1]:g}"]
        + [f"{r['clip_fraction'][m]:.4f}" for m in ("gspo", *grpos)]
        + [names[r["matched"]], *(band(r["gspo_minus_matched"][m]) for m in PROMPT_NAMES)]
        for r in tests["clip_match"]
    ]
    minibatch = [
        [f"{r['minibatches']}", f"{r['setting'][0]}", f"{r['setting'][1]:g}"]
        + [f"{r['clip_fraction'][m]:.4f}" for m in ("grpo", "gspo")]
        + [band(r[d][m]) for d in ("grpo_minus_unclipped", "gspo_minus_grpo") for m in PROMPT_NAMES]
        for r in tests["minibatch"]
    ]
    split_rows = [r for r in tests["minibatch"] if r["minibatches"] > 1]
    shares = [
        r["clip_fraction"][r["matched"]] / r["clip_fraction"]["gspo"] for r in tests["clip_match"]
    ]
    epochs = sorted({r["setting"][0] for r in tests["minibatch"] if r["minibatches"] == 1})
    return [
        "**GSPO against a GRPO that clips as many tokens.** GSPO's band switches off far more "
        "tokens than GRPO's at ε 0.2, so GRPO ran too at token bands of "
        + ", ".join(f"{t['controls'][m]['eps_high']:g}" for m in grpos if m in t["controls"])
        + " (both sides) on the same seeds. Per setting: each one's share of tokens clipped "
        "(mean over the seeds) beside GSPO's, the GRPO whose share is nearest GSPO's (chosen by "
        f"the clip fraction alone, never by the accuracy; it clips {min(shares):.0%} to "
        f"{max(shares):.0%} as many tokens as GSPO), and GSPO minus it in accuracy, with "
        "the band of that comparison over these settings. On the held-out prompts that band is "
        f"{sides(tests['clip_match'], 'gspo_minus_matched')}.",
        (
            ["μ", "lr", "GSPO clipped", *(f"{names[m]} clipped" for m in grpos), "nearest"]
            + [f"GSPO − nearest, {PROMPT_NAMES[m]}" for m in PROMPT_NAMES],
            matched,
        ),
        f"**Minibatches beside epochs.** GRPO, GSPO and the unclipped surrogate at μ 1 with each "
        f"batch split into {split['minibatches']} minibatches, one Adam step each (from the "
        f"second the ratio is not 1), beside the check's μ {' and '.join(map(str, epochs))} "
        "over the whole batch (1 minibatch) at the same learning rates; each difference's band "
        "is over the rows with as many minibatches. With minibatches, on the held-out prompts, "
        f"the band of GRPO − unclipped is {sides(split_rows, 'grpo_minus_unclipped')}; that of "
        "GSPO − GRPO "
        f"{sides(split_rows, 'gspo_minus_grpo')}.",
        (
            ["minibatches", "μ", "lr", "GRPO clipped", "GSPO clipped"]
            + [
                f"{d}, {PROMPT_NAMES[m]}"
                for d in ("GRPO − unclipped", "GSPO − GRPO")
                for m in PROMPT_NAMES
            ],
            minibatch,
        ),
    ]


def write_results(results: Mapping[str, Any], output: Path) -> None:
    """The four files, into ``output`` (:func:`experiments.report.write_report`), the report
    with the transfer check's section when its results are in ``output`` too."""
    transfer = output / TRANSFER_JSON.name
    transfer = load_results(transfer) if transfer.exists() else None
    files = {
        RESULTS_JSON: json_text(results),
        RESULTS_MARKDOWN: results_markdown(results, transfer),
    }
    files[SCORE_FIGURE] = (score_figure(results), 110)
    if results["findings"]:
        files[EFFECTS_FIGURE] = (effects_figure(results), 110)
    lr, mu = CURVES_CELL
    if lr in results["learning_rates"] and mu in results["updates"]:
        files[CURVES_FIGURE] = (curves_figure(results, lr, mu), 110)
    write_report(output, files)
