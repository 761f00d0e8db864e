"""The methods notebook 4 compares, how each is drawn, and statistics over seeds.

A :class:`bandit.Method` is data: an objective of :mod:`ppo_clip`, a clip size, plain PG's one
epoch (on CartPole: 4 minibatch steps of r·A), an early stop at a target KL, the PPO paper's KL
penalty (fixed, or adapted to a target).  :data:`METHODS` holds every method of the study: the
PPO paper's Table 1 rows (no clipping, three clip sizes, adaptive and fixed KL penalties with
the paper's settings) and three more (clip-only, plain PG, early stopping).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from bandit import FloatArray, Method
from bandit_loop import BanditLoopHistory, BanditLoopSettings, run_side_by_side
from ppo_viz.style import LINES, NAMES, PALETTE

#: The KL early stopping's threshold: Stable-Baselines3 stops once k3 on a minibatch exceeds
#: 1.5 times ``target_kl``; this is that rule at ``target_kl = 0.01`` (see ``cartpole_agent``).
EARLY_STOP_KL = 0.015
#: The PPO paper's settings of the penalty (Table 1): targets ``d_targ`` and fixed ``beta``.
KL_TARGETS = (0.003, 0.01, 0.03)
KL_COEFS = (0.3, 1.0, 3.0, 10.0)
#: The adaptive penalty's first ``beta`` ("not important in practice", the paper says).
FIRST_KL_COEF = 1.0

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
        *(
            Method(
                f"kl_adaptive_{d:g}",
                f"adaptive KL, d = {d:g}",
                "unclipped",
                kl_coef=FIRST_KL_COEF,
                kl_target=d,
            )
            for d in KL_TARGETS
        ),
        *(
            Method(f"kl_fixed_{b:g}", f"fixed KL, β = {b:g}", "unclipped", kl_coef=b)
            for b in KL_COEFS
        ),
        Method(
            "early_stop", f"r·A, stop at KL {EARLY_STOP_KL:g}", "unclipped", target_kl=EARLY_STOP_KL
        ),
    )
}
#: The six methods of the headline figure and of the apps, in the order of legends.
MAIN_METHODS = ("ppo", "unclipped", "clip_only", "plain_pg", "kl_adaptive_0.01", "early_stop")


@functools.lru_cache(maxsize=8)
def run_bandit_methods(
    settings: BanditLoopSettings, seeds: tuple[int, ...], methods: tuple[str, ...] = MAIN_METHODS
) -> dict[str, BanditLoopHistory]:
    """Methods (default: the six main ones) on the same seeds, side by side
    (:func:`bandit_loop.run_side_by_side`, cached per settings and seeds)."""
    runs = run_side_by_side([METHODS[key] for key in methods], settings, seeds)
    return dict(zip(methods, runs, strict=True))


#: Line styles within a family of methods (clip sizes, adaptive KL, fixed KL), in order.
DOTTED, DASHED, DASH_DOT = (0, (1, 1.5)), (0, (4, 1.5)), (0, (5, 2, 1, 2))
#: How each method's curves are drawn: the three objectives at ε = 0.2 as everywhere in the
#: bundle (``style.LINES``: PPO thick, the unclipped dashed, clip-only dotted); the other clip
#: sizes thin and blue like PPO; the adaptive penalties green, the fixed ones purple (the
#: paper's middle setting solid); plain PG black, early stopping sky blue.
METHOD_LINES: dict[str, dict[str, Any]] = {
    "ppo": LINES["clipped"],
    "unclipped": LINES["unclipped"],
    "clip_only": LINES["clip_only"],
    "plain_pg": {"color": PALETTE["black"], "lw": 1.4, "ls": DASH_DOT},
    "early_stop": {"color": PALETTE["sky_blue"], "lw": 2.0, "ls": (0, (6, 1.5, 1.5, 1.5))},
    **{
        key: {"color": PALETTE[color], "lw": 2.0 if ls == "-" else 1.3, "ls": ls}
        for color, keys, styles in (
            ("blue", ("ppo_eps_0.1", "ppo_eps_0.3"), (DOTTED, DASHED)),
            ("green", [f"kl_adaptive_{d:g}" for d in KL_TARGETS], (DOTTED, "-", DASHED)),
            ("purple", [f"kl_fixed_{b:g}" for b in KL_COEFS], (DOTTED, "-", DASHED, DASH_DOT)),
        )
        for key, ls in zip(keys, styles, strict=True)
    },
}


class Spread(NamedTuple):
    """The mean over runs (axis 0) and the middle half of them (25th to 75th percentile)."""

    mean: FloatArray
    low: FloatArray
    high: FloatArray


def spread(values: FloatArray) -> Spread:
    """:class:`Spread` of ``values`` with runs along axis 0 (NaN entries are left out)."""
    percentile = np.nanpercentile if np.isnan(values).any() else np.percentile  # the same, faster
    low, high = percentile(values, (25.0, 75.0), axis=0)
    return Spread(np.nanmean(values, axis=0), low, high)
