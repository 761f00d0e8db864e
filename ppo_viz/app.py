"""One way to build an interactive figure: :class:`App`.

An app is controls above a figure, with readouts and messages in HTML.  A
subclass says how to build its figure (:meth:`App.make_plot`) and how to
move it to the controls' current values (:meth:`App.draw`); the base class
does the rest:

* lays the controls, the message line, the readouts and the figure out in one
  ``VBox`` (:attr:`App.widget`), with the bundle's stylesheet;
* redraws on every change of a control, through :class:`FigureView`, without
  flicker; an :class:`InputError` raised while drawing is shown as a readable
  message in place and the last good figure stays on screen;
* displays itself as the live widget where widgets run and as a PNG (and
  HTML readouts) at the current settings where they do not: GitHub's
  preview, nbconvert's HTML, the course-site export;
* saves the current figure for a slide: :meth:`App.save`.

A minimal app::

    class Curve(App):
        description = "r·A against the ratio"

        def __init__(self):
            self.advantage = slider("A", 1.0, (-2.0, 2.0), 0.25, name="advantage")
            super().__init__(controls=[self.advantage])

        def make_plot(self, slides):
            return SimplePlot(...)          # anything with a ``figure`` attribute

        def draw(self, plot):
            plot.line.set_ydata(...)        # from ppo_clip, never re-derived here
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ppo_viz.figure_view import FigureView, figure_to_png
from ppo_viz.html import Markup, message, page, style_tag, tag
from ppo_viz.style import SLIDE_DPI

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
#: The class of every main control (the benchmarks and browser tests move these).
MAIN_CONTROL = "ppo-main-control"


class InputError(ValueError):
    """A setting or an entry an app cannot use; ``str(error)`` is written for the reader."""


class Plot(Protocol):
    """What :meth:`App.make_plot` returns: any object holding a matplotlib figure."""

    figure: Figure


@dataclass(frozen=True)
class Fallback:
    """What a front end without widgets shows instead of an app."""

    png: bytes | None = None
    html: str | None = None


class WidgetDisplay:
    """Displays :attr:`widget` where widgets run and :meth:`static_fallback` elsewhere."""

    widget: widgets.Widget
    #: One line saying what the widget shows (the plain-text fallback uses it).
    description = "Interactive figure"

    def static_fallback(self) -> Fallback:
        """What to show without a kernel: a PNG, HTML, or both."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        fallback = self.static_fallback()
        bundle: dict[str, Any] = {
            WIDGET_VIEW_MIME: {
                "version_major": 2,
                "version_minor": 0,
                "model_id": self.widget.model_id,
            },
            "text/plain": f"{self.description} (open in JupyterLab with a running kernel "
            "to use the controls)",
        }
        if fallback.png is not None:
            bundle["image/png"] = base64.b64encode(fallback.png).decode("ascii")
        if fallback.html is not None:
            bundle["text/html"] = str(fallback.html)
        return bundle


