"""Headless tests of notebook 2's stepper: what the reader sees is the module's output.

The stepper is driven the way a reader drives it (buttons, the slider, typing
into the fields, the mode toggle, the presets).  Every number on screen is
checked against a fresh call of :mod:`ppo_clip` (to the last bit) and each
verdict against the plain-Python reference in ``benchmarks/reference.py``.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from helpers import CONTRACT_LOSS, assert_contract_loss, assert_contract_numbers
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_runner import output_problems, run_committed
from PIL import Image
from test_app import assert_same_picture

import ppo_clip
from benchmarks import reference
from ppo_viz.app import MAIN_CONTROL, WIDGET_VIEW_MIME
from ppo_viz.numbers import exact, rounded, vector
from ppo_viz.stepper import (
    PRESETS,
    BatchStepper,
    EntryError,
    StepperBatch,
    clip_rule,
    compare_with_module,
    figure_limits,
    parse_batch,
    preset_batch,
    running_totals,
    sample_readout,
)
from ppo_viz.style import SLIDE_SIZE

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_worked_example.ipynb"


@pytest.fixture
def stepper() -> BatchStepper:
    return BatchStepper()


def _module(batch: StepperBatch) -> ppo_clip.ClipBreakdown:
    """A fresh breakdown from the module, on copies of the batch's inputs."""
    return ppo_clip.clip_breakdown(
        batch.logp_new.copy(), batch.logp_old.copy(), batch.advantages.copy(), batch.eps
    )


def _plain(html_text: str) -> str:
    """HTML as read on screen: one space between blocks and cells, no tags, no entities."""
    spaced = re.sub(r"</(div|td|th|tr|caption)>", " ", html_text)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", spaced)).split())


def _assert_step_shows_the_module(app: BatchStepper, t: int) -> None:
    """The card, the totals, the controls and the figure at sample ``t``."""
    batch = app.batch
    b = _module(batch)
    readout = app.readout()
    expected = {
        "logp_old": batch.logp_old[t],
        "logp_new": batch.logp_new[t],
        "log_ratio": b.log_ratio[t],
        "ratio": b.ratio[t],
        "advantage": b.advantages[t],
        "unclipped_term": b.unclipped_term[t],
        "clipped_term": b.clipped_term[t],
        "kept_term": b.objective_term[t],
        "contribution": b.loss_contribution[t],
        "grad": ppo_clip.ppo_clip_grad(*batch.arguments())[t],
    }
    shown = _plain(app.sample_view.value)
    for key, value in expected.items():
        assert readout[key] == value, (t, key)
        assert exact(value) in shown, (t, key, exact(value))
    independent = reference.sample(float(b.ratio[t]), float(b.advantages[t]), batch.n, batch.eps)
    assert readout.is_clipped == independent.is_clipped
    assert ("so clipped" in readout.rule) == independent.is_clipped
    assert readout.rule in shown
    badge = "clipped" if independent.is_clipped else "not clipped"
    assert f"Sample {t} ({t + 1} of {batch.n}) {badge}" in shown
    # The running totals after samples 0..t.
    assert exact(float(np.sum(b.objective_term[: t + 1]))) in shown
    assert f"Loss so far = −(1/{batch.n}) × sum = {exact(b.partial_loss(t + 1))}" in shown
    clipped_so_far = int(np.count_nonzero(b.is_clipped[: t + 1]))
    assert f"Clipped so far: {clipped_so_far} of {t + 1} seen" in shown
    # The controls.
    assert app.step == app.slider.value == t
    assert app.prev_button.disabled == (t == 0)
    assert app.next_button.disabled == (t == batch.n - 1)
    _assert_highlight_shows_the_module(app, t, b)


