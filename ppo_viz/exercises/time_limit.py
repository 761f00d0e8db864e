"""Running one call of a learner's function with a time limit, its printed output captured.

:func:`run_limited` calls ``function(*arguments)`` and returns an
:class:`Outcome`: the value, or the exception it raised (any exception,
``SystemExit`` and ``KeyboardInterrupt`` included), or that it did not return
within ``limit_s`` seconds.  It never raises itself.

**How the limit works.**  In a Jupyter kernel the learner's code runs in the
main thread, so a timer signal can interrupt it: ``signal.setitimer`` with
``ITIMER_REAL`` sends ``SIGALRM`` after ``limit_s`` seconds (then every
:data:`REPEAT_S` seconds), and the handler raises :class:`OutOfTime`, a
private ``BaseException`` subclass, so an ``except Exception`` in the
learner's code does not swallow it.  Python runs signal handlers between
bytecodes and interrupts ``time.sleep``, so a ``while True`` loop or a long
sleep stops within moments.  A single long call into compiled code (one huge
numpy operation) is only interrupted when it returns to Python.  The handler
only raises while the learner's function is running (ticks that land in this
module's own code are ignored), and the previous ``SIGALRM`` handler and
timer are put back afterwards, always.

**Fallback.**  Where timer signals are not available (outside the main
thread, or on Windows), the call runs in a daemon thread and the checker
waits at most ``limit_s`` seconds for it.  A thread cannot be stopped from
outside, so a function that never returns keeps running in the background:
it keeps a CPU core busy (and slows the kernel, which shares Python's global
lock with it) until the kernel is restarted, and what it prints after the
wait is no longer captured.  :attr:`Outcome.stopped` says
which of the two happened, and the checker's message says so.

**Printed output.**  While the function runs, ``sys.stdout`` and
``sys.stderr`` point to a :class:`BoundedText` that keeps the first
:data:`OUTPUT_LIMIT` characters and counts the rest, so a function that
prints in a loop cannot pour thousands of lines into the notebook.
"""

from __future__ import annotations

import io
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

#: Seconds one call of the learner's function may take.
TIME_LIMIT_S = 3.0
#: After the first tick, the timer fires again this often until the call has stopped.
REPEAT_S = 0.2
#: How many characters of a call's printed output are kept.
OUTPUT_LIMIT = 300


class OutOfTime(BaseException):
    """Raised inside the learner's function when its time is up (never seen outside)."""


class BoundedText(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters written and counts all of them."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        self.kept = ""
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if len(self.kept) < self.limit:
            self.kept += text[: self.limit - len(self.kept)]
        self.total += len(text)
        return len(text)

    @property
    def dropped(self) -> int:
        """How many characters were written beyond the ones kept."""
        return self.total - len(self.kept)


@dataclass(frozen=True)
class Outcome:
    """What one limited call did.

    Exactly one of these holds: it returned (``value``), it raised
    (``error``), or it ran out of time (``timed_out``; ``stopped`` says whether
    it was interrupted, False when it is still running in a background
    thread; ``error`` is then the interruption, whose traceback shows the
    line it was running).  ``printed`` is what it wrote to ``sys.stdout``/``sys.stderr``.
    """

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    stopped: bool = True
    printed: BoundedText | None = None


def signals_available() -> bool:
    """Whether a timer signal can interrupt code in this thread (main thread, not Windows)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def run_limited(
    function: Callable[..., Any], arguments: tuple[Any, ...], limit_s: float = TIME_LIMIT_S
) -> Outcome:
    """``function(*arguments)``, stopped after ``limit_s`` seconds, its output captured."""
    printed = BoundedText()
    with _output_to(printed):
        if signals_available():
            outcome = _run_with_timer(function, arguments, limit_s)
        else:
            outcome = _run_in_thread(function, arguments, limit_s)
    return Outcome(outcome.value, outcome.error, outcome.timed_out, outcome.stopped, printed)


@contextmanager
def _output_to(stream: BoundedText) -> Iterator[None]:
    """Point ``sys.stdout`` and ``sys.stderr`` to ``stream``, and back afterwards."""
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = stream
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


# --------------------------------------------------------------------------
# In the main thread: a timer signal
# --------------------------------------------------------------------------


class _Alarm:
    """The ``SIGALRM`` handler: raises :class:`OutOfTime` while the learner's code runs.

    ``rang`` records that it raised at least once, even if the learner's code
    caught the exception and went on to return.
    """

    def __init__(self) -> None:
        self.running_learner_code = False
        self.rang = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        in_checker = frame is not None and frame.f_globals.get("__name__") == __name__
        if self.running_learner_code and not in_checker:
            self.rang = True
            raise OutOfTime


def _run_with_timer(
    function: Callable[..., Any], arguments: tuple[Any, ...], limit_s: float
) -> Outcome:
    alarm = _Alarm()
    started = time.monotonic()
    previous_handler = signal.signal(signal.SIGALRM, alarm)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, limit_s, REPEAT_S)
    try:
        return _call(function, arguments, alarm)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:  # someone else's timer was running (a test's timeout): resume it
            remaining = max(previous_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_interval)


def _call(function: Callable[..., Any], arguments: tuple[Any, ...], alarm: _Alarm) -> Outcome:
    """The call itself, with ``alarm`` armed only while it runs."""
    try:
        alarm.running_learner_code = True
        try:
            value = function(*arguments)
        finally:
            alarm.running_learner_code = False
    except OutOfTime as interruption:
        return Outcome(error=interruption, timed_out=True)
    except BaseException as error:  # the learner's code may raise anything, even SystemExit
        if alarm.rang:  # it caught OutOfTime and raised something else
            return Outcome(error=error, timed_out=True)
        return Outcome(error=error)
    if alarm.rang:  # it caught OutOfTime and returned late
        return Outcome(timed_out=True)
    return Outcome(value=value)


# --------------------------------------------------------------------------
# Elsewhere: a daemon thread and a bounded wait
# --------------------------------------------------------------------------


def _run_in_thread(
    function: Callable[..., Any], arguments: tuple[Any, ...], limit_s: float
) -> Outcome:
    result: list[Outcome] = []

    def target() -> None:
        try:
            result.append(Outcome(value=function(*arguments)))
        except BaseException as error:  # reported, never raised in the checker's thread
            result.append(Outcome(error=error))

    worker = threading.Thread(target=target, name="learner function", daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive() or not result:
        return Outcome(timed_out=True, stopped=False)
    return result[0]
