"""Shared test setup: the simulated other CPU (see :mod:`other_cpu`)."""

from __future__ import annotations

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
