"""timeit-style timing of several callables, interleaved so load changes hit them all alike."""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: Untimed calls of each candidate before calibrating and timing it.
WARMUP_CALLS = 5


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one entry per repeat; each repeat ran ``number`` calls."""

    per_call: tuple[float, ...]
    number: int

    @property
    def best(self) -> float:
        """The minimum over repeats: the least disturbed measurement."""
        return min(self.per_call)

    @property
    def median(self) -> float:
        return statistics.median(self.per_call)

    @property
    def repeats(self) -> int:
        return len(self.per_call)


def calls_per_repeat(func: Callable[[], object], target_seconds: float) -> int:
    """How many calls make one repeat last at least ``target_seconds`` (1, 2, 5, 10, ...)."""
    timer = timeit.Timer(func)
    scale = 1
    while True:
        for multiple in (1, 2, 5):
            number = scale * multiple
            if timer.timeit(number) >= target_seconds:
                return number
        scale *= 10


def time_interleaved(
    funcs: Mapping[str, Callable[[], object]],
    *,
    repeats: int,
    target_seconds: float,
    setup: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, Timing]:
    """Time each callable ``repeats`` times, round-robin, with the garbage collector off.

    Each repeat runs a callable enough times to last about ``target_seconds``
    (so short calls are not swamped by the clock's resolution).  Interleaving
    means a burst of load from another process slows every candidate of a
    round, not just one, so ratios between candidates stay meaningful.
    ``setup[name]``, if given, runs untimed before that candidate's warm-up,
    calibration and every repeat (e.g. to set a thread count).
    """
    setup = setup or {}

    def prepare(name: str) -> None:
        if name in setup:
            setup[name]()

    numbers = {}
    for name, func in funcs.items():
        prepare(name)
        for _ in range(WARMUP_CALLS):
            func()  # first calls pay one-off costs (thread pools, caches, lazy imports)
        numbers[name] = calls_per_repeat(func, target_seconds)
    timers = {name: timeit.Timer(func) for name, func in funcs.items()}
    samples: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, timer in timers.items():
            prepare(name)
            samples[name].append(timer.timeit(numbers[name]) / numbers[name])
    return {name: Timing(tuple(samples[name]), numbers[name]) for name in funcs}
