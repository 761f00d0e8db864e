"""Notebook 4 (numerics and the RLHF setting): variant math, demos, sliders, notebook.

The variant math is checked against the plain-Python reference of the contract
(:mod:`benchmarks.reference`); every drawn value is checked against :mod:`ppo_clip`;
the numbers the notebook's prose quotes are checked against the computed ones.
"""

from __future__ import annotations

import base64
import io
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from helpers import assert_contract_numbers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_hex
from notebook_runner import run_committed
from PIL import Image

import ppo_clip
from benchmarks import reference
from ppo_viz.app import MAIN_CONTROL, WIDGET_VIEW_MIME
from ppo_viz.numbers import exact, rounded
from ppo_viz.numerics import (
    TokenRatioExplorer,
    VariantsExplorer,
    boundary_demo,
    float32_boundary_demo,
    outside_band_demo,
    overflow_demo,
    rare_token_demo,
    synthetic_response,
    token_view,
)
from ppo_viz.numerics.clip_effects import RARE_P_OLD, RARE_RUNS, ppo_steps, softmax_log
from ppo_viz.numerics.demos import (
    BFLOAT16_SIGNIFICANT_BITS,
    FLOAT32_SUMMARY,
    OVERFLOW_BATCH,
    floating_point_errors,
    yes_no,
)
from ppo_viz.numerics.response import (
    FLOAT32_EXP_LIMIT,
    FLOAT64_EXP_LIMIT,
    MAX_SHIFT,
    MAX_TOKENS,
    SURVEY_RESPONSES,
    TOKEN_NOISE,
    length_survey,
    shifted_logprobs,
    survey_responses,
)
from ppo_viz.numerics.tokens import TOKEN_RATIO_LIMITS, stretch_ratio, unstretch_ratio
from ppo_viz.numerics.variants import (
    CAP_RANGE,
    DEFAULT_CAP,
    DEFAULT_EPS_HIGH,
    DEFAULT_EPS_LOW,
    VARIANT_R_MAX,
)
from ppo_viz.panels import ratio_grid
from ppo_viz.style import COLORS

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_numerics_and_rlhf.ipynb"
EXAMPLES = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------
# The variants against the plain-Python reference
# --------------------------------------------------------------------------

epsilons = st.floats(0.0, 1.0)
caps = st.one_of(st.none(), st.floats(1.0, 10.0, exclude_min=True))
advantages = st.one_of(st.sampled_from([0.0, 1.0, -1.0, 0.5, -2.0]), st.floats(-10.0, 10.0))
logps = st.floats(-1000.0, 0.0)


@st.composite
def sweep_cases(draw):
    """A ratio (often exactly on a bound or the cap), an advantage and a variant."""
    eps_low, eps_high, cap = draw(epsilons), draw(epsilons), draw(caps)
    special = [0.0, 1.0, 1.0 - eps_low, 1.0 + eps_high] + ([cap] if cap is not None else [])
    ratio = draw(st.one_of(st.sampled_from(special), st.floats(0.0, 1e6)))
    return ratio, draw(advantages), {"eps_low": eps_low, "eps_high": eps_high, "dual_clip": cap}


@EXAMPLES
@given(sweep_cases())
def test_variant_sweep_matches_the_reference(case):
    ratio, advantage, variant = case
    sweep = ppo_clip.ratio_sweep([ratio], advantage, **variant)
    expected = reference.sample(ratio, advantage, 1, **variant)
    assert sweep.objective_term[0] == expected.objective_term
    assert bool(sweep.is_clipped[0]) is expected.is_clipped
    assert sweep.grad[0] == expected.grad
    assert (sweep.lower, sweep.upper) == (1.0 - variant["eps_low"], 1.0 + variant["eps_high"])


@st.composite
def batches(draw):
    n = draw(st.integers(1, 12))
    rows = draw(st.lists(st.tuples(logps, logps, advantages), min_size=n, max_size=n))
    new, old, adv = (list(column) for column in zip(*rows, strict=True))
    variant = {"eps_low": draw(epsilons), "eps_high": draw(epsilons), "dual_clip": draw(caps)}
    return new, old, adv, variant


@EXAMPLES
@given(batches())
def test_variant_batch_matches_the_reference(batch):
    new, old, adv, variant = batch
    result = ppo_clip.clip_breakdown(new, old, adv, **variant)
    n = len(adv)
    expected = []
    for i in range(n):
        # exp may differ in the last bit between libm and numpy; the rest is exact.
        assert result.ratio[i] == pytest.approx(
            reference.ratio(new[i], old[i]), rel=4e-16, abs=1e-300
        )
        sample = reference.sample(float(result.ratio[i]), adv[i], n, **variant)
        assert result.objective_term[i] == sample.objective_term
        assert bool(result.is_clipped[i]) is sample.is_clipped
        assert result.grad[i] == sample.grad
        expected.append(sample)
    assert not math.isnan(result.loss)
    assert result.loss == pytest.approx(reference.loss(expected), rel=1e-12, abs=1e-12)
    assert result.clip_fraction == sum(s.is_clipped for s in expected) / n


@EXAMPLES
@given(batches())
def test_symmetric_bounds_and_no_cap_leave_the_contract_unchanged(batch):
    new, old, adv, variant = batch
    eps = variant["eps_low"]
    plain = ppo_clip.clip_breakdown(new, old, adv, eps)
    same = ppo_clip.clip_breakdown(new, old, adv, eps, eps_low=eps, eps_high=eps, dual_clip=None)
    for name in ("ratio", "objective_term", "is_clipped", "grad"):
        assert getattr(same, name).tobytes() == getattr(plain, name).tobytes(), name
    assert same.loss == ppo_clip.ppo_clip_loss(new, old, adv, eps)
    assert same.clip_fraction == ppo_clip.clip_fraction(new, old, adv, eps)
    assert same.grad.tobytes() == ppo_clip.ppo_clip_grad(new, old, adv, eps).tobytes()


