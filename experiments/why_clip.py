"""Why PPO clips, measured as a range: each method's score against its step size.

From the repository root::

    python -m experiments.why_clip                    # the whole study (19 minutes with 2
                                                      # processes on a shared 2-core machine);
                                                      # writes experiments/RESULTS.md,
                                                      # why_clip.json and why_clip.png
    python -m experiments.why_clip --quick            # a smoke run in seconds; writes nothing
    python -m experiments.why_clip --setting cartpole --method ppo --value 0.001 \\
        --seed-offset 100                             # a slice on fresh seeds (scratch folder)

What runs is :data:`FULL_PLAN`: three sweeps (:class:`experiments.study.Sweep`), each a
grid of step sizes with everything else fixed, every method on the same seeds:

* ``bandit``: notebook 4's bandit loop (K = 20 epochs per batch), every method, the step
  size from 0.05 to 50, 400 seeds per cell;
* ``cartpole``: CartPole-v1 at CleanRL's settings (4 epochs per rollout), the six main
  methods, the learning rate from CleanRL's 2.5e-4 to 5e-2, 20 seeds per cell, 50,000 steps
  per run;
* ``cartpole_k10``: the same at 10 epochs, at two learning rates: CleanRL's 2.5e-4 and ten
  times that (the epochs as a separate factor, never changed with the rate).

Why these cells: a CartPole run of 50,000 steps costs about 2.5 s of CPU per seed at 4 epochs
and 5 s at 10 (20 seeds side by side, one BLAS thread), twice that on a busy machine.  A sweep
over 8 learning rates at 10 epochs would take most of the 45 minutes by itself, so the sweep is
at CleanRL's 4 epochs and 10 epochs are checked at two rates; 20 seeds per cell is the fewest
that give a 90% success share a meaning (18 of 20).  The bandit is cheap (a second per cell),
so it runs every method at 400 seeds.

The cells run in ``--jobs`` worker processes (default: every CPU this process may use), with
one BLAS thread each, behind a progress bar on stderr.  Each finished cell is appended to a
cache next to the results (``why_clip.cells.jsonl``), so an interrupted run resumes where it
stopped; the cache is removed once the results are written.  The results record the machine
(:func:`ppo_viz.machine.fingerprint`): the bandit reproduces anywhere to 1e-12, CartPole
exactly only on a machine with the same fingerprint.

``--seed-offset N`` runs on seeds ``N, N + 1, ...``: seeds the committed study never used once
``N`` is at least its seeds per cell (400 on the bandit, 20 on CartPole); a smaller offset
shares seeds with it.

Every name and folder is checked before any work: an unknown ``--setting``, ``--method`` or
``--value`` is refused with the valid ones.  Only the full plan on seeds from 0 writes to
``experiments/``; any other run writes to :data:`SCRATCH_DIR` unless ``--output-dir`` names a
folder.  The three files are written together, the figure showing what the table shows.
"""

from __future__ import annotations

import os

# One BLAS thread per process: the networks' matrices are small, and with two CPUs a
# multithreaded BLAS makes CartPole 6-10 times slower.  Set before numpy is imported.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from experiments.cartpole_agent import CartPoleSettings
from experiments.report import results_markdown, write_results
from experiments.statistics import STABLE_SHARE
from experiments.study import Cell, Sweep, run_cell, summarize_sweep
from ppo_viz.machine import fingerprint
from ppo_viz.why_clip.bandit_loop import STEP_SIZES, BanditLoopSettings
from ppo_viz.why_clip.methods import MAIN_METHODS, METHODS
from ppo_viz.why_clip.results import PAPER_TABLE_1, RESULTS_DIR

COMMAND = "python -m experiments.why_clip"
#: Where a partial run writes when no ``--output-dir`` is given.
SCRATCH_DIR = Path(tempfile.gettempdir()) / "why_clip_partial"
CACHE_NAME = "why_clip.cells.jsonl"


