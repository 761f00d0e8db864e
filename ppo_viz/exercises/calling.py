"""Calling the learner's function on the battery, and saying readably what went wrong.

:func:`call_learner` is the one place the learner's code runs: it hands the
function fresh copies of a batch's arrays and runs it through
:func:`.run_limited` (a time limit, its printed output captured, whatever it
raises caught), with its warnings silenced.  Afterwards it notes which input
arrays the call changed, and puts back any name of the ``ppo_clip`` module
the call replaced (:class:`.ModuleGuard`).  It never raises itself.

:func:`call_battery` calls the function on each batch in turn and stops
calling it after its first timeout: a function that loops forever costs one
time limit, not one per batch.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import ARGUMENT_NAMES, CheckBatch, FloatArray
from ppo_viz.exercises.reference import ModuleGuard
from ppo_viz.exercises.time_limit import TIME_LIMIT_S, BoundedText, run_limited

#: The longest error message quoted to the learner.
MESSAGE_LIMIT = 200


@dataclass(frozen=True)
class LearnerCall:
    """What one call of the learner's function did on ``batch``.

    ``value`` is the returned value; ``error`` the exception raised, if any
    (after a timeout, the one that interrupted it, whose traceback shows where);
    ``not_implemented`` says the body looked empty (it raised
    ``NotImplementedError`` or returned ``None`` or ``...``); ``timed_out``
    that it did not return within the time limit (``stopped``: whether the
    checker could interrupt it); ``skipped`` that it was not called because an
    earlier call timed out.  ``mutated`` names the input arrays the call
    changed, and ``before_after`` holds the first of them before and after;
    ``patched`` names what the call replaced in the ``ppo_clip`` module (put
    back since); ``printed`` is its captured output.
    """

    batch: CheckBatch
    value: Any = None
    error: BaseException | None = None
    not_implemented: bool = False
    timed_out: bool = False
    stopped: bool = True
    skipped: bool = False
    mutated: tuple[str, ...] = ()
    before_after: tuple[FloatArray, FloatArray] | None = None
    patched: tuple[str, ...] = ()
    printed: BoundedText | None = None

    @property
    def returned(self) -> bool:
        """Whether the call returned a value (it did not raise, time out or get skipped)."""
        return self.error is None and not (self.timed_out or self.skipped)

    @property
    def read_only_failure(self) -> bool:
        """Whether the call failed because it wrote into read-only inputs."""
        return (
            self.batch.read_only
            and isinstance(self.error, ValueError)
            and "read-only" in safe_str(self.error)
        )


def call_learner(
    function: Callable[..., Any], batch: CheckBatch, limit_s: float = TIME_LIMIT_S
) -> LearnerCall:
    """Run ``function(logp_new, logp_old, advantages, eps)`` once on ``batch``, quietly."""
    inputs = batch.inputs()
    with (
        ModuleGuard(sys.modules.get("ppo_clip")) as guard,
        warnings.catch_warnings(),
        np.errstate(all="ignore"),
    ):
        warnings.simplefilter("ignore")
        outcome = run_limited(function, (*inputs, batch.eps), limit_s)
    common = {"patched": guard.changed, "printed": outcome.printed}
    if outcome.timed_out:  # its error, if any, is the interruption: its traceback shows where
        return LearnerCall(
            batch, error=outcome.error, timed_out=True, stopped=outcome.stopped, **common
        )
    if isinstance(outcome.error, NotImplementedError):  # an empty body, or a case left for later
        return LearnerCall(batch, error=outcome.error, not_implemented=True, **common)
    mutated = _changed_inputs(batch, inputs)
    return LearnerCall(
        batch,
        value=outcome.value,
        error=outcome.error,
        not_implemented=outcome.error is None and _looks_empty(outcome.value),
        mutated=tuple(name for name, _, _ in mutated),
        before_after=(mutated[0][1], mutated[0][2]) if mutated else None,
        **common,
    )


def call_battery(
    function: Callable[..., Any], batches: Sequence[CheckBatch], limit_s: float = TIME_LIMIT_S
) -> list[LearnerCall]:
    """:func:`call_learner` on each batch in turn; after a timeout the rest are skipped."""
    calls: list[LearnerCall] = []
    for batch in batches:
        if any(call.timed_out for call in calls):
            calls.append(LearnerCall(batch, skipped=True))
        else:
            calls.append(call_learner(function, batch, limit_s))
    return calls


def _looks_empty(value: object) -> bool:
    return value is None or value is Ellipsis


def _changed_inputs(
    batch: CheckBatch, inputs: Sequence[FloatArray]
) -> list[tuple[str, FloatArray, FloatArray]]:
    """``(name, before, after)`` for each input array the call changed."""
    originals = (batch.logp_new, batch.logp_old, batch.advantages)
    return [
        (name, original, after)
        for name, original, after in zip(ARGUMENT_NAMES, originals, inputs, strict=True)
        if after.shape != original.shape or not np.array_equal(after, original, equal_nan=True)
    ]


def safe_str(value: object) -> str:
    """``str(value)``, or a note saying it could not be had (its ``__str__`` raised)."""
    try:
        return str(value)
    except BaseException as error:  # a learner's exception class may break its own __str__
        return f"<its message cannot be shown: str() raised {type(error).__name__}>"


def safe_repr(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, or a note if ``repr`` raised."""
    try:
        text = repr(value)
    except BaseException as error:  # a learner's object may break its own __repr__
        return f"<a {type(value).__name__} whose repr() raised {type(error).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_text(error: BaseException, function: Callable[..., Any]) -> str:
    """``Type: message`` plus the line of the learner's code that raised it."""
    text = safe_str(error).strip()
    message = text.splitlines()[0] if text else ""
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    name = type(error).__name__
    text = f"{name}: {message}" if message else name
    line = learner_line(error, function)
    return text + (f" ({line})" if line else "")


def learner_line(error: BaseException, function: Callable[..., Any]) -> str:
    """``in f, line 4: code``: the last line of the learner's function in a traceback."""
    code = getattr(function, "__code__", None)
    if code is None:
        return ""
    try:
        frames = [
            frame
            for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename == code.co_filename
        ]
    except Exception:  # a traceback the standard library cannot read: say nothing
        return ""
    if not frames:
        return ""
    frame = frames[-1]
    line = (frame.line or "").strip()
    return f"in {frame.name}, line {frame.lineno}" + (f": {line}" if line else "")