def test_symmetric_variant_reproduces_the_worked_example():
    example = ppo_clip.worked_example()
    variant = ppo_clip.clip_breakdown(*example, eps_low=0.2, eps_high=0.2, dual_clip=None)
    assert_contract_numbers(variant.loss, variant.clip_fraction, variant.grad)


# --------------------------------------------------------------------------
# Overflow thresholds, the synthetic response and the demos
# --------------------------------------------------------------------------


def test_overflow_thresholds_are_where_exp_overflows():
    assert pytest.approx(709.782712893384) == FLOAT64_EXP_LIMIT
    assert pytest.approx(88.72283905206835) == FLOAT32_EXP_LIMIT
    with floating_point_errors() as caught:
        assert np.isfinite(np.exp(FLOAT64_EXP_LIMIT - 1e-9))
        assert np.isinf(np.exp(FLOAT64_EXP_LIMIT + 1e-9))
        assert np.isfinite(np.exp(np.float32(88.72)))
        assert np.isinf(np.exp(np.float32(88.73)))
    assert "overflow" in caught


def test_synthetic_response_is_seeded_and_reaches_about_minus_1000():
    first, second = synthetic_response(), synthetic_response()
    np.testing.assert_array_equal(first.logp_old, second.logp_old)
    assert not np.array_equal(first.logp_old, synthetic_response(seed=1).logp_old)
    assert first.logp_old.shape == (MAX_TOKENS,)
    assert (first.logp_old < 0).all()
    assert -1000.0 <= float(np.sum(first.logp_old)) <= -950.0
    with pytest.raises(ValueError, match="tokens"):
        synthetic_response(tokens=0)


@pytest.mark.parametrize("shift", [0.0, 0.5, 1.0, MAX_SHIFT])
def test_every_log_probability_shown_is_within_the_contract_range(shift):
    old, noise = survey_responses()
    new = shifted_logprobs(old, shift, noise)
    assert (new <= 0).all()
    assert np.cumsum(old, axis=1).min() >= -1000.0
    assert np.cumsum(new, axis=1).min() >= -1000.0
    for seed in (0, *(seed for seed, *_ in OVERFLOW_BATCH)):
        response = synthetic_response(seed)
        assert (response.logp_new(shift) <= 0).all()
        assert np.sum(response.logp_new(shift)) >= -1000.0


def test_naive_formula_gives_nan_and_ppo_clip_the_right_loss():
    demo = overflow_demo()
    zero = int(np.flatnonzero(demo.advantages == 0)[0])
    assert demo.logp_new[zero] - demo.logp_old[zero] > FLOAT64_EXP_LIMIT
    assert math.isinf(demo.module.ratio[zero])
    assert math.isnan(demo.naive_loss)
    assert "overflow" in demo.ratio_errors
    assert "invalid value" in demo.objective_errors
    assert demo.module.objective_term[zero] == 0.0
    assert demo.module.grad[zero] == 0.0
    samples = reference.batch(demo.logp_new, demo.logp_old, demo.advantages)
    assert demo.module_loss == pytest.approx(reference.loss(samples), rel=1e-15)
    html = demo._repr_html_()
    assert "<td>nan</td>" in html
    assert "<td>inf</td>" in html
    assert exact(demo.module_loss) in html
    # The note says what ppo_clip does: times_advantage zeroes the value where A == 0 first,
    # and the gradient leaves A == 0 out of its product: no NaN either way.
    assert "times_advantage replaces the ratio by 0 wherever A = 0 before multiplying" in html
    assert "the gradient leaves the A = 0 samples out of its product" in html
    assert ppo_clip.times_advantage(np.array([np.inf]), np.array([0.0])).tolist() == [0.0]
    inf_and_zero = ppo_clip.loss_gradient(
        np.array([np.inf, np.inf]), np.array([0.0, 1.0]), np.array([False, True]), 2
    )
    assert inf_and_zero.tolist() == [0.0, 0.0]


def test_boundary_table_says_where_this_machines_ratio_landed():
    demo = boundary_demo()
    float64 = demo.case
    ratio = float(np.exp(np.array([math.log(0.6) - math.log(0.5)]))[0])  # numpy's exp, as ppo_clip
    assert float64.ratio == ratio
    assert abs(ratio - 1.2) <= 2 * math.ulp(1.2)  # 1.2 or a neighbour, whatever the CPU
    assert float64.is_clipped == (ratio > 1.2)
    assert float64.grad == (0.0 if ratio > 1.2 else -ratio)
    clipped = yes_no(ratio > 1.2)
    row = ["float64 throughout (ppo_clip)", exact(ratio), clipped, clipped, exact(float64.grad)]
    assert demo.rows() == [row]
    if ratio == 1.2:
        assert "is exactly 1.2 = 1 + ε: on the boundary; not clipped" in demo.notes()[0]
    else:
        assert f"is {exact(ratio)}, 1 ulp {'above' if ratio > 1.2 else 'below'}" in demo.notes()[0]
    assert demo.inside_slope == pytest.approx(-1.2, abs=1e-6)
    assert demo.outside_slope == 0.0
    # The main-line table shows no float32 row; the float32 rows start collapsed.
    assert "float32" not in demo._repr_html_()
    collapsed = float32_boundary_demo()._repr_html_()
    assert collapsed.startswith(f'<details><summary class="ppo-strong">{FLOAT32_SUMMARY}')
    assert float32_boundary_demo().cases[0] == float64


