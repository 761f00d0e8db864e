"""Running a learner's function on the battery: a time limit and Ctrl-C that always win.

The calls run in a child forked from this process, in a process group of its own, so nothing
the function does (to streams, signal handlers, ``sys.modules``, numpy, the project's modules)
reaches the notebook, and nothing it starts in that group (``subprocess.Popen``, ``os.system``)
outlives the check: the whole group is killed at the end (a process that leaves the group, with
``start_new_session=True`` or ``setsid``, is beyond its reach).  When a call's time is up, the
child's timer notes the line it runs and ends the child with ``os._exit``, which no ``except``
catches; one stuck in compiled code is killed :data:`GRACE_S` later.  Ctrl-C kills the child
and stops the check.  What a call writes is kept, from Python's streams and from file
descriptors 1 and 2 alike (``os.write``, a shell's output, C code).

Fork is the one way: the bundle runs on Linux and macOS, which both have it (on Windows, in
WSL).  A thread, the only other way without pickling the learner's notebook function, could
not stop a loop, nor keep what it rebinds or prints out of the notebook, so a system without
fork gets a ``RuntimeError`` saying so rather than a check that cannot keep its promises.
"""

from __future__ import annotations

import contextlib
import dis
import multiprocessing
import numbers
import os
import signal
import sys
import tempfile
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import llm_advantages
import llm_clip
import llm_objectives
import ppo_clip
import ppo_clip_exact
import rollout_correction
from ppo_viz.exercises.battery import ExerciseBatch, FloatArray, Kind

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
GUARDED_MODULES = (
    ppo_clip,
    ppo_clip_exact,
    llm_clip,
    llm_objectives,
    llm_advantages,
    rollout_correction,
    np,
)

Function = Callable[..., Any]
Batches = Sequence[ExerciseBatch]
Fields = dict[str, Any]
#: What a way of running the calls yields: each call's fields, until one times out or ends.
Calls = Iterator[Fields]


@dataclass(frozen=True)
class Call:
    """What one call of the learner's function did on ``batch``.

    ``answer``: the value as a 1-D float64 array, or why it is not of the right type or shape
    (None if the call returned nothing: it raised, timed out or was skipped).
    ``error``: "raised ValueError: ... (in f, line 3: ...)", or that its process ended
    (``read_only_failure``: it raised writing into read-only inputs).  ``not_implemented``: it
    raised ``NotImplementedError``, or its body does nothing (:func:`does_nothing`).
    ``timed_out``: no answer within the limit (``where``: the line it ran when it was ended).
    ``changed``: the first input it changed, before and after.  ``patched``: what it rebound in
    :data:`GUARDED_MODULES`.
    """

    batch: ExerciseBatch
    answer: FloatArray | str | None = None
    error: str = ""
    not_implemented: bool = False
    read_only_failure: bool = False
    timed_out: bool = False
    where: str = ""
    skipped: bool = False
    changed: tuple[str, FloatArray, FloatArray] | None = None
    printed: str = ""
    printed_total: int = 0
    patched: tuple[str, ...] = ()