def _assert_highlight_shows_the_module(app: BatchStepper, t: int, b: ppo_clip.ClipBreakdown):
    """The yellow points sit at (r, kept term) and (r, N = 1 gradient) in their sign's column."""
    sign = int(np.sign(b.advantages[t]))
    figure = app.plot
    for column, marks in figure.marks.items():
        xs, ys = marks.point.get_data()
        if column != sign:
            assert len(xs) == 0
            continue
        panel = figure.columns[column]
        low, high = panel.objective_ax.get_ylim()
        r_end = panel.objective_ax.get_xlim()[1]
        if not (b.ratio[t] <= r_end and low <= b.objective_term[t] <= high):
            assert xs[0] == min(b.ratio[t], r_end)  # pinned to the edge, pointing outwards
            assert marks.point.get_marker() in (">", "^", "v")
            return
        assert (list(xs), list(ys)) == ([b.ratio[t]], [b.objective_term[t]])
        assert marks.point.get_marker() == "o"
        single = reference.sample(float(b.ratio[t]), float(b.advantages[t]), 1, app.batch.eps)
        assert marks.gradient_point.get_ydata()[0] == pytest.approx(single.grad, rel=1e-12)
        # The column's curve is drawn for this sample's advantage.
        grid = panel.objective.get_xdata()
        sweep = ppo_clip.ratio_sweep(grid, b.advantages[t], app.batch.eps)
        np.testing.assert_array_equal(panel.objective.get_ydata(), sweep.objective_term)
        xs, ys = (np.asarray(v) for v in panel.gradient.get_data())  # NaN gaps at the jumps
        np.testing.assert_array_equal(ys[~np.isnan(xs)], sweep.grad)


def _type(app: BatchStepper, new=None, old=None, advantages=None, eps=None) -> None:
    fields = (app.new_field, app.old_field, app.advantages_field, app.eps_field)
    for field, value in zip(fields, (new, old, advantages, eps), strict=True):
        if value is not None:
            field.value = value


# --------------------------------------------------------------------------
# Stepping
# --------------------------------------------------------------------------


def test_stepping_forward_and_back_shows_the_modules_numbers_at_every_step(stepper):
    n = stepper.batch.n
    assert n == 4
    for t in range(n):
        _assert_step_shows_the_module(stepper, t)
        stepper.next_button.click()
    _assert_step_shows_the_module(stepper, n - 1)  # at the end, Next changes nothing
    for t in reversed(range(n - 1)):
        stepper.prev_button.click()
        _assert_step_shows_the_module(stepper, t)
    stepper.prev_button.click()
    assert stepper.step == 0


def test_last_step_totals_are_the_contract_numbers(stepper):
    stepper.go(3)
    totals = stepper.totals()
    assert totals.complete
    assert_contract_numbers(totals.loss, totals.clip_fraction, totals.grad)
    b = _module(stepper.batch)  # this machine's module: the last bits of exp may differ elsewhere
    assert totals.loss == b.loss
    np.testing.assert_array_equal(totals.grad, b.grad)
    loss, fraction, grad = reference.contract(*ppo_clip.worked_example())
    assert totals.loss == pytest.approx(loss, rel=1e-15)
    assert totals.clip_fraction == fraction
    np.testing.assert_allclose(totals.grad, grad, rtol=1e-15)
    shown = _plain(stepper.sample_view.value)
    assert f"Loss so far = −(1/4) × sum = {exact(b.loss)}" in shown
    assert "✔ All three equal the module's ppo_clip_loss, clip_fraction and ppo_clip_grad" in shown
    assert f"gradient: {vector(b.grad)}" in shown
    assert "Clip fraction = 2/4 = 0.5" in shown


def test_worked_example_rules_are_written_with_the_actual_numbers(stepper):
    b = _module(stepper.batch)
    rules = []
    for _ in range(4):
        rules.append(stepper.readout().rule)
        stepper.next_button.click()
    assert rules[0].startswith(f"A = 1 > 0 and r = {exact(b.ratio[0])} > 1.2 = 1 + ε, so clipped")
    assert rules[1].startswith(f"A = 2 > 0 and r = {exact(b.ratio[1])} < 1.2 = 1 + ε, so not")
    assert rules[2].startswith(f"A = -1 < 0 and r = {exact(b.ratio[2])} < 0.8 = 1 − ε, so clipped")
    assert rules[3].startswith(f"A = -0.5 < 0 and r = {exact(b.ratio[3])} > 0.8 = 1 − ε, so not")


def test_slider_and_buttons_drive_the_same_step(stepper):
    stepper.slider.value = 2
    _assert_step_shows_the_module(stepper, 2)
    stepper.next_button.click()
    assert stepper.slider.value == 3
    stepper.go(-5)
    assert stepper.step == 0
    assert "1 of 4 · worked example" in _plain(stepper.position.value)


