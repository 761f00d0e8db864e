"""Benchmark the module, the figures' redraws, the notebooks, the import and the feel in a browser.

From the repository root::

    python -m benchmarks.run                 # full run; writes benchmarks/RESULTS.md
    python -m benchmarks.run --quick         # tiny sizes, a few seconds; writes nothing
    python -m benchmarks.run --output x.md   # write the table somewhere else
    python -m benchmarks.run --baseline-rev 3686b3b   # also time ppo_clip.py as it was then
    python -m benchmarks.run --browser-baseline-rev 7c696d6   # and the feel in the browser then
    python -m benchmarks.run --no-browser    # leave out JupyterLab in headless Chromium

Every ratio compares measurements taken in this same run, on the same arrays.  The arguments
are checked before anything is measured (a revision must name a commit; the output must be a
file that can be written in an existing folder): a problem stops the run in one line, status 2.
The machine is described at the top of the table, because the numbers mean
nothing without it.  PyTorch is optional: with torch installed the module is
also compared with the usual PyTorch form of the loss.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python benchmarks/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import (
    baseline,
    browser,
    browser_tables,
    feel,
    figures,
    imports,
    module_bench,
    notebooks,
    revisions,
)
from benchmarks.baseline import Baseline
from benchmarks.tables import Table, verdict
from ppo_viz.export import notebook_paths
from ppo_viz.machine import cpu_model, simd_found

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "benchmarks" / "RESULTS.md"
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Settings:
    """How much to measure: the full run, or ``--quick`` for a smoke test."""

    sizes: tuple[int, ...]
    repeats: int
    target_seconds: float
    slider_values: int
    import_runs: int
    notebook_runs: int
    notebook_limit: int | None
    browser: browser.Settings | None

    @classmethod
    def full(cls) -> Settings:
        return cls((4, 64, 4096), 200, 0.002, 20, 11, 1, None, browser.Settings.full())

    @classmethod
    def quick(cls) -> Settings:
        return cls((4, 16), 5, 0.0005, 2, 2, 1, 1, browser.Settings.quick())


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


def _version(package: str) -> str:
    try:
        module = __import__(package)
    except ImportError:
        return "not installed"
    return getattr(module, "__version__", "?")


def _blas() -> str:
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        return "unknown"


def _git_revision() -> str:
    try:
        revision = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--",
                "ppo_clip.py",
                "ppo_clip_inputs.py",
                "ppo_clip_exact.py",
                "ppo_viz",
                "notebooks",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return revision + (" (with uncommitted changes to the measured code)" if dirty else "")


def _load() -> str:
    if not hasattr(os, "getloadavg"):
        return "n/a"
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def machine_table(load_at_start: str, mode: str) -> Table:
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    env = ", ".join(f"{name}={os.environ.get(name, 'not set')}" for name in BLAS_ENV)
    table = Table("Machine", ["what", "value"])
    table.add("date (UTC)", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"))
    table.add("run", mode)
    table.add("repository revision", _git_revision())
    table.add("CPU", f"{cpu_model()} ({platform.machine()})")
    table.add("numpy SIMD (numpy.show_runtime(), found)", " ".join(simd_found()) or "none")
    table.add("cores", f"{cores} logical, {usable} usable by this process")
    table.add("OS", platform.platform())
    table.add("Python", f"{platform.python_implementation()} {platform.python_version()}")
    table.add(
        "numpy / matplotlib / ipywidgets",
        f"{_version('numpy')} / {_version('matplotlib')} / {_version('ipywidgets')}",
    )
    table.add("PyTorch", module_bench.torch_description())
    table.add("BLAS", f"{_blas()} (no measured operation uses BLAS: all are element-wise)")
    table.add("BLAS / threading environment", env)
    table.add("load average (1 / 5 / 15 min) at start", load_at_start)
    table.add("load average at end", _load())
    return table


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def targets_table(rows: list[tuple[str, str, bool]]) -> Table:
    table = Table("Targets", ["target", "measured", "verdict"])
    for target, measured, met in rows:
        table.add(target, measured, verdict(met))
    missed = sum(not met for _, _, met in rows)
    table.notes.append(f"{len(rows) - missed} of {len(rows)} targets met in this run.")
    return table


def measure_in_browser(
    settings: Settings, notebook_dir: Path, say: Any, sides: tuple[browser.Side, ...]
) -> list[feel.BrowserRun]:
    """The browser benchmark on the notebooks (the first ``notebook_limit`` of them), per side."""
    if settings.browser is None:
        return [feel.BrowserRun(skipped="not run (--no-browser)", label=s.label) for s in sides]
    paths = notebook_paths(notebook_dir)[: settings.notebook_limit]
    load_before = _load()
    runs = browser.measure(paths, settings.browser, sides=sides, say=say)
    if not runs[0].skipped:
        runs[0].notes.append(
            f"Load average (1 / 5 / 15 min) before the browser part: {load_before}; "
            f"after: {_load()}."
        )
    return runs


def run(
    settings: Settings,
    notebook_dir: Path,
    mode: str,
    apps: str = "",
    earlier: Baseline | None = None,
    sides: tuple[browser.Side, ...] = (browser.Side(),),
) -> str:
    """Measure everything and return the markdown report.

    ``earlier``: also time ``ppo_clip`` as it was at that revision, against the current one.
    ``sides``: the code whose feel in the browser is measured: this checkout first, then
    perhaps a revision's tree, compared with it.
    """
    load_at_start = _load()
    started = time.perf_counter()

    clock = time.perf_counter()

    def step(message: str) -> None:
        nonlocal clock
        _say(f"[{time.perf_counter() - clock:5.1f} s] {message}")
        clock = time.perf_counter()

    step(f"module: N = {settings.sizes} ...")
    module_results = module_bench.measure(
        settings.sizes, repeats=settings.repeats, target_seconds=settings.target_seconds
    )
    baseline_results = []
    if earlier is not None:
        step(f"module against ppo_clip.py at {earlier.revision} ...")
        baseline_results = baseline.measure(
            earlier,
            settings.sizes,
            repeats=settings.repeats,
            target_seconds=settings.target_seconds,
        )
    step("figures ...")
    redraws, untimed, built = figures.measure(settings.slider_values, only=apps)
    step("import time ...")
    import_result = imports.measure(REPO, settings.import_runs)
    step(f"notebooks in {notebook_dir} ...")
    notebook_results = notebooks.measure(
        notebook_dir, runs=settings.notebook_runs, limit=settings.notebook_limit
    )
    step("the notebooks in JupyterLab in headless Chromium ...")
    feels = measure_in_browser(settings, notebook_dir, _say, sides)
    step("done")
    now, *before = feels

    target_rows = (
        module_bench.target_rows(module_results)
        + baseline.target_rows(baseline_results)
        + figures.target_rows(redraws)
        + notebooks.target_rows(notebook_results)
        + browser_tables.target_rows(now)
        + [row for run in before for row in browser_tables.comparison_rows(now, run)]
    )
    sections = [
        machine_table(load_at_start, mode),
        targets_table(target_rows),
        *module_bench.tables(module_results),
        *([baseline.table(baseline_results)] if baseline_results else []),
        figures.table(redraws, untimed, built, settings.slider_values),
        notebooks.table(notebook_results, notebook_dir, settings.notebook_runs),
        browser_tables.steps_table(feels),
        browser_tables.drags_table(feels),
        *(browser_tables.comparison_table(now, run) for run in before),
        imports.table(import_result),
    ]
    elapsed = time.perf_counter() - started
    header = (
        "# Benchmark results\n\n"
        "Written by `python -m benchmarks.run` "
        f"({mode}, {elapsed:.0f} s). Times on a shared machine are noisy: the module "
        "is compared by the minimum over repeats, interleaved with its baselines, and "
        "every ratio uses numbers from this one run."
    )
    return "\n\n".join([header, *(section.markdown() for section in sections)]) + "\n"


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and few repeats, only the first notebook (a smoke test, seconds)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"markdown file to write (default: {DEFAULT_OUTPUT.relative_to(REPO)} for a "
        "full run; a --quick run writes a file only when given this)",
    )
    parser.add_argument(
        "--apps",
        default="",
        metavar="TEXT",
        help="time only the apps whose qualified name contains TEXT (default: every app)",
    )
    parser.add_argument(
        "--baseline-rev",
        default="",
        metavar="REV",
        help="also time ppo_clip.py as it was at this git revision (e.g. 3686b3b), "
        "interleaved with the current one on the same arrays (default: none)",
    )
    parser.add_argument(
        "--browser-baseline-rev",
        default="",
        metavar="REV",
        help="also measure the feel in the browser of the notebooks as they were at this git "
        "revision (e.g. 7c696d6), each right after today's, in a JupyterLab of its own "
        "(default: none)",
    )
    parser.add_argument(
        "--no-browser",
        action="store_true",
        help="leave out the notebooks in JupyterLab in headless Chromium (the browser part "
        "also skips itself, with a message, where Chromium or Playwright is missing)",
    )
    parser.add_argument(
        "--notebook-dir",
        type=Path,
        default=REPO / "notebooks",
        help="folder with the NN_*.ipynb notebooks to execute (default: notebooks/)",
    )
    return parser.parse_args(argv)


def output_problem(output: Path) -> str:
    """Why the report cannot be written to ``output`` (empty when it can), checked up front.

    The file may exist (it is replaced); it must not be a folder, and its folder must exist
    and take a new file (tried, not guessed from permission bits).
    """
    folder = output.parent
    if output.is_dir():
        return f"--output {output} is a folder; give a file, e.g. {output / 'RESULTS.md'}"
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        return f"--output {output}: the folder {folder} {what}"
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".benchmarks-check-"):
            pass
        if output.exists():
            with output.open("a", encoding="utf-8"):
                pass
    except OSError as error:
        return f"--output {output}: cannot write there ({error.strerror or error})"
    return ""


def check_arguments(arguments: argparse.Namespace) -> str:
    """The first problem with the command line (empty if none), found before any measuring."""
    output = arguments.output
    if output is not None and (problem := output_problem(output)):
        return problem
    if not arguments.notebook_dir.is_dir():
        return f"--notebook-dir {arguments.notebook_dir} is not a folder"
    for option in ("baseline_rev", "browser_baseline_rev"):
        revision = getattr(arguments, option)
        if revision:
            try:
                revisions.resolve(revision, REPO)
            except ValueError as error:
                return f"--{option.replace('_', '-')}: {error}"
    if arguments.browser_baseline_rev and not arguments.notebook_dir.resolve().is_relative_to(REPO):
        return "--browser-baseline-rev needs notebooks inside the repository (--notebook-dir)"
    names = [figures.qualified_name(cls) for cls in figures.live_figure_classes()]
    if arguments.apps and not any(arguments.apps in name for name in names):
        return f"--apps {arguments.apps!r} matches no app; the apps are: {', '.join(names)}"
    return ""


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    problem = check_arguments(arguments)
    if problem:
        _say(f"error: {problem}")
        return 2
    settings = Settings.quick() if arguments.quick else Settings.full()
    mode = "--quick" if arguments.quick else "full run"
    if arguments.no_browser:
        settings = replace(settings, browser=None)
        mode += ", --no-browser"
    if arguments.apps:
        mode += f", apps matching {arguments.apps!r}"
    earlier = None
    if arguments.baseline_rev:
        try:
            earlier = Baseline.at(arguments.baseline_rev, REPO)
        except ValueError as error:  # a commit without ppo_clip.py
            _say(f"error: --baseline-rev: {error}")
            return 2
        mode += f", baseline ppo_clip.py at {arguments.baseline_rev}"
    with ExitStack() as stack:
        sides = (browser.Side(),)
        if arguments.browser_baseline_rev:
            revision = arguments.browser_baseline_rev
            commit = revisions.resolve(revision, REPO)
            tree = stack.enter_context(revisions.checked_out(commit, REPO))
            sides += (browser.Side(f"at {revision}", tree),)
            mode += f", browser feel also at {revision}"
        notebook_dir = arguments.notebook_dir.resolve()
        report = run(settings, notebook_dir, mode, arguments.apps, earlier, sides)
    print(report)
    output = arguments.output or (None if arguments.quick else DEFAULT_OUTPUT)
    if output is not None:
        output.write_text(report, encoding="utf-8")
        _say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