def test_bfloat16_note_gives_the_spacing_of_its_numbers_above_1():
    spacing = 2.0 ** (1 - BFLOAT16_SIGNIFICANT_BITS)
    note = float32_boundary_demo().notes()[-1]
    assert f"neighbouring numbers are {exact(spacing)} apart" in note
    assert f"within ±{rounded(100 * spacing / 2, 2)} %" in note
    # float32 has 24 significant bits: its step above 1 is 2**-23, which numpy agrees with.
    assert np.spacing(np.float32(1.0)) == np.float32(2.0**-23)


def test_float32_rows_report_the_side_their_own_computation_landed_on():
    demo = float32_boundary_demo()
    one, bound = np.float32(1.0), np.float32(0.2)
    computed = {
        1: np.exp(np.log(np.float32(0.6)) - np.log(np.float32(0.5))),
        2: np.exp(np.float32(np.log(1.2))),
    }
    for row, ratio32 in computed.items():
        case, cells = demo.cases[row], demo.rows()[row]
        clipped = bool(ratio32 > one + bound)
        assert case.ratio == float(ratio32)
        assert cells[1].startswith(str(ratio32))
        assert cells[2] == ("yes" if float(ratio32) > 1.2 else "no")
        assert cells[3] == ("yes" if clipped else "no")
        assert case.grad == (0.0 if clipped else -float(ratio32))
    # float32 log-probabilities handed to ppo_clip: float64 maths cannot undo the rounding.
    rounded_inputs = demo.cases[3]
    assert rounded_inputs.ratio != 1.2
    assert rounded_inputs.is_clipped == (rounded_inputs.ratio > 1.2)
    assert rounded_inputs.grad == (0.0 if rounded_inputs.is_clipped else -rounded_inputs.ratio)


# --------------------------------------------------------------------------
# Outside the band is not clipped; the upper bound is not a cap
# --------------------------------------------------------------------------


def test_outside_the_band_the_sign_of_a_decides_and_the_gradient_is_scaled_by_r():
    demo = outside_band_demo()
    for log_ratio, plus, minus in zip(demo.log_ratios, demo.positive, demo.negative, strict=True):
        r = math.exp(log_ratio)
        assert plus.ratio[0] == pytest.approx(r, rel=1e-12)
        below, above = r < 0.8, r > 1.2
        # favourable side: clipped, zero gradient; the other side keeps -r*A (N = 1)
        assert bool(plus.is_clipped[0]) is above
        assert bool(minus.is_clipped[0]) is below
        assert plus.grad[0] == (0.0 if above else pytest.approx(-r, rel=1e-12))
        assert minus.grad[0] == (0.0 if below else pytest.approx(r, rel=1e-12))
    # what the reader sees: a gradient nearly gone below the band, a huge one above it
    rows = demo.rows()
    assert rows[0][2:4] == ["no", rounded(-math.exp(-20.0))]
    assert rows[-1][4:6] == ["no", rounded(math.exp(20.0))]
    assert abs(demo.positive[0].grad[0]) < 1e-8 < 1e8 < demo.negative[-1].grad[0]


def test_rare_token_steps_follow_the_gradient_of_ppo_clip_loss_on_the_logits():
    """One small step of ppo_steps moves the logits against a finite-difference gradient."""
    logp_old = np.log(RARE_P_OLD)
    tokens, advantages = np.array([0, 1]), np.array([1.0, -1.0])

    def loss(logits: np.ndarray) -> float:
        return ppo_clip.ppo_clip_loss(softmax_log(logits)[tokens], logp_old[tokens], advantages)

    h, step = 1e-6, 1e-3
    numeric = np.array(
        [(loss(logp_old + h * e) - loss(logp_old - h * e)) / (2 * h) for e in np.eye(3)]
    )
    stepped = ppo_steps(RARE_P_OLD, ((0, 1.0), (1, -1.0)), step, 1)
    np.testing.assert_allclose(stepped, np.exp(softmax_log(logp_old - step * numeric)), rtol=1e-8)


def test_the_upper_bound_stops_the_push_but_does_not_cap_the_probability():
    demo = rare_token_demo()
    alone_small, alone_large, shared = demo.runs
    assert demo.edge == pytest.approx(1.2 * RARE_P_OLD[0])
    assert [run.description for run in demo.runs] == [run[0] for run in RARE_RUNS]
    # every run ends with the rare token's own sample clipped (its push is gone) ...
    assert all(run.clipped for run in demo.runs)
    # ... alone with small steps it stops within one step of the edge ...
    assert demo.edge < alone_small.rare_probability < demo.edge * math.exp(alone_small.step)
    # ... but a large step, or another sample of the same context, carries it well past
    assert alone_large.rare_probability > 1.5 * demo.edge
    assert shared.rare_probability > 1.5 * demo.edge
    for run in demo.runs:
        assert run.p_new.sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------
# The token app
# --------------------------------------------------------------------------


@pytest.fixture
def tokens_app() -> TokenRatioExplorer:
    return TokenRatioExplorer()


def _expected_tokens(length: int, shift: float):
    response = synthetic_response()
    new, old = response.logp_new(shift)[:length], response.logp_old[:length]
    tokens = ppo_clip.clip_breakdown(new, old, np.ones(length))
    sequence = ppo_clip.clip_breakdown([np.sum(new)], [np.sum(old)], [1.0])
    mean = ppo_clip.clip_breakdown([np.sum(new) / length], [np.sum(old) / length], [1.0])
    return tokens, sequence, mean


