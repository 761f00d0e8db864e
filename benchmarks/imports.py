"""Import time of ppo_clip in a fresh interpreter."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.tables import Table, milliseconds


@dataclass
class ImportResult:
    bare: list[float]
    with_module: list[float]
    #: ``{name: (self µs, cumulative µs)}`` from ``-X importtime``.
    breakdown: dict[str, tuple[int, int]]

    @property
    def delta(self) -> float:
        """Median wall time of ``import ppo_clip`` beyond a bare interpreter start."""
        return statistics.median(self.with_module) - statistics.median(self.bare)

    @property
    def best_delta(self) -> float:
        """The same from the fastest run of each: the least disturbed by other processes."""
        return min(self.with_module) - min(self.bare)


def _wall(code: str, cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True)
    return time.perf_counter() - started


def _importtime(cwd: Path) -> dict[str, tuple[int, int]]:
    """``{name: (self µs, cumulative µs)}`` for ppo_clip and the modules it imports directly.

    Parsed from ``python -X importtime``, which indents names two spaces per
    level of nesting and prints a module's imports just before the module.
    """
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import ppo_clip"],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    found: dict[str, tuple[int, int]] = {}
    pending: dict[str, tuple[int, int]] = {}  # children are printed before their parent
    for line in completed.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        own, cumulative, raw_name = parts
        if not own.strip().isdigit():
            continue  # the header line
        depth = (len(raw_name) - len(raw_name.lstrip(" ")) - 1) // 2
        if depth == 1:
            pending[raw_name.strip()] = (int(own), int(cumulative))
        elif depth == 0:
            if raw_name.strip() == "ppo_clip":
                found = {**pending, "ppo_clip": (int(own), int(cumulative))}
            pending = {}
    return found


def measure(cwd: Path, runs: int) -> ImportResult:
    bare, with_module = [], []
    for _ in range(runs):  # interleaved, so load affects both alike
        bare.append(_wall("pass", cwd))
        with_module.append(_wall("import ppo_clip", cwd))
    return ImportResult(bare, with_module, _importtime(cwd))


def table(result: ImportResult) -> Table:
    out = Table(
        "Import time of ppo_clip (fresh interpreter)",
        ["measure", "ms"],
    )
    out.add("python -c 'pass' (median)", milliseconds(statistics.median(result.bare)))
    out.add(
        "python -c 'import ppo_clip' (median)", milliseconds(statistics.median(result.with_module))
    )
    out.add("difference: import ppo_clip (medians)", milliseconds(result.delta))
    out.add("difference: import ppo_clip (fastest runs)", milliseconds(result.best_delta))
    total = result.breakdown.get("ppo_clip")
    if total is not None:
        out.add("-X importtime: ppo_clip, everything it imports included", f"{total[1] / 1e3:.1f}")
        children = sorted(
            (
                (name, cumulative)
                for name, (_, cumulative) in result.breakdown.items()
                if name != "ppo_clip"
            ),
            key=lambda item: -item[1],
        )
        for name, cumulative in children[:3]:
            out.add(f"-X importtime: of which {name}", f"{cumulative / 1e3:.1f}")
        out.add("-X importtime: of which ppo_clip's own module body", f"{total[0] / 1e3:.1f}")
    out.notes.append(
        f"{len(result.bare)} runs of each command, interleaved; -X importtime from one more "
        "run. Most of the cost is numpy's own import, which any numpy user pays once."
    )
    return out
