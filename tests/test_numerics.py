"""Notebook 4 (numerics and the RLHF setting): variant math, demos, sliders, notebook run.

The variant math is checked against a plain-Python reference written here from
the definitions (``math`` only); every drawn value is checked against
:mod:`ppo_clip`; the notebook must run headless with no error and no warning.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_hex
from notebook_runner import output_problems, run_committed

import ppo_clip
from ppo_viz import numerics
from ppo_viz.display import WIDGET_VIEW_MIME
from ppo_viz.numerics import (
    CAP_RANGE,
    FLOAT32_EXP_LIMIT,
    FLOAT64_EXP_LIMIT,
    MAX_SHIFT,
    MAX_TOKENS,
    VARIANT_R_MAX,
    TokenRatioExplorer,
    VariantsExplorer,
)
from ppo_viz.style import OBJECTIVE_COLORS
from ppo_viz.surrogate import ratio_grid

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04_numerics_and_rlhf.ipynb"
EXAMPLES = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------
# A plain-Python reference for the variants, from the definitions
# --------------------------------------------------------------------------


def reference_sample(
    ratio: float,
    advantage: float,
    eps_low: float,
    eps_high: float,
    cap: float | None,
    n: int,
) -> tuple[float, bool, float]:
    """``(kept term, is clipped, d loss / d logp_new)`` of one sample, by the book.

    Band ``[1 - eps_low, 1 + eps_high]``; kept term ``min(r*A, clip(r)*A)``,
    and with a cap ``c``, ``max(that, c*A)`` for ``A < 0``; clipped when
    ``A > 0 and r > upper``, ``A < 0 and r < lower`` or ``A < 0 and r > c``
    (strict); gradient 0 where clipped or ``A == 0``, else ``-r*A/N``.
    ``r*A`` is 0 when ``A == 0`` whatever ``r`` is.
    """
    lower, upper = 1.0 - eps_low, 1.0 + eps_high
    clipped_ratio = min(max(ratio, lower), upper)
    unclipped = 0.0 if advantage == 0 else ratio * advantage
    clipped = 0.0 if advantage == 0 else clipped_ratio * advantage
    term = min(unclipped, clipped)
    is_clipped = (advantage > 0 and ratio > upper) or (advantage < 0 and ratio < lower)
    if cap is not None and advantage < 0:
        term = max(term, cap * advantage)
        is_clipped = is_clipped or ratio > cap
    grad = 0.0 if (is_clipped or advantage == 0) else -(unclipped / n)
    return term, is_clipped, grad


def reference_ratio(logp_new: float, logp_old: float) -> float:
    try:
        return math.exp(logp_new - logp_old)
    except OverflowError:
        return math.inf


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
    return ratio, draw(advantages), eps_low, eps_high, cap


@EXAMPLES
@given(sweep_cases())
def test_variant_sweep_matches_the_plain_python_reference(case):
    ratio, advantage, eps_low, eps_high, cap = case
    sweep = ppo_clip.ratio_sweep(
        [ratio], advantage, eps_low=eps_low, eps_high=eps_high, dual_clip=cap
    )
    term, is_clipped, grad = reference_sample(ratio, advantage, eps_low, eps_high, cap, 1)
    assert sweep.objective_term[0] == term
    assert bool(sweep.is_clipped[0]) is is_clipped
    assert sweep.grad[0] == grad
    assert (sweep.lower, sweep.upper) == (1.0 - eps_low, 1.0 + eps_high)


@st.composite
def batches(draw):
    n = draw(st.integers(1, 12))
    rows = draw(st.lists(st.tuples(logps, logps, advantages), min_size=n, max_size=n))
    new, old, adv = (list(column) for column in zip(*rows, strict=True))
    return new, old, adv, draw(epsilons), draw(epsilons), draw(caps)


@EXAMPLES
@given(batches())
def test_variant_batch_matches_the_plain_python_reference(batch):
    new, old, adv, eps_low, eps_high, cap = batch
    result = ppo_clip.clip_breakdown(
        new, old, adv, eps_low=eps_low, eps_high=eps_high, dual_clip=cap
    )
    n = len(adv)
    expected_terms = []
    for i in range(n):
        ratio = reference_ratio(new[i], old[i])
        # exp may differ in the last bit between libm and numpy; the rest is exact.
        assert result.ratio[i] == pytest.approx(ratio, rel=4e-16, abs=1e-300)
        term, is_clipped, grad = reference_sample(
            float(result.ratio[i]), adv[i], eps_low, eps_high, cap, n
        )
        assert result.objective_term[i] == term
        assert bool(result.is_clipped[i]) is is_clipped
        assert result.grad[i] == grad
        expected_terms.append(term)
    expected_loss = -math.fsum(expected_terms) / n
    assert not math.isnan(result.loss)
    assert result.loss == pytest.approx(expected_loss, rel=1e-12, abs=1e-12)
    assert result.clip_fraction == sum(bool(c) for c in result.is_clipped) / n


def test_dual_clip_keeps_a_huge_ratio_with_negative_advantage_finite():
    result = ppo_clip.clip_breakdown([0.0], [-800.0], [-1.0], dual_clip=3.0)
    assert math.isinf(result.ratio[0])
    assert result.objective_term[0] == -3.0
    assert bool(result.is_clipped[0])
    assert result.grad[0] == 0.0
    assert result.loss == 3.0


@EXAMPLES
@given(batches())
def test_symmetric_bounds_and_no_cap_leave_the_contract_unchanged(batch):
    new, old, adv, eps, _, _ = batch
    plain = ppo_clip.clip_breakdown(new, old, adv, eps)
    variant = ppo_clip.clip_breakdown(new, old, adv, eps, eps_low=eps, eps_high=eps, dual_clip=None)
    for name in ("ratio", "objective_term", "is_clipped", "grad"):
        assert getattr(variant, name).tobytes() == getattr(plain, name).tobytes(), name
    assert variant.loss == ppo_clip.ppo_clip_loss(new, old, adv, eps)
    assert variant.clip_fraction == ppo_clip.clip_fraction(new, old, adv, eps)
    assert variant.grad.tobytes() == ppo_clip.ppo_clip_grad(new, old, adv, eps).tobytes()


def test_symmetric_variant_reproduces_the_worked_example():
    example = ppo_clip.worked_example()
    variant = ppo_clip.clip_breakdown(*example, eps_low=0.2, eps_high=0.2, dual_clip=None)
    assert variant.loss == -0.5375000000000001
    assert variant.clip_fraction == 0.5
    assert variant.grad.tobytes() == ppo_clip.ppo_clip_grad(*example).tobytes()
    assert repr(variant.grad) == "array([ 0.    , -0.55  ,  0.    ,  0.1125])"


# --------------------------------------------------------------------------
# Overflow thresholds, the synthetic response and the demos
# --------------------------------------------------------------------------


def test_overflow_thresholds_are_where_exp_overflows():
    assert pytest.approx(709.782712893384) == FLOAT64_EXP_LIMIT
    assert pytest.approx(88.72283905206835) == FLOAT32_EXP_LIMIT
    with numerics.floating_point_errors() as caught:
        assert np.isfinite(np.exp(FLOAT64_EXP_LIMIT - 1e-9))
        assert np.isinf(np.exp(FLOAT64_EXP_LIMIT + 1e-9))
        assert np.isfinite(np.exp(np.float32(88.72)))
        assert np.isinf(np.exp(np.float32(88.73)))
    assert "overflow" in caught


def test_synthetic_response_is_seeded_and_reaches_about_minus_1000():
    first, second = numerics.synthetic_response(), numerics.synthetic_response()
    np.testing.assert_array_equal(first.logp_old, second.logp_old)
    assert first.logp_old.shape == (MAX_TOKENS,)
    assert (first.logp_old < 0).all()
    total = float(np.sum(first.logp_old))
    assert -1000.0 <= total <= -950.0


@pytest.mark.parametrize("shift", [0.0, 0.5, 1.0, MAX_SHIFT])
def test_every_log_probability_shown_is_within_the_contract_range(shift):
    responses = [numerics.synthetic_response(seed) for seed in (0, 11, 12, 13, 14)]
    old, noise = numerics._survey_responses()
    new = numerics.shifted_logprobs(old, shift, noise)
    assert (new <= 0).all()
    assert np.cumsum(old, axis=1).min() >= -1000.0
    assert np.cumsum(new, axis=1).min() >= -1000.0
    for response in responses:
        assert (response.logp_new(shift) <= 0).all()
        assert np.sum(response.logp_new(shift)) >= -1000.0


def test_naive_formula_gives_nan_and_the_module_the_right_loss():
    demo = numerics.overflow_demo()
    zero = np.flatnonzero(demo.advantages == 0)
    assert zero.size == 1
    assert math.isinf(demo.module.ratio[zero[0]])
    assert demo.logp_new[zero[0]] - demo.logp_old[zero[0]] > FLOAT64_EXP_LIMIT
    assert math.isnan(demo.naive_loss)
    assert "overflow" in demo.ratio_errors
    assert "invalid value" in demo.objective_errors
    assert demo.module.objective_term[zero[0]] == 0.0
    assert demo.module.grad[zero[0]] == 0.0
    terms = [
        reference_sample(float(r), float(a), 0.2, 0.2, None, 4)[0]
        for r, a in zip(demo.module.ratio, demo.advantages, strict=True)
    ]
    assert demo.module_loss == pytest.approx(-math.fsum(terms) / 4, rel=1e-15)
    assert math.isfinite(demo.module_loss)
    html = demo._repr_html_()
    assert "nan" in html
    assert "inf (overflow)" in html
    assert repr(demo.module_loss) in html


def test_boundary_is_exact_in_float64_and_decided_by_rounding_in_float32():
    demo = numerics.boundary_demo()
    exact, float32, rounded_log, float32_logps = demo.cases
    assert exact.ratio == 1.2
    assert not exact.is_clipped
    assert exact.grad == -1.2
    # float32 results are one rounding step from 1.2; the decision follows the rounding.
    for case in (float32, rounded_log):
        as32 = np.float32(case.ratio)
        assert abs(int(as32.view(np.int32)) - int(np.float32(1.2).view(np.int32))) <= 2
        assert case.is_clipped == bool(as32 > np.float32(1.0) + np.float32(0.2))
        assert case.grad == (0.0 if case.is_clipped else -case.ratio)
    assert float32_logps.ratio > 1.2
    assert float32_logps.is_clipped
    assert float32_logps.grad == 0.0
    assert demo.inside_slope == pytest.approx(-1.2, abs=1e-6)
    assert demo.outside_slope == 0.0


def test_float32_ratio_on_this_machine():
    """numpy's SIMD float32 exp/log (AVX2 and up) give 1.2000002; others may give 1.2."""
    ratio = numerics.naive_float32_ratio(0.6, 0.5)
    assert ratio.dtype == np.float32
    assert str(ratio) in {"1.2000002", "1.2", "1.1999999"}


