"""Benchmark this checkout against a baseline revision, both measured in the same run.

From the repository root::

    python -m benchmarks.run                  # full run (~15 min); writes benchmarks/RESULTS.md
    python -m benchmarks.run --quick          # smoke run: small N, the first notebook, one drag
    python -m benchmarks.run --baseline-rev REV --output x.md --no-browser

Three measurements, each on this checkout and on the baseline revision (``git archive`` of it
into a temporary folder), so every number stands beside its baseline from the same run:

1. the modules against the textbook form (:mod:`benchmarks.module_bench`), as ratios;
2. each notebook executed headless, kernel start included (wall seconds);
3. one slider per notebook in a real JupyterLab in headless Chromium
   (:mod:`benchmarks.browser`): a key press's latency and the frames per second of a drag,
   against the feel targets, each marked met or missed.

A bad argument (a revision that names no commit or lacks a module measured, an output in no
folder or in one that cannot be written) stops the run before anything is measured, with one
line and status 2.  A browser that does not start leaves the browser part marked not measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as `python benchmarks/run.py`
    sys.path.insert(0, str(REPO))

from benchmarks import browser  # noqa: E402
from experiments.report import write_report  # noqa: E402
from experiments.runner import cannot_write  # noqa: E402
from ppo_viz.machine import cpu_model  # noqa: E402

DEFAULT_OUTPUT = REPO / "benchmarks" / "RESULTS.md"
#: The code this round of work started from (issue 42).
DEFAULT_BASELINE = "8c595ba"
#: The modules :mod:`benchmarks.module_bench` measures: a baseline must have each (else its
#: side would import this checkout's, installed in editable mode).
MEASURED = ("ppo_clip.py", "llm_clip.py")
#: Runs one notebook with the export's runner (this checkout's), in a kernel importing the code
#: on ``PYTHONPATH``; prints ``{"seconds", "problems"}``.
RUN_NOTEBOOK = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ppo_viz.export import execute_notebook, output_problems
started = time.perf_counter()
notebook = execute_notebook(sys.argv[2], allow_errors=True)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "problems": output_problems(notebook)}))
"""


STARTED = time.perf_counter()


def say(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:5.0f} s] {message}", file=sys.stderr, flush=True)


def git(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, check=False)


def resolve(revision: str) -> str:
    """The commit ``revision`` names; ``ValueError`` in one line if it names none."""
    if not revision.strip() or revision.startswith("-"):
        raise ValueError(f"{revision!r} is not a revision (give a commit such as 8c595ba)")
    found = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
    if found.returncode:
        raise ValueError(f"{revision!r} names no commit in {REPO}")
    commit = found.stdout.decode().strip()
    for name in MEASURED:
        if git("cat-file", "-e", f"{commit}:{name}").returncode:
            raise ValueError(f"{revision!r} has no {name}, which the benchmark measures")
    return commit


def extract(commit: str, folder: Path) -> Path:
    """The tree of ``commit`` written into ``folder`` (the repository itself is left alone)."""
    archive = git("archive", "--format=tar", "--end-of-options", commit)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def env_for(root: Path) -> dict[str, str]:
    """This environment with ``root`` alone on ``PYTHONPATH``: its code is what is measured."""
    return {**os.environ, "PYTHONPATH": str(root)}


# -- the three measurements ---------------------------------------------------------------------


