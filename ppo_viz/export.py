"""Run the notebooks headless, and publish them as static pages for a course site or an LMS.

Usage (from the repository root)::

    python -m ppo_viz.export build/site

executes every ``notebooks/NN_*.ipynb`` (kernel ``python3``, working directory
``notebooks/``) and writes, into the given folder:

- ``<name>.html``: the notebook as a static page (JupyterLab look), no kernel needed;
- ``<name>_files/*.png``: every figure of that page as a PNG file (the page links them);
- ``index.html``: a list of the pages, in order;
- ``manifest.json``: for each page, the cells that show a figure and their PNG files.

Formulas are typeset by MathJax, loaded from nbconvert's default CDN when the page
is opened (``--mathjax-url URL`` points at a copy on your own site instead); without
it they show as LaTeX source.  Figures need nothing: they are PNG files.

Running a notebook is one function, :func:`execute_notebook`, shared with the
tests and the benchmarks, and so is the list of what a reader would see go
wrong in its outputs, :func:`output_problems`.

Interactive apps (:class:`ppo_viz.app.App`) display a bundle holding the live
widget *and* a fallback: the figure's PNG, and for an app with readouts an HTML
page of the readouts with the same PNG inline.  A static page has no kernel, so
the export drops the widget views and saves no widget state; what remains is
the fallback at the default settings, shown as the readouts' HTML followed by
the PNG as a file of its own.  Every HTML output's copy of the bundle's
stylesheet is dropped too: each page carries it once, in its ``<head>``.

The export refuses to publish a page that would show a bare widget repr such as
``FloatSlider(value=0.2)`` or ``<Figure size 640x480 with 1 Axes>`` instead of
something useful, and stops at the first cell that raises.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ppo_viz.app import WIDGET_VIEW_MIME
from ppo_viz.html import Markup, style_tag, tag
from ppo_viz.style import stylesheet

WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
PNG_MIME = "image/png"
HTML_MIME = "text/html"
#: The course notebooks that come with the bundle, and how their files are named.
NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"
SITE_TITLE = "PPO's clipped surrogate: notebooks"

#: A bare ipywidgets repr (``FloatSlider(value=0.2, ...)``, ``VBox(children=(...``).
WIDGET_REPR = re.compile(
    r"\b[A-Z]\w*(Slider|Box|Button|Text|Output|Dropdown|HTML|Label|Checkbox|Tab|Accordion|"
    r"Widget|Select|Toggle\w*|Play|Progress\w*|Area)\((value|children|outputs|description|"
    r"layout|options|index)="
)
#: matplotlib's text repr of a figure, shown when a figure itself is missing.
FIGURE_REPR = re.compile(r"<(matplotlib\.figure\.)?Figure size \d+x\d+ with \d+ Axes>")

#: Seconds a single cell may run before the run is stopped.
DEFAULT_TIMEOUT_S = 180
#: Seconds to wait, after a cell finished, for the outputs it sent.  nbclient's default
#: (4 s) silently drops late outputs on a busy machine, such as an ``interact`` figure.
IOPUB_TIMEOUT_S = 60


class ExportError(RuntimeError):
    """A notebook cannot be published as a static page (the message says why)."""


@dataclass
class PageReport:
    """What one exported page holds; written to ``manifest.json``."""

    notebook: str
    html: str
    title: str
    figure_cells: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


# -- running a notebook (the export, the tests and the benchmarks) ---------------------------


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
    :func:`make_static` reads an ``Output`` widget's contents from, then
    drops).  A cell that raises stops the run with nbclient's
    ``CellExecutionError``, which names the cell and shows its traceback,
    unless ``allow_errors`` is set; so do outputs that never arrive.
    """
    from nbclient import NotebookClient

    if isinstance(notebook, Path):
        cwd = cwd or notebook.parent
        notebook = nbformat.read(notebook, as_version=4)
    NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        allow_errors=allow_errors,
        iopub_timeout=IOPUB_TIMEOUT_S,
        raise_on_iopub_timeout=True,
        resources={"metadata": {"path": str(cwd or NOTEBOOK_DIR)}},
    ).execute(env=kernel_environment())
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
            text = str(output.get("text", "")) + _plain_text(output.get("data", {}))
            if "Warning" in text or "Traceback" in text:
                problems.append(f"cell {index} shows a warning or traceback: {text[:300]}")
    return problems


# -- turning a live notebook into a static one -------------------------------------------------


def _plain_text(data: dict[str, Any]) -> str:
    return _joined(data.get("text/plain")) or ""


def _joined(text: str | list[str] | None) -> str | None:
    """nbformat stores long text either as one string or as a list of lines."""
    return "".join(text) if isinstance(text, list) else text


