"""The benchmark runs end to end at tiny sizes and writes a well-formed table.

Not a timed test: no number is compared with a target here.  It checks that
``python -m benchmarks.run --quick --baseline-rev HEAD --no-browser`` completes,
that the file it writes is the table it prints, that a bad argument stops it before
anything is measured, that the baselines it compares against are right (a wrong
Python loop would make every ratio meaningless), and that the browser benchmark
turns the page's and the kernel's records into the right numbers; the test marked
``browser`` drives it in a real JupyterLab, today's code and a revision's.

Every test here is marked ``benchmarks`` and left out of the default run (``addopts``
in ``pyproject.toml``); CI runs them with ``pytest -m benchmarks tests/test_benchmarks.py``.
"""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import nbformat
import numpy as np
import pytest
from browser_support import FIXTURE_NOTEBOOK, require_browser

import benchmarks.run
import ppo_clip
from benchmarks import (
    baseline,
    browser,
    browser_tables,
    feel,
    figures,
    kernel_probe,
    module_bench,
    revisions,
)
from benchmarks.run import main as benchmarks_main
from ppo_viz.surrogate import SurrogateExplorer

REPO = Path(__file__).resolve().parent.parent
#: The app layer before LiveFigure: an image per frame (``.ppo-figure img``), for the browser
#: benchmark's before-and-after comparison.
IMAGE_LAYER_REVISION = "7c696d6"

pytestmark = pytest.mark.benchmarks


def _tiny_notebook(directory: Path) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# A tiny notebook"),
        nbformat.v4.new_code_cell("total = sum(range(10))\ntotal"),
    ]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = directory / "01_tiny.ipynb"
    nbformat.write(notebook, path)
    return path


def _tables(markdown: str) -> dict[str, list[list[str]]]:
    """``{title: rows}`` for every ``### title`` followed by a pipe table (header first)."""
    tables: dict[str, list[list[str]]] = {}
    title = None
    for line in markdown.splitlines():
        if line.startswith("### "):
            title = line[4:].strip()
            tables[title] = []
        elif line.startswith("|") and title is not None:
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            tables[title].append(cells)
    return tables


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[str, str]:
    """(printed report, written file) of one --quick run on a one-cell notebook."""
    directory = tmp_path_factory.mktemp("bench")
    _tiny_notebook(directory)
    output = directory / "results.md"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--quick",
            "--apps",
            "surrogate",
            "--baseline-rev",
            "HEAD",
            "--no-browser",
            "--notebook-dir",
            str(directory),
            "--output",
            str(output),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout, output.read_text(encoding="utf-8")


def test_the_file_holds_the_printed_table(quick_run):
    printed, written = quick_run
    assert written.strip() == printed.strip()
    assert written.startswith("# Benchmark results")


def test_every_table_is_well_formed(quick_run):
    _, written = quick_run
    tables = _tables(written)
    assert {"Machine", "Targets"} <= set(tables)
    for title, rows in tables.items():
        assert len(rows) >= 3, f"{title}: no data rows"
        header, separator, *body = rows
        assert all(re.fullmatch(r"-+", cell) for cell in separator), title
        for row in [separator, *body]:
            assert len(row) == len(header), f"{title}: {row}"


def test_the_machine_is_described_first(quick_run):
    _, written = quick_run
    tables = _tables(written)
    assert next(iter(tables)) == "Machine"
    described = {row[0]: row[1] for row in tables["Machine"][2:]}
    for key in (
        "CPU",
        "cores",
        "Python",
        "numpy / matplotlib / ipywidgets",
        "BLAS",
        "BLAS / threading environment",
        "PyTorch",
    ):
        assert described.get(key), f"machine table lacks {key!r}"
    assert np.__version__ in described["numpy / matplotlib / ipywidgets"]
    assert "OPENBLAS_CORETYPE=" in described["BLAS / threading environment"]


def _table_titled(written: str, start: str) -> list[list[str]]:
    tables = _tables(written)
    matches = [rows for title, rows in tables.items() if title.startswith(start)]
    assert matches, f"no table titled {start!r}; have {list(tables)}"
    return matches[0]


