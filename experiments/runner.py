"""Running a study's cells, for every study command (why_clip, rlhf_study, mismatch_study).

Every study command runs the same way.  Its cells run in ``--jobs`` worker processes (default:
every CPU this process may use) with one BLAS thread each, behind a progress bar on stderr,
each recording the CPU seconds it took.  Each finished cell is appended to a cache next to the
results, so an interrupted run resumes where it stopped; Ctrl-C stops the workers at once (a
running cell is lost, the finished ones are kept), and the cache is removed once the results
are written.  Every name and folder is checked before any work, an unknown name refused with
the valid ones, a folder that cannot be written in one line.  Only the full plan on seeds from
0 writes to ``experiments/``; any other run writes to the study's scratch folder unless
``--output-dir`` names one.  The results record the machine (:func:`ppo_viz.machine.fingerprint`).
A cache line cut short or damaged (each carries a checksum) is left out, said so, and its cell
runs again; results damaged in any way are named in one line (:func:`damage_named`).

A cell has a ``key`` (what it computes: two cells with one key run once), a ``cost`` (its
estimated CPU seconds), a ``seed_set``, a ``label()`` for the progress bar, and is run by a
function of the cell that returns its raw numbers as plain data (:func:`run_cells`;
:class:`ProgressBar`).  A study is its module, which names what differs (its plans, options,
cells, statistics and report); the commands share their options and how their arguments
become a plan and a folder (:func:`parse`; every mistake one line, status 2; a slice's names
checked by :func:`check_names`, folders by :func:`cannot_write`) and what they then do
(:func:`main`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, NoReturn

from experiments.evidence import ALL_SEED_SETS
from ppo_viz.machine import fingerprint
from ppo_viz.results import load_results, not_json

Runner = Callable[[Any], dict[str, Any]]
Files = Sequence[Path]  # a study's files, its results first


#: What damaged content (whole JSON whose values are not what a study wrote) raises in the code
#: that derives from it: caught where a file is read (:func:`damage_named`), nowhere else.
#: (ValueError: also a file not UTF-8, not JSON, or with a number of 5,000 digits.)
DAMAGE = (ArithmeticError, AttributeError, LookupError, RecursionError, TypeError, ValueError)


@contextmanager
def damage_named(path: Path | None, remedy: str) -> Iterator[None]:
    """Around everything derived from the file ``path`` (its statistics, report and figures):
    an error its damaged content can cause (:data:`DAMAGE`) is one line naming the file and
    ``remedy``, status 2 (``SystemExit``), never a traceback; nothing derived is written."""
    try:
        yield
    except DAMAGE as error:
        if path is None:  # derived from nothing read: a bug, shown whole
            raise
        what = f"{type(error).__name__}: {error}"[:120]
        print(f"error: {path} is not as this study wrote it ({what}); {remedy}", file=sys.stderr)
        raise SystemExit(2) from None


def checksum(entry: dict[str, Any]) -> str:
    """A cache entry's checksum, which every line carries: a line edited or damaged since it
    was written fails it (json's dumps of loads gives the same text back)."""
    return hashlib.blake2b(json.dumps(entry).encode(), digest_size=8).hexdigest()


class Cache(NamedTuple):
    """A cache as :func:`read_cache` reads it: each finished cell's raw numbers by key, the
    wall seconds of every run that wrote to it, and the numbers of the lines left out, cut
    short by an interruption or damaged since (their checksum fails: :func:`checksum`)."""

    done: dict[str, Any]
    wall_seconds: float
    damaged: list[int]


def read_cache(path: Path | None) -> Cache:
    """The cache at ``path``, read once (None, or no file there: empty)."""
    done, seconds, damaged = {}, 0.0, []
    lines = path.read_text(encoding="utf-8", errors="replace") if path and path.exists() else ""
    for number, line in enumerate(lines.splitlines(), 1):
        if not line:
            continue
        try:
            entry = json.loads(line, parse_constant=not_json)
            if entry.pop("check") != checksum(entry):
                raise ValueError("its checksum fails")
            if "key" in entry:
                done[entry["key"]] = entry["raw"]
            else:
                seconds += entry["wall_seconds"]
        except DAMAGE:
            damaged.append(number)
    return Cache(done, seconds, damaged)


def note_wall_seconds(path: Path | None, seconds: float) -> None:
    """Add this run's wall seconds to the cache (a resumed run counts every run's time)."""
    if path is not None and path.exists():
        append_entry(path, {"wall_seconds": round(seconds, 1)})


def append_entry(path: Path, entry: dict[str, Any]) -> None:
    """``entry`` and its :func:`checksum` on a new line of the cache, after any line that a
    killed run cut short."""
    with path.open("a", encoding="utf-8") as file:
        file.write("\n" + json.dumps({**entry, "check": checksum(entry)}))


def run_cells(
    cells: Sequence[Any],
    cache: Path | None,
    jobs: int,
    runner: Runner,
    progress: Callable[[Any], None] = lambda _: None,
    done: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every cell not ``done`` already (the raw numbers of the cells the cache held, by
    key) with ``runner`` (in ``jobs`` processes, started set by set in the order of
    :data:`~experiments.evidence.ALL_SEED_SETS`, the costliest first within a set), appending
    each to ``cache`` as it finishes; return each key's raw numbers.  ``progress`` hears of
    every cell once it is done (a cached one at once)."""
    order = {name: i for i, name in enumerate(ALL_SEED_SETS)}  # another set (a check's) last
    cells = sorted(cells, key=lambda c: (order.get(c.seed_set, len(order)), -c.cost))
    done = dict(done or {})
    todo: dict[str, Any] = {}
    for cell in cells:
        if cell.key in done:
            progress(cell)
        else:
            todo.setdefault(cell.key, cell)
    waiting = {key: [c for c in cells if c.key == key] for key in todo}
    running = finished_cells(list(todo.values()), jobs, runner)
    try:
        for cell, raw in running:
            done[cell.key] = raw
            if cache is not None:
                append_entry(cache, {"key": cell.key, "raw": raw})
            for same in waiting[cell.key]:
                progress(same)
    finally:
        running.close()  # on an interruption: stops the workers now
    return done


def finished_cells(cells: Sequence[Any], jobs: int, runner: Runner) -> Iterator[tuple[Any, Any]]:
    """Each cell with its raw numbers, as it finishes (in this process for one job).

    The workers ignore Ctrl-C; this process gets it, and leaving the generator (an
    exception, or ``close()``) terminates them at once, whatever they are running."""
    if jobs == 1:
        yield from ((cell, runner(cell)) for cell in cells)
        return
    workers = min(jobs, len(cells)) or 1
    with multiprocessing.Pool(workers, initializer=_start_worker, initargs=(runner,)) as pool:
        yield from pool.imap_unordered(_run_in_worker, cells)


_runner: Runner | None = None


def _start_worker(runner: Runner) -> None:
    global _runner
    _runner = runner
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_in_worker(cell: Any) -> tuple[Any, dict[str, Any]]:
    assert _runner is not None
    return cell, _runner(cell)


class StudyParser(argparse.ArgumentParser):
    """A parser whose mistakes are one line, ``<prog>: error: <what>`` (status 2): the
    project's messages name the option and the valid values, so argparse's usage above them
    would only bury them (``--help`` still shows it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse(study: ModuleType, argv: list[str] | None) -> tuple[Any, Path | None, int]:
    """A study command's arguments as ``(plan, output folder, jobs)``, every mistake refused
    before any work (one line, status 2).  Every study takes ``--quick``, its ``REDERIVE``
    flag (derive the statistics and the report again from the results), ``--output-dir``,
    ``--seed-offset`` (the plan's ``seed_offset``, its first seed: ``FRESH_FROM`` or more,
    seeds the committed study never used; 0 keeps the plan's own) and ``--jobs`` (worker
    processes, by default as many as this process may use CPUs); a study with options of its
    own has ``study.add_options`` add them and ``study.sliced(plan, args)`` limit its
    ``FULL_PLAN`` or ``QUICK_PLAN`` to what they name (a ``ValueError`` says what is wrong).
    The flag gives no plan (None), the folder whose results it derives again
    (:func:`rederive_folder`) and one job; with any other option but ``--output-dir`` and
    ``--jobs`` it is refused, naming that option.  A run writes into ``--output-dir``; nothing
    for ``--quick`` (None); the committed ``FILES``' folder for the full plan; else the study's
    ``SCRATCH_DIR`` (which a run says); the folder is made and proven writable before any work
    (:func:`writable`)."""
    flag, flag_help = study.REDERIVE
    parser = StudyParser(study.COMMAND, description=study.__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few seconds; writes nothing unless --output-dir is given",
    )
    parser.add_argument(flag, action="store_true", help=flag_help)
    parser.add_argument("--output-dir", type=Path, help="where to write the results")
    first = f"first seed ({study.FRESH_FROM} or more: all fresh)"
    parser.add_argument("--seed-offset", type=whole_number, default=0, help=first)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parser.add_argument("--jobs", type=seed_count, default=cpus or 1, help="worker processes")
    if hasattr(study, "add_options"):
        study.add_options(parser)
    args, defaults = parser.parse_args(argv), vars(parser.parse_args([]))
    if getattr(args, flag[2:]):
        free = (flag[2:], "output_dir", "jobs")
        given = [k for k, v in vars(args).items() if k not in free and v != defaults[k]]
        if given:
            option = "--" + given[0].replace("_", "-")
            parser.error(f"{flag} takes no option but --output-dir and --jobs: {option}")
        return None, rederive_folder(parser, flag, args.output_dir, study.FILES), 1
    full, plan = study.FULL_PLAN, study.QUICK_PLAN if args.quick else study.FULL_PLAN
    try:
        plan = study.sliced(plan, args) if hasattr(study, "sliced") else plan
    except ValueError as error:
        parser.error(str(error))
    plan = replace(plan, seed_offset=args.seed_offset or plan.seed_offset)
    if args.output_dir is None and args.quick:
        return plan, None, args.jobs
    output = args.output_dir or (study.FILES[0].parent if plan == full else study.SCRATCH_DIR)
    if output == study.SCRATCH_DIR:
        print(f"a partial run: writing to {output} (--output-dir names another)", file=sys.stderr)
    return plan, writable(parser, output, study.FILES), args.jobs


def writable(parser: argparse.ArgumentParser, folder: Path, files: Files) -> Path:
    """``folder``, made and proven writable (:func:`cannot_write`); else, before any work,
    the reason in one line and status 2."""
    reason = cannot_write(folder, [file.name for file in files])
    if reason:
        parser.exit(2, f"{parser.prog}: error: cannot write into {folder}: {reason}\n")
    return folder


def cannot_write(folder: Path, names: Sequence[str] = ()) -> str | None:
    """Why files cannot be written into ``folder`` (None: they can): it is made, and a probe
    file made and removed there (which finds what stops even root, such as ``/sys``); a file
    where it or a parent should be a folder, or a folder by one of ``names``, is named."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-").close()
    except OSError as error:
        blocker = next((path for path in (folder, *folder.parents) if path.is_file()), None)
        where = "it" if blocker == folder else blocker
        return f"{where} is a file, not a folder" if blocker else error.strerror
    return next((f"{name} is a folder" for name in names if (folder / name).is_dir()), None)


def whole_number(text: str, least: int = 0) -> int:
    """A whole number, at least ``least`` (for argparse; :func:`seed_count`: at least 1)."""
    if not text.isdigit() or int(text) < least:
        wanted = f"a whole number of at least {least}"
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return int(text)


def seed_count(text: str) -> int:
    return whole_number(text, 1)


BAR_WIDTH = 30


class ProgressBar:
    """``[######......]  40%  12/388 cells  8:02 left  <the last cell>`` on stderr, counting
    the cells' estimated CPU seconds; drawn at once, before any cell finishes, each cell named
    by its ``label()``."""

    def __init__(self, cells: Sequence[Any]) -> None:
        self.total = sum(cell.cost for cell in cells) or 1.0
        self.cells = len(cells)
        self.done, self.count, self.started = 0.0, 0, time.perf_counter()
        self.draw("starting")

    def __call__(self, cell: Any) -> None:
        self.done += cell.cost
        self.count += 1
        self.draw(cell.label())

    def draw(self, last: str) -> None:
        share = min(1.0, self.done / self.total)
        elapsed = time.perf_counter() - self.started
        minutes, seconds = divmod(round(elapsed * (1.0 - share) / share if share else 0.0), 60)
        left = f"{minutes}:{seconds:02d} left" if share else "?:?? left"
        bar = "#" * round(share * BAR_WIDTH)
        sys.stderr.write(
            f"\r[{bar:<{BAR_WIDTH}}] {share:4.0%}  {self.count}/{self.cells} cells  "
            f"{left}  {last}\033[K"
        )
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")


def digits(values: Iterable[float], significant: int) -> list[float | None]:
    """Each value to ``significant`` digits, None for NaN (JSON has no NaN)."""
    return [float(f"{v:.{significant}g}") if math.isfinite(v) else None for v in values]


def kept(values: Sequence[Any], chosen: Sequence[Any]) -> tuple[Any, ...]:
    """Those of ``values`` that are ``chosen`` (none chosen: all), in their order."""
    return tuple(v for v in values if not chosen or v in chosen)


def check_names(*checks: tuple[str, Sequence[Any], Sequence[Any]]) -> None:
    """Each ``(kind, chosen, valid)``: a ``ValueError`` naming the first chosen name that is
    not valid, and the valid ones."""
    for kind, chosen, valid in checks:
        unknown = [name for name in chosen if name not in valid]
        if unknown:
            listed = ", ".join(v if isinstance(v, str) else f"{v:g}" for v in valid)
            raise ValueError(f"no {kind} is named {unknown[0]!r}; choose from {listed}")


def rederive_folder(
    parser: argparse.ArgumentParser, flag: str, folder: Path | None, files: Files
) -> Path:
    """The folder whose results (the first of ``files``) ``flag`` (``--rewrite``,
    ``--restate``) derives again: the committed ones' unless ``--output-dir`` names one
    (``folder``).  Results missing, cut short, not JSON or another command's, or a folder not
    :func:`writable`: one line naming the file, what is wrong with it and the command that
    makes it, status 2."""
    path = (folder or files[0].parent) / files[0].name
    command = f"python -m experiments.{path.stem}"
    try:
        written_by = load_results(path)["command"]
        wrong = None if written_by.endswith(path.stem) else f"it holds {written_by}'s results"
    except OSError as error:
        wrong = f"cannot read it ({error.strerror})"
    except json.JSONDecodeError as error:
        wrong = f"it is not whole JSON, cut short or edited ({error.msg}, line {error.lineno})"
    except (ValueError, RecursionError) as error:  # not UTF-8, NaN, too deep, too long a number
        wrong = f"it is not JSON a study wrote ({type(error).__name__}: {error})"[:160]
    except (TypeError, KeyError, AttributeError):
        wrong = "it names no command that wrote it: not a study's results"
    if wrong is None:
        return writable(parser, path.parent, files)
    again = command + (f" --output-dir {folder}" if folder else "")
    parser.exit(2, f"{parser.prog}: error: {flag} needs {path}: {wrong}; {again} makes it\n")


def main(study: ModuleType, argv: list[str] | None = None) -> int:
    """A study command (``study``: its module) with the arguments ``argv``: :func:`parse`, then
    the work.

    No plan (its ``REDERIVE`` flag): the results in the output folder (the first of its
    ``FILES``) are derived again (``study.rederived``) and written; damaged, they are named in
    one line (:func:`damage_named`), as is a cache whose cells make no results.  Else the plan's
    cells run (``study.run_cell``, in ``--jobs`` processes, cached in the output folder under
    the last of ``FILES``' names; a damaged line left out) behind a progress bar;
    ``study.results_of(plan, raw)`` makes the results, after what every study records: its
    command, the machine (:func:`ppo_viz.machine.fingerprint`), the wall seconds of every
    session that ran them, the cells' CPU seconds and the jobs (``resumed_cells``: the cells an
    earlier session finished);
    ``study.write_results(results, output)`` writes them (``study.results_markdown`` printed
    when there is no output folder).  130 on Ctrl-C, the finished cells kept in the cache for
    the same command to resume from."""
    files = study.FILES
    plan, output, jobs = parse(study, argv)
    if plan is None:
        path = output / files[0].name
        try:
            with damage_named(path, "run the study again to make it"):
                study.write_results(study.rederived(load_results(path)), output)
        except KeyboardInterrupt:
            print("interrupted: the results were left as they were", file=sys.stderr)
            return 130
        print(f"derived {path} and its report again", file=sys.stderr)
        return 0
    cache = None if output is None else output / files[-1].name
    done, wall, damaged = read_cache(cache)
    if damaged:
        lines = ", ".join(map(str, damaged))
        print(f"left out of {cache}, cut short or damaged (not as this command wrote them): "
              f"line {lines}; the cells there run again", file=sys.stderr)  # fmt: skip
    progress = ProgressBar(plan.cells)
    started = time.perf_counter()
    try:
        raw = run_cells(plan.cells, cache, jobs, study.run_cell, progress, done)
    except KeyboardInterrupt:
        progress.close()
        note_wall_seconds(cache, time.perf_counter() - started)
        print(interrupted_message(cache), file=sys.stderr)
        return 130
    progress.close()
    seconds = time.perf_counter() - started
    note_wall_seconds(cache, seconds)  # kept if the statistics or the writing fail
    try:
        with damage_named(cache if done else None, "remove it to run its cells again"):
            cpu = sum(raw[key]["cpu_seconds"] for key in {cell.key for cell in plan.cells})
            made = {"command": study.COMMAND, "machine": fingerprint()}
            made |= {"seconds": round(wall + seconds), "cpu_seconds": round(cpu), "jobs": jobs}
            results = {**made, **study.results_of(plan, raw), "resumed_cells": len(done)}
            if output is None:
                print(study.results_markdown(results))
                return 0
            study.write_results(results, output)
    except KeyboardInterrupt:  # every cell finished: the results were being derived or written
        print(interrupted_message(cache), file=sys.stderr)
        return 130
    if cache is not None:
        cache.unlink(missing_ok=True)
    print(f"wrote {output} in {results['seconds']} s", file=sys.stderr)
    return 0


def interrupted_message(cache: Path | None) -> str:
    """What an interrupted run says it kept: only a cache that exists is named."""
    kept = len(read_cache(cache).done)
    if not kept:
        return "interrupted before any cell finished: nothing was kept"
    cells = "1 cell" if kept == 1 else f"{kept} cells"
    return (
        f"interrupted: {cells} finished so far kept in {cache}; the same command resumes from them"
    )
