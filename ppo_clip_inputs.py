"""The input checks of :mod:`ppo_clip`: every message names the argument and the problem.

Kept apart from the math so that ``ppo_clip.py`` reads like the formulas.
Each function returns its input as the type the math needs (a float64 array,
a float, ``None``) or raises ``TypeError`` (not real numbers) or
``ValueError`` (a wrong shape, length or range, or a non-finite value).
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "checked_dual_clip",
    "checked_eps",
    "checked_finite_vector",
    "checked_log_ratio",
    "checked_real",
]

FloatArray = NDArray[np.float64]


def checked_log_ratio(
    logp_new: ArrayLike, logp_old: ArrayLike, advantages: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """``(logp_new - logp_old, advantages)`` as float64 arrays, after checking the inputs.

    Each input must be a non-empty 1-D array of finite real numbers, all of
    the same length.  A NaN or infinity in either log-probability shows in
    their difference, so only when the difference (or an advantage) is not
    finite are the inputs searched for the entry to name.
    """
    logp_new = _as_vector("logp_new", logp_new)
    logp_old = _as_vector("logp_old", logp_old)
    advantages = _as_vector("advantages", advantages)
    if not len(logp_new) == len(logp_old) == len(advantages):
        _raise_for_different_lengths(logp_new=logp_new, logp_old=logp_old, advantages=advantages)
    log_ratio = logp_new - logp_old
    if not (np.isfinite(log_ratio).all() and np.isfinite(advantages).all()):
        _raise_for_the_first_non_finite(logp_new=logp_new, logp_old=logp_old, advantages=advantages)
    return log_ratio, advantages


def _as_vector(name: str, value: ArrayLike) -> FloatArray:
    """``value`` as a non-empty, 1-D float64 array, or raise naming ``name``.

    Raises ``TypeError`` for data that is not real numbers (booleans
    included) and ``ValueError`` for the wrong shape or an integer too large
    for float64.  Finiteness is checked by the caller.
    """
    array = value if _is_plain_array(value) else _array_from(name, value)
    if array.dtype.kind == "O":
        array = _object_array_as_float(name, array)
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must contain real numbers, got dtype {array.dtype} "
            f"({_dtype_description(array.dtype)})"
        )
    if array.ndim != 1:
        shape = "a scalar" if array.ndim == 0 else f"shape {array.shape}"
        raise ValueError(f"{name} must be 1-D, got {shape}")
    if len(array) == 0:
        raise ValueError(f"{name} is empty; it needs at least one sample")
    return array.astype(np.float64, copy=False)


def _is_plain_array(value: object) -> bool:
    return isinstance(value, np.ndarray) and not isinstance(value, np.ma.MaskedArray)


def _array_from(name: str, value: object) -> np.ndarray:
    """``np.asarray(value)`` for anything but a plain array, refusing what numpy misreads."""
    _refuse_unordered_or_masked(name, value)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a 1-D array of numbers; it looks nested or ragged "
            "(rows of different lengths) or holds values numpy cannot read"
        ) from None
    if isinstance(value, (list, tuple)) and array.dtype.kind in "iuf":
        _refuse_booleans(name, value)  # numpy reads [True, 0.5] as [1.0, 0.5] without a word
    return array


def _refuse_unordered_or_masked(name: str, value: object) -> None:
    """Raise a ``TypeError`` for inputs numpy would misread as a batch.

    ``None``, text, a dict, a set or a generator has no samples in order
    (numpy would make a single object of it), and a masked array's mask
    would be silently ignored.
    """
    kind = type(value).__name__
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a 1-D array of numbers, got {kind}")
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array, and ppo_clip would ignore its mask: pass "
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


def _refuse_booleans(name: str, values: Sequence[object]) -> None:
    for index, item in enumerate(values):
        if isinstance(item, (bool, np.bool_)):
            raise TypeError(
                f"{name} must contain only numbers: {name}[{index}] is {item!r}, a boolean"
            )


def checked_finite_vector(name: str, value: ArrayLike) -> FloatArray:
    """:func:`_as_vector`, and a ``ValueError`` naming the first NaN or infinite entry."""
    array = _as_vector(name, value)
    _raise_for_the_first_non_finite(**{name: array})
    return array


def _raise_for_the_first_non_finite(**arrays: FloatArray) -> None:
    """Raise a ``ValueError`` naming the first NaN or infinite entry of ``arrays``, if any.

    (A NaN or infinity in either log-probability shows in their difference, so
    :func:`clip_breakdown` calls this only when the log-ratio is not finite.)
    """
    for name, array in arrays.items():
        finite = np.isfinite(array)
        if not finite.all():
            index = int(np.argmin(finite))
            raise ValueError(f"{name}[{index}] is {array[index]}; every value must be finite")


def _object_array_as_float(name: str, array: NDArray[np.object_]) -> FloatArray:
    """Convert a mixed-type array, naming the first entry that is not a usable number."""
    if array.ndim != 1:
        raise TypeError(f"{name} must be a 1-D array of numbers, got a nested or ragged sequence")
    numbers_as_floats = []
    for index, item in enumerate(array):
        if isinstance(item, (bool, np.bool_)):
            raise TypeError(
                f"{name} must contain only numbers: {name}[{index}] is {item!r}, a boolean"
            )
        if not isinstance(item, numbers.Real):
            hint = (
                f"; convert it first, e.g. [float(x) for x in {name}]" if _is_decimal(item) else ""
            )
            raise TypeError(f"{name} must contain only numbers: {name}[{index}] is {item!r}{hint}")
        try:
            numbers_as_floats.append(float(item))
        except OverflowError:
            raise ValueError(
                f"{name}[{index}] is an integer too large for float64 (whose largest finite "
                "value is about 1.8e308)"
            ) from None
    return np.array(numbers_as_floats, dtype=np.float64)


def _is_decimal(item: object) -> bool:
    return isinstance(item, decimal.Decimal)


def _dtype_description(dtype: np.dtype) -> str:
    """A plain name for a dtype that is not real numbers."""
    descriptions = {"b": "booleans", "c": "complex numbers", "U": "text", "S": "bytes"}
    return descriptions.get(dtype.kind, "not real numbers")


def _raise_for_different_lengths(**arrays: FloatArray) -> None:
    """Raise a ``ValueError`` that lists the length of each of ``arrays``."""
    described = ", ".join(f"{name} has {len(array)}" for name, array in arrays.items())
    raise ValueError(f"inputs must have the same length: {described}")


def checked_real(name: str, value: object) -> float:
    """``value`` as a finite Python float (from Python or numpy reals, 0-d arrays too)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {number!r}")
    return number


def checked_eps(name: str, value: object) -> float:
    """A clip size: a real number in [0, 1]."""
    number = checked_real(name, value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {number!r}")
    return number


def checked_dual_clip(value: object) -> float | None:
    """The dual-clip cap: ``None`` (off) or a real number above 1."""
    if value is None:
        return None
    cap = checked_real("dual_clip", value)
    if cap <= 1.0:
        raise ValueError(f"dual_clip must be greater than 1, got {cap!r}")
    return cap
