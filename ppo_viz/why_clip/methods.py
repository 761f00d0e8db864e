"""The methods notebook 4 compares, how each is drawn, and statistics over seeds.

A :class:`~ppo_viz.bandit.Method` is data: an objective of :mod:`ppo_clip`, a clip size,
plain policy gradient's single step, an optional early stop.  A new method (a KL penalty, a
target KL) is one more entry of :data:`METHODS` and of :data:`METHOD_LINES`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from ppo_viz.bandit import FloatArray, Method
from ppo_viz.style import LINES, NAMES, PALETTE

#: Every method, by key.
METHODS = {
    method.key: method
    for method in (
        Method("ppo", "PPO, ε = 0.2", "clipped", 0.2),
        Method("ppo_eps_0.1", "PPO, ε = 0.1", "clipped", 0.1),
        Method("ppo_eps_0.3", "PPO, ε = 0.3", "clipped", 0.3),
        Method("unclipped", f"{NAMES['unclipped']} (r·A)", "unclipped"),
        Method("clip_only", f"{NAMES['clip_only']}, ε = 0.2", "clip_only"),
        Method("plain_pg", "plain PG (K = 1)", "unclipped", one_step=True),
    )
}
#: How each method's curves are drawn: the three objectives at ε = 0.2 as everywhere in the
#: bundle (``style.LINES``: the unclipped dashed, clip-only dotted); the other clip sizes
#: thin and solid like PPO, plain PG dash-dotted.
METHOD_LINES: dict[str, dict[str, Any]] = {
    "ppo": LINES["clipped"],
    "ppo_eps_0.1": {"color": PALETTE["sky_blue"], "lw": 1.4, "ls": "-"},
    "ppo_eps_0.3": {"color": PALETTE["purple"], "lw": 1.4, "ls": "-"},
    "unclipped": LINES["unclipped"],
    "clip_only": LINES["clip_only"],
    "plain_pg": {"color": PALETTE["black"], "lw": 1.4, "ls": (0, (5, 2, 1, 2))},
}


@dataclass(frozen=True)
class Spread:
    """The mean over runs (axis 0) and the middle half of them (25th to 75th percentile)."""

    mean: FloatArray
    low: FloatArray
    high: FloatArray


def spread(values: FloatArray) -> Spread:
    """:class:`Spread` of ``values`` with runs along axis 0 (NaN entries are left out)."""
    low, high = np.nanpercentile(values, (25.0, 75.0), axis=0)
    return Spread(np.nanmean(values, axis=0), low, high)


Runs = TypeVar("Runs")


def joined_runs(first: Runs, second: Runs, arrays: tuple[str, ...]) -> Runs:
    """``first`` with ``second``'s seeds added: the same method and settings, more rows.

    Both are dataclasses with ``method``, ``settings`` and ``seeds``; the fields named in
    ``arrays`` (one row per seed) are stacked.
    """
    a: Any = first
    b: Any = second
    if (a.method, a.settings) != (b.method, b.settings):
        raise ValueError("only runs of the same method and settings can be joined")
    stacked = {name: np.concatenate([getattr(a, name), getattr(b, name)]) for name in arrays}
    return replace(a, seeds=a.seeds + b.seeds, **stacked)
