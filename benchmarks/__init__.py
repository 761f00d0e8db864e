"""Benchmarks: the modules against the textbook form, the notebooks, the feel in a browser.

Run ``python -m benchmarks.run`` from the repository root (see :mod:`benchmarks.run`).
"""
