"""The one way to build an app: LiveFigure's blitted redraws, messages, fallbacks and slides.

The parametrized test at the end moves every control of every app in ``ppo_viz`` and checks
that what the reader sees after each move (a blit of the moving artists over the kept
background) is exactly the figure drawn from scratch: an artist an app changes but does not
list as moving would show stale there.
"""

from __future__ import annotations

import asyncio
import io
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pytest
from helpers import live_figure_classes, plain
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from ppo_viz.app import MAIN_CONTROL, InputError, LiveFigure
from ppo_viz.controls import checked_flag, checked_number, slider
from ppo_viz.style import figure_style


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)


def drawn_from_scratch(app: LiveFigure) -> np.ndarray:
    """The figure drawn afresh on a new canvas: static artists, then the moving ones on top.

    That is what a blit shows (moving artists over the kept background), so a difference is
    an artist whose change the blit did not show: one ``update`` changes but ``moving`` omits.
    """
    live_canvas = app.figure.canvas
    canvas = FigureCanvasAgg(app.figure)
    try:
        canvas.draw()  # leaves the animated (moving) artists out
        for artist in app.moving:
            app.figure.draw_artist(artist)
        return np.asarray(canvas.buffer_rgba())[..., :3].astype(int)
    finally:
        app.figure.set_canvas(live_canvas)


def assert_shows_the_full_figure(app: LiveFigure) -> None:
    """The canvas's pixels, after blits, equal the figure drawn from scratch."""
    on_screen = np.asarray(app.canvas.buffer_rgba())[..., :3].astype(int)
    fresh = drawn_from_scratch(app)
    assert on_screen.shape == fresh.shape
    differing = np.count_nonzero(np.abs(on_screen - fresh).max(axis=2) > 2)
    assert differing == 0, f"{differing} pixels differ from a full redraw"


def slope_app() -> LiveFigure:
    """A line whose slope a slider sets, a title that says it, and a refused value."""
    with figure_style():
        figure = Figure(figsize=(4, 3), layout="constrained")
        ax = figure.add_subplot()
        ax.axvspan(0.2, 0.4, color="lightgrey")  # static, under the line
        (line,) = ax.plot([0, 1], [0, 0], lw=3)
        ax.set(xlim=(0, 1), ylim=(-2, 2))

    def update(slope: float) -> str:
        if slope == 0:
            raise InputError("A slope of 0 draws nothing: pick another.")
        line.set_ydata([0, slope])
        ax.title.set_text(f"slope {slope:g}")
        return f"<b>slope {slope:g}</b>"

    controls = {"slope": slider("slope", 1.0, (-2.0, 2.0), 0.1)}
    return LiveFigure(figure, update, controls, moving=[line, ax.title])


def test_a_control_moves_the_figure_by_blitting_and_shows_the_readout():
    app = slope_app()
    app.controls["slope"].value = -1.5
    (line,) = app.figure.axes[0].get_lines()
    assert list(line.get_ydata()) == [0, -1.5]
    assert app.figure.axes[0].get_title() == "slope -1.5"
    assert app.readout.value == "<b>slope -1.5</b>"
    assert_shows_the_full_figure(app)
    assert {MAIN_CONTROL, "ppo-control-slope"} <= set(app.controls["slope"]._dom_classes)


def test_in_an_event_loop_values_set_together_are_drawn_once_at_its_next_turn():
    """As in a kernel: the kernel goes idle first, so the page sends a dragged slider's next
    value while this one is drawn; a drawing that fails says so in place and stops no later
    one."""
    app = slope_app()
    blits: list[float] = []
    app.canvas.blit = lambda bbox=None: blits.append(app.controls["slope"].value)

    async def two_values_then_a_failed_drawing_then_another() -> None:
        app.controls["slope"].value = -1.5
        app.controls["slope"].value = 0.7
        assert app.readout.value == "<b>slope 0.7</b>"  # the readout is not put off
        assert blits == []
        await asyncio.sleep(0)
        assert blits == [0.7]
        app.canvas.blit = lambda bbox=None: 1 / 0
        app.controls["slope"].value = 1.2
        await asyncio.sleep(0)
        assert "Could not draw the figure (ZeroDivisionError: division by zero)" in plain(
            app.message.value
        )
        app.canvas.blit = lambda bbox=None: blits.append(app.controls["slope"].value)
        app.controls["slope"].value = -0.4
        await asyncio.sleep(0)
        assert app.message.value == ""

    asyncio.run(two_values_then_a_failed_drawing_then_another())
    assert blits == [0.7, -0.4]


