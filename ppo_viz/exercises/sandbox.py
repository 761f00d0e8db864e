"""Running a learner's function on the battery: a time limit and Ctrl-C that always win.

The calls run in a child forked from this process, so nothing the function does (to streams,
signal handlers, ``sys.modules``, numpy, :mod:`ppo_clip`) reaches the notebook.  When a call's
time is up, the child's timer notes the line it runs and ends the child with ``os._exit``, which
no ``except`` catches; one stuck in compiled code is killed :data:`GRACE_S` later.  Ctrl-C kills
the child and stops the check.  Without fork (Windows) the calls run in a daemon thread, waited
for at most the limit each: a function that never returns runs on (``stopped`` False).
"""

from __future__ import annotations

import io
import multiprocessing
import numbers
import os
import queue
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import numpy as np

import ppo_clip
from ppo_viz.exercises.battery import ARGUMENT_NAMES, CheckBatch, FloatArray, Kind

#: Seconds one call of the learner's function may take.
TIME_LIMIT_S = 3.0
#: The longest time limit a check takes: a day (the wait for a call fails beyond about 24.8
#: days, the most milliseconds ``poll`` takes).
MAX_TIME_LIMIT_S = 86_400.0
#: How long after the limit a child stuck in compiled code is killed.
GRACE_S = 0.5
#: How many characters of a call's printed output are kept.
OUTPUT_LIMIT = 300
#: The modules whose names a call may not rebind (put back after each call, and reported).
GUARDED_MODULES = (ppo_clip, np)

Function = Callable[..., Any]
Batches = Sequence[CheckBatch]
Fields = dict[str, Any]
#: What a way of running the calls yields: each call's fields, until one times out or ends.
Calls = Iterator[Fields]


@dataclass(frozen=True)
class Call:
    """What one call of the learner's function did on ``batch``.

    ``answer``: the value as a 1-D float64 array, or why it is not of the right type or shape
    (None if the call returned nothing: it raised, timed out or was skipped).
    ``error``: "raised ValueError: ... (in f, line 3: ...)", or that its process ended
    (``read_only_failure``: it raised writing into read-only inputs).
    ``timed_out``: no answer within the limit (``stopped``: the call was ended; ``where``: the
    line it ran).  ``changed``: the first input it changed, before and after.  ``patched``: what
    it rebound in :data:`GUARDED_MODULES`.
    """

    batch: CheckBatch
    answer: FloatArray | str | None = None
    error: str = ""
    not_implemented: bool = False
    read_only_failure: bool = False
    timed_out: bool = False
    stopped: bool = True
    where: str = ""
    skipped: bool = False
    changed: tuple[str, FloatArray, FloatArray] | None = None
    printed: str = ""
    printed_total: int = 0
    patched: tuple[str, ...] = ()


def call_battery(function: Function, kind: Kind, batches: Batches, limit_s: float) -> list[Call]:
    """One :class:`Call` per batch, on fresh copies of its arrays; after a timeout, or once the
    child ended, the rest skipped.  Raises nothing but ``KeyboardInterrupt``, for a real Ctrl-C."""
    run = _in_a_child if "fork" in multiprocessing.get_all_start_methods() else _in_a_thread
    done = list(run(function, kind, batches, limit_s))  # to the end: its cleanup has run
    skipped = [{"skipped": True}] * (len(batches) - len(done))
    return [Call(batch, **fields) for batch, fields in zip(batches, done + skipped, strict=True)]


def _in_a_child(function: Function, kind: Kind, batches: Batches, limit_s: float) -> Calls:
    """Each call's fields, from a forked child; it stops after a timeout or the child's end."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(function, kind, batches, limit_s, sender))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads
        child.start()
    sender.close()
    try:
        for _ in batches:
            if not receiver.poll(limit_s + GRACE_S):  # Ctrl-C raises here, in the notebook
                yield {"timed_out": True}  # stuck in compiled code
                return
            try:
                fields = receiver.recv()
            except EOFError:
                child.join()
                yield {"error": f"ended the Python process it ran in (exit code {child.exitcode})"}
                return
            yield fields
            if fields.get("timed_out"):
                return
    finally:
        receiver.close()
        child.kill()
        child.join()


def _child(function: Function, kind: Kind, batches: Batches, limit_s: float, sender: Any) -> None:
    """The child process: each call with its own time limit, its fields sent to the checker."""
    sys.stdout = sys.stderr = io.StringIO()  # nothing the child prints reaches the notebook
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the checker's to handle

    def time_up(signum: int, frame: Any) -> None:
        sender.send({"timed_out": True, "where": _where(function, traceback.extract_stack(frame))})
        os._exit(0)

    signal.signal(signal.SIGALRM, time_up)
    for batch in batches:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        fields = _call(function, kind, batch)
        signal.setitimer(signal.ITIMER_REAL, 0)
        sender.send(fields)


def _in_a_thread(function: Function, kind: Kind, batches: Batches, limit_s: float) -> Calls:
    """Each call's fields, from a daemon thread; the streams and warning filters restored after."""
    done: queue.Queue[Fields] = queue.Queue()
    late, streams, filters = threading.Event(), (sys.stdout, sys.stderr), list(warnings.filters)

    def work() -> None:
        for batch in batches:
            if not late.is_set():
                done.put(_call(function, kind, batch))

    threading.Thread(target=work, name="learner function", daemon=True).start()
    try:
        for _ in batches:
            try:
                yield done.get(timeout=limit_s + GRACE_S)
            except queue.Empty:
                late.set()
                yield {"timed_out": True, "stopped": False}
                return
    finally:
        sys.stdout, sys.stderr = streams
        warnings.filters[:] = filters


