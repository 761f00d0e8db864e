"""Notebooks run headless (:func:`execute_notebook`, the one runner of the export, the tests and
the benchmarks) and made fit for a page without a kernel (:func:`make_static`).  The course
site, ``python -m ppo_viz.export``, is :mod:`ppo_viz.export.__main__`.
"""

import asyncio
import contextlib
import copy
import html
import math
import os
import re
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import nbformat
import zmq

#: The course notebooks that come with the bundle.
NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
#: Seconds a cell may run; seconds to wait for a finished cell's outputs (nbclient's 4 s: tight).
DEFAULT_TIMEOUT_S, IOPUB_TIMEOUT_S = 180, 60
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
#: A bare widget repr (``FloatSlider(value=0.2, ...)``, ``VBox(children=(...``).
WIDGET_REPR = re.compile(r"\b[A-Z]\w*\((value|children|outputs|description|layout|options)=")
#: matplotlib's text repr of a figure, shown when a figure itself is missing.
FIGURE_REPR = re.compile(r"<(matplotlib\.figure\.)?Figure size \d+x\d+ with \d+ Axes>")


class ExportError(RuntimeError):
    """A notebook cannot be published as a static page (the message says why)."""


class SetupError(ExportError):
    """Found before any notebook runs; the message is one line, fit to follow ``error:``."""


def notebook_paths(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """The course notebooks in ``directory`` (``NN_*.ipynb``), in order."""
    return sorted(Path(directory).glob("[0-9][0-9]_*.ipynb"))


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path``; :class:`SetupError` naming it if it is not one (not JSON...)."""
    try:
        return nbformat.read(path, as_version=4)
    except ValueError:  # nbformat's NotJSONError and NBFormatError, a UnicodeDecodeError
        raise SetupError(f"{shown(str(path))} is not a readable notebook") from None


def shown(name: str) -> str:
    """A file name as text to print or write: a byte that is not UTF-8 shown as ``\\xff``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def title_of(notebook: Any, name: str = "") -> str:
    """The notebook's title: its first cell's ``# `` heading, without the ``#``; without one,
    the stem of its file ``name`` (:func:`shown`), or ""."""
    line = (notebook.cells[0].source.strip() if notebook.cells else "").partition("\n")[0]
    return line[2:].strip() if line.startswith("# ") else shown(Path(name).stem)


def address(file_name: str) -> str:
    """``file_name`` (any name) as a relative URL: percent-encoded, a byte not UTF-8 as ``%FF``."""
    return urllib.parse.quote(file_name, errors="surrogateescape")


def link(text: str, file_name: str, rel: str = "") -> str:
    """An HTML link to the file ``file_name`` (any name), showing ``text`` as text, not markup."""
    extra = f' rel="{rel}"' if rel else ""
    return f'<a href="{address(file_name)}"{extra}>{html.escape(text)}</a>'


def execute_notebook(
    notebook: nbformat.NotebookNode | Path | str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    allow_errors: bool = False,
) -> nbformat.NotebookNode:
    """Run every cell of ``notebook`` (a path, or a node run in place) in a fresh kernel.

    The ``python3`` kernel starts without this process's ``MPLBACKEND``, as in JupyterLab, and
    in a temporary folder removed afterwards, so that what a cell writes (notebook 1's slide)
    never lands beside the notebooks; the notebook's folder (``notebooks/`` for a node) is on
    the kernel's import path, as the working directory is in JupyterLab.  A cell may run
    ``timeout_s`` seconds (no "no limit").  A cell that raises or times out stops the run with
    nbclient's error (the cell, its traceback in plain text: no colour codes in a log) unless
    ``allow_errors``; Ctrl-C raises ``KeyboardInterrupt``.
    """
    from nbclient import NotebookClient

    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise TypeError(f"timeout_s must be a number of seconds, got {timeout_s!r}")
    if not 0 < timeout_s < math.inf:
        raise ValueError(f"timeout_s must be a positive, finite number of seconds, got {timeout_s}")
    if isinstance(notebook, (str, Path)):
        folder, notebook = Path(notebook).parent, nbformat.read(notebook, as_version=4)
    elif isinstance(notebook, nbformat.NotebookNode):
        folder = NOTEBOOK_DIR
    else:
        raise TypeError(f"notebook must be a path or a notebook, got {type(notebook).__name__}")
    with tempfile.TemporaryDirectory(prefix="ppo-notebook-") as scratch:
        client = NotebookClient(
            notebook,
            timeout=timeout_s,
            kernel_name="python3",
            allow_errors=allow_errors,
            iopub_timeout=IOPUB_TIMEOUT_S,
            raise_on_iopub_timeout=True,
            shutdown_kernel="immediate",  # a graceful shutdown of a busy kernel prints its trace
            extra_arguments=["--InteractiveShell.colors=nocolor"],  # IPython 8 and 9
            resources={"metadata": {"path": scratch}},
            on_notebook_start=lambda **_: _keep_awake(client),
        )
        try:
            client.execute(env=kernel_environment(Path(folder)))
        except Exception:
            # On Ctrl-C nbclient's own handler shuts the kernel down and records that here; the
            # run then fails with what that caused (nbclient 0.10-0.11: an AssertionError).
            if getattr(client, "_async_cleanup_kernel_future", None) is not None:
                raise KeyboardInterrupt from None
            raise
    return notebook


def kernel_environment(folder: Path) -> dict[str, str]:
    """This process's environment for a kernel that runs ``folder``'s notebooks elsewhere.

    Without ``MPLBACKEND`` (the kernel picks its own, as in JupyterLab), and with ``folder``
    first on ``PYTHONPATH``, so a module beside the notebooks imports as in JupyterLab.
    """
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    paths = filter(None, env.get("PYTHONPATH", "").split(os.pathsep))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(folder).resolve()), *paths])
    return env