def module_bench(root: Path, quick: bool) -> list[dict]:
    """:mod:`benchmarks.module_bench` on ``root``'s modules, in a fresh interpreter."""
    command = [sys.executable, str(REPO / "benchmarks" / "module_bench.py")]
    done = subprocess.run(
        command + ["--quick"] * quick, env=env_for(root), capture_output=True, text=True, cwd=root
    )
    if done.returncode:
        raise RuntimeError(f"module_bench.py on {root} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def run_notebook(root: Path, notebook: Path) -> dict:
    """``{"seconds", "problems"}`` of ``notebook`` executed headless on ``root``'s code."""
    if not notebook.exists():
        return {"seconds": math.nan, "problems": ["no such notebook"]}
    done = subprocess.run(
        [sys.executable, "-c", RUN_NOTEBOOK, str(REPO), str(notebook)],
        env=env_for(root),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        return {"seconds": math.nan, "problems": [done.stderr.strip().splitlines()[-1]]}
    return json.loads(done.stdout)


# -- the report ---------------------------------------------------------------------------------


def table(title: str, header: list[str], rows: list[list[object]], note: str = "") -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += [
        "| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows
    ]
    return "\n".join(lines + ([f"\n{note}"] if note else []))


def ratio(now: float, before: float) -> str:
    return f"{now / before:.2f}x" if before > 0 and math.isfinite(now / before) else "n/a"


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.0f}"


def module_table(now: list[dict], before: list[dict], base: str) -> str:
    rows = []
    for mine, old in zip(now, before, strict=True):
        rows.append(
            [
                mine["function"],
                mine["n"],
                f"{mine['module'] * 1e6:.1f}",
                ratio(mine["module"], mine["textbook"]),
                f"{old['module'] * 1e6:.1f}",
                ratio(old["module"], old["textbook"]),
                ratio(mine["module"], old["module"]),
                "yes" if mine["agrees"] and old["agrees"] else "**no**",
            ]
        )
    header = ["function", "N", "now µs", "now / textbook", f"at {base} µs", f"at {base} / textbook"]
    return table(
        "The modules against the textbook form (min of repeats)",
        [*header, f"now / at {base}", "agree with the textbook"],
        rows,
        "Each function interleaved with the textbook form of its formula (numpy, no input "
        "checks, no care at float64's limits) on the same seeded arrays of ordinary values "
        "(N samples; N tokens as 8 responses); each side in a fresh interpreter.",
    )


def notebook_table(names: list[str], now: list[dict], before: list[dict], base: str) -> str:
    rows = []
    for name, mine, old in zip(names, now, before, strict=True):
        theirs = [f"at {base}: {p}" for p in old["problems"] if p not in mine["problems"]]
        problems = "; ".join(mine["problems"] + theirs)
        seconds = [
            f"{s:.1f}" if math.isfinite(s) else "n/a" for s in (mine["seconds"], old["seconds"])
        ]
        rows.append([name, *seconds, ratio(mine["seconds"], old["seconds"]), problems or "none"])
    return table(
        "Notebooks executed headless, kernel start included (wall s)",
        ["notebook", "now s", f"at {base} s", f"now / at {base}", "errors or warnings"],
        rows,
        "The export's runner (nbclient), one run each, the two sides one after the other.",
    )


def feel_cells(feel: browser.Feel) -> list[str]:
    if feel.problem or not feel.steps:
        return [feel.problem or "not measured", "", ""]
    drag = feel.drag
    each = ", ".join(f"{d.fps:.1f}" for d in feel.drags)
    rate = f"{drag.fps:.1f} ({each}), {drag.frames}+{drag.after} frames for {drag.values} values"
    return [ms(feel.step), rate, ms(drag.settle)]


def browser_tables(feels: dict[str, list[browser.Feel]], base: str) -> str:
    now, before = feels["now"], feels[f"at {base}"]
    rows, targets = [], []
    for mine, old in zip(now, before, strict=True):
        rows.append(
            [mine.notebook, mine.control or old.control, *feel_cells(mine), *feel_cells(old)]
        )
        old_verdicts = old.verdicts()
        for target, met in mine.verdicts().items():
            earlier = old_verdicts.get(target)
            at_base = "n/a" if earlier is None else ("met" if earlier else "missed")
            targets.append([mine.notebook, target, "**met**" if met else "**missed**", at_base])
    half = ["key press ms", "drag frames/s (each drag)", "settle ms"]
    header = [
        "notebook",
        "slider",
        *(f"now: {h}" for h in half),
        *(f"at {base}: {h}" for h in half),
    ]
    met = sum(row[2] == "**met**" for row in targets)
    return "\n\n".join(
        [
            table(
                "Feel targets (JupyterLab in headless Chromium)",
                ["notebook", "target", "now", f"at {base}"],
                targets,
                f"{met} of {len(targets)} targets met now."
                if targets
                else "No feel target measured: the browser did not run (see below).",
            ),
            table(
                "Feel in the browser: one slider per notebook",
                header,
                rows,
                "Key press: the median, from the key down to the first new frame painted on the "
                "slider's figure. Drag: the handle carried over half its track in 2 s (--quick: "
                "0.5 s) at 60 moves/s, the median of the drags (each drag's frames/s in "
                "brackets), frames painted while it moved + after the release, for the values its "
                "readout showed; "
                "settle: the release to the last frame. Notebook 4's slider acts on release "
                "(each setting trains): it is judged by its figure after a key press and after "
                "the release.",
            ),
        ]
    )


def header(mode: str, base: str, load: str, seconds: float) -> str:
    revision = git("rev-parse", "--short", "HEAD").stdout.decode().strip()
    dirty = ", with uncommitted changes" if git("status", "--porcelain").stdout.strip() else ""
    import numpy as np

    return (
        f"# Benchmark results\n\nWritten by `python -m benchmarks.run` ({mode}, {seconds:.0f} s) "
        f"on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC: this checkout ({revision}"
        f"{dirty}) against {base}, measured in the same run. {cpu_model()}, {os.cpu_count()} "
        f"cores, Python {platform.python_version()}, numpy {np.__version__}; load average "
        f"(1 / 5 / 15 min) at start and end: {load}. Times on a shared machine are noisy: run "
        "it when `uptime` shows a load below about 1."
    )


def load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


# -- the command --------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--quick", action="store_true", help="a smoke run (about a minute)")
    parser.add_argument(
        "--baseline-rev", default=DEFAULT_BASELINE, metavar="REV", help="default: %(default)s"
    )
    parser.add_argument("--output", type=Path, help="default: benchmarks/RESULTS.md (full run)")
    parser.add_argument("--no-browser", action="store_true", help="leave out the browser")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse(argv)
    output = arguments.output or (None if arguments.quick else DEFAULT_OUTPUT)
    try:
        commit = resolve(arguments.baseline_rev)
        if output is not None and (output.is_dir() or not output.parent.is_dir()):
            raise ValueError(f"--output {output}: not a file in an existing folder")
        if output is not None and (reason := cannot_write(output.parent)):
            raise ValueError(f"--output {output}: cannot write into {output.parent}: {reason}")
    except ValueError as error:
        say(f"error: {error}")
        return 2
    base, started, load_at_start = arguments.baseline_rev, time.perf_counter(), load()
    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    measured = notebooks[:1] if arguments.quick else notebooks
    with tempfile.TemporaryDirectory(prefix=f"ppo-at-{commit[:12]}-") as folder:
        sides = {"now": REPO, f"at {base}": extract(commit, Path(folder))}
        modules = {}
        for label, root in sides.items():
            say(f"modules against the textbook form ({label}) ...")
            modules[label] = module_bench(root, arguments.quick)
        runs: dict[str, list[dict]] = {label: [] for label in sides}
        for path in notebooks:
            for label, root in sides.items():
                if path not in measured:
                    runs[label].append({"seconds": math.nan, "problems": ["not run (--quick)"]})
                    continue
                say(f"notebook {path.name} ({label}) ...")
                runs[label].append(run_notebook(root, root / path.relative_to(REPO)))
        problem = "not run (--no-browser)" if arguments.no_browser else browser.problem()
        if not problem:
            settings = browser.Settings(2, 1, 0.5) if arguments.quick else browser.Settings()
            try:
                feels = browser.measure(measured, sides, settings, say)
            except Exception as error:  # Chromium or JupyterLab did not start: report the rest
                said = " ".join(str(error).split())[:200]  # one line, for a table's cell
                problem = f"not measured: {type(error).__name__}: {said}"
                say(f"browser: {problem}")
            else:
                for label in sides:
                    feels[label] += [
                        browser.Feel(p.name, problem="not run (--quick)")
                        for p in notebooks[len(measured) :]
                    ]
        if problem:
            feels = {
                label: [browser.Feel(p.name, problem=problem) for p in notebooks] for label in sides
            }
    mode = "--quick" if arguments.quick else "full run"
    report = "\n\n".join(
        [
            header(mode, base, f"{load_at_start}; {load()}", time.perf_counter() - started),
            browser_tables(feels, base),
            module_table(modules["now"], modules[f"at {base}"], base),
            notebook_table([p.name for p in notebooks], runs["now"], runs[f"at {base}"], base),
        ]
    )
    print(report)
    if output is not None:  # whole or not at all
        write_report(output.parent, {output: report + "\n"})
        say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the temporary baseline is removed on the way out; nothing written
        say("interrupted: nothing was written")
        raise SystemExit(130) from None
