"""How long each interactive figure takes from a control's new value to a finished PNG.

Every :class:`ppo_viz.app.App` subclass defined in a ``ppo_viz`` submodule is
constructed with its defaults; its main controls are found by the
``ppo-main-control`` CSS class, walking the app's widget tree.  Each control is
set to ``values`` values spread over its range, one after another, and each
assignment is timed: ipywidgets calls the app's observer synchronously, so when
the assignment returns the app has redrawn and encoded its PNG (checked: a
new ``FigureView.png`` must appear, else the row says so).
"""

from __future__ import annotations

import gc
import importlib
import inspect
import itertools
import pkgutil
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.tables import Table, milliseconds, verdict
from ppo_viz.app import MAIN_CONTROL, App

#: The prefix of each main control's own class (``ppo-control-eps``).
CONTROL_PREFIX = "ppo-control-"
#: Target from issue 9: median redraw, setting a control to finished PNG.
REDRAW_TARGET_S = 0.060


@dataclass
class ControlResult:
    """One control's sweep: total seconds per setting, and the parts spent in FigureView."""

    app: str
    control: str
    seconds: list[float] = field(default_factory=list)
    #: Per setting: seconds inside ``FigureView.render`` (drawing plus PNG encoding).
    render: list[float] = field(default_factory=list)
    #: Per setting: seconds encoding the PNG (``ppo_viz.figure_view.encode_png``).
    encode: list[float] = field(default_factory=list)
    without_png: int = 0
    problem: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


def app_classes() -> Iterator[tuple[str, type | None, str]]:
    """``(qualified name, class or None, problem)`` for each App subclass in ppo_viz."""
    import ppo_viz

    modules = pkgutil.walk_packages(ppo_viz.__path__, prefix="ppo_viz.")
    for info in sorted(modules, key=lambda info: info.name):
        name = info.name
        if info.ispkg or name.startswith("ppo_viz.export"):
            continue
        try:
            module = importlib.import_module(name)
        except Exception as error:  # a module being written right now may not import
            yield name, None, f"import failed: {type(error).__name__}: {error}"
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, App) and cls is not App and cls.__module__ == name:
                yield f"{name}.{cls.__qualname__}", cls, ""


def walk(widget: Any) -> Iterator[Any]:
    """The widget and every widget below it (through ``children``)."""
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from walk(child)


def main_controls(app: Any) -> list[Any]:
    """Widgets with the ``ppo-main-control`` class, in tree order."""
    return [w for w in walk(app.widget) if MAIN_CONTROL in getattr(w, "_dom_classes", ())]


def control_name(control: Any) -> str:
    specific = [c for c in control._dom_classes if c.startswith(CONTROL_PREFIX)]
    label = specific[0] if specific else getattr(control, "description", "") or "?"
    return f"{label} ({type(control).__name__})"


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
        return None  # range sliders: not a main control of any app yet
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


def figure_views(app: Any) -> list[Any]:
    """The FigureViews an app holds (as attributes, or attributes of its attributes)."""
    from ppo_viz.figure_view import FigureView

    found: list[Any] = []
    for value in vars(app).values():
        if isinstance(value, FigureView):
            found.append(value)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            found.extend(v for v in vars(value).values() if isinstance(v, FigureView))
    return list({id(view): view for view in found}.values())


