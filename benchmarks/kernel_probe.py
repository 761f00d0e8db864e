"""Loaded into each kernel of the browser benchmark: where the kernel's time goes.

:func:`install` wraps the kernel's handling of widget (comm) messages and
:meth:`ppo_viz.figure_view.FigureView.render`, and writes one JSON line per
message handled and per figure rendered to a log file.  Every record has

* ``kind``: ``"message"`` or ``"render"``;
* ``start`` / ``end``: wall-clock seconds (``time.time()``), comparable with the
  browser's ``performance.timeOrigin + performance.now()``;
* ``cpu``: CPU seconds the kernel's thread spent (less than ``end - start`` when
  other processes had the cores).

A message also has ``state``, the values it set (``{"value": 0.25}``).  A render
also has ``encode`` (seconds encoding the PNG), ``png_bytes``, ``moving`` (how
many artists the view redraws every time) and ``full_draws`` (1 when it drew the
whole figure rather than only what moved).

The browser benchmark puts a startup file into the kernel's IPython profile
that calls :func:`install` (see :mod:`benchmarks.browser`); nothing here runs
in an ordinary kernel.  The wrappers only read clocks and write a line.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def install(log_path: str | Path) -> None:
    """Log every widget message and figure render of this kernel to ``log_path``."""
    from comm.base_comm import BaseComm

    from ppo_viz import figure_view

    log = Path(log_path)
    render: dict[str, Any] = {}

    def logged(func: Callable[..., Any], describe: Callable[..., dict[str, Any]]) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record = {"start": time.time()}
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

    def describe_message(args: tuple[Any, ...], _result: Any) -> dict[str, Any]:
        data = args[1].get("content", {}).get("data", {})
        return {"kind": "message", "state": _plain(data.get("state", {}))}

    def describe_render(args: tuple[Any, ...], png: bytes | None) -> dict[str, Any]:
        moving = len(args[0].moving)
        parts = {"kind": "render", "png_bytes": len(png or b""), "moving": moving, **render}
        render.clear()
        return parts

    def timed_encode(func: Callable[..., bytes]) -> Callable[..., bytes]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> bytes:
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                render["encode"] = render.get("encode", 0.0) + time.perf_counter() - started

        return wrapper

    def counted_full_draw(func: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            render["full_draws"] = render.get("full_draws", 0) + 1
            func(*args, **kwargs)

        return wrapper

    view = figure_view.FigureView
    view.render = logged(view.render, describe_render)
    view._draw_everything = counted_full_draw(view._draw_everything)
    figure_view.encode_png = timed_encode(figure_view.encode_png)
    BaseComm.handle_msg = logged(BaseComm.handle_msg, describe_message)


def _plain(state: dict[str, Any]) -> dict[str, Any]:
    """The JSON-friendly part of a message's state (binary buffers are left out)."""
    return {key: value for key, value in state.items() if isinstance(value, (int, float, str))}