# --------------------------------------------------------------------------
# The token app
# --------------------------------------------------------------------------


@pytest.fixture
def tokens_app() -> TokenRatioExplorer:
    return TokenRatioExplorer()


def _expected_token_view(length: int, shift: float):
    response = numerics.synthetic_response()
    new, old = response.logp_new(shift)[:length], response.logp_old[:length]
    tokens = ppo_clip.clip_breakdown(new, old, np.ones(length))
    sequence = ppo_clip.clip_breakdown([np.sum(new)], [np.sum(old)], [1.0])
    mean = ppo_clip.clip_breakdown([np.sum(new) / length], [np.sum(old) / length], [1.0])
    return tokens, sequence, mean


@pytest.mark.parametrize("length", [1, 37, 200, MAX_TOKENS])
def test_length_slider_draws_the_modules_per_token_ratios(tokens_app, length):
    before = tokens_app.view.last_png
    tokens_app.length.value = length
    tokens, sequence, mean = _expected_token_view(length, tokens_app.shift.value)
    plot = tokens_app.plot
    inside, outside = ~tokens.outside_band, tokens.outside_band
    positions = np.arange(1, length + 1)
    np.testing.assert_array_equal(plot.token_points.get_xdata(), positions[inside])
    np.testing.assert_array_equal(plot.token_points.get_ydata(), tokens.ratio[inside])
    np.testing.assert_array_equal(plot.token_outside.get_ydata(), tokens.ratio[outside])
    np.testing.assert_array_equal(plot.geometric_line.get_ydata(), [mean.ratio[0]] * 2)
    assert plot.running_end.get_xdata()[0] == length
    assert list(plot.survey_marker.get_xdata()) == [length, length]
    assert numerics.format_ratio(float(sequence.ratio[0])) in tokens_app.readout.value
    assert f"{np.count_nonzero(outside)} of {length}" in tokens_app.readout.value
    if length != MAX_TOKENS:  # the app starts at the full response
        assert tokens_app.view.last_png != before