def call_battery(function: Function, kind: Kind, batches: Batches, limit_s: float) -> list[Call]:
    """One :class:`Call` per batch, on fresh copies of its arrays; after a timeout, or once the
    child ended, the rest skipped.  Raises ``KeyboardInterrupt`` for a real Ctrl-C, and
    ``RuntimeError`` on a system without fork (see the module's docstring)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        raise RuntimeError(
            "the checker runs your function in a forked copy of the kernel, which this system "
            "cannot make: use Linux or macOS (on Windows, WSL)"
        )
    done = list(_in_a_child(function, kind, batches, limit_s))  # to the end: its cleanup ran
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
    own_group = _own_process_group(child.pid)  # the child does it too: whoever is first
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
            except Exception as error:  # bytes written into the channel's descriptor
                yield {"error": f"wrote into the checker's channel ({type(error).__name__})"}
                return
            yield fields
            if fields.get("timed_out"):
                return
    finally:
        receiver.close()
        if own_group:  # the child and whatever it started and left running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        child.kill()
        child.join()


def _own_process_group(pid: int) -> bool:
    """Make ``pid`` the leader of a process group of its own; whether that worked."""
    try:
        os.setpgid(pid, pid)
    except OSError:  # it ended already, or left for a group of its own choosing
        return False
    return True


def _child(function: Function, kind: Kind, batches: Batches, limit_s: float, sender: Any) -> None:
    """The child process: each call with its own time limit, its fields sent to the checker."""
    _own_process_group(0)
    output = Output()
    output.install()  # for good: nothing the child writes reaches the notebook
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the checker's to handle
    me = os.getpid()  # a copy the function forks ends where it would report: one answer a call

    def time_up(signum: int, frame: Any) -> None:
        if os.getpid() == me:
            where = _where(function, traceback.extract_stack(frame))
            sender.send({"timed_out": True, "where": where})
        os._exit(0)

    signal.signal(signal.SIGALRM, time_up)
    for batch in batches:
        sys.stdout = sys.stderr = output.text  # whatever the last call set them to
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        with warnings.catch_warnings():  # each call's own filters, here in the child
            warnings.simplefilter("ignore")
            fields = _call(function, kind, batch, output)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if os.getpid() != me:
            os._exit(0)
        sender.send(fields)


class Output:
    """What calls write, to Python's streams and to file descriptors 1 and 2, once installed.

    All of it is appended to one temporary file, so ``os.write(1, ...)``, the output of a shell
    that ``os.system`` starts and C code's are kept too (where the descriptors exist).
    """

    def __init__(self) -> None:
        # appended to whoever writes; the child's until it ends
        self.text = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115

    def install(self) -> None:
        """Send ``sys.stdout``, ``sys.stderr`` and descriptors 1 and 2 here, for good (in the
        child)."""
        for fd in (1, 2):
            os.dup2(self.text.fileno(), fd)
        sys.stdout = sys.stderr = self.text

    def mark(self) -> int:
        """Where the output ends now (for :meth:`since`)."""
        self.text.flush()
        return os.fstat(self.text.fileno()).st_size

    def since(self, mark: int) -> str:
        """Everything written since ``mark`` (nothing if the file was cut shorter)."""
        end = self.mark()
        return os.pread(self.text.fileno(), max(end - mark, 0), mark).decode(errors="replace")


def _call(function: Function, kind: Kind, batch: ExerciseBatch, output: Output) -> Fields:
    """One call on fresh copies of the batch's arrays, its output kept, numpy's warnings off."""
    inputs, fields, start = batch.inputs(), {}, output.mark()
    guarded = [(module, dict(vars(module))) for module in GUARDED_MODULES]
    with np.errstate(all="ignore"):  # this thread's own state, put back by itself
        try:
            value = function(*inputs, **batch.keywords)
            fields["not_implemented"] = (value is None or value is ...) and does_nothing(function)
            fields["answer"] = read_answer(kind, value, batch)
        except BaseException as error:  # the learner's code may raise anything
            text = _str(error).strip()
            where = _where(function, traceback.extract_tb(error.__traceback__))
            fields["error"] = (
                f"raised {type(error).__name__}"
                + (f": {text.splitlines()[0][:200]}" if text else "")
                + (f" ({where})" if where else "")
            )
            fields["not_implemented"] = isinstance(error, NotImplementedError)
            # numpy's: an assignment, out=, or setflags(write=True) on a read-only input
            fields["read_only_failure"] = "read-only" in text or "WRITEABLE" in text
    patched = []
    for module, names in guarded:  # put back what the call rebound or deleted, first: the
        for name, value in names.items():  # comparison below must use numpy's own functions
            if vars(module).get(name, _MISSING) is not value:
                vars(module)[name] = value
                patched.append(f"{module.__name__}.{name}")
    for (name, before), after in zip(batch.arrays.items(), inputs, strict=False):
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
            fields["changed"] = fields.get("changed") or (name, before, after)
    written = output.since(start)
    printed = {"printed": written[:OUTPUT_LIMIT], "printed_total": len(written)}
    return {**fields, **printed, "patched": tuple(sorted(patched))}


def does_nothing(function: Function) -> bool:
    """Whether ``function``'s body is empty (``pass``, ``...``, a docstring, ``return ...``): its
    code only returns a constant, unlike a body that forgot its ``return``."""
    code = getattr(function, "__code__", None)  # a callable object has none: no template
    if not isinstance(code, types.CodeType):
        return False
    names = {instruction.opname for instruction in dis.get_instructions(code)}
    return names <= {"RESUME", "NOP", "LOAD_CONST", "RETURN_CONST", "RETURN_VALUE"}


def _where(function: Function, frames: traceback.StackSummary) -> str:
    """``in f, line 4: code``: the last line of ``function``'s file among ``frames``."""
    code = getattr(function, "__code__", None)
    mine = [frame for frame in frames if code is not None and frame.filename == code.co_filename]
    if not mine:
        return ""
    line = (mine[-1].line or "").strip()
    return f"in {mine[-1].name}, line {mine[-1].lineno}" + (f": {line}" if line else "")


