"""Headless tests of notebook 2's stepper: what it shows is the module's output, to the last bit.

The stepper is driven the way a reader drives it (``button.click()``, typing
into the text fields, the mode toggle) and every number on screen is checked
against a fresh call of :mod:`ppo_clip`, both in the structured rows the
readout is rendered from and in the rendered HTML.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_runner import output_problems, run_committed
from PIL import Image

import ppo_clip
from ppo_viz.display import WIDGET_VIEW_MIME
from ppo_viz.stepper import (
    Batch,
    BatchStepper,
    EntryError,
    clip_rule,
    compare_with_module,
    figure_limits,
    fmt,
    parse_batch,
    running_totals,
    sample_rows,
)

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_worked_example.ipynb"


@pytest.fixture
def stepper() -> BatchStepper:
    return BatchStepper()


def _module_breakdown(batch: Batch) -> ppo_clip.ClipBreakdown:
    """A fresh breakdown from the module (not the one the app cached)."""
    return ppo_clip.clip_breakdown(
        batch.logp_new.copy(), batch.logp_old.copy(), batch.advantages.copy(), batch.eps
    )


def _shown(app: BatchStepper) -> str:
    """The readout as a reader sees it: HTML with entities decoded."""
    return html.unescape(app.sample_view.value)


def _plain(app: BatchStepper) -> str:
    """The readout's text without tags, as read on screen."""
    return re.sub(r"<[^>]+>", "", _shown(app))


def _assert_step_matches_module(app: BatchStepper, t: int) -> None:
    batch = app.batch
    n = batch.n
    b = _module_breakdown(batch)
    rows = {row.key: row for row in app.current_rows()}
    expected = {
        "logp_old": batch.logp_old[t],
        "logp_new": batch.logp_new[t],
        "log_ratio": batch.logp_new[t] - batch.logp_old[t],
        "ratio": b.ratio[t],
        "advantage": b.advantages[t],
        "unclipped_term": b.unclipped_term[t],
        "clipped_term": b.clipped_term[t],
        "kept_term": b.objective_term[t],
        "contribution": b.loss_contribution[t],
        "grad": ppo_clip.ppo_clip_grad(batch.logp_new, batch.logp_old, batch.advantages, batch.eps)[
            t
        ],
    }
    shown = _shown(app)
    for key, value in expected.items():
        assert rows[key].value == value, (t, key, rows[key].value, value)
        assert fmt(value) in shown, (t, key, fmt(value))
    assert rows["is_clipped"].value == bool(b.is_clipped[t])
    verdict = "so clipped" if b.is_clipped[t] else "so not clipped"
    assert verdict in rows["rule"].value
    assert html.escape(rows["rule"].value) in app.sample_view.value
    assert ("clipped</span>" if b.is_clipped[t] else "not clipped</span>") in shown
    # Running totals after samples 0..t.
    kept_so_far = float(np.sum(b.objective_term[: t + 1]))
    loss_so_far = b.partial_loss(t + 1)
    assert fmt(loss_so_far) in shown
    assert fmt(kept_so_far) in shown
    clipped_so_far = int(np.count_nonzero(b.is_clipped[: t + 1]))
    assert f"Clipped so far: {clipped_so_far} of {t + 1} seen" in _plain(app)
    # Controls.
    assert app.step == t
    assert app.slider.value == t
    assert app.prev_button.disabled == (t == 0)
    assert app.next_button.disabled == (t == n - 1)
    _assert_highlight_matches_module(app, t, b)