def test_edge_cases_preset_phrases_each_not_clipped_case(stepper):
    stepper.preset_buttons["edge cases"].click()
    batch = stepper.batch
    b = _module(batch)
    # exp(log 0.6 - log 0.5) lands on 1.2 on the machines tried, but one ulp away would be
    # correct too: the card must then say so.
    assert abs(b.ratio[0] - 1.2) <= 2 * math.ulp(1.2)
    assert abs(b.ratio[1] - 0.8) <= 2 * math.ulp(0.8)
    assert b.is_clipped.tolist()[2:] == [False] * 3
    rules = []
    for t in range(batch.n):
        _assert_step_shows_the_module(stepper, t)
        rules.append(stepper.readout().rule)
        stepper.next_button.click()
    if b.ratio[0] == 1.2:
        assert "r = 1.2 is exactly 1 + ε = 1.2, not above it; the comparison is strict" in rules[0]
    else:
        assert rules[0] == clip_rule(b.advantages[0], b.ratio[0], b.lower, b.upper, b.is_clipped[0])
    if b.ratio[1] == 0.8:
        assert "r = 0.8 is exactly 1 − ε = 0.8, not below it" in rules[1]
    else:
        assert rules[1] == clip_rule(b.advantages[1], b.ratio[1], b.lower, b.upper, b.is_clipped[1])
    assert "rose above the band" in rules[2]
    assert "fell below the band" in rules[3]
    assert rules[4].startswith("A = 0, so not clipped")
    # A = 0: no highlight in either column, and the headline says why.
    for marks in stepper.plot.marks.values():
        assert len(marks.point.get_xdata()) == 0
    headline = stepper.plot.headline.get_text()
    assert headline == "Sample 4: A = 0, so it adds 0 to loss and gradient (on neither curve)"
    stepper.go(2)
    assert stepper.plot.headline.get_text().endswith("(A = 0, not drawn: 4)")


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


def test_own_batch_is_walked_and_matches_the_module(stepper):
    new, old = "0.9, 0.2, 0.5, 0.05, 0.6", "0.3, 0.25, 0.5, 0.1, 0.5"
    _type(stepper, new, old, "1, -2, 0, 0.5, -1", "0.3")
    stepper.load_button.click()
    assert "Loaded your batch: N = 5 samples, ε = 0.3." in _plain(stepper.entry_message.value)
    batch = stepper.batch
    np.testing.assert_array_equal(batch.logp_new, np.log([0.9, 0.2, 0.5, 0.05, 0.6]))
    assert batch.eps == 0.3
    for t in range(batch.n):
        _assert_step_shows_the_module(stepper, t)
        stepper.next_button.click()
    assert stepper.totals().loss == ppo_clip.ppo_clip_loss(*batch.arguments())
    assert "log of π_new = 0.6" in _plain(stepper.sample_view.value)


def test_separators_brackets_and_unicode_minus_are_accepted(stepper):
    _type(stepper, "[0.7; 0.55  0.3,0.45]", "0.5 0.5 0.5 0.5", "1, 2, −1, −0.5", " 0.2 ")
    assert stepper.load()
    assert stepper.batch.advantages.tolist() == [1.0, 2.0, -1.0, -0.5]
    stepper.go(3)
    assert_contract_loss(stepper.totals().loss)


def test_log_mode_toggle_rewrites_the_fields_and_back_exactly(stepper):
    typed = (stepper.new_field.value, stepper.old_field.value)
    assert typed == ("0.7, 0.55, 0.3, 0.45", "0.5, 0.5, 0.5, 0.5")
    stepper.mode.value = "log-probabilities"
    assert stepper.new_field.description == "log π_new"
    assert stepper.new_field.value.split(", ")[0] == repr(float(np.log(0.7)))
    assert "now hold log-probabilities" in _plain(stepper.entry_message.value)
    assert stepper.load()
    np.testing.assert_array_equal(stepper.batch.logp_new, ppo_clip.worked_example().logp_new)
    assert "typed as a log-probability" in _plain(stepper.sample_view.value)
    stepper.mode.value = "probabilities"
    assert (stepper.new_field.value, stepper.old_field.value) == typed
    assert stepper.new_field.description == "π_new"


def test_a_field_that_cannot_be_converted_is_left_as_typed(stepper):
    _type(stepper, new="0.7, 1.5, 0.3, 0.45")
    stepper.mode.value = "log-probabilities"
    assert stepper.new_field.value == "0.7, 1.5, 0.3, 0.45"
    assert "π_new could not be converted and was left as typed" in _plain(
        stepper.entry_message.value
    )