@pytest.mark.parametrize("length", [1, 37, 200, MAX_TOKENS])
def test_length_slider_draws_ppo_clips_per_token_ratios(tokens_app, length):
    tokens_app.length.value = length
    tokens, sequence, mean = _expected_tokens(length, tokens_app.shift.value)
    plot = tokens_app.plot
    inside, outside = ~tokens.outside_band, tokens.outside_band
    positions = np.arange(1, length + 1)
    np.testing.assert_array_equal(plot.token_points.get_xdata(), positions[inside])
    np.testing.assert_array_equal(plot.token_points.get_ydata(), tokens.ratio[inside])
    np.testing.assert_array_equal(plot.token_outside.get_ydata(), tokens.ratio[outside])
    np.testing.assert_array_equal(plot.geometric_line.get_ydata(), [mean.ratio[0]] * 2)
    assert plot.running_end.get_xdata()[0] == length
    assert list(plot.survey_marker.get_xdata()) == [length, length]
    readout = tokens_app.readout.value
    assert f"<b>{rounded(sequence.ratio[0])}: " in readout
    assert f"{np.count_nonzero(outside)} of {length} " in readout


@pytest.mark.parametrize("shift", [0.0, 0.35, 2.0, MAX_SHIFT])
def test_shift_slider_redraws_the_survey_from_ppo_clip(tokens_app, shift):
    tokens_app.shift.value = shift
    old, noise = survey_responses()
    new = shifted_logprobs(old, shift, noise)
    lengths = tokens_app.plot.survey_sequence.get_xdata()
    for index in (0, len(lengths) // 3, len(lengths) - 1):
        length = int(lengths[index])
        sequences = ppo_clip.clip_breakdown(
            new[:, :length].sum(axis=1), old[:, :length].sum(axis=1), np.ones(len(old))
        )
        drawn = tokens_app.plot.survey_sequence.get_ydata()[index]
        assert drawn == pytest.approx(100 * sequences.outside_band.mean())
        overflow = tokens_app.plot.survey_f64.get_ydata()[index]
        assert overflow == pytest.approx(100 * np.isinf(sequences.ratio).mean())


def test_long_responses_leave_the_band_far_more_often_than_tokens(tokens_app):
    plot = tokens_app.plot
    assert plot.survey_sequence.get_ydata()[-1] >= 90.0
    assert plot.survey_tokens.get_ydata()[-1] <= 10.0
    tokens_app.shift.value = MAX_SHIFT
    assert "exp overflows in float64 and float32" in tokens_app.readout.value
    assert "<b>inf: outside" in tokens_app.readout.value
    assert plot.survey_f64.get_ydata()[-1] == 100.0


@pytest.mark.parametrize(
    ("length", "shift", "verdict"),
    [
        (1, 0.0, "inside [0.8, 1.2]: not clipped for either sign of A"),
        (
            MAX_TOKENS,
            0.0,
            "outside [0.8, 1.2]: with A &gt; 0 clipped (zero gradient); with A &lt; 0 not "
            "clipped (an unfavourable move): its gradient −r·A/N is scaled up by r = ",
        ),
        (
            760,
            0.0,
            "outside [0.8, 1.2]: with A &gt; 0 not clipped (an unfavourable move): its gradient "
            "−r·A/N is scaled down by r = 0.7089; with A &lt; 0 clipped (zero gradient)",
        ),
        (
            MAX_TOKENS,
            MAX_SHIFT,
            "with A &gt; 0 clipped (zero gradient); with A &lt; 0 not clipped: the loss is inf",
        ),
    ],
)
def test_sequence_verdict_follows_ppo_clips_decisions(tokens_app, length, shift, verdict):
    tokens_app.length.value = length
    tokens_app.shift.value = shift
    assert verdict in tokens_app.readout.value
    _, sequence, _ = _expected_tokens(length, shift)
    assert bool(sequence.outside_band[0]) is ("inside" not in verdict)
    r = float(sequence.ratio[0])
    assert ("scaled down" in verdict) is (r < 0.8)
    assert ("scaled up" in verdict) is (1.2 < r < math.inf)


def test_default_view_fills_the_token_panel(tokens_app):
    """At the defaults the dots span the whole width and the band is not a thin strip."""
    assert tokens_app.length.value == MAX_TOKENS
    assert tokens_app.shift.value == 0.0
    plot = tokens_app.plot
    ax = plot.tokens_ax
    positions = np.concatenate([plot.token_points.get_xdata(), plot.token_outside.get_xdata()])
    low, high = ax.get_xlim()
    assert (positions.max() - positions.min()) / (high - low) > 0.95

    def height_share(y0: float, y1: float) -> float:
        to_axes = ax.transData + ax.transAxes.inverted()
        return float(to_axes.transform((0, y1))[1] - to_axes.transform((0, y0))[1])

    assert height_share(0.8, 1.2) > 0.2  # was 0.08 on a plain log axis from 0.4 to 60
    ratios = plot.view.tokens.ratio
    assert height_share(ratios.min(), ratios.max()) > 0.3  # was 0.12


@pytest.mark.parametrize("shift", [0.0, MAX_SHIFT])
def test_every_token_ratio_is_inside_the_fixed_axes(tokens_app, shift):
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in tokens_app.plot.figure.axes]
    tokens_app.shift.value = shift
    ratios = tokens_app.plot.view.tokens.ratio
    low, high = TOKEN_RATIO_LIMITS
    assert low < ratios.min()
    assert ratios.max() < high
    tokens_app.length.value = 1
    assert [(ax.get_xlim(), ax.get_ylim()) for ax in tokens_app.plot.figure.axes] == limits


