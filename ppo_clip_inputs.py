"""The input checks of :mod:`ppo_clip`: every message names the argument and the problem.

Kept apart from the math so that ``ppo_clip.py`` reads like the formulas.
Each function returns its input as the type the math needs (a float64 array,
a float, an int, ``None``) or raises ``TypeError`` (not real numbers, or not
the kind of container numpy reads as a batch) or ``ValueError`` (a wrong
shape, length or range, or a value that is not finite in float64).  :func:`real_array` and
:func:`float64_of`, the one reading of an array, serve :mod:`llm_clip_inputs` and
:mod:`llm_advantages` too.
"""

from __future__ import annotations

import decimal
import math
import numbers
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "checked_choice",
    "checked_count",
    "checked_dual_clip",
    "checked_eps",
    "checked_finite_vector",
    "checked_log_ratio",
    "checked_ratios",
    "checked_real",
    "clip_band",
    "float64_of",
    "real_array",
]

FloatArray = NDArray[np.float64]


def checked_log_ratio(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """``(logp_new - logp_old, advantages)`` as float64 arrays, after checking the inputs.

    Each input must be a non-empty 1-D array of finite real numbers, all of
    the same length.  A NaN or infinity in either log-probability shows in
    their difference, so only when the difference (or an advantage) is not
    finite are the inputs searched for the entry to name; finite inputs whose
    difference float64 cannot hold give a log-ratio of ``+-inf``.
    """
    given = {"logp_new": logp_new, "logp_old": logp_old, "advantages": advantages}
    arrays = {name: _as_vector(name, value) for name, value in given.items()}
    if len({len(array) for array in arrays.values()}) > 1:
        described = ", ".join(f"{name} has {len(array)}" for name, array in arrays.items())
        raise ValueError(f"inputs must have the same length: {described}")
    logp_new, logp_old, advantages = arrays.values()
    with np.errstate(over="ignore"):  # finite inputs further apart than float64 reaches: +-inf,
        log_ratio = logp_new - logp_old  # whose exp (inf or 0) is the ratio in float64 too
    if not (np.isfinite(log_ratio).all() and np.isfinite(advantages).all()):
        for name, array in arrays.items():
            float64_of(name, array)  # names the first NaN or infinity
    return log_ratio, advantages


def checked_finite_vector(name: str, value: ArrayLike) -> FloatArray:
    """:func:`_as_vector`, and a ``ValueError`` naming the first NaN or infinite entry."""
    return float64_of(name, _as_vector(name, value))


# --------------------------------------------------------------------------
# Arrays: what numpy would misread is refused before numpy reads it
# --------------------------------------------------------------------------

_TOO_LARGE = "too large for float64 (whose largest finite value is about 1.8e308)"


def _as_vector(name: str, value: ArrayLike) -> FloatArray:
    """``value`` as a non-empty, 1-D float64 array (:func:`real_array`); finiteness is checked
    by the caller (a long double float64 cannot hold is named here)."""
    array = real_array(name, value)
    if array.dtype.itemsize > 8:  # long double: may not fit
        return float64_of(name, array)
    return array.astype(np.float64, copy=False)


def real_array(
    name: str, value: object, ndim: int = 1, shape: str = "1-D", *, booleans: bool = False
) -> np.ndarray:
    """``value`` as a non-empty array of real numbers of ``ndim`` dimensions, or raise naming
    ``name``: the one reading of an array for :mod:`ppo_clip` and :mod:`llm_clip`.

    ``shape`` names the dimensions in messages (``"1-D"``, ``"(B, T)"``).  Raises ``TypeError``
    for data that is not real numbers (booleans too, unless ``booleans``: an array of them is
    then returned as such) and ``ValueError`` for the wrong shape or a number too large for
    float64.  The dtype is kept; :func:`float64_of` converts and checks finiteness.
    """
    plain = isinstance(value, np.ndarray) and not isinstance(value, np.ma.MaskedArray)
    array = value if plain else array_from(name, value, f"a {shape} array")
    if array.dtype.kind == "O":
        array = _object_array_as_float(name, array, value, ndim, shape, booleans)
    if array.dtype.kind not in ("iufb" if booleans else "iuf"):
        raise TypeError(
            f"{name} must contain real numbers, got dtype {array.dtype} "
            f"({_dtype_description(array.dtype)})"
        )
    if array.ndim != ndim:
        got = "a scalar" if array.ndim == 0 else f"shape {array.shape}"
        raise ValueError(f"{name} must be {shape}, got {got}")
    if array.size == 0:
        raise ValueError(f"{name} is empty; it needs at least one sample")
    if not booleans:
        refuse_booleans(name, value)  # numpy reads [True, 0.5] as [1.0, 0.5] without a word
    return array


def float64_of(
    name: str, array: np.ndarray, mask: np.ndarray | None = None, why: str = "every value"
) -> FloatArray:
    """``array`` as float64, or a ``ValueError`` naming its first entry (where ``mask``) that is
    not finite (``"{why} must be finite"``) or that float64 cannot hold (a long double)."""
    with np.errstate(over="ignore", under="ignore"):  # named below, or rounded as float64 would
        converted = array.astype(np.float64)
    bad = ~np.isfinite(converted) if mask is None else mask & ~np.isfinite(converted)
    if bad.any():
        index = tuple(np.argwhere(bad)[0].tolist())
        problem = _TOO_LARGE if np.isfinite(array[index]) else f"{why} must be finite"
        raise ValueError(f"{name}[{', '.join(map(str, index))}] is {array[index]!s}; {problem}")
    return converted


def array_from(name: str, value: object, what: str = "a 1-D array") -> np.ndarray:
    """``np.asarray(value)``, after refusing what numpy would misread as a batch, with a
    ``TypeError`` naming ``name`` (``what`` says which array it must be).

    ``None``, text or raw bytes, a dict or a view of one, a set, an iterator
    or any other iterable numpy cannot index has no samples in order that
    numpy would find (it makes a single object of it, or reads each byte as
    a number), and a masked array's mask would be silently ignored.
    """
    _refuse_unordered_or_masked(name, value, what)
    try:
        return np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be {what} of numbers; its rows differ in length (it looks nested or "
            "ragged) or it holds values numpy cannot read"
        ) from None


def _refuse_unordered_or_masked(name: str, value: object, what: str) -> None:
    kind = type(value).__name__
    if value is None or isinstance(value, str):
        raise TypeError(f"{name} must be {what} of numbers, got {kind}")
    if isinstance(value, (bytes, bytearray)):  # numpy would read each byte as a number
        raise TypeError(f"{name} must be {what} of numbers, got {kind} (raw bytes)")
    if isinstance(value, memoryview):
        raise TypeError(
            f"{name} must be {what} of numbers, got memoryview (a raw buffer); if it "
            f"holds numbers, say so with np.asarray({name})"
        )
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array, whose mask would be ignored: pass "
            f"{name}.filled(value) to choose what masked samples hold, or drop them from every "
            f"input (e.g. {name}.compressed() and the same samples of the other inputs)"
        )
    if isinstance(value, Mapping):
        raise TypeError(
            f"{name} is a {kind}; pass its values in sample order as a list or an array, "
            f"e.g. list({name}.values())"
        )
    if isinstance(value, (set, frozenset)):
        raise TypeError(
            f"{name} is a {kind}, which has no order; pass the values in sample order as a list "
            "or an array"
        )
    if isinstance(value, Iterator):
        raise TypeError(
            f"{name} is a {kind} (an iterator); pass a list or an array, e.g. list(...) of it"
        )
    if (
        isinstance(value, Iterable)
        and not hasattr(value, "__getitem__")
        and not hasattr(value, "__array__")
    ):
        raise TypeError(
            f"{name} is a {kind}, which numpy does not read as an array; pass a list or an "
            f"array, e.g. list({name})"
        )