def test_overflowing_ratio_shows_inf_and_never_nan(stepper):
    stepper.mode.value = "log-probabilities"
    _type(stepper, "0, 0, -0.5", "-1000, -1000, -0.5", "-1, 0, 1", "0.2")
    assert stepper.load()
    assert math.isinf(_module(stepper.batch).ratio[0])
    for t in range(3):
        _assert_step_shows_the_module(stepper, t)
        assert "nan" not in _plain(stepper.sample_view.value).lower()
        stepper.next_button.click()
    stepper.go(0)
    assert stepper.readout()["ratio"] == math.inf
    assert "the loss is +inf" in stepper.readout().rule
    marks = stepper.plot.marks[-1]
    assert marks.point.get_marker() == ">"  # drawn at the axis edge, pointing right
    assert marks.point.get_xdata()[0] == stepper.plot.limits.r_end
    stepper.go(1)
    assert "even though r is infinite" in stepper.readout().rule
    stepper.go(2)
    assert "Loss so far = −(1/3) × sum = inf" in _plain(stepper.sample_view.value)


def test_large_ratios_widen_the_axis_up_to_a_cap(stepper):
    _type(stepper, "0.9, 0.9", "0.3, 0.1", "1, -1", "0.2")
    assert stepper.load()
    assert _module(stepper.batch).ratio[1] == pytest.approx(9.0)
    ax = stepper.plot.columns[+1].objective_ax
    assert ax.get_xlim() == (0.0, 6.0)
    assert stepper.plot.columns[+1].objective.get_xdata()[-1] == 6.0
    stepper.next_button.click()
    marks = stepper.plot.marks[-1]
    assert marks.point.get_marker() == ">"
    assert (
        marks.label.get_text()
        == f"sample 1 (r = {exact(_module(stepper.batch).ratio[1])}, off the axis)"
    )


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
    assert "All three equal the module's" in _plain(stepper.sample_view.value)
    assert len(stepper.sample_view.value) < 20_000  # long vectors are elided, not dumped
    stepper.table_box.selected_index = 0
    assert "… and 3896 more samples" in _plain(stepper.table.value)


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
    ("probabilities", "0.9", "0.5", "1e308", "0.2", "A, sample 0: 1e+308 is too large to plot"),
    ("probabilities", "0.5", "0.5", "-1e308", "0.2", "A, sample 0: -1e+308 is too large to plot"),
    ("probabilities", "0.9", "0.5", "1000001", "0.2", "A, sample 0: 1000001 is too large to plot"),
]


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
        "png": app.view.png,
        "limits": [(ax.get_xlim(), ax.get_ylim()) for ax in app.plot.figure.axes],
        "headline": app.plot.headline.get_text(),
        "points": [
            np.asarray(marks.point.get_data()).tolist() for marks in app.plot.marks.values()
        ],
        "curve": app.plot.columns[-1].objective.get_ydata().tolist(),
    }


@pytest.mark.parametrize(
    ("mode", "new", "old", "advantages", "eps", "fragment"),
    BAD_ENTRIES,
    ids=[entry[-1][:32] for entry in BAD_ENTRIES],
)
def test_bad_entry_shows_a_message_and_changes_nothing_on_screen(
    capsys, recwarn, mode, new, old, advantages, eps, fragment
):
    app = BatchStepper("two clip fractions")
    app.table_box.selected_index = 0
    app.go(2)
    if mode != app.mode.value:
        app.mode.value = mode
    before = _snapshot(app)
    _type(app, new, old, advantages, eps)
    app.load_button.click()
    shown = _plain(app.entry_message.value)
    assert fragment in shown
    assert "ppo-message-error" in app.entry_message.value
    assert "Still showing the last batch that loaded (two clip fractions, N = 4)." in shown
    assert "Traceback" not in shown
    assert _snapshot(app) == before
    assert "Sample 2 (3 of 4)" in _plain(app.sample_view.value)
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")
    # A preset loads again.
    app.preset_buttons["worked example"].click()
    assert app.batch.name == "worked example"