class _Stopwatch:
    """Adds up the time spent in wrapped callables, for the split of a redraw."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed


@contextmanager
def _watching(views: list[Any]) -> Iterator[tuple[_Stopwatch, _Stopwatch]]:
    """Time every ``view.render`` and every PNG encoding while the block runs."""
    from ppo_viz import figure_view

    render, encode = _Stopwatch(), _Stopwatch()
    original_encode = figure_view.encode_png
    figure_view.encode_png = encode.wrap(original_encode)
    for view in views:
        view.render = render.wrap(view.render)
    try:
        yield render, encode
    finally:
        for view in views:
            del view.render  # back to the class's method
        figure_view.encode_png = original_encode


def time_control(app_name: str, app: Any, control: Any, count: int) -> ControlResult:
    result = ControlResult(app_name, control_name(control))
    values = value_sequence(control, count)
    if values is None:
        result.problem = f"cannot sweep a {type(control).__name__} with value {control.value!r}"
        return result
    views = figure_views(app)
    original = control.value
    gc.collect()
    with _watching(views) as (render, encode):
        for value in values:
            before = [view.png for view in views]
            render.seconds = encode.seconds = 0.0
            started = time.perf_counter()
            control.value = value
            result.seconds.append(time.perf_counter() - started)
            result.render.append(render.seconds)
            result.encode.append(encode.seconds)
            if all(view.png is old for view, old in zip(views, before, strict=True)):
                result.without_png += 1
    control.value = original
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
    for name, cls, problem in app_classes():
        if only not in name:
            continue
        if cls is None:
            untimed.append((name, problem))
            continue
        started = time.perf_counter()
        try:
            app = cls()
        except Exception as error:
            detail = traceback.format_exception_only(type(error), error)[-1].strip()
            untimed.append((name, f"could not be built with no arguments: {detail}"))
            continue
        built[name] = time.perf_counter() - started
        controls = main_controls(app)
        if not controls:
            untimed.append((name, f"no widget with the {MAIN_CONTROL!r} class"))
            continue
        for control in controls:
            try:
                results.append(time_control(name, app, control, values))
            except Exception as error:
                detail = traceback.format_exception_only(type(error), error)[-1].strip()
                results.append(ControlResult(name, control_name(control), problem=detail))
    return results, untimed, built


def table(
    results: list[ControlResult],
    untimed: list[tuple[str, str]],
    built: dict[str, float],
    values: int,
) -> Table:
    out = Table(
        "Figure redraws: setting a main control's value to the finished PNG (ms)",
        [
            "app",
            "control",
            "values",
            "median ms",
            "worst ms",
            "median split: update / draw / PNG ms",
            "new PNG each time",
            f"median <= {REDRAW_TARGET_S * 1e3:.0f} ms",
        ],
    )
    for result in results:
        if result.problem:
            out.add(result.app, result.control, 0, "n/a", "n/a", "n/a", "n/a", result.problem)
            continue
        n = len(result.seconds)
        out.add(
            result.app,
            result.control,
            n,
            milliseconds(result.median),
            milliseconds(result.worst),
            _split(result),
            f"{n - result.without_png}/{n}",
            verdict(result.median <= REDRAW_TARGET_S),
        )
    for name, problem in untimed:
        out.add(name, "—", 0, "n/a", "n/a", "n/a", "n/a", f"not timed: {problem}")
    if built:
        described = ", ".join(f"{name} {milliseconds(s)} ms" for name, s in built.items())
        out.notes.append(f"Building each app with its defaults (first draw included): {described}.")
    out.notes.append(
        f"In-process, each control swept over {values} values spread across its range "
        "(a control with fewer settings goes up and down it); the other controls stay at "
        "their defaults. The split: the app's own work (ppo_clip, artists' data, widgets) / "
        "FigureView.render drawing the figure / encoding the PNG; medians of each part, so "
        "they need not add up to the median total. Apps are discovered as every "
        "ppo_viz.app.App subclass in a "
        f"ppo_viz submodule; controls by the {MAIN_CONTROL!r} CSS class."
    )
    return out


def _split(result: ControlResult) -> str:
    """Medians of: the app's own update (math, artists, widgets), drawing, PNG encoding."""
    update = [t - r for t, r in zip(result.seconds, result.render, strict=True)]
    draw = [r - e for r, e in zip(result.render, result.encode, strict=True)]
    parts = [statistics.median(update), statistics.median(draw), statistics.median(result.encode)]
    return " / ".join(milliseconds(part) for part in parts)


def target_rows(results: list[ControlResult]) -> list[tuple[str, str, bool]]:
    rows = []
    for result in results:
        if result.problem:
            rows.append(
                (
                    f"{result.app.removeprefix('ppo_viz.')} {result.control}: redraw",
                    result.problem,
                    False,
                )
            )
            continue
        rows.append(
            (
                f"{result.app.removeprefix('ppo_viz.')} {result.control}: median redraw "
                f"<= {REDRAW_TARGET_S * 1e3:.0f} ms",
                f"{milliseconds(result.median)} ms (worst {milliseconds(result.worst)})",
                result.median <= REDRAW_TARGET_S,
            )
        )
    return rows
