"""Writing the static pages: one HTML page per notebook, its figures as PNG files, an index."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ppo_viz.export.running import plain_text
from ppo_viz.export.static import PNG_MIME
from ppo_viz.html import Markup, style_tag, tag

SITE_TITLE = "PPO's clipped surrogate: notebooks"
#: Outputs of this type need require.js, the one script the page template loads from a CDN.
SCRIPT_MIME = "application/javascript"


def page_title(notebook: Any, fallback: str) -> str:
    """The first Markdown heading of the notebook, as plain text."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#+\s+(.+)$", cell.source, flags=re.MULTILINE)
            if match:
                return re.sub(r"[*_`$]", "", match.group(1)).strip()
    return fallback


def write_page(
    static: Any, stem: str, out_dir: Path, mathjax_url: str
) -> tuple[str, list[dict[str, Any]]]:
    """Write ``<stem>.html`` and ``<stem>_files/*.png``; return (html name, figure cells).

    ``mathjax_url`` is the address of the MathJax 2 script the page loads to
    typeset its formulas (see :func:`ppo_viz.export.copy_mathjax`).
    """
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
    exporter = HTMLExporter(template_name="lab", mathjax_url=mathjax_url)
    exporter.log.setLevel("ERROR")  # its "alternative text is missing" note: we add alt below
    body, _ = exporter.from_notebook_node(static, resources=resources)
    figures = figure_cells(static)
    alt_by_src = {file: cell["alt"] for cell in figures for file in cell["files"]}
    drop_script = None if needs_scripts(static) else exporter.require_js_url
    body = finish_page(body, alt_by_src, drop_script)
    for relative, data in resources.get("outputs", {}).items():
        target = out_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    html_name = f"{stem}.html"
    (out_dir / html_name).write_text(body, encoding="utf-8")
    return html_name, figures


def needs_scripts(static: Any) -> bool:
    """Whether any output of the notebook runs JavaScript (and so needs require.js)."""
    return any(
        SCRIPT_MIME in output.get("data", {})
        for cell in static.cells
        for output in cell.get("outputs", [])
    )


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
            alt = plain_text(pngs[0].get("data", {})).strip()
            if not alt or alt.startswith("<"):
                alt = f"Figure of cell {index}"
            cells.append({"index": index, "id": cell.get("id"), "files": files, "alt": alt})
    return cells


def finish_page(page: str, alt_by_src: dict[str, str], drop_script: str | None = None) -> str:
    """Add the bundle's stylesheet and the figures' alternative text; drop an unused script.

    ``drop_script`` is the address of a ``<script>`` to remove (require.js, from a
    CDN, when no output needs it: offline, or behind a firewall that drops the
    request, a page waits for the scripts in its head before it shows anything).
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, features="html.parser")
    head = soup.head or soup
    head.append(BeautifulSoup(str(style_tag()), features="html.parser"))
    for image in soup.find_all("img"):
        alt = alt_by_src.get(str(image.get("src", "")))
        if alt:
            image["alt"] = alt
    if drop_script:
        for script in soup.find_all("script", src=drop_script):
            script.decompose()
    return str(soup)


def index_page(pages: list[Any]) -> str:
    """A plain ``index.html`` linking every page (each with ``title`` and ``html``)."""
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