def test_messages_from_another_thread_are_drawn_in_turn_on_the_figures_loop():
    """As in JupyterLab, whose kernel may handle a slider's message and the page's 'draw' of the
    canvas on a subshell's thread: both run on the figure's event loop, one after the other,
    and the blit of the slider's value is not sent after a full drawing that showed it (the
    page shows only the last of two frames in a row: an empty diff would hide the first)."""
    ran, frames = [], []

    async def a_value_and_a_draw_from_another_thread() -> LiveFigure:
        app = slope_app()
        update, handle = app._update, app.canvas.handle_event
        app._update = lambda **values: ran.append(threading.current_thread()) or update(**values)
        app.canvas.handle_event = lambda event: (
            ran.append(threading.current_thread()) or handle(event)
        )
        app.canvas.send_binary = lambda png: frames.append(app.canvas._current_image_mode)
        await asyncio.sleep(0)  # the first drawing
        frames.clear()
        subshell = threading.Thread(
            target=lambda: (
                setattr(app.controls["slope"], "value", -0.5),  # a drag's values, faster than
                setattr(app.controls["slope"], "value", -1.5),  # drawn: refreshed once, at -1.5
                app.canvas._handle_custom_msg({"type": "draw"}, []),
            )
        )
        subshell.start()
        subshell.join()
        for _ in range(3):
            await asyncio.sleep(0)
        return app

    app = asyncio.run(a_value_and_a_draw_from_another_thread())
    assert ran == [threading.current_thread()] * 2  # the values' one update, then 'draw'
    assert app.values() == {"slope": -1.5}
    assert len(frames) == 1  # the full drawing's, with the new value; no empty diff after it
    assert_shows_the_full_figure(app)


def test_without_a_running_loop_a_change_is_drawn_at_once_and_an_error_raises():
    """A script or a test sees the figure drawn when the value is set, and its errors.  So does
    a figure made while a loop was set running that never turns again (Playwright's sync API
    leaves one in its thread; a module's fixture): its first drawing, handed to that loop,
    never came, and the first change draws it whole at once."""
    loop = asyncio.new_event_loop()
    asyncio._set_running_loop(loop)
    try:
        app = slope_app()
    finally:
        asyncio._set_running_loop(None)
    loop.close()
    drawn: list[tuple[str, float]] = []
    draw, slope = app.canvas.draw, app.controls["slope"]
    app.canvas.draw = lambda: drawn.append(("whole", slope.value)) or draw()
    app.canvas.blit = lambda bbox=None: drawn.append(("blit", slope.value))
    slope.value = -1.5
    slope.value = 0.5
    assert drawn == [("whole", -1.5), ("blit", 0.5)]
    app.canvas.blit = lambda bbox=None: 1 / 0
    with pytest.raises(ZeroDivisionError):
        slope.value = 0.7


def test_a_refused_value_is_a_message_in_place_and_the_last_figure_stays():
    app = slope_app()
    app.controls["slope"].value = 0.5
    app.controls["slope"].value = 0.0
    assert "A slope of 0 draws nothing" in app.message.value
    (line,) = app.figure.axes[0].get_lines()
    assert list(line.get_ydata()) == [0, 0.5]
    app.controls["slope"].value = 1.0
    assert app.message.value == ""


def test_reset_sets_every_control_back_to_its_start_then_draws_once():
    """Drawing once: notebook 4's bandit app would otherwise run every setting in between."""
    calls: list[tuple[float, float]] = []
    controls = {name: slider(name, 0.0, (0.0, 1.0), 0.1) for name in "ab"}
    app = LiveFigure(Figure(), lambda a, b: calls.append((a, b)), controls, moving=[])
    app.controls["a"].value = app.controls["b"].value = 0.5
    calls.clear()
    app.reset_button.click()  # on screen: test_present's test of every app asserts it
    assert calls == [(0.0, 0.0)]
    assert app.values() == {"a": 0.0, "b": 0.0}


def test_changed_limits_draw_everything_again():
    app = slope_app()
    app.figure.axes[0].set_ylim(-5, 5)
    app.controls["slope"].value = 1.7
    assert_shows_the_full_figure(app)


@pytest.mark.parametrize("stem", ["slides/eps0.1", "slides/eps0.3.png", "deck/line", "~/slides/x"])
def test_save_keeps_the_stem_and_writes_a_slide_sized_png_and_an_svg(tmp_path, monkeypatch, stem):
    """A ``~`` at the start is the home folder: ``save("~/slides/x")`` wrote into a folder
    named ``~`` in the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    app = slope_app()
    png, svg = app.save(stem)
    expected = Path(stem.removesuffix(".png")).expanduser()
    assert (png, svg) == (Path(f"{expected}.png"), Path(f"{expected}.svg"))
    assert Image.open(png).size[0] == 2000
    assert svg.read_text().startswith("<?xml")
    assert not (tmp_path / "~").exists()
    assert_shows_the_full_figure(app)


@pytest.mark.parametrize("stem", ["", ".", "..", "slides/", "slides/..", ".png", "deck/.SVG"])
def test_save_refuses_a_stem_without_a_file_name_and_writes_nothing(tmp_path, monkeypatch, stem):
    """``save("")`` returned two paths that did not exist and wrote ``..png.png`` instead."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^stem must end with a file name"):
        slope_app().save(stem)
    assert list(tmp_path.rglob("*")) == []


