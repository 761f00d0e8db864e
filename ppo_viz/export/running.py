"""Running a notebook headless: one runner for the export, the tests and the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat

#: The course notebooks that come with the bundle, and how their files are named.
NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"

#: Seconds a single cell may run before the run is stopped.
DEFAULT_TIMEOUT_S = 180
#: Seconds to wait, after a cell finished, for the outputs it sent.  nbclient's default
#: (4 s) silently drops late outputs on a busy machine, such as an ``interact`` figure.
IOPUB_TIMEOUT_S = 60


def notebook_paths(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """The course notebooks in ``directory`` (``NN_*.ipynb``), in order."""
    return sorted(Path(directory).glob(NOTEBOOK_PATTERN))


def execute_notebook(
    notebook: nbformat.NotebookNode | Path,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
    allow_errors: bool = False,
) -> nbformat.NotebookNode:
    """Run every cell of ``notebook`` top to bottom in a fresh ``python3`` kernel.

    ``notebook`` is a path (read from disk) or a notebook node (run, and changed,
    in place); the executed notebook is returned.  The kernel starts in ``cwd``:
    by default the notebook's folder, as in JupyterLab (``notebooks/`` for a
    node).  The widgets' final state is kept in the notebook's metadata (what
    :func:`ppo_viz.export.make_static` reads an ``Output`` widget's contents
    from, then drops).  A cell that raises stops the run with nbclient's
    ``CellExecutionError``, which names the cell and shows its traceback,
    unless ``allow_errors`` is set; so do outputs that never arrive.  Ctrl-C
    stops the kernel and raises ``KeyboardInterrupt``.

    The kernel is stopped at once when the run ends (every output has
    arrived by then): a graceful shutdown of a kernel still busy with a cell,
    after Ctrl-C, prints the kernel's own traceback.
    """
    from nbclient import NotebookClient

    if isinstance(notebook, Path):
        cwd = cwd or notebook.parent
        notebook = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        allow_errors=allow_errors,
        iopub_timeout=IOPUB_TIMEOUT_S,
        raise_on_iopub_timeout=True,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(cwd or NOTEBOOK_DIR)}},
    )
    try:
        client.execute(env=kernel_environment())
    except Exception:
        # On Ctrl-C (SIGINT) or SIGTERM, nbclient's own handler shuts the kernel down and
        # records that in this attribute; the run then fails with whatever error that
        # caused (nbclient 0.10-0.11: an AssertionError).  Say what really happened.
        if getattr(client, "_async_cleanup_kernel_future", None) is not None:
            raise KeyboardInterrupt from None
        raise
    return notebook


def kernel_environment() -> dict[str, str]:
    """This process's environment without ``MPLBACKEND``, so the kernel draws inline.

    With ``MPLBACKEND`` set (``Agg``, say) ``plt.show()`` in a notebook would
    show nothing, as it never does in JupyterLab.
    """
    return {name: value for name, value in os.environ.items() if name != "MPLBACKEND"}


def output_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """What a reader would see go wrong in an executed notebook's outputs.

    Errors, anything written to stderr, and outputs showing a warning or a
    traceback; one line each, naming the cell.
    """
    problems = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"cell {index}: {output.get('ename')}: {output.get('evalue')}")
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                problems.append(f"cell {index} wrote to stderr: {str(output.get('text'))[:300]}")
            text = str(output.get("text", "")) + plain_text(output.get("data", {}))
            if "Warning" in text or "Traceback" in text:
                problems.append(f"cell {index} shows a warning or traceback: {text[:300]}")
    return problems


def plain_text(data: dict[str, Any]) -> str:
    """An output bundle's ``text/plain``, as one string (empty if it has none)."""
    return joined(data.get("text/plain")) or ""


def joined(text: str | list[str] | None) -> str | None:
    """nbformat stores long text either as one string or as a list of lines."""
    return "".join(text) if isinstance(text, list) else text
