"""Unit tests for ppo_clip: the worked example, every edge of the contract, input handling.

The contract is ../shared/SPEC.md (section "The module contract").  Where a test needs
values computed independently of the module it takes them from the project's plain-Python
reference, :mod:`reference`.  Every test here runs with warnings turned into
errors: a RuntimeWarning printed under a notebook cell is a visible defect, so "no NaN"
also means "no overflow warning on the way".
"""

from __future__ import annotations

import inspect
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import reference
from helpers import assert_contract_loss, log_landing_on

import ppo_clip
from ppo_clip import (
    clip_breakdown,
    clip_fraction,
    objective_terms,
    ppo_clip_grad,
    ppo_clip_loss,
    ratio_sweep,
    surrogate_grad,
    surrogate_loss,
)
from ppo_clip_inputs import checked_eps, checked_log_ratio

pytestmark = pytest.mark.filterwarnings("error")

# The worked example exactly as the contract prints it.
EXAMPLE_LOGP_OLD = np.log([0.5, 0.5, 0.5, 0.5])
EXAMPLE_LOGP_NEW = np.log([0.7, 0.55, 0.3, 0.45])
EXAMPLE_ADVANTAGES = [1.0, 2.0, -1.0, -0.5]
EXAMPLE_ARGS = (EXAMPLE_LOGP_NEW, EXAMPLE_LOGP_OLD, EXAMPLE_ADVANTAGES)

CONTRACT_FUNCTIONS = (ppo_clip_loss, clip_fraction, ppo_clip_grad)
ALL_BATCH_FUNCTIONS = (
    ppo_clip_loss,
    clip_fraction,
    ppo_clip_grad,
    clip_breakdown,
    surrogate_loss,
    surrogate_grad,
)

# Print options as numpy ships them, so a repr test does not depend on other tests.
NUMPY_DEFAULT_PRINT = {"precision": 8, "floatmode": "maxprec", "suppress": False, "legacy": False}

#: Log-ratios whose exp lands exactly on the band's edges at eps = 0.2, on this machine.
LOG_1_2 = log_landing_on(1.2)
LOG_0_8 = log_landing_on(0.8)


def one_sample(logp_new: float, logp_old: float, advantage: float, eps: float = 0.2):
    """The breakdown, loss and gradient of a batch of one sample."""
    args = ([logp_new], [logp_old], [advantage], eps)
    return clip_breakdown(*args), ppo_clip_loss(*args), ppo_clip_grad(*args)


# --------------------------------------------------------------------------
# The worked example, to the printed digits
# --------------------------------------------------------------------------


def test_worked_example_loss_prints_exactly_as_the_contract():
    loss = ppo_clip_loss(*EXAMPLE_ARGS)
    assert type(loss) is float
    assert_contract_loss(loss)


def test_one_ulp_on_a_ratio_can_change_the_losss_last_digit():
    """Notebook 2: the loss too is compared within a tolerance, not digit for digit.  Pure
    float64 arithmetic on the textbook ratios (no exp), so the same on every CPU."""
    advantages = np.array([1.0, 2.0, -1.0, -0.5])
    losses = []
    for r1 in (1.1, np.nextafter(1.1, 0.0)):
        ratios = np.array([1.4, r1, 0.6, 0.9])
        terms = np.minimum(ratios * advantages, np.clip(ratios, 0.8, 1.2) * advantages)
        losses.append(-terms.sum() / 4)
    assert losses[0] != losses[1]
    assert losses[1] == pytest.approx(losses[0], rel=1e-15)


def test_worked_example_clip_fraction_is_one_half():
    fraction = clip_fraction(*EXAMPLE_ARGS)
    assert type(fraction) is float
    assert fraction == 0.5


def test_worked_example_gradient_prints_exactly_as_the_contract():
    grad = ppo_clip_grad(*EXAMPLE_ARGS)
    assert isinstance(grad, np.ndarray)
    assert grad.dtype == np.float64
    assert grad.shape == (4,)
    with np.printoptions(**NUMPY_DEFAULT_PRINT):
        assert str(grad) == "[ 0.     -0.55    0.      0.1125]"
        assert repr(grad) == "array([ 0.    , -0.55  ,  0.    ,  0.1125])"
    assert grad[0] == 0.0
    assert grad[2] == 0.0
    np.testing.assert_allclose(grad[[1, 3]], [-0.55, 0.1125], rtol=1e-15)


def test_worked_example_breakdown_shows_ratios_and_which_samples_clip():
    breakdown = clip_breakdown(*EXAMPLE_ARGS)
    with np.printoptions(**NUMPY_DEFAULT_PRINT):
        assert repr(breakdown.ratio) == "array([1.4, 1.1, 0.6, 0.9])"
        assert repr(breakdown.clipped_ratio) == "array([1.2, 1.1, 0.8, 0.9])"
        assert repr(breakdown.objective_term) == "array([ 1.2 ,  2.2 , -0.8 , -0.45])"
    assert breakdown.is_clipped.tolist() == [True, False, True, False]
    np.testing.assert_allclose(breakdown.unclipped_term, [1.4, 2.2, -0.6, -0.45], rtol=1e-15)
    np.testing.assert_allclose(breakdown.clipped_term, [1.2, 2.2, -0.8, -0.45], rtol=1e-15)
    assert breakdown.n == 4
    assert breakdown.batch_size == 4
    assert (breakdown.lower, breakdown.upper) == (0.8, 1.2)
    assert breakdown.dual_clip is None
    assert breakdown.loss == ppo_clip_loss(*EXAMPLE_ARGS)
    assert breakdown.clip_fraction == clip_fraction(*EXAMPLE_ARGS)
    np.testing.assert_array_equal(breakdown.grad, ppo_clip_grad(*EXAMPLE_ARGS))


def test_module_worked_example_is_the_contracts_and_fresh_each_time():
    example = ppo_clip.worked_example()
    np.testing.assert_array_equal(example.logp_new, EXAMPLE_LOGP_NEW)
    np.testing.assert_array_equal(example.logp_old, EXAMPLE_LOGP_OLD)
    np.testing.assert_array_equal(example.advantages, EXAMPLE_ADVANTAGES)
    assert example.eps == 0.2
    assert_contract_loss(ppo_clip_loss(*example))
    example.advantages[:] = 0.0
    assert ppo_clip.worked_example().advantages.tolist() == EXAMPLE_ADVANTAGES


def test_worked_example_as_plain_lists_gives_the_same_numbers():
    args = (EXAMPLE_LOGP_NEW.tolist(), EXAMPLE_LOGP_OLD.tolist(), EXAMPLE_ADVANTAGES)
    assert_contract_loss(ppo_clip_loss(*args))
    assert clip_fraction(*args) == 0.5
    np.testing.assert_array_equal(ppo_clip_grad(*args), ppo_clip_grad(*EXAMPLE_ARGS))


def test_default_eps_is_0_2():
    assert ppo_clip.DEFAULT_EPS == 0.2
    for function in CONTRACT_FUNCTIONS:
        np.testing.assert_array_equal(function(*EXAMPLE_ARGS), function(*EXAMPLE_ARGS, 0.2))


# --------------------------------------------------------------------------
# Edges: overflow of the ratio
# --------------------------------------------------------------------------


