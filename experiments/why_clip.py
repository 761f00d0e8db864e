"""Reproduce notebook 4's table: why PPO clips, over many seeds, in numpy.

From the repository root::

    python -m experiments.why_clip                # full run; writes experiments/RESULTS.md,
                                                  # experiments/why_clip.json and why_clip.png
    python -m experiments.why_clip --quick        # a few seconds, writes nothing
    python -m experiments.why_clip --setting "bigger steps" --method unclipped \\
        --cartpole-seeds 1                        # a slice: one setting, method and seed

Part A runs PPO's loop on the bandit (200 seeds, four settings); part B trains CartPole
agents (10 seeds per method, two settings, 50,000 steps each).  What runs is
:data:`ppo_viz.why_clip.results.FULL_PLAN`; every run is seeded, so the same command gives
the same numbers (the tests re-run a slice and compare).  A progress line on stderr says
what is running.

Nothing is run before every name and folder is checked: an unknown ``--setting`` or
``--method`` is refused with the valid names.  Only the full plan writes to
``experiments/``; a partial run (some settings, some methods, other seed counts) writes to
:data:`SCRATCH_DIR` unless ``--output-dir`` names a folder.  The three files are written
together, the figure showing what the table shows.
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
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ppo_viz.machine import fingerprint
from ppo_viz.why_clip.bandit_loop import BANDIT_METHODS, BanditLoopSettings, run_bandit_loop
from ppo_viz.why_clip.cartpole_ppo import CARTPOLE_METHODS, CartPoleSettings, run_cartpole
from ppo_viz.why_clip.figures import results_figure
from ppo_viz.why_clip.methods import METHODS
from ppo_viz.why_clip.results import (
    BIGGER_STEPS,
    CLEANRL,
    PAPER_TABLE_1,
    RESULTS_DIR,
    RESULTS_FIGURE,
    RESULTS_JSON,
    RESULTS_MARKDOWN,
    markdown_table,
    standard_error,
    table_caption,
)

COMMAND = "python -m experiments.why_clip"


@dataclass(frozen=True)
class ComparisonPlan:
    """What to run: part A's settings (by name) and seeds ``0 .. bandit_seeds - 1``, part B's
    settings and seeds, and (default: all) the methods."""

    bandit_seeds: int
    bandit_settings: Mapping[str, BanditLoopSettings]
    cartpole_seeds: int
    cartpole_settings: Mapping[str, CartPoleSettings]
    methods: tuple[str, ...] = tuple(METHODS)

    @property
    def bandit_methods(self) -> tuple[str, ...]:
        return tuple(key for key in BANDIT_METHODS if key in self.methods)

    @property
    def cartpole_methods(self) -> tuple[str, ...]:
        return tuple(key for key in CARTPOLE_METHODS if key in self.methods)

    @property
    def setting_names(self) -> tuple[str, ...]:
        return (*self.bandit_settings, *self.cartpole_settings)

    def sliced(
        self, settings: Sequence[str] = (), methods: Sequence[str] = (), **seeds: int
    ) -> ComparisonPlan:
        """This plan limited to some ``settings`` and ``methods`` (none named: all) and with
        other seed counts.  A ``ValueError`` naming the valid names for an unknown one, or
        when nothing is left to run."""
        for kind, chosen, valid in (
            ("setting", settings, self.setting_names),
            ("method", methods, tuple(METHODS)),
        ):
            for name in chosen:
                if name not in valid:
                    raise ValueError(f"no {kind} is named {name!r}; choose from {', '.join(valid)}")
        keep = set(settings or self.setting_names)
        plan = replace(self, methods=tuple(methods) or self.methods, **seeds)
        plan = replace(
            plan,
            bandit_settings={k: v for k, v in self.bandit_settings.items() if k in keep},
            cartpole_settings={k: v for k, v in self.cartpole_settings.items() if k in keep},
        )
        if not (plan.bandit_settings and plan.bandit_methods) and not (
            plan.cartpole_settings and plan.cartpole_methods
        ):
            raise ValueError(f"nothing to run: no setting among {sorted(keep)} runs those methods")
        return plan


#: Part A at the notebook's defaults (where the trust region matters) and three settings
#: where it does not; part B at CleanRL's settings and with ten times the step size and 10
#: epochs, the same number of steps.
BANDIT_SETTINGS = {
    "defaults": BanditLoopSettings(),
    "one epoch (K = 1)": BanditLoopSettings(epochs=1),
    "small steps (step size 0.2)": BanditLoopSettings(step_size=0.2),
    "large batches (64 pulls)": BanditLoopSettings(batch_size=64),
}
CARTPOLE_SETTINGS = {
    CLEANRL: CartPoleSettings(),
    BIGGER_STEPS: CartPoleSettings(epochs=10, learning_rate=2.5e-3),
}
FULL_PLAN = ComparisonPlan(200, BANDIT_SETTINGS, 10, CARTPOLE_SETTINGS)
#: A smoke test of the command: a few seconds.
QUICK_PLAN = ComparisonPlan(
    4, {"defaults": BanditLoopSettings(iterations=10)}, 1, {CLEANRL: CartPoleSettings(2048)}
)


def run_comparison(
    plan: ComparisonPlan, progress: Callable[[str, int, int], None] = lambda *_: None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Run ``plan``; return the results as plain data, and the runs (for the figure).

    Part A keeps each method's summary over seeds; part B each seed's final return and its
    curves (to four significant digits).  ``progress(label, done, total)`` follows the runs.
    """
    results: dict[str, Any] = {"command": COMMAND, "machine": fingerprint(), "paper": PAPER_TABLE_1}
    results |= {"bandit": {}, "cartpole": {}}
    live: dict[str, dict[str, Any]] = {"bandit": {}, "cartpole": {}}
    for name, settings in plan.bandit_settings.items() if plan.bandit_methods else ():
        runs = {}
        for index, key in enumerate(plan.bandit_methods):
            progress(f"part A, {name}: {METHODS[key].label}", index, len(plan.bandit_methods))
            runs[key] = run_bandit_loop(METHODS[key], settings, tuple(range(plan.bandit_seeds)))
        summaries = {
            key: {
                "score": float(run.score.mean()),
                "score_se": standard_error(run.score),
                "collapsed": float(run.collapsed[:, -1].mean()),
                "approx_kl": float(run.approx_kl.mean()),
                "clip_fraction": float(run.clip_fraction.mean()),
            }
            for key, run in runs.items()
        }
        live["bandit"][name] = runs
        results["bandit"][name] = {
            "settings": asdict(settings),
            "seeds": plan.bandit_seeds,
            "methods": summaries,
        }
    for name, settings in plan.cartpole_settings.items() if plan.cartpole_methods else ():
        runs = {}
        for key in plan.cartpole_methods:
            label = f"part B, {name}: {METHODS[key].label}"
            seeds = tuple(range(plan.cartpole_seeds))
            runs[key] = run_cartpole(
                METHODS[key], settings, seeds, lambda *done, at=label: progress(at, *done)
            )
        records = {
            key: {
                "final_return": run.final_return.tolist(),
                **{
                    name: [[float(f"{v:.4g}") for v in row] for row in getattr(run, name)]
                    for name in ("return_curve", "clip_fraction", "approx_kl")
                },
            }
            for key, run in runs.items()
        }
        live["cartpole"][name] = runs
        results["cartpole"][name] = {
            "settings": asdict(settings),
            "seeds": list(range(plan.cartpole_seeds)),
            "methods": records,
        }
    return results, live


