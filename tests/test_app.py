"""The app foundation: FigureView's partial redraws, App's messages, fallbacks and slides.

The last test moves every main control of every app in ``ppo_viz`` and checks that
what the reader sees after each move (a partial redraw) is exactly the figure drawn
from scratch.
"""

from __future__ import annotations

import base64
import io
import re

import ipywidgets as widgets
import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from ppo_viz.app import MAIN_CONTROL, WIDGET_VIEW_MIME, App, InputError, slider
from ppo_viz.figure_view import FigureView, figure_to_png
from ppo_viz.style import figure_style


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)


def assert_same_picture(shown: bytes, figure: Figure) -> None:
    """The image on screen equals the figure drawn from scratch, pixel for pixel."""
    fresh = pixels(figure_to_png(figure))
    on_screen = pixels(shown)
    assert on_screen.shape == fresh.shape
    differing = np.count_nonzero(np.abs(on_screen - fresh).max(axis=2) > 2)
    assert differing == 0, f"{differing} pixels differ from a full redraw"


def busy_figure() -> tuple[Figure, dict]:
    """A figure with one of each kind of artist the apps move."""
    with figure_style():
        figure = Figure(figsize=(6, 4), layout="constrained")
        left, right = figure.subplots(1, 2)
        parts = {
            "band": left.axvspan(0.2, 0.4, color="lightblue", zorder=1),
            "line": left.plot([0, 1], [0, 1], lw=3, label="moving line")[0],
            "static_line": left.axvline(0.3, color="k", ls=":"),
            "label": left.annotate("here", (0.5, 0.5), xytext=(5, 5), textcoords="offset points"),
            "image": right.imshow(np.zeros((4, 4)), vmin=0, vmax=1, aspect="auto"),
            "title": figure.suptitle("start"),
        }
        left.legend(loc="upper left")
        left.set_xlim(0, 1)
        left.set_ylim(0, 1)
    return figure, parts


def test_partial_redraws_show_exactly_the_full_figure():
    figure, parts = busy_figure()
    view = FigureView(figure)
    view.refresh()
    for step in range(1, 4):
        parts["line"].set_ydata([0, step / 4])
        parts["band"].set_x(0.1 * step)
        parts["label"].xy = (0.2 * step, 0.3)
        parts["label"].stale = True
        parts["image"].set_data(np.full((4, 4), step / 4))
        parts["title"].set_text(f"step {step}")
        view.refresh()
        assert_same_picture(view.png, figure)
    assert view.blits >= 2, "after learning what moves, a redraw should not draw everything"


def test_an_artist_changed_for_the_first_time_is_never_left_stale():
    figure, parts = busy_figure()
    view = FigureView(figure)
    view.refresh()
    parts["line"].set_ydata([0, 0.5])
    view.refresh()
    parts["line"].set_ydata([0, 0.6])
    view.refresh()
    newcomer = figure.axes[0].plot([0, 1], [1, 0], color="red", lw=4)[0]
    view.refresh()
    assert_same_picture(view.png, figure)
    newcomer.set_ydata([0.5, 0.5])
    view.refresh()
    assert_same_picture(view.png, figure)
    assert newcomer in view.moving


def test_changing_limits_redraws_everything():
    figure, _parts = busy_figure()
    view = FigureView(figure)
    view.refresh()
    before = view.full_draws
    figure.axes[0].set_xlim(0, 2)
    view.refresh()
    assert view.full_draws == before + 1
    assert_same_picture(view.png, figure)


def test_figure_to_png_leaves_pending_changes_visible_to_the_view():
    figure, parts = busy_figure()
    view = FigureView(figure)
    view.refresh()
    parts["line"].set_ydata([0, 0.9])
    figure_to_png(figure)
    view.refresh()
    assert_same_picture(view.png, figure)


def test_each_refresh_replaces_the_one_image():
    figure, parts = busy_figure()
    view = FigureView(figure)
    for step in range(3):
        parts["title"].set_text(str(step))
        view.refresh()
        assert view.output.children == (view.output.image,)
        assert view.output.image.value == view.png


def test_each_refresh_puts_the_png_in_the_image_widget():
    figure, parts = busy_figure()
    view = FigureView(figure)
    parts["title"].set_text("shown")
    png = view.refresh()
    assert view.output.image.value == png == view.png
    assert png.startswith(b"\x89PNG")
    assert "ppo-figure" in view.output._dom_classes


