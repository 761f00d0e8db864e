"""The notebook tests' way to run a notebook: :mod:`ppo_viz.export`'s runner, once per session.

``execute_notebook``, ``output_problems`` and ``NOTEBOOK_DIR`` are the export's own (one
runner, on nbclient, for the export, the tests and the benchmarks); :func:`run_committed`
adds a cache so that several test files (test_notebooks, test_export's page of notebook 1,
the notebooks' own test files) inspect one execution of the same notebook.
"""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

import nbformat

from ppo_viz.export import NOTEBOOK_DIR, execute_notebook, notebook_paths, output_problems  # noqa: F401

#: What each committed notebook's run changed in its own folder, by the notebook's path.
_CHANGED_BESIDE: dict[Path, list[str]] = {}


@cache
def run_committed(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """The committed notebook at ``path``, executed once per test session, and its seconds.

    Callers must treat the returned notebook as read-only.  What the run changed in the
    notebook's folder is kept for :func:`changed_beside`.
    """
    before = folder_state(path.parent)
    started = time.perf_counter()
    notebook = execute_notebook(path)
    seconds = time.perf_counter() - started
    after = folder_state(path.parent)
    _CHANGED_BESIDE[path] = sorted(
        name for name in before.keys() | after if before.get(name) != after.get(name)
    )
    return notebook, seconds


def changed_beside(path: Path) -> list[str]:
    """The files that running the committed notebook at ``path`` created or changed beside it."""
    run_committed(path)
    return _CHANGED_BESIDE[path]


def folder_state(folder: Path, notebooks: bool = False) -> dict[str, int]:
    """Every file under ``folder`` but the notebooks themselves (unless ``notebooks``), with its
    modification time.

    A file a notebook's run writes (notebook 1's slide in ``build/``) appears or changes here;
    an author editing a notebook while the tests run does not, unless ``notebooks`` asks for
    it (a server that must not save them).
    """
    return {
        str(path.relative_to(folder)): path.stat().st_mtime_ns
        for path in folder.rglob("*")
        if path.is_file() and (notebooks or path.suffix != ".ipynb")
    }


def figure_count(notebook: nbformat.NotebookNode) -> int:
    """How many outputs of an executed notebook carry a picture."""
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    return sum("image/png" in output.get("data", {}) for output in outputs)


def printed_text(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook's cells printed (stream outputs), concatenated."""
    return "".join(
        output.text
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
    )
