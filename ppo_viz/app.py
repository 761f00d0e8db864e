"""The one way to build an interactive figure: :class:`LiveFigure`.

A live figure is a plain matplotlib :class:`~matplotlib.figure.Figure`, a function that moves its
artists to the controls' values, and the controls::

    figure = Figure(figsize=(6, 3.5), layout="constrained")
    ax = figure.subplots()
    line, = ax.plot([], [], color=COLORS["clipped"])

    def update(eps, advantage):
        sweep = ppo_clip.ratio_sweep(grid, advantage, eps)   # every number from ppo_clip
        line.set_data(grid, sweep.objective_term)
        return f"band [{sweep.lower:g}, {sweep.upper:g}]"    # a readout (optional)

    LiveFigure(figure, update, {"eps": slider("ε", 0.2, (0, 1), 0.01),
                                "advantage": slider("A", 1.0, (-2, 2), 0.25)},
               moving=[line])

(``slider`` and the other controls, laid out alike, are in :mod:`ppo_viz.controls`.)

:class:`LiveFigure` is an ``ipywidgets.VBox``: the controls, a message line, the readout and the
figure, shown by ipympl's canvas widget (the ``%matplotlib widget`` backend, with its toolbar for
zoom, pan and download).  On every change of a control it calls ``update`` with every control's
value by name and redraws with matplotlib's documented blitting: the figure without the
``moving`` artists is drawn once and kept (``copy_from_bbox``); each change restores it
(``restore_region``), draws the moving artists on top (``draw_artist``) and sends ipympl the
pixels that changed (``canvas.blit``).  ipywidgets sends a dragged slider's values one at a
time, the latest of those moved meanwhile once the kernel is idle; the drawing waits for the
event loop's next turn (``call_soon``), after the kernel went idle, so the next value travels
while this one is drawn (a drag's frames were 21 instead of 25 in 2 s without it), and values
set together (in one cell, one message) are drawn once.  ipykernel may handle a widget's
message on a subshell's thread: the controls' and the canvas's are handed to the figure's loop
(``call_soon_threadsafe``), so no drawing runs beside another.  A full ``canvas.draw()``
costs three to four times a blit, so list every artist ``update`` changes in ``moving``, and
keep static artists from lying on top of moving ones.  A change of an axis' limits, a zoom or
a resize draws everything once and keeps the new background, unless ``update`` redraws the
changed axes itself (:meth:`LiveFigure.redraw_axes`), which leaves legends and colour bars be.

``update`` raises :class:`InputError` for a setting it cannot use, before changing any artist:
the message is shown in place of a traceback and the last good figure stays; so is an error
while drawing, with its type.  Without a running event loop (a script, a test) the figure is
drawn at once and such an error raises.  A value no
position of a control gives, which only code can set (NaN on a slider, nothing chosen in a
dropdown), is refused the same way before ``update`` is called.  Where widgets do
not run (GitHub's preview, nbconvert's HTML, the course-site export) the figure shows as a PNG at
the current settings, under the readout.  :meth:`LiveFigure.save` writes a PNG and an SVG.
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
import os
import threading
import unittest.mock
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox, IdentityTransform

from ppo_viz.html import Markup, message, page, style_tag, tag
from ppo_viz.style import SLIDE_WIDTH_PX, screen_dpi

# Import ipympl without switching matplotlib's backend, as its ``__init__`` would: ipympl 0.10's
# ``ipympl/__init__.py`` calls ``matplotlib.use("module://ipympl.backend_nbagg")`` whenever
# matplotlib is loaded (matplotlib/ipympl issue 623): after importing an app, a script's
# ``plt.show()`` printed a widget's description instead of the figure.  The apps need only
# ipympl's canvas widget; a notebook that wants ipympl for its own pyplot figures says
# ``%matplotlib widget``, as ipympl documents.
with unittest.mock.patch.object(matplotlib, "use"):
    from ipympl.backend_nbagg import Canvas, FigureManager

#: Every control of a live figure has this class, and ``ppo-control-<name>`` for its name.
MAIN_CONTROL = "ppo-main-control"
#: The figure's box has this class while a slow ``update`` runs (``style.css`` dims it).
BUSY_CLASS = "ppo-busy"
#: The readout's class, and the Reset button's (it sets every control back to its start).
READOUT_CLASS, RESET_CLASS = "ppo-readout", "ppo-reset"

Update = Callable[..., "str | Markup | None"]


class InputError(ValueError):
    """A setting or an entry an app cannot use; ``str(error)`` is written for the reader."""


class StaticFallback:
    """For a widget class: what a front end without widgets shows in its place.

    Mix in before the widget class (``class Quiz(StaticFallback, widgets.VBox)``) and override
    :meth:`static_html` and/or :meth:`static_png`; the display bundle then carries the live
    widget and those, and nbconvert, GitHub's preview and the course-site export show the
    richest one they can.  :attr:`description` is the plain-text line.
    """

    description = "Interactive widget"

    def static_html(self) -> str | None:
        """HTML to show instead of the widget (none by default)."""
        return None

    def static_png(self) -> bytes | None:
        """A PNG to show instead of the widget (none by default)."""
        return None

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]
        bundle["text/plain"] = f"{self.description} (run the notebook to use it)"
        png, html = self.static_png(), self.static_html()
        if png is not None:
            bundle["image/png"] = base64.b64encode(png).decode("ascii")
        if html is not None:
            bundle["text/html"] = str(html)
        return bundle


class LiveFigure(StaticFallback, widgets.VBox):
    """Controls above a matplotlib figure that ``update`` moves, redrawn by blitting.

    ``controls`` maps each name ``update`` takes to a widget with a ``value``; ``rows`` lays
    them out (names per row; by default one row each).  ``above`` and ``below`` are extra
    widgets placed above the controls and under the figure.  A subclass's :attr:`description`
    is one line saying what the figure shows, for front ends without widgets.
    """

    description = "Interactive figure"

    def __init__(
        self,
        figure: Figure,
        update: Update,
        controls: Mapping[str, widgets.Widget],
        *,
        moving: Iterable[Artist],
        rows: Sequence[Sequence[str]] | None = None,
        above: Sequence[widgets.Widget] = (),
        below: Sequence[widgets.Widget] = (),
    ) -> None:
        self.figure = figure
        self._update = update
        self.controls = dict(controls)
        self.moving = sorted(moving, key=lambda artist: artist.get_zorder())
        self.message = widgets.HTML(layout=widgets.Layout(margin="0 0 0 8px"))
        self.readout = widgets.HTML()
        self.readout.add_class(READOUT_CLASS)
        self.canvas = _canvas(figure)
        self._background: Any = None
        self._held = False  # Reset sets every control, then draws once
        self._redraw_due = False  # a drawing waits for the event loop's next turn
        self._loop = _running_loop()  # the loop that draws the figure (none in a script)
        self._thread = threading.get_ident()  # the thread it runs on
        self._limits = self._axes_limits()
        for artist in self.moving:
            artist.set_animated(True)
        self.canvas.mpl_connect("draw_event", self._keep_background)
        for widget in (self.canvas, self.canvas.toolbar):  # ipympl's handler of the page's 'draw'
            widget.on_msg(self.canvas._handle_message, remove=True)
            widget.on_msg(self.in_turn(self.canvas._handle_message))
        rows = rows if rows is not None else [[name] for name in self.controls]
        for name, control in self.controls.items():
            control.add_class(MAIN_CONTROL)
            control.add_class(f"ppo-control-{name.replace('_', '-')}")
            control.observe(self.in_turn(self._value_changed, latest=True), names="value")
        self._start = self.values()
        boxes = [[self.controls[name] for name in row] for row in rows]
        #: Sets every control back to its start; at the end of the last row (without rows,
        #: the app places it).
        self.reset_button = widgets.Button(description="Reset", tooltip="Back to the start")
        self.reset_button.layout.width = "auto"
        self.reset_button.add_class(RESET_CLASS)
        self.reset_button.on_click(self.in_turn(lambda _: self.reset()))
        if boxes:
            boxes[-1].append(self.reset_button)
        top = [widgets.HTML(style_tag()), *above, *(widgets.HBox(row) for row in boxes)]
        super().__init__([*top, self.message, self.readout, self.canvas, *below])
        self.add_class("ppo-app")
        self.refresh()  # the first refresh draws everything and keeps the background

    # -- redrawing ------------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        """Every control's value, by name: what ``update`` is called with."""
        return {name: control.value for name, control in self.controls.items()}

    def refresh(self) -> bool:
        """Call ``update`` with the controls' values and show the result; False on an InputError.

        For the figure's own thread (a control's change and :meth:`in_turn`'s callbacks run
        there): the drawing waits for the running event loop's next turn, or is done at once
        without one (a script, a test)."""
        try:
            for name, control in self.controls.items():
                refuse_unreachable_value(name, control)
            shown = self._update(**self.values())
        except InputError as error:
            self.message.value = str(message(str(error)))
            return False
        self.message.value = ""
        self.readout.value = str(shown) if shown is not None else ""
        loop = _running_loop()
        if loop is None:
            self._redraw()
        elif not self._redraw_due:
            self._redraw_due = True
            loop.call_soon(self._redraw_in_place)
        return True

    def _elsewhere(self) -> bool:
        """Whether this runs on another thread than the one whose event loop draws the figure
        (a kernel's subshell), while that loop is still there."""
        loop = self._loop
        return loop is not None and not loop.is_closed() and threading.get_ident() != self._thread

    def in_turn(self, act: Callable[..., Any], *, latest: bool = False) -> Callable[..., None]:
        """``act`` as a widget's callback: run at once on the figure's own thread (or without a
        loop), else handed to the figure's loop, so that it never runs beside a drawing.  With
        ``latest``, calls made while one waits there are that one (a subshell answers at once,
        so a drag's values arrive faster than they are drawn: a refresh for each lost frames)."""
        waiting = threading.Event()

        def in_its_turn(*args: Any) -> None:
            waiting.clear()
            act(*args)

        def run(*args: Any) -> None:
            if not self._elsewhere():
                act(*args)
            elif not waiting.is_set():
                if latest:
                    waiting.set()
                self._loop.call_soon_threadsafe(in_its_turn, *args)  # type: ignore[union-attr]

        return run

    def _value_changed(self, _change: Any) -> None:
        """A control moved: refresh (with every control's value then), unless Reset sets them."""
        if not self._held:
            self.refresh()

    def reset(self) -> None:
        """Set every control back to the value it started with, then draw once."""
        self._held = True
        try:
            for name, value in self._start.items():
                self.controls[name].value = value
        finally:
            self._held = False
        self.refresh()

    def redraw_axes(self, *axes: Axes) -> None:
        """Draw ``axes`` again whole, ticks and titles included, into the kept background, after
        an ``update`` changed their limits, ticks or labels and left the rest of the figure as
        it was (legends, colour bars and other axes, which are not drawn again).  They are drawn
        over the figure's background up to those other parts."""
        if self._background is None:
            return  # the next redraw draws everything
        area = self._free_area(axes)
        cover = Rectangle(area.p0, area.width, area.height, lw=0, color=self.figure.get_facecolor())
        cover.set(figure=self.figure, transform=IdentityTransform())
        self.canvas.restore_region(self._background)
        for artist in (cover, *axes):
            self.figure.draw_artist(artist)
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        self._limits = self._axes_limits()

    def _free_area(self, axes: Sequence[Axes]) -> Bbox:
        """The largest rectangle (in pixels) around ``axes`` clear of the figure's other axes,
        with their titles and tick labels, and legends (less a pixel for their antialiased
        edges): where their ticks and labels may lie."""
        inner = Bbox.union([ax.get_window_extent() for ax in axes])
        (x0, y0), (x1, y1) = self.figure.bbox.get_points()
        others = [ax.get_tightbbox() for ax in self.figure.axes if ax not in axes]
        for other in others + [legend.get_window_extent() for legend in self.figure.legends]:
            if other.y1 <= inner.y0:
                y0 = max(y0, other.y1 + 1)
            elif other.y0 >= inner.y1:
                y1 = min(y1, other.y0 - 1)
            elif other.x0 >= inner.x1:
                x1 = min(x1, other.x0 - 1)
            elif other.x1 <= inner.x0:
                x0 = max(x0, other.x1 + 1)
        return Bbox([[x0, y0], [x1, y1]])

    def _redraw_in_place(self) -> None:
        """The drawing :meth:`refresh` put off, unless a full drawing showed the latest values
        (ipympl's page shows only the last of two frames in a row); errors show in place."""
        if not self._redraw_due:
            return
        self._redraw_due = False  # first: a failed drawing must not stop the next ones
        try:
            self._redraw()
        except Exception as error:  # shown in place, as an InputError is
            said = f"Could not draw the figure ({type(error).__name__}: {error})."
            self.message.value = str(message(said))

    def _redraw(self) -> None:
        limits = self._axes_limits()
        if self._background is None or not np.array_equal(limits, self._limits):
            self._limits = limits
            self.canvas.draw()  # draws everything; _keep_background then keeps it
            return
        self.canvas.restore_region(self._background)
        self._draw_moving()
        self.canvas.blit(self.figure.bbox)

    def _keep_background(self, event: Any) -> None:
        """After a full draw (ours, a zoom, a resize): keep it, then draw the moving artists."""
        if event.canvas is not self.canvas or not all(a.get_animated() for a in self.moving):
            return  # savefig's drawing, for a picture or a slide
        if self.figure.get_layout_engine() is not None:
            self.figure.set_layout_engine("none")  # axes stay put from now on, as a blit needs
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        self._redraw_due = False  # before drawing them: a later update's drawing stays due
        self._draw_moving()

    def _draw_moving(self) -> None:
        for artist in self.moving:
            self.figure.draw_artist(artist)

    def _axes_limits(self) -> np.ndarray:
        """What a blit cannot show changing: each axes' limits."""
        return np.array([[*ax.get_xlim(), *ax.get_ylim()] for ax in self.figure.axes])

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Dim the figure while a slow computation runs (the browser sees it at once)."""
        self.canvas.add_class(BUSY_CLASS)
        try:
            yield
        finally:
            self.canvas.remove_class(BUSY_CLASS)

    # -- pictures ---------------------------------------------------------------------------

    def png(self) -> bytes:
        """The whole figure at the current settings, as PNG bytes, as on screen."""
        buffer = io.BytesIO()
        with self._everything_drawn():
            self.figure.savefig(buffer, format="png", dpi=screen_dpi())
        return buffer.getvalue()

    def save(self, stem: str | Path) -> tuple[Path, Path]:
        """Save the figure for a slide: ``<stem>.png`` (2000 pixels wide) and ``<stem>.svg``.

        The stem is kept as given (``slides/eps0.1`` writes ``slides/eps0.1.png``); a ``.png``
        or ``.svg`` at its end is dropped, and a ``~`` at its start is the home folder.
        Returns the two paths written.  A stem without a file name (``""``, ``"slides/"``,
        ``".png"``) raises ``ValueError`` before anything is written.
        """
        png, svg = slide_paths(stem)
        png.parent.mkdir(parents=True, exist_ok=True)
        dpi = SLIDE_WIDTH_PX / self.figure.get_figwidth()
        with self._everything_drawn():
            self.figure.savefig(png, dpi=dpi)
            self.figure.savefig(svg)
        self._redraw()  # the canvas holds the slide's pixels now: back to the screen's
        return png, svg

    @contextmanager
    def _everything_drawn(self) -> Iterator[None]:
        """Let ``savefig`` draw the moving artists too (it leaves animated artists out).

        savefig draws on the canvas's own buffer, so the next redraw starts afresh.
        """
        for artist in self.moving:
            artist.set_animated(False)
        try:
            yield
        finally:
            for artist in self.moving:
                artist.set_animated(True)
            self._background = None

    static_png = png  # a front end without widgets shows the figure at the current settings

    def static_html(self) -> str | None:
        """With a readout: the readout above the figure's picture, as wide as the page allows."""
        if not self.readout.value:
            return None
        source = "data:image/png;base64," + base64.b64encode(self.png()).decode("ascii")
        image = tag("img", src=source, alt=self.description, classes="ppo-figure-image")
        return str(page(Markup(self.readout.value), image))


