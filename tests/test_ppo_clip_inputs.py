"""Hostile input to ppo_clip: no NaN from finite numbers, and errors that say what to do.

Issue 16's module items: terms of +inf and -inf (products too large for float64) must not
sum to NaN; huge integers, booleans inside lists, masked arrays, Decimals, generators, sets
and dicts get a ValueError/TypeError that names the argument and the remedy; an array given
as ``objective`` is refused by name; a loss of zero is never printed as -0.0.

Issue 24's module items (sections 5 and 6), each with the further cases of its class: a number
too large for float64 (``eps=10**400``, a huge ``Fraction``, a long double) is a ValueError
naming the argument, never a bare OverflowError; raw bytes (``bytearray``, ``memoryview``) are
refused like ``bytes``; a boolean hidden in a 0-d array or another sequence is refused like any
boolean; a container numpy cannot read as an array (``dict.values()``) is named as what it is;
``partial_loss`` names ``count``.
"""

from __future__ import annotations

import math
import re
from collections import deque
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import reference

import ppo_clip

pytestmark = pytest.mark.filterwarnings("error")

OLD = [-0.5, -0.5]


@pytest.mark.parametrize(
    ("logp_new", "logp_old", "advantages", "float64_overflows"),
    [
        ([0.0, 0.0], [-0.5, -0.5], [1.7e308, -1.7e308], True),
        ([0.0, 0.0], [-1000.0, -1000.0], [1.7e308, -1.0], True),
        ([0.0, 0.0, -3.0], [-2.0, -0.1, 0.0], [1e308, -1e308, 1.5e308], False),
        ([-1.0, -1.0], [-1.0, -1.0], [1.7e308, 1.7e308], True),
    ],
)
def test_overflowing_products_never_make_the_loss_nan(
    logp_new, logp_old, advantages, float64_overflows
):
    loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages)
    assert not math.isnan(loss)
    breakdown = ppo_clip.clip_breakdown(logp_new, logp_old, advantages)
    ratios = breakdown.ratio.tolist()  # this machine's exp: its last bit may differ elsewhere
    exact = reference.exact_loss(logp_new, logp_old, advantages, ratios=ratios)
    if float64_overflows:  # decided exactly
        assert loss == exact
    else:  # numpy's float64 sum of huge terms that cancel: a few ulps of their magnitude
        assert loss == pytest.approx(exact, rel=1e-14)
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


# --------------------------------------------------------------------------
# Issue 24: numbers too large for float64 are named, never a bare OverflowError
# --------------------------------------------------------------------------

GOOD = ([-0.1, -0.2], [-0.2, -0.2], [1.0, -1.0])
HUGE_FRACTION = Fraction(10**400, 3)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: ppo_clip.ppo_clip_loss(*GOOD, eps=10**400), "eps"),
        (lambda: ppo_clip.clip_fraction(*GOOD, -(10**400)), "eps"),
        (lambda: ppo_clip.ppo_clip_grad(*GOOD, HUGE_FRACTION), "eps"),
        (lambda: ppo_clip.clip_breakdown(*GOOD, eps_low=10**400), "eps_low"),
        (lambda: ppo_clip.clip_breakdown(*GOOD, eps_high=-HUGE_FRACTION), "eps_high"),
        (lambda: ppo_clip.clip_breakdown(*GOOD, dual_clip=HUGE_FRACTION), "dual_clip"),
        (lambda: ppo_clip.clip_breakdown(*GOOD, dual_clip=10**400), "dual_clip"),
        (lambda: ppo_clip.ratio_sweep([1.0], 10**400), "advantage"),
        (lambda: ppo_clip.ratio_sweep([1.0], -HUGE_FRACTION), "advantage"),
        (lambda: ppo_clip.ratio_sweep([1.0], 1.0, 10**400), "eps"),
        (lambda: ppo_clip.ratio_sweep([1.0], 1.0, dual_clip=10**400), "dual_clip"),
        (lambda: ppo_clip.clip_band(0.2, eps_high=10**400), "eps_high"),
        (lambda: ppo_clip.ppo_clip_loss([HUGE_FRACTION, 0.0], *GOOD[1:]), "logp_new[0]"),
        (lambda: ppo_clip.ratio_sweep([1.0, 10**400], 1.0), "ratios[1]"),
    ],
    ids=[
        "eps-int",
        "eps-negative-int",
        "eps-fraction",
        "eps_low-int",
        "eps_high-fraction",
        "dual_clip-fraction",
        "dual_clip-int",
        "sweep-advantage-int",
        "sweep-advantage-fraction",
        "sweep-eps-int",
        "sweep-dual_clip-int",
        "clip_band-eps_high-int",
        "fraction-in-logp_new",
        "int-in-ratios",
    ],
)
def test_a_number_too_large_for_float64_is_a_value_error_naming_it(call, name):
    with pytest.raises(ValueError, match=r"too large for float64") as caught:
        call()
    assert str(caught.value).startswith(name)


LONG_DOUBLE_HOLDS_1E400 = np.finfo(np.longdouble).maxexp > np.finfo(np.float64).maxexp


