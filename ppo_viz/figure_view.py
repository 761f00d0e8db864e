"""A matplotlib figure shown as a PNG in the browser, redrawn in place.

Figures are plain :class:`matplotlib.figure.Figure` objects, never registered
with pyplot, so the inline backend never shows them a second time at the end
of a cell.  :meth:`FigureView.refresh` renders the figure and replaces the
PNG of an ``ipywidgets.Image`` (inside a box of class ``ppo-figure``) in one
update: the bytes travel as a binary message, not as base64 text, and the
browser keeps showing the previous image until the new one is decoded, so
redraws neither flicker nor move the page.

When the reader moves a control, the browser sends the new value and waits
for the kernel's answer before it sends the next one.  So a refresh asked for
while the kernel handles such a message waits until the kernel has answered:
the browser sends the next value while this one is drawn, and values that
arrive meanwhile are drawn together, once.  That keeps a dragged slider's
figure following the mouse; a change made in code is drawn at once.

Redraws are fast because only what changed is drawn again.  Matplotlib marks
an artist *stale* whenever one of its setters runs (``set_data``,
``set_text``, ``set_x``, ...).  Before each render the view collects the stale
artists; while they are ones it already redraws every time, it pastes the
cached rest of the figure and draws just those (blitting).  When something
else changed, or an axis' limits or the figure's size did, it draws the whole
figure once and adds the newcomers to the artists it redraws; an artist that
has not changed for a few renders goes back into the cached background.  No list of
"moving" artists is kept by hand, so an artist added to a figure can never be
left stale: at worst its first change costs one full draw.  Changing an
attribute directly (``annotation.xy = ...``) bypasses matplotlib's setters;
set ``artist.stale = True`` after it.
"""

from __future__ import annotations

import asyncio
import io
import struct
import zlib
from collections import deque
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.spines import Spine

from ppo_viz.style import SCREEN_DPI

#: Renders after which an artist that stopped changing leaves the redraw (see FigureView).
FORGET_AFTER = 8


def figure_to_png(figure: Figure, dpi: float = SCREEN_DPI) -> bytes:
    """The whole figure drawn afresh, as PNG bytes (Agg, no pyplot involved).

    Artists a :class:`FigureView` animates are drawn too (``savefig`` alone
    would leave out animated figure-level artists such as a legend), and
    which artists are stale is left as it was, so a view showing the figure
    still sees every change made before this call.
    """
    buffer = io.BytesIO()
    artists = list(_every_artist(figure))
    animated = [artist for artist in artists if artist.get_animated()]
    stale = [artist for artist in artists if artist.stale]
    for artist in animated:
        artist.set_animated(False)
    try:
        figure.savefig(buffer, format="png", dpi=dpi)
    finally:
        for artist in animated:
            artist.set_animated(True)
        for artist in artists:
            artist.stale = False
        for artist in stale:
            artist.stale = True
    return buffer.getvalue()


#: The figure box's class while the work for its next image runs (``style.css`` dims it).
BUSY_CLASS = "ppo-busy"


class FigureBox(widgets.VBox):
    """The box (class ``ppo-figure``) that shows a figure's PNG, through an ``Image`` widget.

    Laid out like the ``Output`` widget it replaces: the widgets' margin
    around the box, none around the image, which is never wider than the box
    nor stretched beyond its own size.
    """

    def __init__(self) -> None:
        self.image = widgets.Image(format="png", layout=widgets.Layout(margin="0"))
        layout = widgets.Layout(align_items="flex-start", margin="var(--jp-widgets-margin)")
        super().__init__([self.image], layout=layout)
        self.add_class("ppo-figure")