def _assert_highlight_matches_module(app: BatchStepper, t: int, b: ppo_clip.ClipBreakdown) -> None:
    """The yellow point sits at (r, kept term) and (r, N = 1 gradient) in its sign's column."""
    sign = int(np.sign(b.advantages[t]))
    for column, marks in app.plot.highlights.items():
        xs, ys = marks.point.get_data()
        if column != sign:
            assert len(xs) == 0
            continue
        panel = app.plot.columns[column]
        low, high = panel.objective_ax.get_ylim()
        if b.ratio[t] <= app.plot.r_end and low <= b.objective_term[t] <= high:
            assert list(xs) == [b.ratio[t]]
            assert list(ys) == [b.objective_term[t]]
            assert marks.point.get_marker() == "o"
        else:  # off the axes: pinned to the edge, with an arrow-like marker
            assert xs[0] == min(b.ratio[t], app.plot.r_end)
            assert ys[0] == min(max(b.objective_term[t], low), high)
            assert marks.point.get_marker() in (">", "^", "v")
            return
        _, grad_ys = marks.gradient_point.get_data()
        single = ppo_clip.ppo_clip_grad(
            [app.batch.logp_new[t]], [app.batch.logp_old[t]], [b.advantages[t]], app.batch.eps
        )
        assert grad_ys[0] == pytest.approx(single[0], rel=1e-15, abs=0)
        # The column's curve is drawn for this sample's advantage.
        grid = panel.objective.get_xdata()
        sweep = ppo_clip.ratio_sweep(grid, b.advantages[t], app.batch.eps)
        np.testing.assert_array_equal(panel.objective.get_ydata(), sweep.objective_term)
        np.testing.assert_array_equal(panel.gradient.get_ydata(), sweep.grad)


# --------------------------------------------------------------------------
# Stepping
# --------------------------------------------------------------------------


def test_forward_to_the_end_and_back_matches_the_module_at_every_step(stepper):
    n = stepper.batch.n
    assert n == 4
    for t in range(n):
        _assert_step_matches_module(stepper, t)
        if t < n - 1:
            stepper.next_button.click()
    stepper.next_button.click()  # at the end: nothing moves
    _assert_step_matches_module(stepper, n - 1)
    for t in reversed(range(n - 1)):
        stepper.prev_button.click()
        _assert_step_matches_module(stepper, t)
    stepper.prev_button.click()
    assert stepper.step == 0


def test_last_step_totals_are_the_contract_numbers(stepper):
    example = ppo_clip.worked_example()
    for _ in range(3):
        stepper.next_button.click()
    totals = stepper.totals()
    assert totals.complete
    assert totals.loss == ppo_clip.ppo_clip_loss(*example) == -0.5375000000000001
    assert totals.clip_fraction == ppo_clip.clip_fraction(*example) == 0.5
    np.testing.assert_array_equal(totals.grad, ppo_clip.ppo_clip_grad(*example))
    # The contract prints [0, -0.55, 0, 0.1125]; the last entry is one ulp below 0.1125.
    np.testing.assert_array_equal(totals.grad, [0.0, -0.55, 0.0, 0.11249999999999999])
    shown = _shown(stepper)
    assert "-0.5375000000000001" in shown
    assert "All three equal the module's ppo_clip_loss, clip_fraction and ppo_clip_grad" in shown
    assert "[0, -0.55, 0, 0.11249999999999999]" in shown
    assert "Clip fraction = 2/4 = " in shown


def test_worked_example_rules_are_written_with_the_actual_numbers(stepper):
    rules = []
    for _ in range(4):
        rules.append({row.key: row.value for row in stepper.current_rows()}["rule"])
        stepper.next_button.click()
    assert rules[0].startswith("A = 1 > 0 and r = 1.4 > 1.2 = 1 + ε, so clipped")
    assert rules[1].startswith("A = 2 > 0 and r = 1.1 < 1.2 = 1 + ε, so not clipped")
    assert rules[2].startswith("A = -1 < 0 and r = 0.5999999999999999 < 0.8 = 1 − ε, so clipped")
    assert rules[3].startswith("A = -0.5 < 0 and r = 0.8999999999999999 > 0.8 = 1 − ε, so not")