def test_largest_accepted_advantage_loads_without_warnings(capsys, recwarn, stepper):
    _type(stepper, "0.9, 0.2", "0.5, 0.5", "1e6, -1e6", "0.2")
    assert stepper.load()
    assert "Loaded your batch: N = 2 samples" in _plain(stepper.entry_message.value)
    for ax in stepper.plot.figure.axes:
        assert all(math.isfinite(v) for v in (*ax.get_xlim(), *ax.get_ylim()))
    stepper.next_button.click()
    _assert_step_shows_the_module(stepper, 1)
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")


def test_one_sample_is_not_called_samples(stepper):
    _type(stepper, "0.9", "0.5", "1", "0.2")
    assert stepper.load()
    shown = _plain(stepper.entry_message.value)
    assert "N = 1 sample," in shown
    assert "1 samples" not in shown


def test_figure_limits_refuse_a_batch_that_cannot_be_drawn():
    batch = StepperBatch(np.log([0.9]), np.log([0.5]), np.array([1e308]), 0.2)
    with pytest.raises(
        EntryError, match="The positive advantages reach inf on the plot, too large"
    ):
        figure_limits(batch)
    with pytest.raises(EntryError, match="too large to draw"):
        BatchStepper(batch)


def test_every_problem_is_listed_at_once():
    with pytest.raises(EntryError) as raised:
        parse_batch("0.7, 2", "0.5, 0.5", "1, y", "3")
    lines = str(raised.value).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("π_new, sample 1: 2 is not a probability")
    assert lines[1].startswith("A, sample 1: “y” is not a number (use digits and a decimal point")
    assert lines[2] == "ε = 3 is outside [0, 1]; try 0.1, 0.2 or 0.3."


def test_too_many_samples_is_refused():
    values = ", ".join(["0.5"] * 4097)
    with pytest.raises(EntryError, match="At most 4096 samples"):
        parse_batch(values, values, ", ".join(["1"] * 4097), "0.2")


def test_a_batch_made_in_code_names_its_bad_argument():
    with pytest.raises(ValueError, match=r"prob_old\[1\] is 1.5; a probability is in \(0, 1\]"):
        StepperBatch.from_probabilities([0.5, 0.5], [0.5, 1.5], [1, 1])
    with pytest.raises(ValueError, match="inputs must have the same length"):
        StepperBatch(np.log([0.5]), np.log([0.5, 0.5]), np.array([1.0]), 0.2)
    with pytest.raises(ValueError, match="eps must be between 0 and 1"):
        StepperBatch.from_probabilities([0.5], [0.5], [1.0], eps=2.0)
    with pytest.raises(ValueError, match="name must be one of"):
        preset_batch("no such preset")


# --------------------------------------------------------------------------
# The two clip fractions
# --------------------------------------------------------------------------


def test_disagreement_preset_shows_one_against_one_half(stepper):
    stepper.preset_buttons["two clip fractions"].click()
    b = _module(stepper.batch)
    np.testing.assert_allclose(b.ratio, [1.5, 1.5, 0.5, 0.5], rtol=1e-15)
    np.testing.assert_array_equal(b.advantages, [1.0, -1.0, 1.0, -1.0])
    sign_blind = np.mean([abs(r - 1) > 0.2 for r in b.ratio.tolist()])
    samples = reference.batch(*stepper.batch.arguments())
    assert sign_blind == 1.0
    assert sum(s.is_clipped for s in samples) / 4 == 0.5
    shown = _plain(stepper.clip_fractions.value)
    assert "this project, TRL, verl: clip_fraction 0.5 gradient switched off" in shown
    assert "Spinning Up: clipfrac 1 outside the band, sign ignored" in shown
    assert "2 of 4 samples: 0, 3" in shown
    assert "4 of 4 samples: 0, 1, 2, 3" in shown
    assert "They disagree: samples 1, 2 left the band the unfavourable way" in shown


def test_worked_example_fractions_agree(stepper):
    shown = _plain(stepper.clip_fractions.value)
    assert "On this batch the two agree." in shown
    assert shown.count("2 of 4 samples: 0, 2") == 2


