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

from ppo_viz.export import NOTEBOOK_DIR, execute_notebook, notebook_paths, output_problems

__all__ = [
    "NOTEBOOK_DIR",
    "execute_notebook",
    "notebook_paths",
    "output_problems",
    "printed_text",
    "run_committed",
]


@cache
def run_committed(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """The committed notebook at ``path``, executed once per test session, and its seconds.

    Callers must treat the returned notebook as read-only.
    """
    started = time.perf_counter()
    notebook = execute_notebook(path)
    return notebook, time.perf_counter() - started


def printed_text(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook's cells printed (stream outputs), concatenated."""
    return "".join(
        output.text
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
    )
