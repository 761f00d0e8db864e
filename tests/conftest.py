"""Shared test setup: one BLAS thread, and the simulated other CPU (see :mod:`other_cpu`)."""

from __future__ import annotations

import os

# The networks' matrices are small: on a busy 2-core machine OpenBLAS's threads only make
# CartPole training 6-10 times slower. Set before numpy loads (kernels inherit it too).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import other_cpu


def pytest_configure(config):
    variant = other_cpu.simulated_variant()
    if variant is not None:
        other_cpu.install(variant)


def pytest_report_header(config):
    variant = other_cpu.simulated_variant()
    if variant is not None:
        return f"simulated CPU: numpy's {', '.join(other_cpu.NUDGED)} nudged ({variant})"
    return None
