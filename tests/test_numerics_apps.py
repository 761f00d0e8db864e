"""Notebook 5's two apps, headless: the token ratios and the clip variants.

Every drawn value is checked against a fresh call of :mod:`ppo_clip`; a setting beyond the
fixed axes, set from code, shows a message and keeps the figure.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_panel_draws, assert_states, plain
from matplotlib.colors import to_hex
from test_numerics import MAX_FIGURE_WIDTH

import ppo_clip
from ppo_viz.numbers import rounded
from ppo_viz.numerics import model
from ppo_viz.numerics.figures import (
    CAP_RANGE,
    DEFAULT_CAP,
    DEFAULT_EPS_HIGH,
    DEFAULT_EPS_LOW,
    LOG_RATIO_LIMITS,
    TOKEN_RATIO_LIMITS,
    VARIANT_R_AXIS,
    TokenRatioExplorer,
    VariantsExplorer,
)
from ppo_viz.panels import ratio_grid
from ppo_viz.style import COLORS

# -- the token app ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_explorer() -> TokenRatioExplorer:
    return TokenRatioExplorer()


@pytest.fixture
def tokens_app(token_explorer) -> TokenRatioExplorer:
    """The module's token app, back at its defaults (building one takes most of a second)."""
    token_explorer.controls["shift"].max = model.MAX_SHIFT
    token_explorer.controls["length"].max = model.MAX_TOKENS
    token_explorer.controls["shift"].value = 0.0
    token_explorer.controls["length"].value = model.MAX_TOKENS
    assert token_explorer.message.value == ""
    return token_explorer


def _expected_tokens(length: int, shift: float):
    response = model.synthetic_response()
    new, old = response.logp_new(shift)[:length], response.logp_old[:length]
    tokens = ppo_clip.clip_breakdown(new, old, np.ones(length))
    sequence = ppo_clip.clip_breakdown([np.sum(new)], [np.sum(old)], [1.0])
    mean = ppo_clip.clip_breakdown([np.sum(new) / length], [np.sum(old) / length], [1.0])
    return tokens, sequence, mean