class _Kernel:
    """Stands in for ipykernel: the message it is handling now has type ``msg_type``."""

    def __init__(self, msg_type: str) -> None:
        self.msg_type = msg_type

    def get_parent(self, channel: str = "shell") -> dict:
        return {"header": {"msg_type": self.msg_type}}


class _Shell:
    def __init__(self, msg_type: str) -> None:
        self.kernel = _Kernel(msg_type)


@pytest.mark.parametrize("msg_type", ["comm_msg", "execute_request"])
def test_values_from_the_browser_are_drawn_once_after_the_kernel_answers(monkeypatch, msg_type):
    import asyncio

    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell(msg_type))
    figure, parts = busy_figure()
    view = FigureView(figure)
    parts["title"].set_text("before")
    before = view.refresh()  # no event loop running: drawn at once
    renders = []
    original_render = view.render
    monkeypatch.setattr(view, "render", lambda: renders.append(1) or original_render())

    async def two_quick_values() -> tuple[bytes, bytes]:
        parts["title"].set_text("first")
        first = view.refresh()
        parts["title"].set_text("second")
        second = view.refresh()
        await asyncio.sleep(0)
        return first, second

    first, second = asyncio.run(two_quick_values())
    if msg_type == "comm_msg":
        assert first == second == before  # still the old image while answering
        assert len(renders) == 1  # both values drawn together, once
    else:
        assert first != before  # code in a cell draws at once
        assert second != first
        assert len(renders) == 2
    assert view.output.image.value == view.png != before
    parts["title"].set_text("second")
    assert_same_picture(view.png, figure)


class LinePlot:
    def __init__(self, slides: bool) -> None:
        with figure_style(slides):
            self.figure = Figure(figsize=(8, 4.5) if slides else (4, 3))
            self.ax = self.figure.subplots()
            (self.line,) = self.ax.plot([0, 1], [0, 0])
            self.ax.set_ylim(-2, 2)


class SlopeApp(App):
    """A small app: a line whose slope is a slider; slopes above 1.5 are refused."""

    description = "a line"

    def __init__(self) -> None:
        self.slope = slider("slope", 0.5, (-2.0, 2.0), 0.1, name="slope")
        self.readout = widgets.HTML()
        super().__init__(controls=[self.slope], readouts=[self.readout])

    def make_plot(self, slides: bool) -> LinePlot:
        return LinePlot(slides)

    def draw(self, plot: LinePlot) -> None:
        slope = self.slope.value
        if slope > 1.5:
            raise InputError(f"slope {slope:.1f} is too steep; keep it at most 1.5")
        plot.line.set_ydata([0, slope])

    def update_readouts(self) -> None:
        self.readout.value = f"<b>slope {self.slope.value:.1f}</b>"


def test_app_redraws_on_a_control_and_reports_a_bad_setting_in_place():
    app = SlopeApp()
    app.slope.value = 1.0
    assert app.plot.line.get_ydata()[1] == 1.0
    shown = app.view.png
    app.slope.value = 1.8
    assert "too steep" in app.message.value
    assert "Traceback" not in app.message.value
    assert app.view.png == shown, "the last good figure stays on screen"
    app.slope.value = -1.0
    assert app.message.value == ""
    assert app.plot.line.get_ydata()[1] == -1.0


def test_app_displays_widget_and_fallbacks():
    app = SlopeApp()
    bundle = app._repr_mimebundle_()
    assert bundle[WIDGET_VIEW_MIME]["model_id"] == app.widget.model_id
    assert base64.b64decode(bundle["image/png"]) == app.view.png
    assert "slope 0.5" in bundle["text/html"]
    assert "<img" in bundle["text/html"]
    assert "Slider" not in bundle["text/plain"]
    assert MAIN_CONTROL in app.slope._dom_classes


def test_app_saves_a_slide_at_the_current_setting(tmp_path):
    app = SlopeApp()
    app.slope.value = -1.2
    png, svg = app.save(tmp_path / "deck" / "line")
    width, height = Image.open(png).size
    assert (width, height) == (1200, 675)
    assert svg.read_text().startswith("<?xml")


def _apps() -> list[type[App]]:
    from benchmarks.figures import app_classes

    return [cls for _, cls, _ in app_classes() if cls is not None]


def test_every_ppo_viz_module_imports():
    """An app module that fails to import would silently drop out of the test below."""
    from benchmarks.figures import app_classes

    problems = [f"{name}: {problem}" for name, cls, problem in app_classes() if cls is None]
    assert not problems, "\n".join(problems)


