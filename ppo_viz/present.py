"""Notebooks as a lecture: code hidden, figures and sliders live, type readable from the back.

From the repository root::

    python -m ppo_viz.present                       # notebook 1, every cell
    python -m ppo_viz.present --lecture             # the 45-minute lecture: notebooks 1 to 3
    python -m ppo_viz.present notebooks/03_epochs_on_one_batch.ipynb --port 8890
    python -m ppo_viz.present --outline             # the lecture's route, from the cell tags

serves the notebook's folder with Voilà on 127.0.0.1, prints the address of the notebook once
the server answers, and runs until Ctrl-C.  Every page ends with links to the previous and the
next notebook.  With ``--lecture`` a page shows only the cells tagged ``lecture`` (in
JupyterLab: the property inspector's cell tags), under the notebook's title; only those cells
run.  Tag or untag a cell to change the lecture; ``--outline`` lists its sections and words.

Voilà runs every cell and shows only the prose and the outputs.  Each page of the route (with
``--lecture`` every lecture page, else the notebook asked for and the next) is run ahead in a
kernel of its own (Voilà's preheated kernels, :data:`AHEAD`), so a link to it shows the page
at once; a page opened while its kernel is taken runs then, and shows when its last cell ran.
A page no longer stops for good at an ``interact`` cell: see :func:`_publish_on_own_socket`.
The pages use the ``lecture`` template next to this file (Voilà's lab template with large type,
loading nothing from the network, and keys for a lecture), and the kernels run in presentation
mode (``PPO_PRESENT=1``): every figure is drawn larger, every text at least 14 pt on a
1280 x 800 projector (:data:`ppo_viz.style.PRESENT_DPI`).

Voilà serves the pages (:func:`page_of`) from a temporary folder, removed at the end, so what
their cells write (notebook 1's slide) never lands beside the notebooks; the notebooks' own
folder is on the kernels' import path, as the working directory is in JupyterLab.

A page's kernel stops when the page closes (Voilà's own request on ``beforeunload``; with no
``_xsrf`` cookie, which a preheated page never sets, the server must not ask for one:
voila-dashboards/voila issue 1458), and a kernel no page is connected to is stopped after
:data:`IDLE_KERNEL_S` seconds idle (jupyter_server's ``MappingKernelManager.cull_idle_timeout``;
the kernels run ahead are spared), so reloads do not pile them up.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import os
import re
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

from ppo_viz import export
from ppo_viz.export import kernel_environment, link, notebook_paths, title_of
from ppo_viz.style import PRESENT_VARIABLE

#: Where Voilà finds the ``lecture`` template (a Jupyter data directory).
TEMPLATES = Path(__file__).with_name("lecture")
DEFAULT_NOTEBOOK = Path("notebooks") / "01_clipped_surrogate.ipynb"
#: The tag of the cells that make the lecture.
LECTURE_TAG = "lecture"
#: How many kernels run each page of the route ahead, and how long after one is taken (in
#: seconds) the next starts, so that the page on screen answers first.
AHEAD, REFILL_DELAY_S = 1, 5
#: A kernel no page is connected to is stopped after this many seconds without activity.
IDLE_KERNEL_S = 30
#: How often the server looks for such kernels, in seconds.
CULL_INTERVAL_S = 10


# -- the lecture: cells tagged "lecture" ------------------------------------------------------


def is_lecture_cell(cell: Any) -> bool:
    """Whether a notebook cell is tagged ``lecture``."""
    return LECTURE_TAG in cell.get("metadata", {}).get("tags", [])


def lecture_view(notebook: Any, name: str = "") -> Any:
    """A copy of ``notebook`` with only its title and the cells tagged ``lecture``; the title
    is its first cell's heading or, without one, the stem of its file ``name``."""
    view = copy.deepcopy(notebook)
    title = nbformat.v4.new_markdown_cell(f"# {title_of(notebook, name)}")
    view["cells"] = [title, *(cell for cell in view["cells"] if is_lecture_cell(cell))]
    return view


def sibling_notebooks(directory: Path, lecture: bool, also: Path | None = None) -> list[Path]:
    """The ``NN_*.ipynb`` notebooks in ``directory`` and the notebook ``also`` (any name), in
    order; with ``lecture``, those with a cell tagged ``lecture``."""
    found, read = sorted({*notebook_paths(directory), *filter(None, [also])}), export.read_notebook
    return [p for p in found if not lecture or any(map(is_lecture_cell, read(p).cells))]