def test_module_timings_cover_every_function_and_baseline(quick_run):
    _, written = quick_run
    rows = _table_titled(written, "ppo_clip against its baselines")[2:]
    names = {(row[0], row[1]) for row in rows}
    for n in ("4", "16"):
        for name in (
            "ppo_clip_loss",
            "clip_fraction",
            "ppo_clip_grad",
            "clip_breakdown",
            module_bench.FLOOR,
            module_bench.LOOP,
            module_bench.ALL_THREE,
        ):
            assert (n, name) in names
    for row in rows:
        minimum, median = (float(cell.replace(",", "")) for cell in row[2:4])
        assert 0 < minimum <= median, row


def test_every_target_gets_a_verdict(quick_run):
    _, written = quick_run
    rows = _table_titled(written, "Targets")[2:]
    assert rows
    assert all(row[2] in ("**met**", "**missed**") for row in rows)
    assert any("floor" in row[0] for row in rows)
    assert any("Python loop" in row[0] for row in rows)
    assert any("01_tiny.ipynb" in row[0] for row in rows)
    assert any("at least as fast as at HEAD" in row[0] for row in rows)


def _records(rows: list[list[str]]) -> list[dict[str, str]]:
    """Table rows as ``{header: cell}`` dicts (rows[0] is the header, rows[1] the rule)."""
    header = rows[0]
    return [dict(zip(header, row, strict=True)) for row in rows[2:]]


def test_the_surrogate_explorer_redraws_are_timed(quick_run):
    _, written = quick_run
    records = _records(_table_titled(written, "Figure redraws"))
    assert {record["app"] for record in records} == {"ppo_viz.surrogate.SurrogateExplorer"}
    controls = {record["control"].split(" ")[0]: record for record in records}
    assert set(controls) == set(SurrogateExplorer().controls)
    for record in controls.values():
        settings = record["values"]
        assert int(settings) >= 2
        assert record["new frame each time"] == f"{settings}/{settings}"
        split = next(value for key, value in record.items() if key.startswith("median split"))
        update, blit, png = (float(part) for part in split.split(" / "))
        assert blit > 0
        assert png > 0
        assert update >= 0


def test_the_module_is_timed_against_the_baseline_revision(quick_run):
    _, written = quick_run
    records = _records(_table_titled(written, "ppo_clip now against ppo_clip at HEAD"))
    assert {(record["N"], record["function"]) for record in records} == {
        (n, function) for n in ("4", "16") for function in baseline.FUNCTIONS
    }
    for record in records:
        assert record["same results"] == "agrees"
        assert record["now / before"].endswith("x")


def test_the_notebook_ran_cleanly(quick_run):
    _, written = quick_run
    records = _records(_table_titled(written, "Notebooks"))
    assert [record["notebook"] for record in records] == ["01_tiny.ipynb"]
    assert records[0]["errors or stderr"] == "none"


# --------------------------------------------------------------------------
# The baselines must be right for the ratios to mean anything
# --------------------------------------------------------------------------


def test_the_python_loop_reproduces_the_worked_example():
    example = ppo_clip.worked_example()
    loss, fraction, grad = module_bench.python_loop(
        example.logp_new, example.logp_old, example.advantages, example.eps
    )
    assert loss == pytest.approx(-0.5375, rel=1e-15)
    assert fraction == 0.5
    np.testing.assert_allclose(grad, [0.0, -0.55, 0.0, 0.1125], rtol=1e-15)


def test_a_revision_is_loaded_as_a_module_of_its_own():
    source = (REPO / "ppo_clip.py").read_text(encoding="utf-8")
    earlier = baseline.module_from_source(source, "ppo_clip_copy")
    assert earlier is not ppo_clip
    assert "ppo_clip_copy" not in sys.modules
    example = ppo_clip.worked_example()
    assert earlier.ppo_clip_loss(*example) == ppo_clip.ppo_clip_loss(*example)
    assert isinstance(earlier.clip_breakdown(*example), earlier.ClipBreakdown)


# --------------------------------------------------------------------------
# Bad arguments stop the run before anything is measured (issue 24, section 6)
# --------------------------------------------------------------------------


