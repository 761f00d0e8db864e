"""How long each live figure takes from a control's new value to the frame sent to the page.

Every :class:`ppo_viz.app.LiveFigure` subclass in ``ppo_viz`` that can be built without
arguments (``tests/helpers.py``'s ``live_figure_classes``, the one list ``tests/test_app.py``
checks too) is built with its defaults.  Each of its controls (``app.controls``) is set to
``values`` values spread over its range, one after another, and each assignment is timed:
ipywidgets calls the app's observer synchronously, so when the assignment returns the app has
run ``update``, blitted its moving artists (or drawn everything, when an axis' limits changed)
and ipympl has encoded the PNG of the changed pixels it sends to the page
(``Canvas.get_diff_image``; checked: every setting must yield one, else the row says so).

The same sweep is then repeated with every redraw drawing the whole figure, the path ipympl's
``draw_idle`` takes (it asks the page to request a draw, and ``handle_draw`` then calls
``canvas.draw()``, which renders everything and sends the diff image: matplotlib 3.11's
``backend_webagg_core.py``, which ipympl 0.10's canvas inherits), without the browser's round
trip: the ratio of the two medians of what follows the app's ``update`` is what blitting saves
in the kernel.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tables import Table, milliseconds, verdict

TESTS = Path(__file__).resolve().parent.parent / "tests"
#: Target from issue 9: median redraw, setting a control to the frame sent.
REDRAW_TARGET_S = 0.060
#: Apps whose controls rerun a computation, and their own target (issue 30: notebook 4's
#: bandit explorer trains six methods on 20 seeds per setting).
COMPUTING_APP_TARGETS_S = {"ppo_viz.why_clip.apps.BanditLoopExplorer": 0.250}


def redraw_target(app: str) -> float:
    """The median redraw an app's controls must meet (seconds)."""
    return COMPUTING_APP_TARGETS_S.get(app, REDRAW_TARGET_S)


@dataclass
class ControlResult:
    """One control's sweep: seconds per setting, and the parts of each."""

    app: str
    control: str
    seconds: list[float] = field(default_factory=list)
    #: Per setting: seconds in the app's ``update`` (its computation, artists, readout).
    update: list[float] = field(default_factory=list)
    #: Per setting: seconds ipympl spent encoding the frame's PNG.
    encode: list[float] = field(default_factory=list)
    without_frame: int = 0
    full_draws: int = 0
    refused: int = 0
    problem: str = ""
    #: Per setting: seconds for the same setting with the whole figure drawn (draw_idle's
    #: path), without the app's ``update``.
    whole: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


def live_figure_classes() -> list[type]:
    """Every LiveFigure subclass in ppo_viz built without arguments (``tests/helpers.py``)."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from helpers import live_figure_classes as classes

    return classes()


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _candidate_values(control: Any, count: int) -> list[Any] | None:
    """``count`` evenly spread settings over the control's range, or None if unsupported."""
    if hasattr(control, "_options_values"):  # SelectionSlider, Dropdown, ToggleButtons...
        options = list(control._options_values)
        if not options or isinstance(control.value, tuple):
            return None
        picks = np.linspace(0, len(options) - 1, count).round().astype(int)
        return [options[i] for i in picks]
    if isinstance(control.value, bool):
        return [i % 2 == 0 for i in range(count)]
    if isinstance(control.value, int) and not hasattr(control, "max"):
        return [control.value + step for step in range(1, count + 1)]  # e.g. a seed box
    if not all(hasattr(control, attr) for attr in ("min", "max")):
        return None
    if isinstance(control.value, tuple):
        return None  # range sliders: no app has one
    low, high = float(control.min), float(control.max)
    base = getattr(control, "base", None)
    spread = np.linspace(low, high, count)
    step = getattr(control, "step", None)
    if step:
        spread = np.clip(low + np.round((spread - low) / step) * step, low, high)
    if base is not None:  # FloatLogSlider: min and max are exponents
        return [float(base**e) for e in spread]
    if isinstance(control.value, int):
        return [int(v) for v in spread]
    return [float(v) for v in spread]


