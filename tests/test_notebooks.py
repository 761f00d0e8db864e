"""Every notebook runs top to bottom headless, cleanly, and is committed without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from notebook_runner import NOTEBOOK_DIR, output_problems, run_committed

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
#: The issue's bar: each notebook executes headless in at most this many seconds.
TIME_BUDGET_S = 15.0


def _ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=_ids(NOTEBOOKS))
def executed(request) -> tuple[nbformat.NotebookNode, float]:
    return run_committed(request.param)


def _outputs(notebook: nbformat.NotebookNode):
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            for output in cell.outputs:
                yield index, output


@pytest.mark.notebook
def test_runs_without_errors_or_warnings(executed):
    notebook, _ = executed
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)


@pytest.mark.notebook
def test_every_code_cell_ran(executed):
    notebook, _ = executed
    counts = [cell.execution_count for cell in notebook.cells if cell.cell_type == "code"]
    assert counts
    assert all(count is not None for count in counts)


@pytest.mark.notebook
def test_runs_within_the_time_budget(executed):
    _, seconds = executed
    assert seconds < TIME_BUDGET_S, f"took {seconds:.1f} s"


@pytest.mark.notebook
def test_no_bare_widget_repr_is_left_as_fallback(executed):
    notebook, _ = executed
    for index, output in _outputs(notebook):
        data = output.get("data", {})
        if "application/vnd.jupyter.widget-view+json" in data:
            plain = data.get("text/plain", "")
            assert "(" not in plain.split(" ")[0], f"cell {index} falls back to {plain!r}"
            assert "image/png" in data or "text/html" in data, f"cell {index} has no fallback"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_committed_without_outputs_or_widget_state(path):
    notebook = nbformat.read(path, as_version=4)
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