@pytest.fixture
def nothing_measured(monkeypatch):
    """Fails the test if the run starts measuring."""

    def measuring(*args, **kwargs):
        raise AssertionError("the run started measuring despite a bad argument")

    monkeypatch.setattr(benchmarks.run, "run", measuring)


def _refused(arguments: list[str], capsys) -> str:
    """The one line the run printed when it refused ``arguments`` with status 2."""
    assert benchmarks_main(["--quick", "--no-browser", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.usefixtures("nothing_measured")
def test_an_option_given_as_a_revision_reaches_no_git_command(tmp_path, capsys):
    # Today's main passed it to `git show`, which wrote the file it named.
    target = tmp_path / "x"
    for option in ("--baseline-rev", "--browser-baseline-rev"):
        line = _refused([f"{option}=--output={target}"], capsys)
        assert f"{option}: '--output={target}' is not a revision" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("nothing_measured")
@pytest.mark.parametrize("revision", ["no-such-revision", "HEAD:ppo_clip.py", "HEAD^{tree}", " "])
def test_a_revision_must_name_a_commit(revision, capsys):
    line = _refused(["--baseline-rev", revision], capsys)
    assert line.startswith("error: --baseline-rev: ")
    assert "commit" in line


def test_a_revision_is_resolved_to_its_commit():
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert revisions.resolve("HEAD", REPO) == head
    assert revisions.resolve(head[:12], REPO) == head


@pytest.mark.usefixtures("nothing_measured")
def test_an_output_that_is_a_folder_is_refused_before_the_run(tmp_path, capsys):
    # Today's main measured for 77 s and then failed with IsADirectoryError.
    line = _refused(["--output", str(tmp_path)], capsys)
    assert f"--output {tmp_path} is a folder" in line


@pytest.mark.usefixtures("nothing_measured")
def test_an_output_in_a_missing_folder_is_refused_before_the_run(tmp_path, capsys):
    missing = tmp_path / "no-such-folder" / "results.md"
    line = _refused(["--output", str(missing)], capsys)
    assert f"the folder {missing.parent} does not exist" in line
    assert not missing.parent.exists()
    under_a_file = tmp_path / "a-file"
    under_a_file.write_text("not a folder")
    line = _refused(["--output", str(under_a_file / "results.md")], capsys)
    assert f"the folder {under_a_file} is not a folder" in line


def _unwritable_folder(tmp_path: Path) -> Path:
    """A folder no file can be created in: a read-only one, or (as root) /sys."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        (folder / "probe").touch()
    except OSError:
        return folder
    (folder / "probe").unlink()  # root writes anywhere it may: take a kernel file system
    return Path("/sys")


@pytest.mark.usefixtures("nothing_measured")
def test_an_output_in_a_read_only_folder_is_refused_before_the_run(tmp_path, capsys):
    folder = _unwritable_folder(tmp_path)
    try:
        line = _refused(["--output", str(folder / "results.md")], capsys)
        assert f"--output {folder / 'results.md'}: cannot write there" in line
    finally:
        (tmp_path / "read-only").chmod(0o700)


@pytest.mark.usefixtures("nothing_measured")
def test_apps_that_match_nothing_are_refused_before_the_run(capsys):
    line = _refused(["--apps", "NoSuchApp"], capsys)
    assert "--apps 'NoSuchApp' matches no app" in line
    assert "ppo_viz.surrogate.SurrogateExplorer" in line


@pytest.mark.parametrize("n", [4, 64, 4096])
def test_the_batch_spans_every_case_and_the_loop_agrees(n):
    batch = module_bench.make_batch(n)
    logp_new, logp_old, advantages = batch
    assert logp_new.shape == logp_old.shape == advantages.shape == (n,)
    for logp in (logp_new, logp_old):
        assert logp.min() >= -1000
        assert logp.max() <= 0
    breakdown = ppo_clip.clip_breakdown(*batch)
    assert np.isinf(breakdown.ratio).any()
    assert (breakdown.ratio == 0).any() or (breakdown.ratio < np.finfo(float).tiny).any()
    assert ((advantages == 0) & np.isinf(breakdown.ratio)).any()
    if n >= 64:
        assert breakdown.is_clipped.any()
        assert not breakdown.is_clipped.all()
    loss, fraction, grad = module_bench.python_loop(*batch)
    assert math.isfinite(breakdown.loss)
    assert loss == pytest.approx(breakdown.loss, rel=1e-12)
    assert fraction == breakdown.clip_fraction
    np.testing.assert_allclose(grad, breakdown.grad, rtol=1e-12, atol=0)


def test_the_batch_is_seeded():
    first, second = module_bench.make_batch(64), module_bench.make_batch(64)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_slider_is_swept_across_its_range_without_repeating_a_value():
    import ipywidgets as widgets

    coarse = widgets.FloatSlider(value=1.0, min=0.25, max=2.0, step=0.25)
    values = figures.value_sequence(coarse, 20)
    assert len(values) == 20
    assert min(values) == 0.25
    assert max(values) == 2.0
    assert values[0] != 1.0
    assert all(a != b for a, b in itertools.pairwise(values))
    fine = widgets.FloatSlider(value=0.2, min=0.0, max=1.0, step=0.01)
    spread = figures.value_sequence(fine, 20)
    assert len(set(spread)) == 20
    assert spread[0] == 0.0
    assert spread[-1] == 1.0
    log = widgets.FloatLogSlider(value=0.01, base=10, min=-3, max=-1)
    assert figures.value_sequence(log, 3) == pytest.approx([1e-3, 1e-2, 1e-1])


def test_the_browser_part_says_it_was_left_out(quick_run):
    _, written = quick_run
    for title in ("Feel in the browser: key press", "Feel in the browser: dragging"):
        rows = _table_titled(written, title)[2:]
        assert rows[0][-1] == "not run (--no-browser)"


# --------------------------------------------------------------------------
# The browser benchmark: from the page's and the kernel's records to numbers
# --------------------------------------------------------------------------


def _message(start: float, end: float, value: float = 0.3) -> dict:
    return {
        "kind": "message",
        "start": start,
        "end": end,
        "cpu": end - start,
        "state": {"value": value},
    }


def _render(start: float, end: float, encode: float = 0.01) -> dict:
    return {
        "kind": "render",
        "start": start,
        "end": end,
        "cpu": end - start,
        "encode": encode,
        "png_bytes": 120_000,
        "moving": 7,
    }


def test_a_steps_parts_add_up_to_its_latency():
    # The page's times are epoch milliseconds; the kernel's, epoch seconds.
    page = {
        "inputs": [{"type": "keydown", "t": 1000.0}, {"type": "keydown", "t": 1002.0}],
        "frames": [{"t": 1080.0, "decoded": 1095.0, "shown": True}],
        "values": [],
    }
    records = [_message(1.005, 1.010), _render(1.010, 1.060, encode=0.012)]
    step = feel.step_from_records(page, records)
    assert step.latency == pytest.approx(0.095)
    assert step.to_kernel == pytest.approx(0.005)
    assert step.app == pytest.approx(0.005)
    assert step.draw == pytest.approx(0.038)
    assert step.encode == pytest.approx(0.012)
    assert step.to_page == pytest.approx(0.020)
    assert step.decode == pytest.approx(0.015)
    parts = (step.to_kernel, step.app, step.draw, step.encode, step.to_page, step.decode)
    assert sum(parts) == pytest.approx(step.latency)
    assert step.kernel_cpu == pytest.approx(0.055)  # rendered after the message was answered
    assert step.moving == 7


def test_a_step_without_kernel_records_keeps_its_latency():
    page = {
        "inputs": [{"type": "keydown", "t": 1000.0}],
        "frames": [
            {"t": 1040.0, "decoded": None, "shown": False},  # replaced before it was decoded
            {"t": 1050.0, "decoded": 1070.0, "shown": True},
        ],
        "values": [],
    }
    step = feel.step_from_records(page, [])
    assert step.latency == pytest.approx(0.070)
    assert step.app is None


def test_a_drag_counts_frames_values_and_settle():
    page = {
        "inputs": [{"type": "mousedown", "t": 0.0}, {"type": "mouseup", "t": 2000.0}],
        "frames": [
            {"t": 100.0, "decoded": 150.0, "shown": True},
            {"t": 200.0, "decoded": 260.0, "shown": False},  # never on screen
            {"t": 300.0, "decoded": 350.0, "shown": True},
            {"t": 2050.0, "decoded": 2120.0, "shown": True},  # after the release
        ],
        "values": [{"t": 90.0, "value": "0.21"}, {"t": 290.0, "value": "0.22"}],
    }
    records = [_message(0.1, 0.2), _render(0.2, 0.3), _message(1.9, 2.0), _render(2.0, 2.04)]
    drag = feel.drag_from_records(page, records, page_busy=0.5)
    assert (drag.frames, drag.frames_after, drag.values) == (2, 1, 2)
    assert drag.fps == pytest.approx(1.0)
    assert drag.settle == pytest.approx(0.120)
    assert (drag.kernel_messages, drag.kernel_renders) == (2, 2)
    assert drag.kernel_busy == pytest.approx(0.3 / 2.0)  # up to the release
    assert drag.every_value_shown
    assert drag.met  # a slow rate, but every value the handle passed was shown


def test_a_slider_is_judged_by_its_median_drag_and_median_settle():
    short = feel.Drag(2.0, 20, 1, 23, 21, 21, 0.5, 0.300)  # 21 frames for 23 values: missed
    every = feel.Drag(2.0, 22, 1, 23, 23, 23, 0.5, 0.050)  # every value shown: met
    fast = feel.Drag(2.0, 26, 2, 35, 28, 28, 0.5, 0.100)  # 13 frames/s: met
    slider = feel.ControlFeel("03_x.ipynb", "eps", "slider", [], [fast, short, every])
    assert slider.drag == replace(every, settle=0.100)
    assert slider.drag.met
    assert feel.ControlFeel("03_x.ipynb", "eps", "slider", [], [fast, short]).drag == short
    assert feel.ControlFeel("03_x.ipynb", "eps", "slider", [], []).drag is None


def test_the_caches_the_measured_code_filled_since_the_last_call_are_emptied(tmp_path):
    code = "import functools\n@functools.cache\ndef square(x):\n    return x * x\n"
    code += "@functools.lru_cache(maxsize=1)\ndef one(x):\n    return x\n"
    installed = tmp_path / "site-packages"
    installed.mkdir()
    (tmp_path / "measured_demo.py").write_text(code)
    (installed / "installed_demo.py").write_text(code)
    sys.path[:0] = [str(tmp_path), str(installed)]
    try:
        import installed_demo
        import measured_demo
    finally:
        del sys.path[:2]
    try:
        measured_demo.square(2)  # before the first call: kept, as what an app computed first
        kernel_probe.forget_new_caches()
        assert measured_demo.square.cache_info().currsize == 1
        measured_demo.square(3)
        installed_demo.square(3)
        assert kernel_probe.forget_new_caches() >= 1
        assert measured_demo.square.cache_info().currsize == 0
        assert installed_demo.square.cache_info().currsize == 1  # an installed package's
        assert kernel_probe.forget_new_caches() == 0  # nothing computed since
        measured_demo.one(1)
        kernel_probe.forget_new_caches()
        measured_demo.one(2)  # full: the cache swaps an entry and stays one long
        assert kernel_probe.forget_new_caches() == 1
        assert measured_demo.one.cache_info().currsize == 0
    finally:
        del sys.modules["measured_demo"], sys.modules["installed_demo"]


def test_overlapping_intervals_are_counted_once():
    assert feel.covered([(0, 2), (1, 3), (5, 6)]) == 4
    assert feel.covered([]) == 0


def _slow_control(notebook: str = "01_x.ipynb") -> feel.ControlFeel:
    step = feel.Step(0.180, 0.005, 0.010, 0.120, 0.010, 0.015, 0.020, 0.130, 100_000, 72)
    drag = feel.Drag(2.0, 8, 1, 40, 9, 9, 0.7, 0.300, render=0.120, page_busy=0.9)
    return feel.ControlFeel(notebook, "eps", "slider", [step, step, step], [drag])


def test_every_missed_browser_target_says_why():
    run = feel.BrowserRun(controls=[_slow_control()])
    rows = browser_tables.target_rows(run)
    assert [met for _, _, met in rows] == [False, False, False]
    step, frames, settle = (measured for _, measured, _ in rows)
    assert "drawing (72 artists move) 120 ms" in step
    assert "page's main thread is busy 90%" in frames
    assert "waits for the frame being drawn" in settle
    table = browser_tables.steps_table([run])
    [record] = _records(_tables(table.markdown())[table.title])
    assert record["median ms"] == "180"
    split = record["median split: to kernel / app / draw / PNG / to page / decode ms"]
    assert split == "5 / 10 / 120 / 10 / 15 / 20"


def test_a_slider_acting_on_release_is_judged_by_its_one_frame_after_the_release():
    """It draws nothing while dragged (each value trains): its figure must come within
    250 ms of the release, and a miss says so."""
    slow, quick = (feel.Drag(2.0, 0, 1, 30, 0, 0, 0.0, settle) for settle in (0.5, 0.2))
    assert (slow.on_release, slow.met, slow.settled) == (True, False, False)
    assert (quick.met, quick.settled) == (True, True)  # over 150 ms, within 250
    assert "acts on release" in browser_tables.why_few_frames(slow)
    assert "500 ms after it (target <= 250 ms)" in browser_tables.why_few_frames(slow)
    assert "on release" in browser_tables.why_slow_settle(slow)
    silent = feel.Drag(2.0, 0, 0, 30, 0, 0, 0.0, 0.0)  # no frame at all after the release
    assert (silent.on_release, silent.settled, silent.met) == (True, False, False)
    assert "showed no new figure" in browser_tables.why_few_frames(silent)
    drawing = feel.Drag(2.0, 30, 1, 40, 31, 31, 0.5, 0.1)
    run = feel.BrowserRun(
        controls=[
            feel.ControlFeel("04_x.ipynb", name, "slider", [_slow_control().steps[0]], [drag])
            for name, drag in (("epochs", quick), ("eps", drawing))
        ]
    )
    _, frames, settle = browser_tables.target_rows(run)
    assert frames[1:] == (
        "slowest eps: 15.0 frames/s, 30 frames (and 1 after release) for 40 values; "
        "acting on release: epochs",
        True,
    )
    assert settle[1:] == ("slowest epochs 200 ms", True)


def test_without_chromium_the_browser_part_is_skipped_with_a_message(tmp_path):
    missing = tmp_path / "no-chromium"
    assert "Chromium not found" in browser.missing_browser(missing)
    [run] = browser.measure([tmp_path / "01_x.ipynb"], browser.Settings.quick(), chromium=missing)
    assert run.skipped.startswith("not run: Chromium not found")
    assert browser_tables.target_rows(run) == []
    for table in (browser_tables.steps_table([run]), browser_tables.drags_table([run])):
        [record] = _records(_tables(table.markdown())[table.title])
        assert list(record.values())[-1] == run.skipped


def _feel(
    notebook: str,
    control: str,
    latency: float,
    fps: float,
    settle: float,
    label: str,
    render: float | None = None,
    messages: int | None = None,
):
    """A run with one slider: every press ``latency`` s, a 2 s drag at ``fps``, ``settle`` s
    (``render`` s a frame, ``messages`` values sent to the kernel: default one a frame)."""
    step = feel.Step(latency)
    frames = round(fps * 2)
    sent = frames if messages is None else messages
    drag = feel.Drag(2.0, frames, 1, 100, sent, frames, 0.5, settle, render)
    measured = feel.ControlFeel(notebook, control, "slider", [step, step, step], [drag])
    return feel.BrowserRun(controls=[measured], label=label)


def test_now_is_compared_with_the_baseline_beyond_the_noise():
    before = _feel("01_x.ipynb", "eps", 0.200, 5.0, 0.300, "at abc1234")
    noise = browser_tables.NOISE_SHARE
    same = _feel("01_x.ipynb", "eps", 0.200 * (1 + noise), 5.0 / (1 + noise), 0.300, "now")
    [(target, measured, met)] = browser_tables.comparison_rows(same, before)
    assert target == "01_x.ipynb: the feel in the browser no worse than at abc1234, beyond noise"
    assert met, measured
    slower = _feel("01_x.ipynb", "eps", 0.300, 2.0, 0.600, "now")
    [(_, measured, met)] = browser_tables.comparison_rows(slower, before)
    assert not met
    assert measured == "eps: key press, time per frame while dragging, settle"
    table = browser_tables.comparison_table(slower, before)
    [record] = _records(_tables(table.markdown())[table.title])
    assert record["key press ms: now / before"] == "300 / 200"
    assert record["drag frames/s: now / before"] == "2.0 / 5.0"
    assert record["settle ms: now / before"] == "600 / 300"


def test_a_settle_within_two_renders_of_the_baseline_is_not_told_apart():
    """One drag's settle runs from 0 to two renders, by where in a render the release falls."""
    before = _feel("01_x.ipynb", "eps", 0.2, 5.0, 0.0, "at abc1234", render=0.1)
    within = _feel("01_x.ipynb", "eps", 0.2, 5.0, 0.2, "now")
    [(_, measured, met)] = browser_tables.comparison_rows(within, before)
    assert met, measured
    beyond = _feel("01_x.ipynb", "eps", 0.2, 5.0, 0.25, "now")
    [(_, measured, met)] = browser_tables.comparison_rows(beyond, before)
    assert measured == "eps: settle"
    # A slider that sends its value only on release renders nothing during the drag: no phase.
    before = _feel("01_x.ipynb", "eps", 0.2, 5.0, 0.0, "at abc1234", render=0.1, messages=0)
    released_only = _feel("01_x.ipynb", "eps", 0.2, 5.0, 0.2, "now", messages=0)
    [(_, measured, met)] = browser_tables.comparison_rows(released_only, before)
    assert measured == "eps: settle"


def test_controls_measured_on_one_side_only_are_not_compared():
    before = _feel("01_x.ipynb", "eps", 0.2, 5.0, 0.3, "at abc1234")
    now = _feel("01_x.ipynb", "step-size", 0.2, 5.0, 0.3, "now")
    assert browser_tables.comparison_rows(now, before) == []
    table = browser_tables.comparison_table(now, before)
    [record] = _records(_tables(table.markdown())[table.title])
    assert record["no worse beyond noise"] == "no control measured on both sides"


@pytest.mark.browser
@pytest.mark.timeout(400)
def test_the_browser_benchmark_measures_the_smoke_app_now_and_at_the_image_layer():
    """Quick settings on the browser tests' fixture, today's code and the image-based layer.

    Every number comes from a real page: today's frames are drawn on ipympl's canvas, the
    earlier revision's are images; the same harness must see both.
    """
    require_browser()
    commit = revisions.resolve(IMAGE_LAYER_REVISION, REPO)
    with revisions.checked_out(commit, REPO) as tree:
        sides = (browser.Side(), browser.Side(f"at {IMAGE_LAYER_REVISION}", tree))
        runs = browser.measure([FIXTURE_NOTEBOOK], browser.Settings.quick(), sides=sides)
    for run in runs:
        assert not run.skipped
        [eps] = run.controls
        assert (eps.notebook, eps.control, eps.kind, eps.problem) == (
            "smoke.ipynb",
            "eps",
            "slider",
            "",
        ), run.label
        assert len(eps.steps) == browser.Settings.quick().steps
        for step in eps.steps:
            assert step.latency > 0
            parts = (step.to_kernel, step.app, step.draw, step.encode, step.to_page, step.decode)
            assert None not in parts, f"{run.label}: the kernel probe logged message and render"
            assert step.png_bytes > 0
            assert step.moving >= 1
        assert len(eps.drags) == browser.Settings.quick().drags
        assert all(drag.kernel_messages >= 1 for drag in eps.drags), run.label
        assert eps.drag is not None
        assert eps.drag.values >= 1
        assert eps.drag.frames + eps.drag.frames_after >= 1
        assert eps.drag.kernel_messages >= 1
        rows = browser_tables.target_rows(run)
        assert [target.split(":")[0] for target, _, _ in rows] == ["smoke.ipynb"] * 3
    now, before = runs
    [(target, _, _)] = browser_tables.comparison_rows(now, before)
    assert target == (
        f"smoke.ipynb: the feel in the browser no worse than at {IMAGE_LAYER_REVISION}, "
        "beyond noise"
    )
