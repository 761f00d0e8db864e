"""Headless tests of notebook 2's stepper: what the reader sees is the module's output.

The stepper is driven as a reader drives it (buttons, the slider, typing into the fields, the
mode toggle, the presets).  Every number on screen is checked against a fresh call of
:mod:`ppo_clip`, computed in the same run (so the tests hold on any CPU), and each verdict
against the plain-Python reference in ``tests/reference.py``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import reference
from helpers import (
    CONTRACT_LOSS,
    assert_contract_loss,
    assert_contract_numbers,
    assert_panel_draws,
    assert_states,
    markdown_of,
    plain,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from test_app import assert_shows_the_full_figure

import ppo_clip
from ppo_viz.numbers import exact, exact_or_approx, rounded, vector
from ppo_viz.stepper import PRESETS, BatchStepper, StepperBatch, compare_with_module, preset_batch
from ppo_viz.stepper.app import R_AXIS_CAP, figure_limits
from ppo_viz.stepper.batch import (
    LOGP_MIN,
    MAX_ABS_ADVANTAGE,
    MAX_SAMPLES,
    parse_batch,
)
from ppo_viz.stepper.text import clip_rule, sample_rows

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_worked_example.ipynb"


@pytest.fixture(scope="module")
def shared() -> BatchStepper:
    """One stepper for the tests (drawing a new one takes about a second)."""
    return BatchStepper()


@pytest.fixture
def stepper(shared: BatchStepper) -> BatchStepper:
    """The shared stepper, back on the worked example's first sample."""
    shared.load_preset("worked example")
    shared.entry_message.value = ""
    return shared


def module(batch: StepperBatch) -> ppo_clip.ClipBreakdown:
    """A fresh breakdown from the module, on copies of the batch's inputs."""
    return ppo_clip.clip_breakdown(*(np.copy(a) for a in batch.arguments()[:3]), batch.eps)


def type_in(app: BatchStepper, new=None, old=None, advantages=None, eps=None) -> None:
    fields = (app.new_field, app.old_field, app.advantages_field, app.eps_field)
    for field, value in zip(fields, (new, old, advantages, eps), strict=True):
        if value is not None:
            field.value = value


def assert_step_shows_the_module(app: BatchStepper, t: int) -> None:
    """The card, the totals, the buttons and the figure at sample ``t``."""
    batch, b = app.batch, module(app.batch)
    shown = plain(app.sample_view.value)
    assert "nan" not in shown.lower()
    expected = {
        "log π_old": batch.logp_old[t],
        "log π_new": batch.logp_new[t],
        "log-ratio": b.log_ratio[t],
        "ratio r": b.ratio[t],
        "advantage A": b.advantages[t],
        "r·A": b.unclipped_term[t],
        f"clip(r, {exact(b.lower)}, {exact(b.upper)})·A": b.clipped_term[t],
        "min keeps": b.objective_term[t],
        "contribution to the loss": b.loss_contribution[t],
        "gradient entry": ppo_clip.ppo_clip_grad(*batch.arguments())[t],
    }
    for label, value in expected.items():
        assert f"{label} {exact(value)}" in shown, (t, label, exact(value))
    independent = reference.sample(float(b.ratio[t]), float(b.advantages[t]), batch.n, batch.eps)
    badge = "clipped" if independent.is_clipped else "not clipped"
    assert f"Sample {t} ({t + 1} of {batch.n} · {batch.name}) {badge}" in shown
    rule = clip_rule(b.advantages[t], b.ratio[t], b.lower, b.upper, independent.is_clipped)
    assert ("so clipped" in rule) == independent.is_clipped
    assert rule in shown
    assert exact(float(np.sum(b.objective_term[: t + 1]))) in shown
    assert f"Loss so far = −(1/{batch.n}) × sum = {exact(b.partial_loss(t + 1))}" in shown
    assert f"Clipped so far: {np.count_nonzero(b.is_clipped[: t + 1])} of {t + 1} seen" in shown
    assert app.step == app.slider.value == t
    assert (app.prev_button.disabled, app.next_button.disabled) == (t == 0, t == batch.n - 1)
    assert_figure_marks_the_sample(app, t, b)