@pytest.mark.parametrize("shift", [0.0, 0.35, 2.0, MAX_SHIFT])
def test_shift_slider_redraws_the_survey_from_the_module(tokens_app, shift):
    tokens_app.shift.value = shift
    old, noise = numerics._survey_responses()
    new = numerics.shifted_logprobs(old, shift, noise)
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
    tokens_app.length.value = MAX_TOKENS
    plot = tokens_app.plot
    assert plot.survey_sequence.get_ydata()[-1] >= 90.0
    assert plot.survey_tokens.get_ydata()[-1] <= 10.0
    tokens_app.shift.value = MAX_SHIFT
    assert "inf (overflow)" in tokens_app.readout.value
    assert plot.survey_f64.get_ydata()[-1] == 100.0


def test_default_view_fills_the_token_panel(tokens_app):
    """At the defaults the dots span the whole width and the band is not a thin strip."""
    assert tokens_app.length.value == MAX_TOKENS
    assert tokens_app.shift.value == 0.0
    ax = tokens_app.plot.tokens_ax
    positions = np.concatenate(
        [tokens_app.plot.token_points.get_xdata(), tokens_app.plot.token_outside.get_xdata()]
    )
    low, high = ax.get_xlim()
    assert (positions.max() - positions.min()) / (high - low) > 0.95

    def height_share(y0: float, y1: float) -> float:
        to_axes = ax.transData + ax.transAxes.inverted()
        return float(to_axes.transform((0, y1))[1] - to_axes.transform((0, y0))[1])

    assert height_share(0.8, 1.2) > 0.2  # was 0.08 on a plain log axis from 0.4 to 60
    ratios = tokens_app.plot.view.tokens.ratio
    assert height_share(ratios.min(), ratios.max()) > 0.3  # was 0.12