def static_outputs(
    outputs: list[Any], where: str, widget_state: dict[str, Any] | None = None
) -> list[Any]:
    """The outputs of one cell as a page without a kernel should show them.

    Widget views are dropped and their bundle's fallback stays; a bundle with
    both HTML and a PNG becomes two outputs, the HTML and then the PNG (see
    :func:`static_html`), where nbconvert alone would show only the HTML.  A
    widget with no fallback of its own (``ipywidgets.interact``) shows what its
    ``Output`` widgets hold, read from ``widget_state`` (the notebook's saved
    widget state, by model id).  Raises :class:`ExportError` for an output that
    would show a bare widget or figure repr.
    """
    widget_state = widget_state or {}
    result = []
    for output in outputs:
        if output.get("output_type") not in ("display_data", "execute_result"):
            result.append(output)
            continue
        data = dict(output.get("data", {}))
        view = data.pop(WIDGET_VIEW_MIME, None)
        text = _plain_text(data)
        if set(data) <= {"text/plain"}:
            captured = output_widget_contents(view["model_id"], widget_state) if view else []
            if captured:
                result += static_outputs(captured, where, widget_state)
                continue
            if view:
                raise ExportError(
                    f"{where}: displays a widget with no static fallback (it would show as "
                    f"{text[:80]!r}); display it through a ppo_viz.app.App or WidgetDisplay"
                )
            if WIDGET_REPR.search(text) or FIGURE_REPR.search(text):
                raise ExportError(f"{where}: shows a bare repr instead of a figure: {text[:120]!r}")
        result += _shown_parts(output, data)
    return result


def output_widget_contents(model_id: str, widget_state: dict[str, Any]) -> list[Any]:
    """The outputs held by the ``Output`` widgets in a widget's tree, in order."""
    model = widget_state.get(model_id, {})
    state = model.get("state", {})
    found = []
    if model.get("model_name") == "OutputModel":
        found += [nbformat.from_dict(output) for output in state.get("outputs", [])]
    for child in state.get("children", []):
        found += output_widget_contents(str(child).removeprefix("IPY_MODEL_"), widget_state)
    return found


def _shown_parts(output: Any, data: dict[str, Any]) -> list[Any]:
    """``output`` showing ``data``; an HTML output and then a PNG output if it has both."""
    html = _joined(data.get(HTML_MIME))
    if html is not None:
        data[HTML_MIME] = static_html(html, data.get(PNG_MIME))
    if html is None or PNG_MIME not in data:
        return [_with_data(output, data)]
    html_part = _with_data(output, {HTML_MIME: data.pop(HTML_MIME)})
    html_part["output_type"] = "display_data"
    html_part.pop("execution_count", None)
    return [html_part, _with_data(output, data)]


def _with_data(output: Any, data: dict[str, Any]) -> Any:
    copied = copy.deepcopy(output)
    copied["data"] = data
    return copied


def static_html(html: str, png: str | None = None) -> str:
    """An HTML output without the bundle's stylesheet and without an inline copy of ``png``.

    ``png`` is the bundle's base64 PNG: an app's HTML fallback holds the same
    figure as an ``<img>``, which the page shows from the PNG file instead.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, features="html.parser")
    for style in soup.find_all("style"):
        if (style.string or "").strip() == stylesheet().strip():
            style.decompose()
    if png is not None:
        inline = "data:image/png;base64," + "".join(_joined(png).split())
        for image in soup.find_all("img", src=inline):
            image.decompose()
    return str(soup)


def make_static(notebook: Any, name: str) -> Any:
    """A copy of an executed notebook fit for a static page: no widget state or views."""
    static = copy.deepcopy(notebook)
    saved = static.metadata.pop("widgets", {}).get(WIDGET_STATE_MIME, {})
    for index, cell in enumerate(static.cells):
        if cell.cell_type == "code":
            where = f"{name}, cell {index}"
            cell.outputs = static_outputs(cell.outputs, where, saved.get("state", {}))
    return static


# -- writing the pages -------------------------------------------------------------------------


def page_title(notebook: Any, fallback: str) -> str:
    """The first Markdown heading of the notebook, as plain text."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#+\s+(.+)$", cell.source, flags=re.MULTILINE)
            if match:
                return re.sub(r"[*_`$]", "", match.group(1)).strip()
    return fallback