def test_overflowing_ratio_with_zero_advantage_contributes_exactly_zero():
    breakdown, loss, grad = one_sample(0.0, -1000.0, 0.0)
    assert breakdown.ratio[0] == math.inf
    assert loss == 0.0
    assert grad.tolist() == [0.0]
    assert not breakdown.is_clipped[0]
    # next to an ordinary sample it changes nothing but the 1/N
    ordinary = ppo_clip_loss([math.log(1.1)], [0.0], [2.0])
    mixed = ppo_clip_loss([0.0, math.log(1.1)], [-1000.0, 0.0], [0.0, 2.0])
    assert mixed == ordinary / 2
    mixed_grad = ppo_clip_grad([0.0, math.log(1.1)], [-1000.0, 0.0], [0.0, 2.0])
    assert mixed_grad[0] == 0.0
    assert mixed_grad[1] == ppo_clip_grad([math.log(1.1)], [0.0], [2.0])[0] / 2


def test_overflowing_ratio_with_positive_advantage_is_clipped_and_finite():
    breakdown, loss, grad = one_sample(0.0, -1000.0, 3.0)
    assert breakdown.ratio[0] == math.inf
    assert breakdown.is_clipped[0]
    assert loss == -(1.2 * 3.0)
    assert grad.tolist() == [0.0]


def test_overflowing_ratio_with_negative_advantage_gives_plus_inf_loss_not_nan():
    breakdown, loss, grad = one_sample(0.0, -1000.0, -0.5)
    assert not breakdown.is_clipped[0]
    assert loss == math.inf
    assert grad.tolist() == [math.inf]
    assert clip_fraction([0.0], [-1000.0], [-0.5]) == 0.0


def test_batch_with_every_kind_of_overflow_has_no_nan():
    logp_new = [0.0, 0.0, 0.0, math.log(0.9)]
    logp_old = [-1000.0, -1000.0, -1000.0, 0.0]
    advantages = [-1.0, 0.0, 2.0, 1.0]
    breakdown = clip_breakdown(logp_new, logp_old, advantages)
    for values in (
        breakdown.unclipped_term,
        breakdown.clipped_term,
        breakdown.objective_term,
        breakdown.grad,
    ):
        assert not np.isnan(values).any()
    assert ppo_clip_loss(logp_new, logp_old, advantages) == math.inf
    assert breakdown.is_clipped.tolist() == [False, False, True, False]
    grad = ppo_clip_grad(logp_new, logp_old, advantages)
    assert grad[:3].tolist() == [math.inf, 0.0, 0.0]
    assert grad[3] == pytest.approx(-0.9 / 4, rel=1e-15)


@pytest.mark.parametrize("advantage", [-10.0, 10.0])
def test_finite_ratio_times_advantage_overflowing_is_inf_without_a_warning(advantage):
    # r = exp(709) ~ 8.2e307 is finite, but r * A overflows float64.  Like the overflow of
    # exp itself, that must give the float64 value (+-inf) silently, not a RuntimeWarning.
    breakdown, loss, grad = one_sample(0.0, -709.0, advantage)
    assert math.isfinite(breakdown.ratio[0])
    if advantage < 0:
        assert loss == math.inf
        assert grad.tolist() == [math.inf]
    else:
        assert loss == -(1.2 * advantage)
        assert grad.tolist() == [0.0]


def test_sum_of_huge_finite_terms_overflowing_still_gives_the_finite_mean():
    # Two terms of about -1.35e308: their float64 sum overflows although the mean does not.
    args = ([0.0, 0.0], [-709.5, -709.5], [-1.0, -1.0])
    loss = ppo_clip_loss(*args)
    assert loss == pytest.approx(reference.exact_loss(*args), rel=1e-15)
    assert loss == pytest.approx(math.exp(709.5), rel=1e-15)


# Issue 24: exact where float64 can represent the answer.  Each expectation is computed from
# this machine's ratio (its exp may differ from another CPU's in the last bit).


def test_a_gradient_whose_product_overflows_is_the_exact_finite_value():
    # r = e^709 ~ 8.2e307 times A = -3 overflows float64, but -r*A/N ~ 1.23e308 fits.
    args = ([709.0, 0.0], [0.0, 0.0], [-3.0, 1.0])
    grad = ppo_clip_grad(*args)
    ratio = clip_breakdown(*args).ratio[0]
    assert grad[0] == float(Fraction(float(ratio)) * 3 / 2)
    assert grad[0] == pytest.approx(1.2327611192332458e308, rel=1e-15)
    assert grad[1] == -0.5
    np.testing.assert_array_equal(clip_breakdown(*args).grad, grad)
    np.testing.assert_array_equal(surrogate_grad(*args, objective="unclipped"), grad)


def test_one_overflowing_term_in_a_huge_batch_gives_the_finite_loss():
    # N = 2**17, r = e^709.7 and A = -1e5 (the rest 0): r*A overflows, r*A/N does not.
    n = 2**17
    logp_new, logp_old, advantages = np.zeros(n), np.zeros(n), np.zeros(n)
    logp_new[0], advantages[0] = 709.7, -1e5
    breakdown = clip_breakdown(logp_new, logp_old, advantages)
    exact = float(Fraction(float(breakdown.ratio[0])) * 100_000 / n)
    assert exact == pytest.approx(1.2627e308, rel=1e-4)
    assert ppo_clip_loss(logp_new, logp_old, advantages) == exact
    assert breakdown.loss == exact
    assert breakdown.grad[0] == exact  # -r*A/N is the same number here
    assert breakdown.partial_loss(1) == exact


def test_huge_advantages_that_cancel_give_the_exact_loss():
    # r = 1, so each term is its advantage: they sum to exactly 1, but float64's running sum
    # overflows on the way.  Every objective and variant keeps these terms.
    args = ([0.0] * 5, [0.0] * 5, [1.7e308, 1.0, 1.7e308, -1.7e308, -1.7e308])
    assert ppo_clip_loss(*args) == -0.2
    assert clip_breakdown(*args, eps_low=0.1, eps_high=0.3, dual_clip=3.0).loss == -0.2
    for objective in ppo_clip.OBJECTIVES:
        assert surrogate_loss(*args, objective=objective) == -0.2


def test_a_variants_loss_whose_term_overflows_is_the_exact_finite_value():
    # Found in CI by tests/test_numerics.py: r = e^709.5 ~ 1.35e308 with A = -2 and a band of
    # width 0.  The term r*A overflows; the loss -(1/2)(r * -2) is r itself.
    args = ([0.0, 0.0], [0.0, -709.5], [0.0, -2.0])
    breakdown = clip_breakdown(*args, eps_low=0, eps_high=0)
    ratio = float(breakdown.ratio[1])
    assert math.isfinite(ratio)
    assert breakdown.loss == ratio
    assert breakdown.partial_loss(2) == ratio
    assert breakdown.partial_loss(1) == 0.0
    assert breakdown.grad.tolist() == [0.0, ratio]
    assert clip_breakdown(*args, eps=0).loss == ppo_clip_loss(*args, eps=0) == ratio


