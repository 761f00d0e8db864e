"""Each notebook's headless execution time, kernel start and shutdown included (nbclient)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.tables import Table, verdict
from ppo_viz.export import execute_notebook, notebook_paths, output_problems

#: Target from issue 9.
NOTEBOOK_TARGET_S = 15.0


@dataclass
class NotebookResult:
    name: str
    seconds: list[float]
    code_cells: int
    problems: list[str]
    skipped: str = ""

    @property
    def median(self) -> float:
        return sorted(self.seconds)[len(self.seconds) // 2]


def execute(path: Path) -> tuple[float, Any]:
    """Run ``path`` top to bottom with the export's runner; (seconds, executed notebook).

    The clock covers reading the file, starting the kernel, every cell and the
    kernel's shutdown: what ``jupyter nbconvert --execute`` or a CI run pays.
    A cell that raises does not stop the run; it is listed among the problems.
    """
    started = time.perf_counter()
    notebook = execute_notebook(path, allow_errors=True)
    return time.perf_counter() - started, notebook


def measure(directory: Path, *, runs: int, limit: int | None = None) -> list[NotebookResult]:
    """Execute each notebook ``runs`` times (only the first ``limit`` notebooks, if given)."""
    results = []
    for position, path in enumerate(notebook_paths(directory)):
        if limit is not None and position >= limit:
            results.append(NotebookResult(path.name, [], 0, [], skipped="not run (--quick)"))
            continue
        seconds, problems, cells = [], [], 0
        for _ in range(runs):
            elapsed, notebook = execute(path)
            seconds.append(elapsed)
            problems = output_problems(notebook)
            cells = sum(cell.cell_type == "code" for cell in notebook.cells)
        results.append(NotebookResult(path.name, seconds, cells, problems))
    return results


def table(results: list[NotebookResult], directory: Path, runs: int) -> Table:
    out = Table(
        "Notebooks executed headless, kernel start included (s)",
        [
            "notebook",
            "code cells",
            "runs",
            "median s",
            "slowest s",
            "errors or stderr",
            f"<= {NOTEBOOK_TARGET_S:.0f} s",
        ],
    )
    for result in results:
        if result.skipped:
            out.add(result.name, "", 0, "n/a", "n/a", "n/a", result.skipped)
            continue
        out.add(
            result.name,
            result.code_cells,
            len(result.seconds),
            f"{result.median:.1f}",
            f"{max(result.seconds):.1f}",
            "; ".join(result.problems) or "none",
            verdict(result.median <= NOTEBOOK_TARGET_S and not result.problems),
        )
    if not results:
        out.add(f"(no NN_*.ipynb in {directory})", "", 0, "n/a", "n/a", "n/a", "n/a")
    out.notes.append(
        f"nbclient, kernel python3, cwd {directory.name}/, {runs} run(s) each, one after "
        "another: reading the notebook, starting the kernel, every cell, shutting it down."
    )
    return out


def target_rows(results: list[NotebookResult]) -> list[tuple[str, str, bool]]:
    rows = []
    for result in results:
        if result.skipped:
            continue
        measured = f"{result.median:.1f} s"
        if result.problems:
            measured += f" ({'; '.join(result.problems)})"
        rows.append(
            (
                f"{result.name} executes headless in <= {NOTEBOOK_TARGET_S:.0f} s",
                measured,
                result.median <= NOTEBOOK_TARGET_S and not result.problems,
            )
        )
    return rows