def assert_walk_shows_the_module(app: BatchStepper) -> None:
    """Every sample of the batch, in turn, shows the module's numbers."""
    for t in range(app.batch.n):
        app.go(t)
        assert_step_shows_the_module(app, t)


def assert_figure_marks_the_sample(app: BatchStepper, t: int, b: ppo_clip.ClipBreakdown) -> None:
    """Yellow points at (r, kept term) and (r, N = 1 gradient) in the column of A's sign, on
    the curve for this sample's advantage; the other samples at their own terms."""
    sign = int(np.sign(b.advantages[t]))
    for column, marks in app.plot.marks.items():
        xs, ys = marks["point"].get_data()
        if column != sign:
            assert len(xs) == 0
            continue
        panel = app.plot.columns[column]
        (low, high), r_end = panel.objective_ax.get_ylim(), panel.objective_ax.get_xlim()[1]
        if not (b.ratio[t] <= r_end and low <= b.objective_term[t] <= high):
            assert xs[0] == min(b.ratio[t], r_end)  # pinned to the edge, pointing outwards
            assert marks["point"].get_marker() in (">", "^", "v")
            return
        assert (list(xs), list(ys)) == ([b.ratio[t]], [b.objective_term[t]])
        single = reference.sample(float(b.ratio[t]), float(b.advantages[t]), 1, app.batch.eps)
        assert marks["gradient"].get_ydata()[0] == pytest.approx(single.grad, rel=1e-12)
        assert_panel_draws(panel, b.advantages[t], app.batch.eps)  # the curve of its own A
        same_sign = np.flatnonzero((np.sign(b.advantages) == sign) & np.isfinite(b.ratio))
        points_x, points_y = panel.samples[0].get_data()
        np.testing.assert_array_equal(points_x, b.ratio[same_sign])
        for r, a, y in zip(points_x, b.advantages[same_sign], points_y, strict=True):
            assert y == ppo_clip.ratio_sweep([r], a, app.batch.eps).objective_term[0]


# -- stepping ---------------------------------------------------------------------------------


def test_stepping_forward_and_back_shows_the_modules_numbers_at_every_step(stepper):
    n = stepper.batch.n
    for t in range(n):
        assert_step_shows_the_module(stepper, t)
        stepper.next_button.click()
    assert_step_shows_the_module(stepper, n - 1)  # at the end, Next changes nothing
    for t in reversed(range(n - 1)):
        stepper.prev_button.click()
        assert_step_shows_the_module(stepper, t)
    stepper.slider.value = 2  # the slider, the buttons and go drive the same step
    assert_step_shows_the_module(stepper, 2)
    stepper.next_button.click()
    assert stepper.slider.value == 3
    stepper.go(-5)
    assert stepper.step == 0


def test_the_last_step_shows_the_contract_numbers_and_the_check(stepper):
    stepper.go(3)
    b = module(stepper.batch)
    assert_contract_numbers(b.partial_loss(4), b.clip_fraction, b.grad)
    shown = plain(stepper.sample_view.value)
    loss = ppo_clip.ppo_clip_loss(*stepper.batch.arguments())
    assert f"Loss so far = −(1/4) × sum = {exact(loss)}" in shown
    assert f"Clip fraction = 2/4 = {exact(b.clip_fraction)}" in shown
    assert "✔ All three equal the module's ppo_clip_loss, clip_fraction and ppo_clip_grad" in shown
    assert f"gradient: {vector(ppo_clip.ppo_clip_grad(*stepper.batch.arguments()))}" in shown
    stepper.go(2)
    assert "1 more to go" in plain(stepper.sample_view.value)
    check = compare_with_module()  # what the notebook's cell shows, as a table
    assert f"loss {exact(loss)} {exact(loss)} ✔ yes" in plain(check._repr_html_())
    assert compare_with_module(ppo_clip.worked_example()) == check
    assert compare_with_module("two clip fractions").all_equal