def test_ratio_underflow_to_zero_is_handled():
    # r = exp(-1000) is 0 in float64: far below the band.
    breakdown, loss, grad = one_sample(-1000.0, 0.0, -2.0)
    assert breakdown.ratio[0] == 0.0
    assert breakdown.is_clipped[0]
    assert loss == -(0.8 * -2.0)
    assert grad.tolist() == [0.0]
    breakdown, loss, grad = one_sample(-1000.0, 0.0, 2.0)
    assert not breakdown.is_clipped[0]
    assert loss == 0.0
    assert grad.tolist() == [0.0]


# --------------------------------------------------------------------------
# Edges: whatever numpy error state the caller set (issue 31, section 3)
# --------------------------------------------------------------------------

#: A batch where float64 under- and overflows on the way: ratios that underflow to 0 and to a
#: subnormal number, ratios that overflow (one with A == 0), finite log-probabilities too far
#: apart for float64 to hold their difference, products r*A too large and too small for
#: float64, and terms too small to divide by N.
EDGE_BATCH = (
    np.array([-800.0, -720.0, 0.0, 0.0, 0.0, -1.0, 1e308, 0.0, 0.0]),
    np.array([0.0, 0.0, -1000.0, -1000.0, -0.5, 0.0, -1e308, 0.0, -0.1]),
    np.array([1.0, -2.0, 0.0, 1.0, 1.7e308, 5e-324, 1.0, 1e-310, -1e-300]),
)
#: Ratios for a sweep: 0, subnormal, ordinary and huge, times tiny and huge advantages.
SWEEP_GRID = np.array([0.0, 5e-324, 1e-300, 0.5, 1.0, 1.5, 1e300])


def every_value(breakdown: ppo_clip.ClipBreakdown) -> dict:
    """Every array and number a breakdown offers (its partial losses too)."""
    values = {name: getattr(breakdown, name) for name in BREAKDOWN_ATTRIBUTES}
    values["loss_contribution"] = breakdown.loss_contribution
    values["partial_losses"] = [breakdown.partial_loss(k) for k in range(1, breakdown.n + 1)]
    for objective in ppo_clip.OBJECTIVES:
        values[objective] = ppo_clip.objective_terms(breakdown, objective)
        values[f"{objective} grad"] = ppo_clip.objective_grad(breakdown, objective)
    return values


#: A call of every public function of ppo_clip (each ClipBreakdown member through every_value).
PUBLIC_CALLS = {
    "ppo_clip_loss": lambda: ppo_clip_loss(*EDGE_BATCH),
    "clip_fraction": lambda: clip_fraction(*EDGE_BATCH, 0.0),
    "ppo_clip_grad": lambda: ppo_clip_grad(*EDGE_BATCH),
    "clip_breakdown": lambda: every_value(clip_breakdown(*EDGE_BATCH, 1.0)),
    "clip_breakdown, variants": lambda: every_value(
        clip_breakdown(*EDGE_BATCH, eps_low=0.1, eps_high=0.3, dual_clip=3.0)
    ),
    **{
        f"{f.__name__}, {objective}": lambda f=f, objective=objective: f(
            *EDGE_BATCH, objective=objective
        )
        for f in (surrogate_loss, surrogate_grad)
        for objective in ppo_clip.OBJECTIVES
    },
    **{
        f"ratio_sweep, A = {advantage}": lambda advantage=advantage: every_value(
            ratio_sweep(SWEEP_GRID, advantage, dual_clip=2.0)
        )
        for advantage in (5e-324, -1e-300, 1.7e308)
    },
    # a long double too small for float64 (where long double is wider): read as 0
    "ppo_clip_loss, long double": lambda: ppo_clip_loss(
        np.array([np.longdouble("1e-4000"), 0.0], dtype=np.longdouble), [0.0, 0.0], [1.0, 1.0]
    ),
    "clip_band": lambda: ppo_clip.clip_band(0.2, eps_high=0.3),
    "worked_example": lambda: tuple(ppo_clip.worked_example()),
}


def test_every_public_function_has_a_call_under_the_callers_error_state():
    functions = {name for name in ppo_clip.__all__ if inspect.isfunction(getattr(ppo_clip, name))}
    called = {name.split(",")[0] for name in PUBLIC_CALLS}
    called |= {"objective_terms", "objective_grad"}  # by every_value, on each breakdown
    assert functions <= called, functions - called


@pytest.mark.parametrize("call", PUBLIC_CALLS.values(), ids=PUBLIC_CALLS.keys())
def test_the_callers_numpy_error_state_changes_nothing(call):
    """After ``np.seterr(all="raise")`` every public function still answers, the same."""
    with np.errstate(all="ignore"):
        expected = call()
    with np.errstate(all="raise"):
        got = call()
    np.testing.assert_equal(got, expected)


def test_log_probabilities_too_far_apart_for_float64_give_an_infinite_ratio_without_a_warning():
    """Finite inputs whose difference float64 cannot hold: the ratio is inf or 0, as exp says."""
    far_apart = ([1e308, -1e308], [-1e308, 1e308], [-1.0, 1.0])
    breakdown = clip_breakdown(*far_apart)  # under the default error state: no RuntimeWarning
    assert breakdown.ratio.tolist() == [math.inf, 0.0]
    assert ppo_clip_loss(*far_apart) == math.inf
    assert ppo_clip_grad(*far_apart).tolist() == [math.inf, 0.0]


# --------------------------------------------------------------------------
# Edges: the band's boundary, strict comparisons, A == 0, eps = 0 and eps = 1
# --------------------------------------------------------------------------


def test_exp_of_log_is_exact_on_the_boundaries_used_below():
    """A ratio exactly on an edge is a real case: some log-ratio lands there on any machine."""
    assert abs(LOG_1_2 - math.log(1.2)) <= 8 * math.ulp(math.log(1.2))
    assert clip_breakdown([LOG_1_2], [0.0], [1.0]).ratio[0] == 1.2
    assert clip_breakdown([0.0], [-LOG_1_2], [1.0]).ratio[0] == 1.2
    assert clip_breakdown([LOG_0_8], [0.0], [1.0]).ratio[0] == 0.8


@pytest.mark.parametrize(
    ("logp_new", "logp_old"), [(LOG_1_2, 0.0), (0.0, -LOG_1_2)], ids=["positive-logp", "in-range"]
)
def test_ratio_exactly_on_upper_boundary_is_not_clipped(logp_new, logp_old):
    breakdown, loss, grad = one_sample(logp_new, logp_old, 2.0)
    assert breakdown.ratio[0] == 1.2
    assert not breakdown.is_clipped[0]
    assert grad.tolist() == [-1.2 * 2.0]
    assert loss == -(1.2 * 2.0)
    assert clip_fraction([logp_new], [logp_old], [2.0]) == 0.0


def test_ratio_exactly_on_lower_boundary_is_not_clipped():
    breakdown, loss, grad = one_sample(LOG_0_8, 0.0, -3.0)
    assert breakdown.ratio[0] == 0.8
    assert not breakdown.is_clipped[0]
    assert grad.tolist() == [-0.8 * -3.0]
    assert loss == -(0.8 * -3.0)


def test_boundary_gradient_is_divided_by_n():
    logp_new = [LOG_1_2, LOG_0_8, 0.0]
    advantages = [2.0, -3.0, 0.5]
    grad = ppo_clip_grad(logp_new, [0.0, 0.0, 0.0], advantages)
    assert grad.tolist() == [-1.2 * 2.0 / 3, -0.8 * -3.0 / 3, -1.0 * 0.5 / 3]