# --------------------------------------------------------------------------
# Walking without the widgets, against the reference
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
def test_walk_ends_at_the_contract_numbers_and_verdicts_match_the_reference(data, eps):
    new, old, advantages = (list(column) for column in zip(*data, strict=True))
    batch = parse_batch(
        *(", ".join(repr(v) for v in column) for column in (new, old, advantages)), repr(eps)
    )
    b = batch.breakdown
    for t in range(batch.n):
        readout = sample_readout(batch, t)
        expected = reference.sample(float(b.ratio[t]), advantages[t], batch.n, eps)
        assert readout.is_clipped == expected.is_clipped
        assert ("so clipped" in readout.rule) == readout.is_clipped
        assert readout["grad"] == pytest.approx(expected.grad, rel=1e-12, abs=1e-300)
    totals = running_totals(batch, batch.n - 1)
    samples = reference.batch(*batch.arguments())
    scale = sum(abs(s.objective_term) for s in samples) / batch.n
    assert totals.loss == pytest.approx(reference.loss(samples), rel=1e-12, abs=1e-12 * scale)
    assert totals.clip_fraction == ppo_clip.clip_fraction(*batch.arguments())
    np.testing.assert_array_equal(totals.grad, ppo_clip.ppo_clip_grad(*batch.arguments()))
    assert compare_with_module(batch).all_equal


def test_compare_with_module_shows_the_three_numbers_side_by_side():
    check = compare_with_module(ppo_clip.worked_example())
    assert check.all_equal
    b = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    shown = _plain(check._repr_html_()).replace(" ", "")
    assert f"loss{exact(b.loss)}{exact(b.loss)}✔yes" in shown
    assert f"stepper {vector(b.grad)}  ppo_clip" in repr(check)


# --------------------------------------------------------------------------
# Display and layout
# --------------------------------------------------------------------------


def test_without_widgets_the_fallback_shows_the_figure_table_and_totals(stepper):
    stepper.go(1)
    bundle = stepper._repr_mimebundle_()
    assert bundle[WIDGET_VIEW_MIME]["model_id"] == stepper.widget.model_id
    assert bundle["text/plain"].startswith("PPO's clipped loss, one sample at a time")
    png = Image.open(io.BytesIO(base64.b64decode(bundle["image/png"])))
    assert png.size[0] >= 900
    page = bundle["text/html"]
    assert "data:image/png;base64," in page
    assert 'class="ppo-table ppo-batch-table"' in page
    shown = _plain(page)
    assert "Worked example: N = 4, ε = 0.2" in shown
    loss = _module(stepper.batch).loss
    assert f"Loss so far = −(1/4) × sum = {exact(loss)}" in shown
    assert "✔ All three equal the module's" in shown
    assert "Two clip fractions on this batch" in shown


def test_browser_hooks_are_on_the_controls(stepper):
    """The classes the browser tests and benchmarks drive the stepper by."""
    assert {MAIN_CONTROL, "ppo-control-sample"} <= set(stepper.slider._dom_classes)
    assert "ppo-prev" in stepper.prev_button._dom_classes
    assert "ppo-next" in stepper.next_button._dom_classes
    assert "ppo-sample-view" in stepper.sample_view._dom_classes


def test_stepper_without_inputs_still_steps():
    app = BatchStepper(inputs=False)
    assert app.inputs not in app.widget.children
    app.next_button.click()
    _assert_step_shows_the_module(app, 1)


def test_whole_batch_table_starts_closed_and_opens_at_the_current_sample(stepper):
    assert stepper.table_box.selected_index is None
    assert stepper.table.value == ""  # no answers before the reader steps
    stepper.go(2)
    stepper.table_box.selected_index = 0
    rows = re.findall(r"<tr( class=\"[^\"]*\")?>", stepper.table.value)[1:]
    assert [row.strip() for row in rows] == [
        'class="ppo-row-clipped"',
        "",
        'class="ppo-row-current"',
        'class="ppo-row-unseen"',
    ]
    stepper.next_button.click()
    assert 'class="ppo-row-current"' in stepper.table.value.split("</tr>")[4]


def test_steps_redraw_in_place_with_fixed_axes(stepper):
    figure = stepper.plot.figure
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in figure.axes]
    pngs = {stepper.view.png}
    for _ in range(3):
        stepper.next_button.click()
        pngs.add(stepper.view.png)
    assert len(pngs) == 4
    assert stepper.view.output.children == (stepper.view.output.image,)
    assert stepper.view.output.image.value == stepper.view.png
    assert [(ax.get_xlim(), ax.get_ylim()) for ax in figure.axes] == limits