def test_edge_cases_preset_explains_each_verdict_with_this_machines_ratio(stepper):
    stepper.preset_buttons["edge cases"].click()
    b = module(stepper.batch)
    assert b.is_clipped.tolist()[2:] == [False] * 3
    assert_walk_shows_the_module(stepper)
    # The ratios are 1.2 and 0.8 up to rounding; the card says what this machine computed.
    for t, edge, name in ((0, b.upper, "1 + ε"), (1, b.lower, "1 − ε")):
        rule = clip_rule(b.advantages[t], b.ratio[t], b.lower, b.upper, b.is_clipped[t])
        assert abs(b.ratio[t] - edge) <= 4 * math.ulp(edge)
        if b.ratio[t] == edge:
            assert f"r = {exact(edge)} is exactly {name} = {exact(edge)}" in rule
            assert "so not clipped" in rule
        else:
            assert f"r = {exact(b.ratio[t])}" in rule
            assert "in the last place from the edge" in rule
    stepper.go(4)
    for marks in stepper.plot.marks.values():
        assert len(marks["point"].get_xdata()) == 0  # A = 0: on neither curve
    assert stepper.plot.headline.get_text().startswith("Sample 4: A = 0, so it adds 0")


@pytest.mark.parametrize(
    ("advantage", "ratio", "clipped", "phrase"),
    [
        (1.0, 1.4, True, "A = 1 > 0 and r = 1.4 > 1.2 = 1 + ε, so clipped"),
        (1.0, 1.2, False, "r = 1.2 is exactly 1 + ε = 1.2, not above it"),
        (1.0, 1.2000000000000002, True, "1 unit in the last place from the edge"),
        (2.0, 1.1, False, "A = 2 > 0 and r = 1.1 < 1.2 = 1 + ε, so not clipped"),
        (1.0, 0.5, False, "fell below the band"),
        (-1.0, 0.6, True, "A = -1 < 0 and r = 0.6 < 0.8 = 1 − ε, so clipped"),
        (-1.0, 0.8, False, "r = 0.8 is exactly 1 − ε = 0.8, not below it"),
        (-0.5, 0.9, False, "A = -0.5 < 0 and r = 0.9 > 0.8 = 1 − ε, so not"),
        (-1.0, 1.5, False, "rose above the band"),
        (-1.0, math.inf, False, "the loss is +inf"),
        (0.0, math.inf, False, "even though r is infinite"),
    ],
)
def test_clip_rule_phrasings(advantage, ratio, clipped, phrase):
    rule = clip_rule(advantage, ratio, 0.8, 1.2, clipped)
    assert phrase in rule
    assert ("so clipped" in rule) == clipped


# -- your own batch -----------------------------------------------------------------------------


def test_a_typed_batch_is_walked_and_matches_the_module(stepper):
    type_in(
        stepper, "[0.9; 0.2  0.5,0.05, 0.6]", "0.3 0.25 0.5 0.1 0.5", "1, −2, 0, 0.5, -1", " 0.3 "
    )
    stepper.eps_field._handle_custom_msg({"event": "submit"}, [])  # Enter in a field loads it
    assert "Loaded your batch: N = 5, ε = 0.3." in plain(stepper.entry_message.value)
    np.testing.assert_array_equal(stepper.batch.logp_new, np.log([0.9, 0.2, 0.5, 0.05, 0.6]))
    assert stepper.batch.advantages.tolist() == [1.0, -2.0, 0.0, 0.5, -1.0]
    assert_walk_shows_the_module(stepper)
    assert "log of π_new = 0.6" in plain(stepper.sample_view.value)
    assert compare_with_module(stepper.batch).all_equal


