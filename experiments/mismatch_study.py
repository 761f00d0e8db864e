"""Ratios that are not 1: a miniature inference engine's mismatch, measured and trained (issue 45).

From the repository root::

    python -m experiments.mismatch_study            # the study (about 7 minutes of CPU over
                                                    # its --jobs processes; the wall time grows
                                                    # with the machine's load; its report gives
                                                    # both, measured):
                                                    # RESULTS_MISMATCH.md, mismatch_study.json
    python -m experiments.mismatch_study --quick    # a smoke run in seconds; writes nothing
    python -m experiments.mismatch_study --restate  # statistics and report again from the JSON

Four sources of mismatch, each over its size (:data:`SOURCES`), the others off: the engine's
logits rounded to ``bits`` significant bits, its nucleus ``top_p``, a policy ``stale``
iterations old, and ``steps_per_generation`` optimizer steps per generated batch
(:class:`tiny_rlhf.Rollout`).  Per size, on :data:`BATCHES` GRPO batches from the reference
model (:mod:`ppo_viz.mismatch.measures`): the gaps ``logp_old - logp_rollout``, the share of
tokens clipped at mu = 1 by a trainer that takes the engine's log-probabilities as old, and
the bias of the gradient against the same draws on-policy, uncorrected and under each
correction, with its noise floor.  Then GRPO trains (mu = 1, :data:`SETTINGS`) at every size
with no correction and with each of TRL's four modes and OPSM, on three sets of seeds
(:data:`experiments.evidence.ALL_SEED_SETS`) with shared random numbers: each correction's
paired difference from none, with a simultaneous band over the sizes
(:func:`experiments.evidence.simultaneous_band`).  A finding is stated at the sizes where the
discovery and confirmation sets' bands exclude 0 on the same side and the third set's does too
(:func:`experiments.evidence.stated_side`); the report counts what the third set confirms.

It runs as every study does (:mod:`experiments.runner`: cache, resume, ``--jobs``).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # small matrices; the machine's CPUs are shared

import itertools
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments import evidence, report, runner
from experiments.evidence import ALL_SEED_SETS, SEED_SETS, sign_of, simultaneous_band
from experiments.report import INTERVALS, document, json_text, machine_line, write_report
from ppo_viz.mismatch import measures
from ppo_viz.results import RESULTS_DIR
from tiny_lm import V, reference_model
from tiny_rlhf import TrainSettings, methods_named, train

COMMAND = "python -m experiments.mismatch_study"
RESULTS_JSON = RESULTS_DIR / "mismatch_study.json"
FILES = (RESULTS_JSON, RESULTS_DIR / "RESULTS_MISMATCH.md")
FILES += (RESULTS_DIR / "mismatch_study.cells.jsonl",)
SCRATCH_DIR = Path(tempfile.gettempdir()) / "mismatch_study_partial"
SOURCES = measures.SOURCES  # each source's sizes, the first "off"
MEASURED = ("bits", "top_p", "stale")  # the batch measurements (no engine gap for the last)
SETTINGS = TrainSettings(updates=1, learning_rate=1e-2)  # GRPO at mu = 1
SEEDS_PER_SET, BATCHES = 20, 512
METRICS = ("score", "reward_mean")
KEYS = ("kind", "source", "size", "correction", "seed_set")  # what names a cell


@dataclass(frozen=True)
class Cell:
    """GRPO trained at one source's size with one correction (``kind`` "train"), or the batch
    measurements at that size (``kind`` "measure", correction "all")."""

    seed_set: str
    kind: str
    source: str
    size: Any
    correction: str
    first_seed: int
    seeds: int
    iterations: int = SETTINGS.iterations
    batches: int = BATCHES

    @property
    def rollout(self) -> measures.Rollout:
        correction = "none" if self.kind == "measure" else self.correction
        return measures.rollout_at(self.source, self.size, correction)

    @property
    def key(self) -> str:
        """What the numbers depend on: equal rollouts (every source's "off") run once."""
        size = self.iterations if self.kind == "train" else self.batches
        what = [self.kind, repr(self.rollout), self.first_seed, self.seeds, size]
        return json.dumps(what)

    @property
    def cost(self) -> float:
        return self.batches / 100 if self.kind == "measure" else self.seeds * self.iterations / 500

    def label(self) -> str:
        return f"{self.seed_set}: {self.kind} {self.source} {self.size}, {self.correction}"


@dataclass(frozen=True)
class Plan:
    """What a run covers: seeds per set, iterations, measurement batches, the first seed and
    the sizes of each source."""

    seeds: int
    iterations: int
    batches: int
    seed_offset: int
    sources: dict

    def first_seed(self, seed_set: str) -> int:
        return self.seed_offset + ALL_SEED_SETS.index(seed_set) * self.seeds

    @property
    def cells(self) -> list[Cell]:
        """The measurement cells, then every set's training cells."""
        iterations, first = self.iterations, self.seed_offset
        cells = [
            Cell(SEED_SETS[0], "measure", s, size, "all", first, 1, iterations, self.batches)
            for s in MEASURED
            for size in self.sources[s]
        ]
        for seed_set, (source, sizes) in itertools.product(ALL_SEED_SETS, self.sources.items()):
            first = self.first_seed(seed_set)
            cells += [
                Cell(seed_set, "train", source, z, c, first, self.seeds, iterations)
                for z in sizes
                for c in measures.CORRECTIONS
            ]
        return cells


FULL_PLAN = Plan(SEEDS_PER_SET, SETTINGS.iterations, BATCHES, 0, SOURCES)
QUICK_PLAN = Plan(3, 10, 16, 0, {s: sizes[:2] for s, sizes in SOURCES.items()})


def run_cell(cell: Cell) -> dict[str, Any]:
    """Train or measure one cell; plain data and the CPU seconds."""
    started = time.process_time()
    if cell.kind == "train":
        settings = TrainSettings(**{**asdict(SETTINGS), "iterations": cell.iterations})
        seeds = range(cell.first_seed, cell.first_seed + cell.seeds)
        history = train(methods_named(["grpo"]), settings, seeds, cell.rollout)["grpo"]
        measured = history.per_seed()
        raw = {k: measured[k].tolist() for k in ("score", "reward_mean", "clip_fraction")}
    else:
        rollout = cell.rollout
        batch = measures.mismatch_batch(
            rollout.engine, min(cell.batches, 64), cell.first_seed, rollout.stale
        )
        gaps = measures.gaps(batch)
        raw = {
            "gap_mean": float(gaps.mean()),
            "gap_quantiles": np.quantile(gaps, [0.01, 0.5, 0.99]).tolist(),
            "mu1": measures.ratio_at_mu1(batch),
            "bias": measures.bias_by_correction(
                rollout.engine, cell.batches, cell.first_seed, rollout.stale
            ),
        }
    return {**raw, "cpu_seconds": time.process_time() - started}


def results_of(plan: Plan, raw: dict[str, Any]) -> dict[str, Any]:
    """The results as plain data, statistics included."""
    return summarize(
        {
            "settings": {**asdict(SETTINGS), "iterations": plan.iterations, "method": "grpo"},
            "seeds_per_set": plan.seeds,
            "sets": {s: plan.first_seed(s) for s in ALL_SEED_SETS},
            "batches": plan.batches,
            "responses_per_batch": measures.PROMPTS_PER_BATCH * measures.GROUP,
            "opsm_threshold": measures.OPSM_THRESHOLD,
            "clip_max": measures.CLIP_MAX,
            "parameters": sum(p[0].size for p in reference_model().params),
            "vocabulary": V,
            "sources": {s: list(v) for s, v in plan.sources.items()},
            "cells": [{**asdict(c), "raw": raw[c.key]} for c in plan.cells],
        }
    )


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Curves of the measurements, the paired differences with their bands, the findings
    (all three sets agree), what the third set confirms and the controls, from the cells."""
    got = {tuple(c[k] for k in KEYS): c["raw"] for c in results["cells"]}
    sources = results["sources"]
    curves = {s: [got["measure", s, z, "all", SEED_SETS[0]] for z in sources[s]] for s in MEASURED}
    bands, findings, nulls = {}, [], []
    for (source, sizes), c, metric in itertools.product(
        sources.items(), measures.CORRECTIONS[1:], METRICS
    ):
        found = agreement(got, source, sizes, metric, c, "none")
        bands[f"{source}/{c}/{metric}"] = found.pop("bands")
        entry = {"source": source, "correction": c, "metric": metric, **found}
        (findings if found["sizes"] else nulls).append(entry)
    off = [(s, sizes[0], seed_set) for s, sizes in sources.items() for seed_set in ALL_SEED_SETS]
    same = all(
        got["train", s, z, c, seed_set][m] == got["train", s, z, "none", seed_set][m]
        for s, z, seed_set in off
        for c in measures.CORRECTIONS[:-1]  # the control, negatives_dropped, acts anyway
        for m in (*METRICS, "clip_fraction")
    )
    opsm_vs_dropped = {  # OPSM minus its control: what OPSM does beyond dropping negatives
        source: agreement(got, source, sizes, "score", "opsm", "negatives_dropped")
        for source, sizes in sources.items()
    }
    exact = curves[MEASURED[0]][0]["bias"]
    controls = {
        "identical_without_mismatch": same,
        "exact_engine_bias": max(exact[k]["bias"] for k in measures.CORRECTIONS[:-1]),
        "independent_on_policy": [m["bias"]["control"] for v in curves.values() for m in v],
    }
    clipped = {
        s: [float(np.mean(got["train", s, z, "none", SEED_SETS[1]]["clip_fraction"])) for z in zs]
        for s, zs in sources.items()
    }
    derived = {"curves": curves, "bands": bands, "findings": findings, "nulls": nulls}
    sides = [(f, side) for f in findings + nulls for side in f["sides"]]
    derived["third_set"] = evidence.third_set_count([side for _, side in sides])
    derived["unconfirmed"] = [  # the sizes the first two sets state and the third does not
        {**{k: f[k] for k in ("source", "correction", "metric")}, "sizes": sizes}
        for f, side in sides
        for sizes in [[z for z in side["stated"] if z not in side["held"]]]
        if sizes
    ]
    derived["opsm_vs_negatives_dropped"] = opsm_vs_dropped
    return {**results, **derived, "controls": controls, "trained_clip_fraction": clipped}


def agreement(
    got: dict, source: str, sizes: list, metric: str, method: str, versus: str
) -> dict[str, Any]:
    """``method`` minus ``versus`` on ``metric``, seed by seed at each size of ``source``: each
    set's simultaneous band (``bands``); per side of 0 that discovery and confirmation state
    somewhere, the sizes stated, held and contradicted by the third set (``sides``,
    :func:`~experiments.evidence.stated_side`); the sizes where all three sets agree and the
    confirmation set's mean difference there (``sizes``, ``diff``)."""
    bands = {}
    for seed_set in ALL_SEED_SETS:
        runs = [
            [got["train", source, z, k, seed_set][metric] for z in sizes] for k in (method, versus)
        ]
        bands[seed_set] = simultaneous_band(np.subtract(*runs).T)
    signs = {
        k: [sign_of(ci) for ci in zip(b["low"], b["high"], strict=True)] for k, b in bands.items()
    }
    sides = [evidence.stated_side(signs, side) for side in (1, -1)]
    held, mean = sorted(i for side in sides for i in side["held"]), bands[SEED_SETS[1]]["mean"]
    named = [{k: [sizes[i] for i in v] for k, v in x.items()} for x in sides if x["stated"]]
    found = {"sizes": [sizes[i] for i in held], "diff": [mean[i] for i in held]}
    return {**found, "sides": named, "bands": bands}


def _difference_by_size(item: tuple[str, dict[str, Any]]) -> str:
    """``source at sizes by differences``, or that none was detectable."""
    source, found = item
    if not found["sizes"]:
        return f"{source}: not detectable here"
    diffs = ", ".join(f"{d:+.3f}" for d in found["diff"])
    return f"{source} at {', '.join(map(str, found['sizes']))} by {diffs}"


def results_markdown(results: dict[str, Any]) -> str:
    """RESULTS_MISMATCH.md: the settings, the batches per size, the controls, the findings."""
    s, b, c = results["settings"], results["batches"], results["controls"]
    sets = ", ".join(f"{k} from seed {v}" for k, v in results["sets"].items())
    cols = ("none", "token_truncate", "sequence_mask", "opsm")
    header = ["source", "size", "gap mean [1%, 99%]", "clipped at μ = 1 (outside)"]
    batches = [*header, *(f"bias: {k}" if k == cols[0] else k for k in cols), "floor"], []
    for source, curve in results["curves"].items():
        for size, m in zip(results["sources"][source], curve, strict=True):
            q, bias = m["gap_quantiles"], m["bias"]
            batches[1].append(
                [source, str(size), f"{m['gap_mean']:+.4f} [{q[0]:+.3f}, {q[2]:+.3f}]"]
                + [f"{m['mu1']['clipped']:.3f} ({m['mu1']['outside']:.3f})"]
                + [f"{bias[k]['bias']:.3f}" for k in cols]
                + [f"{bias['none']['floor']:.3f}"]
            )
    ratios = [v["bias"] / v["floor"] for v in c["independent_on_policy"]]
    shares = results["trained_clip_fraction"]
    trained = "; ".join(f"{k} {', '.join(f'{v:.3f}' for v in vs)}" for k, vs in shares.items())
    found = (
        ["source", "correction", "metric", "sizes", "difference from none (confirmation)"],
        [
            [f["source"], f["correction"], f["metric"], ", ".join(map(str, f["sizes"])), diffs]
            for f in results["findings"]
            for diffs in [", ".join(f"{d:+.3f}" for d in f["diff"])]
        ],
    )
    nulls = sorted({f"{n['source']}/{n['correction']}" for n in results["nulls"]
                    if n["metric"] == "score"})  # fmt: skip
    unconfirmed = [
        f"{u['source']}/{u['correction']}/{u['metric']} at {', '.join(map(str, u['sizes']))}"
        for u in results["unconfirmed"]
    ]
    third = {"seeds": results["seeds_per_set"], "first_seed": results["sets"][evidence.THIRD_SET]}
    bits = results["sources"]["bits"]
    at = bits.index(8) if 8 in bits else -1  # bf16's 8 bits (--quick has others)
    q = results["curves"]["bits"][at]["gap_quantiles"]
    return document(
        "# Ratios that are not 1: the engine's mismatch in miniature",
        f"Written by `{results['command']}` in {results['seconds']} s wall "
        f"({results['cpu_seconds']} s CPU, {results['jobs']} processes). "
        + machine_line(results["machine"], "Elsewhere the aggregates reproduce, not the bits."),
        f"GRPO on the tiny model ({results['parameters']:,} parameters) at μ = {s['updates']}, "
        f"learning rate {s['learning_rate']:g}, {s['iterations']} iterations of "
        f"{s['prompts_per_batch']} × {s['group_size']} responses (final accuracy, score: the "
        "exact probability that the final policy, untruncated, answers right, averaged over the "
        f"prompts); {results['seeds_per_set']} seeds per set ({sets}). Corrections: TRL's four "
        f"modes (clip_max {results['clip_max']:g}, no lower bound), OPSM at threshold "
        f"{results['opsm_threshold']:g}, and its control: every negative-advantage response "
        "dropped whatever its gap (negatives_dropped). Bands: max-t simultaneous 95% over a "
        f"source's sizes, {INTERVALS}.",
        "## Batches sampled at each size",
        f"Bias: |mean(g_engine − g_on-policy)| / |mean(g_on-policy)| over {b} batches "
        f"({b * results['responses_per_batch']:,} responses), the same random numbers on both "
        "sides; floor: its Monte Carlo standard error. A stale engine serves the reference model "
        f"while the trainer holds one GRPO run's policy (seed {measures.AHEAD_SEED}) that many "
        "iterations on: one run, not a spread over runs. Clipped at μ = 1: tokens whose gradient "
        "GRPO's clip switches off when the engine's log-probabilities serve as logp_old (verl, "
        "TRL); outside: |r − 1| > ε whatever A (CleanRL).",
        batches,
        "## Controls",
        [
            "- Every source off: each correction trains exactly as none on every seed: "
            f"**{'yes' if c['identical_without_mismatch'] else 'NO'}**; the exact engine's "
            f"gradient bias under every correction: {c['exact_engine_bias']:g}.",
            "- Two on-policy estimates from independent draws: bias / its floor from "
            f"{min(ratios):.2f} to {max(ratios):.2f} (noise alone gives about 1).",
            "- Share of tokens clipped by the trainer's own ratio (new / old, TRL's "
            f"recomputation), confirmation seeds, per size: {trained}.",
            "- OPSM minus its control (every negative answer dropped, whatever the gap), final "
            "accuracy, where all three sets' bands exclude 0: "
            + "; ".join(map(_difference_by_size, results["opsm_vs_negatives_dropped"].items()))
            + ".",
        ],
        "## Findings: all three seed sets' bands exclude 0 on the same side",
        report.third_set_line(results["third_set"], third)
        + f" Stated by the first two, not by the third: {'; '.join(unconfirmed) or 'none'}.",
        found,
        f"Not detectable here (final accuracy): {', '.join(nulls) or 'none'}.",
        LIMITS.format(vocabulary=results["vocabulary"], bits=bits[at], low=q[0], high=q[2]),
    )


LIMITS = """## What a 2,000-parameter model can and cannot show

It shows the mechanisms, each measured above: under top-p alone every gap is at most 0 (the
engine renormalises over fewer tokens), so every weight is at most 1 and a clip_max has nothing
to cut, and no weight brings back the tokens the engine never samples; a stale policy makes gaps
of both signs, which the weights re-weight; several steps per generated batch clip at μ = 1
while the engine's weights stay 1. It cannot show bf16 at scale: with {vocabulary} tokens the
gaps of {bits} bits lie within [{low:+.3f}, {high:+.3f}] (1% to 99%) here, where 100k tokens,
long responses and kernels that differ between engine and trainer compound them; nor MoE
routing that differs between the two, collapse over long training, or the throughput a stale
engine buys."""


def write_results(results: dict[str, Any], output: Path) -> None:
    write_report(output, {FILES[0]: json_text(results), FILES[1]: results_markdown(results)})


def rederived(results: dict[str, Any]) -> dict[str, Any]:
    """Stored results with their statistics derived again from the per-seed values."""
    derived = ("curves", "bands", "findings", "nulls", "controls", "opsm_vs_negatives_dropped")
    return summarize({k: v for k, v in results.items() if k not in derived})


#: The flag that derives the report again from the results, and the first fresh seed.
REDERIVE = ("--restate", "derive the statistics and report again from the JSON")
FRESH_FROM = SEEDS_PER_SET * len(ALL_SEED_SETS)


def main(argv: list[str] | None = None) -> int:
    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
