"""Hostile input to ppo_clip: no NaN from finite numbers, and errors that say what to do.

Issue 16's module items: terms of +inf and -inf (products too large for float64) must not
sum to NaN; huge integers, booleans inside lists, masked arrays, Decimals, generators, sets
and dicts get a ValueError/TypeError that names the argument and the remedy; an array given
as ``objective`` is refused by name; a loss of zero is never printed as -0.0.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppo_clip
from benchmarks import reference

pytestmark = pytest.mark.filterwarnings("error")

OLD = [-0.5, -0.5]


@pytest.mark.parametrize(
    ("logp_new", "logp_old", "advantages"),
    [
        ([0.0, 0.0], [-0.5, -0.5], [1.7e308, -1.7e308]),
        ([0.0, 0.0], [-1000.0, -1000.0], [1.7e308, -1.0]),
        ([0.0, 0.0, -3.0], [-2.0, -0.1, 0.0], [1e308, -1e308, 1.5e308]),
        ([-1.0, -1.0], [-1.0, -1.0], [1.7e308, 1.7e308]),
    ],
)
def test_overflowing_products_never_make_the_loss_nan(logp_new, logp_old, advantages):
    loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages)
    assert not math.isnan(loss)
    breakdown = ppo_clip.clip_breakdown(logp_new, logp_old, advantages)
    ratios = breakdown.ratio.tolist()  # this machine's exp: its last bit may differ elsewhere
    assert loss == reference.exact_loss(logp_new, logp_old, advantages, ratios=ratios)
    assert breakdown.loss == loss
    assert breakdown.partial_loss(len(advantages)) == loss


def test_the_honest_value_of_the_issues_first_case_is_finite():
    # r = e^0.5 > 1.2: +A is clipped at 1.2 * 1.7e308 (inf in float64), -A keeps
    # r * -1.7e308 (-inf); exactly, the loss is 0.5 * 1.7e308 * (e^0.5 - 1.2).
    loss = ppo_clip.ppo_clip_loss([0.0, 0.0], OLD, [1.7e308, -1.7e308])
    assert loss == pytest.approx(0.5 * 1.7e308 * (math.exp(0.5) - 1.2), rel=1e-14)


def test_an_overflowed_ratio_with_a_negative_advantage_still_makes_the_loss_inf():
    assert ppo_clip.ppo_clip_loss([0.0, 0.0], [-1000.0, -1000.0], [1.7e308, -1.0]) == math.inf


@pytest.mark.parametrize("tiny", [-5e-324, -1e-320])
def test_an_overflowed_ratio_times_the_tiniest_advantage_is_still_infinite(tiny):
    # Found by hypothesis in CI: scaling the advantages down to recompute an
    # overflowed loss rounded -5e-324 to 0, and the loss came out 0.0.
    args = ([0.0], [-710.0], [tiny])
    assert ppo_clip.ppo_clip_loss(*args, eps=0.0) == math.inf
    assert ppo_clip.surrogate_loss(*args, objective="unclipped") == math.inf
    assert ppo_clip.surrogate_loss([0.0], [-710.0], [-tiny], objective="unclipped") == -math.inf


def test_the_other_objectives_never_return_nan_from_finite_products():
    args = ([0.0, 0.0], OLD, [1.7e308, -1.7e308])
    assert ppo_clip.surrogate_loss(*args, objective="unclipped") == 0.0
    assert ppo_clip.surrogate_loss(*args, objective="clip_only") == 0.0


def test_unclipped_loss_of_two_true_infinities_is_refused_by_name():
    with pytest.raises(ValueError, match=r"unclipped loss is undefined.*inf - inf"):
        ppo_clip.surrogate_loss([0.0, 0.0], [-1000.0, -1000.0], [1.0, -1.0], objective="unclipped")


huge = st.floats(-1.79e308, 1.79e308, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1000.0, 0.0), st.floats(-1000.0, 0.0), huge), min_size=1, max_size=20
    ),
    st.floats(0.0, 1.0),
)
def test_the_loss_is_the_exact_loss_rounded_never_nan(samples, eps):
    logp_new, logp_old, advantages = (list(column) for column in zip(*samples, strict=True))
    loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
    ratios = ppo_clip.clip_breakdown(logp_new, logp_old, advantages, eps).ratio.tolist()
    exact = reference.exact_loss(logp_new, logp_old, advantages, eps, ratios=ratios)
    assert not math.isnan(loss)
    if math.isinf(exact):
        assert loss == exact
    else:
        assert loss == pytest.approx(exact, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ([10**400, 0], ValueError, "logp_new[0] is an integer too large for float64"),
        ([True, -0.2], TypeError, "logp_new[0] is True, a boolean"),
        ((-0.1, np.True_), TypeError, "logp_new[1] is np.True_, a boolean"),
        ([Decimal("-0.1"), Decimal("-0.2")], TypeError, "convert it first, e.g. [float(x) for x"),
        (np.ma.masked_array([-0.1, -0.2], mask=[0, 1]), TypeError, "is a masked array"),
        ((x for x in [-0.1, -0.2]), TypeError, "is a generator (an iterator); pass a list"),
        ({-0.1, -0.2}, TypeError, "is a set, which has no order"),
        ({0: -0.1, 1: -0.2}, TypeError, "list(logp_new.values())"),
    ],
)
def test_hostile_containers_are_refused_by_name(value, error, message):
    with pytest.raises(error, match=re.escape(message)) as caught:
        ppo_clip.ppo_clip_loss(value, OLD, [1.0, -1.0])
    assert str(caught.value).startswith("logp_new")


def test_masked_array_message_says_how_to_pass_the_data():
    with pytest.raises(TypeError) as caught:
        ppo_clip.clip_fraction(OLD, OLD, np.ma.masked_array([1.0, -1.0], mask=[0, 1]))
    assert "advantages.filled(" in str(caught.value)
    assert "advantages.compressed()" in str(caught.value)


def test_an_array_as_objective_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^objective must be one of"):
        ppo_clip.surrogate_loss(OLD, OLD, [1.0, 1.0], objective=np.array(["clipped"]))


def test_a_zero_loss_is_positive_zero_like_the_gradient():
    for advantages in ([0.0, 0.0], [-0.0, 0.0]):
        loss = ppo_clip.ppo_clip_loss(OLD, OLD, advantages)
        assert loss == 0.0
        assert math.copysign(1.0, loss) == 1.0
        assert all(
            math.copysign(1.0, g) == 1.0 for g in ppo_clip.ppo_clip_grad(OLD, OLD, advantages)
        )
