"""Every bad input to ppo_clip, once: the right exception, naming the argument and the problem.

The contract (docs/contract.md, "ppo_clip") asks a ValueError or TypeError that names the
argument for any bad input.  One check (``ppo_clip_inputs``) reads every array and setting, so
each kind of bad value is tested once, and hypothesis chooses which public function and which
argument receives it: a table of bad values times every function, not a test per pair.

The kinds come from issues 16, 24 and 31: empty, 2-D and scalar arrays; NaN and infinities;
text, complex numbers, booleans (also hidden in 0-d arrays, deques and object arrays), None;
numbers too large for float64 (huge ints, Fractions, long doubles), never a bare
OverflowError; masked arrays, Decimals, generators, sets, dicts and other containers numpy
would misread (raw bytes, ``dict.values()``, iterables that are no sequence); settings out of
range; an unknown objective, an array among them; ``partial_loss``'s count.
"""

from __future__ import annotations

import math
import re
import types
from collections import deque
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from helpers import BATCH_FUNCTIONS
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ppo_clip
from ppo_clip import (
    clip_band,
    clip_breakdown,
    ppo_clip_loss,
    ratio_sweep,
    surrogate_grad,
    surrogate_loss,
)

pytestmark = pytest.mark.filterwarnings("error")

ARGUMENT_NAMES = ("logp_new", "logp_old", "advantages")
GOOD = ([-0.1, -0.2, -0.3], [-0.2, -0.2, -0.2], [1.0, -1.0, 0.5])
HUGE_FRACTION = Fraction(10**400, 3)
#: A few examples per table row: hypothesis picks the function and the argument.
EACH_ROW = settings(max_examples=6, deadline=None)


class Stream:
    """Iterable, but not a sequence: numpy makes a single object of it."""

    def __iter__(self):
        return iter([-0.1, -0.2, -0.3])


