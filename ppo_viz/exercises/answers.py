"""Reading what the learner's function returned: the right type and shape, as floats.

:func:`read_answer` turns one returned value into a 1-D float64 array ready
to compare (one entry for a loss or a clip fraction, ``N`` for a gradient),
or into a sentence saying why it cannot be: ``None``, a bool, a list, an
array of the wrong shape or dtype, an integer too large for float64, an
object whose conversion raises, ...  It never raises itself.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import FloatArray, Kind
from ppo_viz.exercises.calling import LearnerCall, safe_str


def read_answer(kind: Kind, call: LearnerCall) -> FloatArray | str:
    """The value ``call`` returned as a float64 array, or why it is not the right type or shape."""
    try:
        problem = _type_problem(kind, call)
        if problem is not None:
            return problem
        value = call.value if kind == "grad" else float(call.value)
        return np.atleast_1d(np.asarray(value, dtype=np.float64))
    except OverflowError:
        return "an integer too large for float64 (whose largest value is about 1.8e308)"
    except BaseException as error:  # a learner's object may break any conversion
        kind_of = type(call.value).__name__
        return f"a {kind_of} the checker cannot read as numbers ({safe_str(error)[:80]})"


def _type_problem(kind: Kind, call: LearnerCall) -> str | None:
    """Why the value returned by ``call`` is not the right type or shape, or None if it is."""
    if call.not_implemented:
        return "None (is a return statement missing?)"
    value, n = call.value, call.batch.n
    if kind == "grad":
        return _array_problem(value, n)
    what = "loss" if kind == "loss" else "clip fraction"
    if isinstance(value, (bool, np.bool_)):
        return f"a bool ({value}); the {what} is a float"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return "a 0-d numpy array; return a plain float, e.g. float(...)"
        if value.shape == (n,) and n > 1:
            return (
                f"an array of shape {value.shape}, one value per sample; the {what} is one "
                "number for the whole batch (a mean over the samples)"
            )
        return f"an array of shape {value.shape}; the {what} is a single float"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}; the {what} is a single float"
    if isinstance(value, np.floating) and not isinstance(value, np.float64):
        return f"a {type(value).__name__}; compute in float64 (numpy's default)"
    if not isinstance(value, numbers.Real):
        return f"a {type(value).__name__}; the {what} is a float"
    return None


def _array_problem(value: Any, n: int) -> str | None:
    """Why ``value`` is not a float64 gradient of shape ``(n,)``, or None if it is."""
    if isinstance(value, (list, tuple)):
        return (
            f"a {type(value).__name__}; return a numpy array of shape ({n},), e.g. np.asarray(...)"
        )
    if isinstance(value, numbers.Real):
        return f"a single number; the gradient has one entry per sample, an array of shape ({n},)"
    if not isinstance(value, np.ndarray):
        return f"a {type(value).__name__}; return a numpy array of shape ({n},)"
    if value.shape != (n,):
        return f"an array of shape {value.shape}; expected shape ({n},), one entry per sample"
    if value.dtype != np.float64:
        return f"an array of dtype {value.dtype}; the gradient is a float64 array"
    return None
