"""Calling the learner's function on one batch, and saying readably what went wrong.

:func:`call_learner` is the one place the learner's code runs: it hands the
function fresh copies of a batch's arrays, silences its warnings, catches
whatever it raises, and notes which input arrays it changed.  It never
raises itself.
"""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import ARGUMENT_NAMES, CheckBatch, FloatArray

#: The longest error message quoted to the learner.
MESSAGE_LIMIT = 200


@dataclass(frozen=True)
class LearnerCall:
    """What one call of the learner's function did on ``batch``.

    ``value`` is the returned value; ``error`` the exception raised, if any;
    ``not_implemented`` says the body looked empty (it raised
    ``NotImplementedError`` or returned ``None`` or ``...``); ``mutated``
    names the input arrays the call changed, and ``before_after`` holds the
    first of them before and after.
    """

    batch: CheckBatch
    value: Any = None
    error: Exception | None = None
    not_implemented: bool = False
    mutated: tuple[str, ...] = ()
    before_after: tuple[FloatArray, FloatArray] | None = None

    @property
    def read_only_failure(self) -> bool:
        """Whether the call failed because it wrote into read-only inputs."""
        return (
            self.batch.read_only
            and isinstance(self.error, ValueError)
            and "read-only" in str(self.error)
        )


def call_learner(function: Callable[..., Any], batch: CheckBatch) -> LearnerCall:
    """Run ``function(logp_new, logp_old, advantages, eps)`` once on ``batch``, quietly."""
    inputs = batch.inputs()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = function(*inputs, batch.eps)
    except NotImplementedError as error:  # an empty body, or a case left for later
        return LearnerCall(batch, error=error, not_implemented=True)
    except Exception as error:  # the learner's code may raise anything; report it readably
        return LearnerCall(batch, error=error)
    originals = (batch.logp_new, batch.logp_old, batch.advantages)
    changed = [
        (name, original, after)
        for name, original, after in zip(ARGUMENT_NAMES, originals, inputs, strict=True)
        if after.shape != original.shape or not np.array_equal(after, original)
    ]
    return LearnerCall(
        batch,
        value=value,
        not_implemented=value is None or value is Ellipsis,
        mutated=tuple(name for name, _, _ in changed),
        before_after=(changed[0][1], changed[0][2]) if changed else None,
    )


def error_text(error: BaseException, function: Callable[..., Any]) -> str:
    """``Type: message`` plus the line of the learner's code that raised it."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    code = getattr(function, "__code__", None)
    if code is None:
        return text
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename == code.co_filename
    ]
    if not frames:
        return text
    frame = frames[-1]
    line = (frame.line or "").strip()
    return text + f" (in {frame.name}, line {frame.lineno}" + (f": {line})" if line else ")")
