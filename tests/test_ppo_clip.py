"""Unit tests for ppo_clip: the worked example, every edge of the contract, array-likes.

The contract is docs/contract.md (section "ppo_clip").  Random batches against the project's
plain-Python reference (:mod:`reference` (``tests/``)) are in test_ppo_clip_properties.py, and
every bad input is in test_ppo_clip_inputs.py.  Every test here runs with warnings turned into
errors: a RuntimeWarning printed under a notebook cell is a visible defect, so "no NaN"
also means "no overflow warning on the way".
"""

from __future__ import annotations

import inspect
import math
from collections import deque

import numpy as np
import pytest
from helpers import BATCH_FUNCTIONS, assert_contract_loss, log_landing_on

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

pytestmark = pytest.mark.filterwarnings("error")

# The worked example exactly as the contract prints it.
EXAMPLE_LOGP_OLD = np.log([0.5, 0.5, 0.5, 0.5])
EXAMPLE_LOGP_NEW = np.log([0.7, 0.55, 0.3, 0.45])
EXAMPLE_ADVANTAGES = [1.0, 2.0, -1.0, -0.5]
EXAMPLE_ARGS = (EXAMPLE_LOGP_NEW, EXAMPLE_LOGP_OLD, EXAMPLE_ADVANTAGES)

CONTRACT_FUNCTIONS = (ppo_clip_loss, clip_fraction, ppo_clip_grad)

# Print options as numpy ships them, so a repr test does not depend on other tests.
NUMPY_DEFAULT_PRINT = {"precision": 8, "floatmode": "maxprec", "suppress": False, "legacy": False}


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


def check_return_types(args, n):
    loss, fraction, grad = (function(*args) for function in CONTRACT_FUNCTIONS)
    assert type(loss) is float
    assert type(fraction) is float
    assert 0.0 <= fraction <= 1.0
    assert isinstance(grad, np.ndarray)
    assert grad.dtype == np.float64
    assert grad.shape == (n,)


# --------------------------------------------------------------------------
# The worked example, to the printed digits
# --------------------------------------------------------------------------


def test_worked_example_gives_the_contracts_numbers_with_the_default_eps_of_0_2():
    assert ppo_clip.DEFAULT_EPS == 0.2
    check_return_types(EXAMPLE_ARGS, 4)
    assert_contract_loss(ppo_clip_loss(*EXAMPLE_ARGS))
    assert clip_fraction(*EXAMPLE_ARGS) == 0.5
    grad = ppo_clip_grad(*EXAMPLE_ARGS)
    with np.printoptions(**NUMPY_DEFAULT_PRINT):
        assert str(grad) == "[ 0.     -0.55    0.      0.1125]"
        assert repr(grad) == "array([ 0.    , -0.55  ,  0.    ,  0.1125])"
    assert grad[0] == grad[2] == 0.0
    np.testing.assert_allclose(grad[[1, 3]], [-0.55, 0.1125], rtol=1e-15)
    for function in CONTRACT_FUNCTIONS:
        np.testing.assert_array_equal(function(*EXAMPLE_ARGS), function(*EXAMPLE_ARGS, 0.2))


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


def test_module_worked_example_is_the_contracts_and_fresh_each_time():
    example = ppo_clip.worked_example()
    for got, expected in zip(example, (*EXAMPLE_ARGS, 0.2), strict=True):
        np.testing.assert_array_equal(got, expected)
    example.advantages[:] = 0.0
    assert ppo_clip.worked_example().advantages.tolist() == EXAMPLE_ADVANTAGES


# --------------------------------------------------------------------------
# Edges: overflow and underflow of the ratio (the contract's named edges, one sample or a few,
# are a table in test_ppo_clip_properties.py, checked against the reference)
# --------------------------------------------------------------------------

# Issue 24: exact where float64 can represent the answer (random batches near float64's limit
# are a property test; a product r*A past float64 whose r*A/N fits is the named edge 'ulp-down').


def test_huge_advantages_that_cancel_give_the_exact_loss_in_every_objective_and_variant():
    # r = 1, so each term is its advantage: they sum to exactly 1, but float64's running sum
    # overflows on the way.  Every objective and variant keeps these terms.
    args = ([0.0] * 5, [0.0] * 5, [1.7e308, 1.0, 1.7e308, -1.7e308, -1.7e308])
    assert clip_breakdown(*args, eps_low=0.1, eps_high=0.3, dual_clip=3.0).loss == -0.2
    for objective in ppo_clip.OBJECTIVES:
        assert surrogate_loss(*args, objective=objective) == -0.2


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


