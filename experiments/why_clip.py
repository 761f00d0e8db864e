"""Why PPO clips, measured as a range: each method's score against its step size, replicated.

From the repository root::

    python -m experiments.why_clip                    # the whole study (about 40 minutes on
                                                      # 2 free cores); writes experiments/
                                                      # RESULTS.md, why_clip.json, why_clip.png
    python -m experiments.why_clip --quick            # a smoke run in seconds; writes nothing
                                                      # unless --output-dir is given
    python -m experiments.why_clip --seed-offset 5000 # the whole study on fresh seeds
                                                      # (a scratch folder)
    python -m experiments.why_clip --setting cartpole --method ppo --value 0.001 \\
        --seed-set confirmation                       # a slice (a scratch folder)
    python -m experiments.why_clip --rewrite          # RESULTS.md, the figure and the claims
                                                      # again from why_clip.json; runs nothing

What runs is :data:`FULL_PLAN`: four sweeps (:class:`experiments.study.Sweep`), each a grid
of step sizes with everything else fixed, every method on the same seeds, each on two sets of
seeds (:data:`experiments.evidence.SEED_SETS`): the claims of :mod:`experiments.claims` were
chosen on the *discovery* set and are stated only where the *confirmation* set, as many
seeds again, agrees (in the committed study CartPole's were unseen and the bandit's had served
once before, as its report says).

* ``bandit``: notebook 4's bandit loop (K = 20 epochs per batch), all 14 methods, the step
  size from 0.05 to 50, 400 + 400 seeds per cell;
* ``cartpole``: CartPole-v1 at CleanRL's settings (K = 4 epochs per rollout), the six main
  methods, the learning rate from CleanRL's 2.5e-4 to 5e-2, 20 + 20 seeds, 50,000 steps per run;
* ``cartpole_k1`` and ``cartpole_k10``: the epochs K as a factor of its own, K = 1 and
  K = 10, for PPO and the unclipped surrogate (K = 4 is the ``cartpole`` sweep), at the
  same learning rates (K = 10 without 5e-2).

Why these cells (the budget: the whole study within an hour on 2 cores).  Measured here with
one BLAS thread, a CartPole run of 50,000 steps costs 0.49, 1.45 and 3.23 CPU seconds per seed
at K = 1, 4 and 10; a bandit cell of 400 seeds about 0.6 s.  Every method at every K would
cost over 3 hours, so the epochs are swept only for the two methods the epochs' question is
about (does clipping keep more epochs per batch safe?); the other four methods run at
CleanRL's K = 4.  Plain policy gradient is the unclipped surrogate at K = 1, computed once for
both sweeps.  20 + 20 seeds per CartPole cell is the fewest that give a 90% success share a
meaning on each set (18 of 20); the bandit is cheap, so every method runs on 400 + 400.  In
all: about 80 CPU minutes, 40 minutes on 2 free cores (``cpu_seconds`` in the results adds up
what each cell took as it ran; on a machine shared with other work the wall time is longer).

It runs as every study does (:mod:`experiments.runner`; the discovery set first, its cache
``why_clip.cells.jsonl``, an unknown ``--setting``, ``--method``, ``--value`` or
``--seed-set`` refused before any work, a partial run written to :data:`SCRATCH_DIR`).  The
bandit reproduces anywhere to 1e-6 (its scores are kept to six decimals), CartPole exactly
only on a machine with the recorded fingerprint.  ``--seed-offset N`` runs both sets from seed
``N`` on: seeds the committed study never used once ``N`` is at least its two sets together
(800 on the bandit, 40 on CartPole).  The three files are written together, the figure
showing what the tables show.
"""

from __future__ import annotations

import os

# One BLAS thread per process: the networks' matrices are small, and with two CPUs a
# multithreaded BLAS makes CartPole 6-10 times slower.  Set before numpy is imported.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

import sys
import tempfile
from argparse import ArgumentParser, Namespace
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bandit_loop import STEP_SIZES, BanditLoopSettings
from experiments import runner
from experiments.cartpole_agent import CartPoleSettings
from experiments.claims import evaluate_claims
from experiments.evidence import SEED_SETS, STABLE_SHARE
from experiments.runner import check_names, kept, seed_count
from experiments.study import Cell, Sweep, summarize_sweep
from experiments.study import run_cell as run_cell  # what experiments.runner calls
from experiments.why_clip_report import results_markdown as results_markdown
from experiments.why_clip_report import write_results as write_results
from ppo_viz.why_clip.methods import MAIN_METHODS, METHODS
from ppo_viz.why_clip.results import FILES, PAPER_TABLE_1

COMMAND = "python -m experiments.why_clip"
#: Where a partial run writes when no ``--output-dir`` is given.
SCRATCH_DIR = Path(tempfile.gettempdir()) / "why_clip_partial"
CACHE_NAME = FILES[-1].name  # "why_clip.cells.jsonl"


@dataclass(frozen=True)
class Plan:
    """The sweeps to run, on the seed sets ``seed_sets`` from ``seed_offset``."""

    sweeps: tuple[Sweep, ...]
    seed_offset: int = 0
    seed_sets: tuple[str, ...] = SEED_SETS

    @property
    def cells(self) -> list[Cell]:
        """Every cell of every sweep and seed set."""
        return [c for sweep in self.sweeps for c in sweep.cells(self.seed_offset, self.seed_sets)]


#: Step sizes: the bandit's over three decades (the app's), CartPole's over 2.3 decades from
#: CleanRL's 2.5e-4 (at K = 10 without the largest, where K = 4 already fails on every seed).
LEARNING_RATES = (2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2)
#: The methods whose epochs are swept: with and without the clip.
EPOCH_METHODS = ("ppo", "unclipped")