#: A bad array: (value, or a function making it afresh; exception; message, {name} the argument)
BAD_ARRAYS = {
    "empty": ([], ValueError, "{name} is empty; it needs at least one sample"),
    "empty-array": (np.array([]), ValueError, "{name} is empty; it needs at least one sample"),
    "2-D": ([[0.1, 0.2], [0.3, 0.4]], ValueError, "{name} must be 1-D, got shape (2, 2)"),
    "ragged": ([[1.0, 2.0], [3.0]], TypeError, "{name} must be a 1-D array of numbers; its rows"),
    "column": (np.zeros((3, 1)), ValueError, "{name} must be 1-D, got shape (3, 1)"),
    "scalar": (0.5, ValueError, "{name} must be 1-D, got a scalar"),
    "nan": ([-0.1, -0.2, math.nan], ValueError, "{name}[2] is nan; every value must be finite"),
    "inf": ([math.inf, -0.2, -0.3], ValueError, "{name}[0] is inf; every value must be finite"),
    "-inf": ([-0.1, -math.inf, -0.3], ValueError, "{name}[1] is -inf; every value must be"),
    "nan-first": (np.array([-0.1, np.nan, np.inf]), ValueError, "{name}[1] is nan;"),
    "text": (["a", "b", "c"], TypeError, "{name} must contain real numbers, got dtype <U1 (text)"),
    "text-inside": ([-0.1, "x", -0.3], TypeError, "{name} must contain real numbers"),
    "object-inside": ([-0.1, object(), -0.3], TypeError, "{name} must contain only numbers"),
    # numpy casts None to NaN: "is nan" would send the user looking for a NaN never written
    "None-inside": ([-0.1, None, -0.3], TypeError, "{name} must contain only numbers"),
    "complex": ([1j, 2j, 3j], TypeError, "{name} must contain real numbers, got dtype complex128"),
    "bool": ([True, False, True], TypeError, "{name} must contain real numbers, got dtype bool"),
    "str": ("abc", TypeError, "{name} must be a 1-D array of numbers, got str"),
    "None": (None, TypeError, "{name} must be a 1-D array of numbers, got NoneType"),
    "object": (object(), TypeError, "{name} must be a 1-D array of numbers, got object"),
    "huge-int": ([10**400, 0, 0], ValueError, "{name}[0] is an integer too large for float64"),
    "huge-fraction": ([HUGE_FRACTION, 0.0], ValueError, "{name}[0] is a number too large for f"),
    "True-inside": ([True, -0.2], TypeError, "{name}[0] is True, a boolean"),
    "numpy-True": ((-0.1, np.True_), TypeError, "{name}[1] is np.True_, a boolean"),
    "0-d-bool-array": ([np.array(True), -0.5], TypeError, "{name}[0] is array(True), a boolean"),
    "0-d-bool-array-in-tuple": ((-0.5, np.array(False)), TypeError, "{name}[1] is array(False)"),
    "bool-in-deque": (deque([True, -0.5]), TypeError, "{name}[0] is True, a boolean"),
    "0-d-bool-array-in-object-array": (
        np.array([np.array(True), 0.5], dtype=object),
        TypeError,
        "{name}[0] is np.True_, a",
    ),
    "decimal": ([Decimal("-0.1")], TypeError, "convert it first, e.g. [float(x) for x"),
    "masked": (
        np.ma.masked_array([-0.1, -0.2, 0.5], mask=[0, 1, 0]),
        TypeError,
        "{name} is a masked array, whose mask would be ignored: pass {name}.filled(value)"
        " to choose what masked samples hold, or drop them from every input (e.g. "
        "{name}.compressed()",
    ),
    "generator": (
        lambda: (x for x in [-0.1, -0.2, -0.3]),
        TypeError,
        "{name} is a generator (an iterator); pass a list",
    ),
    "set": ({-0.1, -0.2, -0.3}, TypeError, "{name} is a set, which has no order"),
    "dict": ({0: -0.1, 1: -0.2}, TypeError, "list({name}.values())"),
    "dict-values": ({0: -0.1}.values(), TypeError, "{name} is a dict_values, which numpy does no"),
    "dict-keys": ({-0.1: 0}.keys(), TypeError, "{name} is a dict_keys, which numpy does not"),
    "iterable": (Stream(), TypeError, "{name} is a Stream, which numpy does not read as an array"),
    "bytes": (b"ab", TypeError, "{name} must be a 1-D array of numbers, got bytes"),
    "bytearray": (bytearray(b"ab"), TypeError, "{name} must be a 1-D array of numbers, got byte"),
    "memoryview": (memoryview(b"ab"), TypeError, "{name} must be a 1-D array of numbers, got mem"),
    "memoryview-of-bytearray": (memoryview(bytearray(2)), TypeError, "{name} must be a 1-D a"),
    # if it holds numbers, np.asarray(it) says so
    "memoryview-of-floats": (np.zeros(3).data, TypeError, "np.asarray({name})"),
}


def with_argument(position: int, value) -> list:
    args = [list(values) for values in GOOD]
    args[position] = value
    return args


@pytest.mark.parametrize("case", BAD_ARRAYS)
@EACH_ROW
@given(function=st.sampled_from(BATCH_FUNCTIONS), position=st.integers(0, 2))
def test_every_function_refuses_each_bad_array_naming_the_argument(case, function, position):
    value, error, message = BAD_ARRAYS[case]
    if isinstance(value, types.LambdaType):
        value = value()
    name = ARGUMENT_NAMES[position]
    with pytest.raises(error, match=re.escape(message.format(name=name))) as caught:
        function(*with_argument(position, value))
    assert str(caught.value).startswith(name)


@pytest.mark.parametrize(
    ("position", "length", "described"),
    [
        (0, 2, "logp_new has 2, logp_old has 3, advantages has 3"),
        (1, 4, "logp_new has 3, logp_old has 4, advantages has 3"),
        (2, 1, "logp_new has 3, logp_old has 3, advantages has 1"),
    ],
)
@EACH_ROW
@given(function=st.sampled_from(BATCH_FUNCTIONS))
def test_every_function_refuses_lengths_that_differ_stating_every_length(
    position, length, described, function
):
    message = f"inputs must have the same length: {described}"
    with pytest.raises(ValueError, match=re.escape(message)):
        function(*with_argument(position, [-0.5] * length))