def test_stretched_axis_is_monotonic_and_inverts():
    ratios = np.geomspace(0.5, 40.0, 200)
    stretched = stretch_ratio(ratios)
    assert np.all(np.diff(stretched) > 0)
    np.testing.assert_allclose(unstretch_ratio(stretched), ratios, rtol=1e-12)
    assert stretch_ratio(1.0) == 0.0


def test_sequence_ratio_is_the_product_of_token_ratios(tokens_app):
    for length in (10, 300):
        tokens_app.length.value = length
        view = tokens_app.plot.view
        assert view.product == pytest.approx(view.sequence_ratio, rel=1e-9)
        assert view.geometric_mean == pytest.approx(view.sequence_ratio ** (1 / length))


def test_token_view_rejects_a_length_the_response_does_not_have():
    with pytest.raises(ValueError, match="length must be from 1 to 1000"):
        token_view(synthetic_response(), 0, 0.0)
    with pytest.raises(ValueError, match="shift"):
        token_view(synthetic_response(), 10, math.nan)


def test_a_shift_beyond_the_fixed_axes_shows_a_message_and_keeps_the_figure(tokens_app):
    shown = tokens_app.view.png
    tokens_app.shift.max = 2 * MAX_SHIFT
    tokens_app.shift.value = MAX_SHIFT + 1
    assert "policy shift must be from 0 to 4" in tokens_app.message.value
    assert tokens_app.view.png == shown
    tokens_app.shift.value = 1.0
    assert tokens_app.message.value == ""
    assert tokens_app.view.png != shown


def test_token_app_rejects_settings_it_cannot_show():
    with pytest.raises(ValueError, match="length"):
        TokenRatioExplorer(length=MAX_TOKENS + 1)
    with pytest.raises(ValueError, match="shift"):
        TokenRatioExplorer(shift=-1.0)


def test_thresholds_do_not_reuse_the_objective_colours(tokens_app):
    """Blue, vermillion and orange mean the three objectives; thresholds are black and grey."""
    objective_colours = {to_hex(COLORS[name]) for name in ("clipped", "unclipped", "clip_only")}
    plot = tokens_app.plot
    limits = [line for line in plot.running_ax.get_lines() if "overflow" in line.get_label()]
    thresholds = [*limits, plot.survey_f32, plot.survey_f64]
    assert len(thresholds) == 4
    variants = VariantsExplorer()
    thresholds += [line for pair in variants.plot.cap_lines.values() for line in pair]
    for line in thresholds:
        assert to_hex(line.get_color()) not in objective_colours, line.get_label()
    # float32 and float64 are told apart by their line style, in both panels.
    float32, float64 = limits
    assert float32.get_linestyle() != float64.get_linestyle()
    assert plot.survey_f32.get_linestyle() == float32.get_linestyle()
    assert plot.survey_f64.get_linestyle() == float64.get_linestyle()


# --------------------------------------------------------------------------
# The variants app
# --------------------------------------------------------------------------


@pytest.fixture
def variants_app() -> VariantsExplorer:
    return VariantsExplorer()


def _assert_columns_match_ppo_clip(app: VariantsExplorer, eps_low, eps_high, cap):
    variant = {"eps_low": eps_low, "eps_high": eps_high, "dual_clip": cap}
    for sign, panel in app.plot.columns.items():
        grid = panel.objective.get_xdata()
        np.testing.assert_array_equal(grid, ratio_grid(0.2, r_max=VARIANT_R_MAX, **variant))
        sweep = ppo_clip.ratio_sweep(grid, sign, **variant)
        np.testing.assert_array_equal(panel.objective.get_ydata(), sweep.objective_term)
        x, y = (np.asarray(values, dtype=float) for values in panel.gradient.get_data())
        drawn = ~np.isnan(x)  # the curve may be broken where clipping switches it off
        np.testing.assert_array_equal(x[drawn], grid)
        np.testing.assert_array_equal(y[drawn], sweep.grad)
        for band in panel.bands:
            assert band.get_x() == pytest.approx(1 - eps_low)
            assert band.get_x() + band.get_width() == pytest.approx(1 + eps_high)


@pytest.mark.parametrize("value", [0.0, 0.1, 0.45, 1.0])
def test_eps_low_slider_moves_the_band_and_the_curves(variants_app, value):
    before = variants_app.view.png
    variants_app.eps_low.value = value
    _assert_columns_match_ppo_clip(variants_app, value, DEFAULT_EPS_HIGH, DEFAULT_CAP)
    assert variants_app.view.png != before


@pytest.mark.parametrize("value", [0.0, 0.2, 0.6, 1.0])
def test_eps_high_slider_moves_the_band_and_the_curves(variants_app, value):
    before = variants_app.view.png
    variants_app.eps_high.value = value
    _assert_columns_match_ppo_clip(variants_app, DEFAULT_EPS_LOW, value, DEFAULT_CAP)
    assert variants_app.view.png != before
    assert f"flat (clipped) where r &gt; {rounded(1 + value, 3)}." in variants_app.readout.value


@pytest.mark.parametrize("cap", [1.05, 1.5, 2.5, CAP_RANGE[1]])
def test_cap_slider_moves_the_flat_part_and_the_zero_gradient_region(variants_app, cap):
    variants_app.cap.value = cap
    assert variants_app.dual_clip == cap
    _assert_columns_match_ppo_clip(variants_app, DEFAULT_EPS_LOW, DEFAULT_EPS_HIGH, cap)
    negative = variants_app.plot.columns[-1]
    grid = negative.objective.get_xdata()
    sweep = ppo_clip.ratio_sweep(grid, -1.0, eps_low=0.2, eps_high=0.28, dual_clip=cap)
    capped = grid[sweep.is_clipped & (grid > 1)]
    assert negative.zero_grad_other_side[0].get_x() == capped.min()
    assert negative.objective.get_ydata()[-1] == -cap
    # the band-side zero-gradient region stays left of the band, not over the whole axis
    low = negative.zero_grad[0]
    assert low.get_x() == 0.0
    assert low.get_x() + low.get_width() < 0.8
    assert variants_app.plot.cap_lines[-1][0].get_xdata()[0] == cap
    assert f"or r &gt; {rounded(cap, 3)}." in variants_app.readout.value


