"""Shared test setup: one BLAS thread, the simulated other CPU (see :mod:`other_cpu`), and no
event loop left running by the browser tests."""

from __future__ import annotations

import asyncio
import os

# The networks' matrices are small: on a busy 2-core machine OpenBLAS's threads only make
# CartPole training 6-10 times slower. Set before numpy loads (kernels inherit it too).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import other_cpu
import pytest


def pytest_configure(config):
    variant = other_cpu.simulated_variant()
    if variant is not None:
        other_cpu.install(variant)


def pytest_report_header(config):
    variant = other_cpu.simulated_variant()
    if variant is not None:
        return f"simulated CPU: numpy's {', '.join(other_cpu.NUDGED)} nudged ({variant})"
    return None


@pytest.fixture(autouse=True)
def no_event_loop_left_running(request):
    """Playwright's sync API, started once per process by the browser tests (a second start is
    refused), leaves asyncio's running loop set in this thread. Code that draws at once in a
    script and defers to the loop in a kernel (``ppo_viz.app.LiveFigure``) would then wait for
    a turn that never comes: any other test runs with no loop running, as in a script."""
    loop = asyncio._get_running_loop()
    if loop is None or request.node.get_closest_marker("browser"):
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(loop)
