"""Loaded into each kernel of the browser benchmark: where the kernel's time goes.

:func:`install` wraps the kernel's handling of widget (comm) messages and the figures' redraws,
and writes one JSON line per message handled and per redraw to a log file.  Every record has

* ``kind``: ``"message"`` or ``"render"``;
* ``start`` / ``end``: wall-clock seconds (``time.time()``), comparable with the browser's
  ``performance.timeOrigin + performance.now()``;
* ``cpu``: CPU seconds the kernel's thread spent (less than ``end - start`` when other
  processes had the cores).

A message also has ``state``, the values it set (``{"value": 0.25}``).  A render is the part of
an app's refresh that draws and encodes the picture, after the app's own work: today
:meth:`ppo_viz.app.LiveFigure._redraw` (blitting the moving artists, or a full draw, then
ipympl's PNG of the changed pixels, ``Canvas.get_diff_image``), at earlier revisions
``ppo_viz.figure_view.FigureView.render``.  It also has ``encode`` (seconds making the PNG),
``png_bytes``, ``moving`` (how many artists are redrawn each time) and ``full_draws`` (how
many times the whole figure was drawn).

The browser benchmark puts a startup file into the kernel's IPython profile that calls
:func:`install` (see :mod:`benchmarks.browser`); nothing here runs in an ordinary kernel.  The
figure code is wrapped when the first widget message arrives, whichever ``ppo_viz`` the
notebook imported (today's, or a baseline revision's); the wrappers only read clocks and
write a line.
"""

from __future__ import annotations

import functools
import gc
import json
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Describe = Callable[[tuple[Any, ...], Any], dict[str, Any]]


def install(log_path: str | Path) -> None:
    """Log every widget message and figure redraw of this kernel to ``log_path``."""
    from comm.base_comm import BaseComm

    log = Path(log_path)
    parts: dict[str, Any] = {}  # filled by the encoder and the full draws of one render

    def logged(func: Callable[..., Any], describe: Describe) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record: dict[str, Any] = {"start": time.time()}
            cpu = time.thread_time()
            result = None
            try:
                result = func(*args, **kwargs)
                return result
            finally:
                record.update(end=time.time(), cpu=time.thread_time() - cpu)
                record.update(describe(args, result))
                with log.open("a", encoding="utf-8") as lines:
                    lines.write(json.dumps(record) + "\n")

        return wrapper

    def timed_encoder(func: Callable[..., bytes | None]) -> Callable[..., bytes | None]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> bytes | None:
            started = time.perf_counter()
            png = func(*args, **kwargs)
            parts["encode"] = parts.get("encode", 0.0) + time.perf_counter() - started
            parts["png_bytes"] = parts.get("png_bytes", 0) + len(png or b"")
            return png

        return wrapper

    def counted(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            parts["full_draws"] = parts.get("full_draws", 0) + 1
            return func(*args, **kwargs)

        return wrapper

    def fresh(func: Callable[..., Any]) -> Callable[..., Any]:
        """``func``, forgetting parts recorded outside a render (e.g. a resize's picture)."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            parts.clear()
            return func(*args, **kwargs)

        return wrapper

    def describe_render(args: tuple[Any, ...], _result: Any) -> dict[str, Any]:
        record = {"kind": "render", "moving": len(args[0].moving), **parts}
        parts.clear()
        return record

    def wrap_figures() -> None:
        """Wrap the redraw of whichever figure layer this kernel imported, once."""
        if "ppo_viz.app" in sys.modules and hasattr(sys.modules["ppo_viz.app"], "LiveFigure"):
            from ipympl.backend_nbagg import Canvas

            live = sys.modules["ppo_viz.app"].LiveFigure
            live._redraw = logged(fresh(live._redraw), describe_render)
            Canvas.get_diff_image = timed_encoder(Canvas.get_diff_image)
            Canvas.draw = counted(Canvas.draw)
        elif "ppo_viz.figure_view" in sys.modules:
            figure_view = sys.modules["ppo_viz.figure_view"]
            view = figure_view.FigureView
            view.render = logged(fresh(view.render), describe_render)
            view._draw_everything = counted(view._draw_everything)
            figure_view.encode_png = timed_encoder(figure_view.encode_png)
        else:
            return
        wrapped.append(True)

    wrapped: list[bool] = []
    handle_msg = logged(BaseComm.handle_msg, describe_message)

    @functools.wraps(BaseComm.handle_msg)
    def handle_message(*args: Any, **kwargs: Any) -> Any:
        if not wrapped:
            wrap_figures()
        return handle_msg(*args, **kwargs)

    BaseComm.handle_msg = handle_message


def describe_message(args: tuple[Any, ...], _result: Any) -> dict[str, Any]:
    """A widget message's record: the values it set."""
    data = args[1].get("content", {}).get("data", {})
    return {"kind": "message", "state": _plain(data.get("state", {}))}


def _plain(state: dict[str, Any]) -> dict[str, Any]:
    """The JSON-friendly part of a message's state (binary buffers are left out)."""
    return {key: value for key, value in state.items() if isinstance(value, (int, float, str))}


#: Each cache of the code measured and how many values it had computed at the last call.
_cache_misses: dict[Any, int] = {}


def forget_new_caches() -> int:
    """Empty every ``functools`` cache of the code measured that computed a value since the last
    call (its misses grew, whether or not it is full), note every such cache's count, and say
    how many were emptied (none at a kernel's first call, which only notes).

    The code measured is every module outside Python's standard library and installed packages
    (``site-packages``, ``dist-packages``): the side's ``ppo_viz`` and ``ppo_clip``, the
    notebooks' folders.  Called before each drag, a drag back over the values of the one before
    computes them again, as the first did.  A cache that computed nothing since stays whole
    (what an app computed when it was built and only reads since), as do the libraries' (such
    as matplotlib's font and text caches); one that did is emptied whole.
    """
    library = {Path(sysconfig.get_paths()[name]).resolve() for name in ("stdlib", "platstdlib")}
    emptied = 0
    for candidate in gc.get_objects():
        if not (callable(candidate) and hasattr(candidate, "cache_info")):
            continue
        module = sys.modules.get(getattr(candidate, "__module__", None) or "")
        source = getattr(module, "__file__", None)
        if source is None or {"site-packages", "dist-packages"} & set(Path(source).parts):
            continue
        if any(Path(source).resolve().is_relative_to(folder) for folder in library):
            continue
        misses = candidate.cache_info().misses
        if misses > _cache_misses.get(candidate, misses):
            candidate.cache_clear()
            emptied += 1
        _cache_misses[candidate] = candidate.cache_info().misses
    return emptied
