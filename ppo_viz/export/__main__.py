"""``python -m ppo_viz.export [OUT_DIR]``: every notebook run, as static pages for a course site.

nbconvert writes the pages (HTML exporter, template ``page.html.j2``, figure extractor, files
writer).  Added here: checks before any notebook runs, an index, links from every page to the
previous and the next notebook and to the index, page titles, and the site's own MathJax.  The
site is built in a hidden folder inside the output folder and moved into place only when every
page is written, so a notebook that fails, Ctrl-C or a full disk leave the old site as it was.
"""

import argparse
import importlib.resources
import os
import re
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import nbformat

from ppo_viz import export
from ppo_viz.export import DEFAULT_TIMEOUT_S, SetupError

TEMPLATE = Path(__file__).with_name("page.html.j2")
SITE_TITLE = "PPO's clipped surrogate: notebooks"
SITE_INTRO = "Pages at the default settings; open the notebooks in JupyterLab to move the sliders."
#: Exit statuses: the site is written; a notebook failed; a check failed before any ran; Ctrl-C.
EXIT_OK, EXIT_FAILED, EXIT_SETUP, EXIT_INTERRUPTED = 0, 1, 2, 130
#: ``jupyter-server-mathjax`` ships MathJax 2.7.9 (9.6 MB), the version nbconvert's pages load
#: from a CDN; the site copies the 2.4 MB that TeX input and the HTML-CSS output load.
MATHJAX_DIR, MATHJAX_LEFT_OUT = "mathjax", ("SVG", "a11y", "localization")


def copy_mathjax(out_dir: Path) -> str:
    """Copy MathJax into ``out_dir/mathjax/``; return its address for the pages (relative)."""
    try:
        source = importlib.resources.files("jupyter_server_mathjax") / "static"
    except ModuleNotFoundError:
        raise SetupError(
            "no jupyter-server-mathjax for the site's own MathJax: install it, or use --mathjax-url"
        ) from None
    ignore = shutil.ignore_patterns(*MATHJAX_LEFT_OUT)
    shutil.copytree(source, out_dir / MATHJAX_DIR, ignore=ignore, dirs_exist_ok=True)
    return f"{MATHJAX_DIR}/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"