def refuse_booleans(name: str, values: object) -> None:
    """A ``TypeError`` for the first boolean in (nested) sequences numpy read as numbers,
    naming where it sits (``name[0][1]``); an array of numbers holds none."""
    found = _first_boolean(values)
    if found is not None:
        at, item = found
        raise TypeError(f"{name} must contain only numbers: {name}{at} is {item!r}, a boolean")


def _first_boolean(value: object, at: str = "") -> tuple[str, object] | None:
    """Where the first boolean sits (``"[0][1]"``) and what it is, or None."""
    if _is_boolean(value) or (isinstance(value, np.ndarray) and value.dtype.kind == "b"):
        return at, value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        for index, item in enumerate(value):
            found = _first_boolean(item, f"{at}[{index}]")
            if found is not None:
                return found
    return None


def _is_boolean(item: object) -> bool:
    """``True``/``False``, numpy's ``bool_``, or a 0-d array of booleans."""
    if isinstance(item, np.ndarray):
        return item.ndim == 0 and item.dtype.kind == "b"
    return isinstance(item, (bool, np.bool_))


def _object_array_as_float(
    name: str, array: NDArray[np.object_], value: object, ndim: int, shape: str, booleans: bool
) -> FloatArray:
    """Convert a mixed-type array, naming the first entry that is not a usable number (a
    boolean too, unless ``booleans``: then it reads as 1 or 0)."""
    if array.ndim != ndim:
        got = type(value).__name__ if array.ndim == 0 else "a nested or ragged sequence"
        raise TypeError(f"{name} must be a {shape} array of numbers, got {got}")
    floats = np.empty(array.shape)
    for index, item in np.ndenumerate(array):
        at = f"{name}[{', '.join(map(str, index))}]"
        if isinstance(item, np.ndarray) and item.ndim == 0:
            item = item[()]
        if _is_boolean(item) and not booleans:
            raise TypeError(f"{name} must contain only numbers: {at} is {item!r}, a boolean")
        if not isinstance(item, numbers.Real | np.bool_):
            hint = (
                f"; convert it first, e.g. [float(x) for x in {name}]"
                if isinstance(item, decimal.Decimal)
                else ""
            )
            raise TypeError(f"{name} must contain only numbers: {at} is {item!r}{hint}")
        floats[index] = _as_float(at, item, "is")
    return floats