class App(WidgetDisplay):
    """Controls, a figure redrawn in place, readouts, a static fallback and :meth:`save`.

    Subclasses create their control widgets, then call ``super().__init__``
    with them, and implement :meth:`make_plot` and :meth:`draw` (and
    :meth:`update_readouts` if they have readouts).
    """

    #: The file name :meth:`save` uses when none is given.
    slide_name = "ppo_figure"

    def __init__(
        self,
        controls: Sequence[widgets.Widget | Sequence[widgets.Widget]],
        *,
        readouts: Sequence[widgets.Widget] = (),
        above: Sequence[widgets.Widget] = (),
        below: Sequence[widgets.Widget] = (),
    ) -> None:
        """Lay the app out and draw it.

        ``controls`` are laid out one row each (a sequence is one row of
        several); a change of any control's ``value`` redraws.  ``above``
        goes above the controls, ``readouts`` between the controls and the
        figure, ``below`` under the figure.
        """
        self.plot = self.make_plot(slides=False)
        self.view = FigureView(self.plot.figure)
        self.readouts = tuple(readouts)
        self.message = widgets.HTML()
        self.message.add_class("ppo-app-message")
        rows = [widgets.HBox(list(row)) if isinstance(row, Sequence) else row for row in controls]
        self.widget = widgets.VBox(
            [
                widgets.HTML(style_tag()),
                *above,
                *rows,
                self.message,
                *self.readouts,
                self.view.output,
                *below,
            ]
        )
        self.widget.add_class("ppo-app")
        for control in _each(controls):
            if hasattr(control, "value"):
                control.observe(self._on_change, names="value")
        self.redraw()
        # A second, identical redraw shows the view which artists a redraw
        # changes, so that the reader's first move is already fast.
        self.redraw()

    def _on_change(self, _change: Any = None) -> None:
        self.redraw()

    def make_plot(self, slides: bool) -> Plot:
        """A new figure for this app: screen-sized, or slide-sized with larger type."""
        raise NotImplementedError

    def draw(self, plot: Plot) -> None:
        """Move ``plot`` to the controls' current values.

        Read and check every setting first, raising :class:`InputError` for
        one that cannot be used, and only then change artists.
        """
        raise NotImplementedError

    def update_readouts(self) -> None:
        """Write the readouts for the current values (none by default)."""

    def redraw(self) -> bool:
        """Draw the current settings; on an :class:`InputError` show it and keep the figure.

        Returns whether the figure was redrawn.
        """
        try:
            self.draw(self.plot)
        except InputError as error:
            self.view.clear_busy()
            self.show_message(str(error), "error")
            return False
        self.update_readouts()
        self.message.value = ""
        self.view.refresh()
        return True

    def show_message(self, text: str, kind: str = "error") -> None:
        """Show ``text`` on the app's message line (empty text clears it)."""
        self.message.value = str(message(text, kind)) if text else ""  # type: ignore[arg-type]

    def save(self, stem: str | Path | None = None) -> tuple[Path, Path]:
        """Save the current settings as a slide: ``<stem>.png`` and ``<stem>.svg``.

        The slide is drawn afresh on a 16:9 canvas with larger type; the PNG
        is 2000 pixels wide.  Returns the two paths written.
        """
        plot = self.make_plot(slides=True)
        self.draw(plot)
        stem = Path(stem if stem is not None else self.slide_name)
        stem.parent.mkdir(parents=True, exist_ok=True)
        png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
        plot.figure.savefig(png, dpi=SLIDE_DPI)
        plot.figure.savefig(svg)
        return png, svg

    def readouts_html(self) -> Markup:
        """The readouts' current HTML, one after another."""
        return Markup("").join(
            Markup(w.value) for w in self.readouts if isinstance(w, widgets.HTML)
        )

    def static_fallback(self) -> Fallback:
        """The figure's PNG; with readouts, also an HTML page of the readouts above it."""
        png = self.view.png or figure_to_png(self.plot.figure)
        readouts = self.readouts_html()
        if not readouts:
            return Fallback(png=png)
        return Fallback(png=png, html=page(readouts, image_tag(png, self.description)))


def image_tag(png: bytes, alt: str) -> Markup:
    """``<img>`` with ``png`` inline, as wide as the page allows."""
    source = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return tag("img", src=source, alt=alt, classes="ppo-figure-image")


def main_control(control: widgets.Widget, name: str) -> widgets.Widget:
    """Mark ``control`` as a main control named ``name`` (CSS classes for tests and benchmarks)."""
    control.add_class(MAIN_CONTROL)
    control.add_class(f"ppo-control-{name}")
    return control


_CONTROL_STYLE = {"description_width": "140px"}
_CONTROL_WIDTH = "430px"


def slider(
    description: str,
    value: float,
    bounds: tuple[float, float],
    step: float,
    *,
    name: str,
    integer: bool = False,
    readout_format: str = ".2f",
    **options: Any,
) -> widgets.FloatSlider | widgets.IntSlider:
    """A main-control slider with the bundle's layout, updating while it is dragged."""
    cls = widgets.IntSlider if integer else widgets.FloatSlider
    if not integer:
        options["readout_format"] = readout_format
    control = cls(
        value=value,
        min=bounds[0],
        max=bounds[1],
        step=step,
        description=description,
        continuous_update=True,
        style=_CONTROL_STYLE,
        layout=widgets.Layout(width=_CONTROL_WIDTH),
        **options,
    )
    return main_control(control, name)


def control_layout() -> dict[str, Any]:
    """The ``style`` and ``layout`` keywords every other control of an app uses."""
    return {"style": _CONTROL_STYLE, "layout": widgets.Layout(width=_CONTROL_WIDTH)}


def _each(controls: Iterable[Any]) -> Iterable[widgets.Widget]:
    for item in controls:
        if isinstance(item, Sequence):
            yield from _each(item)
        else:
            yield item


def checked_number(
    name: str, value: object, bounds: tuple[float, float], *, whole: bool = False
) -> float:
    """``value`` if it is a real number within ``bounds``, else an error naming ``name``.

    For an app's constructor: a slider would silently clamp an out-of-range
    start value instead.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    low, high = bounds
    if not low <= value <= high:  # also refuses NaN
        raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")
    if whole and value != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return value


def checked_flag(name: str, value: object) -> bool:
    """``value`` if it is a bool, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)