def test_the_toggle_rewrites_the_fields_exactly_and_back(stepper):
    typed = (stepper.new_field.value, stepper.old_field.value)
    assert typed == ("0.7, 0.55, 0.3, 0.45", "0.5, 0.5, 0.5, 0.5")
    stepper.mode.value = "log-probabilities"
    assert stepper.new_field.description == "log π_new"
    assert stepper.new_field.value == ", ".join(exact(v) for v in np.log([0.7, 0.55, 0.3, 0.45]))
    assert "now hold log-probabilities" in plain(stepper.entry_message.value)
    assert stepper.load()
    np.testing.assert_array_equal(stepper.batch.logp_new, ppo_clip.worked_example().logp_new)
    assert "typed as a log-probability" in plain(stepper.sample_view.value)
    stepper.mode.value = "probabilities"
    assert (stepper.new_field.value, stepper.old_field.value) == typed
    assert stepper.new_field.description == "π_new"
    stepper.preset_buttons["two clip fractions"].click()  # a preset in probabilities
    assert stepper.new_field.value == "0.75, 0.75, 0.25, 0.25"


@pytest.mark.parametrize(
    ("to", "typed"),
    [
        *[("log-probabilities", typed) for typed in ("0.7, 1.5, 0.3, 0.45", "0.5, x", "")],
        *[("probabilities", typed) for typed in ("-0.5, 2", "0.5, x", "")],
    ],
)
def test_a_field_that_cannot_be_converted_is_left_as_typed(stepper, to, typed):
    """1.5 is no probability, 2 no log-probability; junk and nothing are neither."""
    if to == "probabilities":
        stepper.mode.value = "log-probabilities"
    type_in(stepper, new=typed)
    stepper.mode.value = to
    assert stepper.new_field.value == typed
    name = "π_new" if to == "log-probabilities" else "log π_new"
    assert f"{name} could not be converted: left as typed" in plain(stepper.entry_message.value)
    old = exact(np.log(0.5)) if to == "log-probabilities" else "0.5"
    assert stepper.old_field.value.startswith(old)


def test_an_overflowing_ratio_shows_inf_and_never_nan(stepper):
    stepper.mode.value = "log-probabilities"
    type_in(stepper, "0, 0, -0.5", "-1000, -1000, -0.5", "-1, 0, 1", "0.2")
    assert stepper.load()
    assert math.isinf(module(stepper.batch).ratio[0])
    assert_walk_shows_the_module(stepper)  # never NaN on the card
    stepper.go(0)
    assert "the loss is +inf" in plain(stepper.sample_view.value)
    marks = stepper.plot.marks[-1]
    assert marks["point"].get_marker() == ">"  # at the axis' end, pointing right
    assert marks["point"].get_xdata()[0] == stepper.plot.columns[-1].objective_ax.get_xlim()[1]
    stepper.go(1)
    assert "even though r is infinite" in plain(stepper.sample_view.value)
    stepper.go(2)
    assert "Loss so far = −(1/3) × sum = inf" in plain(stepper.sample_view.value)


def test_large_ratios_widen_the_ratio_axis_up_to_its_cap(stepper):
    type_in(stepper, "0.9, 0.9", "0.3, 0.1", "1, -1", "0.2")
    assert stepper.load()
    r = module(stepper.batch).ratio
    assert r[1] > R_AXIS_CAP
    assert stepper.plot.columns[+1].objective_ax.get_xlim() == (0.0, R_AXIS_CAP)
    assert stepper.plot.columns[+1].objective.get_xdata()[-1] == R_AXIS_CAP
    stepper.go(1)
    assert stepper.plot.marks[-1]["point"].get_marker() == ">"
    headline = f"Sample 1: A = -1, r {exact_or_approx(r[1])}, off the axis"
    assert stepper.plot.headline.get_text().startswith(headline)