def test_slider_and_buttons_drive_the_same_step(stepper):
    stepper.slider.value = 2
    _assert_step_matches_module(stepper, 2)
    stepper.next_button.click()
    assert stepper.slider.value == 3
    stepper.go(-5)
    assert stepper.step == 0


def test_edge_cases_preset_phrases_each_not_clipped_case(stepper):
    stepper.preset_buttons["edge cases"].click()
    batch = stepper.batch
    b = _module_breakdown(batch)
    assert b.ratio.tolist()[:2] == [1.2, 0.8]  # exactly on the band's edges
    assert not b.is_clipped.any()
    rules = []
    for t in range(batch.n):
        _assert_step_matches_module(stepper, t)
        rules.append({row.key: row.value for row in stepper.current_rows()}["rule"])
        stepper.next_button.click()
    assert "r = 1.2 is exactly 1 + ε = 1.2, not above it" in rules[0]
    assert "strict" in rules[0]
    assert "r = 0.8 is exactly 1 − ε = 0.8, not below it" in rules[1]
    assert "rose above the band" in rules[2]
    assert "fell below the band" in rules[3]
    assert rules[4].startswith("A = 0, so not clipped")
    # A = 0: no highlight in either column, and the figure says why.
    for marks in stepper.plot.highlights.values():
        assert len(marks.point.get_xdata()) == 0
    assert "A = 0" in stepper.plot.headline.get_text()
    assert "neither curve" in stepper.plot.headline.get_text()


@pytest.mark.parametrize(
    ("advantage", "ratio", "clipped", "phrase"),
    [
        (1.0, 1.4, True, "A = 1 > 0 and r = 1.4 > 1.2 = 1 + ε, so clipped"),
        (1.0, 1.2, False, "r = 1.2 is exactly 1 + ε = 1.2, not above it"),
        (2.0, 1.1, False, "r is inside the band"),
        (1.0, 0.5, False, "fell below the band"),
        (-1.0, 0.6, True, "A = -1 < 0 and r = 0.6 < 0.8 = 1 − ε, so clipped"),
        (-1.0, 0.8, False, "r = 0.8 is exactly 1 − ε = 0.8, not below it"),
        (-1.0, 0.9, False, "r is inside the band"),
        (-1.0, 1.5, False, "rose above the band"),
        (-1.0, math.inf, False, "the loss is +inf"),
        (0.0, math.inf, False, "even though r is infinite"),
        (0.0, 1.5, False, "A = 0, so not clipped"),
    ],
)
def test_clip_rule_phrasings(advantage, ratio, clipped, phrase):
    rule = clip_rule(advantage, ratio, 0.8, 1.2, clipped)
    assert phrase in rule
    assert ("so clipped" in rule) == clipped


# --------------------------------------------------------------------------
# Your own batch: good entries
# --------------------------------------------------------------------------


def _type(app: BatchStepper, new=None, old=None, advantages=None, eps=None) -> None:
    for widget, value in (
        (app.new_field, new),
        (app.old_field, old),
        (app.advantages_field, advantages),
        (app.eps_field, eps),
    ):
        if value is not None:
            widget.value = value


def test_own_batch_is_walked_and_matches_the_module(stepper):
    _type(
        stepper, "0.9, 0.2, 0.5, 0.05, 0.6", "0.3, 0.25, 0.5, 0.1, 0.5", "1, -2, 0, 0.5, -1", "0.3"
    )
    stepper.load_button.click()
    assert "Loaded your batch: N = 5" in html.unescape(stepper.message.value)
    batch = stepper.batch
    np.testing.assert_array_equal(batch.logp_new, np.log([0.9, 0.2, 0.5, 0.05, 0.6]))
    assert batch.eps == 0.3
    for t in range(batch.n):
        _assert_step_matches_module(stepper, t)
        stepper.next_button.click()
    check = compare_with_module(batch)
    assert check.all_equal
    assert stepper.totals().loss == ppo_clip.ppo_clip_loss(*batch.arguments())