def slide_paths(stem: str | os.PathLike[str]) -> tuple[Path, Path]:
    """The PNG and SVG paths :meth:`LiveFigure.save` writes for ``stem`` (see there)."""
    if not isinstance(stem, (str, os.PathLike)) or isinstance(os.fspath(stem), bytes):
        raise TypeError(f"stem must be a path such as 'slides/objective', got {stem!r}")
    path = Path(stem).expanduser()
    if path.suffix.lower() in (".png", ".svg"):
        path = path.with_suffix("")
    names_a_folder = str(stem).endswith(("/", os.sep)) or path.name in ("", ".", "..")
    if names_a_folder or path.name.lower() in (".png", ".svg"):
        raise ValueError(
            f"stem must end with a file name, such as 'slides/objective', got {str(stem)!r}"
        )
    return Path(f"{path}.png"), Path(f"{path}.svg")


def refuse_unreachable_value(name: str, control: widgets.Widget) -> None:
    """An :class:`InputError` if ``control`` holds a value none of its positions gives.

    Code can set a slider to NaN (a slider clamps any other number to its range) and a
    dropdown to ``None`` (nothing chosen); ``update`` is never called with either.
    """
    value, label = control.value, getattr(control, "description", "") or name
    if isinstance(value, float) and math.isnan(value):
        low, high = getattr(control, "min", None), getattr(control, "max", None)
        if low is not None and hasattr(control, "base"):  # a log slider: exponents
            low, high = control.base**low, control.base**high
        wanted = f"a number from {low:g} to {high:g}" if low is not None else "a number"
        problem = f"{label} is nan; it needs {wanted}"
    elif value is None and getattr(control, "options", None):
        problem = f"{label} has nothing chosen; choose one of its options"
    else:
        return
    raise InputError(f"{problem}. The figure still shows the last valid settings.")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _canvas(figure: Figure) -> Canvas:
    """ipympl's canvas widget for ``figure``, at the bundle's screen resolution, not resizable."""
    figure.set_dpi(screen_dpi())
    canvas = Canvas(figure)
    # ipympl keeps a copy of every frame as a data URL until the page's view starts, for
    # pages that embed widget state; this bundle shows its own picture there instead.
    canvas.syncing_data_url = False
    FigureManager(canvas, id(figure))
    canvas.header_visible = False
    canvas.footer_visible = False
    canvas.resizable = False
    canvas.toolbar_position = "right"
    canvas.add_class("ppo-figure")
    return canvas