#: The numpy float types an answer may have: float32 arithmetic's answers are read, and called
#: close where they are not float64's (GAE's arrays are float64 alone).
FLOATS = (np.float64, np.float32)


def read_answer(kind: Kind, value: Any, batch: Any) -> FloatArray | str:
    """``value`` as a 1-D float64 array (one entry, N for a gradient, the advantages then the
    returns for GAE), or why it is not one."""
    if value is None or value is Ellipsis:
        return "None (is a return statement missing?)"
    n, shape = batch.n, np.shape(batch.arrays.get("rewards"))
    if kind == "gae":
        expected = f"a tuple (advantages, returns) of two float64 arrays of shape {shape}"
        pair = isinstance(value, tuple) and len(value) == 2
        right = pair and all(isinstance(v, np.ndarray) and v.shape == shape for v in value)
        right = right and all(v.dtype == np.float64 for v in value)
        value = np.concatenate([np.ravel(v) for v in value]) if right else value
    elif kind == "grad":
        expected = f"a float64 numpy array of shape ({n},), one entry per sample"
        right = isinstance(value, np.ndarray) and value.shape == (n,) and value.dtype in FLOATS
    else:
        expected = "one float for the whole batch, e.g. float(np.mean(...))"
        right = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
        right &= not isinstance(value, np.floating) or value.dtype in FLOATS
    if not right:
        return f"{_described(value)}; expected {expected}"
    try:
        return np.atleast_1d(np.asarray(value if kind in "grad gae" else float(value), np.float64))
    except OverflowError:
        return "an integer too large for float64 (whose largest value is about 1.8e308)"
    except BaseException as error:  # a learner's object may break any conversion
        return f"a {type(value).__name__} the checker cannot read ({_str(error)[:80]})"


def _described(value: object) -> str:
    """What a returned value is: its type, and an array's shape and dtype (a tuple's items')."""
    if hasattr(value, "dtype"):
        return f"a numpy {type(value).__name__} of shape {np.shape(value)}, dtype {value.dtype}"
    if isinstance(value, tuple) and 0 < len(value) <= 3:
        return f"a tuple of {', '.join(_described(item) for item in value)}"
    return f"a {type(value).__name__}"


def _str(value: object) -> str:
    """``str(value)``, or a note saying it could not be had (its ``__str__`` raised)."""
    try:
        return str(value)
    except BaseException as error:  # a learner's exception class may break its own __str__
        return f"<its message cannot be shown: str() raised {type(error).__name__}>"


_MISSING = object()