def test_separators_brackets_and_unicode_minus_are_accepted(stepper):
    _type(stepper, "[0.7; 0.55  0.3,0.45]", "0.5 0.5 0.5 0.5", "1, 2, −1, −0.5", " 0.2 ")
    assert stepper.load()
    assert stepper.batch.advantages.tolist() == [1.0, 2.0, -1.0, -0.5]
    assert compare_with_module(stepper.batch).rows[0][1] == "-0.5375000000000001"


def test_log_mode_toggle_rewrites_the_fields_and_back_exactly(stepper):
    typed = (stepper.new_field.value, stepper.old_field.value)
    assert typed == ("0.7, 0.55, 0.3, 0.45", "0.5, 0.5, 0.5, 0.5")
    stepper.mode.value = "log-probabilities"
    assert stepper.new_field.description == "log π_new"
    assert stepper.new_field.value.split(", ")[0] == repr(float(np.log(0.7)))
    assert stepper.load()
    np.testing.assert_array_equal(stepper.batch.logp_new, ppo_clip.worked_example().logp_new)
    stepper.go(3)
    assert stepper.totals().loss == ppo_clip.ppo_clip_loss(*ppo_clip.worked_example())
    stepper.mode.value = "probabilities"
    assert (stepper.new_field.value, stepper.old_field.value) == typed
    assert stepper.new_field.description == "π_new"


def test_overflowing_ratio_shows_inf_and_never_nan(stepper):
    stepper.mode.value = "log-probabilities"
    _type(stepper, "0, 0, -0.5", "-1000, -1000, -0.5", "-1, 0, 1", "0.2")
    assert stepper.load()
    b = _module_breakdown(stepper.batch)
    assert math.isinf(b.ratio[0])
    assert ppo_clip.ppo_clip_loss(*stepper.batch.arguments()) == math.inf
    for t in range(3):
        _assert_step_matches_module(stepper, t)
        shown = _shown(stepper)
        assert "nan" not in shown.lower().replace("nanoseconds", "")
        stepper.next_button.click()
    stepper.go(0)
    rows = {row.key: row.value for row in stepper.current_rows()}
    assert rows["ratio"] == math.inf
    assert "the loss is +inf" in rows["rule"]
    marks = stepper.plot.highlights[-1]
    assert marks.point.get_marker() == ">"  # drawn at the axis edge, pointing right
    assert marks.point.get_xdata()[0] == stepper.plot.r_end
    stepper.go(2)
    assert "Loss so far = −(1/3) × sum = inf" in _plain(stepper)


def test_large_ratios_widen_the_axis_up_to_a_cap(stepper):
    _type(stepper, "0.9, 0.9", "0.3, 0.1", "1, -1", "0.2")
    assert stepper.load()
    ratios = _module_breakdown(stepper.batch).ratio
    assert ratios[0] == pytest.approx(3.0)
    assert ratios[1] == pytest.approx(9.0)
    assert stepper.plot.r_end == 6.0
    ax = stepper.plot.columns[+1].objective_ax
    assert ax.get_xlim() == (0.0, 6.0)
    assert stepper.plot.columns[+1].objective.get_xdata()[-1] == 6.0
    stepper.next_button.click()
    marks = stepper.plot.highlights[-1]
    assert marks.point.get_marker() == ">"
    assert "off the axis" in marks.label.get_text()


def test_largest_contract_batch_loads_and_ends_at_the_modules_numbers(stepper):
    rng = np.random.default_rng(2)
    n = 4096
    _type(
        stepper,
        ", ".join(repr(float(v)) for v in rng.uniform(0.01, 1.0, n)),
        ", ".join(repr(float(v)) for v in rng.uniform(0.01, 1.0, n)),
        ", ".join(repr(float(v)) for v in rng.normal(size=n)),
        "0.2",
    )
    assert stepper.load()
    assert stepper.slider.max == n - 1
    stepper.go(n - 1)
    totals = stepper.totals()
    assert totals.loss == ppo_clip.ppo_clip_loss(*stepper.batch.arguments())
    np.testing.assert_array_equal(totals.grad, ppo_clip.ppo_clip_grad(*stepper.batch.arguments()))
    assert "All three equal the module's" in _plain(stepper)
    assert len(stepper.sample_view.value) < 20_000  # long vectors are elided, not dumped
    assert "… and 3896 more samples" in stepper.table.value


