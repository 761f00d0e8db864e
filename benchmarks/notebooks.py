"""Each notebook's headless execution time, kernel start and shutdown included (nbclient)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.tables import Table, verdict

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


def notebook_paths(directory: Path) -> list[Path]:
    """The course notebooks: ``NN_*.ipynb`` in ``directory``, in order."""
    return sorted(directory.glob("[0-9][0-9]_*.ipynb"))


def _problems(notebook: object) -> list[str]:
    found = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                found.append(f"cell {index}: {output.ename}")
            elif output.output_type == "stream" and output.name == "stderr":
                found.append(f"cell {index} wrote to stderr")
    return found


def execute(path: Path, timeout: float = 300.0) -> tuple[float, object]:
    """Run ``path`` top to bottom in a fresh python3 kernel with cwd = its folder.

    The clock covers reading the file, starting the kernel, every cell and the
    kernel's shutdown: what ``jupyter nbconvert --execute`` or a CI run pays.
    """
    import nbformat
    from nbclient import NotebookClient

    started = time.perf_counter()
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
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
            problems = _problems(notebook)
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