def _call(function: Function, kind: Kind, batch: CheckBatch) -> Fields:
    """One call on fresh copies of the batch's arrays, output kept, warnings silenced."""
    inputs, output, fields = batch.inputs(), io.StringIO(), {}
    guarded = [(module, dict(vars(module))) for module in GUARDED_MODULES]
    with redirect_stdout(output), redirect_stderr(output), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                value = function(*inputs, batch.eps)
                fields["not_implemented"] = value is None or value is Ellipsis
                fields["answer"] = read_answer(kind, value, batch.n)
            except BaseException as error:  # the learner's code may raise anything
                text = _str(error).strip()
                where = _where(function, traceback.extract_tb(error.__traceback__))
                fields["error"] = (
                    f"raised {type(error).__name__}"
                    + (f": {text.splitlines()[0][:200]}" if text else "")
                    + (f" ({where})" if where else "")
                )
                fields["not_implemented"] = isinstance(error, NotImplementedError)
                fields["read_only_failure"] = batch.read_only and "read-only" in text
    originals = (batch.logp_new, batch.logp_old, batch.advantages)
    for name, before, after in zip(ARGUMENT_NAMES, originals, inputs, strict=True):
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
            fields["changed"] = fields.get("changed") or (name, before, after)
    patched = []
    for module, names in guarded:  # put back what the call rebound or deleted
        for name, value in names.items():
            if vars(module).get(name, _MISSING) is not value:
                vars(module)[name] = value
                patched.append(f"{module.__name__}.{name}")
    printed = {"printed": output.getvalue()[:OUTPUT_LIMIT], "printed_total": output.tell()}
    return {**fields, **printed, "patched": tuple(sorted(patched))}


def _where(function: Function, frames: traceback.StackSummary) -> str:
    """``in f, line 4: code``: the last line of ``function``'s file among ``frames``."""
    code = getattr(function, "__code__", None)
    mine = [frame for frame in frames if code is not None and frame.filename == code.co_filename]
    if not mine:
        return ""
    line = (mine[-1].line or "").strip()
    return f"in {mine[-1].name}, line {mine[-1].lineno}" + (f": {line}" if line else "")


def read_answer(kind: Kind, value: Any, n: int) -> FloatArray | str:
    """``value`` as a 1-D float64 array (one entry, or N for a gradient), or why it is not one."""
    if value is None or value is Ellipsis:
        return "None (is a return statement missing?)"
    if kind == "grad":
        expected = f"a float64 numpy array of shape ({n},), one entry per sample"
        right = isinstance(value, np.ndarray) and value.shape == (n,) and value.dtype == np.float64
    else:
        expected = "one float for the whole batch, e.g. float(np.mean(...))"
        right = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
        right &= not isinstance(value, np.floating) or isinstance(value, np.float64)
    if not right:
        shape = f" of shape {value.shape}, dtype {value.dtype}" if hasattr(value, "dtype") else ""
        return f"a {type(value).__name__}{shape}; expected {expected}"
    try:
        return np.atleast_1d(np.asarray(value if kind == "grad" else float(value), np.float64))
    except OverflowError:
        return "an integer too large for float64 (whose largest value is about 1.8e308)"
    except BaseException as error:  # a learner's object may break any conversion
        return f"a {type(value).__name__} the checker cannot read ({_str(error)[:80]})"


def _str(value: object) -> str:
    """``str(value)``, or a note saying it could not be had (its ``__str__`` raised)."""
    try:
        return str(value)
    except BaseException as error:  # a learner's exception class may break its own __str__
        return f"<its message cannot be shown: str() raised {type(error).__name__}>"


_MISSING = object()