#: Who takes each kind of setting: (the argument's name, a call giving it the value).
RECEIVERS = {
    "a clip size": [
        *[("eps", lambda v, f=f: f(*GOOD, eps=v)) for f in BATCH_FUNCTIONS],
        *[(k, lambda v, k=k: clip_breakdown(*GOOD, **{k: v})) for k in ("eps_low", "eps_high")],
        *[(k, lambda v, k=k: ratio_sweep([1.0], 1.0, **{k: v})) for k in ("eps", "eps_low")],
        ("eps_high", lambda v: ratio_sweep([1.0], 1.0, eps_high=v)),
        ("eps", lambda v: clip_band(v)),
        ("eps_high", lambda v: clip_band(0.2, eps_high=v)),
    ],
    "dual_clip": [
        ("dual_clip", lambda v: clip_breakdown(*GOOD, dual_clip=v)),
        ("dual_clip", lambda v: ratio_sweep([1.0], 1.0, dual_clip=v)),
    ],
    "advantage": [("advantage", lambda v: ratio_sweep([1.0], v))],
    "ratios": [("ratios", lambda v: ratio_sweep(v, 1.0))],
    "count": [("count", lambda v: clip_breakdown(*GOOD).partial_loss(v))],
    "objective": [
        ("objective", lambda v: surrogate_loss(*GOOD, objective=v)),
        ("objective", lambda v: surrogate_grad(*GOOD, objective=v)),
        ("objective", lambda v: ppo_clip.objective_terms(clip_breakdown(*GOOD), v)),
        ("objective", lambda v: ppo_clip.objective_grad(clip_breakdown(*GOOD), v)),
    ],
}
TOO_LARGE = "{name} must be finite; it is an integer too large for float64"
#: (kind of setting, bad value, exception, message with {name} for the argument's name)
BAD_SETTINGS = [
    ("a clip size", -0.1, ValueError, "{name} must be between 0 and 1, got -0.1"),
    ("a clip size", 1.5, ValueError, "{name} must be between 0 and 1, got 1.5"),
    ("a clip size", -1e-300, ValueError, "{name} must be between 0 and 1, got -1e-300"),
    ("a clip size", np.nextafter(1.0, 2.0), ValueError, "between 0 and 1, got 1.0000000000000002"),
    ("a clip size", math.nan, ValueError, "{name} must be a finite number, got nan"),
    ("a clip size", math.inf, ValueError, "{name} must be a finite number, got inf"),
    ("a clip size", -math.inf, ValueError, "{name} must be a finite number, got -inf"),
    ("a clip size", np.float64("nan"), ValueError, "{name} must be a finite number, got nan"),
    ("a clip size", "0.2", TypeError, "{name} must be a real number, got str"),
    ("a clip size", None, TypeError, "{name} must be a real number, got NoneType"),  # eps only
    ("a clip size", [0.2], TypeError, "{name} must be a real number, got list"),
    ("a clip size", True, TypeError, "{name} must be a real number, got bool"),
    ("a clip size", 0.2j, TypeError, "{name} must be a real number, got complex"),
    ("a clip size", 10**400, ValueError, TOO_LARGE),
    ("a clip size", -(10**400), ValueError, TOO_LARGE),
    ("a clip size", HUGE_FRACTION, ValueError, "{name} must be finite; it is a number too large"),
    ("dual_clip", 1.0, ValueError, "dual_clip must be greater than 1, got 1.0"),
    ("dual_clip", 0.5, ValueError, "dual_clip must be greater than 1, got 0.5"),
    ("dual_clip", math.inf, ValueError, "dual_clip must be a finite number, got inf"),
    ("dual_clip", "3", TypeError, "dual_clip must be a real number, got str"),
    ("dual_clip", 10**400, ValueError, TOO_LARGE),
    ("dual_clip", HUGE_FRACTION, ValueError, "dual_clip must be finite; it is a number too large"),
    ("advantage", math.nan, ValueError, "advantage must be a finite number, got nan"),
    ("advantage", [1.0], TypeError, "advantage must be a real number, got list"),
    ("advantage", 10**400, ValueError, TOO_LARGE),
    ("advantage", -HUGE_FRACTION, ValueError, "advantage must be finite; it is a number too l"),
    ("ratios", [0.5, -0.5], ValueError, "ratios[1] is -0.5; ratios cannot be negative"),
    ("ratios", [0.5, math.inf], ValueError, "ratios[1] is inf"),
    ("ratios", [1.0, 10**400], ValueError, "ratios[1] is an integer too large for float64"),
    ("count", None, TypeError, "count must be an integer, got NoneType"),
    ("count", 1.0, TypeError, "count must be an integer, got float"),
    ("count", True, TypeError, "count must be an integer, got bool"),
    ("count", "1", TypeError, "count must be an integer, got str"),
    ("count", 0, ValueError, "count must be between 1 and 3, got 0"),
    ("count", 4, ValueError, "count must be between 1 and 3, got 4"),
    ("count", 10**400, ValueError, "count must be between 1 and 3, got an integer with more th"),
    ("objective", "ppo", ValueError, "one of ('clipped', 'unclipped', 'clip_only'), got 'ppo'"),
    ("objective", np.array(["clipped"]), ValueError, "objective must be one of"),
]