def test_constructor_checks_name_the_argument():
    with pytest.raises(ValueError, match=r"eps must be between 0 and 1, got 1\.5"):
        checked_number("eps", 1.5, (0.0, 1.0))
    with pytest.raises(TypeError, match="eps must be a number, got str"):
        checked_number("eps", "0.2", (0.0, 1.0))
    with pytest.raises(ValueError, match="epochs must be a whole number"):
        checked_number("epochs", 2.5, (1, 30), whole=True)
    with pytest.raises(TypeError, match="points must be True or False"):
        checked_flag("points", 1)


IMPORT_EVERY_MODULE = """
import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

plt.figure()
before = matplotlib.get_backend()
state = lambda: (warnings.filters[:], np.geterr(), np.get_printoptions(), dict(matplotlib.rcParams))
others = state()
from helpers import ppo_viz_modules

problems = [f"{name}: {problem}" for name, problem in ppo_viz_modules() if problem]
assert not problems, problems  # such a module would drop out of the test of every app too
print(before, matplotlib.get_backend(), plt.get_fignums(), state() == others)
"""


def test_importing_the_apps_leaves_matplotlibs_backend_alone():
    """Every module of ppo_viz imports.  Importing an app module switched the backend to
    ipympl: a plain script's ``plt.show()`` then printed a widget's description.  pyplot's open
    figure stays open, and the warning filters, numpy's error state and print options and
    matplotlib's settings stay as they were.
    """
    tests = Path(__file__).parent
    paths = os.pathsep.join([str(tests), str(tests.parent)])  # helpers, and the code they import
    shown = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE],
        env={**os.environ, "MPLBACKEND": "agg", "PYTHONPATH": paths},
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.stdout.split() == ["agg", "agg", "[1]", "True"], shown.stdout + shown.stderr


def _two_values(control: widgets.Widget) -> list:
    """Another value of the control, then its first one: each redraw after a change."""
    if isinstance(control.value, bool):
        return [not control.value, control.value]
    if hasattr(control, "options"):  # options are values, or (label, value) pairs
        values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return [*values[1:2], control.value]
    if not hasattr(control, "max"):
        return [control.value + 1, control.value]
    low, high = control.min, control.max
    values = [low + (high - low) * f for f in (0.3, 0.5)]
    values = [type(control.value)(round(v / control.step) * control.step) for v in values]
    base = getattr(control, "base", None)  # a log slider's min and max are exponents
    return [base**v for v in values] if base is not None else values


def _unreachable_value(control: widgets.Widget) -> object:
    """A value code can set but no position of the control gives: NaN on a slider of floats,
    None (nothing chosen) in a dropdown; ``control.value`` itself for other controls."""
    if isinstance(control.value, float) and hasattr(control, "max"):
        return math.nan
    if isinstance(control, widgets.Dropdown):
        return None
    return control.value


@pytest.mark.parametrize("app_class", live_figure_classes(), ids=lambda cls: cls.__qualname__)
def test_every_apps_blitted_redraws_match_a_full_redraw_and_unreachable_values_are_refused(
    app_class,
):
    """Each value redraws as a full redraw would; a value set from code that no position of
    the control gives shows a message naming the control, and the figure stays as it was
    (issue 31: NaN on notebook 1's ε raised ValueError, None on notebook 4's cell KeyError)."""
    app = app_class()
    assert app.controls, "an app has at least one control"
    for control in app.controls.values():
        for value in _two_values(control):
            control.value = value
            assert app.message.value == "", app.message.value
            assert_shows_the_full_figure(app)
    # LiveFigure refuses such values for any control: the first control that can hold one
    settable = [c for c in app.controls.values() if _unreachable_value(c) is not c.value]
    for control in settable[:1]:
        good, shown = control.value, np.asarray(app.canvas.buffer_rgba()).copy()
        control.value = _unreachable_value(control)
        assert plain(app.message.value).startswith(control.description), app.message.value
        assert np.array_equal(np.asarray(app.canvas.buffer_rgba()), shown)
        control.value = good  # the app works again
        assert app.message.value == "", app.message.value
