"""Every notebook runs top to bottom headless, cleanly, and is committed without outputs.

A cell that raises fails the run itself (nbclient stops with the cell's
traceback).  How long each notebook takes is measured by the benchmarks
(``python -m benchmarks.run``), not asserted here.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from notebook_runner import (
    NOTEBOOK_DIR,
    changed_beside,
    figure_count,
    notebook_paths,
    output_problems,
    run_committed,
)

from ppo_viz.export import make_static
from ppo_viz.export.__main__ import write_page

NOTEBOOKS = notebook_paths(NOTEBOOK_DIR)
FIXTURE = Path(__file__).parent / "fixtures" / "smoke.ipynb"  # the browser tests' notebook


def _ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=_ids(NOTEBOOKS))
def executed(request) -> nbformat.NotebookNode:
    notebook, _ = run_committed(request.param)
    return notebook


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_runs_without_errors_or_warnings_and_writes_nothing_beside_it(path):
    """Notebook 1's save cell wrote ``notebooks/build/`` over a slide a teacher saved there."""
    problems = output_problems(run_committed(path)[0])
    assert not problems, "\n".join(problems)
    assert changed_beside(path) == []


@pytest.mark.notebook
def test_exports_as_a_page_that_shows_every_figure(executed, tmp_path):
    """Its course-site page (``python -m ppo_viz.export``) shows a picture for each figure.

    Without a kernel each widget shows its fallback, never a repr: ``make_static``, the
    export's own conversion, raises ``ExportError`` naming a cell that would show one.
    """
    figures = figure_count(make_static(executed, "the notebook"))
    write_page(executed, "page", tmp_path, "mathjax/MathJax.js")
    page = BeautifulSoup((tmp_path / "page.html").read_text(), "html.parser")
    assert len(page.select(".jp-OutputArea-output img")) == figures
    assert len(list((tmp_path / "page_files").glob("*.png"))) == figures


@pytest.mark.parametrize("path", [*NOTEBOOKS, FIXTURE], ids=_ids([*NOTEBOOKS, FIXTURE]))
def test_committed_without_outputs_or_widget_state(path):
    """The course's notebooks and the browser harness's own: valid nbformat 4, output-free."""
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert "widgets" not in notebook.metadata
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} has stored outputs"
            assert cell.execution_count is None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_a_document(path):
    notebook = nbformat.read(path, as_version=4)
    first, last = notebook.cells[0], notebook.cells[-1]
    assert first.cell_type == "markdown"
    assert "What you will learn" in first.source
    assert "What you need" in first.source
    tail = "".join(cell.source for cell in notebook.cells[-2:] if cell.cell_type == "markdown")
    assert "Summary" in tail
    assert "Things to try" in tail
    assert last.cell_type == "markdown"


#: The one full-precision number the prose may state: the contract's loss, which every machine
#: tried gives (docs/contract.md, "What may differ between machines").
MACHINE_INDEPENDENT_DIGITS = {"-0.5375000000000001"}
#: A decimal number in prose, with its sign and exponent.
DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?")


def significant_digits(number: str) -> int:
    """How many significant digits a decimal written in prose has (``0.0125`` has 3)."""
    mantissa = number.lstrip("-").split("e")[0]
    return len(mantissa.replace(".", "").lstrip("0"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_prose_states_no_last_bits(path):
    """A number with 12 or more significant digits is a last-bit claim: cells compute those.

    numpy's ``exp`` and ``log`` differ in the last bit between CPUs, so the full digits of a
    ratio or a gradient entry are shown by a cell on the reader's own machine, never written
    into the markdown.
    """
    notebook = nbformat.read(path, as_version=4)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        for number in DECIMAL.findall(cell.source):
            if significant_digits(number) >= 12:
                assert number in MACHINE_INDEPENDENT_DIGITS, f"cell {index} states {number}"