def test_the_largest_contract_batch_loads_and_ends_at_the_modules_numbers(stepper):
    rng = np.random.default_rng(2)
    columns = rng.uniform(0.01, 1.0, MAX_SAMPLES), rng.uniform(0.01, 1.0, MAX_SAMPLES)
    columns += (rng.normal(size=MAX_SAMPLES),)
    type_in(stepper, *(", ".join(repr(float(v)) for v in c) for c in columns), "0.2")
    assert stepper.load()
    stepper.go(MAX_SAMPLES - 1)
    assert compare_with_module(stepper.batch).all_equal
    assert "All three equal the module's" in plain(stepper.sample_view.value)
    assert len(stepper.sample_view.value) < 20_000  # long vectors are elided, not dumped


#: (mode, what is typed into which field, part of the message)
BAD_ENTRIES = [
    ("probabilities", {"new": "0.7, 0.55, 0.3"}, "but π_new has 3, π_old has 4, A has 4."),
    ("probabilities", {"new": "0.7, 1.5, 0.3, 0.45"}, "π_new, sample 1: “1.5” is not a"),
    ("probabilities", {"new": "0.7, 0.55, 0, 0.45"}, "“0” is not a probability"),
    ("probabilities", {"new": "0.7, abc, 0.3, 0.45"}, "π_new, sample 1: “abc” is no finite"),
    ("probabilities", {"advantages": "1, nan, 1, 1"}, "A, sample 1: “nan” is no finite number"),
    ("probabilities", {"advantages": "1, 2, -inf, 1"}, "A, sample 2: “-inf” is no finite"),
    ("probabilities", {"eps": "1.5"}, "ε, sample 0: “1.5” is outside [0, 1]"),
    ("probabilities", {"eps": "0.1, 0.2"}, "ε takes a single number"),
    ("probabilities", {"new": ""}, "π_new is empty"),
    ("probabilities", {"eps": " "}, "ε is empty"),
    ("log-probabilities", {"new": "-0.3, 0.7, -1, -1"}, "“0.7” is not a log-prob"),
    ("log-probabilities", {"old": "-0.5, -2000, -1, -1"}, "“-2000” is not a log-prob"),
    ("probabilities", {"advantages": "1e308"}, "A, sample 0: “1e308” is too large to plot"),
    ("probabilities", {"advantages": "-1000001"}, "“-1000001” is too large to plot"),
    (
        "probabilities",
        dict.fromkeys(("new", "old", "advantages"), ", ".join(["0.5"] * (MAX_SAMPLES + 1))),
        f"At most {MAX_SAMPLES} samples",
    ),
]


def snapshot(app: BatchStepper) -> dict:
    """What a reader sees of the stepper: the batch, every readout and the figure's pixels."""
    return {
        "batch": app.batch,
        "step": (app.step, app.slider.max),
        "html": (app.sample_view.value, app.clip_fractions.value, app.plot.headline.get_text()),
        "pixels": np.asarray(app.canvas.buffer_rgba()).tobytes(),
        "limits": [(ax.get_xlim(), ax.get_ylim()) for ax in app.figure.axes],
    }


@pytest.mark.parametrize(("mode", "typed", "said"), BAD_ENTRIES)
def test_a_bad_entry_shows_a_message_and_changes_nothing_on_screen(
    capsys, recwarn, stepper, mode, typed, said
):
    app = stepper
    app.go(2)
    app.mode.value = mode
    before = snapshot(app)
    recwarn.clear()
    if len(typed.get("advantages", "1, 1, 1, 1").split(",")) == 1:  # a batch of one
        typed = {"new": "0.9", "old": "0.5", "eps": "0.2", **typed}
    type_in(app, **typed)
    app.load_button.click()
    shown = plain(app.entry_message.value)
    assert said in shown
    assert "ppo-message-error" in app.entry_message.value
    assert "Still showing the last batch that loaded, worked example." in shown
    assert snapshot(app) == before
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")