# --------------------------------------------------------------------------
# The common implementation form and the two clip-fraction definitions (the band's boundary,
# strict comparisons, eps = 0 and 1, asymmetric bounds and the dual-clip cap are the named
# edges of test_ppo_clip_properties.py; advantages used as given, never normalized, its
# comparison with the reference on random batches)
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
def test_loss_and_gradient_are_pytorch_autograd_of_the_common_max_form(eps):
    logp_new, logp_old, advantages = varied_batch(seed=7, n=2000, eps=eps)
    breakdown = clip_breakdown(logp_new, logp_old, advantages, eps)
    common = common_form_terms(breakdown.ratio, advantages, eps)
    np.testing.assert_array_equal(breakdown.objective_term, -common)
    loss = ppo_clip_loss(logp_new, logp_old, advantages, eps)
    assert abs(loss - common.mean()) <= 1e-14 * np.abs(common).mean()
    on_boundary = (breakdown.ratio == 1 - eps) | (breakdown.ratio == 1 + eps)
    assert on_boundary.sum() >= 100  # the comparison covers the ties
    expected = autograd_of_common_form(breakdown.ratio, advantages, eps)
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
# Array-likes: lists, tuples, integers, float32, read-only arrays; never modified
# --------------------------------------------------------------------------


def read_only(values) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    array.flags.writeable = False
    return array


def integer_batch(dtype) -> tuple[np.ndarray, ...]:
    # non-negative integers are valid log-densities too (continuous actions)
    signed = np.dtype(dtype).kind == "i"
    advantages = [1, 2, -1, 0] if signed else [1, 2, 3, 0]
    return tuple(np.array(v, dtype=dtype) for v in ([3, 2, 1, 2], [2, 2, 2, 2], advantages))


def float64_arrays(args) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(values).astype(np.float64) for values in args)


AS_LISTS = tuple(np.asarray(values).tolist() for values in EXAMPLE_ARGS)
#: name: (the batch in some form, the same numbers as float64 arrays)
ARRAY_LIKES = {
    "lists": (AS_LISTS, EXAMPLE_ARGS),
    "tuples": (tuple(map(tuple, AS_LISTS)), EXAMPLE_ARGS),
    # computed in float64: float32 arithmetic would be off by about 1e-7
    "float32": (tuple(np.float32(v) for v in AS_LISTS), float64_arrays(map(np.float32, AS_LISTS))),
    **{
        np.dtype(dtype).name: (integer_batch(dtype), float64_arrays(integer_batch(dtype)))
        for dtype in (np.int8, np.int32, np.int64, np.uint8)
    },
    "int lists": (
        tuple(v.tolist() for v in integer_batch(int)),
        float64_arrays(integer_batch(int)),
    ),
    "range, deque, numpy scalars": (
        (range(4), deque(AS_LISTS[1]), [np.float32(a) for a in AS_LISTS[2]]),
        (np.arange(4.0), EXAMPLE_LOGP_OLD, np.float32(AS_LISTS[2]).astype(np.float64)),
    ),
}


@pytest.mark.parametrize(("given", "same"), ARRAY_LIKES.values(), ids=ARRAY_LIKES)
def test_array_likes_give_the_numbers_of_their_float64_arrays(given, same):
    check_return_types(given, 4)
    for function in BATCH_FUNCTIONS:
        assert_results_equal(function(*given), function(*same))


def test_python_int_and_numpy_eps_are_accepted():
    assert ppo_clip_loss(*EXAMPLE_ARGS, 0) == ppo_clip_loss(*EXAMPLE_ARGS, 0.0)
    assert ppo_clip_loss(*EXAMPLE_ARGS, 1) == ppo_clip_loss(*EXAMPLE_ARGS, 1.0)
    assert ppo_clip_loss(*EXAMPLE_ARGS, np.float64(0.2)) == ppo_clip_loss(*EXAMPLE_ARGS, 0.2)
    assert clip_fraction(*EXAMPLE_ARGS, np.float32(0.2)) == 0.5


@pytest.mark.parametrize("function", [*BATCH_FUNCTIONS, ratio_sweep], ids=lambda f: f.__name__)
def test_read_only_inputs_work_so_no_function_writes_into_its_inputs(function):
    # the worked example with an overflowing ratio whose A == 0 as its first sample
    args = ([0.0, *EXAMPLE_LOGP_NEW[1:]], [-1000.0, *EXAMPLE_LOGP_OLD[1:]], [0.0, 2.0, -1.0, -0.5])
    if function is ratio_sweep:
        args = ([0.0, 0.5, 1.0, 1.2, 3.0], 1.0)
    locked = tuple(read_only(values) if isinstance(values, list) else values for values in args)
    if function is ratio_sweep:
        assert_results_equal(function(*locked, dual_clip=2.0), function(*args, dual_clip=2.0))
    else:
        assert_results_equal(function(*locked), function(*args))


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


# --------------------------------------------------------------------------
# surrogate_loss / surrogate_grad: the three objectives
# --------------------------------------------------------------------------


