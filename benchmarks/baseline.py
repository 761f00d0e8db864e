"""ppo_clip against an earlier revision of itself: is the module at least as fast as before?

``python -m benchmarks.run --baseline-rev 3686b3b`` reads ``ppo_clip.py`` as it
was at that git revision (a commit, checked before the run: :mod:`benchmarks.revisions`),
loads it as a temporary module, and times its contract functions and ``clip_breakdown``
interleaved with the current module's, on the same seeded arrays
(:func:`benchmarks.module_bench.make_batch`).  Each row reports current time /
baseline time; the target is a ratio of at most 1.  (A revision whose
``ppo_clip.py`` imports ``ppo_clip_inputs`` gets today's input checks.)
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ppo_clip
from benchmarks import revisions
from benchmarks.module_bench import EPS, agreement, make_batch
from benchmarks.tables import Table, microseconds, ratio
from benchmarks.timing import Timing, time_interleaved

#: The functions compared, each called as ``function(logp_new, logp_old, advantages, eps)``.
FUNCTIONS = ("ppo_clip_loss", "clip_fraction", "ppo_clip_grad", "clip_breakdown")
#: Ratios this close to 1 are within what repeated runs on a quiet machine differ by.
NOISE = 0.03


@dataclass(frozen=True)
class Baseline:
    """``ppo_clip`` as it was at a git revision, loaded as a module of its own."""

    revision: str
    module: types.ModuleType

    @classmethod
    def at(cls, revision: str, repo: Path) -> Baseline:
        """Load ``ppo_clip.py`` of ``revision`` (a commit); else ``ValueError``, in one line."""
        commit = revisions.resolve(revision, repo)
        source = revisions.file_at(commit, "ppo_clip.py", repo)
        return cls(revision, module_from_source(source, f"ppo_clip_at_{commit[:12]}"))


@dataclass
class BaselineResult:
    """One N: each function's timing now and at the baseline, and whether the results agree."""

    n: int
    revision: str
    now: dict[str, Timing]
    before: dict[str, Timing]
    agreement: str

    def ratio(self, function: str) -> float:
        """Current minimum time over the baseline's (below 1: faster now)."""
        return self.now[function].best / self.before[function].best


def module_from_source(source: str, name: str) -> types.ModuleType:
    """Execute ``source`` as a new module called ``name`` (never importable by that name)."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def measure(
    baseline: Baseline, sizes: tuple[int, ...], *, repeats: int, target_seconds: float
) -> list[BaselineResult]:
    """Time each function of ``ppo_clip`` and of the baseline, interleaved, at each N."""
    results = []
    for n in sizes:
        batch = make_batch(n)
        candidates: dict[str, Callable[[], object]] = {}
        for function in FUNCTIONS:
            for label, module in (("now", ppo_clip), ("before", baseline.module)):
                candidates[f"{label} {function}"] = _call(module, function, batch)
        timings = time_interleaved(candidates, repeats=repeats, target_seconds=target_seconds)
        results.append(
            BaselineResult(
                n,
                baseline.revision,
                now={f: timings[f"now {f}"] for f in FUNCTIONS},
                before={f: timings[f"before {f}"] for f in FUNCTIONS},
                agreement=agreement(_contract(ppo_clip, batch), _contract(baseline.module, batch)),
            )
        )
    return results


def _call(module: types.ModuleType, function: str, batch: tuple) -> Callable[[], object]:
    implementation = getattr(module, function)
    return lambda: implementation(*batch, EPS)


def _contract(module: types.ModuleType, batch: tuple) -> tuple:
    return tuple(getattr(module, f)(*batch, EPS) for f in FUNCTIONS[:3])


def table(results: list[BaselineResult]) -> Table:
    revision = results[0].revision
    out = Table(
        f"ppo_clip now against ppo_clip at {revision} (µs per call, min of repeats)",
        ["N", "function", "now µs", f"at {revision} µs", "now / before", "same results"],
    )
    for result in results:
        for function in FUNCTIONS:
            out.add(
                result.n,
                function,
                microseconds(result.now[function].best),
                microseconds(result.before[function].best),
                ratio(result.ratio(function)),
                result.agreement,
            )
    out.notes.append(
        f"Both modules run on the same seeded arrays, interleaved round-robin. A ratio below "
        f"1x means the current module is faster. Differences within about {NOISE:.0%} are "
        "noise: repeated runs on a quiet machine differ by that much."
    )
    return out


def target_rows(results: list[BaselineResult]) -> list[tuple[str, str, bool]]:
    """One ``(target, measured, met)`` per function and N: at least as fast as the baseline."""
    rows = []
    for result in results:
        revision = result.revision
        for function in FUNCTIONS:
            value = result.ratio(function)
            noise = " (within noise)" if 1.0 < value <= 1.0 + NOISE else ""
            rows.append(
                (
                    f"N = {result.n}: {function} at least as fast as at {revision} (ratio <= 1)",
                    f"{ratio(value)}{noise} ({microseconds(result.now[function].best)} vs "
                    f"{microseconds(result.before[function].best)} µs)",
                    value <= 1.0,
                )
            )
    return rows
