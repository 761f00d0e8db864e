"""Benchmarks: the module against its baselines, figure redraws, notebooks, import time.

Run ``python -m benchmarks.run`` from the repository root (see :mod:`benchmarks.run`).
"""