def test_dual_clip_can_be_switched_off(variants_app):
    variants_app.cap_on.value = False
    assert variants_app.dual_clip is None
    assert variants_app.cap.disabled
    _assert_columns_match_ppo_clip(variants_app, DEFAULT_EPS_LOW, DEFAULT_EPS_HIGH, None)
    negative = variants_app.plot.columns[-1]
    assert negative.objective.get_ydata()[-1] == -VARIANT_R_MAX
    assert negative.zero_grad_other_side[0].get_width() == 0.0
    assert np.isnan(variants_app.plot.cap_lines[-1][0].get_xdata()[0])
    assert "dual clip off" in variants_app.readout.value
    assert "never clipped" not in variants_app.readout.value
    variants_app.eps_low.value = 1.0
    assert "A = −1: never clipped" in variants_app.readout.value
    variants_app.eps_low.value = DEFAULT_EPS_LOW
    variants_app.cap_on.value = True
    assert not variants_app.cap.disabled
    _assert_columns_match_ppo_clip(variants_app, DEFAULT_EPS_LOW, DEFAULT_EPS_HIGH, DEFAULT_CAP)


def test_a_rejected_cap_shows_a_message_and_keeps_the_figure(variants_app):
    before = variants_app.view.png
    variants_app.cap.min = 0.5
    variants_app.cap.value = 0.9
    assert "dual_clip must be greater than 1" in variants_app.message.value
    assert "Traceback" not in variants_app.message.value
    assert variants_app.view.png == before
    variants_app.cap.value = 2.0
    assert variants_app.message.value == ""


def test_variants_app_rejects_settings_it_cannot_show():
    with pytest.raises(ValueError, match="eps_high"):
        VariantsExplorer(eps_high=1.5)
    with pytest.raises(ValueError, match="dual_clip"):
        VariantsExplorer(dual_clip=0.9)


# --------------------------------------------------------------------------
# Both apps: display, controls, slides
# --------------------------------------------------------------------------

CONTROLS = {
    TokenRatioExplorer: {"length": "length", "shift": "shift"},
    VariantsExplorer: {
        "eps_low": "eps-low",
        "eps_high": "eps-high",
        "cap": "cap",
        "cap_on": "cap-on",
    },
}


@pytest.mark.parametrize("app_class", list(CONTROLS), ids=lambda cls: cls.__name__)
def test_apps_display_with_a_png_fallback_and_named_main_controls(app_class):
    app = app_class()
    bundle = app._repr_mimebundle_()
    assert WIDGET_VIEW_MIME in bundle
    assert base64.b64decode(bundle["image/png"]) == app.view.png
    assert "<img" in bundle["text/html"]
    assert "Slider" not in bundle["text/plain"]
    for attribute, name in CONTROLS[app_class].items():
        control = getattr(app, attribute)
        assert {MAIN_CONTROL, f"ppo-control-{name}"} <= set(control._dom_classes)


@pytest.mark.parametrize(
    ("app_class", "control", "value"),
    [(TokenRatioExplorer, "length", 300), (VariantsExplorer, "cap", 1.5)],
    ids=["TokenRatioExplorer", "VariantsExplorer"],
)
def test_apps_save_a_slide_of_the_current_settings(app_class, control, value, tmp_path):
    app = app_class()
    default, _ = app.save(tmp_path / "default")
    getattr(app, control).value = value
    png, svg = app.save(tmp_path / "moved")
    width, height = Image.open(png).size
    assert width >= 1600
    assert width / height == pytest.approx(16 / 9, rel=0.02)
    assert svg.read_text().startswith("<?xml")
    assert pixels(png) != pixels(default), "the slide shows the current settings"


def pixels(path: Path) -> bytes:
    return Image.open(path).convert("RGB").tobytes()


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------


def _prose() -> str:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    text = " ".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    return " ".join(text.split())


def _assert_quoted(sentences: list[str]) -> None:
    prose = _prose()
    for sentence in sentences:
        assert sentence in prose, sentence


def test_numbers_quoted_by_sections_1_to_3_are_the_computed_ones():
    response = synthetic_response()
    overflow = overflow_demo()
    lengths = overflow.lengths
    zero = int(np.flatnonzero(overflow.advantages == 0)[0])
    huge = int(
        np.flatnonzero(np.isfinite(overflow.module.ratio) & (overflow.module.ratio > 1e9))[0]
    )
    exponent = math.floor(math.log10(overflow.module.ratio[huge]))
    boundary = boundary_demo()
    # section 2's second example: the other sample's ratio, and the loss it leaves
    pair = ppo_clip.clip_breakdown([-150.0, -3.0], [-900.0, -3.5], [0.0, 1.0])
    assert (response.logp_old >= math.log(0.03)).all()
    assert FLOAT64_EXP_LIMIT < -150.0 - -900.0  # e^750 does not fit in float64
    assert overflow.module.n == 4
    assert overflow.module.is_clipped[huge]
    _assert_quoted(
        [
            f"so no token costs more than $-\\log 0.03 = {rounded(-math.log(0.03), 2)}$ nats.",
            "The table below is a batch of four synthetic responses (their log-probabilities are "
            f"sums over {min(lengths)} to {max(lengths)} tokens). Sample {zero} has a log-ratio "
            f"above {rounded(FLOAT64_EXP_LIMIT, 5)} and advantage 0.",
            f"(sample {huge}'s ratio, above $10^{{{exponent}}}$, is treated the same way without "
            "overflowing)",
            f"the other sample's ratio is $e^{{0.5}} \\approx {rounded(pair.ratio[1])}$, so the "
            f"loss is $-\\min({rounded(pair.ratio[1])}, 1.2)/2 = {exact(pair.loss)}$.",
            f"show the kink: ${rounded(boundary.inside_slope, 7)}$ on one side, "
            f"{rounded(boundary.outside_slope)} on the other",
            f"float32 has no number 1.2: its closest is {rounded(float(np.float32(1.2)), 9)}.",
        ]
    )