def results_markdown(results: Mapping[str, Any], seconds: float) -> str:
    """RESULTS.md: how it was made and on which machine, the table, the settings, the figure."""
    machine = results["machine"]
    lines = [
        "# Why PPO clips: the reproduced table",
        "",
        f"Written by `{COMMAND}` in {seconds:.0f} s. {table_caption(results)}",
        "",
        f"Machine: {machine['cpu']} ({machine['machine']}), numpy {machine['numpy']} with SIMD "
        f"{machine['simd']}. numpy's exp, log and tanh can differ in the last bit on another CPU "
        "or SIMD level, and a CartPole run is chaotic: one such bit changes its returns from "
        "then on. The bandit's numbers reproduce anywhere to 1e-12; CartPole's exactly only on "
        "a machine with this fingerprint, and elsewhere as aggregates over seeds.",
        "",
        *markdown_table(results),
        "",
        "Settings:",
        "",
    ]
    for part in ("bandit", "cartpole"):
        for name, entry in results[part].items():
            settings = ", ".join(f"{k} = {v}" for k, v in entry["settings"].items())
            lines.append(f"- {part}, {name}: {settings}")
    figure = "![The runs behind the table: means over seeds, shaded 25th to 75th percentile]"
    return "\n".join([*lines, "", f"{figure}({RESULTS_FIGURE.name})", ""])


