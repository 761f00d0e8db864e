"""Executing a notebook headless and listing what a learner would see go wrong.

Shared by the notebook tests: one way to run a notebook (nbclient, python3
kernel, working directory ``notebooks/`` as in JupyterLab) and one list of
problems (errors, stderr, warnings, tracebacks).
"""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def execute_notebook(
    notebook: nbformat.NotebookNode | Path, timeout: float = 120
) -> nbformat.NotebookNode:
    """Run every cell of ``notebook`` (a node, changed in place, or a path) and return it."""
    if isinstance(notebook, Path):
        notebook = nbformat.read(notebook, as_version=4)
    NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    ).execute()
    return notebook


@cache
def run_committed(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """The committed notebook at ``path``, executed once per test session, and its seconds.

    Several test files inspect the same executed notebook; this runs each one
    only once.  Callers must treat the returned notebook as read-only.
    """
    started = time.perf_counter()
    notebook = execute_notebook(path)
    return notebook, time.perf_counter() - started


def output_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """Errors, stderr output, warnings and tracebacks in an executed notebook's outputs."""
    problems = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                problems.append(f"cell {index}: {output.ename}: {output.evalue}")
            elif output.output_type == "stream" and output.name == "stderr":
                problems.append(f"cell {index} wrote to stderr: {output.text[:300]}")
            text = str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
            if "Warning" in text or "Traceback" in text:
                problems.append(f"cell {index} shows a warning or traceback: {text[:300]}")
    return problems


def printed_text(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook's cells printed (stream outputs), concatenated."""
    return "".join(
        output.text
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
    )