def _dtype_description(dtype: np.dtype) -> str:
    """A plain name for a dtype that is not real numbers."""
    descriptions = {"b": "booleans", "c": "complex numbers", "U": "text", "S": "bytes"}
    return descriptions.get(dtype.kind, "not real numbers")


# --------------------------------------------------------------------------
# Single numbers
# --------------------------------------------------------------------------


def _as_float(name: str, value: numbers.Real, verb: str = "must be finite; it is") -> float:
    """``float(value)``, or a ``ValueError`` where a finite number is too large for float64.

    A huge ``int`` or ``Fraction`` raises ``OverflowError`` on the way, and a
    huge long double turns into ``inf``: both are named as what they are.
    """
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if math.isinf(number) and not _is_infinite(value):
        kind = "an integer" if isinstance(value, numbers.Integral) else "a number"
        raise ValueError(f"{name} {verb} {kind} {_TOO_LARGE}")
    return number


def _is_infinite(value: numbers.Real) -> bool:
    """Whether ``value`` itself is infinite (not merely too large for float64)."""
    try:
        return bool(np.isinf(value))
    except TypeError:  # an int or Fraction too large for numpy: finite
        return False


def checked_real(name: str, value: object) -> float:
    """``value`` as a finite Python float (from Python or numpy reals, 0-d arrays too)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    number = _as_float(name, value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {number!r}")
    return number


def checked_eps(name: str, value: object) -> float:
    """A clip size: a real number in [0, 1]."""
    number = checked_real(name, value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {number!r}")
    return number


def clip_band(eps: object, eps_low: object = None, eps_high: object = None) -> tuple[float, float]:
    """The clip band ``(1 - eps_low, 1 + eps_high)``; each bound defaults to ``eps``.

    >>> clip_band(0.2)
    (0.8, 1.2)
    """
    symmetric = checked_eps("eps", eps)
    low = symmetric if eps_low is None else checked_eps("eps_low", eps_low)
    high = symmetric if eps_high is None else checked_eps("eps_high", eps_high)
    return 1.0 - low, 1.0 + high


def checked_ratios(value: ArrayLike) -> FloatArray:
    """:func:`ppo_clip.ratio_sweep`'s grid: :func:`checked_finite_vector`, and no ratio below 0."""
    grid = checked_finite_vector("ratios", value)
    if (grid < 0).any():
        index = int(np.argmax(grid < 0))
        raise ValueError(f"ratios[{index}] is {float(grid[index])}; ratios cannot be negative")
    return grid


def checked_dual_clip(value: object) -> float | None:
    """The dual-clip cap: ``None`` (off) or a real number above 1."""
    if value is None:
        return None
    cap = checked_real("dual_clip", value)
    if cap <= 1.0:
        raise ValueError(f"dual_clip must be greater than 1, got {cap!r}")
    return cap


def checked_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ``ValueError`` listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def checked_count(name: str, value: object, largest: int) -> int:
    """A whole number from 1 to ``largest`` (an ``int`` or numpy integer, not a bool)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    try:
        count = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if not 1 <= count <= largest:
        shown = f"{count}" if abs(count) < 10**20 else "an integer with more than 20 digits"
        raise ValueError(f"{name} must be between 1 and {largest}, got {shown}")
    return count
