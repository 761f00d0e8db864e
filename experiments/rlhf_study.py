"""RLHF in miniature: GRPO-family trainers on a tiny language model, over seeds (issue 29).

From the repository root::

    python -m experiments.rlhf_study              # the whole study (about 20 minutes of CPU;
                                                  # RESULTS_LLM.md gives the measured time);
                                                  # writes experiments/RESULTS_LLM.md,
                                                  # rlhf_study.json and three figures
    python -m experiments.rlhf_study --quick      # a smoke run in seconds; writes nothing
                                                  # unless --output-dir is given
    python -m experiments.rlhf_study --restate    # the statistics, tables and figures derived
                                                  # again from the committed per-seed values
    python -m experiments.rlhf_study --method gspo --learning-rate 0.03 --updates 4 \\
        --seed-offset 1000                        # a slice on fresh seeds (scratch folder)

What runs is :data:`FULL_PLAN`: every method of :data:`tiny_rlhf.METHODS` (GRPO, the
unclipped control, PPO, Dr. GRPO, DAPO with and without clip-higher, GSPO, CISPO, and four
controls that each change one thing) at every learning rate of :data:`LEARNING_RATES` and every
mu of :data:`UPDATES`, each cell on three sets of seeds
(:data:`experiments.evidence.ALL_SEED_SETS`, 20 seeds each from ``offset``): findings are
stated where the *discovery* and *confirmation* sets agree, and the *replication* set counts
how many hold (:mod:`experiments.rlhf_findings`).  Every method of a set runs on the same
seeds with the same prompts and uniform numbers, so methods compare seed by seed.

Why these cells: one run (40 iterations of 32 responses) costs about 0.04 s of one CPU at
mu = 1 and 0.12 s at mu = 8, so a cell of 20 seeds takes 1 to 4 s and the 864 cells about
20 minutes of CPU, about 10 minutes on two cores of its own: the whole grid fits the
30-minute budget, so no factor is cut.

It runs as every study does (:mod:`experiments.runner`; its cache ``rlhf_study.cells.jsonl``,
an unknown ``--method``, ``--learning-rate`` or ``--updates`` refused before any work, a
partial run written to :data:`SCRATCH_DIR`).  A run is chaotic, so it reproduces exactly only
on a machine with the recorded fingerprint, elsewhere as aggregates.  ``--seed-offset N`` runs
on seeds ``N, N + 1, ...``: fresh ones once ``N`` is at least 60 (the committed study's three
sets).
"""

from __future__ import annotations

import os

# One BLAS thread per process: the matrices are small, and the machine's two CPUs are shared.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

import itertools
import json
import sys
import tempfile
import time
from argparse import ArgumentParser, Namespace
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import tiny_lm
from experiments import runner
from experiments.evidence import ALL_SEED_SETS as SETS
from experiments.rlhf_findings import summarize
from experiments.rlhf_report import TRANSFER_JSON
from experiments.rlhf_report import results_markdown as results_markdown
from experiments.rlhf_report import write_results as write_results
from experiments.runner import check_names, digits, kept, seed_count
from ppo_viz.rlhf.results import FILES
from tiny_lm import reference_model, right_answer_probability
from tiny_rlhf import LENGTHS, METHODS, Method, Rollout, TrainSettings, train

COMMAND = "python -m experiments.rlhf_study"
SCRATCH_DIR = Path(tempfile.gettempdir()) / "rlhf_study_partial"
CACHE_NAME = FILES[-1].name  # "rlhf_study.cells.jsonl"
#: Its report shows the transfer check's results (:mod:`experiments.rlhf_transfer`).
READS = (TRANSFER_JSON,)
#: The grid: Adam's learning rate over 1.7 decades, and mu, the updates per batch.
LEARNING_RATES = (1e-3, 3e-3, 1e-2, 2e-2, 3e-2, 5e-2)
UPDATES = (1, 2, 4, 8)
#: Seeds per set (:data:`experiments.evidence.SEED_SETS`; each starts where the one before ends).
SEEDS_PER_SET = 20
#: CPU seconds of one run of 40 iterations: a fixed part and a part per update (measured).
RUN_SECONDS, UPDATE_SECONDS = 0.027, 0.011
#: The stored curves keep every this many iterations.
CURVE_STRIDE = 2
#: A cell keeps per seed (4 significant digits) :meth:`tiny_rlhf.History.per_seed`, and its
#: curves over training (on the confirmation seeds only, which the figures show;
#: :meth:`tiny_rlhf.History.curve`).
CURVE_NAMES = ("reward", "length", "wrong_excess", "entropy")
#: The transfer check's held-out prompts (:mod:`experiments.rlhf_transfer`): those whose a + b
#: is a multiple of 5, 7 of the 35, one to three of each length; training draws from the rest.
HELD_OUT = tuple(i for i, (a, b) in enumerate(tiny_lm.PROMPTS) if (a + b) % 5 == 0)
TRAINED = tuple(i for i in range(len(tiny_lm.PROMPTS)) if i not in HELD_OUT)
PROMPT_SPLIT = {"held_out": HELD_OUT, "trained": TRAINED}