@pytest.mark.parametrize("shift", [0.0, MAX_SHIFT])
def test_every_token_ratio_is_inside_the_fixed_axis(tokens_app, shift):
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in tokens_app.plot.figure.axes]
    tokens_app.shift.value = shift
    ratios = tokens_app.plot.view.tokens.ratio
    low, high = numerics.TOKEN_RATIO_LIMITS
    assert low < ratios.min()
    assert ratios.max() < high
    tokens_app.length.value = 1
    assert [(ax.get_xlim(), ax.get_ylim()) for ax in tokens_app.plot.figure.axes] == limits


def test_stretched_axis_is_monotonic_and_inverts():
    ratios = np.geomspace(0.5, 40.0, 200)
    stretched = numerics.stretch_ratio(ratios)
    assert np.all(np.diff(stretched) > 0)
    np.testing.assert_allclose(numerics.unstretch_ratio(stretched), ratios, rtol=1e-12)
    assert numerics.stretch_ratio(1.0) == 0.0


def _hex(colour) -> str:
    return to_hex(colour).lower()


def test_thresholds_do_not_reuse_the_objective_colours(tokens_app):
    """Vermillion, orange and blue mean the unclipped, clip-only and PPO objectives."""
    objective_colours = {_hex(c) for c in OBJECTIVE_COLORS.values()}
    plot = tokens_app.plot
    thresholds = [
        line for line in plot.running_ax.get_lines() if "overflow" in line.get_label()
    ] + [plot.survey_f32, plot.survey_f64]
    assert len(thresholds) == 4
    variants = VariantsExplorer()
    thresholds += [line for pair in variants.plot.cap_lines.values() for line in pair]
    for line in thresholds:
        assert _hex(line.get_color()) not in objective_colours, line.get_label()
    # float32 and float64 are told apart by their line style.
    styles = {line.get_label(): line.get_linestyle() for line in plot.running_ax.get_lines()}
    float32 = next(v for k, v in styles.items() if k.startswith("float32"))
    float64 = next(v for k, v in styles.items() if k.startswith("float64"))
    assert float32 != float64
    assert plot.survey_f32.get_linestyle() == float32
    assert plot.survey_f64.get_linestyle() == float64


def test_sequence_ratio_is_the_product_of_token_ratios(tokens_app):
    for length in (10, 300):
        tokens_app.length.value = length
        view = tokens_app.plot.view
        assert view.product == pytest.approx(view.sequence.ratio[0], rel=1e-9)
        assert view.geometric_mean == pytest.approx(view.sequence.ratio[0] ** (1 / length))


# --------------------------------------------------------------------------
# The variants app
# --------------------------------------------------------------------------


@pytest.fixture
def variants_app() -> VariantsExplorer:
    return VariantsExplorer()


def _assert_columns_match_module(app: VariantsExplorer, eps_low, eps_high, cap):
    for sign, panel in app.plot.columns.items():
        grid = panel.objective.get_xdata()
        np.testing.assert_array_equal(
            grid,
            ratio_grid(0.2, r_max=VARIANT_R_MAX, eps_low=eps_low, eps_high=eps_high, dual_clip=cap),
        )
        sweep = ppo_clip.ratio_sweep(grid, sign, eps_low=eps_low, eps_high=eps_high, dual_clip=cap)
        np.testing.assert_array_equal(panel.objective.get_ydata(), sweep.objective_term)
        np.testing.assert_array_equal(panel.gradient.get_ydata(), sweep.grad)
        for band in panel.bands:
            assert band.get_x() == pytest.approx(1 - eps_low)
            assert band.get_x() + band.get_width() == pytest.approx(1 + eps_high)