def value_sequence(control: Any, count: int) -> list[Any] | None:
    """``count`` settings across the range, each different from the one before.

    A control with fewer than ``count`` distinct settings is swept up and down
    its range (an assignment to the current value would not redraw).
    """
    candidates = _candidate_values(control, count)
    if candidates is None:
        return None
    distinct = list(dict.fromkeys(candidates))
    if len(distinct) < 2:
        return None
    zigzag = itertools.cycle(distinct + distinct[-2:0:-1])
    values, previous = [], control.value
    while len(values) < count:
        value = next(zigzag)
        if value != previous:
            values.append(value)
            previous = value
    return values


class _Stopwatch:
    """Adds up the time spent in a wrapped callable, and counts its calls and results."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.results: list[Any] = []

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = func(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1
            self.results.append(result)
            return result

        return timed

    def reset(self) -> None:
        self.seconds, self.calls, self.results = 0.0, 0, []


def time_control(
    app_name: str, app: Any, name: str, count: int, whole: bool = False
) -> ControlResult:
    """Set ``app.controls[name]`` to ``count`` values in turn, timing each and its parts.

    ``whole``: draw the whole figure on every setting instead of blitting.
    """
    control = app.controls[name]
    result = ControlResult(app_name, f"{name} ({type(control).__name__})")
    values = value_sequence(control, count)
    if values is None:
        result.problem = f"cannot sweep a {type(control).__name__} with value {control.value!r}"
        return result
    update, encode, draws = _Stopwatch(), _Stopwatch(), _Stopwatch()
    app_update = app._update
    app._update = update.wrap(app_update)
    # Instance attributes shadow the canvas's methods that ipympl calls, for this sweep only.
    app.canvas.get_diff_image = encode.wrap(app.canvas.get_diff_image)
    app.canvas.draw = draws.wrap(app.canvas.draw)
    if whole:
        app._redraw = app.canvas.draw
    original = control.value
    gc.collect()
    try:
        for value in values:
            for watch in (update, encode, draws):
                watch.reset()
            message = app.message.value
            started = time.perf_counter()
            control.value = value
            result.seconds.append(time.perf_counter() - started)
            result.update.append(update.seconds)
            result.encode.append(encode.seconds)
            result.full_draws += draws.calls > 0
            result.refused += app.message.value != message and bool(app.message.value)
            if not any(png for png in encode.results):
                result.without_frame += 1
        control.value = original
    finally:
        app._update = app_update
        del app.canvas.get_diff_image, app.canvas.draw
        if whole:
            del app._redraw
    return result


def measure(
    values: int, only: str = ""
) -> tuple[list[ControlResult], list[tuple[str, str]], dict[str, float]]:
    """Redraw timings per control, apps that could not be timed, and construction times.

    ``only``: time just the apps whose qualified name contains this text.
    """
    results: list[ControlResult] = []
    untimed: list[tuple[str, str]] = []
    built: dict[str, float] = {}
    for cls in live_figure_classes():
        name = qualified_name(cls)
        if only not in name:
            continue
        started = time.perf_counter()
        try:
            app = cls()
        except Exception as error:
            detail = traceback.format_exception_only(type(error), error)[-1].strip()
            untimed.append((name, f"could not be built with no arguments: {detail}"))
            continue
        built[name] = time.perf_counter() - started
        for control in app.controls:
            try:
                result = time_control(name, app, control, values)
                if not result.problem:
                    whole = time_control(name, app, control, values, whole=True)
                    result.whole = _redraws(whole)
                results.append(result)
            except Exception as error:
                detail = traceback.format_exception_only(type(error), error)[-1].strip()
                results.append(ControlResult(name, control, problem=detail))
    return results, untimed, built


def table(
    results: list[ControlResult],
    untimed: list[tuple[str, str]],
    built: dict[str, float],
    values: int,
) -> Table:
    out = Table(
        "Figure redraws: setting a control's value to the frame sent to the page (ms)",
        [
            "app",
            "control",
            "values",
            "median ms",
            "worst ms",
            "median split: update / blit / PNG ms",
            "full draws",
            "new frame each time",
            f"median <= {REDRAW_TARGET_S * 1e3:.0f} ms (computing apps: their own target)",
            "redraw drawn whole (draw_idle's path): median ms",
            "blit saves",
        ],
    )
    for result in results:
        if result.problem:
            out.add(result.app, result.control, 0, *["n/a"] * 5, result.problem, "n/a", "n/a")
            continue
        n = len(result.seconds)
        out.add(
            result.app,
            result.control,
            n,
            milliseconds(result.median),
            milliseconds(result.worst),
            _split(result),
            result.full_draws,
            f"{n - result.without_frame}/{n}"
            + (f" ({result.refused} refused)" if result.refused else ""),
            verdict(result.median <= redraw_target(result.app)),
            *_whole_columns(result),
        )
    for name, problem in untimed:
        out.add(name, "—", 0, *["n/a"] * 5, f"not timed: {problem}", "n/a", "n/a")
    if built:
        described = ", ".join(f"{name} {milliseconds(s)} ms" for name, s in built.items())
        out.notes.append(f"Building each app with its defaults (first draw included): {described}.")
    out.notes.append(
        f"In-process, each control swept over {values} values spread across its range "
        "(a control with fewer settings goes up and down it); the other controls stay at "
        "their defaults. The split: the app's update (ppo_clip, artists' data, readout) / "
        "restoring the kept background and drawing the moving artists (LiveFigure's blit) / "
        "ipympl encoding the PNG of the changed pixels; medians of each part, so they need not "
        "add up to the median total. Full draws: settings that drew the whole figure (an axis' "
        "limits changed). Refused: settings the app declined with a message. Apps are every "
        "ppo_viz.app.LiveFigure subclass built without arguments. Redraw drawn whole: the same "
        "sweep again, each setting drawing the whole figure as ipympl's draw_idle does (without "
        "the browser's round trip that draw_idle adds), the app's update left out; blit saves: "
        "that median over the blitted sweep's, also without the update."
    )
    return out


def _redraws(result: ControlResult) -> list[float]:
    """Seconds per setting after the app's ``update``: the redraw and the frame's PNG."""
    return [total - update for total, update in zip(result.seconds, result.update, strict=True)]


def _whole_columns(result: ControlResult) -> tuple[str, str]:
    """The whole-figure sweep's median redraw and its ratio to the blitted sweep's.

    Both leave out the app's ``update``, which is the same work either way (and cached by
    some apps by the time the second sweep runs).
    """
    if not result.whole:
        return "n/a", "n/a"
    whole, blitted = statistics.median(result.whole), statistics.median(_redraws(result))
    return milliseconds(whole), f"{whole / blitted:.1f}x"


def _split(result: ControlResult) -> str:
    """Medians of: the app's update, the blit (the rest of the redraw), the PNG encoding."""
    blit = [redraw - png for redraw, png in zip(_redraws(result), result.encode, strict=True)]
    parts = [statistics.median(result.update), statistics.median(blit)]
    parts.append(statistics.median(result.encode))
    return " / ".join(milliseconds(part) for part in parts)


def target_rows(results: list[ControlResult]) -> list[tuple[str, str, bool]]:
    rows = []
    for result in results:
        app = result.app.removeprefix("ppo_viz.")
        if result.problem:
            rows.append((f"{app} {result.control}: redraw", result.problem, False))
            continue
        target = redraw_target(result.app)
        rows.append(
            (
                f"{app} {result.control}: median redraw <= {target * 1e3:.0f} ms",
                f"{milliseconds(result.median)} ms (worst {milliseconds(result.worst)})",
                result.median <= target,
            )
        )
    return rows