@dataclass(frozen=True)
class Cell:
    """One method at one learning rate and mu, on seeds ``first_seed .. + seeds - 1``;
    ``transfer``: each seed's own reference, training on :data:`TRAINED` prompts only; a
    control of the transfer check runs ``own`` (None: ``METHODS[method]``) and splits each
    batch into ``steps`` minibatches (:class:`tiny_rlhf.Rollout`'s ``steps_per_generation``)."""

    seed_set: str
    method: str
    settings: TrainSettings
    first_seed: int
    seeds: int
    transfer: bool = False
    own: Method | None = None
    steps: int = 1

    @property
    def trainer(self) -> Method:
        return self.own or METHODS[self.method]

    @property
    def key(self) -> str:
        """Everything the cell's numbers depend on, as text (the cache's key)."""
        fields = {"method": asdict(self.trainer), "settings": asdict(self.settings)}
        fields |= {"transfer": True} if self.transfer else {}
        fields |= {"steps_per_generation": self.steps} if self.steps > 1 else {}
        return json.dumps({**fields, "seeds": [self.first_seed, self.seeds]}, sort_keys=True)

    @property
    def cost(self) -> float:
        """Estimated CPU seconds."""
        s = self.settings
        return self.seeds * s.iterations / 40 * (RUN_SECONDS + UPDATE_SECONDS * s.updates)

    def label(self) -> str:
        s = self.settings
        return f"{self.seed_set}: {self.trainer.label}, lr {s.learning_rate:g}, μ {s.updates}" + (
            f", {self.steps} minibatches" if self.steps > 1 else ""
        )


@dataclass(frozen=True)
class Plan:
    """Methods × learning rates × mu on each seed set of ``sets``, from ``seed_offset``
    (``transfer``: every cell a :attr:`Cell.transfer` one)."""

    methods: tuple[str, ...]
    learning_rates: tuple[float, ...]
    updates: tuple[int, ...]
    base: TrainSettings = field(default_factory=TrainSettings)
    seeds: int = SEEDS_PER_SET
    seed_offset: int = 0
    sets: tuple[str, ...] = SETS
    transfer: bool = False

    def first_seed(self, seed_set: str) -> int:
        return self.seed_offset + self.sets.index(seed_set) * self.seeds

    def cell(self, seed_set: str, method: str, mu: int, lr: float, *control: Any) -> Cell:
        """The cell of ``method`` at ``mu`` and ``lr`` on ``seed_set`` (``control``: a transfer
        control's own method and minibatches, :attr:`Cell.own` and :attr:`Cell.steps`)."""
        settings = replace(self.base, learning_rate=lr, updates=mu)
        first = self.first_seed(seed_set)
        return Cell(seed_set, method, settings, first, self.seeds, self.transfer, *control)

    @property
    def cells(self) -> list[Cell]:
        grid = itertools.product(self.sets, self.methods, self.updates, self.learning_rates)
        return [self.cell(*point) for point in grid]


FULL_PLAN = Plan(tuple(METHODS), LEARNING_RATES, UPDATES)
#: A smoke test of the command: three methods, one learning rate, two mu, 4 seeds per set.
QUICK_PLAN = Plan(
    ("grpo", "unclipped", "dr_grpo"), (1e-2,), (1, 4), TrainSettings(iterations=20), seeds=4
)


def plan_of(results: Mapping[str, Any]) -> Plan:
    """The plan that made ``results``, from the settings, grid, methods and seeds they store
    (so a committed study is re-run as it ran, whatever today's defaults)."""
    grid = (tuple(results["methods"]), tuple(results["learning_rates"]), tuple(results["updates"]))
    seeds = results["sets"][SETS[0]]["seeds"]
    return Plan(*grid, TrainSettings(**results["settings"]), seeds, results["seed_offset"])