# --------------------------------------------------------------------------
# Your own batch: bad entries
# --------------------------------------------------------------------------

BAD_ENTRIES = [
    # (mode, new, old, advantages, eps, fragment of the message)
    ("probabilities", "0.7, 0.55, 0.3", None, None, None, "π_new has 3, π_old has 4 and A has 4"),
    ("probabilities", None, None, "1, 2", None, "A has 2"),
    (
        "probabilities",
        "0.7, 1.5, 0.3, 0.45",
        None,
        None,
        None,
        "π_new, sample 1: 1.5 is not a prob",
    ),
    ("probabilities", "0.7, 0.55, 0, 0.45", None, None, None, "it must be above 0"),
    ("probabilities", None, "0.5, -0.5, 0.5, 0.5", None, None, "π_old, sample 1: -0.5 is not a"),
    ("probabilities", "0.7, abc, 0.3, 0.45", None, None, None, "“abc” is not a number"),
    ("probabilities", None, None, "1, 2, x, 4", None, "A, sample 2: “x” is not a number"),
    ("probabilities", None, None, "1, nan, 1, 1", None, "“nan” is not a finite number"),
    ("probabilities", None, None, "1, inf, 1, 1", None, "“inf” is not a finite number"),
    ("probabilities", None, None, None, "1.5", "ε = 1.5 is outside [0, 1]"),
    ("probabilities", None, None, None, "-0.1", "ε = -0.1 is outside [0, 1]"),
    ("probabilities", None, None, None, "big", "“big” is not a number"),
    ("probabilities", None, None, None, "0.1, 0.2", "ε takes a single number"),
    ("probabilities", "", None, None, None, "π_new is empty"),
    ("probabilities", None, None, "   ", None, "A is empty"),
    ("probabilities", None, None, None, "", "ε is empty: type one number, for example 0.2."),
    (
        "log-probabilities",
        "-0.3, 0.7, -1, -1",
        None,
        None,
        None,
        "log π_new, sample 1: 0.7 is above 0",
    ),
    ("log-probabilities", None, "-0.5, -2000, -1, -1", None, None, "below -1000"),
]


@pytest.mark.parametrize(
    ("mode", "new", "old", "advantages", "eps", "fragment"),
    BAD_ENTRIES,
    ids=[entry[-1][:32] for entry in BAD_ENTRIES],
)
def test_bad_entry_shows_a_message_and_keeps_the_last_good_batch(
    capsys, mode, new, old, advantages, eps, fragment
):
    app = BatchStepper("two clip fractions")
    app.next_button.click()
    if mode != app.mode.value:
        app.mode.value = mode
    before = {
        "batch": app.batch,
        "step": app.step,
        "readout": app.sample_view.value,
        "table": app.table.value,
        "fractions": app.clip_fractions.value,
        "png": app.view.last_png,
        "point": [marks.point.get_data() for marks in app.plot.highlights.values()],
        "curve": app.plot.columns[-1].objective.get_ydata().copy(),
    }
    _type(app, new, old, advantages, eps)
    app.load_button.click()
    message = html.unescape(app.message.value)
    assert fragment in message
    assert "ppo-message-error" in app.message.value
    assert "Still showing the last batch that loaded (two clip fractions, N = 4)" in message
    assert "Traceback" not in message
    assert "ppo-error" in app.message._dom_classes
    assert app.batch is before["batch"]
    assert app.step == before["step"]
    assert app.sample_view.value == before["readout"]
    assert app.table.value == before["table"]
    assert app.clip_fractions.value == before["fractions"]
    assert app.view.last_png == before["png"]
    after = [marks.point.get_data() for marks in app.plot.highlights.values()]
    for (x0, y0), (x1, y1) in zip(before["point"], after, strict=True):
        np.testing.assert_array_equal(x0, x1)
        np.testing.assert_array_equal(y0, y1)
    np.testing.assert_array_equal(app.plot.columns[-1].objective.get_ydata(), before["curve"])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    # Fixing the entry loads it.
    app.preset_buttons["worked example"].click()
    assert app.batch.name == "worked example"