@dataclass(frozen=True)
class Plan:
    """The sweeps to run, on seeds from ``seed_offset``."""

    sweeps: tuple[Sweep, ...]
    seed_offset: int = 0

    @property
    def cells(self) -> list[Cell]:
        return [cell for sweep in self.sweeps for cell in sweep.cells(self.seed_offset)]

    def sliced(
        self,
        settings: Sequence[str] = (),
        methods: Sequence[str] = (),
        values: Sequence[float] = (),
        seeds: dict[str, int] | None = None,
        seed_offset: int = 0,
    ) -> Plan:
        """This plan limited to some sweeps, methods and step sizes (none named: all), with
        other seed counts (``{"bandit": n, "cartpole": n}``) or seeds.  A ``ValueError``
        listing the valid names for an unknown one, or when nothing is left to run."""
        names = tuple(sweep.name for sweep in self.sweeps)
        grid = sorted({v for sweep in self.sweeps for v in sweep.values})
        for kind, chosen, valid in (
            ("setting", settings, names),
            ("method", methods, tuple(METHODS)),
            ("value", values, grid),
        ):
            unknown = [name for name in chosen if name not in valid]
            if unknown:
                listed = ", ".join(f"{v:g}" if kind == "value" else str(v) for v in valid)
                raise ValueError(f"no {kind} is named {unknown[0]!r}; choose from {listed}")
        sweeps = []
        for sweep in self.sweeps:
            kept = replace(
                sweep,
                methods=tuple(k for k in sweep.methods if not methods or k in methods),
                values=tuple(v for v in sweep.values if not values or v in values),
                seeds=(seeds or {}).get(sweep.task, sweep.seeds),
            )
            if (not settings or sweep.name in settings) and kept.methods and kept.values:
                sweeps.append(kept)
        if not sweeps:
            raise ValueError("nothing to run: no setting has those methods at those values")
        return Plan(tuple(sweeps), seed_offset)


#: Step sizes: the bandit's over three decades (the app's), CartPole's over 2.3 decades from
#: CleanRL's 2.5e-4; the 10-epoch check at CleanRL's rate and ten times it.
LEARNING_RATES = (2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2)
CHECK_RATES = (2.5e-4, 2.5e-3)
FULL_PLAN = Plan(
    (
        Sweep("bandit", "bandit, K = 20", BanditLoopSettings(), STEP_SIZES, tuple(METHODS), 400),
        Sweep("cartpole", "CartPole, K = 4", CartPoleSettings(), LEARNING_RATES, MAIN_METHODS, 20),
        Sweep(
            "cartpole_k10",
            "CartPole, K = 10",
            CartPoleSettings(epochs=10),
            CHECK_RATES,
            MAIN_METHODS,
            20,
        ),
    )
)
#: A smoke test of the command: a few seconds.
QUICK_PLAN = Plan(
    (
        Sweep(
            "bandit",
            "bandit, quick",
            BanditLoopSettings(iterations=10),
            (0.5, 5.0),
            ("ppo", "unclipped"),
            8,
        ),
        Sweep("cartpole", "CartPole, quick", CartPoleSettings(2048), (2.5e-3,), ("ppo",), 2),
    )
)


