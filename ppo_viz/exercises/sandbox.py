"""Running a learner's function on the battery: a time limit and Ctrl-C that always win.

:func:`call_battery` calls ``function(logp_new, logp_old, advantages, eps)`` on each batch, each
time on fresh copies of its arrays, and returns one :class:`Call` per batch.  It raises nothing,
except ``KeyboardInterrupt`` for a real Ctrl-C.

The calls run in a child process forked from this one (``multiprocessing``'s ``"fork"``
context), so nothing the function does reaches the notebook's process: its streams, signal
handlers, ``sys.modules``, numpy's settings and :mod:`ppo_clip` stay as they were.  In the child
its output is kept (the first :data:`OUTPUT_LIMIT` characters), its warnings are silenced, and
names it rebinds in :data:`GUARDED_MODULES` are put back after each call and reported.  When a
call's time is up, the child's own timer notes the line it is running and ends the child with
``os._exit``, which no ``except`` can catch; a child stuck in compiled code is killed
:data:`GRACE_S` later.  The calls after a timeout are skipped.  Ctrl-C raises
``KeyboardInterrupt`` while the checker waits: the child is killed and the check stops.

Without fork (Windows) the calls run in a daemon thread, and the checker waits at most the limit
for each: a function that never returns runs on in the background (``stopped`` is False).
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
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import numpy as np

import ppo_clip
from ppo_viz.exercises.battery import ARGUMENT_NAMES, CheckBatch, FloatArray, Kind

#: Seconds one call of the learner's function may take.
TIME_LIMIT_S = 3.0
#: How long after the limit a child stuck in compiled code is killed.
GRACE_S = 0.5
#: How many characters of a call's printed output are kept.
OUTPUT_LIMIT = 300
#: The modules whose names a call may not rebind (put back after each call, and reported).
GUARDED_MODULES = (ppo_clip, np)

Receive = Callable[[float], dict[str, Any]]


@dataclass(frozen=True)
class Call:
    """What one call of the learner's function did on ``batch``.

    ``answer``: the value returned, as a 1-D float64 array, or a sentence saying why it is not
    the right type or shape.  ``error``: what went wrong otherwise ("raised ValueError: ... (in
    f, line 3: ...)"; ``ended``: the process it ran in ended).  ``not_implemented``: the body
    looks empty.  ``timed_out``: no answer within the limit (``stopped``: the call was ended;
    ``where``: the line it was running).  ``changed``: the first input array it changed, before
    and after.  ``patched``: what it rebound in :data:`GUARDED_MODULES`.
    """

    batch: CheckBatch
    answer: FloatArray | str | None = None
    error: str = ""
    ended: bool = False
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

    @property
    def returned(self) -> bool:
        """Whether the call returned a value (it did not raise, time out or get skipped)."""
        return self.answer is not None and not self.error and not self.timed_out


def call_battery(
    function: Callable[..., Any], kind: Kind, batches: Sequence[CheckBatch], limit_s: float
) -> list[Call]:
    """One :class:`Call` per batch; after a timeout, or once the child ended, the rest skipped."""
    run = _in_a_child if "fork" in multiprocessing.get_all_start_methods() else _in_a_thread
    calls: list[Call] = []
    with run(function, kind, batches, limit_s) as receive:
        for batch in batches:
            if any(c.timed_out or c.ended for c in calls):
                calls.append(Call(batch, skipped=True))
            else:
                calls.append(Call(batch, **receive(limit_s + GRACE_S)))
    return calls


@contextmanager
def _in_a_child(
    function: Callable[..., Any], kind: Kind, batches: Sequence[CheckBatch], limit_s: float
) -> Iterator[Receive]:
    """Run the calls in a forked child; yield a function that waits for the next call's fields."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    arguments = (function, kind, batches, limit_s, sender)
    child = context.Process(target=_child, args=arguments, daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads
        child.start()
    sender.close()
    received: list[dict[str, Any]] = []

    def receive(wait_s: float) -> dict[str, Any]:
        if not receiver.poll(wait_s):
            return {"timed_out": True}  # stuck in compiled code: killed below
        try:
            received.append(receiver.recv())
        except EOFError:
            child.join()
            return {
                "error": f"ended the Python process it ran in (exit code {child.exitcode})",
                "ended": True,
            }
        return received[-1]

    try:
        yield receive
    finally:
        receiver.close()
        if len(received) < len(batches) or received[-1].get("timed_out"):
            child.kill()  # a timeout or Ctrl-C; otherwise the child ends by itself
            child.join()


def _child(
    function: Callable[..., Any],
    kind: Kind,
    batches: Sequence[CheckBatch],
    limit_s: float,
    sender: Any,
) -> None:
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


@contextmanager
def _in_a_thread(
    function: Callable[..., Any], kind: Kind, batches: Sequence[CheckBatch], limit_s: float
) -> Iterator[Receive]:
    """Run the calls in a daemon thread; the streams and warning filters are restored after."""
    done: queue.Queue[dict[str, Any]] = queue.Queue()
    late, streams, filters = threading.Event(), (sys.stdout, sys.stderr), list(warnings.filters)

    def work() -> None:
        for batch in batches:
            if not late.is_set():
                done.put(_call(function, kind, batch))

    def receive(wait_s: float) -> dict[str, Any]:
        try:
            return done.get(timeout=wait_s)
        except queue.Empty:
            late.set()
            return {"timed_out": True, "stopped": False}

    threading.Thread(target=work, name="learner function", daemon=True).start()
    try:
        yield receive
    finally:
        sys.stdout, sys.stderr = streams
        warnings.filters[:] = filters


def _call(function: Callable[..., Any], kind: Kind, batch: CheckBatch) -> dict[str, Any]:
    """One call on fresh copies of the batch's arrays: the fields of its :class:`Call`."""
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


def _where(function: Callable[..., Any], frames: traceback.StackSummary) -> str:
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
        array = (
            f" of shape {value.shape} and dtype {value.dtype}" if hasattr(value, "dtype") else ""
        )
        return f"a {type(value).__name__}{array}; expected {expected}"
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