def _snapshot(app: BatchStepper) -> dict:
    """What a reader sees of the stepper: batch, step, every readout and the figure."""
    return {
        "batch": app.batch,
        "step": app.step,
        "slider_max": app.slider.max,
        "readout": app.sample_view.value,
        "table": app.table.value,
        "position": app.position.value,
        "fractions": app.clip_fractions.value,
        "png": app.view.last_png,
        "limits": [(ax.get_xlim(), ax.get_ylim()) for ax in app.plot.figure.axes],
        "headline": app.plot.headline.get_text(),
    }


HUGE_ADVANTAGES = [
    # (π_new, A, the value named in the message)
    ("0.9", "1e308", "1e+308"),
    ("0.9", "-1e308", "-1e+308"),
    ("0.5", "1e308", "1e+308"),
    ("0.5", "-1e308", "-1e+308"),
    ("0.9", "1000001", "1000001"),
]


@pytest.mark.parametrize(("new", "advantage", "shown"), HUGE_ADVANTAGES)
def test_advantage_too_large_to_plot_is_refused_before_anything_changes(
    capsys, recwarn, new, advantage, shown
):
    app = BatchStepper("two clip fractions")
    app.go(2)
    before = _snapshot(app)
    _type(app, new, "0.5", advantage, "0.2")
    assert app.load() is False
    message = html.unescape(app.message.value)
    assert f"A, sample 0: {shown} is too large to plot" in message
    assert "advantages are usually within ±100" in message
    assert "Still showing the last batch that loaded (two clip fractions, N = 4)" in message
    assert "ppo-message-error" in app.message.value
    assert _snapshot(app) == before
    assert "Sample 2 (3 of 4)" in _plain(app)
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")


def test_largest_accepted_advantage_loads_without_warnings(capsys, recwarn, stepper):
    _type(stepper, "0.9, 0.2", "0.5, 0.5", "1e6, -1e6", "0.2")
    assert stepper.load()
    assert "Loaded your batch: N = 2 samples" in html.unescape(stepper.message.value)
    for ax in stepper.plot.figure.axes:
        assert all(math.isfinite(v) for v in (*ax.get_xlim(), *ax.get_ylim()))
    stepper.next_button.click()
    _assert_step_matches_module(stepper, 1)
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")


def test_one_sample_is_not_called_samples(stepper):
    _type(stepper, "0.9", "0.5", "1", "0.2")
    assert stepper.load()
    message = html.unescape(stepper.message.value)
    assert "N = 1 sample," in message
    assert "1 samples" not in message


def test_figure_limits_refuse_a_batch_that_cannot_be_drawn():
    batch = Batch(np.log([0.9]), np.log([0.5]), np.array([1e308]), 0.2)
    with pytest.raises(EntryError, match="too large to draw"):
        figure_limits(batch)