#: Where a partial run writes when no ``--output-dir`` is given.
SCRATCH_DIR = Path(tempfile.gettempdir()) / "why_clip_partial"
BAR_WIDTH = 30


class ProgressLine:
    """``[######........]  40%  part B, CleanRL: PPO, ε = 0.2  12/97`` on one line of stderr.

    The runs report ``(label, done, total)``; a new label means the previous run finished.
    Each part A method counts as 1 unit, each part B iteration as 1.
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


def positive(text: str) -> int:
    """A whole number of seeds, at least 1 (for argparse)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def parse(argv: list[str] | None) -> tuple[ComparisonPlan, Path | None]:
    """The plan and the output folder the arguments ask for (None: print only); every
    mistake is refused here, before any work."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds; writes nothing")
    parser.add_argument("--output-dir", type=Path, help="where to write the three files")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        choices=FULL_PLAN.setting_names,
        help="only this setting",
    )
    parser.add_argument(
        "--method", action="append", default=[], choices=tuple(METHODS), help="only this method"
    )
    parser.add_argument("--bandit-seeds", type=positive, help="part A's seeds: 0 .. N - 1")
    parser.add_argument("--cartpole-seeds", type=positive, help="part B's seeds: 0 .. N - 1")
    args = parser.parse_args(argv)
    seeds = {
        name: getattr(args, name)
        for name in ("bandit_seeds", "cartpole_seeds")
        if getattr(args, name)
    }
    full = QUICK_PLAN if args.quick else FULL_PLAN
    try:
        plan = full.sliced(args.setting, args.method, **seeds)
    except ValueError as error:
        parser.error(str(error))
    if args.output_dir is not None:
        output = args.output_dir
    elif args.quick:
        return plan, None
    else:
        output = RESULTS_DIR if plan == FULL_PLAN else SCRATCH_DIR
    if output.exists() and not output.is_dir():
        parser.error(f"--output-dir {output} is a file, not a folder")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"cannot make the folder {output}: {error.strerror}")
    if output == SCRATCH_DIR:
        print(
            f"a partial run: writing to {output} (--output-dir names another folder)",
            file=sys.stderr,
        )
    return plan, output


def main(argv: list[str] | None = None) -> int:
    plan, output = parse(argv)
    progress = ProgressLine(units_of(plan))
    started = time.perf_counter()
    results, runs = run_comparison(plan, progress)
    seconds = time.perf_counter() - started
    progress.close()
    markdown = results_markdown(results, seconds)
    if output is None:
        print(markdown)
        return 0
    results_figure(runs["bandit"], runs["cartpole"]).savefig(output / RESULTS_FIGURE.name, dpi=110)
    (output / RESULTS_JSON.name).write_text(json_text(results), encoding="utf-8")
    (output / RESULTS_MARKDOWN.name).write_text(markdown, encoding="utf-8")
    print(f"wrote {output / RESULTS_MARKDOWN.name} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