def _first_shift_past(limit: float) -> float:
    """The smallest shift on the slider's grid whose 1000-token log-ratio is above ``limit``."""
    response = synthetic_response()
    for shift in np.round(np.arange(0.0, MAX_SHIFT + 1e-9, 0.05), 2):
        if token_view(response, MAX_TOKENS, float(shift)).log_ratio > limit:
            return float(shift)
    raise AssertionError(f"no shift takes the log-ratio past {limit}")


def test_numbers_quoted_by_the_token_section_are_the_computed_ones():
    survey = length_survey(0.0)
    at = {int(length): i for i, length in enumerate(survey.lengths)}
    view = token_view(synthetic_response(), MAX_TOKENS, 0.0)
    share = 100 * view.tokens_outside / view.length
    # the shortest length from which more than half of the responses are outside the band
    majority = survey.lengths[np.flatnonzero(survey.sequence_outside <= 0.5).max() + 1]
    assert 12 <= majority <= 60, "the prose says 'longer than a few dozen tokens'"
    assert not survey.float32_overflow.any(), "the prose says none overflows float32 at shift 0"

    def percent(fraction: float) -> str:
        return f"{round(100 * fraction)} %"

    _assert_quoted(
        [
            f"$\\log 0.8 = {rounded(math.log(0.8), 2)}$ to "
            f"$\\log 1.2 = {rounded(math.log(1.2), 2)}$",
            "at shift 0 (each token's log-odds changes only by a small random amount), the "
            "sequence ratio is outside the band for "
            f"{percent(survey.sequence_outside[at[100]])} of {SURVEY_RESPONSES} synthetic "
            f"responses at 100 tokens, and for {percent(survey.sequence_outside[at[1000]])} at "
            "1000 tokens.",
            f"float64 overflows only past a log-ratio of {rounded(FLOAT64_EXP_LIMIT, 5)}, float32 "
            f"past {rounded(FLOAT32_EXP_LIMIT, 4)}",
            f"at shift 0, none of the app's {SURVEY_RESPONSES} responses overflows even float32.",
            f"{rounded(FLOAT32_EXP_LIMIT, 4)} is only {rounded(FLOAT32_EXP_LIMIT / 1000, 2)} nats "
            "per token over 1000 tokens.",
            f"a policy shift of {rounded(_first_shift_past(FLOAT32_EXP_LIMIT))} (log-odds per "
            f"token) takes the log-ratio past {rounded(FLOAT32_EXP_LIMIT, 4)}, and a shift of "
            f"{rounded(_first_shift_past(FLOAT64_EXP_LIMIT))} past "
            f"{rounded(FLOAT64_EXP_LIMIT, 5)}.",
            f"on top of a small fixed random change per token (spread {TOKEN_NOISE})",
            f"Bottom right: {SURVEY_RESPONSES} such responses with the same shift",
            f"$e^{{-88.72}} \\approx {math.exp(-FLOAT32_EXP_LIMIT) / 1e-39:.1f}\\times10^{{-39}}$",
            f"With the shift at 0 in the app, only {math.floor(share)} to "
            f"{math.floor(share) + 1} % of tokens are outside the band, while most of the "
            f"{SURVEY_RESPONSES} responses are once they are longer than a few dozen tokens.",
        ]
    )


def test_the_running_log_ratio_wanders_at_shift_0_and_climbs_with_a_shift():
    """The prose: "At shift 0 it wanders like a random walk, in and out of the band; with a
    positive shift it climbs with the length." (The panel's title claims neither.)"""
    response = synthetic_response()
    wandering = token_view(response, MAX_TOKENS, 0.0).running_log_ratio
    inside = (math.log(0.8) <= wandering) & (wandering <= math.log(1.2))
    assert np.count_nonzero(np.diff(inside.astype(int)) != 0) >= 4  # in and out, repeatedly
    assert np.argmax(wandering) < len(wandering) - 1, "it does not grow to its end at shift 0"
    climbing = token_view(response, MAX_TOKENS, 1.0).running_log_ratio
    checkpoints = climbing[[9, 99, 499, 999]]
    assert np.all(np.diff(checkpoints) > 0)
    assert climbing[-1] > 100 * climbing[0]