@pytest.mark.parametrize("failure", ["raises", "warns"])
def test_a_drawing_failure_puts_the_last_batch_back(capsys, recwarn, monkeypatch, failure):
    """If drawing a checked batch still fails, the app is not left half-updated."""
    app = BatchStepper("two clip fractions")
    app.go(1)
    before = _snapshot(app)
    original = app.plot.show_step

    def broken_show_step(step: int) -> None:
        if app.plot.batch is not before["batch"]:
            if failure == "raises":
                raise ValueError("Axis limits cannot be NaN or Inf")
            warnings.warn("overflow encountered in multiply", RuntimeWarning, stacklevel=1)
        original(step)

    monkeypatch.setattr(app.plot, "show_step", broken_show_step)
    _type(app, "0.9", "0.5", "1", "0.2")
    assert app.load() is False
    message = html.unescape(app.message.value)
    assert "This batch could not be drawn" in message
    assert "Still showing the last batch that loaded (two clip fractions, N = 4)" in message
    after = _snapshot(app)
    assert after.pop("png") is not None
    before.pop("png")
    assert after == before
    assert app.plot.batch is before["batch"]
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")


def test_every_problem_is_listed_at_once():
    with pytest.raises(EntryError) as raised:
        parse_batch("0.7, 2", "0.5, 0.5", "1, y", "3")
    lines = str(raised.value).splitlines()
    assert len(lines) == 3
    assert any("π_new" in line for line in lines)
    assert any("“y”" in line for line in lines)
    assert any("ε = 3" in line for line in lines)


def test_too_many_samples_is_refused():
    values = ", ".join(["0.5"] * 4097)
    with pytest.raises(EntryError, match="At most 4096 samples"):
        parse_batch(values, values, ", ".join(["1"] * 4097), "0.2")


# --------------------------------------------------------------------------
# The two clip fractions
# --------------------------------------------------------------------------


def test_disagreement_preset_shows_one_point_zero_against_one_half(stepper):
    stepper.preset_buttons["two clip fractions"].click()
    b = _module_breakdown(stepper.batch)
    np.testing.assert_array_equal(b.ratio, [1.5, 1.5, 0.5, 0.5])
    np.testing.assert_array_equal(b.advantages, [1.0, -1.0, 1.0, -1.0])
    sign_blind = float(np.mean(np.abs(b.ratio - 1) > stepper.batch.eps))
    assert sign_blind == b.band_fraction == 1.0
    assert ppo_clip.clip_fraction(*stepper.batch.arguments()) == 0.5
    shown = html.unescape(stepper.clip_fractions.value)
    assert ">0.5</div>" in shown
    assert ">1.0</div>" in shown
    assert "Stable-Baselines3, CleanRL, OpenAI Baselines, Spinning Up" in shown
    assert "this project, TRL, verl" in shown
    assert "They disagree: samples 1, 2 left the band" in shown


def test_worked_example_fractions_agree(stepper):
    shown = html.unescape(stepper.clip_fractions.value)
    assert "On this batch the two agree." in shown
    assert shown.count(">0.5</div>") == 2


# --------------------------------------------------------------------------
# Walking without the widgets (property test)
# --------------------------------------------------------------------------

probabilities = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)
advantage_values = st.one_of(
    st.sampled_from([0.0, 1.0, -1.0, 0.5, -2.0]),
    st.floats(min_value=-5, max_value=5, allow_nan=False),
)


@settings(max_examples=120, deadline=None)
@given(
    data=st.lists(
        st.tuples(probabilities, probabilities, advantage_values), min_size=1, max_size=40
    ),
    eps=st.one_of(st.sampled_from([0.0, 0.2, 1.0]), st.floats(min_value=0.0, max_value=1.0)),
)
def test_walk_ends_at_the_modules_numbers_and_verdicts_match(data, eps):
    new, old, advantages = (list(column) for column in zip(*data, strict=True))
    batch = parse_batch(
        ", ".join(repr(v) for v in new),
        ", ".join(repr(v) for v in old),
        ", ".join(repr(v) for v in advantages),
        repr(eps),
    )
    b = _module_breakdown(batch)
    for t in range(batch.n):
        rows = {row.key: row.value for row in sample_rows(batch, t)}
        assert rows["is_clipped"] == bool(b.is_clipped[t])
        assert ("so clipped" in rows["rule"]) == bool(b.is_clipped[t])
        assert rows["grad"] == b.grad[t]
    totals = running_totals(batch, batch.n - 1)
    args = batch.arguments()
    assert totals.loss == ppo_clip.ppo_clip_loss(*args)
    assert totals.clip_fraction == ppo_clip.clip_fraction(*args)
    np.testing.assert_array_equal(totals.grad, ppo_clip.ppo_clip_grad(*args))
    assert compare_with_module(batch).all_equal


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_fmt_round_trips(value):
    assert float(fmt(value)) == value