def assert_survey_drawn(tokens_app: TokenRatioExplorer, shift: float) -> None:
    """The survey panel at ``shift``: each drawn share is ppo_clip's over the 64 responses."""
    old, noise = model.survey_responses()
    new = model.shifted_logprobs(old, shift, noise)
    lengths = tokens_app.artists["sequence_outside"].get_xdata()
    for index in (0, len(lengths) // 3, len(lengths) - 1):
        length = int(lengths[index])
        sequences = ppo_clip.clip_breakdown(
            new[:, :length].sum(axis=1), old[:, :length].sum(axis=1), np.ones(len(old))
        )
        drawn = tokens_app.artists["sequence_outside"].get_ydata()[index]
        assert drawn == pytest.approx(100 * sequences.outside_band.mean())
        overflow = tokens_app.artists["float64_overflow"].get_ydata()[index]
        assert overflow == pytest.approx(100 * np.isinf(sequences.ratio).mean())


@pytest.mark.parametrize(
    ("length", "shift"),
    [(1, 0.0), (10, 0.0), (37, 0.35), (200, 2.0), (300, 0.0), (760, 0.0), (1000, 0.0), (1000, 4.0)],
)
def test_sliders_draw_ppo_clips_ratios_and_the_readout_says_what_the_clip_does(
    tokens_app, length, shift
):
    tokens_app.controls["length"].value = length
    tokens_app.controls["shift"].value = shift
    tokens, sequence, mean = _expected_tokens(length, shift)
    art = tokens_app.artists
    assert_survey_drawn(tokens_app, shift)
    inside, outside = ~tokens.outside_band, tokens.outside_band
    positions = np.arange(1, length + 1)
    np.testing.assert_array_equal(art["ratios_inside"].get_xdata(), positions[inside])
    np.testing.assert_array_equal(art["ratios_inside"].get_ydata(), tokens.ratio[inside])
    np.testing.assert_array_equal(art["ratios_outside"].get_ydata(), tokens.ratio[outside])
    np.testing.assert_array_equal(art["geometric_mean"].get_ydata(), [mean.ratio[0]] * 2)
    assert art["running_end"].get_xdata()[0] == length
    assert list(art["length_marker"].get_xdata()) == [length, length]
    view, r = tokens_app.view, float(sequence.ratio[0])
    if math.isfinite(r):  # the sequence ratio is the product of the token ratios
        assert view.product == pytest.approx(r, rel=1e-9)
        assert view.geometric_mean == pytest.approx(r ** (1 / length))
    shown = plain(tokens_app.readout.value)
    assert_states(shown, f"{rounded(r)}: ", f"{np.count_nonzero(outside)} of {length} ")
    lower, upper = ppo_clip.clip_band(model.EPS)
    if not sequence.outside_band[0]:
        assert f"inside [{rounded(lower)}, {rounded(upper)}]: not clipped for either sign" in shown
        return
    assert f"with {'A > 0' if r > upper else 'A < 0'} clipped (zero gradient)" in shown
    if math.isinf(r):
        assert "with A < 0 not clipped: the loss is inf" in shown
    else:
        assert f"scaled {'down' if r < lower else 'up'} by r = {rounded(r)}" in shown


def test_long_responses_leave_the_band_far_more_often_than_tokens(tokens_app):
    art = tokens_app.artists
    assert art["sequence_outside"].get_ydata()[-1] >= 90.0
    assert art["token_outside"].get_ydata()[-1] <= 10.0
    tokens_app.controls["shift"].value = model.MAX_SHIFT
    shown = plain(tokens_app.readout.value)
    assert_states(shown, "exp overflows in float64 and float32", "inf: outside")
    assert art["float64_overflow"].get_ydata()[-1] == 100.0


def test_the_token_panels_axes_are_fixed_hold_every_value_and_are_filled_at_the_defaults(
    tokens_app,
):
    """At the defaults the dots span the whole width and the band is not a thin strip; at
    either end of the shift every value lies inside the fixed axes, which never move."""
    ax, art = tokens_app.artists["ratios_inside"].axes, tokens_app.artists
    positions = np.concatenate(
        [art[name].get_xdata() for name in ("ratios_inside", "ratios_outside")]
    )
    low, high = ax.get_xlim()
    assert (positions.max() - positions.min()) / (high - low) > 0.95

    def height_share(y0: float, y1: float) -> float:
        to_axes = ax.transData + ax.transAxes.inverted()
        return float(to_axes.transform((0, y1))[1] - to_axes.transform((0, y0))[1])

    assert height_share(0.8, 1.2) > 0.2  # was 0.08 on a plain log axis from 0.4 to 60
    ratios = tokens_app.view.tokens.ratio
    assert height_share(ratios.min(), ratios.max()) > 0.3
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in tokens_app.figure.axes]
    assert tokens_app.figure.get_figwidth() <= MAX_FIGURE_WIDTH
    for shift in (0.0, model.MAX_SHIFT):
        tokens_app.controls["shift"].value = shift
        ratios = tokens_app.view.tokens.ratio
        assert TOKEN_RATIO_LIMITS[0] < ratios.min()
        assert ratios.max() < TOKEN_RATIO_LIMITS[1]
        running = tokens_app.view.running_log_ratio
        assert LOG_RATIO_LIMITS[0] < running.min()  # clipped only above, past float64's limit
    tokens_app.controls["length"].value = 1
    assert [(ax.get_xlim(), ax.get_ylim()) for ax in tokens_app.figure.axes] == limits


def test_thresholds_do_not_reuse_the_objective_colours(tokens_app, variants_app):
    """Blue, vermillion and orange mean the three objectives; thresholds are black and grey."""
    assert variants_app.figure.get_figwidth() <= MAX_FIGURE_WIDTH
    objective_colours = {to_hex(COLORS[name]) for name in ("clipped", "unclipped", "clip_only")}
    running_ax = tokens_app.artists["running"].axes
    limits = [line for line in running_ax.get_lines() if "overflow" in line.get_label()]
    art = tokens_app.artists
    thresholds = [*limits, art["float32_overflow"], art["float64_overflow"]]
    assert len(thresholds) == 4
    thresholds += [line for pair in variants_app.cap_lines.values() for line in pair]
    for line in thresholds:
        assert to_hex(line.get_color()) not in objective_colours, line.get_label()
    float32, float64 = limits  # told apart by line style, the same in both panels
    assert float32.get_linestyle() != float64.get_linestyle()
    assert art["float32_overflow"].get_linestyle() == float32.get_linestyle()
    assert art["float64_overflow"].get_linestyle() == float64.get_linestyle()


# -- the variants app ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def variants_explorer() -> VariantsExplorer:
    return VariantsExplorer()