def test_every_objective_keeps_zero_advantage_at_zero_after_overflow_and_never_gives_nan():
    args = ([0.0, 0.0, -1.0], [-1000.0, -1000.0, -1.0], [0.0, 1.0, 1.0])
    huge = ([0.0, 0.0], [-0.5, -0.5], [1.7e308, -1.7e308])  # r*A and r*(-A) beyond float64
    for objective in ppo_clip.OBJECTIVES:
        loss = surrogate_loss(*args, objective=objective)
        grad = surrogate_grad(*args, objective=objective)
        assert not math.isnan(loss)
        assert not np.isnan(grad).any()
        assert grad[0] == 0.0
        assert not math.isnan(surrogate_loss(*huge, objective=objective))
    assert surrogate_loss(*huge, objective="unclipped") == 0.0
    assert surrogate_loss(*huge, objective="clip_only") == 0.0


@pytest.mark.parametrize("tiny", [-5e-324, -1e-320])
def test_an_overflowed_ratio_times_the_tiniest_advantage_is_still_infinite(tiny):
    # Found by hypothesis in CI: scaling the advantages down to recompute an
    # overflowed loss rounded -5e-324 to 0, and the loss came out 0.0.
    args = ([0.0], [-710.0], [tiny])
    assert ppo_clip_loss(*args, eps=0.0) == math.inf
    assert surrogate_loss(*args, objective="unclipped") == math.inf
    assert surrogate_loss([0.0], [-710.0], [-tiny], objective="unclipped") == -math.inf


def test_a_zero_loss_is_positive_zero_like_the_gradient():
    for advantages in ([0.0, 0.0], [-0.0, 0.0]):
        loss = ppo_clip_loss([-0.5, -0.5], [-0.5, -0.5], advantages)
        assert math.copysign(1.0, loss) == 1.0
        grad = ppo_clip_grad([-0.5, -0.5], [-0.5, -0.5], advantages)
        assert all(math.copysign(1.0, g) == 1.0 for g in grad)


@pytest.mark.parametrize("objective", ["clipped", "unclipped", "clip_only"])
def test_objective_grad_is_objective_terms_gradient_without_the_terms(objective):
    args = ([709.0, 0.3, -0.4, 0.0, 0.1], [0.0, 0.0, 0.0, 0.0, 0.0], [-3.0, 1.0, -1.0, 0.0, 2.0])
    alone = clip_breakdown(*args)
    grad = ppo_clip.objective_grad(alone, objective)
    assert not {"objective_term", "unclipped_term", "clipped_term"} & alone.__dict__.keys()
    np.testing.assert_array_equal(grad, objective_terms(clip_breakdown(*args), objective)[1])
    np.testing.assert_array_equal(grad, surrogate_grad(*args, objective=objective))
    terms = objective_terms(clip_breakdown(*EXAMPLE_ARGS), objective)[0]  # the loss: their mean
    assert surrogate_loss(*EXAMPLE_ARGS, objective=objective) == -terms.sum() / 4
    with pytest.raises(ValueError, match="objective"):
        ppo_clip.objective_grad(alone, "min")


# --------------------------------------------------------------------------
# Curves (that each grid point is ppo_clip with N = 1 is a property test)
# --------------------------------------------------------------------------

#: One sample at each ratio (N = 1): (A, objective, ratios, terms, loss gradients).
SWEEPS = {
    "clipped, A > 0: flat above the band": (
        1.0, "clipped", [0.5, 0.8, 1.0, 1.2, 1.5], [0.5, 0.8, 1.0, 1.2, 1.2],
        [-0.5, -0.8, -1.0, -1.2, 0.0],
    ),
    "clipped, A < 0: flat below the band": (
        -1.0, "clipped", [0.5, 0.8, 1.0, 1.2, 1.5], [-0.8, -0.8, -1.0, -1.2, -1.5],
        [0.0, 0.8, 1.0, 1.2, 1.5],
    ),
    "clipped, A == 0": (0.0, "clipped", [0.5, 1.0, 1.5], [0.0] * 3, [0.0] * 3),
    "unclipped": (-2.0, "unclipped", [0.5, 1.0, 1.5], [-1.0, -2.0, -3.0], [1.0, 2.0, 3.0]),
    "clip-only, A < 0": (-2.0, "clip_only", [0.5, 1.0, 1.5], [-1.6, -2.0, -2.4], [0.0, 2.0, 0.0]),
    # r = 0.5 strayed the wrong way: clip-only leaves it no gradient back (the clipped
    # objective keeps -r*A); at the band's edges the gradient passes
    "clip-only, A > 0": (
        1.0, "clip_only", [0.5, 0.8, 1.2, 1.5], [0.8, 0.8, 1.2, 1.2], [0.0, -0.8, -1.2, 0.0],
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("advantage", "objective", "ratios", "terms", "grad"), SWEEPS.values(), ids=SWEEPS
)
def test_curves_have_the_textbook_shape(advantage, objective, ratios, terms, grad):
    sweep = ratio_sweep(ratios, advantage)
    got = objective_terms(sweep, objective)
    assert (got[0].tolist(), got[1].tolist()) == (terms, grad)
    if objective == "clipped":
        assert (sweep.objective_term.tolist(), sweep.grad.tolist()) == (terms, grad)
        assert [a.tolist() for a in objective_terms(sweep)] == [terms, grad]
