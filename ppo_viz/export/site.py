"""The command: check the folders, run every notebook, write the pages, index and manifest."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ppo_viz.export.errors import ExportError, SetupError
from ppo_viz.export.mathjax import copy_mathjax, mathjax_source
from ppo_viz.export.pages import index_page, page_title, write_page
from ppo_viz.export.running import (
    DEFAULT_TIMEOUT_S,
    NOTEBOOK_DIR,
    execute_notebook,
    notebook_paths,
    output_problems,
)
from ppo_viz.export.static import make_static

#: Exit statuses of the command: the site is written; a notebook could not be published;
#: something was wrong before any notebook ran (as argparse's usage errors); Ctrl-C.
EXIT_OK, EXIT_FAILED, EXIT_SETUP, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass
class PageReport:
    """What one exported page holds; written to ``manifest.json``."""

    notebook: str
    html: str
    title: str
    figure_cells: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


# -- checks made before any notebook runs ------------------------------------------------------


def notebooks_to_export(directory: Path) -> list[Path]:
    """The ``NN_*.ipynb`` notebooks of ``directory``; :class:`SetupError` if there are none."""
    if not directory.exists():
        raise SetupError(f"no folder {directory} (the notebooks to export); pass --notebooks DIR")
    if not directory.is_dir():
        raise SetupError(f"{directory} is a file, not a folder of notebooks")
    paths = notebook_paths(directory)
    if not paths:
        raise SetupError(f"no notebooks (NN_*.ipynb) in {directory}")
    return [path.resolve() for path in paths]


def write_problem(folder: Path) -> str | None:
    """Why no file can be created in the existing ``folder``, or None if one can."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".ppo-export-probe-")
    except OSError as error:
        return f"a file cannot be created there ({(error.strerror or str(error)).lower()})"
    os.close(handle)
    os.unlink(probe)
    return None


def prepare_output_dir(out_dir: Path) -> None:
    """Create ``out_dir`` if needed, after checking that the site can be written there.

    Raises :class:`SetupError`, with one line saying what is wrong, when
    ``out_dir`` is a file, when one of its parents is a file, or when the
    folder (or, for a folder still to be made, its nearest existing parent)
    is not writable.  Writability is tried, not only read from the permission
    bits: a file is created there and removed, which also catches what stops
    root (a read-only file system, ``/proc``).
    """
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == out_dir and not out_dir.is_dir():
        raise SetupError(f"{out_dir} is a file, not a folder: give a folder for the site")
    if not existing.is_dir():
        raise SetupError(f"cannot create {out_dir}: {existing} is a file, not a folder")
    problem = write_problem(existing)
    if problem:
        raise SetupError(f"cannot write into {existing}: {problem}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SetupError(f"cannot create {out_dir}: {error.strerror or error}") from None


# -- the export --------------------------------------------------------------------------------


def export_notebook(
    path: Path,
    out_dir: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    mathjax_url: str | None = None,
) -> PageReport:
    """Execute one notebook and write its static page and figures into ``out_dir``.

    ``mathjax_url`` is the MathJax 2 script the page loads; by default the
    site's own copy, which is copied into ``out_dir/mathjax/`` if it is not
    there yet (see :mod:`ppo_viz.export.mathjax`).
    """
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    start = time.perf_counter()
    try:
        executed = execute_notebook(path, timeout_s=timeout_s)
    except CellExecutionError as error:
        raise ExportError(f"{path.name} raised while executing:\n{error}") from error
    except CellTimeoutError as error:
        raise ExportError(f"{path.name}: {str(error).splitlines()[0]}") from error
    except DeadKernelError as error:
        raise ExportError(f"{path.name}: the kernel died while running it") from error
    except NoSuchKernel as error:
        raise ExportError(f"no python3 kernel to run {path.name}: pip install ipykernel") from error
    static = make_static(executed, path.name)
    url = mathjax_url or copy_mathjax(out_dir)
    html_name, figures = write_page(static, path.stem, out_dir, url)
    return PageReport(
        notebook=path.name,
        html=html_name,
        title=page_title(static, path.stem),
        figure_cells=figures,
        seconds=round(time.perf_counter() - start, 2),
        warnings=[f"{path.name}, {problem}" for problem in output_problems(executed)],
    )


def export_all(
    notebooks_dir: Path,
    out_dir: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    mathjax_url: str | None = None,
) -> list[PageReport]:
    """Export every ``NN_*.ipynb`` of ``notebooks_dir``; write index and manifest.

    Everything that can be checked without running a notebook is checked
    first (:class:`SetupError`): the notebooks, the copy of MathJax (unless
    ``mathjax_url`` is given) and the output folder; then MathJax is copied.
    """
    paths = notebooks_to_export(notebooks_dir)
    if not mathjax_url:
        mathjax_source()
    prepare_output_dir(out_dir)
    mathjax_url = mathjax_url or copy_mathjax(out_dir)
    pages = []
    for path in paths:
        print(f"exporting {path.name} ...", flush=True)
        page = export_notebook(path, out_dir, timeout_s, mathjax_url)
        print(
            f"  -> {page.html}: {len(page.figure_cells)} figure cell(s), {page.seconds} s",
            flush=True,
        )
        for note in page.warnings:
            print(f"  warning: {note}", file=sys.stderr, flush=True)
        pages.append(page)
    (out_dir / "index.html").write_text(index_page(pages), encoding="utf-8")
    manifest = {"pages": [asdict(page) for page in pages]}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return pages


# -- the command line --------------------------------------------------------------------------


def default_notebooks_dir() -> Path:
    """``./notebooks`` if it exists, else the repository's ``notebooks/`` next to ppo_viz."""
    here = Path.cwd() / "notebooks"
    return here if here.is_dir() else NOTEBOOK_DIR


def main(argv: list[str] | None = None) -> int:
    """``python -m ppo_viz.export [OUT_DIR] [--notebooks DIR] [--timeout S] [--mathjax-url URL]``.

    Returns the exit status: 0 when the site is written, 2 (after one line
    ``error: ...``) when something is wrong before any notebook runs, 1 when a
    notebook cannot be published, 130 on Ctrl-C.
    """
    parser = argparse.ArgumentParser(
        prog="python -m ppo_viz.export",
        description="Execute every notebook and write static HTML pages and PNG figures.",
    )
    parser.add_argument(
        "out_dir", nargs="?", default="build/site", type=Path, help="default: build/site"
    )
    parser.add_argument("--notebooks", type=Path, default=None, help="default: ./notebooks")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="per cell, s")
    parser.add_argument(
        "--mathjax-url",
        default=None,
        help="address of a MathJax 2 script for the formulas, such as a CDN's (default: the "
        "site's own copy in OUT_DIR/mathjax/, which works offline)",
    )
    args = parser.parse_args(argv)
    notebooks_dir = args.notebooks or default_notebooks_dir()
    try:
        pages = export_all(notebooks_dir, args.out_dir, args.timeout, args.mathjax_url)
    except SetupError as error:
        return _fail(f"error: {error}", EXIT_SETUP)
    except ExportError as error:
        return _fail(f"export failed: {error}", EXIT_FAILED)
    except OSError as error:  # such as a disk that fills up while the pages are written
        return _fail(f"export failed: {error}", EXIT_FAILED)
    except KeyboardInterrupt:
        return _fail(f"interrupted: {args.out_dir} holds only part of the site", EXIT_INTERRUPTED)
    print(f"wrote {len(pages)} page(s) to {args.out_dir}/ (open index.html)")
    return EXIT_OK


def _fail(message: str, status: int) -> int:
    print(message, file=sys.stderr, flush=True)
    return status