def test_after_a_batch_with_another_eps_each_step_shows_the_whole_figure(stepper):
    stepper.go(2)
    _type(stepper, "0.9, 0.3, 0.6", "0.5, 0.5, 0.5", "1, -1, 1", "0.35")
    assert stepper.load()
    for step in (1, 2, 0):
        stepper.go(step)
        assert_same_picture(stepper.view.png, stepper.plot.figure)
    band = stepper.plot.columns[+1].bands[0]
    assert (band.get_x(), band.get_x() + band.get_width()) == (0.65, 1.35)
    assert (
        stepper.plot.columns[+1].objective_ax.get_title() == "A > 0: flat (clipped) where r > 1.35"
    )


def test_save_draws_the_current_sample_on_a_slide(stepper, tmp_path, monkeypatch):
    made = []
    make_plot = stepper.make_plot
    monkeypatch.setattr(
        stepper, "make_plot", lambda slides: made.append(make_plot(slides)) or made[-1]
    )
    stepper.go(2)
    png, svg = stepper.save(tmp_path / "stepper")
    assert (png.exists(), svg.exists()) == (True, True)
    (slide,) = made
    assert tuple(slide.figure.get_size_inches()) == SLIDE_SIZE
    assert slide.headline.get_text() == "Sample 2: A = -1, r ≈ 0.6, clipped"
    assert slide.marks[-1].point.get_xdata()[0] == stepper.batch.breakdown.ratio[2]


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------


def _markdown(notebook: nbformat.NotebookNode) -> str:
    """Every markdown cell, with line breaks and runs of spaces as one space."""
    cells = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
    return " ".join(" ".join(cells).split())


def test_notebook_prose_quotes_the_modules_numbers():
    prose = _markdown(nbformat.read(NOTEBOOK, as_version=4))
    example = ppo_clip.worked_example()
    b = ppo_clip.clip_breakdown(*example)
    loss, grad = b.loss, b.grad
    two = preset_batch("two clip fractions").breakdown
    zero_eps = ppo_clip.clip_breakdown(*example[:3], 0.0)
    kept_sum = float(b.objective_term.sum())
    assert_contract_loss(loss)  # the prose quotes the contract's loss, the same on every machine
    sentences = [
        f"the loss `{exact(CONTRACT_LOSS)}`, the clip fraction `{exact(b.clip_fraction)}` and the "
        f"gradient `{vector(grad, each=rounded)}`",
        # The main line: rounded numbers, short sentences.
        f"The ratio is {rounded(b.ratio[2])} up to the last digit.",
        f"the gradient entry is $-({rounded(b.ratio[3])} \\times (-0.5))/4 = {rounded(grad[3])}$.",
        f"the kept terms sum to $1.2 + 2.2 - 0.8 - 0.45 = {rounded(kept_sum)}$, and the loss is "
        f"$-\\frac14$ of that: `{exact(CONTRACT_LOSS)}`, the contract's number, which is "
        f"${rounded(loss)}$ up to the last digit.",
        f"Two of the four samples are clipped: a clip fraction of `{exact(b.clip_fraction)}`.",
        f"so the sign-blind count is `{two.band_fraction!r}`",
        f"this project's count is `{two.clip_fraction!r}`",
        "all four are clipped, every gradient entry is 0, and the loss is "
        f"`{exact(zero_eps.loss)}`",
    ]
    for sentence in sentences:
        assert sentence in prose, sentence
    assert zero_eps.clip_fraction == 1.0
    assert not zero_eps.grad.any()
    assert PRESETS["two clip fractions"].label == "Clip fractions disagree"
    assert f"**{PRESETS['two clip fractions'].label}**: ratios $[1.5, 1.5, 0.5, 0.5]$" in prose


def test_last_digit_details_are_computed_in_the_cell_under_the_collapsed_part():
    """The collapsed part explains; the cell under it shows this machine's digits."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (index,) = [
        i
        for i, cell in enumerate(notebook.cells)
        if "<details><summary>For implementers</summary>" in cell.source
    ]
    cell = notebook.cells[index + 1]
    assert cell.cell_type == "code"
    assert "walk.ratio.tolist(), walk.grad.tolist()" in cell.source


@pytest.mark.notebook
def test_notebook_runs_clean_and_checks_the_totals_itself():
    notebook, _ = run_committed(NOTEBOOK)
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)
    shown = "\n".join(
        str(output.get("data", {}))
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    assert "-0.5375000000000001" in shown
    assert "✔ yes" in shown
    assert "assert check.all_equal" in "".join(
        cell.source for cell in notebook.cells if cell.cell_type == "code"
    )