def test_numbers_quoted_by_the_variants_section_are_the_computed_ones():
    demo = rare_token_demo()
    alone_small, alone_large, shared = demo.runs
    _, upper = ppo_clip.clip_band(0.2)
    assert RARE_P_OLD == (0.01, 0.9, 0.09)
    _assert_quoted(
        [
            f"DAPO (Yu et al., 2025) keeps $\\epsilon_\\text{{low}} = {DEFAULT_EPS_LOW}$ and "
            f"raises $\\epsilon_\\text{{high}}$ to {DEFAULT_EPS_HIGH}",
            f"{rounded(upper * 0.01)} for a token at 0.01, but {rounded(upper * 0.5)} for a token "
            "at 0.5 (with $\\epsilon = 0.2$)",
            "(old probabilities 0.01, 0.9 and 0.09; the parameters are the three logits)",
            f"the rare token stops at {rounded(alone_small.rare_probability, 3)}, just past "
            f"{rounded(demo.edge)}",
            f"carries it to {rounded(alone_large.rare_probability, 3)} at once.",
            f"small steps take it to {rounded(shared.rare_probability, 3)}, although its own "
            f"sample stopped pushing at {rounded(demo.edge)}",
            f"with $c = {rounded(DEFAULT_CAP)}$ unless `clip_ratio_c` says otherwise",
            f"with the ratio axis extended to {rounded(VARIANT_R_MAX)} so that verl's default cap "
            f"$c = {rounded(DEFAULT_CAP)}$ is visible",
        ]
    )


#: Each library or paper claim of the notebook, and the source it was read from; both must
#: sit in the same markdown cell.  (verl: volcengine/verl; TRL: huggingface/trl.)
SOURCED_CLAIMS = {
    "each answer's advantage $(R - \\text{mean})/(\\text{std} + \\varepsilon)$ is exactly 0": (
        "`compute_grpo_outcome_advantage` in verl's `verl/trainer/ppo/core_algos.py`, "
        "commit 012be9d"
    ),
    "PyTorch's `clamp` passes the gradient on its whole closed interval": (
        "`clamp_backward` in `torch/csrc/autograd/FunctionsManual.cpp`"
    ),
    "`torch.maximum` gives each argument of a tie half the gradient": (
        "the `maximum` entry of `tools/autograd/derivatives.yaml`"
    ),
    "**bfloat16** has 8 significant bits": "cloud.google.com/tpu/docs/bfloat16",
    "GSPO (Zheng et al., 2025, arXiv 2507.18071) clips that instead": (
        "`compute_policy_loss_gspo` in `verl/trainer/ppo/core_algos.py` (commit 012be9d)"
    ),
    "verl, for one, does exactly this": "`verl/trainer/ppo/core_algos.py`, commit 012be9d",
    "verl also clamps each token's log-ratio to $[-20, 20]$": "commit 012be9d",
    "TRL's `GRPOConfig` has `epsilon` and `epsilon_high`": (
        "`trl/trainer/grpo_config.py`, commit f4ff4c6"
    ),
    "DAPO (Yu et al., 2025) keeps": "arXiv 2503.14476",
    "the same values are in verl's DAPO recipe": (
        "`recipe/dapo/run_dapo_qwen2.5_32b.sh` at commit e2e729f"
    ),
    "Dual-clip PPO (Ye et al., 2020,": "arXiv 1912.09729",
    "verl applies it to every token with $A < 0$, with $c = 3$": (
        "(`compute_policy_loss_vanilla`, commit 012be9d)"
    ),
}


def test_library_claims_name_their_sources():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cells = [" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown"]
    for claim, source in SOURCED_CLAIMS.items():
        holding = [cell for cell in cells if claim in cell]
        assert holding, f"claim not found: {claim}"
        assert all(source in cell for cell in holding), f"{claim!r} without {source!r}"


def test_float_last_bits_are_only_in_collapsed_parts():
    """A first-time reader meets no float32 digits: they sit in "For implementers" parts."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    main_line = re.sub(r"<details>.*?</details>", "", markdown, flags=re.DOTALL)
    for digits in ("1.20000005", "bfloat16"):
        assert digits not in main_line, digits
        assert digits in markdown, digits
    # the float32 table's cell hides its source, and its output starts collapsed
    (cell,) = [c for c in notebook.cells if c.source.strip() == "float32_boundary_demo()"]
    assert cell.metadata["jupyter"]["source_hidden"] is True
    assert float32_boundary_demo()._repr_html_().startswith("<details>")


def test_the_float32_notes_say_where_each_row_landed_on_this_machine():
    """The prose names no float32 digits; the table's notes give this machine's, row by row."""
    demo = float32_boundary_demo()
    notes = demo.notes()
    for row, case in enumerate(demo.cases[1:], start=2):
        ratio, edge = case.ratio, 1.2
        if row in (2, 3):  # a float32 ratio: compared in float32, as its clip test does
            ratio, edge = np.float32(ratio), np.float32(1.0) + np.float32(0.2)
        side = "above" if ratio > edge else "below" if ratio < edge else "exactly on"
        assert case.is_clipped == (ratio > edge)
        verdict = "clipped" if case.is_clipped else "kept"
        assert f"Row {row} landed {side} 1.2 on this machine" in " ".join(notes)
        assert f"({case.ratio_text.split()[0]}): {verdict}." in " ".join(notes)


@pytest.mark.notebook
def test_notebook_shows_the_figure_once_and_the_overflow_explained():
    notebook, _ = run_committed(NOTEBOOK)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    figure = next(cell for cell in code if "response_figure(" in cell.source)
    assert [("image/png" in o.get("data", {})) for o in figure.outputs] == [True]
    png = Image.open(io.BytesIO(base64.b64decode(figure.outputs[0]["data"]["image/png"])))
    assert png.size[0] >= 900
    demo = next(cell for cell in code if cell.source.strip() == "overflow_demo()")
    html = demo.outputs[0]["data"]["text/html"]
    assert "<td>nan</td>" in html
    assert "times_advantage" in html
    float32 = next(cell for cell in code if cell.source.strip() == "float32_boundary_demo()")
    assert float32.outputs[0]["data"]["text/html"].startswith("<details>")  # starts collapsed
    printed = "".join(o.get("text", "") for cell in code for o in cell.outputs)
    assert "RuntimeWarning" not in printed
