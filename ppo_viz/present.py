"""A notebook as a lecture: code hidden, figures and sliders live, type readable from the back.

From the repository root::

    python -m ppo_viz.present                                    # notebook 1
    python -m ppo_viz.present notebooks/03_epochs_on_one_batch.ipynb --port 8890

serves the notebook with Voilà on 127.0.0.1, prints the address to open, and runs until
Ctrl-C.  Voilà runs every cell and shows only the prose and the outputs, cell by cell as they
run (progressive rendering: with Voilà 0.5.13's default, the whole page waits for the last
cell, and 7 of 19 loads of notebook 1 tried here stopped for good at its ``interact`` cell,
"Executing 15 of 19"; progressively, none of 29 did).  The page uses the
``lecture`` template next to this file (Voilà's lab template with large type, loading nothing
from the network), and the kernel runs in presentation mode (``PPO_PRESENT=1``): every figure is
drawn larger, with every text at least 14 pt on a 1280 x 800 projector
(:data:`ppo_viz.style.PRESENT_DPI`).

Voilà serves a copy of the notebook from a temporary folder, removed at the end, so what its
cells write (notebook 1's slide) never lands beside the notebooks; the notebook's own folder is
on the kernel's import path, as the working directory is in JupyterLab.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from ppo_viz.style import PRESENT_VARIABLE

#: Where Voilà finds the ``lecture`` template (a Jupyter data directory).
TEMPLATES = Path(__file__).with_name("lecture")
DEFAULT_NOTEBOOK = Path("notebooks") / "01_clipped_surrogate.ipynb"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether a server can listen on ``port`` of 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def voila_command(notebook: Path, port: int) -> list[str]:
    """The Voilà command line that serves ``notebook`` as a lecture on ``port``."""
    return [
        sys.executable,
        "-m",
        "voila",
        str(notebook),
        "--template=lecture",
        "--theme=light",
        "--no-browser",
        f"--port={port}",
        "--Voila.port_retries=0",  # on another port, the address printed would be wrong
        "--Voila.ip=127.0.0.1",
        "--VoilaConfiguration.progressive_rendering=True",
    ]


def lecture_environment(folder: Path) -> dict[str, str]:
    """This environment, in presentation mode, with the lecture template on Jupyter's path and
    the notebook's ``folder`` on the kernel's import path."""

    def prepended(name: str, first: Path) -> str:
        rest = filter(None, os.environ.get(name, "").split(os.pathsep))
        return os.pathsep.join([str(first), *rest])

    return {
        **os.environ,
        PRESENT_VARIABLE: "1",
        "JUPYTER_PATH": prepended("JUPYTER_PATH", TEMPLATES),
        "PYTHONPATH": prepended("PYTHONPATH", folder.resolve()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=DEFAULT_NOTEBOOK)
    parser.add_argument("--port", type=int, default=None, help="default: a free one")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        print(f"error: no notebook at {args.notebook}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("voila") is None:
        print("error: Voilà is not installed: pip install -r requirements.txt", file=sys.stderr)
        return 2
    if args.port is not None and not 0 <= args.port <= 65535:
        print(f"error: --port must be from 1 to 65535, got {args.port}", file=sys.stderr)
        return 2
    port = args.port or free_port()
    if not port_is_free(port):
        print(f"error: port {port} is in use; choose another or leave --port out", file=sys.stderr)
        return 2
    print(f"Lecture: {args.notebook.name} at http://127.0.0.1:{port}/ (Ctrl-C stops)", flush=True)
    with tempfile.TemporaryDirectory(prefix="ppo-lecture-") as scratch:
        lecture = Path(scratch) / args.notebook.name
        shutil.copyfile(args.notebook, lecture)
        environment = lecture_environment(args.notebook.parent)
        server = subprocess.Popen(voila_command(lecture, port), env=environment)
        # SIGTERM (a service manager, a test) stops Voilà too, as Ctrl-C does.
        signal.signal(signal.SIGTERM, lambda *_: server.terminate())
        try:
            return server.wait()
        except KeyboardInterrupt:
            server.terminate()
            server.wait()
            return 130


if __name__ == "__main__":
    raise SystemExit(main())
