"""Turning an executed notebook into one fit for a page without a kernel.

Interactive apps (:class:`ppo_viz.app.App`) display a bundle holding the live
widget *and* a fallback: the figure's PNG, and for an app with readouts an HTML
page of the readouts with the same PNG inline.  A static page has no kernel, so
the export drops the widget views and saves no widget state; what remains is
the fallback at the default settings, shown as the readouts' HTML followed by
the PNG as a file of its own.  Every HTML output's copy of the bundle's
stylesheet is dropped too: each page carries it once, in its ``<head>``.

A page that would show a bare widget repr such as ``FloatSlider(value=0.2)`` or
``<Figure size 640x480 with 1 Axes>`` instead of something useful is refused.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import nbformat

from ppo_viz.app import WIDGET_VIEW_MIME
from ppo_viz.export.errors import ExportError
from ppo_viz.export.running import joined, plain_text
from ppo_viz.style import stylesheet

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


def make_static(notebook: Any, name: str) -> Any:
    """A copy of an executed notebook fit for a static page: no widget state or views."""
    static = copy.deepcopy(notebook)
    saved = static.metadata.pop("widgets", {}).get(WIDGET_STATE_MIME, {})
    for index, cell in enumerate(static.cells):
        if cell.cell_type == "code":
            where = f"{name}, cell {index}"
            cell.outputs = static_outputs(cell.outputs, where, saved.get("state", {}))
    return static


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
        text = plain_text(data)
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
    html = joined(data.get(HTML_MIME))
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
        inline = "data:image/png;base64," + "".join(joined(png).split())
        for image in soup.find_all("img", src=inline):
            image.decompose()
    return str(soup)