def run_cell(cell: Cell) -> dict[str, Any]:
    """Train one cell; per seed :meth:`~tiny_rlhf.History.per_seed` (a transfer cell: and the
    accuracy on the ``held_out`` and the ``trained`` prompts, and ``clip_fraction_<n>`` for
    right answers of n tokens), the curves, the CPU seconds."""
    started = time.process_time()
    seeds = range(cell.first_seed, cell.first_seed + cell.seeds)
    options = {"per_seed_reference": True, "prompts": TRAINED} if cell.transfer else {}
    rollout = Rollout(steps_per_generation=cell.steps)
    history = train([cell.trainer], cell.settings, seeds, rollout, **options)[cell.trainer.key]
    measured = history.per_seed()
    if cell.transfer:
        measured |= {k: history.accuracy[:, list(v)].mean(axis=1) for k, v in PROMPT_SPLIT.items()}
        by_length = zip(LENGTHS, history.clip_by_length.T, strict=True)
        measured |= {f"clip_fraction_{n}": values for n, values in by_length}
    per_seed = {name: digits(values, 4) for name, values in measured.items()}
    keep = slice(CURVE_STRIDE - 1, None, CURVE_STRIDE)
    curves = {name: digits(history.curve(name)[keep], 3) for name in CURVE_NAMES}
    if cell.seed_set != "confirmation":
        curves = {}
    return {"per_seed": per_seed, "curves": curves, "cpu_seconds": time.process_time() - started}


def results_of(plan: Plan, raw: dict[str, Any]) -> dict[str, Any]:
    """The results as plain data (``rlhf_study.json``), findings included."""
    return with_statistics(plain_results(plan, raw))


def plain_results(plan: Plan, raw: dict[str, Any]) -> dict[str, Any]:
    """The plan, the model and each cell's stored numbers, as plain data."""
    cells = []
    for cell in plan.cells:
        stored = raw[cell.key]
        cells.append(
            {
                "set": cell.seed_set,
                "method": cell.method,
                "learning_rate": cell.settings.learning_rate,
                "updates": cell.settings.updates,
                "cpu_seconds": round(stored["cpu_seconds"], 2),
                "per_seed": stored["per_seed"],
                "curves": stored["curves"],
            }
        )
    base = {k: v for k, v in asdict(plan.base).items() if k not in ("learning_rate", "updates")}
    return {
        "seed_offset": plan.seed_offset,
        "sets": {s: {"first_seed": plan.first_seed(s), "seeds": plan.seeds} for s in plan.sets},
        "settings": base,
        "learning_rates": list(plan.learning_rates),
        "updates": list(plan.updates),
        "methods": {k: asdict(METHODS[k]) for k in plan.methods},
        "model": {  # what the runs trained (tiny_lm)
            "hidden": tiny_lm.HIDDEN,
            "vocabulary": tiny_lm.V,
            "parameters": sum(p[0].size for p in reference_model().params),
            "prompts": len(tiny_lm.PROMPTS),
            "max_len": tiny_lm.MAX_LEN,
        },
        "reference_accuracy": float(right_answer_probability(reference_model()).mean()),
        "curve_iterations": list(range(CURVE_STRIDE, plan.base.iterations + 1, CURVE_STRIDE)),
        "cells": cells,
    }


def with_statistics(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the statistics of :mod:`experiments.rlhf_findings` and their CPU time."""
    started = time.process_time()
    summarize(results)
    results["summary_cpu_seconds"] = round(time.process_time() - started)
    return results


def rederived(results: Mapping[str, Any]) -> dict[str, Any]:
    """Stored results with their statistics derived again, in place of the stored ones, from
    the per-seed values they keep (after a change to the findings or the report; nothing is
    trained)."""
    return with_statistics({**results, "cells": [dict(cell) for cell in results["cells"]]})


#: The flag that derives the report again from the results, and the first fresh seed.
REDERIVE = (
    "--restate",
    "derive the statistics, tables and figures again from the per-seed values of the results "
    "in --output-dir (default: the committed ones); trains nothing",
)
FRESH_FROM = 3 * SEEDS_PER_SET


def add_options(parser: ArgumentParser) -> None:
    """The options of this study's slices (:mod:`experiments.runner` adds every study's)."""
    parser.add_argument("--method", action="append", default=[], choices=tuple(METHODS))
    parser.add_argument("--learning-rate", action="append", type=float, default=[])
    parser.add_argument("--updates", action="append", type=int, default=[], help="mu")
    parser.add_argument("--seeds", type=seed_count, help="seeds per set (default 20)")


def sliced(plan: Plan, args: Namespace) -> Plan:
    """``plan`` limited to the methods, learning rates, mu and seeds ``args`` name (none named:
    all); a ``ValueError`` naming an unknown one and the valid ones."""
    check_names(
        ("method", args.method, plan.methods),
        ("learning rate", args.learning_rate, plan.learning_rates),
        ("mu", args.updates, plan.updates),
    )
    return replace(
        plan,
        methods=kept(plan.methods, args.method),
        learning_rates=kept(plan.learning_rates, args.learning_rate),
        updates=kept(plan.updates, args.updates),
        seeds=args.seeds or plan.seeds,
    )


def main(argv: list[str] | None = None) -> int:
    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