def test_one_float_step_past_the_boundary_is_clipped():
    ratios = [np.nextafter(1.2, 2.0), np.nextafter(0.8, 0.0)]
    sweep_up = ratio_sweep(ratios, 1.0)
    sweep_down = ratio_sweep(ratios, -1.0)
    assert sweep_up.is_clipped.tolist() == [True, False]
    assert sweep_down.is_clipped.tolist() == [False, True]
    # and through log-probabilities, for the contract functions
    breakdown, _, grad = one_sample(LOG_1_2 + 1e-15, 0.0, 1.0)
    assert breakdown.ratio[0] > 1.2
    assert breakdown.is_clipped[0]
    assert grad.tolist() == [0.0]


def test_moves_that_make_the_objective_worse_are_never_clipped():
    # A > 0 with r < 1 - eps and A < 0 with r > 1 + eps keep their full gradient.
    logp_new = [math.log(0.3), math.log(3.0)]
    advantages = [1.0, -1.0]
    breakdown = clip_breakdown(logp_new, [0.0, 0.0], advantages)
    assert breakdown.is_clipped.tolist() == [False, False]
    np.testing.assert_allclose(breakdown.grad, [-0.3 / 2, 3.0 / 2], rtol=1e-15)
    np.testing.assert_allclose(breakdown.objective_term, [0.3, -3.0], rtol=1e-15)


@pytest.mark.parametrize("eps", [0.0, 0.2, 1.0])
def test_zero_advantage_is_never_clipped_and_has_zero_gradient(eps):
    logp_new = [-1000.0, math.log(0.5), 0.0, math.log(2.0), 0.0]
    logp_old = [0.0, 0.0, 0.0, 0.0, -1000.0]
    advantages = [0.0, 0.0, -0.0, 0.0, 0.0]
    breakdown = clip_breakdown(logp_new, logp_old, advantages, eps)
    assert not breakdown.is_clipped.any()
    assert clip_fraction(logp_new, logp_old, advantages, eps) == 0.0
    assert ppo_clip_loss(logp_new, logp_old, advantages, eps) == 0.0
    assert ppo_clip_grad(logp_new, logp_old, advantages, eps).tolist() == [0.0] * 5


def test_eps_zero_clips_every_favourable_move_but_not_ratio_one():
    logp_new = [-3.0, -3.0 + 1e-9, -3.0 - 1e-9, -3.0 - 1e-9, -3.0 + 1e-9, -3.0]
    logp_old = [-3.0] * 6
    advantages = [1.0, 1.0, -1.0, 1.0, -1.0, -1.0]
    breakdown = clip_breakdown(logp_new, logp_old, advantages, 0.0)
    assert breakdown.ratio[0] == 1.0
    assert breakdown.ratio[5] == 1.0
    assert breakdown.lower == breakdown.upper == 1.0
    assert breakdown.is_clipped.tolist() == [False, True, True, False, False, False]
    grad = ppo_clip_grad(logp_new, logp_old, advantages, 0.0)
    assert grad[0] == -1.0 / 6
    assert grad[5] == 1.0 / 6
    assert grad[1] == grad[2] == 0.0
    assert grad[3] != 0.0
    assert grad[4] != 0.0
    assert clip_fraction(logp_new, logp_old, advantages, 0) == 2 / 6


def test_eps_one_never_clips_a_negative_advantage():
    # 1 - eps = 0: even a ratio that underflowed to exactly 0 is not below it (strict).
    logp_new = [-1000.0, -50.0, math.log(0.01), math.log(3.0)]
    advantages = [-1.0, -2.0, -0.5, 1.0]
    breakdown = clip_breakdown(logp_new, [0.0] * 4, advantages, 1.0)
    assert breakdown.ratio[0] == 0.0
    assert breakdown.lower == 0.0
    assert breakdown.upper == 2.0
    assert breakdown.is_clipped.tolist() == [False, False, False, True]
    assert clip_fraction(logp_new, [0.0] * 4, advantages, 1) == 0.25
    grad = ppo_clip_grad(logp_new, [0.0] * 4, advantages, 1.0)
    assert grad[1] == -breakdown.ratio[1] * -2.0 / 4
    assert grad[1] > 0
    assert grad[3] == 0.0


def test_advantages_are_used_as_given_not_normalized():
    # a single sample at r = 1: normalizing would make A zero (or NaN)
    assert ppo_clip_loss([-1.0], [-1.0], [5.0]) == -5.0
    assert ppo_clip_grad([-1.0], [-1.0], [5.0]).tolist() == [-5.0]
    # scaling every advantage scales the loss and the gradient
    doubled = [2 * a for a in EXAMPLE_ADVANTAGES]
    assert ppo_clip_loss(EXAMPLE_LOGP_NEW, EXAMPLE_LOGP_OLD, doubled) == 2 * ppo_clip_loss(
        *EXAMPLE_ARGS
    )
    np.testing.assert_array_equal(
        ppo_clip_grad(EXAMPLE_LOGP_NEW, EXAMPLE_LOGP_OLD, doubled), 2 * ppo_clip_grad(*EXAMPLE_ARGS)
    )
    # shifting them changes which samples are clipped: no centering happens inside
    shifted = [a + 10.0 for a in EXAMPLE_ADVANTAGES]
    assert clip_fraction(EXAMPLE_LOGP_NEW, EXAMPLE_LOGP_OLD, shifted) == 0.25


# --------------------------------------------------------------------------
# The common implementation form and the two clip-fraction definitions
# --------------------------------------------------------------------------


def common_form_terms(ratio: np.ndarray, advantages: np.ndarray, eps: float) -> np.ndarray:
    """``max(-A*r, -A*clip(r))`` per sample, as most PPO codes write the loss."""
    return np.maximum(-advantages * ratio, -advantages * np.clip(ratio, 1 - eps, 1 + eps))


def autograd_of_common_form(ratio: np.ndarray, advantages: np.ndarray, eps: float) -> np.ndarray:
    """d/dlogp_new of ``max(-A*r, -A*clip(r)).mean()`` with PyTorch's conventions.

    ``maximum`` splits the gradient evenly on a tie; ``clamp`` passes it at the bounds.
    """
    unclipped = -advantages * ratio
    clipped = -advantages * np.clip(ratio, 1 - eps, 1 + eps)
    clamp_passes = (ratio >= 1 - eps) & (ratio <= 1 + eps)
    weight_unclipped = np.where(unclipped > clipped, 1.0, np.where(unclipped < clipped, 0.0, 0.5))
    d_loss_d_ratio = weight_unclipped * -advantages + (1 - weight_unclipped) * np.where(
        clamp_passes, -advantages, 0.0
    )
    return d_loss_d_ratio * ratio / ratio.shape[0]