def _keep_awake(client: Any) -> None:
    """Read the kernel's sockets' events now, and every second while ``client`` has a kernel.

    pyzmq's asyncio sockets can miss a wake-up of their edge-triggered descriptors: nbclient
    then saw a reply the kernel sent in 0.4 s only when its 180 s wait ran out.
    """
    with contextlib.suppress(AttributeError, zmq.ZMQError):  # no kernel, or channels closing
        for channel in (client.kc.shell_channel, client.kc.iopub_channel):
            channel.socket.get(zmq.EVENTS)
        asyncio.get_running_loop().call_later(1, _keep_awake, client)


def output_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """What a reader would see go wrong (errors, stderr, warnings, tracebacks), one line each."""
    problems = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            if output.output_type == "error":
                problems.append(f"cell {index}: {output.ename}: {output.evalue}")
            elif output.get("name") == "stderr" or "Warning" in text or "Traceback" in text:
                problems.append(f"cell {index} shows a warning or error: {text[:300]}")
    return problems


def make_static(notebook: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """A copy of an executed ``notebook`` without widget views or state, for a static page.

    nbconvert then shows each widget's fallback (:class:`ppo_viz.app.StaticFallback`: a live
    figure's PNG, or its readouts' HTML with the PNG; a quiz's HTML).  An ``interact``, which
    has none, shows what its ``Output`` widgets hold.  An output that would show a bare
    widget or figure repr raises :class:`ExportError` naming the cell of notebook ``name``.
    """
    static = copy.deepcopy(notebook)
    state = static.metadata.pop("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
    for index, cell in enumerate(static.cells):
        if cell.cell_type == "code":
            cell.outputs = _static_outputs(cell.outputs, f"{name}, cell {index}", state)
    return static


def _static_outputs(outputs: list[Any], where: str, state: dict[str, Any]) -> list[Any]:
    """One cell's outputs as :func:`make_static` shows them; ``state``: widget models by id."""
    shown = []
    for output in outputs:
        data = output.get("data", {})
        view, text = data.pop(WIDGET_VIEW_MIME, None), data.get("text/plain", "")
        bare = view or WIDGET_REPR.search(text) or FIGURE_REPR.search(text)
        held = _held_outputs(view["model_id"], state) if view else []
        if set(data) - {"text/plain"} or not bare:
            shown.append(output)  # the widget's fallback, or an ordinary output
        elif held:
            shown += _static_outputs(held, where, state)
        else:
            raise ExportError(f"{where} shows {text[:80]!r}, not a picture (see StaticFallback)")
    return shown


def _held_outputs(model_id: str, state: dict[str, Any]) -> list[Any]:
    """The outputs held by a widget's ``Output`` children (an ``interact``'s figure)."""
    children = state.get(model_id, {}).get("state", {}).get("children", [])
    models = [state.get(str(child).removeprefix("IPY_MODEL_"), {}) for child in children]
    return [nbformat.from_dict(o) for m in models for o in m.get("state", {}).get("outputs", [])]