@pytest.mark.parametrize(
    ("kind", "value", "error", "message"),
    BAD_SETTINGS,
    ids=[f"{kind}-{value!r:.20}" for kind, value, _, _ in BAD_SETTINGS],
)
@EACH_ROW
@given(data=st.data())
def test_every_function_refuses_each_bad_setting_naming_it(kind, value, error, message, data):
    name, call = data.draw(st.sampled_from(RECEIVERS[kind]))
    # eps_low=None and eps_high=None mean "as eps": None is a bad clip size for eps only
    assume(value is not None or kind != "a clip size" or name == "eps")
    with pytest.raises(error, match=re.escape(message.format(name=name))) as caught:
        call(value)
    assert str(caught.value).startswith(name)


LONG_DOUBLE_HOLDS_1E400 = np.finfo(np.longdouble).maxexp > np.finfo(np.float64).maxexp


@pytest.mark.skipif(not LONG_DOUBLE_HOLDS_1E400, reason="long double is float64 here")
def test_a_long_double_too_large_for_float64_is_named():
    huge = np.longdouble("1e400")
    with pytest.raises(ValueError, match=r"^eps must be finite; it is a number too large"):
        ppo_clip_loss(*GOOD, eps=huge)
    array = np.array([huge, 0.0, 0.0], dtype=np.longdouble)
    with pytest.raises(ValueError, match=r"^advantages\[0\] is 1e\+400; too large for float64"):
        ppo_clip_loss(*GOOD[:2], array)
    with pytest.raises(ValueError, match=r"^logp_old\[1\] is .*too large for float64"):
        ppo_clip_loss(GOOD[0], [np.longdouble(0), -huge, 0.0], GOOD[2])
    # a long double float64 holds is read as float64 would read it
    fitting = np.array(GOOD[0], dtype=np.longdouble)
    assert ppo_clip_loss(fitting, *GOOD[1:]) == ppo_clip_loss(fitting.astype(np.float64), *GOOD[1:])


def test_partial_loss_takes_numpy_integers():
    breakdown = clip_breakdown(*GOOD)
    assert breakdown.partial_loss(np.int64(3)) == breakdown.loss
    assert breakdown.partial_loss(np.uint8(1)) == breakdown.partial_loss(1)


def test_unclipped_loss_of_two_true_infinities_is_refused_by_name():
    with pytest.raises(ValueError, match=r"unclipped loss is undefined.*inf - inf"):
        surrogate_loss([0.0, 0.0], [-1000.0, -1000.0], [1.0, -1.0], objective="unclipped")
