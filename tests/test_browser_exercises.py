"""End-to-end: notebook 6's time limit in a real JupyterLab, in headless Chromium.

A learner's loss that never returns must not freeze the notebook, even when it swallows every
exception (issue 24).  The test writes a copy of notebook 6 to ``test-output/browser/`` (ignored
by git) with the body of Exercise 1 replaced by such a loop and the checks' time limit cut to
:data:`LIMIT_S` (to keep the test short), opens it in its own JupyterLab server, clicks Run >
Run All Cells (``open_and_run_all`` of ``tests/test_browser.py``: every cell ran, no error
output) and checks what the learner sees: the check cell finishes and its card says the function
did not return within the limit and where it was stopped, the cells after it run (the next one
shows its concept question, the summary reports the timeout), and a cell run again afterwards
runs at once: the kernel is usable.

Run with ``pytest -m browser tests/test_browser_exercises.py``.  Without
Chromium the test skips (``apt-get install chromium``); with
``PPO_REQUIRE_BROWSER=1`` a missing browser is a failure.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import REPO_ROOT, output_dir
from test_browser import browser, lab_server, open_and_run_all  # noqa: F401 - fixtures

from ppo_viz.exercises.advice import TITLES
from ppo_viz.numbers import exact

pytestmark = pytest.mark.browser

NOTEBOOK = REPO_ROOT / "notebooks" / "06_exercises.ipynb"
#: Opening, and Run All (``open_and_run_all``'s limits), where two checks run into the time
#: limit (Exercise 1 and the summary), with room to spare.
TEST_TIMEOUT_S = 210
#: The checks' time limit in the test's copy of the notebook.
LIMIT_S = 0.5
ENDLESS_BODY = '''def ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2):
    """A learner's first try that never returns, and swallows every interruption."""
    r = np.exp(logp_new - logp_old)
    while True:
        try:
            time.sleep(0.05)
            raise ValueError
        except:
            continue
'''


@pytest.fixture(scope="module")
def endless_notebook() -> Iterator[Path]:
    """Notebook 6 with Exercise 1's body an endless loop, in test-output/ (removed after)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in notebook.cells if c.source.startswith("def ppo_clip_loss("))
    cell.source = "import time\n\n" + ENDLESS_BODY
    for cell in notebook.cells:
        if cell.source.startswith(("check_", "print(exercise_summary(")):
            cell.source = cell.source.replace(")", f", time_limit_s={LIMIT_S})", 1)
    path = output_dir("exercise-time-limit-notebook") / "endless_exercise.ipynb"
    nbformat.write(notebook, path)
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def cell_index(cells: Any, css: str) -> int:
    """The index in ``cells`` of the first cell that contains an element of class ``css``."""
    for index in range(cells.count()):
        if cells.nth(index).locator(f".{css}").count():
            return index
    raise AssertionError(f"no cell shows an element of class {css!r}")


def prompt_of(cell: Any) -> str:
    """A code cell's input prompt, e.g. ``[7]:``."""
    return cell.locator(".jp-InputArea-prompt").first.inner_text().strip()


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_an_endless_loop_in_an_exercise_is_stopped_in_jupyterlab(
    endless_notebook: Path, request: pytest.FixtureRequest
) -> None:
    chromium, server = map(request.getfixturevalue, ("browser", "lab_server"))
    shots = output_dir("lab-exercise-time-limit")
    nb = open_and_run_all(chromium, server, endless_notebook, shots)
    try:
        prompts = nb.prompts()
        cells = nb.page.locator(".jp-Notebook .jp-CodeCell")
        check = cell_index(cells, "ppo-check")
        check_cell = cells.nth(check)
        check_cell.screenshot(path=str(shots / "01_check_card.png"))
        card = " ".join(check_cell.locator(".ppo-check").first.inner_text().split())
        assert "ppo_clip_loss: 1 problem found" in card
        assert f"did not return within {exact(LIMIT_S)} s" in card
        assert re.search(r"The checker stopped it \(in ppo_clip_loss, line \d+: ", card), card

        following = cells.nth(check + 1)
        assert following.locator(".ppo-quiz").count(), "the code cell after the check shows no quiz"
        counts = [int(p[1:-2]) for p in prompts]
        assert counts == sorted(counts), "cells ran out of order"

        everything = " ".join(nb.page.inner_text(".jp-Notebook").split())
        assert re.search(r"passed \D*0 of 3", everything), "the summary counts no exercise passed"
        assert f"ppo_clip_loss core: needs work: {TITLES['timeout']}" in everything

        with nb.timed("rerun the next cell"):  # as a learner would, after reading the card
            before = prompt_of(following)
            following.locator(".jp-InputArea-prompt").first.click()
            nb.page.keyboard.press("Shift+Enter")
            counted = lambda: prompt_of(following).replace("[*]:", before)  # noqa: E731
            after = nb.wait_for_change(counted, before, 10)
        nb.screenshot(shots / "02_next_cell_rerun.png")
        assert re.fullmatch(r"\[\d+\]:", after), f"the cell did not run again: {after!r}"
        assert int(after[1:-2]) > max(counts), "the kernel did not run the cell again"
        nb.save_timings(shots / "timings.txt")
    finally:
        nb.page.close()
        server.shutdown_kernels()