class FigureView:
    """One figure on the page (:attr:`output`); :meth:`refresh` after changing its artists."""

    def __init__(self, figure: Figure) -> None:
        self.figure = figure
        self.canvas = FigureCanvasAgg(figure)
        self.figure.set_dpi(SCREEN_DPI)
        #: The widget showing the figure.
        self.output = FigureBox()
        #: The PNG on screen (empty until the first refresh).
        self.png: bytes = b""
        self._refresh_waiting = False
        #: How many renders drew the whole figure, and how many only what moved.
        self.full_draws = 0
        self.blits = 0
        self._changing: list[Artist] = []  # artists seen changing: redrawn every time
        self._moving: list[Artist] = []  # those and whatever lies above them
        self._recent: deque[set[int]] = deque(maxlen=FORGET_AFTER)
        self._background: Any = None
        self._layout = np.zeros(0)

    def refresh(self) -> bytes:
        """Render the figure and show it in place of the previous image; return the PNG.

        While the kernel answers a message from the browser, the render waits
        until the answer is sent (see the module's docstring), and the PNG
        returned is the one still on screen.
        """
        if not answering_the_browser():
            return self._show_new_image()
        if not self._refresh_waiting:
            self._refresh_waiting = True
            asyncio.get_running_loop().call_soon(self._show_new_image)
        return self.png

    def _show_new_image(self) -> bytes:
        self._refresh_waiting = False
        self.png = self.render()
        self.output.image.value = self.png
        self.clear_busy()
        return self.png

    def show_busy(self) -> None:
        """Dim the image on screen until the next one replaces it (for work a reader waits on)."""
        self.output.add_class(BUSY_CLASS)

    def clear_busy(self) -> None:
        """Undo :meth:`show_busy` (the next image does it; an app whose draw failed calls it)."""
        self.output.remove_class(BUSY_CLASS)

    def render(self) -> bytes:
        """PNG bytes of the figure as it is now."""
        changed = list(stale_artists(self.figure))
        self._recent.append({id(artist) for artist in changed})
        layout = self._layout_key()
        if self._background is None:
            self._draw_everything(changing=[], layout=layout)
        elif not _same_layout(layout, self._layout):
            self._draw_everything(changing=changed, layout=layout)
        elif not _all_in(changed, self._moving):
            self._draw_everything(changing=_union(self._changing, changed), layout=layout)
        elif self._some_stopped_changing():
            still = set().union(*self._recent)
            changing = [artist for artist in self._changing if id(artist) in still]
            self._draw_everything(changing=changing, layout=layout)
        else:
            self.canvas.restore_region(self._background)
            self.blits += 1
        for artist in self._moving:
            self.figure.draw_artist(artist)
        return encode_png(self.canvas)

    def _some_stopped_changing(self) -> bool:
        """Whether an artist redrawn every time has not changed in the last renders.

        After :data:`FORGET_AFTER` renders without a change it goes back into
        the background (one full draw), so a control touched once does not
        slow every later redraw of another one.
        """
        if len(self._recent) < FORGET_AFTER:
            return False
        still = set().union(*self._recent)
        return any(id(artist) not in still for artist in self._changing)

    @property
    def moving(self) -> tuple[Artist, ...]:
        """The artists redrawn on every render, in drawing order."""
        return tuple(self._moving)

    def _draw_everything(self, changing: list[Artist], layout: np.ndarray) -> None:
        """Draw all but ``changing`` (and what lies above it) and keep it as the background."""
        for artist in self._moving:
            artist.set_animated(False)
        self._changing = changing
        self._moving = with_what_lies_above(self.figure, changing)
        self._recent.clear()
        for artist in self._moving:
            artist.set_animated(True)
        self.canvas.draw()
        for artist in _every_artist(self.figure):
            artist.stale = False  # some stay stale after drawing (an empty text, a legend's box)
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        self._layout = layout
        self.full_draws += 1

    def _layout_key(self) -> np.ndarray:
        """What a blit cannot show changing: the figure's size and each axes' limits and place."""
        numbers = [*self.figure.get_size_inches(), self.figure.dpi]
        for ax in self.figure.axes:
            numbers += [*ax.get_xlim(), *ax.get_ylim(), *ax.get_position().bounds]
            numbers.append(ax.get_visible())
        return np.array(numbers, dtype=float)


def answering_the_browser() -> bool:
    """Whether this runs in a kernel's event loop, handling a widget message from the browser."""
    try:
        asyncio.get_running_loop()
        from IPython import get_ipython
    except (RuntimeError, ImportError):
        return False
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None or not hasattr(kernel, "get_parent"):
        return False
    request = kernel.get_parent("shell") or {}
    return request.get("header", {}).get("msg_type") == "comm_msg"


def with_what_lies_above(figure: Figure, artists: list[Artist]) -> list[Artist]:
    """``artists`` and whatever is drawn above any of them, in the order matplotlib draws.

    Drawing a moving artist on top of a cached background would otherwise
    put it over things that a full draw puts over it (a line over a shaded
    band, a hatch over a spine).  So in each axes (and among the figure's own
    artists) everything from the lowest moving z-order up is redrawn, in
    z-order.  Ticks, tick labels and grid lines (the axes' Axis objects,
    drawn low, as ``axes.axisbelow`` is set) are redrawn only above an
    artist that moves below them, such as an image at z-order 0: giving
    such an artist a z-order above 0.5 keeps redraws fast.  An axes' titles
    stay in the background when nothing redrawn in that axes can reach them
    (:func:`_titles_apart`).
    """
    ids = {id(artist) for artist in artists}
    layers = [(_stacked(ax.get_children(), ax.patch), ax) for ax in figure.axes]
    layers.append((_stacked(figure.get_children(), figure.patch), None))
    ordered: list[Artist] = []
    for layer, ax in layers:
        moving = [artist for artist in layer if id(artist) in ids]
        if not moving:
            continue
        lowest = min(artist.get_zorder() for artist in moving)
        redrawn = [artist for artist in layer if artist.get_zorder() >= lowest]
        apart = _titles_apart(ax, redrawn) if ax is not None else set()
        ordered.extend(artist for artist in redrawn if id(artist) in ids or id(artist) not in apart)
    return ordered