@pytest.fixture
def variants_app(variants_explorer) -> VariantsExplorer:
    """The module's variants app, back at its defaults."""
    controls = variants_explorer.controls
    controls["cap"].min = CAP_RANGE[0]
    defaults = (DEFAULT_EPS_LOW, DEFAULT_EPS_HIGH, DEFAULT_CAP, True)
    for name, value in zip(("eps_low", "eps_high", "cap", "cap_on"), defaults, strict=True):
        controls[name].value = value
    assert variants_explorer.message.value == ""
    return variants_explorer


@pytest.mark.parametrize(
    "changed",
    [
        {"eps_low": 0.0},
        {"eps_low": 1.0},  # the cap still clips A < 0 above c
        {"eps_high": 0.6},
        {"cap": CAP_RANGE[0]},
        {"cap": 2.5},
        {"cap": CAP_RANGE[1]},
        {"cap_on": False},
        {"cap_on": False, "eps_low": 1.0},
    ],
)
def test_the_sliders_move_the_band_the_cap_and_the_curves_to_ppo_clips(variants_app, changed):
    for name, value in changed.items():
        variants_app.controls[name].value = value
    defaults = {"eps_low": DEFAULT_EPS_LOW, "eps_high": DEFAULT_EPS_HIGH, "cap": DEFAULT_CAP}
    low, high, cap = ({**defaults, **changed}[name] for name in defaults)
    cap = cap if changed.get("cap_on", True) else None
    variant = {"eps_low": low, "eps_high": high, "dual_clip": cap}
    for sign, panel in variants_app.columns.items():
        grid = ratio_grid(model.EPS, r_axis=VARIANT_R_AXIS, **variant)
        np.testing.assert_array_equal(panel.objective.get_xdata(), grid)
        assert_panel_draws(panel, sign, model.EPS, **variant)
    assert variants_app.controls["cap"].disabled == (cap is None)
    negative, shown = variants_app.columns[-1], plain(variants_app.readout.value)
    assert_states(shown, f"flat (clipped) where r > {rounded(1 + high, 3)}")
    assert ("A = −1: never clipped" in shown) == (cap is None and low == 1.0)
    if cap is None:
        assert negative.objective.get_ydata()[-1] == -VARIANT_R_AXIS[1]
        assert negative.zero_grad_other_side[0].get_width() == 0.0
        assert np.isnan(variants_app.cap_lines[-1][0].get_xdata()[0])
        assert "dual clip off" in shown
        return
    grid = negative.objective.get_xdata()
    sweep = ppo_clip.ratio_sweep(grid, -1.0, eps_low=low, eps_high=high, dual_clip=cap)
    assert negative.zero_grad_other_side[0].get_x() == grid[sweep.is_clipped & (grid > 1)].min()
    assert negative.objective.get_ydata()[-1] == -cap
    band_side = negative.zero_grad[0]  # the band-side region stays left of the band
    assert band_side.get_x() + band_side.get_width() <= max(1 - low, 0.0)
    assert variants_app.cap_lines[-1][0].get_xdata()[0] == cap
    assert_states(shown, f"r > {rounded(cap, 3)}.")


@pytest.mark.parametrize(
    ("app", "control", "value", "good", "says"),
    [
        ("tokens_app", "shift", model.MAX_SHIFT + 1, 0.5, f"between 0 and {model.MAX_SHIFT:g}"),
        ("tokens_app", "length", model.MAX_TOKENS + 1, 500, f"between 1 and {model.MAX_TOKENS}"),
        ("variants_app", "cap", 0.9, 2.0, "cap must be between {:g} and {:g}".format(*CAP_RANGE)),
    ],
)
def test_a_setting_beyond_the_axes_shows_a_message_and_keeps_the_figure(
    request, app, control, value, good, says
):
    """Set from code (a slider's range can be widened): a message in place, no traceback.

    NaN, which a slider does not clamp, is refused for every app in tests/test_app.py."""
    app = request.getfixturevalue(app)
    widget = app.controls[control]
    shown = np.asarray(app.canvas.buffer_rgba()).copy()
    widget.min, widget.max = min(widget.min, value), max(widget.max, value)  # a slider clamps
    widget.value = value
    assert says in plain(app.message.value)
    assert np.array_equal(np.asarray(app.canvas.buffer_rgba()), shown)
    widget.value = good
    assert app.message.value == ""