@pytest.mark.skipif(not LONG_DOUBLE_HOLDS_1E400, reason="long double is float64 here")
def test_a_long_double_too_large_for_float64_is_named():
    huge = np.longdouble("1e400")
    with pytest.raises(ValueError, match=r"^eps must be finite; it is a number too large"):
        ppo_clip.ppo_clip_loss(*GOOD, eps=huge)
    array = np.array([huge, 0.0], dtype=np.longdouble)
    with pytest.raises(ValueError, match=r"^advantages\[0\] is 1e\+400, too large for float64"):
        ppo_clip.ppo_clip_loss(*GOOD[:2], array)
    with pytest.raises(ValueError, match=r"^logp_old\[1\] is .*too large for float64"):
        ppo_clip.ppo_clip_loss(GOOD[0], [np.longdouble(0), -huge], GOOD[2])
    # a long double float64 holds is read as float64 would read it
    fitting = np.array([-0.1, -0.2], dtype=np.longdouble)
    assert ppo_clip.ppo_clip_loss(fitting, *GOOD[1:]) == ppo_clip.ppo_clip_loss(
        fitting.astype(np.float64), *GOOD[1:]
    )


# --------------------------------------------------------------------------
# Issue 24: containers numpy misreads are refused by name
# --------------------------------------------------------------------------


class Stream:
    """Iterable, but not a sequence: numpy makes a single object of it."""

    def __iter__(self):
        return iter([-0.1, -0.2])


#: name: (value, error, message with {name} for the argument's name)
MISREAD_CASES = {
    "bytearray": (bytearray(b"ab"), TypeError, "{name} must be a 1-D array of numbers, got byte"),
    "memoryview": (memoryview(b"ab"), TypeError, "{name} must be a 1-D array of numbers, got mem"),
    "memoryview-of-bytearray": (memoryview(bytearray(2)), TypeError, "{name} must be a 1-D a"),
    "bytes": (b"ab", TypeError, "{name} must be a 1-D array of numbers, got bytes"),
    "0-d-bool-array": ([np.array(True), -0.5], TypeError, "{name}[0] is array(True), a boolean"),
    "0-d-bool-array-in-tuple": ((-0.5, np.array(False)), TypeError, "{name}[1] is array(False)"),
    "bool-in-deque": (deque([True, -0.5]), TypeError, "{name}[0] is True, a boolean"),
    "0-d-bool-array-in-object-array": (
        np.array([np.array(True), 0.5], dtype=object),
        TypeError,
        "{name}[0] is np.True_, a",
    ),
    "dict-values": ({0: -0.1}.values(), TypeError, "{name} is a dict_values, which numpy does no"),
    "dict-keys": ({-0.1: 0}.keys(), TypeError, "{name} is a dict_keys, which numpy does not"),
    "iterable": (Stream(), TypeError, "{name} is a Stream, which numpy does not read as an array"),
    "object": (object(), TypeError, "{name} must be a 1-D array of numbers, got object"),
}


@pytest.mark.parametrize("case", MISREAD_CASES)
def test_containers_numpy_misreads_are_refused_by_name(case):
    """Each case once, at one of the three arguments in turn (one check reads all three)."""
    value, error, message = MISREAD_CASES[case]
    position = list(MISREAD_CASES).index(case) % 3
    name = ("logp_new", "logp_old", "advantages")[position]
    args = list(GOOD)
    args[position] = value
    with pytest.raises(error, match=re.escape(message.format(name=name))) as caught:
        ppo_clip.ppo_clip_loss(*args)
    assert str(caught.value).startswith(name)


@pytest.mark.parametrize(
    "value",
    [range(2), deque([-0.1, -0.2]), np.array([-0.1, -0.2]).data, [np.float32(-0.1), -0.2]],
    ids=["range", "deque", "memoryview-of-floats-via-ndarray.data", "numpy-scalars"],
)
def test_sequences_of_numbers_are_still_read(value):
    if isinstance(value, memoryview):
        with pytest.raises(TypeError, match=r"^logp_new must be a 1-D array of numbers"):
            ppo_clip.ppo_clip_loss(value, *GOOD[1:])
        value = np.asarray(value)  # the remedy: say that the buffer holds numbers
    expected = ppo_clip.ppo_clip_loss(np.array(list(value), dtype=np.float64), *GOOD[1:])
    assert ppo_clip.ppo_clip_loss(value, *GOOD[1:]) == expected


# --------------------------------------------------------------------------
# Issue 24: partial_loss names count
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "error", "message"),
    [
        (None, TypeError, "count must be an integer, got NoneType"),
        (1.0, TypeError, "count must be an integer, got float"),
        (True, TypeError, "count must be an integer, got bool"),
        ("1", TypeError, "count must be an integer, got str"),
        (0, ValueError, "count must be between 1 and 2, got 0"),
        (3, ValueError, "count must be between 1 and 2, got 3"),
        (10**400, ValueError, "count must be between 1 and 2, got an integer with more than 20"),
    ],
    ids=["None", "float", "bool", "str", "zero", "above-N", "huge"],
)
def test_partial_loss_names_count(count, error, message):
    breakdown = ppo_clip.clip_breakdown(*GOOD)
    with pytest.raises(error, match=re.escape(message)):
        breakdown.partial_loss(count)


def test_partial_loss_takes_numpy_integers():
    breakdown = ppo_clip.clip_breakdown(*GOOD)
    assert breakdown.partial_loss(np.int64(2)) == breakdown.loss
    assert breakdown.partial_loss(np.uint8(1)) == breakdown.partial_loss(1)