def varied_batch(seed: int, n: int, eps: float):
    """Ratios near the band, boundary ratios, r == 1 and A == 0, all finite."""
    rng = np.random.default_rng(seed)
    logp_old = rng.uniform(-30.0, 0.0, n)
    logp_new = logp_old + rng.uniform(-0.6, 0.6, n)
    logp_new[: n // 8] = 0.0
    logp_old[: n // 16] = -log_landing_on(1 + eps)
    logp_old[n // 16 : n // 8] = -log_landing_on(1 - eps) if eps < 1 else -5.0
    logp_new[n // 8 : n // 4] = logp_old[n // 8 : n // 4]
    advantages = rng.normal(0.0, 2.0, n)
    advantages[rng.random(n) < 0.1] = 0.0
    return logp_new, logp_old, advantages


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.2, 0.3, 1.0])
def test_loss_equals_the_common_max_form(eps):
    logp_new, logp_old, advantages = varied_batch(seed=7, n=2000, eps=eps)
    breakdown = clip_breakdown(logp_new, logp_old, advantages, eps)
    common = common_form_terms(breakdown.ratio, advantages, eps)
    np.testing.assert_array_equal(breakdown.objective_term, -common)
    loss = ppo_clip_loss(logp_new, logp_old, advantages, eps)
    scale = np.abs(common).mean()
    assert abs(loss - common.mean()) <= 1e-14 * scale


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.2, 0.3, 1.0])
def test_gradient_equals_pytorch_style_autograd_of_the_common_form(eps):
    logp_new, logp_old, advantages = varied_batch(seed=11, n=2000, eps=eps)
    ratio = clip_breakdown(logp_new, logp_old, advantages, eps).ratio
    on_boundary = (ratio == 1 - eps) | (ratio == 1 + eps)
    assert on_boundary.sum() >= 100  # the comparison covers the ties
    expected = autograd_of_common_form(ratio, advantages, eps)
    grad = ppo_clip_grad(logp_new, logp_old, advantages, eps)
    np.testing.assert_array_equal(grad == 0, expected == 0)
    np.testing.assert_allclose(grad, expected, rtol=1e-15, atol=0)


def test_the_two_clip_fraction_definitions_differ_on_the_contract_example():
    ratios = np.array([1.5, 1.5, 0.5, 0.5])
    advantages = [1.0, -1.0, 1.0, -1.0]
    logp_new, logp_old = np.log(ratios), np.zeros(4)
    breakdown = clip_breakdown(logp_new, logp_old, advantages, 0.2)
    np.testing.assert_allclose(breakdown.ratio, ratios, rtol=1e-15)
    assert breakdown.band_fraction == 1.0
    assert breakdown.outside_band.tolist() == [True] * 4
    assert clip_fraction(logp_new, logp_old, advantages, 0.2) == 0.5
    assert breakdown.clip_fraction == 0.5
    assert breakdown.is_clipped.tolist() == [True, False, False, True]


# --------------------------------------------------------------------------
# Inputs: array-likes, dtypes, read-only arrays, never modified, large N
# --------------------------------------------------------------------------


def assert_same_results(args_a, args_b, eps=0.2):
    assert ppo_clip_loss(*args_a, eps) == ppo_clip_loss(*args_b, eps)
    assert clip_fraction(*args_a, eps) == clip_fraction(*args_b, eps)
    np.testing.assert_array_equal(ppo_clip_grad(*args_a, eps), ppo_clip_grad(*args_b, eps))


def check_return_types(args, n):
    loss, fraction, grad = (function(*args) for function in CONTRACT_FUNCTIONS)
    assert type(loss) is float
    assert type(fraction) is float
    assert 0.0 <= fraction <= 1.0
    assert isinstance(grad, np.ndarray)
    assert grad.dtype == np.float64
    assert grad.shape == (n,)


def test_lists_and_tuples_are_accepted():
    as_lists = (EXAMPLE_LOGP_NEW.tolist(), EXAMPLE_LOGP_OLD.tolist(), list(EXAMPLE_ADVANTAGES))
    as_tuples = tuple(tuple(values) for values in as_lists)
    check_return_types(as_lists, 4)
    check_return_types(as_tuples, 4)
    assert_same_results(as_lists, EXAMPLE_ARGS)
    assert_same_results(as_tuples, EXAMPLE_ARGS)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, int])
def test_integer_inputs_are_accepted(dtype):
    # non-negative integers are valid log-densities too (continuous actions)
    signed = np.dtype(dtype).kind == "i"
    args = (
        np.array([3, 2, 1, 2], dtype=dtype),
        np.array([2, 2, 2, 2], dtype=dtype),
        np.array([1, 2, -1, 0] if signed else [1, 2, 3, 0], dtype=dtype),
    )
    floats = tuple(values.astype(np.float64) for values in args)
    check_return_types(args, 4)
    assert_same_results(args, floats)
    assert_same_results([values.tolist() for values in args], floats)


def test_float32_inputs_are_computed_in_float64():
    args32 = tuple(
        np.asarray(values, dtype=np.float32)
        for values in (EXAMPLE_LOGP_NEW, EXAMPLE_LOGP_OLD, EXAMPLE_ADVANTAGES)
    )
    widened = tuple(values.astype(np.float64) for values in args32)
    check_return_types(args32, 4)
    assert_same_results(args32, widened)
    # float64 arithmetic on the float32 values, to float64 precision (float32 arithmetic
    # would be off by about 1e-7)
    loss, fraction, grad = reference.contract(*(values.tolist() for values in widened))
    assert ppo_clip_loss(*args32) == pytest.approx(loss, rel=1e-15)
    assert clip_fraction(*args32) == fraction == 0.5
    np.testing.assert_allclose(ppo_clip_grad(*args32), grad, rtol=1e-15)


def test_python_int_and_float32_eps_are_accepted():
    assert ppo_clip_loss(*EXAMPLE_ARGS, 0) == ppo_clip_loss(*EXAMPLE_ARGS, 0.0)
    assert ppo_clip_loss(*EXAMPLE_ARGS, 1) == ppo_clip_loss(*EXAMPLE_ARGS, 1.0)
    assert ppo_clip_loss(*EXAMPLE_ARGS, np.float64(0.2)) == ppo_clip_loss(*EXAMPLE_ARGS, 0.2)
    assert clip_fraction(*EXAMPLE_ARGS, np.float32(0.2)) == 0.5


def read_only(values) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    array.flags.writeable = False
    return array


BREAKDOWN_ATTRIBUTES = (
    "ratio",
    "clipped_ratio",
    "advantages",
    "unclipped_term",
    "clipped_term",
    "objective_term",
    "is_clipped",
    "grad",
    "lower",
    "upper",
    "batch_size",
    "dual_clip",
    "n",
    "loss",
    "clip_fraction",
    "outside_band",
    "band_fraction",
)


def assert_results_equal(result_a, result_b):
    if isinstance(result_a, ppo_clip.ClipBreakdown):
        for name in BREAKDOWN_ATTRIBUTES:
            np.testing.assert_equal(getattr(result_a, name), getattr(result_b, name))
    else:
        np.testing.assert_equal(result_a, result_b)


@pytest.mark.parametrize("function", ALL_BATCH_FUNCTIONS)
def test_read_only_inputs_work(function):
    args = tuple(read_only(values) for values in EXAMPLE_ARGS)
    assert_results_equal(function(*args), function(*EXAMPLE_ARGS))