def epochs_sweep(k: int, values: tuple[float, ...]) -> Sweep:
    """PPO and the unclipped surrogate on CartPole at ``k`` epochs per rollout, 20 + 20 seeds."""
    settings = CartPoleSettings(epochs=k)
    return Sweep(f"cartpole_k{k}", f"CartPole, K = {k}", settings, values, EPOCH_METHODS, 20)


FULL_PLAN = Plan(
    (
        Sweep("bandit", "bandit, K = 20", BanditLoopSettings(), STEP_SIZES, tuple(METHODS), 400),
        Sweep("cartpole", "CartPole, K = 4", CartPoleSettings(), LEARNING_RATES, MAIN_METHODS, 20),
        epochs_sweep(1, LEARNING_RATES),
        epochs_sweep(10, LEARNING_RATES[:-1]),
    )
)
#: A smoke test of the command: a few seconds.
QUICK_BANDIT = BanditLoopSettings(iterations=10)
QUICK_PLAN = Plan(
    (
        Sweep("bandit", "bandit, quick", QUICK_BANDIT, (0.5, 5.0), ("ppo", "unclipped"), 8),
        Sweep("cartpole", "CartPole, quick", CartPoleSettings(2048), (2.5e-3,), ("ppo",), 2),
    )
)


def plan_of(results: Mapping[str, Any]) -> Plan:
    """The plan that made ``results``, from the settings, grids, methods and seeds they store
    (so a committed study is re-run as it ran, whatever today's defaults)."""
    sweeps = []
    for name, sweep in results["sweeps"].items():
        kind = CartPoleSettings if sweep["task"] == "cartpole" else BanditLoopSettings
        values, methods, base = tuple(sweep["values"]), tuple(sweep["methods"]), sweep["settings"]
        sweeps.append(Sweep(name, sweep["title"], kind(**base), values, methods, sweep["seeds"]))
    return Plan(tuple(sweeps), results["seed_offset"], tuple(results["seed_sets"]))


def results_of(plan: Plan, raw: dict[str, Any]) -> dict[str, Any]:
    """The results as plain data (``why_clip.json``), with the claims evaluated on them: what
    ran (the plan's sweeps with their settings, and each method as data) and what it gave."""
    sweeps = {}
    for sweep in plan.sweeps:
        by_set: dict[str, dict[str, dict[float, Any]]] = {}
        for cell in sweep.cells(plan.seed_offset, plan.seed_sets):
            by_set.setdefault(cell.seed_set, {}).setdefault(cell.method, {})
            by_set[cell.seed_set][cell.method][cell.value] = raw[cell.key]
        sweeps[sweep.name] = summarize_sweep(sweep, by_set, plan.seed_offset)
    results = {
        "seed_offset": plan.seed_offset,
        "seed_sets": list(plan.seed_sets),
        "stable_share": STABLE_SHARE,
        "paper": PAPER_TABLE_1,
        "methods": {k: asdict(METHODS[k]) for k in {k: 0 for s in plan.sweeps for k in s.methods}},
        "sweeps": sweeps,
    }
    return rederived(results)


#: The flag that derives the report again from the results, and the first fresh seed.
REDERIVE = ("--rewrite", "write RESULTS.md, the figure and the claims again from why_clip.json")
FRESH_FROM = 800


def add_options(parser: ArgumentParser) -> None:
    """The options of this study's slices (:mod:`experiments.runner` adds every study's)."""
    names = ", ".join(sweep.name for sweep in FULL_PLAN.sweeps)
    parser.add_argument("--setting", action="append", default=[], help=f"only this: {names}")
    parser.add_argument(
        "--method", action="append", default=[], choices=tuple(METHODS), help="only this method"
    )
    parser.add_argument(
        "--value", action="append", type=float, default=[], help="only this step size"
    )
    parser.add_argument(
        "--seed-set", action="append", default=[], help=f"only this: {', '.join(SEED_SETS)}"
    )
    parser.add_argument("--bandit-seeds", type=seed_count, help="bandit seeds per cell and set")
    parser.add_argument("--cartpole-seeds", type=seed_count, help="CartPole seeds per cell and set")


def sliced(plan: Plan, args: Namespace) -> Plan:
    """``plan`` limited to the sweeps (``--setting``), methods, step sizes (``--value``) and
    seed sets ``args`` name (none named: all), with the seeds per cell and set that
    ``--bandit-seeds`` and ``--cartpole-seeds`` give.  A ``ValueError`` listing the valid names
    for an unknown one, or when nothing is left."""
    names = tuple(sweep.name for sweep in plan.sweeps)
    grid = sorted({v for sweep in plan.sweeps for v in sweep.values})
    check_names(
        ("setting", args.setting, names),
        ("method", args.method, tuple(METHODS)),
        ("value", args.value, grid),
        ("seed set", args.seed_set, SEED_SETS),
    )
    sweeps = []
    for sweep in plan.sweeps:
        part = replace(
            sweep,
            seeds=getattr(args, f"{sweep.task}_seeds") or sweep.seeds,
            methods=kept(sweep.methods, args.method),
            values=kept(sweep.values, args.value),
        )
        if (not args.setting or sweep.name in args.setting) and part.methods and part.values:
            sweeps.append(part)
    if not sweeps:
        raise ValueError("nothing to run: no setting has those methods at those values")
    return Plan(tuple(sweeps), plan.seed_offset, kept(SEED_SETS, args.seed_set))


def rederived(results: Mapping[str, Any]) -> dict[str, Any]:
    """Stored results with their claims evaluated again (nothing runs)."""
    return {**results, "claims": evaluate_claims(results)}


def main(argv: list[str] | None = None) -> int:
    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
