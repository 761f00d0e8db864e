"""Which machine computed a number: CPU, numpy's SIMD level, numpy's version.

numpy picks a vectorised ``exp``, ``log`` or ``tanh`` for the CPU it runs on (SSE, AVX2,
AVX-512 code paths), and those can differ in the last bit.  Results that depend on every bit
(a chaotic training run) reproduce exactly only on a machine with the same fingerprint, so the
benchmarks and the experiments record it, and notebook 5 shows the reader's own.
"""

from __future__ import annotations

import platform
from functools import cache
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@cache
def simd_found() -> tuple[str, ...]:
    """The SIMD extensions numpy found and dispatches to here (``numpy.show_runtime()``'s
    "found"), read from ``numpy.show_config(mode="dicts")``.

    For example ``("X86_V3", "X86_V4", "AVX512_ICL")`` on an AVX-512 machine and
    ``("X86_V3",)`` on one with AVX2 only.
    """
    return tuple(np.show_config(mode="dicts")["SIMD Extensions"]["found"])


def fingerprint() -> dict[str, str]:
    """What decides numpy's last bits here: the CPU, its SIMD level, the architecture, numpy."""
    return {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "simd": " ".join(simd_found()) or "none",
        "numpy": np.__version__,
    }