def test_the_largest_advantage_draws_without_warnings_and_larger_values_are_pinned(
    capsys, recwarn, stepper
):
    recwarn.clear()
    limit = exact(MAX_ABS_ADVANTAGE)
    type_in(stepper, "0.9, 0.2", "0.5, 0.5", f"{limit}, -{limit}", "0.2")
    assert stepper.load()
    stepper.go(1)
    assert_step_shows_the_module(stepper, 1)
    for ax in stepper.figure.axes:
        assert all(math.isfinite(v) for v in (*ax.get_xlim(), *ax.get_ylim()))
    assert [str(w.message) for w in recwarn] == []
    assert capsys.readouterr() == ("", "")
    # Code can make a batch beyond what the fields take: r·A overflows, the card says inf.
    batch = StepperBatch(np.log([0.9, 0.5]), np.log([0.5, 0.5]), np.array([1e308, -1.0]), 0.2)
    r_end, reaches = figure_limits(batch)
    assert np.isfinite([r_end, reaches[+1], reaches[-1]]).all()
    app = BatchStepper(batch)
    assert app.plot.marks[+1]["point"].get_marker() == "^"
    assert "inf" in plain(app.sample_view.value)


# -- the two clip fractions ---------------------------------------------------------------------


def test_the_disagreeing_preset_shows_both_clip_fractions_side_by_side(stepper):
    stepper.preset_buttons["two clip fractions"].click()
    b = module(stepper.batch)
    samples = reference.batch(*stepper.batch.arguments())
    sign_blind = np.mean([abs(s.ratio - 1) > 0.2 for s in samples])
    ours = np.mean([s.is_clipped for s in samples])
    assert (sign_blind, ours) == (b.band_fraction, b.clip_fraction) == (1.0, 0.5)
    shown = plain(stepper.clip_fractions.value)
    assert f"value {exact(ours)} {exact(sign_blind)}" in shown
    assert "samples 2 of 4: 0, 3 4 of 4: 0, 1, 2, 3" in shown
    assert "They disagree: samples 1, 2 left the band the unfavourable way" in shown
    assert 'class="ppo-big ppo-text-error"' in stepper.clip_fractions.value
    stepper.load_preset("worked example")
    assert "On this batch the two agree." in plain(stepper.clip_fractions.value)


# -- walking without the widgets, against the reference -----------------------------------------

probabilities = st.floats(min_value=1e-6, max_value=1.0)
advantages = st.one_of(st.sampled_from([0.0, 1.0, -1.0]), st.floats(min_value=-5, max_value=5))


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(st.tuples(probabilities, probabilities, advantages), min_size=1, max_size=30),
    eps=st.one_of(st.sampled_from([0.0, 0.2, 1.0]), st.floats(min_value=0.0, max_value=1.0)),
)
def test_walks_end_at_the_modules_numbers_and_verdicts_match_the_reference(data, eps):
    texts = [", ".join(repr(v) for v in column) for column in zip(*data, strict=True)]
    batch = parse_batch(*texts, repr(eps))
    b = batch.breakdown
    for t, s in enumerate(reference.batch(*batch.arguments())):
        rows = dict((label, value) for label, value, _ in sample_rows(batch, t))
        assert rows["gradient entry"] == pytest.approx(s.grad, rel=1e-12, abs=1e-300)
        rule = clip_rule(b.advantages[t], b.ratio[t], b.lower, b.upper, b.is_clipped[t])
        assert b.is_clipped[t] == s.is_clipped == ("so clipped" in rule)
    assert compare_with_module(batch).all_equal


# -- display --------------------------------------------------------------------------------------


