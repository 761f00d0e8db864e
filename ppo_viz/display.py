"""Showing matplotlib figures inside widgets, with a static fallback.

Figures are plain :class:`matplotlib.figure.Figure` objects, never registered
with pyplot, so the inline backend never shows them a second time at the end
of a cell.  A :class:`FigureView` renders its figure to PNG inside an
``ipywidgets.Output`` and replaces the previous image in one update of the Output's ``outputs``, so
redraws neither flicker nor stack up.

Every interactive app displays itself through :func:`widget_bundle`: a
front end with widgets (JupyterLab, Notebook 7) shows the live widget, and one
without (GitHub's preview, nbconvert's HTML export with no widget state) shows
the PNG or HTML fallback at the default settings instead of a bare
``VBox(...)`` repr.
"""

from __future__ import annotations

import base64
import html
import io
import struct
import zlib
from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"

#: Resolution used on screen; slides use :data:`SLIDE_DPI`.
SCREEN_DPI = 100
SLIDE_DPI = 200


def figure_to_png(figure: Figure, dpi: int = SCREEN_DPI) -> bytes:
    """Render ``figure`` to PNG bytes (Agg, no pyplot involved)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def _encode_png(canvas: FigureCanvasAgg) -> bytes:
    """PNG bytes (8-bit RGB) of what ``canvas`` holds now.

    Redraws are frequent, so this writes the PNG directly: no row filters and
    zlib's fastest level, about twice as fast as a general-purpose encoder on
    these mostly-flat figures.
    """
    rgba = np.asarray(canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)
    rows[:, 1:] = rgba[:, :, :3].reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)),
            _png_chunk(b"IEND", b""),
        )
    )


class FigureView:
    """One matplotlib figure shown in an ``Output`` widget and redrawn in place.

    Callers update artists (line data, patches, titles) and then call
    :meth:`refresh` once.  The new PNG replaces the old one in a single update
    of the Output's ``outputs``, so nothing flickers or stacks up.

    Artists registered with :meth:`animate` are the only ones that change
    between redraws: everything else (axes, ticks, labels, legend) is rendered
    once and reused, which keeps a redraw to a few tens of milliseconds.  Call
    :meth:`invalidate` after changing anything that is not animated (limits,
    labels).  :func:`figure_to_png` and ``savefig`` still draw everything.
    """

    def __init__(self, figure: Figure, css_class: str = "ppo-figure") -> None:
        self.figure = figure
        self.canvas = FigureCanvasAgg(figure)
        self.output = widgets.Output()
        self.output.add_class(css_class)
        self.last_png: bytes = b""
        self._animated: list[Artist] = []
        self._background: Any = None

    def animate(self, artists: Iterable[Artist]) -> None:
        """Mark ``artists`` as the ones redrawn on every refresh."""
        for artist in artists:
            artist.set_animated(True)
            self._animated.append(artist)
        self.invalidate()

    def invalidate(self) -> None:
        """Forget the cached static background; the next refresh redraws it."""
        self._background = None

    def render(self) -> bytes:
        """PNG bytes of the figure's current state."""
        if self._background is None:
            self.canvas.draw()
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        else:
            self.canvas.restore_region(self._background)
        for artist in self._animated:
            self.figure.draw_artist(artist)
        return _encode_png(self.canvas)

    def refresh(self) -> bytes:
        """Render the figure and replace what the Output widget shows."""
        self.last_png = self.render()
        self.output.outputs = (
            {
                "output_type": "display_data",
                "data": {
                    "image/png": base64.b64encode(self.last_png).decode("ascii"),
                    "text/plain": "<figure>",
                },
                "metadata": {},
            },
        )
        return self.last_png


def message_html(text: str, kind: str = "error") -> str:
    """A short, styled message for an ``HTML`` widget (text is escaped)."""
    colours = {
        "error": ("#8A1C00", "#FBEAE5", "#D55E00"),
        "info": ("#083D5C", "#E8F3FA", "#0072B2"),
        "ok": ("#004D38", "#E6F5F0", "#009E73"),
    }
    fg, bg, border = colours[kind]
    return (
        f'<div class="ppo-message ppo-message-{kind}" style="color:{fg};background:{bg};'
        f"border-left:4px solid {border};padding:4px 8px;margin:2px 0;"
        f'font-family:sans-serif;font-size:13px">{html.escape(text)}</div>'
    )


def widget_bundle(
    widget: widgets.Widget,
    *,
    png: bytes | None = None,
    html_fallback: str | None = None,
    text: str,
) -> dict[str, Any]:
    """A display bundle: the live widget, plus fallbacks for widget-less viewers.

    ``text`` is the plain-text fallback and should say what the reader would
    see with a kernel (never a bare widget repr).
    """
    bundle: dict[str, Any] = {
        WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": widget.model_id},
        "text/plain": text,
    }
    if png is not None:
        bundle["image/png"] = base64.b64encode(png).decode("ascii")
    if html_fallback is not None:
        bundle["text/html"] = html_fallback
    return bundle


class App:
    """Base class for the notebooks' interactive apps.

    Subclasses build ``self.widget`` (the root widget) and implement
    :meth:`static_fallback`; displaying the app (leaving it as the last
    expression of a cell) shows the widget where widgets run and the fallback
    elsewhere.
    """

    widget: widgets.Widget
    description = "Interactive figure"

    def static_fallback(self) -> dict[str, Any]:
        """Keyword arguments for :func:`widget_bundle`: ``png`` and/or ``html_fallback``."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        text = f"{self.description} (open in JupyterLab with a running kernel to use the controls)"
        return widget_bundle(self.widget, text=text, **self.static_fallback())
