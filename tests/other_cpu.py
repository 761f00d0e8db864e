"""Run tests as if on another CPU: numpy's ``exp``, ``log``, ``tanh`` one ulp off.

numpy picks a vectorised ``exp``, ``log`` or ``tanh`` for the CPU it runs on (SSE, AVX2,
AVX-512 code paths), and those agree with each other and with ``math.exp`` to within one unit
in the last place (ulp), not always to the last bit.  A test that pins one machine's last bit
passes where it was written and fails on the next machine.  This plugin catches such tests on
any machine: with ``PPO_SIMULATED_CPU`` set, every inexact result of the functions in
:data:`NUDGED` is moved by one ulp for the whole test session:

* ``ulp-up``: towards +inf;
* ``ulp-down``: towards -inf;
* ``ulp-mixed``: a quarter of the results (by the argument's lowest two bits), up or down by
  its third bit, as on a machine whose code path rounds differently on some inputs only.

Results that every implementation gets exactly are left alone: ``exp(0) == 1`` and ``exp`` of
any ``|x| < 2**-53`` (1), results equal to their argument (``expm1``, ``log1p``, ``tanh`` of a
tiny ``x``), zeros, infinities, NaN, and ``tanh``'s saturated ``±1``.  A test that computes its
expectation with numpy in the same run sees the same nudged numbers, as it would on another
CPU; one that hard-codes a last bit, or compares numpy with ``math`` exactly, fails.

``.ci/run`` runs the numeric, stepper and prose tests under each variant.  Locally::

    PPO_SIMULATED_CPU=ulp-up .venv/bin/python -m pytest $(.venv/bin/python tests/other_cpu.py files)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

#: The environment variable that turns the simulation on, and its values.
VARIABLE = "PPO_SIMULATED_CPU"
VARIANTS = ("ulp-up", "ulp-down", "ulp-mixed")
#: The numpy functions whose last bit differs between code paths.
NUDGED = ("exp", "log", "expm1", "log1p", "tanh")


def simulated_variant() -> str | None:
    """The variant asked for in the environment, or None; a ``ValueError`` for an unknown one."""
    variant = os.environ.get(VARIABLE, "").strip()
    if not variant:
        return None
    if variant not in VARIANTS:
        raise ValueError(f"{VARIABLE} must be one of {', '.join(VARIANTS)}, got {variant!r}")
    return variant


def nudged(function: np.ufunc, variant: str) -> Callable[..., Any]:
    """``function`` with each inexact result moved one ulp in the direction ``variant`` says."""

    name = function.__name__

    @functools.wraps(function)
    def wrapper(x: Any, *args: Any, **kwargs: Any) -> Any:
        result = function(x, *args, **kwargs)
        values = np.asarray(result)
        if not np.issubdtype(values.dtype, np.floating):
            return result
        argument = np.broadcast_to(np.asarray(x, values.dtype), values.shape).copy()
        movable = np.isfinite(values) & (values != 0) & (argument != 0) & (values != argument)
        if name == "exp":
            movable &= np.abs(argument) >= 2.0**-53  # exp of a tinier x rounds to 1 everywhere
        if name == "tanh":
            movable &= np.abs(values) != 1  # saturated
        toward = np.full(values.shape, np.inf if variant != "ulp-down" else -np.inf)
        if variant == "ulp-mixed":
            bits = argument.view(np.uint64 if values.itemsize == 8 else np.uint32)
            movable &= (bits & 3) == 3
            toward = np.where(bits & 4, np.inf, -np.inf)
        with np.errstate(under="ignore"):  # the caller's state: 0's neighbour (left) is tiny
            nudges = np.nextafter(values, toward.astype(values.dtype))
        moved = np.where(movable, nudges, values)
        if isinstance(result, np.ndarray):
            if kwargs.get("out") is not None:
                result[...] = moved
                return result
            return moved
        return moved[()]

    return wrapper


def install(variant: str) -> None:
    """Replace numpy's functions in :data:`NUDGED` by their nudged forms for this process."""
    for name in NUDGED:
        setattr(np, name, nudged(getattr(np, name), variant))


#: The test files whose numbers go through numpy's exp, log or tanh: what CI reruns per variant.
NUMERIC_TESTS = (
    "tests/test_ppo_clip.py",
    "tests/test_ppo_clip_inputs.py",
    "tests/test_ppo_clip_properties.py",
    "tests/test_llm_clip.py",
    "tests/test_llm_clip_properties.py",
    "tests/test_llm_notebook.py",
    "tests/test_rlhf_notebook.py",
    "tests/test_llm_exercises.py",
    "tests/test_stepper.py",
    "tests/test_numerics.py",
    "tests/test_numerics_apps.py",
    "tests/test_surrogate.py",
    "tests/test_epochs.py",
    "tests/test_epochs_foundations.py",
    "tests/test_exercises.py",
    "tests/test_exercise_checker.py",
    "tests/test_exercise_notebook.py",
    "tests/test_hostile_input.py",
    "tests/test_notebooks.py",
    "tests/test_why_clip.py",
    "tests/test_why_clip_claims.py",
    "tests/test_tiny_lm.py",
    "tests/test_tiny_rlhf.py",
    "tests/test_rlhf_study.py",
)


def other_dispatch(found: tuple[str, ...]) -> str:
    """``NPY_DISABLE_CPU_FEATURES`` that makes numpy take its next lower SIMD path here.

    On an AVX-512 machine (``X86_V3 X86_V4 AVX512_ICL``) that is the AVX2 path; on an AVX2
    one (``X86_V3``), the baseline.  Empty where numpy found nothing to dispatch to.
    """
    levels = [feature for feature in found if feature.startswith("X86_V")]
    if not levels:
        return " ".join(found[-1:])
    top = max(levels)
    index = found.index(top)
    return " ".join(found[index:])


if __name__ == "__main__":  # for .ci/run: print the test files, or the other dispatch
    import sys

    sys.path.insert(0, ".")
    from ppo_viz.machine import simd_found

    print(" ".join(NUMERIC_TESTS) if sys.argv[1:] == ["files"] else other_dispatch(simd_found()))