@pytest.mark.parametrize("value", [0.0, 0.1, 0.45, 1.0])
def test_eps_low_slider_moves_the_band_and_the_curves(variants_app, value):
    before = variants_app.view.last_png
    variants_app.eps_low.value = value
    _assert_columns_match_module(variants_app, value, variants_app.eps_high.value, 3.0)
    assert variants_app.view.last_png != before


@pytest.mark.parametrize("value", [0.0, 0.2, 0.6, 1.0])
def test_eps_high_slider_moves_the_band_and_the_curves(variants_app, value):
    before = variants_app.view.last_png
    variants_app.eps_high.value = value
    _assert_columns_match_module(variants_app, variants_app.eps_low.value, value, 3.0)
    assert variants_app.view.last_png != before
    assert f"flat (clipped) where r &gt; {1 + value:.2f}" in variants_app.readout.value


@pytest.mark.parametrize("cap", [1.05, 1.5, 2.5, CAP_RANGE[1]])
def test_cap_slider_moves_the_flat_part_and_the_zero_gradient_region(variants_app, cap):
    variants_app.cap.value = cap
    assert variants_app.dual_clip == cap
    _assert_columns_match_module(variants_app, 0.2, 0.28, cap)
    negative = variants_app.plot.columns[-1]
    grid = negative.objective.get_xdata()
    sweep = ppo_clip.ratio_sweep(grid, -1.0, eps_low=0.2, eps_high=0.28, dual_clip=cap)
    capped = grid[sweep.is_clipped & (grid > 1)]
    extra = negative.zero_grad_other_side[0]
    if capped.size:
        assert extra.get_x() == capped.min()
        assert negative.objective.get_ydata()[-1] == -cap
    # the band-side zero-gradient region stays left of the band, not over the whole axis
    low = negative.zero_grad[0]
    assert low.get_x() == 0.0
    assert low.get_x() + low.get_width() < 0.8
    assert variants_app.plot.cap_lines[-1][0].get_xdata()[0] == cap


def test_dual_clip_can_be_switched_off(variants_app):
    variants_app.cap_on.value = False
    assert variants_app.dual_clip is None
    assert variants_app.cap.disabled
    _assert_columns_match_module(variants_app, 0.2, 0.28, None)
    negative = variants_app.plot.columns[-1]
    assert negative.objective.get_ydata()[-1] == -VARIANT_R_MAX
    assert negative.zero_grad_other_side[0].get_width() == 0.0
    assert np.isnan(variants_app.plot.cap_lines[-1][0].get_xdata()[0])
    assert "dual clip off" in variants_app.readout.value
    assert "never clipped" not in variants_app.readout.value
    variants_app.eps_low.value = 1.0
    assert "A = −1: never clipped" in variants_app.readout.value
    variants_app.eps_low.value = 0.2
    variants_app.cap_on.value = True
    assert not variants_app.cap.disabled
    _assert_columns_match_module(variants_app, 0.2, 0.28, 3.0)


def test_a_rejected_setting_shows_a_message_and_keeps_the_figure(variants_app):
    before = variants_app.view.last_png
    variants_app.cap.min = 0.5
    variants_app.cap.value = 0.9
    assert "dual_clip must be greater than 1" in variants_app.message.value
    assert variants_app.view.last_png == before
    variants_app.cap.value = 2.0
    assert variants_app.message.value == ""


@pytest.mark.parametrize("app_class", [TokenRatioExplorer, VariantsExplorer])
def test_apps_display_with_a_png_fallback(app_class):
    bundle = app_class()._repr_mimebundle_()
    assert WIDGET_VIEW_MIME in bundle
    assert bundle["image/png"]
    assert "Slider" not in bundle["text/plain"]


def test_css_classes_for_the_browser_tests():
    tokens, variants = TokenRatioExplorer(), VariantsExplorer()
    assert "ppo-numerics-length" in tokens.length._dom_classes
    assert "ppo-numerics-shift" in tokens.shift._dom_classes
    for slider in (tokens.length, tokens.shift, variants.eps_low, variants.eps_high, variants.cap):
        assert "ppo-main-slider" in slider._dom_classes
    assert "ppo-figure" in variants.view.output._dom_classes
    assert "ppo-error" in variants.message._dom_classes


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------


@pytest.mark.notebook
def test_notebook_runs_headless_without_errors_or_warnings():
    # An overflow shown on purpose must be caught and explained, never printed.
    notebook, _ = run_committed(NOTEBOOK)
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)
    shown = "".join(str(o.get("data", {})) for c in notebook.cells for o in c.get("outputs", []))
    assert "nan" in shown
    assert "inf (overflow)" in shown