@pytest.mark.parametrize("function", ALL_BATCH_FUNCTIONS)
def test_inputs_are_never_changed(function):
    args = tuple(np.array(values, dtype=np.float64) for values in EXAMPLE_ARGS)
    args = (args[0], args[1], np.array([0.0, 2.0, -1.0, -0.5]))
    args[0][0] = 0.0
    args[1][0] = -1000.0  # an overflowing ratio with A == 0 too
    before = tuple(values.copy() for values in args)
    function(*args)
    for after, original in zip(args, before, strict=True):
        np.testing.assert_array_equal(after, original)


def test_sweep_inputs_are_never_changed():
    grid = np.array([0.0, 0.5, 1.0, 1.2, 3.0])
    before = grid.copy()
    for advantage in (-1.0, 0.0, 1.0):
        ratio_sweep(grid, advantage)
        np.testing.assert_array_equal(grid, before)
    ratio_sweep(read_only(grid), 1.0, dual_clip=2.0)


def test_returned_arrays_do_not_share_memory_with_the_inputs():
    # A returned breakdown is frozen; writing into one of its arrays must not reach back
    # into the caller's data (and the caller's later edits must not change the result).
    args = tuple(np.array(values, dtype=np.float64) for values in EXAMPLE_ARGS)
    breakdown = clip_breakdown(*args)
    grid = np.array([0.5, 1.0, 1.5])
    sweep = ratio_sweep(grid, 1.0)
    outputs = [getattr(breakdown, name) for name in ("ratio", "advantages", "grad")]
    outputs += [getattr(sweep, name) for name in ("ratio", "advantages", "grad")]
    outputs.append(ppo_clip_grad(*args))
    for output in outputs:
        for given in (*args, grid):
            assert not np.shares_memory(output, given)


def test_more_than_4096_samples_work():
    n = 10_000
    logp_new, logp_old, advantages = varied_batch(seed=3, n=n, eps=0.2)
    check_return_types((logp_new, logp_old, advantages), n)
    breakdown = clip_breakdown(logp_new, logp_old, advantages)
    common = common_form_terms(breakdown.ratio, advantages, 0.2)
    loss = ppo_clip_loss(logp_new, logp_old, advantages)
    assert abs(loss - common.mean()) <= 1e-14 * np.abs(common).mean()
    # Decided on the module's ratios: a sixteenth of them lie exactly on an edge, where the
    # last bit of exp decides, and math.exp's may differ from numpy's.
    samples = [reference.sample(r, a, n) for r, a in zip(breakdown.ratio, advantages, strict=True)]
    expected_fraction = sum(sample.is_clipped for sample in samples) / n
    assert clip_fraction(logp_new, logp_old, advantages) == expected_fraction
    assert 0.05 < expected_fraction < 0.95


def test_positive_log_densities_work():
    # continuous actions: densities above 1 have positive logs
    logp_new = [3.5, 2.0, 0.7, 12.0]
    logp_old = [3.0, 2.5, 0.7, 11.9]
    advantages = [1.0, -1.0, 4.0, -2.0]
    breakdown = clip_breakdown(logp_new, logp_old, advantages)
    np.testing.assert_allclose(breakdown.ratio, np.exp([0.5, -0.5, 0.0, 12.0 - 11.9]), rtol=1e-15)
    assert breakdown.is_clipped.tolist() == [True, True, False, False]
    grad = ppo_clip_grad(logp_new, logp_old, advantages)
    assert grad[2] == -4.0 / 4
    assert grad[3] == pytest.approx(-breakdown.ratio[3] * -2.0 / 4, rel=1e-15)


# --------------------------------------------------------------------------
# Bad input: the right exception, naming the argument and the problem
#
# Each case of the input checks (ppo_clip_inputs) is tested once, on the check itself, and
# each public function's use of the checks once (issue 31, section 5: the same 17 cases went
# through 3 arguments of 6 functions, 306 tests of one checker).
# --------------------------------------------------------------------------

ARGUMENT_NAMES = ("logp_new", "logp_old", "advantages")
GOOD_ARGS = ([-0.1, -0.2, -0.3], [-0.2, -0.2, -0.2], [1.0, -1.0, 0.5])


def with_argument(position: int, value) -> list:
    args = [list(values) for values in GOOD_ARGS]
    args[position] = value
    return args


BAD_VALUE_CASES = [
    # (bad value, exception, message with {name} for the argument's name)
    ([], ValueError, "{name} is empty; it needs at least one sample"),
    (np.array([]), ValueError, "{name} is empty; it needs at least one sample"),
    ([[0.1, 0.2], [0.3, 0.4]], ValueError, "{name} must be 1-D, got shape (2, 2)"),
    (np.zeros((3, 1)), ValueError, "{name} must be 1-D, got shape (3, 1)"),
    (0.5, ValueError, "{name} must be 1-D, got a scalar"),
    ([-0.1, -0.2, math.nan], ValueError, "{name}[2] is nan; every value must be finite"),
    ([math.inf, -0.2, -0.3], ValueError, "{name}[0] is inf; every value must be finite"),
    ([-0.1, -math.inf, -0.3], ValueError, "{name}[1] is -inf; every value must be finite"),
    (np.array([-0.1, np.nan, np.inf]), ValueError, "{name}[1] is nan;"),
    (["a", "b", "c"], TypeError, "{name} must contain real numbers, got dtype <U1 (text)"),
    ([-0.1, "x", -0.3], TypeError, "{name} must contain real numbers"),
    ([-0.1, object(), -0.3], TypeError, "{name} must contain only numbers"),
    # numpy casts None to NaN: "is nan" would send the user looking for a NaN never written
    ([-0.1, None, -0.3], TypeError, "{name} must contain only numbers"),
    ([1j, 2j, 3j], TypeError, "{name} must contain real numbers, got dtype complex128"),
    ([True, False, True], TypeError, "{name} must contain real numbers, got dtype bool"),
    ("abc", TypeError, "{name} must be a 1-D array of numbers, got str"),
    (None, TypeError, "{name} must be a 1-D array of numbers, got NoneType"),
]


@pytest.mark.parametrize(
    ("case", "bad", "error", "message"),
    [(i, *case) for i, case in enumerate(BAD_VALUE_CASES)],
    ids=[str(i) for i in range(len(BAD_VALUE_CASES))],
)
def test_the_input_check_refuses_a_bad_array_naming_it_and_the_problem(case, bad, error, message):
    position = case % 3  # each argument's name in turn
    expected = message.format(name=ARGUMENT_NAMES[position])
    with pytest.raises(error, match=re.escape(expected)):
        checked_log_ratio(*with_argument(position, bad))


@pytest.mark.parametrize(
    ("args", "described"),
    [
        (([-0.1, -0.2], [-0.2] * 3, [1.0] * 3), "logp_new has 2, logp_old has 3, advantages has 3"),
        (([-0.1] * 3, [-0.2] * 4, [1.0] * 3), "logp_new has 3, logp_old has 4, advantages has 3"),
        (([-0.1] * 3, [-0.2] * 3, [1.0]), "logp_new has 3, logp_old has 3, advantages has 1"),
    ],
)
def test_the_input_check_refuses_lengths_that_differ_with_every_length(args, described):
    with pytest.raises(
        ValueError, match=re.escape(f"inputs must have the same length: {described}")
    ):
        checked_log_ratio(*args)


