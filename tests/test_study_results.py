"""Both studies, one table of cases: the evidence they rest on (experiments/evidence.py: the
intervals, verdicts and the simultaneous band of a curve; ppo_viz/results.py); each committed
study bound to what it ran (its cells are the grid it stores, re-derived they give the committed
files back, its notebook states what it stores, not today's defaults); their commands (a slice
checked before any work, runs, resumes, never overwrites the committed files)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import operator
import os
import re
import resource
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import nbformat
import numpy as np
import pytest

from bandit_loop import BanditLoopSettings, run_bandit_loop
from experiments import mismatch_study, rlhf_study, rlhf_transfer, runner, why_clip
from experiments.evidence import (
    bootstrap_interval,
    paired,
    simultaneous_band,
    stable_range,
    verdict_of,
)
from experiments.runner import append_entry, read_cache
from ppo_viz.machine import fingerprint
from ppo_viz.results import difference, load_results, markdown
from ppo_viz.rlhf import results as rlhf_results
from ppo_viz.why_clip import results as why_clip_results
from ppo_viz.why_clip.methods import METHODS

# --------------------------------------------------------------------------
# The evidence
# --------------------------------------------------------------------------


def test_the_bootstrap_is_seeded_and_pairs_only_the_seeds_both_have():
    a = np.random.default_rng(5).normal(1.0, 0.1, 200)
    assert bootstrap_interval(a) == bootstrap_interval(a.copy())
    low, high = bootstrap_interval(a)
    assert low < a.mean() < high
    for bad in ([1.0, np.nan], [], [[1.0]]):
        with pytest.raises(ValueError, match="finite"):
            bootstrap_interval(bad)
    assert stable_range([1.0, 2.0], [0.89, 0.5]) is None
    assert paired([1.0, None, 3.0], [0.0, 1.0, np.nan]) == {"diff": 1.0, "ci": [1.0, 1.0], "n": 1}
    with pytest.raises(ValueError, match="same seeds"):
        paired([1.0, 2.0], [1.0])


NOISE = np.random.default_rng(6).normal(0.0, 1.0, 200)
BASE = np.random.default_rng(5).normal(1.0, 0.1, 200)


@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        (BASE + 0.05, "higher"),
        (BASE - 0.05, "lower"),
        (BASE + NOISE - NOISE.mean(), "not distinguishable"),
        (BASE, "not distinguishable"),
    ],
)
def test_a_paired_differences_verdict_follows_its_interval(values, verdict):
    found = paired(values, BASE)
    assert verdict_of(found["ci"]) == verdict
    assert found["diff"] == pytest.approx(np.mean(values - BASE), abs=1e-15)
    assert found["n"] == BASE.size


@pytest.mark.parametrize(
    ("found", "seeds", "text"),
    [
        ({"diff": 0.05, "ci": [0.02, 0.08]}, 20, "+0.050 [+0.020, +0.080]"),
        ({"diff": 0.05, "ci": [0.02, 0.08]}, None, "+0.050 [+0.020, +0.080]"),
        (
            {"diff": 0.01, "ci": [-0.02, 0.04]},
            20,
            "not distinguishable with 20 seeds (+0.010 [-0.020, +0.040])",
        ),
        ({"diff": 0.01, "ci": [-0.02, 0.04]}, None, "+0.010 [-0.020, +0.040] n.d."),
        ({"diff": 0.0, "ci": [0.0, 0.0]}, 20, "the same run on all 20 seeds"),
        ({"diff": 0.0, "ci": [0.0, 0.0]}, None, "identical on every seed"),
    ],
)
def test_a_difference_is_written_as_a_table_or_a_sentence_writes_it(found, seeds, text):
    assert difference(found, seeds) == text


def test_band_covers_the_whole_curve_about_95_percent_of_the_time():
    """Over 100 seed sets of correlated settings whose true differences are all 0, the band
    misses somewhere in about 5% of sets (at most 8%); a 95% interval per setting misses
    somewhere in far more (over 15%): the reason for a simultaneous band."""
    rng = np.random.default_rng(5)
    band_misses = pointwise_misses = 0
    for _ in range(100):
        d = 0.7 * rng.normal(size=(20, 1)) + 0.7 * rng.normal(size=(20, 8))
        band = simultaneous_band(d)
        band_misses += not (np.array(band["low"]) <= 0).all() & (np.array(band["high"]) >= 0).all()
        mean, se = d.mean(axis=0), d.std(axis=0, ddof=1) / np.sqrt(20)
        pointwise_misses += not (np.abs(mean) <= 1.96 * se).all()
    assert band_misses / 100 <= 0.08
    assert pointwise_misses / 100 > 0.15


@pytest.mark.parametrize("bad", [[[1.0, 2.0]], [1.0, 2.0], [[np.nan], [1.0]]])
def test_band_refuses_what_is_not_a_seeds_by_settings_array(bad):
    with pytest.raises(ValueError, match="differences must be a finite"):
        simultaneous_band(bad)


# --------------------------------------------------------------------------
# The committed studies, one table
# --------------------------------------------------------------------------


def why_clip_tables(results: dict) -> list:
    tables = [why_clip_results.range_table(results, name) for name in results["sweeps"]]
    tables += [why_clip_results.table_1(why_clip_results.one_set(results, s)) for s in SETS]
    return [*tables, why_clip_results.claims_table(results)]


def rlhf_tables(results: dict) -> list:
    tables = [rlhf_results.findings_table(results)]
    return tables + [rlhf_results.curve_table(results, f) for f in results["findings"]]


SETS = ("discovery", "confirmation")
NOTEBOOKS = why_clip_results.RESULTS_DIR.parent / "notebooks"
#: Per study: its command module, the option that writes its report again from its JSON, its
#: files, the tables its report shows, and the notebook that reads it.
STUDIES = {
    "why_clip": (why_clip, "--rewrite", why_clip_results, why_clip_tables, "04_why_clip"),
    "rlhf": (rlhf_study, "--restate", rlhf_results, rlhf_tables, "07_clipping_in_llm_training"),
}
#: Every study's command and the option that derives its report again (mismatch: notebook 9's).
COMMANDS = {study: entry[:2] for study, entry in STUDIES.items()}
COMMANDS["mismatch"] = (mismatch_study, "--restate")
COMMANDS["transfer"] = (rlhf_transfer, "--restate")  # the RLHF study's transfer check


@cache
def committed(study: str) -> dict:
    return STUDIES[study][2].load_results()


def stored_cells(study: str) -> set[tuple]:
    """(seed set, method, step size, more, seeds) of every committed cell."""
    results = committed(study)
    if study == "rlhf":
        return {
            (c["set"], c["method"], c["learning_rate"], c["updates"], len(c["per_seed"]["score"]))
            for c in results["cells"]
        }
    return {
        (s, f"{name}/{key}", c["value"], None, len(c["scores"]))
        for name, sweep in results["sweeps"].items()
        for s, entry in sweep["sets"].items()
        for key, method in entry["methods"].items()
        for c in method["cells"]
    }


def planned_cells(study: str) -> set[tuple]:
    """The same, for every cell of the plan the committed results store."""
    plan = STUDIES[study][0].plan_of(committed(study))
    if study == "rlhf":
        cells = ((c, c.settings) for c in plan.cells)
        return {(c.seed_set, c.method, s.learning_rate, s.updates, c.seeds) for c, s in cells}
    return {(c.seed_set, f"{c.sweep}/{c.method}", c.value, None, c.seeds) for c in plan.cells}


@pytest.mark.parametrize("study", STUDIES)
def test_the_committed_cells_are_the_grid_the_study_stores(study):
    """Every method at every step size (and mu) of the stored grid, on both sets of seeds from
    seed 0, each with the stored number of seeds, and no other cell."""
    results = committed(study)
    assert results["seed_offset"] == 0
    assert stored_cells(study) == planned_cells(study)
    assert results["machine"].keys() == fingerprint().keys()
    assert {s for s, *_ in planned_cells(study)} >= set(SETS)


@pytest.mark.parametrize("study", COMMANDS)
def test_rederiving_the_statistics_from_the_json_gives_the_committed_files(study, tmp_path):
    """``--rewrite`` (notebook 4's study) and ``--restate`` (notebooks 7 and 9) derive every
    interval, claim, table and sentence again from the per-seed values the JSON keeps: on a copy
    of the committed JSON they give it and its report back (but the CPU time the statistics
    took)."""
    command, option = COMMANDS[study]
    results, report = command.FILES[:2]
    for path in (results, *getattr(command, "READS", ())):  # READS: what its report shows too
        (tmp_path / path.name).write_bytes(path.read_bytes())
    assert command.main([option, "--output-dir", str(tmp_path)]) == 0

    def timeless(text: str) -> str:
        text = re.sub(r'"summary_cpu_seconds": \d+', "", text)
        return re.sub(r"and \d+ s for the statistics, so about \d+", "", text)

    for path in (results, report):
        written = (tmp_path / path.name).read_text(encoding="utf-8")
        assert timeless(written) == timeless(path.read_text(encoding="utf-8")), path.name


@pytest.mark.parametrize("study", STUDIES)
def test_the_report_shows_the_tables_of_the_committed_json_which_has_no_nan(study):
    _, _, files, tables, _ = STUDIES[study]
    text = files.RESULTS_MARKDOWN.read_text(encoding="utf-8")
    results = committed(study)
    for table in tables(results):  # its header and rows, padded as the report's table pads them
        for line in (markdown(table)[0], *markdown(table)[2:]):
            assert re.sub(" +", " ", line) in re.sub(" +", " ", text)
    for field in results["machine"].values():
        assert field in text
    assert f"{results['cpu_seconds']}" in text
    assert not re.search(r"\btie[sd]?\b", text, re.IGNORECASE)  # "not distinguishable"
    stored = files.RESULTS_JSON.read_text(encoding="utf-8")  # valid JSON: no NaN
    json.loads(stored, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


@pytest.mark.parametrize("study", COMMANDS)
def test_the_reports_tables_line_up_their_columns_and_decimal_points(study):
    """Each table of a report, read as text: every line as long, every "|" in its place, and
    in a right-aligned column (of numbers) each cell's first number's decimal point (or its
    end) in one place."""
    text = COMMANDS[study][0].FILES[1].read_text(encoding="utf-8")
    tables = re.findall(r"(?:^\|.*\|\n)+", text, re.MULTILINE)
    assert len(tables) > (1 if study == "mismatch" else 10)
    for table in tables:
        lines = table.splitlines()
        bars = {tuple(i for i, c in enumerate(line) if c == "|") for line in lines}
        assert len(bars) == 1, lines[:3]
        edges = sorted(bars.pop())
        for left, right in itertools.pairwise(edges):
            if lines[1][right - 2] == ":":
                cells = [line[left + 1 : right] for line in lines[2:]]
                points = {re.match(r" *[-+−]?\d*", cell).end() for cell in cells}
                assert len(points) == 1, cells


def stored_values(study: str) -> list[str]:
    """Each setting, grid point and method label the committed results store."""
    results = committed(study)
    if study == "rlhf":
        settings = [results["settings"], results["model"]]
        grid = results["learning_rates"] + results["updates"]
    else:
        settings = [sweep["settings"] for sweep in results["sweeps"].values()]
        grid = [v for sweep in results["sweeps"].values() for v in sweep["values"]]
    values = [f"{k} = {v}" for s in settings for k, v in s.items()]
    return values + [f"{v:g}" for v in grid] + [m["label"] for m in results["methods"].values()]


@pytest.mark.parametrize("study", STUDIES)
def test_the_notebook_states_what_the_study_ran_with_as_its_results_record_it(study):
    """The notebook prints :func:`settings_lines` of the committed results: every stored
    setting (the bandit's arm means, CartPole's budget, the model), grid point and method."""
    notebook = nbformat.read(NOTEBOOKS / f"{STUDIES[study][4]}.ipynb", as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert "*settings_lines(results)" in code
    stated = "\n".join(STUDIES[study][2].settings_lines(committed(study)))
    for value in stored_values(study):
        assert value in stated, value


# --------------------------------------------------------------------------
# The commands: a slice is checked before any work, runs, resumes, never overwrites
# --------------------------------------------------------------------------

#: Per study, a slice of 8 cells (2 methods, 2 step sizes or mu, 2 seed sets; the RLHF study's
#: three sets make 12) on one process.
SLICES = {
    "why_clip": "--setting bandit --method ppo --method unclipped --value 0.5 --value 5 "
    "--bandit-seeds 3 --jobs 1",
    "rlhf": "--method grpo --method dr_grpo --learning-rate 0.01 --updates 1 --updates 2 "
    "--seeds 2 --jobs 1",
}
WHY_CLIP_SETTINGS = ["bandit", "cartpole", "cartpole_k1", "cartpole_k10"]
RLHF_METHODS = ["grpo", "unclipped", "ppo", "dr_grpo", "dapo", "dapo_sym", "gspo", "cispo"]
RLHF_METHODS += ["grpo_tight", "gspo_wide", "dr_grpo_agg", "grpo_mean"]


def committed_files() -> dict[str, bytes]:
    folder = why_clip_results.RESULTS_DIR
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


@pytest.mark.parametrize(
    ("study", "arguments", "said", "listed"),
    [
        ("why_clip", ["--method", "PPO"], "invalid choice: 'PPO' (choose from", ["ppo_eps_0.1"]),
        ("why_clip", ["--method", "ppo_eps_0.2"], "invalid choice: 'ppo_eps_0.2'", ["early_stop"]),
        ("why_clip", ["--setting", "default"], "no setting is named 'default'", WHY_CLIP_SETTINGS),
        ("why_clip", ["--value", "0.3"], "no value is named 0.3; choose from", ["0.05", "0.00025"]),
        ("why_clip", ["--value", "fast"], "invalid float value: 'fast'", []),
        ("why_clip", ["--seed-set", "fresh"], "no seed set is named 'fresh'", list(SETS)),
        ("why_clip", ["--setting", "cartpole_k10", "--method", "kl_fixed_1"], "nothing to run", []),
        ("why_clip", ["--bandit-seeds", "0"], "must be a whole number of at least 1, got '0'", []),
        ("why_clip", ["--cartpole-seeds", "2.5"], "at least 1, got '2.5'", []),
        ("why_clip", ["--quick", "--setting", "cartpole_k10"], "no setting is named", ["bandit"]),
        (
            "why_clip",
            ["--rewrite", "--setting", "bandit"],
            "but --output-dir and --jobs: --setting",
            [],
        ),
        ("why_clip", ["--rewrite", "--seed-offset", "800"], "--jobs: --seed-offset", []),
        ("rlhf", ["--method", "GRPO"], "invalid choice: 'GRPO' (choose from", RLHF_METHODS),
        ("rlhf", ["--learning-rate", "0.5"], "no learning rate is named 0.5", ["0.001", "0.05"]),
        ("rlhf", ["--updates", "3"], "no mu is named 3; choose from 1, 2, 4, 8", []),
        ("rlhf", ["--learning-rate", "fast"], "invalid float value: 'fast'", []),
        ("rlhf", ["--seeds", "0"], "must be a whole number of at least 1, got '0'", []),
        ("rlhf", ["--seed-offset", "-1"], "must be a whole number of at least 0, got '-1'", []),
        ("rlhf", ["--quick", "--learning-rate", "0.03"], "no learning rate is named 0.03", []),
        ("rlhf", ["--restate", "--quick"], "--restate takes no option but --output-dir and", []),
        ("rlhf", ["--restate", "--method", "grpo"], "--output-dir and --jobs: --method", []),
        ("rlhf", ["--restate", "--seed-offset", "40"], "--restate takes no option but", []),
    ],
)
def test_an_unknown_name_is_refused_with_the_valid_ones_before_any_work(
    study, arguments, said, listed, tmp_path, monkeypatch, capsys
):
    command, ran = STUDIES[study][0], []
    monkeypatch.setattr(command, "SCRATCH_DIR", tmp_path / "scratch")
    monkeypatch.setattr(command, "run_cell", lambda cell: ran.append(cell))
    before = committed_files()
    with pytest.raises(SystemExit) as exit_:
        command.main(arguments)
    assert exit_.value.code == 2
    said_all = capsys.readouterr().err
    assert len(said_all.strip().splitlines()) == 1, said_all  # the reason alone, no usage
    shown = " ".join(said_all.split())
    assert said in shown
    assert all(name in shown for name in listed)  # the valid names
    assert ran == []
    assert not (tmp_path / "scratch").exists()
    assert committed_files() == before


def test_quick_with_a_setting_runs_that_setting_of_the_quick_plan():
    """``--quick`` limits the plan as the full one: a setting named is honoured, not ignored."""
    assert [s.name for s in why_clip.QUICK_PLAN.sweeps] == ["bandit", "cartpole"]
    quick = runner.parse(why_clip, ["--quick", "--setting", "bandit"])[0]
    assert [s.name for s in quick.sweeps] == ["bandit"]


def output_dir(tmp_path: Path, study: str, case: str) -> Path:
    """An output folder as ``case`` says (``/sys/kernel``: one not even root can write in)."""
    command, _, files, *_ = STUDIES[study]
    out, results = tmp_path / "out", files.RESULTS_JSON
    if case.startswith("/"):
        return Path(case)
    if case == "a file":
        out.write_text("mine")
        return out
    out.mkdir()
    if case.endswith("a folder"):  # the results' or the cache's name
        (out / (results.name if case.startswith("results") else command.CACHE_NAME)).mkdir()
    elif case == "cut results":  # what a full disk left of the JSON
        (out / results.name).write_bytes(results.read_bytes()[:409_600])
    elif case == "another study's results":
        other = "rlhf" if study == "why_clip" else "why_clip"
        (out / results.name).write_bytes(STUDIES[other][2].RESULTS_JSON.read_bytes())
    return out


def listing(folder: Path) -> dict[str, bytes | None]:
    if folder.is_file():
        return {folder.name: folder.read_bytes()}
    return {path.name: path.read_bytes() if path.is_file() else None for path in folder.iterdir()}


@pytest.mark.parametrize(
    ("study", "rederive", "case", "said"),
    [
        ("why_clip", False, "a file", "it is a file, not a folder"),
        ("rlhf", False, "a file", "is a file, not a folder"),
        ("rlhf", False, "/sys/kernel", "cannot write into /sys/kernel: Permission denied"),
        ("rlhf", False, "results a folder", "out: rlhf_study.json is a folder"),
        ("why_clip", False, "cache a folder", "why_clip.cells.jsonl is a folder"),
        ("rlhf", True, "cut results", "out/rlhf_study.json: it is not whole JSON, cut short"),
        ("why_clip", True, "cut results", "cut short or edited (Expecting"),
        ("why_clip", True, "cut results", "; python -m experiments.why_clip --output-dir /"),
        ("why_clip", True, "another study's results", "holds python -m experiments.rlhf_study's"),
        ("rlhf", True, "/sys/kernel", "rlhf_study.json: cannot read it (No such file or"),
        ("rlhf", True, "/sys/kernel", "python -m experiments.rlhf_study --output-dir /sys/kernel"),
    ],
)
def test_a_folder_or_file_that_cannot_be_written_is_refused_in_one_line_before_any_work(
    study, rederive, case, said, tmp_path, monkeypatch, capsys
):
    """Every output folder is proven writable (a probe file) and no file the command writes is
    a folder, and results to derive again are whole JSON of this study, before any work."""
    command, option, *_ = STUDIES[study]
    ran = []
    monkeypatch.setattr(command, "run_cell", lambda cell: ran.append(cell))
    out = output_dir(tmp_path, study, case)
    before = listing(out) if out.is_relative_to(tmp_path) else None
    arguments = [option] if rederive else SLICES[study].split()
    with pytest.raises(SystemExit) as exit_:
        command.main([*arguments, "--output-dir", str(out)])
    assert exit_.value.code == 2
    shown = capsys.readouterr().err
    assert said in shown
    assert len(shown.strip().splitlines()) == 1, shown  # no traceback, no progress bar
    assert ran == []
    assert before is None or listing(out) == before


REPOSITORY = Path(__file__).resolve().parents[1]


def limited_to(size: int):
    """For a subprocess: files of at most ``size`` bytes, as on a disk that fills up."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write too large fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


@pytest.mark.parametrize(
    ("study", "rederive", "size"),
    [
        ("rlhf", True, 400 * 1024),  # the JSON fails at 400 of its 700 kB
        ("why_clip", True, 1024 * 1024),
        ("rlhf", False, 16 * 1024),  # the figure fails, the JSON of a slice would fit
        ("why_clip", False, 16 * 1024),
    ],
)
def test_a_full_disk_leaves_every_file_whole_and_the_same_command_writes_them_later(
    study, rederive, size, tmp_path
):
    """A write that fails leaves the folder as it was, not half of a file nor a new figure
    beside old results; the command says so in one line; run again, it writes every file
    (a run from its kept cells, a re-derivation from the results it left whole)."""
    command, option, files, *_ = STUDIES[study]
    out = tmp_path / "out"
    out.mkdir()
    if rederive:
        (out / files.RESULTS_JSON.name).write_bytes(files.RESULTS_JSON.read_bytes())
    arguments = [option] if rederive else SLICES[study].split()
    run = [sys.executable, "-m", command.__name__, *arguments, "--output-dir", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    before = listing(out)
    full = subprocess.run(run, capture_output=True, text=True, env=env, preexec_fn=limited_to(size))
    assert full.returncode == 1, full.stderr
    assert f"could not write into {out}: File too large" in full.stderr
    assert "Traceback" not in full.stderr
    after = listing(out)
    if not rederive:  # only the finished cells, kept for the same command
        assert after.pop(command.CACHE_NAME)
        assert len(read_cache(out / command.CACHE_NAME).done) == (12 if study == "rlhf" else 8)
    assert after == before
    again = subprocess.run(run, capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert {path.name for path in out.iterdir()} >= {
        files.RESULTS_MARKDOWN.name,
        files.RESULTS_JSON.with_suffix(".png").name,
    }
    load_results(out / files.RESULTS_JSON.name)


def measured(data: object) -> object:
    """What a run measures, but the CPU time each cell took."""
    if isinstance(data, dict):
        return {k: measured(v) for k, v in data.items() if k not in ("cpu_seconds", "seconds")}
    return [measured(v) for v in data] if isinstance(data, list) else data


@pytest.mark.parametrize("study", STUDIES)
def test_an_interrupted_run_resumes_from_the_cells_it_finished(
    study, tmp_path, monkeypatch, capsys
):
    """Ctrl-C (here: at the 1st, 4th and 6th cell, each a second into it) keeps the finished
    cells, even after a line that a killed run cut short; the same command resumes from them,
    and the results count every part's seconds."""
    command, calls = STUDIES[study][0], []
    real = command.run_cell

    def interrupted(cell):
        calls.append(cell.key)
        if len(calls) in (1, 4, 6):
            time.sleep(1.0)
            raise KeyboardInterrupt
        return real(cell)

    monkeypatch.setattr(command, "run_cell", interrupted)
    folder, json_name = tmp_path / "resumed", STUDIES[study][2].RESULTS_JSON.name
    cache, arguments = folder / command.CACHE_NAME, [*SLICES[study].split(), "--output-dir"]
    assert command.main([*arguments, str(folder)]) == 130
    said = capsys.readouterr().err.split("interrupted")[-1]
    assert "before any cell finished" in said
    assert not cache.exists()
    assert all(Path(w).exists() for w in said.split() if w.startswith("/"))  # nothing unreal
    assert command.main([*arguments, str(folder)]) == 130
    assert len(read_cache(cache).done) == 2
    assert f"2 cells finished so far kept in {cache};" in capsys.readouterr().err
    assert read_cache(cache).wall_seconds >= 1.0  # the interrupted run's time counts
    with cache.open("a") as file:
        file.write('{"key": "cut short by kill -9", "raw"')
    assert command.main([*arguments, str(folder)]) == 130
    assert len(read_cache(cache).done) == 3  # the cell after the cut line is kept
    assert not (folder / json_name).exists()
    assert command.main([*arguments, str(folder)]) == 0
    cells = len(runner.parse(command, SLICES[study].split())[0].cells)  # 8, or 12 with a third set
    assert len(calls) == 6 + cells - 3  # the cells left, not all of them
    assert not cache.exists()
    resumed = load_results(folder / json_name)
    assert resumed["seconds"] >= 2  # the two parts that kept cells ran a second longer each
    monkeypatch.setattr(command, "run_cell", real)
    command.main([*arguments, str(tmp_path / "whole")])
    whole = load_results(tmp_path / "whole" / json_name)
    for name in ("sweeps", "cells", "claims", "findings"):
        assert measured(resumed.get(name)) == measured(whole.get(name)), name


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """Both commands' scratch folder for partial runs, here a temporary one."""
    for command, *_ in STUDIES.values():
        monkeypatch.setattr(command, "SCRATCH_DIR", tmp_path / "scratch")
    return tmp_path / "scratch"


@pytest.mark.parametrize("study", STUDIES)
@pytest.mark.parametrize("offset", [0, 100])
def test_a_partial_run_writes_its_slice_to_the_scratch_folder_and_the_committed_files_stay(
    study, offset, scratch
):
    command, _, files, *_ = STUDIES[study]
    before = committed_files()
    arguments = [*SLICES[study].split(), "--seed-offset", str(offset)]
    assert command.main(arguments) == 0
    assert committed_files() == before
    written = load_results(scratch / files.RESULTS_JSON.name)
    assert command.plan_of(written) == runner.parse(command, arguments)[0]  # what ran, as asked
    figures = {"why_clip.png"} if study == "why_clip" else {"rlhf_study.png", "rlhf_effects.png"}
    names = {files.RESULTS_JSON.name, files.RESULTS_MARKDOWN.name, *figures}
    assert {path.name for path in scratch.iterdir()} == names
    if study == "rlhf":  # the findings whose two methods ran
        assert [f["key"] for f in written["findings"]] == ["length_bias", "dr_grpo_accuracy"]
        return
    for seed_set, first in zip(SETS, (offset, offset + 3), strict=True):  # the seeds it says
        run = run_bandit_loop(
            METHODS["unclipped"], BanditLoopSettings(step_size=5.0), tuple(range(first, first + 3))
        )
        sweep = why_clip_results.one_set(written, seed_set)["sweeps"]["bandit"]
        cell = why_clip_results.cell_at(sweep, "unclipped", 5.0)
        assert cell["mean"] == pytest.approx(run.score.mean(), abs=1e-6)


def test_a_partial_run_leaves_no_stale_figure_beside_its_results(tmp_path, scratch):
    """Each run writes the figure of what it ran, next to the table of what it ran."""
    output, first_slice = ["--output-dir", str(tmp_path / "out")], SLICES["why_clip"].split()
    why_clip.main([*first_slice, *output])
    first = (tmp_path / "out" / "why_clip.png").read_bytes()
    second = [*first_slice[:-4], "--method", "plain_pg", "--bandit-seeds", "2", "--jobs", "1"]
    why_clip.main([*second, *output])
    assert (tmp_path / "out" / "why_clip.png").read_bytes() != first
    assert "plain PG" in (tmp_path / "out" / "RESULTS.md").read_text()
    assert not scratch.exists()


@pytest.mark.slow
@pytest.mark.parametrize("study", COMMANDS)
def test_the_quick_run_prints_its_report_and_writes_nothing(study, scratch, capsys):
    before = committed_files()
    assert COMMANDS[study][0].main(["--quick"]) == 0
    shown = capsys.readouterr().out
    assert re.search("## (Findings|Claims|Does it transfer)", shown)
    assert committed_files() == before
    assert not scratch.exists()


def edited(*where: str | int, value: object = None):
    """The committed results' text with the value at ``where`` (keys, indices) replaced by
    ``value``, or deleted (None)."""

    def edit(text: str) -> bytes:
        results = json.loads(text)
        inside = functools.reduce(operator.getitem, where[:-1], results)
        if value is None:
            del inside[where[-1]]
        else:
            inside[where[-1]] = value
        return json.dumps(results).encode()

    return edit


S = '"seconds": '  # a number in every study's results


@pytest.mark.parametrize(
    ("study", "damage", "said"),
    [
        ("mismatch", edited("machine"), "KeyError: 'machine'"),
        ("mismatch", edited("seconds"), "KeyError: 'seconds'"),
        ("mismatch", edited("settings", "updates"), "KeyError: 'updates'"),
        ("mismatch", edited("sets", value="x"), "AttributeError: 'str' object"),
        ("mismatch", edited("cells", 0, "raw", "gap_quantiles", value=[0.0]), "IndexError"),
        ("mismatch", edited("cells", 0, "raw", "bias", "control", "floor", value=0), "ZeroDiv"),
        ("rlhf", lambda text: json.dumps({"command": json.loads(text)["command"]}).encode(), "Key"),
        ("why_clip", edited("sweeps", value="x"), "AttributeError: 'str' object"),
        ("rlhf", lambda text: text.replace(S, S + "1" * 5001, 1).encode(), "4300 digits"),
        ("mismatch", lambda text: b"\xff\xfe" + text.encode(), "UnicodeDecodeError: 'utf-8'"),
        ("why_clip", lambda _: b"[" * 100_000 + b"]" * 100_000, "RecursionError: maximum"),
        ("mismatch", lambda text: text.replace(S, S + 'NaN, "x": ', 1).encode(), "NaN is not"),
        ("rlhf", lambda text: text.replace(S, S + '-Infinity, "x": ', 1).encode(), "-Infinity"),
    ],
)
def test_results_whose_content_is_damaged_are_refused_in_one_line(
    study, damage, said, tmp_path, capsys
):
    """Results damaged in any way (a key deleted, a value of another kind, a list cut short, a
    zero, not UTF-8, nested too deep, a number too long, NaN): one line naming the file and
    what is wrong, status 2, on a rederive, never a traceback; nothing is written."""
    command, option = COMMANDS[study]
    damaged = tmp_path / command.FILES[0].name
    damaged.write_bytes(damage(command.FILES[0].read_text(encoding="utf-8")))
    before = listing(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        command.main([option, "--output-dir", str(tmp_path)])
    assert exit_.value.code == 2
    [shown] = capsys.readouterr().err.strip().splitlines()
    assert str(damaged) in shown
    assert said in shown
    assert listing(tmp_path) == before


@pytest.mark.parametrize(
    ("damage", "status", "runs", "said"),
    [
        (b'{"wall_seconds": "12"}', 0, 5, "line 6;"),  # a number made text
        (b"\xff\xfe", 0, 5, "line 6;"),
        (b"[" * 100_000, 0, 5, "line 6;"),
        ("a cell's scores edited", 0, 6, "line 2;"),
        ("a cell's scores cut, with its checksum", 2, 5, "not as this study wrote it (ValueErr"),
    ],
)
def test_a_damaged_cache_line_is_named_and_its_cell_runs_again(
    damage, status, runs, said, tmp_path, monkeypatch, capsys
):
    """A line of the cache damaged since it was written (it fails its checksum) is left out,
    said so at the start, and its cell runs again; cells whose numbers pass their checksum but
    make no results (another version's) are named in one line, status 2."""
    command, calls, real, stop = why_clip, [], why_clip.run_cell, [4]

    def run_cell(cell):
        calls.append(cell)
        if len(calls) in stop:
            raise KeyboardInterrupt
        return real(cell)

    monkeypatch.setattr(command, "run_cell", run_cell)
    arguments = [*SLICES["why_clip"].split(), "--output-dir", str(tmp_path)]
    assert command.main(arguments) == 130  # three cells kept, on lines 2 to 4
    cache = tmp_path / command.CACHE_NAME
    lines = cache.read_bytes().split(b"\n")
    cell = json.loads(lines[1])
    cell["raw"]["score"] = cell["raw"]["score"][:1]
    if damage == "a cell's scores edited":
        lines[1] = json.dumps(cell).encode()
    cache.write_bytes(b"\n".join([*lines, *([damage] if isinstance(damage, bytes) else [])]))
    if status:
        append_entry(cache, {"key": cell["key"], "raw": cell["raw"]})
    calls.clear(), stop.clear(), capsys.readouterr()
    with pytest.raises(SystemExit) if status else contextlib.nullcontext() as exit_:
        assert command.main(arguments) == 0
    assert (exit_.value.code if status else 0, len(calls)) == (status, runs)
    shown = capsys.readouterr().err
    assert said in shown
    assert str(cache) in shown
