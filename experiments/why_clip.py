"""Reproduce notebook 4's table: why PPO clips, over many seeds, in numpy.

From the repository root::

    python -m experiments.why_clip                # full run; writes experiments/RESULTS.md,
                                                  # experiments/why_clip.json and why_clip.png
    python -m experiments.why_clip --quick        # a few seconds, writes nothing
    python -m experiments.why_clip --output-dir x # write the files somewhere else
    python -m experiments.why_clip --setting "bigger steps" --method unclipped \\
        --cartpole-seeds 1 --output-dir x         # a slice: one setting, method and seed

Part A runs PPO's loop on the bandit (200 seeds, four settings); part B trains
CartPole agents (10 seeds per method, two settings, 50,000 steps each).  What
runs is :data:`ppo_viz.why_clip.results.FULL_PLAN`; every run is seeded, so the
same command gives the same numbers (the tests re-run a slice and compare).
A progress line on stderr says what is running.
"""

from __future__ import annotations

import os

# numpy's BLAS threads only slow the networks' small matrices down (and make timings
# depend on the machine's load); set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import argparse
import json
import re
import sys
import time
from pathlib import Path

from ppo_viz.why_clip.figures import ResultsFigure
from ppo_viz.why_clip.results import (
    FULL_PLAN,
    QUICK_PLAN,
    RESULTS_DIR,
    RESULTS_FIGURE,
    RESULTS_JSON,
    RESULTS_MARKDOWN,
    ComparisonPlan,
    results_markdown,
    run_comparison,
)

BAR_WIDTH = 30


class ProgressLine:
    """``[######........]  40%  part B, CleanRL: PPO, ε = 0.2  12/97`` on one line of stderr.

    The runs report ``(label, done, total)``; a new label means the previous
    run finished.  Each part A method counts as 1 unit, each part B iteration as 1.
    """

    def __init__(self, total_units: int) -> None:
        self.total_units = max(1, total_units)
        self.finished_units = 0
        self.label = ""
        self.label_total = 0

    def __call__(self, label: str, done: int, total: int) -> None:
        if label != self.label:
            self.finished_units += self.label_total
            self.label, self.label_total = label, (total if "part B" in label else 1)
        units = self.finished_units + (done if "part B" in label else 0)
        share = units / self.total_units
        bar = "#" * round(share * BAR_WIDTH)
        sys.stderr.write(f"\r[{bar:<{BAR_WIDTH}}] {share:4.0%}  {label}  {done}/{total}\033[K")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write(f"\r[{'#' * BAR_WIDTH}] 100%  done\033[K\n")


def units_of(plan: ComparisonPlan) -> int:
    """How many progress units ``plan`` has (see :class:`ProgressLine`)."""
    bandit = len(plan.bandit_settings) * len(plan.bandit_methods)
    cartpole = sum(s.iterations for s in plan.cartpole_settings.values())
    return bandit + cartpole * len(plan.cartpole_methods)


def json_text(results: dict) -> str:
    """``results`` as JSON, one line per list of numbers (so a diff shows which curve moved)."""
    text = json.dumps(results, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", _one_line, text) + "\n"


def _one_line(match: re.Match[str]) -> str:
    return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds; writes nothing")
    parser.add_argument("--output-dir", type=Path, default=None, help="where to write")
    parser.add_argument("--setting", action="append", default=[], help="only this setting")
    parser.add_argument("--method", action="append", default=[], help="only this method")
    parser.add_argument("--bandit-seeds", type=int, help="part A's seeds: 0 .. N - 1")
    parser.add_argument("--cartpole-seeds", type=int, help="part B's seeds: 0 .. N - 1")
    args = parser.parse_args(argv)
    seeds = {
        f"{part}_seeds": getattr(args, f"{part}_seeds")
        for part in ("bandit", "cartpole")
        if getattr(args, f"{part}_seeds") is not None
    }
    plan = (QUICK_PLAN if args.quick else FULL_PLAN).sliced(args.setting, args.method, **seeds)
    progress = ProgressLine(units_of(plan))
    started = time.perf_counter()
    results, runs = run_comparison(plan, progress)
    seconds = time.perf_counter() - started
    progress.close()
    markdown = results_markdown(results, seconds)
    output = args.output_dir or (None if args.quick else RESULTS_DIR)
    if output is None:
        print(markdown)
        return 0
    output.mkdir(parents=True, exist_ok=True)
    (output / RESULTS_JSON.name).write_text(json_text(results), encoding="utf-8")
    (output / RESULTS_MARKDOWN.name).write_text(markdown, encoding="utf-8")
    if runs["bandit"] and runs["cartpole"]:
        bandit = next(iter(runs["bandit"].values()))
        ResultsFigure(bandit, runs["cartpole"]).save(output / RESULTS_FIGURE.name)
    print(f"wrote {output / RESULTS_MARKDOWN.name} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