def test_a_new_batch_redraws_the_whole_figure_and_steps_blit_over_it(stepper):
    stepper.go(2)
    type_in(stepper, "0.9, 0.3, 0.6", "0.5, 0.5, 0.5", "1, -1, 1", "0.35")
    assert stepper.load()
    stepper.go(1)  # the new batch drew everything once; this step is a blit over it
    assert_shows_the_full_figure(stepper)
    band = stepper.plot.columns[+1].bands[0]
    assert (band.get_x(), band.get_x() + band.get_width()) == (0.65, 1.35)
    assert stepper.plot.columns[+1].objective_ax.get_title().endswith("flat where r > 1.35")


# -- the notebook --------------------------------------------------------------------------------


def test_the_notebooks_prose_states_the_modules_numbers():
    prose = markdown_of(NOTEBOOK)
    example = ppo_clip.worked_example()
    b = ppo_clip.clip_breakdown(*example)
    two = preset_batch("two clip fractions").breakdown
    zero_eps = ppo_clip.clip_breakdown(*example[:3], 0.0)
    inverse = two.unclipped_term < two.clipped_term  # what TRL 0.16 logged as clipped
    assert_contract_loss(b.loss)
    assert_states(
        prose,
        f"`{exact(CONTRACT_LOSS)}`",  # the contract's loss, the same on every machine tried
        f"`{exact(b.clip_fraction)}`",
        f"`{vector(b.grad, each=rounded)}`",
        f"{rounded(b.ratio[2])} up to the last digit",
        f"= {rounded(b.grad[3])}$",
        f"= {rounded(float(b.objective_term.sum()))}$",
        f"${rounded(b.loss)}$",
        f"`{exact(two.band_fraction)}`",  # as the lecture prints it
        f"`{two.clip_fraction!r}`",
        f"also `{float(inverse.mean())!r}`",
        f"`{exact(zero_eps.loss)}`",
        f"**{PRESETS['two clip fractions'].label}**",
        # the batch, as the prose lists it
        f"$\\pi_\\text{{old}} = {np.exp(example.logp_old[0]):g}$",
        *(f"${p:.2f}$" for p in np.exp(example.logp_new)),
        *(f"${a:+g}$" for a in example.advantages),
        f"$\\epsilon = {example.eps:g}$",
        f"$[{1 - example.eps:g},\\ {1 + example.eps:g}]$",
        f"down to ${LOGP_MIN:g}$",
        f"$\\pm 10^{math.log10(MAX_ABS_ADVANTAGE):g}$",
    )
    assert zero_eps.clip_fraction == 1.0
    assert not zero_eps.grad.any()
    assert two.band_fraction == 2 * two.clip_fraction  # "twice as large on the preset"
    assert not (inverse & two.is_clipped).any()  # the same size, but none of the clipped samples


def test_the_notebook_names_its_sources_in_a_list_at_the_end():
    """The code read for the two clip fractions and for TRL's inverse count, in Sources only."""
    text, sources = markdown_of(NOTEBOOK).split("## Sources")
    assert_states(
        sources,
        "`stable_baselines3/ppo/ppo.py` (commit cef4cf2)",
        "`cleanrl/ppo.py` (commit 020cf0e)",
        "`baselines/ppo2/model.py` (commit 0b8126f)",
        "`spinup/algos/pytorch/ppo/ppo.py` (commit 2092113)",
        "`trl/trainer/grpo_trainer.py` (commit 000bb3d)",
        "`verl/trainer/ppo/core_algos.py` (commit b178a3c)",
        "issue #3032",
        "PR #3175",
        "v0.17.0",
    )
    assert not re.search(r"commit [0-9a-f]{7}|\w+/\w+\.py", text)


def test_the_last_digits_are_computed_in_the_cell_under_the_collapsed_part():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (index,) = [i for i, c in enumerate(notebook.cells) if "<summary>For implementers" in c.source]
    assert "walk.ratio.tolist(), walk.grad.tolist()" in notebook.cells[index + 1].source
    # The notebook checks the walk's totals itself (tests/test_notebooks.py runs it clean).
    assert "assert check.all_equal" in "".join(cell.source for cell in notebook.cells)