def test_ragged_input_is_rejected_naming_the_argument():
    with pytest.raises((TypeError, ValueError), match=r"^advantages"):
        checked_log_ratio([-0.1, -0.2], [-0.2, -0.2], [[1.0, 2.0], [3.0]])


BAD_EPS_CASES = [
    (-0.1, ValueError, "eps must be between 0 and 1, got -0.1"),
    (1.5, ValueError, "eps must be between 0 and 1, got 1.5"),
    (-1e-300, ValueError, "eps must be between 0 and 1, got -1e-300"),
    (np.nextafter(1.0, 2.0), ValueError, "eps must be between 0 and 1, got 1.0000000000000002"),
    (math.nan, ValueError, "eps must be a finite number, got nan"),
    (math.inf, ValueError, "eps must be a finite number, got inf"),
    (-math.inf, ValueError, "eps must be a finite number, got -inf"),
    (np.float64("nan"), ValueError, "eps must be a finite number, got nan"),
    ("0.2", TypeError, "eps must be a real number, got str"),
    (None, TypeError, "eps must be a real number, got NoneType"),
    ([0.2], TypeError, "eps must be a real number, got list"),
    (True, TypeError, "eps must be a real number, got bool"),
    (0.2j, TypeError, "eps must be a real number, got complex"),
]


@pytest.mark.parametrize(
    ("eps", "error", "message"), BAD_EPS_CASES, ids=[str(i) for i in range(len(BAD_EPS_CASES))]
)
def test_the_clip_size_check_refuses_a_bad_eps_with_its_value(eps, error, message):
    with pytest.raises(error, match=re.escape(message)):
        checked_eps("eps", eps)


@pytest.mark.parametrize("function", ALL_BATCH_FUNCTIONS, ids=lambda f: f.__name__)
def test_each_function_checks_its_inputs(function):
    """Its arrays, their lengths and its eps, each refused naming the argument."""
    with pytest.raises(ValueError, match=re.escape("advantages[1] is nan")):
        function(*with_argument(2, [1.0, math.nan, 0.5]))
    with pytest.raises(TypeError, match=re.escape("logp_old must be a 1-D array")):
        function(*with_argument(1, None))
    with pytest.raises(ValueError, match=re.escape("logp_new has 2, logp_old has 3")):
        function(*with_argument(0, [-0.1, -0.2]))
    with pytest.raises(ValueError, match=re.escape("eps must be between 0 and 1, got 1.5")):
        function(*GOOD_ARGS, 1.5)