def _three_values(control: widgets.Widget) -> list:
    if isinstance(control.value, bool):
        return [not control.value, control.value, not control.value]
    if hasattr(control, "options"):
        return list(control.options)[:3]
    if not hasattr(control, "max"):
        return [control.value + 1, control.value + 2, control.value]
    low, high = control.min, control.max
    values = [low + (high - low) * f for f in (0.9, 0.1, 0.5)]
    values = [type(control.value)(round(v / control.step) * control.step) for v in values]
    base = getattr(control, "base", None)  # a log slider's min and max are exponents
    return [base**v for v in values] if base is not None else values


@pytest.mark.parametrize("app_class", _apps(), ids=lambda cls: cls.__qualname__)
def test_every_apps_partial_redraws_match_a_full_redraw(app_class):
    app = app_class()
    controls = [w for w in _walk(app.widget) if MAIN_CONTROL in w._dom_classes]
    assert controls, "an app has at least one main control"
    for control in controls:
        for value in _three_values(control):
            control.value = value
            assert app.message.value == "", app.message.value
            assert_same_picture(app.view.png, app.plot.figure)


def _walk(widget: widgets.Widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)


def test_an_artist_that_stops_changing_leaves_the_redraw():
    figure, parts = busy_figure()
    view = FigureView(figure)
    view.refresh()
    for step in range(3):  # the title and the line change together for a while
        parts["title"].set_text(f"title {step}")
        parts["line"].set_ydata([0, step / 4])
        view.refresh()
    assert parts["title"] in view.moving
    for step in range(12):  # then only the line changes
        parts["line"].set_ydata([0, step / 12])
        view.refresh()
        assert_same_picture(view.png, figure)
    assert parts["title"] not in view.moving
    assert parts["line"] in view.moving


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"advantage": 10.0}, ValueError, "advantage must be between 0.25 and 2, got 10.0"),
        ({"advantage": -1.0}, ValueError, "advantage must be between 0.25 and 2"),
        ({"eps": 5}, ValueError, "eps must be between 0 and 1, got 5"),
        ({"eps": float("nan")}, ValueError, "eps must be between 0 and 1, got nan"),
        ({"eps": "0.2"}, TypeError, "eps must be a number, got str"),
        ({"show_worked_example": "no"}, TypeError, "show_worked_example must be True or False"),
    ],
)
def test_an_app_refuses_start_values_its_sliders_would_clamp(arguments, error, message):
    from ppo_viz.surrogate import SurrogateExplorer

    with pytest.raises(error, match=re.escape(message)):
        SurrogateExplorer(**arguments)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"seeds": 0}, ValueError, "seeds must be between 1 and 1000, got 0"),
        ({"seeds": 2.5}, ValueError, "seeds must be a whole number, got 2.5"),
        ({"settings": "x"}, TypeError, "settings must be BanditLoopSettings, got str"),
    ],
)
def test_the_bandit_loop_app_names_bad_arguments(arguments, error, message):
    from ppo_viz.why_clip.apps import BanditLoopExplorer

    with pytest.raises(error, match=re.escape(message)):
        BanditLoopExplorer(**arguments)


def test_a_busy_figure_is_undimmed_by_the_next_image_or_a_refused_setting():
    app = SlopeApp()
    app.view.show_busy()
    assert "ppo-busy" in app.view.output._dom_classes
    app.slope.value = 1.0
    assert "ppo-busy" not in app.view.output._dom_classes
    app.view.show_busy()
    app.slope.value = 1.8  # refused: the old image stays, and is not left dimmed
    assert "is too steep" in app.message.value
    assert "ppo-busy" not in app.view.output._dom_classes


@pytest.mark.parametrize("text_clipped", [True, False])
def test_titles_above_the_axes_stay_in_the_background_unless_an_unclipped_text_is_redrawn(
    text_clipped,
):
    with figure_style():
        figure = Figure(figsize=(4, 3), layout="constrained")
        ax = figure.subplots()
        ax.set_title("a title")
        (line,) = ax.plot([0, 1], [0, 1])
        ax.text(0.5, 0.5, "a label", clip_on=text_clipped)  # above the line: redrawn with it
    view = FigureView(figure)
    for y in (0.2, 0.4, 0.6):
        line.set_ydata([0, y])
        view.refresh()
    assert line in view.moving
    # An unclipped text could be moved onto the title later, without a full draw.
    assert (ax.title in view.moving) is not text_clipped
    assert_same_picture(view.png, figure)