def navigation_cell(path: Path, lecture: bool) -> Any:
    """A code cell that shows links to the previous and the next notebook (same folder).

    It runs last, so the links appear once every cell of the page has run.
    """
    siblings, links = sibling_notebooks(path.parent, lecture), []
    at = siblings.index(path) if path in siblings else -1
    for other, arrows in ((at - 1, "← {}"), (at + 1, "{} →")):
        if at >= 0 and 0 <= other < len(siblings):
            title = title_of(export.read_notebook(siblings[other]), siblings[other].name)
            links.append(link(arrows.format(title), siblings[other].name))
    text = "---\n\n<p>" + (" &nbsp;·&nbsp; ".join(links) or "The end.") + "</p>"
    return nbformat.v4.new_code_cell(f"from IPython.display import Markdown\n\nMarkdown({text!r})")


def outline(directory: Path, also: Path | None = None) -> list[tuple[str, list[str], int]]:
    """The lecture's route: per notebook with lecture cells (``NN_*.ipynb`` in ``directory``
    and ``also``), its file name, the headings of its lecture cells and their words of prose
    (whitespace-separated, formulas included)."""
    route = []
    for path in sibling_notebooks(directory, lecture=True, also=also):
        headings, words = [], 0
        for cell in filter(is_lecture_cell, export.read_notebook(path)["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            words += len(cell.source.split())
            headings += re.findall(r"^#{2,3} (.+)$", cell.source, flags=re.MULTILINE)
        route.append((path.name, headings, words))
    return route


# -- the server -------------------------------------------------------------------------------


def page_of(path: Path, lecture: bool) -> Any:
    """The notebook Voilà serves for the notebook at ``path``: with ``lecture`` only its
    lecture's cells, ended by links to the previous and next notebook, and titled (in the
    browser's tab) with the notebook's title or else its file's name."""
    notebook = export.read_notebook(path)
    page = lecture_view(notebook, path.name) if lecture else copy.deepcopy(notebook)
    page["cells"].append(navigation_cell(path, lecture))
    page.metadata["title"] = title_of(notebook, path.name)
    return page


def run_ahead(route: list[Path], notebook: Path, lecture: bool) -> list[str]:
    """The names of the pages of ``route`` to run ahead: with ``lecture`` every one, else
    ``notebook`` and the one after it."""
    if lecture or notebook not in route:
        return [path.name for path in route]
    at = route.index(notebook)
    return [path.name for path in route[at : at + 2]]


def run_voila(port: int, announce: str, ahead: list[str]) -> None:
    """Voilà with the lecture's configuration, serving the working directory on ``port`` of
    127.0.0.1 until Ctrl-C or SIGTERM, with the pages named in ``ahead`` run ahead; prints
    ``announce`` once the server answers."""
    from jupyter_core.utils import ensure_event_loop
    from nbclient.output_widget import OutputWidget
    from traitlets.config import Config
    from voila.app import Voila

    OutputWidget._publish_msg = _publish_on_own_socket
    config = Config()
    config.Voila.config_file_paths = []  # a stray voila.py in the folder cannot change this
    config.Voila.ip = "127.0.0.1"
    config.Voila.open_browser = False
    config.Voila.port_retries = 0  # a busy port is an error, never another port
    config.VoilaConfiguration.template = "lecture"
    config.VoilaConfiguration.theme = "light"
    config.VoilaConfiguration.preheat_kernel = True  # Voilà: not with progressive rendering
    pools = {name: {"pool_size": AHEAD} for name in ahead}
    config.VoilaKernelManager.kernel_pools_config = {"default": {"pool_size": 0}, **pools}
    config.VoilaKernelManager.fill_delay = REFILL_DELAY_S
    config.Voila.tornado_settings = {"disable_check_xsrf": True}  # 127.0.0.1 only, no login
    config.MappingKernelManager.cull_idle_timeout = IDLE_KERNEL_S
    config.MappingKernelManager.cull_interval = CULL_INTERVAL_S
    config.MappingKernelManager.cull_connected = False  # an open page keeps its kernel
    # Voilà's loop (jupyter_core's, the one launch_instance uses) starts once Voilà listens.
    ensure_event_loop().call_soon(lambda: print(announce, flush=True))
    Voila.launch_instance([".", f"--port={port}"], config=config)


def _publish_on_own_socket(
    widget: Any,
    msg_type: str,
    data: Any = None,
    metadata: Any = None,
    buffers: Any = None,
    **keys: Any,
) -> None:
    """nbclient's ``OutputWidget._publish_msg`` (nbclient 0.11, ``nbclient/output_widget.py``),
    sending on a shell socket of its own.

    Voilà runs a page's cells with nbclient, which stands in for the page's ``Output`` widgets
    (an ``interact`` has one) and sends their new outputs to the kernel on the shell socket,
    while it awaits the cell's reply on that same asyncio socket.  Now and then that reply was
    never seen (pyzmq's asyncio sockets can miss a wake-up of their edge-triggered descriptors;
    see ``ppo_viz.export._keep_awake``), and the page stopped for good at notebook 1's
    ``interact`` cell: with two pages loading at once, 8 of 32 loads here; with this socket,
    none of 62 (voila-dashboards/voila issue 1428, jupyter/jupyter_client pull request 1010).
    """
    import zmq
    from nbclient.jsonutil import json_clean

    content = json_clean(dict(data=data or {}, comm_id=widget.comm_id, **keys))
    client = widget.kernel_client
    msg = client.session.msg(
        msg_type, content=content, parent=widget.parent_header, metadata=metadata or {}
    )
    if not hasattr(widget, "own_shell"):  # the asyncio socket, kept so that it stays open
        widget.own_shell = client.connect_shell()
    client.session.send(zmq.Socket.shadow(widget.own_shell.underlying), msg)


def free_port(port: int = 0) -> int | None:
    """``port`` of 127.0.0.1 if nothing listens on it right now, else None; for ``0``, a port
    that is free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=DEFAULT_NOTEBOOK)
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument(
        "--lecture", action="store_true", help="show only the cells tagged 'lecture'"
    )
    parser.add_argument("--outline", action="store_true", help="print the lecture's route and exit")
    # A notebook named like an option ("-talk.ipynb") is a file: argparse sees "./-talk.ipynb".
    argv = [
        f"./{a}" if a[:1] == "-" and a.endswith(".ipynb") else a
        for a in (sys.argv[1:] if argv is None else argv)
    ]
    args = parser.parse_args(argv)
    try:
        if args.outline and args.notebook.is_file():  # each notebook's sections and words
            route = outline(args.notebook.parent, also=args.notebook)
            for name, headings, words in route:
                print(f"{export.shown(name)} ({words} words): " + "; ".join(headings))
            print(f"in all: {sum(words for _, _, words in route)} words of prose")
            return 0
        problem = refusal(args)
    except export.SetupError as error:  # a file beside the notebook that is not a notebook
        problem = str(error)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ppo-lecture-") as scratch:
        for notebook in sibling_notebooks(args.notebook.parent, False, also=args.notebook):
            nbformat.write(page_of(notebook, args.lecture), Path(scratch) / notebook.name)
        return serve(args, Path(scratch))


def refusal(args: argparse.Namespace) -> str | None:
    """Why the command line ``args`` cannot be served, in one line; None if it can.

    :class:`~ppo_viz.export.SetupError` if it or one beside it (a page links it) is no notebook.
    """
    if not args.notebook.is_file():
        return f"no notebook at {args.notebook}"
    served = sibling_notebooks(args.notebook.parent, False, also=args.notebook)
    read = {path: export.read_notebook(path) for path in served}
    if args.lecture and not any(map(is_lecture_cell, read[args.notebook].cells)):
        return f"{args.notebook} has no cell tagged '{LECTURE_TAG}'"
    if importlib.util.find_spec("voila") is None:
        return "Voilà is not installed: pip install -r requirements.txt"
    if args.port is not None and not 1 <= args.port <= 65535:
        return f"--port must be from 1 to 65535, got {args.port}"
    if args.port is not None and free_port(args.port) is None:
        return f"port {args.port} is in use; choose another or leave --port out"
    return None


def serve(args: argparse.Namespace, scratch: Path) -> int:
    """Run Voilà in this process on the pages written into ``scratch`` until it stops.

    Its kernels start in ``scratch``, as in JupyterLab they start in the notebooks' folder,
    with this process's environment, in presentation mode.  Voilà stops them on Ctrl-C and on
    SIGTERM (a service manager, a test).
    """
    port = args.port or free_port()
    jupyter_path = filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep))
    # Voilà finds the lecture template on Jupyter's path; kernels import from the notebooks' folder.
    os.environ |= {
        PRESENT_VARIABLE: "1",
        "JUPYTER_PATH": os.pathsep.join([str(TEMPLATES), *jupyter_path]),
        "PYTHONPATH": kernel_environment(args.notebook.parent)["PYTHONPATH"],
    }
    view = "lecture" if args.lecture else "presentation"
    url = f"http://127.0.0.1:{port}/voila/render/{export.address(args.notebook.name)}"
    route = sibling_notebooks(args.notebook.parent, args.lecture, also=args.notebook)
    with contextlib.chdir(scratch):
        said = f"Lecture ({view}): {export.shown(args.notebook.name)} at {url} (Ctrl-C stops)"
        run_voila(port, said, run_ahead(route, args.notebook, args.lecture))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