@pytest.mark.parametrize(
    ("function", "name"),
    [(f, name) for f in (clip_breakdown, ratio_sweep) for name in ("eps_low", "eps_high")],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_bad_asymmetric_bound_is_rejected_naming_it(function, name):
    args = GOOD_ARGS if function is clip_breakdown else ([1.0], 1.0)
    with pytest.raises(ValueError, match=re.escape(f"{name} must be between 0 and 1, got 1.01")):
        function(*args, **{name: 1.01})


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (1.0, ValueError, "dual_clip must be greater than 1, got 1.0"),
        (0.5, ValueError, "dual_clip must be greater than 1, got 0.5"),
        (math.inf, ValueError, "dual_clip must be a finite number, got inf"),
        ("3", TypeError, "dual_clip must be a real number, got str"),
    ],
)
def test_bad_dual_clip_is_rejected(value, error, message):
    with pytest.raises(error, match=re.escape(message)):
        clip_breakdown(*GOOD_ARGS, dual_clip=value)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (([0.5, -0.5], 1.0), ValueError, "ratios[1] is -0.5; ratios cannot be negative"),
        (([0.5, math.inf], 1.0), ValueError, "ratios[1] is inf"),
        (([1.0], math.nan), ValueError, "advantage must be a finite number, got nan"),
        (([1.0], [1.0]), TypeError, "advantage must be a real number, got list"),
        (([1.0], 1.0, 1.2), ValueError, "eps must be between 0 and 1, got 1.2"),
    ],
)
def test_bad_sweep_input_is_rejected(args, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ratio_sweep(*args)


@pytest.mark.parametrize("function", [surrogate_loss, surrogate_grad])
def test_unknown_objective_is_rejected_listing_the_choices(function):
    message = "objective must be one of ('clipped', 'unclipped', 'clip_only'), got 'ppo'"
    with pytest.raises(ValueError, match=re.escape(message)):
        function(*GOOD_ARGS, objective="ppo")
    with pytest.raises(ValueError, match="objective must be one of"):
        objective_terms(clip_breakdown(*GOOD_ARGS), "min")


# --------------------------------------------------------------------------
# Variants in clip_breakdown: asymmetric bounds and dual clip
# --------------------------------------------------------------------------


def test_asymmetric_bounds_move_each_edge_separately():
    ratios = np.array([1.25, 1.25, 0.75, 0.75, 1.3, 0.85])
    advantages = [1.0, -1.0, -1.0, 1.0, 1.0, -1.0]
    logp_new, logp_old = np.log(ratios), np.zeros(6)
    symmetric = clip_breakdown(logp_new, logp_old, advantages, 0.2)
    higher = clip_breakdown(logp_new, logp_old, advantages, 0.2, eps_high=0.28)
    assert (higher.lower, higher.upper) == (0.8, 1.0 + 0.28)
    assert symmetric.is_clipped.tolist() == [True, False, True, False, True, False]
    assert higher.is_clipped.tolist() == [False, False, True, False, True, False]
    assert higher.grad[0] == -higher.ratio[0] * 1.0 / 6
    assert higher.objective_term[4] == (1.0 + 0.28) * 1.0
    lower = clip_breakdown(logp_new, logp_old, advantages, 0.2, eps_low=0.1)
    assert (lower.lower, lower.upper) == (1.0 - 0.1, 1.2)
    assert lower.is_clipped.tolist() == [True, False, True, False, True, True]
    assert lower.objective_term[5] == pytest.approx(-0.9)
    both = clip_breakdown(logp_new, logp_old, advantages, 0.5, eps_low=0.2, eps_high=0.2)
    np.testing.assert_array_equal(both.grad, symmetric.grad)
    assert both.loss == symmetric.loss


def test_asymmetric_bounds_are_strict_at_their_edges():
    sweep = ratio_sweep([1.0 + 0.28, np.nextafter(1.0 + 0.28, 2.0)], 1.0, eps_high=0.28)
    assert sweep.is_clipped.tolist() == [False, True]
    assert sweep.grad[0] == -(1.0 + 0.28)
    sweep = ratio_sweep([1.0 - 0.1, np.nextafter(1.0 - 0.1, 0.0)], -1.0, eps_low=0.1)
    assert sweep.is_clipped.tolist() == [False, True]


def test_dual_clip_caps_negative_advantages_far_above_the_band():
    ratios = [5.0, 3.0, 2.0, 5.0, 0.5]
    advantages = np.array([-1.0, -1.0, -1.0, 1.0, -1.0])
    sweep_logp = np.log(ratios)
    plain = clip_breakdown(sweep_logp, np.zeros(5), advantages)
    dual = clip_breakdown(sweep_logp, np.zeros(5), advantages, dual_clip=3.0)
    assert dual.dual_clip == 3.0
    assert dual.ratio[1] == pytest.approx(3.0, rel=1e-15)
    # r = 5 > c = 3 with A < 0: the term is c * A and the gradient is switched off
    assert dual.objective_term[0] == -3.0
    assert dual.is_clipped[0]
    assert dual.grad[0] == 0.0
    assert not plain.is_clipped[0]
    assert plain.objective_term[0] == pytest.approx(-5.0, rel=1e-15)
    # below the cap and for A > 0 nothing changes
    np.testing.assert_array_equal(dual.objective_term[2:], plain.objective_term[2:])
    np.testing.assert_array_equal(dual.grad[2:], plain.grad[2:])
    np.testing.assert_array_equal(dual.is_clipped[2:], plain.is_clipped[2:])
    assert dual.loss < plain.loss


def test_dual_clip_cap_is_strict_and_tames_an_overflowed_ratio():
    sweep = ratio_sweep([3.0, np.nextafter(3.0, 4.0)], -2.0, dual_clip=3.0)
    assert sweep.is_clipped.tolist() == [False, True]
    assert sweep.grad[0] == -3.0 * -2.0
    assert sweep.objective_term.tolist() == [-6.0, -6.0]
    breakdown = clip_breakdown([0.0, 0.0], [-1000.0, -1000.0], [-2.0, 0.0], dual_clip=3.0)
    assert breakdown.ratio[0] == math.inf
    assert breakdown.objective_term.tolist() == [-6.0, 0.0]
    assert breakdown.grad.tolist() == [0.0, 0.0]
    assert breakdown.loss == 3.0


# --------------------------------------------------------------------------
# surrogate_loss / surrogate_grad: the three objectives
# --------------------------------------------------------------------------


def test_clipped_objective_is_the_contract():
    for eps in (0.0, 0.2, 1.0):
        args = (*varied_batch(seed=9, n=200, eps=eps), eps)
        assert surrogate_loss(*args) == ppo_clip_loss(*args)
        assert surrogate_loss(*args, objective="clipped") == ppo_clip_loss(*args)
        np.testing.assert_array_equal(surrogate_grad(*args), ppo_clip_grad(*args))
        np.testing.assert_array_equal(
            surrogate_grad(*args, objective="clipped"), ppo_clip_grad(*args)
        )


def test_unclipped_objective_on_the_worked_example():
    loss = surrogate_loss(*EXAMPLE_ARGS, objective="unclipped")
    grad = surrogate_grad(*EXAMPLE_ARGS, objective="unclipped")
    assert loss == pytest.approx(-(1.4 + 2.2 - 0.6 - 0.45) / 4, rel=1e-15)
    np.testing.assert_allclose(grad, [-0.35, -0.55, 0.15, 0.1125], rtol=1e-15)


def test_clip_only_objective_loses_the_way_back():
    # Sample 0 strayed the wrong way (A > 0, r = 0.5): the clipped objective keeps its
    # gradient, the clip-only objective leaves it with none.
    logp_new = np.log([0.5, 1.5, 1.1])
    args = (logp_new, np.zeros(3), [1.0, 1.0, -2.0])
    clip_only_grad = surrogate_grad(*args, objective="clip_only")
    clipped_grad = surrogate_grad(*args, objective="clipped")
    assert clip_only_grad[0] == 0.0
    assert clipped_grad[0] == pytest.approx(-0.5 / 3, rel=1e-15)
    assert clip_only_grad[1] == clipped_grad[1] == 0.0
    assert clip_only_grad[2] == clipped_grad[2] == pytest.approx(1.1 * 2 / 3, rel=1e-15)
    assert surrogate_loss(*args, objective="clip_only") == pytest.approx(
        -(0.8 + 1.2 - 1.1 * 2) / 3, rel=1e-15
    )
    assert surrogate_loss(*args, objective="clipped") == pytest.approx(
        -(0.5 + 1.2 - 1.1 * 2) / 3, rel=1e-15
    )


def test_clip_only_gradient_passes_at_the_band_edges():
    args = ([LOG_1_2, LOG_0_8], [0.0, 0.0], [1.0, 1.0])
    assert surrogate_grad(*args, objective="clip_only").tolist() == [-1.2 / 2, -0.8 / 2]


@pytest.mark.parametrize("objective", ["clipped", "unclipped", "clip_only"])
def test_every_objective_keeps_zero_advantage_at_zero_after_overflow(objective):
    args = ([0.0, 0.0, -1.0], [-1000.0, -1000.0, -1.0], [0.0, 1.0, 1.0])
    loss = surrogate_loss(*args, objective=objective)
    grad = surrogate_grad(*args, objective=objective)
    assert not math.isnan(loss)
    assert not np.isnan(grad).any()
    assert grad[0] == 0.0


def test_objective_terms_on_a_sweep_are_per_sample():
    sweep = ratio_sweep([0.5, 1.0, 1.5], -2.0)
    terms, grad = objective_terms(sweep, "unclipped")
    assert terms.tolist() == [-1.0, -2.0, -3.0]
    assert grad.tolist() == [1.0, 2.0, 3.0]
    terms, grad = objective_terms(sweep, "clip_only")
    assert terms.tolist() == [-1.6, -2.0, -2.4]
    assert grad.tolist() == [0.0, 2.0, 0.0]
    terms, grad = objective_terms(sweep)
    np.testing.assert_array_equal(terms, sweep.objective_term)
    np.testing.assert_array_equal(grad, sweep.grad)


@pytest.mark.parametrize("objective", ["clipped", "unclipped", "clip_only"])
def test_objective_grad_is_objective_terms_gradient_without_the_terms(objective):
    args = ([709.0, 0.3, -0.4, 0.0, 0.1], [0.0, 0.0, 0.0, 0.0, 0.0], [-3.0, 1.0, -1.0, 0.0, 2.0])
    alone = clip_breakdown(*args)
    grad = ppo_clip.objective_grad(alone, objective)
    assert not {"objective_term", "unclipped_term", "clipped_term"} & alone.__dict__.keys()
    np.testing.assert_array_equal(grad, objective_terms(clip_breakdown(*args), objective)[1])
    np.testing.assert_array_equal(grad, surrogate_grad(*args, objective=objective))
    with pytest.raises(ValueError, match="objective"):
        ppo_clip.objective_grad(alone, "min")


# --------------------------------------------------------------------------
# Curves (that each grid point is ppo_clip with N = 1 is a property test)
# --------------------------------------------------------------------------


def test_curves_have_the_textbook_shape():
    ratios = np.array([0.5, 0.8, 1.0, 1.2, 1.5])
    up, down, flat = (ratio_sweep(ratios, advantage) for advantage in (1.0, -1.0, 0.0))
    np.testing.assert_allclose(up.objective_term, [0.5, 0.8, 1.0, 1.2, 1.2])
    np.testing.assert_allclose(up.grad, [-0.5, -0.8, -1.0, -1.2, 0.0])
    np.testing.assert_allclose(down.objective_term, [-0.8, -0.8, -1.0, -1.2, -1.5])
    np.testing.assert_allclose(down.grad, [0.0, 0.8, 1.0, 1.2, 1.5])
    assert flat.objective_term.tolist() == [0.0] * 5
    assert flat.grad.tolist() == [0.0] * 5