# --------------------------------------------------------------------------
# Display, classes, speed
# --------------------------------------------------------------------------


def test_display_bundle_has_widget_png_and_whole_batch_table(stepper):
    bundle = stepper._repr_mimebundle_()
    assert bundle[WIDGET_VIEW_MIME]["model_id"] == stepper.widget.model_id
    assert "(" not in bundle["text/plain"].split(" ")[0]
    page = html.unescape(bundle["text/html"])
    assert 'class="ppo-batch-table"' in page
    assert "-0.5375000000000001" in page
    assert "data:image/png;base64," in page
    png = Image.open(io.BytesIO(base64.b64decode(bundle["image/png"])))
    assert png.size[0] >= 900


def test_controls_have_stable_css_classes(stepper):
    assert "ppo-prev" in stepper.prev_button._dom_classes
    assert "ppo-next" in stepper.next_button._dom_classes
    assert {"ppo-main-slider", "ppo-stepper-sample"} <= set(stepper.slider._dom_classes)
    assert "ppo-sample-view" in stepper.sample_view._dom_classes
    assert "ppo-error" in stepper.message._dom_classes
    assert "ppo-figure" in stepper.view.output._dom_classes


def test_stepper_without_inputs_still_steps():
    app = BatchStepper(inputs=False)
    assert app.inputs not in app.widget.children
    app.next_button.click()
    _assert_step_matches_module(app, 1)


def test_steps_redraw_in_place_with_fixed_axes(stepper):
    figure = stepper.plot.figure
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in figure.axes]
    pngs = {stepper.view.last_png}
    for _ in range(3):
        stepper.next_button.click()
        pngs.add(stepper.view.last_png)
    assert len(pngs) == 4
    assert len(stepper.view.output.outputs) == 1
    assert [(ax.get_xlim(), ax.get_ylim()) for ax in figure.axes] == limits


def test_fast_redraw_matches_a_full_redraw(stepper):
    stepper.go(2)
    fast = np.asarray(Image.open(io.BytesIO(stepper.view.last_png)).convert("RGB"), dtype=int)
    stepper.view.invalidate()
    full = np.asarray(Image.open(io.BytesIO(stepper.view.render())).convert("RGB"), dtype=int)
    assert fast.shape == full.shape
    assert np.abs(fast - full).max() <= 2


def test_step_redraw_time(stepper):
    """Median time from a click to the finished PNG (CPU time, robust to a shared machine)."""
    cpu = []
    for _ in range(6):
        for button in [stepper.next_button] * 3 + [stepper.prev_button] * 3:
            started = time.process_time()
            button.click()
            cpu.append(time.process_time() - started)
    assert statistics.median(cpu) < 0.060, f"median {statistics.median(cpu) * 1000:.1f} ms"


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------


@pytest.mark.notebook
def test_notebook_runs_clean_and_checks_the_totals_itself():
    notebook, _ = run_committed(NOTEBOOK)
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)
    texts = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            assert output.output_type != "error", output
            assert not (output.output_type == "stream" and output.name == "stderr"), output.text
            texts.append(str(output.get("text", "")) + str(output.get("data", {})))
    joined = "\n".join(texts)
    assert "Warning" not in joined
    assert "-0.5375000000000001" in joined
    assert "✔ yes" in joined
    assert "assert check.all_equal" in "".join(
        cell.source for cell in notebook.cells if cell.cell_type == "code"
    )
