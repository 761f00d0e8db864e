"""Publish the notebooks as static pages for a course site or an LMS.

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

Interactive apps (:class:`ppo_viz.display.App`) display a bundle holding the live
widget *and* a PNG/HTML fallback.  A static page has no kernel, so the export
drops the widget views and no widget state is saved: what remains is the
fallback at the default settings.  (nbconvert's HTML exporter would also skip a
widget view whose state is not saved; dropping it makes the page independent of
that.)  When a bundle offers both an HTML fallback and a PNG, both are shown.

The export refuses to publish a page that would show a bare widget repr such as
``FloatSlider(value=0.2)`` or ``<Figure size 640x480 with 1 Axes>`` instead of
something useful, and stops at the first cell that raises.
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
PNG_MIME = "image/png"
HTML_MIME = "text/html"

#: A bare ipywidgets repr (``FloatSlider(value=0.2, ...)``, ``VBox(children=(...``).
WIDGET_REPR = re.compile(
    r"\b[A-Z]\w*(Slider|Box|Button|Text|Output|Dropdown|HTML|Label|Checkbox|Tab|Accordion|"
    r"Widget|Select|Toggle\w*|Play|Progress\w*|Area)\((value|children|outputs|description|"
    r"layout|options|index)="
)
#: matplotlib's text repr of a figure, shown when a figure itself is missing.
FIGURE_REPR = re.compile(r"<(matplotlib\.figure\.)?Figure size \d+x\d+ with \d+ Axes>")

DEFAULT_TIMEOUT_S = 180


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


# -- turning a live notebook into a static one -------------------------------------------------


def _is_text_only(data: dict[str, Any]) -> bool:
    return set(data) <= {"text/plain"}


def _plain_text(data: dict[str, Any]) -> str:
    text = data.get("text/plain", "")
    return "".join(text) if isinstance(text, list) else str(text)


def static_outputs(outputs: list[Any], where: str) -> list[Any]:
    """The outputs of one cell as a page without a kernel should show them.

    Widget views are dropped (their bundle's fallback stays); a bundle with both an
    HTML fallback without an image and a PNG becomes two outputs, so the figure is
    shown too (nbconvert would pick only the HTML).  Raises :class:`ExportError` for
    an output that would show a bare widget or figure repr.
    """
    result = []
    for output in outputs:
        if output.get("output_type") not in ("display_data", "execute_result"):
            result.append(output)
            continue
        data = dict(output.get("data", {}))
        had_widget = data.pop(WIDGET_VIEW_MIME, None) is not None
        if had_widget and _is_text_only(data):
            raise ExportError(
                f"{where}: displays a widget with no static fallback (it would show as "
                f"{_plain_text(data)[:80]!r}); display it through a ppo_viz.display.App"
            )
        text = _plain_text(data)
        if _is_text_only(data) and (WIDGET_REPR.search(text) or FIGURE_REPR.search(text)):
            raise ExportError(f"{where}: shows a bare repr instead of a figure: {text[:120]!r}")
        html_part = data.get(HTML_MIME)
        html_text = "".join(html_part) if isinstance(html_part, list) else html_part
        if html_text is not None and PNG_MIME in data and "<img" not in html_text:
            html_output = copy.deepcopy(output)
            html_output["data"] = {HTML_MIME: html_part}
            html_output["output_type"] = "display_data"
            html_output.pop("execution_count", None)
            png_output = copy.deepcopy(output)
            png_output["data"] = {k: v for k, v in data.items() if k != HTML_MIME}
            result += [html_output, png_output]
            continue
        output = copy.deepcopy(output)
        output["data"] = data
        result.append(output)
    return result


def make_static(notebook: Any, name: str) -> Any:
    """A copy of an executed notebook fit for a static page: no widget state or views."""
    static = copy.deepcopy(notebook)
    static.metadata.pop("widgets", None)
    for index, cell in enumerate(static.cells):
        if cell.cell_type == "code":
            cell.outputs = static_outputs(cell.outputs, f"{name}, cell {index}")
    return static


def stderr_warnings(notebook: Any, name: str) -> list[str]:
    """Readable notes for stderr and error outputs (a notebook should print none)."""
    notes = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                notes.append(f"{name}, cell {index}: stderr: {str(output.get('text'))[:200]}")
            if output.get("output_type") == "error":
                notes.append(f"{name}, cell {index}: error {output.get('ename')}")
    return notes


# -- running and writing -----------------------------------------------------------------------


def execute_notebook(path: Path, timeout_s: int = DEFAULT_TIMEOUT_S) -> Any:
    """Run ``path`` top to bottom in a fresh ``python3`` kernel, cwd = its folder.

    No widget state is stored in the result.  Raises :class:`ExportError` when a
    cell raises, naming the notebook.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    )
    try:
        client.execute()
    except CellExecutionError as error:
        raise ExportError(f"{path.name} raised while executing:\n{error}") from error
    return notebook


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
    body = add_alt_text(body, {f: cell["alt"] for cell in figures for f in cell["files"]})
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


def add_alt_text(page: str, alt_by_src: dict[str, str]) -> str:
    """Give each figure ``<img>`` the app's description as alternative text."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, features="html.parser")
    for image in soup.find_all("img"):
        alt = alt_by_src.get(str(image.get("src", "")))
        if alt:
            image["alt"] = alt
    return str(soup)


def write_index(pages: list[PageReport], out_dir: Path) -> None:
    """A plain ``index.html`` linking every page."""
    items = "\n".join(
        f'    <li><a href="{html.escape(page.html)}">{html.escape(page.title)}</a></li>'
        for page in pages
    )
    (out_dir / "index.html").write_text(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        "  <title>PPO's clipped surrogate: notebooks</title>\n"
        "  <style>body{font-family:sans-serif;max-width:42em;margin:2em auto;line-height:1.5}"
        "</style>\n</head>\n<body>\n  <h1>PPO's clipped surrogate: notebooks</h1>\n"
        "  <p>Static pages at the default settings. Open the notebooks in JupyterLab to "
        "move the sliders.</p>\n  <ol>\n"
        f"{items}\n  </ol>\n</body>\n</html>\n",
        encoding="utf-8",
    )


def export_notebook(
    path: Path,
    out_dir: Path,
    timeout_s: int = DEFAULT_TIMEOUT_S,
    mathjax_url: str | None = None,
) -> PageReport:
    """Execute one notebook and write its static page and figures into ``out_dir``."""
    start = time.perf_counter()
    executed = execute_notebook(path, timeout_s)
    static = make_static(executed, path.name)
    html_name, figures = write_page(static, path.stem, out_dir, mathjax_url)
    return PageReport(
        notebook=path.name,
        html=html_name,
        title=page_title(static, path.stem),
        figure_cells=figures,
        seconds=round(time.perf_counter() - start, 2),
        warnings=stderr_warnings(executed, path.name),
    )


def export_all(
    notebooks_dir: Path,
    out_dir: Path,
    timeout_s: int = DEFAULT_TIMEOUT_S,
    mathjax_url: str | None = None,
) -> list[PageReport]:
    """Export every ``NN_*.ipynb`` of ``notebooks_dir``; write index and manifest."""
    paths = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb"))
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
    write_index(pages, out_dir)
    manifest = {"pages": [page.__dict__ for page in pages]}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return pages


def default_notebooks_dir() -> Path:
    """``./notebooks`` if it exists, else the repository's ``notebooks/`` next to ppo_viz."""
    here = Path.cwd() / "notebooks"
    return here if here.is_dir() else Path(__file__).resolve().parents[1] / "notebooks"


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