def write_page(
    static: Any, stem: str, out_dir: Path, mathjax_url: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Write ``<stem>.html`` and ``<stem>_files/*.png``; return (html name, figure cells)."""
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExtractOutputPreprocessor

    resources: dict[str, Any] = {
        "unique_key": stem,
        "output_files_dir": f"{stem}_files",
        "outputs": {},
    }
    # Extract in place (before the exporter copies the notebook) so the figure files
    # are recorded in the cells' metadata, which the lab template then links.
    extractor = ExtractOutputPreprocessor(extract_output_types={PNG_MIME})
    static, resources = extractor.preprocess(static, resources)
    exporter = HTMLExporter(template_name="lab")
    if mathjax_url:
        exporter.mathjax_url = mathjax_url
    exporter.log.setLevel("ERROR")  # its "alternative text is missing" note: we add alt below
    body, _ = exporter.from_notebook_node(static, resources=resources)
    figures = figure_cells(static)
    body = finish_page(body, {f: cell["alt"] for cell in figures for f in cell["files"]})
    for relative, data in resources.get("outputs", {}).items():
        target = out_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    html_name = f"{stem}.html"
    (out_dir / html_name).write_text(body, encoding="utf-8")
    return html_name, figures


def figure_cells(static: Any) -> list[dict[str, Any]]:
    """Each code cell that shows a PNG: its index, id and the PNG files written for it."""
    cells = []
    for index, cell in enumerate(static.cells):
        if cell.cell_type != "code":
            continue
        pngs = [
            output
            for output in cell.outputs
            if PNG_MIME in output.get("metadata", {}).get("filenames", {})
        ]
        if pngs:
            files = [output.metadata["filenames"][PNG_MIME] for output in pngs]
            alt = _plain_text(pngs[0].get("data", {})).strip()
            if not alt or alt.startswith("<"):
                alt = f"Figure of cell {index}"
            cells.append({"index": index, "id": cell.get("id"), "files": files, "alt": alt})
    return cells


def finish_page(page: str, alt_by_src: dict[str, str]) -> str:
    """Add the bundle's stylesheet to the page's head, and alternative text to its figures."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, features="html.parser")
    head = soup.head or soup
    head.append(BeautifulSoup(str(style_tag()), features="html.parser"))
    for image in soup.find_all("img"):
        alt = alt_by_src.get(str(image.get("src", "")))
        if alt:
            image["alt"] = alt
    return str(soup)


def index_page(pages: list[PageReport]) -> str:
    """A plain ``index.html`` linking every page, styled by the bundle's stylesheet."""
    head = tag("head", Markup('<meta charset="utf-8">'), tag("title", SITE_TITLE), style_tag())
    items = [tag("li", tag("a", page.title, href=page.html)) for page in pages]
    body = tag(
        "body",
        tag(
            "main",
            tag("h1", SITE_TITLE),
            tag(
                "p",
                "Static pages at the default settings. "
                "Open the notebooks in JupyterLab to move the sliders.",
            ),
            tag("ol", *items),
            classes="ppo",
        ),
    )
    return f"<!DOCTYPE html>\n{tag('html', head, body, lang='en')}\n"


def export_notebook(
    path: Path,
    out_dir: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    mathjax_url: str | None = None,
) -> PageReport:
    """Execute one notebook and write its static page and figures into ``out_dir``."""
    from nbclient.exceptions import CellExecutionError

    start = time.perf_counter()
    try:
        executed = execute_notebook(path, timeout_s=timeout_s)
    except CellExecutionError as error:
        raise ExportError(f"{path.name} raised while executing:\n{error}") from error
    static = make_static(executed, path.name)
    html_name, figures = write_page(static, path.stem, out_dir, mathjax_url)
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
    """Export every ``NN_*.ipynb`` of ``notebooks_dir``; write index and manifest."""
    paths = notebook_paths(notebooks_dir)
    if not paths:
        raise ExportError(f"no notebooks (NN_*.ipynb) in {notebooks_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
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


def default_notebooks_dir() -> Path:
    """``./notebooks`` if it exists, else the repository's ``notebooks/`` next to ppo_viz."""
    here = Path.cwd() / "notebooks"
    return here if here.is_dir() else NOTEBOOK_DIR


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m ppo_viz.export [OUT_DIR] [--notebooks DIR] [--timeout S]``."""
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
        help="MathJax 2 script for the formulas (default: nbconvert's CDN copy; pass your "
        "site's own copy for offline use)",
    )
    args = parser.parse_args(argv)
    notebooks_dir = args.notebooks or default_notebooks_dir()
    try:
        pages = export_all(
            notebooks_dir.resolve(), args.out_dir.resolve(), args.timeout, args.mathjax_url
        )
    except ExportError as error:
        print(f"export failed: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(pages)} page(s) to {args.out_dir}/ (open index.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
