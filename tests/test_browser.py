"""End-to-end: every notebook in a real JupyterLab (and Notebook 7) in headless Chromium.

For each notebook in ``notebooks/`` (and the harness's fixture, in JupyterLab and in Notebook 7)
the test opens it, clicks Run > Run All Cells, waits until the kernel is idle, and then checks
what a learner would see: every code cell ran; no error, traceback or stderr output and no
"Error displaying widget"; the expected controls are there (stable ``ppo-*`` CSS classes:
``ppo-main-control`` and ``ppo-control-<name>``, data in ``browser_support.EXPECTATIONS``);
every figure is drawn (its canvas is not blank); one control of each app, moved with the
keyboard, draws a new frame on that app's figure (its canvas pixels change).  A stepper's
buttons are clicked in the presentation's browser test and in test_stepper.py.  All notebooks
share one JupyterLab page, each opened once.  Screenshots go to
``test-output/browser/<ui>-<notebook>/``.

Run with ``pytest -m browser tests/test_browser.py``.  Without Chromium the tests skip
(``apt-get install chromium``); with ``PPO_REQUIRE_BROWSER=1`` a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import (
    CANVAS_PIXELS,
    CONTROL_PREFIX,
    FIXTURE_NOTEBOOK,
    REPO_ROOT,
    NotebookExpectation,
    NotebookPage,
    blank_figures,
    chromium_context,
    control_name,
    control_names,
    expectation_for,
    notebook_paths,
    output_dir,
    require_browser,
)
from lab_server import JupyterServer
from notebook_runner import folder_state

from ppo_viz.app import MAIN_CONTROL

pytestmark = pytest.mark.browser

RUN_ALL_TIMEOUT_S = 90  # one notebook, from the click to an idle kernel
OPEN_TIMEOUT_S = 60
#: Which control of an app to move, in order of preference: the one that redraws the most.
KIND_PREFERENCE = ("slider", "number", "checkbox")


def saved_state(path: Path) -> dict[str, int]:
    """Every file in the notebook's folder, the notebooks included, with its modification time.

    Saving from the browser would rewrite the notebook (and add a checkpoint), and a cell that
    writes a file (notebook 1's slide) would add or change one beside it: none may happen.
    """
    return folder_state(path.parent, notebooks=True)


def relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium context (skips, or fails under PPO_REQUIRE_BROWSER=1, without one)."""
    require_browser()
    with chromium_context() as context:
        yield context


@pytest.fixture(scope="module")
def lab_server(browser: Any) -> Iterator[JupyterServer]:
    """One JupyterLab server rooted at the repository; it serves Notebook 7's pages too.

    Its kernels start in a scratch folder, so that notebook 1's save cell writes nothing
    beside the notebooks; the smoke fixture imports its app from its folder, on the path, and
    every notebook this repository's modules (not those of another checkout installed as
    editable).
    """
    fixtures = {"PYTHONPATH": os.pathsep.join(map(str, (FIXTURE_NOTEBOOK.parent, REPO_ROOT)))}
    with JupyterServer(REPO_ROOT, environment=fixtures) as server:
        yield server


@pytest.fixture(scope="module")
def lab_page(browser: Any, lab_server: JupyterServer) -> Iterator[Any]:
    """One JupyterLab page: each notebook is opened in it and closed after, never reloaded."""
    page = browser.new_page()
    yield page
    page.close()


def open_and_run_all(
    browser: Any,
    server: JupyterServer,
    notebook: Path,
    shots: Path,
    page: Any = None,
    ui: str = "lab",
    settle_s: float = 0.5,
) -> NotebookPage:
    """Open ``notebook`` (in ``page``, else a new page; in ``ui``), Run All from the menu, wait.

    Asserts every code cell executed and no error output appeared, and that the
    notebook file on disk is left untouched.  ``settle_s``: how long to let widgets render
    after the kernel went idle (a caller that checks the page again later needs none).
    Returns the NotebookPage.
    """
    state_before = saved_state(notebook)
    page = page if page is not None else browser.new_page()
    nb = NotebookPage(page, server, relative(notebook), f"test-{notebook.stem}", ui)
    try:
        with nb.timed("open"):
            nb.open(OPEN_TIMEOUT_S)
        with nb.timed("run all"):
            nb.run_all_from_menu()
            prompts = nb.wait_until_all_executed(RUN_ALL_TIMEOUT_S, settle_s)
        problems = nb.problems()
        if problems:
            nb.screenshot(shots / "00_after_run_all.png")
            nb.save_console(shots / "console.log")
        assert not problems, f"{notebook.name} after Run All:\n" + "\n".join(problems)
        unexecuted = [i for i, p in enumerate(prompts) if not p[1:-2].isdigit()]
        assert prompts, f"{notebook.name}: no code cell found"
        assert not unexecuted, (
            f"{notebook.name}: code cells {unexecuted} show no execution count "
            f"after {RUN_ALL_TIMEOUT_S} s (prompts {prompts})\n" + server.log_tail(1500)
        )
        assert saved_state(notebook) == state_before, (
            f"{notebook.name} was saved by the test, or its cells wrote beside it"
        )
    except BaseException:
        nb.close()  # the next notebook starts from a clean page
        raise
    return nb


# -- checks: each returns what went wrong -----------------------------------------------------


def check_controls(nb: NotebookPage, expectation: NotebookExpectation, name: str) -> list[str]:
    """The stable CSS classes the expectation names are on screen."""
    wanted = {  # a selector, and what its absence means
        f".{MAIN_CONTROL}.{CONTROL_PREFIX}{control}": f"no main control '{MAIN_CONTROL} "
        f"{CONTROL_PREFIX}{control}'"
        for control in expectation.controls.split()
    }
    wanted |= {
        f".{css}": f"nothing with class {css!r}" for css in expectation.extra_classes.split()
    }
    failures = [
        f"{name}: {said}" for css, said in wanted.items() if not nb.page.locator(css).count()
    ]
    controls = nb.main_controls()
    for i in range(controls.count()):
        if not control_names(controls.nth(i)):
            failures.append(f"{name}: main control #{i} has no {CONTROL_PREFIX}<name> class")
    return failures


def check_figures_drawn(nb: NotebookPage, expectation: NotebookExpectation, name: str) -> list[str]:
    """Every ``ppo-figure`` canvas shows a picture, and there are as many as expected."""
    with nb.timed("figures drawn"):
        pixels = nb.wait_until_figures_drawn()
    failures = []
    if len(pixels) < expectation.min_figures:
        failures.append(f"{name}: {len(pixels)} figures, expected >= {expectation.min_figures}")
    for index in blank_figures(pixels):
        failures.append(f"{name}: figure #{index} is blank ({pixels[index]})")
    return failures


def control_to_move(nb: NotebookPage, app: Any) -> tuple[Any, str] | None:
    """The app's first visible, enabled main control of the most preferred kind."""
    candidates: dict[str, tuple[Any, str]] = {}
    controls = nb.main_controls(app)
    for index in range(controls.count()):
        control = controls.nth(index)
        if not control.is_visible() or control.locator("[disabled]").count():
            continue  # on a tab not shown, or switched off until another control enables it
        kind = nb.control_kind(control)
        candidates.setdefault(kind, (control, control_name(control, index)))
    for kind in KIND_PREFERENCE:
        if kind in candidates:
            return candidates[kind]
    return None


def check_one_control_per_app(nb: NotebookPage, shots: Path, arrows_only: bool) -> list[str]:
    """In each visible app, moving one control with the keyboard draws a new frame (a slider:
    by its arrow keys, and unless ``arrows_only`` by End and Home too)."""
    failures = []
    apps = nb.page.locator(".ppo-app")
    for index in range(apps.count()):
        app = apps.nth(index)
        if not app.is_visible():
            continue
        chosen = control_to_move(nb, app)
        if chosen is None:
            failures.append(f"app #{index}: no visible, enabled main control to move")
            continue
        control, name = chosen
        name = f"app{index}-{name}"
        failures += nb.move_control_changes_figure(control, app, shots, name, arrows_only)
    failures += [f"after moving the controls: {p}" for p in nb.problems()]
    return failures


#: Typed into the fixture: the kernel's own picture of the app's figure, summed up as
#: ``CANVAS_PIXELS`` sums up the page's canvas (pixels unlike the top-left one, FNV-1a hash).
KERNEL_PIXELS = (
    "import functools, numpy as np; "
    "words = np.asarray(app.canvas.buffer_rgba()).view(np.uint32).ravel(); "
    "print('kernel pixels', int((words != words[0]).sum()), functools.reduce("
    "lambda h, word: ((h ^ word) * 16777619) & 0xFFFFFFFF, words.tolist(), 2166136261))"
)


def run_typed_cell(nb: NotebookPage, line: str) -> None:
    """Type ``line`` into a new cell at the end of the notebook and run it (never saved)."""
    page = nb.page
    page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # insert a cell below, in command mode
    page.keyboard.press("Enter")  # edit it
    page.keyboard.type(line)
    page.keyboard.press("Shift+Enter")


def check_page_shows_the_kernels_figure(nb: NotebookPage) -> None:
    """On the fixture, after the controls moved: the canvas equals the kernel's figure, pixel
    for pixel (so no frame was lost or garbled between matplotlib's blit and the page)."""
    run_typed_cell(nb, KERNEL_PIXELS)
    output = nb.page.locator(".jp-OutputArea-output", has_text="kernel pixels").last
    output.wait_for(timeout=15_000)
    _, _, inked, pixel_hash = output.inner_text().split()
    [shown] = nb.figure_pixels(nb.page.locator(".ppo-app").first)
    assert (shown["inked"], shown["hash"]) == (int(inked), int(pixel_hash)), (
        f"the page's canvas {shown} is not the kernel's figure ({inked} pixels, hash {pixel_hash})"
    )


def check_harness_sees_problems(nb: NotebookPage, shots: Path) -> None:
    """Self-check on the fixture: a cell that raises, a still figure and a blank canvas are seen.

    The cell that raises is typed in the browser and never saved.
    """
    page = nb.page
    still = [figure["hash"] for figure in nb.figure_pixels()]
    page.wait_for_timeout(200)
    assert [figure["hash"] for figure in nb.figure_pixels()] == still, "pixels of a still figure"
    blank = page.evaluate(
        "() => { const box = document.createElement('div');"
        " box.innerHTML = '<div class=\"ppo-figure\"><canvas width=40 height=30></canvas></div>';"
        f" return ({CANVAS_PIXELS})(box); }}"
    )
    assert blank_figures(blank) == [0], f"a blank canvas was not seen as blank: {blank}"
    run_typed_cell(nb, "raise ValueError('harness self-check')")
    nb.wait_for_change(nb.problems, [], 15)
    nb.screenshot(shots / "98_self_check_error.png")
    problems = nb.problems()
    assert any("harness self-check" in p for p in problems), (
        f"the harness did not report a cell that raised: {problems}"
    )


# -- tests ---------------------------------------------------------------------------------


def targets() -> list[Any]:
    """Every notebook in JupyterLab; the fixture in JupyterLab and in Notebook 7."""
    found = [pytest.param(path, "lab", id=path.stem) for path in notebook_paths()]
    found.append(pytest.param(FIXTURE_NOTEBOOK, "lab", id="fixture-smoke"))
    return [*found, pytest.param(FIXTURE_NOTEBOOK, "notebook", id="fixture-smoke-notebook7")]


@pytest.mark.timeout(RUN_ALL_TIMEOUT_S + OPEN_TIMEOUT_S + 60)
@pytest.mark.parametrize(("notebook", "ui"), targets())
def test_notebook_in_the_browser(
    browser: Any, lab_server: JupyterServer, lab_page: Any, notebook: Path, ui: str
) -> None:
    """Run All, then check every figure and move one control of each app.

    The JupyterLab server serves Notebook 7's pages too, each in a page of its own.  Notebook 7
    handles keydown in the capture phase, so its command-mode shortcut for ArrowRight
    (collapse/expand headings) swallows the key before the slider sees it; End and Home reach
    the slider, as the README tells readers.
    """
    shots = output_dir(f"{ui}-{notebook.stem}")
    expectation = expectation_for(notebook)
    state_before = saved_state(notebook)
    page = lab_page if ui == "lab" else browser.new_page()
    # No settling wait: the figures are waited for, and problems looked for again at the end.
    nb = open_and_run_all(browser, lab_server, notebook, shots, page=page, ui=ui, settle_s=0)
    try:
        failures = check_controls(nb, expectation, notebook.name)
        failures += check_figures_drawn(nb, expectation, notebook.name)
        with nb.timed("one control per app"):
            failures += check_one_control_per_app(nb, shots, arrows_only=ui == "lab")
        nb.screenshot(shots / "99_after_interactions.png")
        nb.save_console(shots / "console.log")
        nb.save_timings(shots / "timings.txt")
        assert not failures, f"{notebook.name} in {ui}:\n" + "\n".join(failures)
        if notebook == FIXTURE_NOTEBOOK and ui == "lab":
            check_page_shows_the_kernels_figure(nb)
            check_harness_sees_problems(nb, shots)
            assert saved_state(notebook) == state_before, f"{notebook.name} was saved"
    finally:
        nb.close()
        if page is not lab_page:
            page.close()