def prepare_output_dir(out_dir: Path) -> None:
    """Create ``out_dir`` and write a file there (which finds what stops even root, ``/proc``)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=out_dir, prefix=".ppo-export-probe-").close()
    except OSError as error:
        blocker = next((path for path in (out_dir, *out_dir.parents) if path.is_file()), None)
        reason = f"{blocker} is a file, not a folder" if blocker else str(error.strerror).lower()
        raise SetupError(f"cannot write the site into {out_dir}: {reason}") from None


def write_page(
    executed: nbformat.NotebookNode,
    stem: str,
    out_dir: Path,
    mathjax_url: str,
    *,
    title: str = "",
    navigation: str = "",
) -> int:
    """Write ``<stem>.html`` and its figures, ``<key>_files/*.png``; return how many figures
    (``key``: ``stem`` if it is made of ``A-Za-z0-9._-`` only, else a name made so from it).

    ``title`` is the page's title (default: ``stem``); ``navigation`` (HTML) is shown above
    and below the page.
    """
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExtractOutputPreprocessor
    from nbconvert.writers import FilesWriter

    exporter = HTMLExporter(template_file=str(TEMPLATE), mathjax_url=mathjax_url)
    exporter.register_preprocessor(ExtractOutputPreprocessor(), enabled=True)
    key = re.sub(r"[^A-Za-z0-9._-]", "_", stem)  # the figures' names: a src with nothing to encode
    key += "" if key == stem else f"_{zlib.crc32(stem.encode(errors='surrogateescape')):08x}"
    names = {"metadata": {"name": stem}, "unique_key": key, "output_files_dir": f"{key}_files"}
    names["ppo_navigation"] = navigation
    static = export.make_static(executed, stem)
    static.metadata["title"] = title or export.shown(stem)  # nbconvert's <title>
    page, resources = exporter.from_notebook_node(static, names)
    FilesWriter(build_directory=str(out_dir)).write(page, resources, notebook_name=stem)
    return len(resources["outputs"])


def navigation(pages: list[tuple[str, str]], at: int) -> str:
    """Links from page ``at`` of ``pages`` ((stem, title) in order) to the previous page, the
    index and the next page, as HTML."""
    links = ['<a href="index.html">All notebooks</a>']
    if at > 0:
        links.insert(0, export.link(f"← {pages[at - 1][1]}", f"{pages[at - 1][0]}.html", "prev"))
    if at + 1 < len(pages):
        links.append(export.link(f"{pages[at + 1][1]} →", f"{pages[at + 1][0]}.html", "next"))
    return f'<nav class="ppo-site-nav">{" · ".join(links)}</nav>'


def export_site(
    notebooks: Path,
    out_dir: Path,
    mathjax_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Export every ``NN_*.ipynb`` in ``notebooks`` and an index into ``out_dir``.

    :class:`SetupError` before any notebook runs; ``ExportError`` with the traceback of a cell
    that raises; a warning naming a cell that writes to stderr or warns.
    """
    notebooks, out_dir = Path(notebooks), Path(out_dir)
    paths = [path.resolve() for path in export.notebook_paths(notebooks)]
    if not paths:
        raise SetupError(f"no notebooks (NN_*.ipynb) in {notebooks}; pass --notebooks DIR")
    titles = [export.title_of(export.read_notebook(p), p.name) for p in paths]
    prepare_output_dir(out_dir)
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=".ppo-export-"))
    try:
        build_site(paths, titles, staging, mathjax_url, timeout_s)
        publish(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_site(
    paths: list[Path], titles: list[str], out_dir: Path, mathjax_url: str | None, timeout_s: float
) -> None:
    """Every page (``paths``, their ``titles``), its figures, the index and (without
    ``mathjax_url``) MathJax into ``out_dir``."""
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellControlSignal, DeadKernelError

    mathjax_url = mathjax_url or copy_mathjax(out_dir)
    pages = [(path.stem, title) for path, title in zip(paths, titles, strict=True)]
    for at, path in enumerate(paths):
        print(f"exporting {export.shown(path.name)} ...", flush=True)
        try:
            executed = export.execute_notebook(path, timeout_s=timeout_s)
        except (CellControlSignal, DeadKernelError, NoSuchKernel) as error:
            raise export.ExportError(f"{path.name} did not run to the end:\n{error}") from error
        stem, title = pages[at]
        links = navigation(pages, at)
        figures = write_page(executed, stem, out_dir, mathjax_url, title=title, navigation=links)
        print(f"  -> {export.shown(path.stem)}.html with {figures} figure(s)", flush=True)
        for problem in export.output_problems(executed):
            print(f"  warning: {path.name}, {problem}", file=sys.stderr, flush=True)
    # A bulleted list (HTML: a title is text): the titles carry their own numbers ("1 · ...").
    links = "".join(f"<li>{export.link(title, f'{stem}.html')}</li>" for stem, title in pages)
    index = nbformat.v4.new_markdown_cell(f"# {SITE_TITLE}\n\n{SITE_INTRO}\n\n<ul>{links}</ul>")
    index_page = nbformat.v4.new_notebook(cells=[index])
    write_page(index_page, "index", out_dir, mathjax_url, title=SITE_TITLE)


def publish(staging: Path, out_dir: Path) -> None:
    """Move a finished site into ``out_dir``: each file or folder replaces its namesake there
    (a folder: the old one moved aside first), and what else the folder holds is left alone."""
    for entry in staging.iterdir():
        target = out_dir / entry.name
        if target.is_dir() and not target.is_symlink():
            aside = Path(tempfile.mkdtemp(dir=out_dir, prefix=".ppo-export-old-"))
            target.rename(aside / entry.name)
            entry.rename(target)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(entry, target)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status (a failed check prints ``error: ...``)."""
    parser = argparse.ArgumentParser(
        prog="python -m ppo_viz.export",
        description="Run every notebook; write static HTML pages, PNG figures and an index.",
    )
    parser.add_argument("out_dir", nargs="?", default="build/site", help="default: %(default)s")
    parser.add_argument("--notebooks", default="notebooks", help="default: %(default)s")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="%(default)s s")
    parser.add_argument("--mathjax-url", help="a MathJax 2 script (default: the site's own)")
    args = parser.parse_args(argv)
    try:
        if args.timeout < 1:  # nbclient would read 0 or less as "no limit"
            raise SetupError(f"--timeout must be a positive number of seconds, not {args.timeout}")
        export_site(args.notebooks, args.out_dir, args.mathjax_url, args.timeout)
    except SetupError as error:
        message, status = f"error: {error}", EXIT_SETUP
    except (export.ExportError, OSError) as error:  # OSError: such as a disk that fills up
        message, status = f"export failed: {error}", EXIT_FAILED
    except KeyboardInterrupt:
        message, status = f"interrupted: {args.out_dir} is as it was", EXIT_INTERRUPTED
    else:
        message, status = f"wrote the site to {args.out_dir}: open its index.html", EXIT_OK
    print(message, file=sys.stderr if status else sys.stdout, flush=True)
    return status


if __name__ == "__main__":  # importing this module (a doctest or module walk) runs nothing
    sys.exit(main())