def _titles_apart(ax: Axes, redrawn: list[Artist]) -> set[int]:
    """The ids of ``ax``'s titles that nothing else in ``redrawn`` can paint over.

    A title (drawn above lines by its z-order) sits above the axes box.  When
    every other artist redrawn in the axes is clipped to that box (or is a
    spine, on its edge), none can reach a title that lies wholly outside it,
    now or after a later change, so the title can stay in the cached
    background: redrawing text is the costliest part of a blit.
    """
    titles = (ax.title, ax._left_title, ax._right_title)  # matplotlib's three title slots
    others = [artist for artist in redrawn if all(artist is not title for title in titles)]
    if not all(isinstance(artist, Spine) or _clipped_to_box(artist, ax) for artist in others):
        return set()
    renderer = ax.figure.canvas.get_renderer()
    return {
        id(title)
        for title in titles
        if title.get_window_extent(renderer).y0 >= ax.bbox.y1 + 1  # a pixel clear of the box
    }


def _clipped_to_box(artist: Artist, ax: Axes) -> bool:
    box = artist.get_clip_box()
    return artist.get_clip_on() and box is not None and np.allclose(box.bounds, ax.bbox.bounds)


def _stacked(children: list[Artist], background: Artist) -> list[Artist]:
    """``children`` as matplotlib stacks them (stable by z-order), without axes and patch."""
    drawable = [child for child in children if child is not background]
    drawable = [child for child in drawable if not isinstance(child, Axes)]
    return sorted(drawable, key=lambda child: child.get_zorder())


def _same_layout(now: np.ndarray, before: np.ndarray) -> bool:
    """Equal up to rounding: constrained layout moves axes by ~1e-16 between draws."""
    return now.shape == before.shape and bool(np.allclose(now, before, rtol=1e-9, atol=1e-9))


def stale_artists(figure: Figure) -> Iterator[Artist]:
    """The figure's and each axes' direct children that changed since they were last drawn.

    A child counts as changed when it or anything inside it (a legend's
    texts, an annotation's arrow) is stale.  Axis objects (ticks and their
    labels) are skipped: they change only with the limits, which
    :class:`FigureView` watches itself.
    """
    for child in figure.get_children():
        if isinstance(child, Axes):
            yield from (c for c in child.get_children() if _changed(c))
        elif child is not figure.patch and _changed(child):
            yield child


def _every_artist(figure: Figure) -> Iterator[Artist]:
    """Every artist of ``figure`` that :func:`stale_artists` looks at, containers included."""
    pending: list[Artist] = [figure]
    while pending:
        artist = pending.pop()
        yield artist
        if not isinstance(artist, Axis):
            pending.extend(artist.get_children())


def _changed(artist: Artist) -> bool:
    if isinstance(artist, Axis):
        return False
    return artist.stale or any(_changed(child) for child in artist.get_children())


def _all_in(artists: list[Artist], known: list[Artist]) -> bool:
    ids = {id(artist) for artist in known}
    return all(id(artist) in ids for artist in artists)


def _union(first: list[Artist], second: list[Artist]) -> list[Artist]:
    ids = {id(artist) for artist in first}
    return first + [artist for artist in second if id(artist) not in ids]


def encode_png(canvas: FigureCanvasAgg) -> bytes:
    """PNG bytes (8-bit RGBA, as Agg holds them) of what ``canvas`` holds now.

    Written directly, with no row filters and zlib at level 3: these figures
    are mostly flat colour, and this takes less than half the time of
    Pillow's encoder.  The pixels go in as RGBA, like ``savefig`` writes them:
    dropping the alpha byte first costs a strided copy of every pixel (a third
    of the encoding time), and zlib's level 3 squeezes the constant alpha out
    again, so the PNG is about as small as an RGB one at level 1.
    """
    rgba = np.asarray(canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    rows = np.empty((height, 1 + 4 * width), dtype=np.uint8)  # each row: filter byte 0, RGBA
    rows[:, 0] = 0
    rows[:, 1:] = rgba.reshape(height, 4 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", zlib.compress(rows, 3)),
            _png_chunk(b"IEND", b""),
        )
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    checksum = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", checksum)