def read_cache(path: Path | None) -> dict[str, Any]:
    """The cells a previous run finished, by key (a line cut short by an interruption is
    left out)."""
    done: dict[str, Any] = {}
    if path is not None and path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                done[entry["key"]] = entry["raw"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return done


def run_plan(
    plan: Plan,
    cache: Path | None,
    jobs: int,
    progress: Callable[[Cell, float], None] = lambda *_: None,
) -> dict[str, Any]:
    """Run every cell of ``plan`` not in ``cache`` (in ``jobs`` processes), appending each to
    ``cache`` as it finishes; return each cell's raw numbers by key."""
    done = read_cache(cache)
    for cell in plan.cells:
        if cell.key in done:
            progress(cell, cell.cost)
    todo = sorted((c for c in plan.cells if c.key not in done), key=lambda c: -c.cost)
    for cell, raw in finished_cells(todo, jobs):
        done[cell.key] = raw
        if cache is not None:
            with cache.open("a", encoding="utf-8") as file:
                file.write(json.dumps({"key": cell.key, "raw": raw}) + "\n")
        progress(cell, cell.cost)
    return done


def finished_cells(cells: Sequence[Cell], jobs: int) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Each cell with its raw numbers, as it finishes (in this process for one job)."""
    if jobs == 1:
        yield from ((cell, run_cell(cell)) for cell in cells)
        return
    pool = ProcessPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(run_cell, cell): cell for cell in cells}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(cancel_futures=True)


def results_of(plan: Plan, raw: dict[str, Any], seconds: float, jobs: int) -> dict[str, Any]:
    """The results as plain data (``why_clip.json``)."""
    sweeps = {}
    for sweep in plan.sweeps:
        by_method: dict[str, dict[float, Any]] = {key: {} for key in sweep.methods}
        for cell in sweep.cells(plan.seed_offset):
            by_method[cell.method][cell.value] = raw[cell.key]
        sweeps[sweep.name] = summarize_sweep(sweep, by_method)
    return {
        "command": COMMAND,
        "machine": fingerprint(),
        "seconds": round(seconds),
        "jobs": jobs,
        "seed_offset": plan.seed_offset,
        "stable_share": STABLE_SHARE,
        "paper": PAPER_TABLE_1,
        "sweeps": sweeps,
    }


BAR_WIDTH = 30


class ProgressBar:
    """``[######......]  40%  12/194 cells  8:02 left  cartpole: PPO, ε = 0.2, ...`` on stderr,
    counting the cells' estimated CPU seconds."""

    def __init__(self, plan: Plan) -> None:
        self.total = sum(cell.cost for cell in plan.cells) or 1.0
        self.cells = len(plan.cells)
        self.swept = {sweep.name: sweep.swept.replace("_", " ") for sweep in plan.sweeps}
        self.done, self.count, self.started = 0.0, 0, time.perf_counter()

    def __call__(self, cell: Cell, cost: float) -> None:
        self.done += cost
        self.count += 1
        share = min(1.0, self.done / self.total)
        elapsed = time.perf_counter() - self.started
        minutes, seconds = divmod(round(elapsed * (1.0 - share) / share if share else 0.0), 60)
        bar = "#" * round(share * BAR_WIDTH)
        sys.stderr.write(
            f"\r[{bar:<{BAR_WIDTH}}] {share:4.0%}  {self.count}/{self.cells} cells  "
            f"{minutes}:{seconds:02d} left  {cell.label(self.swept[cell.sweep])}\033[K"
        )
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")


def seed_count(text: str) -> int:
    """A whole number of seeds, at least 1 (for argparse)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def whole_number(text: str) -> int:
    """A whole number, at least 0 (for argparse)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 0, got {text!r}")
    return int(text)


def parse(argv: list[str] | None) -> tuple[Plan, Path | None, int]:
    """The plan, the output folder (None: print only) and the number of processes the
    arguments ask for; every mistake is refused here, before any work."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds; writes nothing")
    parser.add_argument("--output-dir", type=Path, help="where to write the three files")
    names = ", ".join(sweep.name for sweep in FULL_PLAN.sweeps)
    parser.add_argument("--setting", action="append", default=[], help=f"only this: {names}")
    parser.add_argument(
        "--method", action="append", default=[], choices=tuple(METHODS), help="only this method"
    )
    parser.add_argument(
        "--value", action="append", type=float, default=[], help="only this step size"
    )
    parser.add_argument("--bandit-seeds", type=seed_count, help="bandit seeds per cell")
    parser.add_argument("--cartpole-seeds", type=seed_count, help="CartPole seeds per cell")
    parser.add_argument(
        "--seed-offset", type=whole_number, default=0, help="first seed (400 or more: all fresh)"
    )
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parser.add_argument("--jobs", type=seed_count, default=cpus or 1, help="worker processes")
    args = parser.parse_args(argv)
    seeds = {
        task: getattr(args, f"{task}_seeds")
        for task in ("bandit", "cartpole")
        if getattr(args, f"{task}_seeds")
    }
    full = QUICK_PLAN if args.quick else FULL_PLAN
    try:
        plan = full.sliced(args.setting, args.method, args.value, seeds, args.seed_offset)
    except ValueError as error:
        parser.error(str(error))
    if args.output_dir is not None:
        output = args.output_dir
    elif args.quick:
        return plan, None, args.jobs
    else:
        output = RESULTS_DIR if plan == FULL_PLAN else SCRATCH_DIR
    if output.exists() and not output.is_dir():
        parser.error(f"--output-dir {output} is a file, not a folder")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"cannot make the folder {output}: {error.strerror}")
    if output == SCRATCH_DIR:
        print(f"a partial run: writing to {output} (--output-dir names another)", file=sys.stderr)
    return plan, output, args.jobs


def main(argv: list[str] | None = None) -> int:
    plan, output, jobs = parse(argv)
    cache = None if output is None else output / CACHE_NAME
    progress = ProgressBar(plan)
    started = time.perf_counter()
    try:
        raw = run_plan(plan, cache, jobs, progress)
    except KeyboardInterrupt:
        progress.close()
        if cache is not None:
            print(
                f"interrupted: the finished cells are kept in {cache}; the same command "
                "resumes from them",
                file=sys.stderr,
            )
        return 130
    progress.close()
    results = results_of(plan, raw, time.perf_counter() - started, jobs)
    if output is None:
        print(results_markdown(results))
        return 0
    write_results(results, output)
    if cache is not None:
        cache.unlink(missing_ok=True)
    print(f"wrote {output} in {results['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
