"""The why-clip study as data: which cells run, how one runs, and what is kept of it.

A :class:`Sweep` varies one step size (the bandit's ``step_size``, CartPole's
``learning_rate``) over a grid with everything else fixed, for several methods on the same
seeds.  Each (method, step size) is a :class:`Cell`: the unit that runs in a worker, is
cached, and is summarized (:func:`summarize_sweep`) into what ``why_clip.json`` keeps:

* per cell: the mean score, the 10th and 90th percentiles over seeds, a bootstrap 95%
  interval of the mean, how many seeds succeeded and collapsed, the mean clip fraction and KL,
  and the paired difference from PPO (ε = 0.2) at the same step size;
* per method: its stable range (:func:`experiments.statistics.stable_range`) and its best
  step size, with the paired difference between its best and PPO's best.

Scores are normalized: 0 for a uniform random policy, 1 for the best possible one (the
bandit's best arm; CartPole's 500 steps).  A bandit seed *succeeds* with a score of at least
:data:`BANDIT_SUCCESS` and *collapses* when its final policy sits on a wrong arm; a CartPole
seed succeeds with a final return of at least :data:`CARTPOLE_SOLVED` and collapses below a
random policy's return.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from experiments.cartpole_agent import (
    RANDOM_RETURN,
    SCORE_EPISODES,
    CartPoleSettings,
    run_cartpole,
    score_of,
)
from experiments.statistics import bootstrap_interval, paired_difference, stable_range
from ppo_viz.why_clip.bandit_loop import BanditLoopSettings, run_bandit_loop
from ppo_viz.why_clip.methods import METHODS, spread

#: Success: a bandit score of at least this (0.95 of the way from uniform to the best arm),
#: and CartPole-v1's reward threshold.
BANDIT_SUCCESS = 0.95
CARTPOLE_SOLVED = 475.0
#: The method every other one is compared with, seed by seed.
REFERENCE = "ppo"
#: The stored curves keep every this many iterations (the return's mean and middle half; the
#: clip fraction's and the KL's mean over seeds).
CURVE_STRIDE = 2
#: Seconds of one CPU per seed and iteration at 10 epochs (CartPole, measured here), and per
#: seed and epoch-iteration on the bandit: for the progress bar and for ordering the work.
CARTPOLE_SECONDS = 0.045
BANDIT_SECONDS = 5e-7


@dataclass(frozen=True)
class Cell:
    """One method at one step size of a sweep, on seeds ``first_seed .. first_seed + seeds - 1``."""

    sweep: str
    method: str
    settings: BanditLoopSettings | CartPoleSettings
    first_seed: int
    seeds: int

    @property
    def key(self) -> str:
        """Everything the cell's numbers depend on, as text (the cache's key)."""
        kind = type(self.settings).__name__
        fields = {"method": asdict(METHODS[self.method]), kind: asdict(self.settings)}
        return json.dumps({**fields, "seeds": [self.first_seed, self.seeds]}, sort_keys=True)

    @property
    def cost(self) -> float:
        """Estimated CPU seconds (see :data:`CARTPOLE_SECONDS`)."""
        s, epochs = self.settings, METHODS[self.method].epochs(self.settings.epochs)
        if isinstance(s, CartPoleSettings):
            return CARTPOLE_SECONDS * self.seeds * s.iterations * (0.2 + 0.08 * epochs)
        return BANDIT_SECONDS * self.seeds * s.iterations * s.batch_size * epochs

    def label(self, swept: str) -> str:
        return f"{self.sweep}: {METHODS[self.method].label}, {swept} {self.value:g}"

    @property
    def value(self) -> float:
        s = self.settings
        return s.learning_rate if isinstance(s, CartPoleSettings) else s.step_size


@dataclass(frozen=True)
class Sweep:
    """A step-size sweep: ``base`` settings with ``swept`` set to each of ``values``."""

    name: str
    title: str
    base: BanditLoopSettings | CartPoleSettings
    values: tuple[float, ...]
    methods: tuple[str, ...]
    seeds: int

    @property
    def task(self) -> str:
        return "cartpole" if isinstance(self.base, CartPoleSettings) else "bandit"

    @property
    def swept(self) -> str:
        return "learning_rate" if self.task == "cartpole" else "step_size"

    def cells(self, seed_offset: int) -> list[Cell]:
        """Every (method, value) cell, on seeds ``seed_offset ..``."""
        return [
            Cell(self.name, key, replace(self.base, **{self.swept: v}), seed_offset, self.seeds)
            for key in self.methods
            for v in self.values
        ]


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; per seed its score, whether it succeeded and collapsed, its mean clip
    fraction and KL (and on CartPole the final return and the curves' spread)."""
    method, seeds = (
        METHODS[cell.method],
        tuple(range(cell.first_seed, cell.first_seed + cell.seeds)),
    )
    if isinstance(cell.settings, BanditLoopSettings):
        run = run_bandit_loop(method, cell.settings, seeds)
        return {
            "score": run.score.tolist(),
            "success": (run.score >= BANDIT_SUCCESS).tolist(),
            "collapsed": run.collapsed[:, -1].tolist(),
            "clip_fraction": run.clip_fraction.mean(axis=1).tolist(),
            "approx_kl": run.approx_kl.mean(axis=1).tolist(),
        }
    runs = run_cartpole(method, cell.settings, seeds)
    returns = spread(runs.return_curve[:, CURVE_STRIDE - 1 :: CURVE_STRIDE])
    curves = {
        "return_curve": [_digits(row) for row in (returns.mean, returns.low, returns.high)],
        **{
            name: [_digits(getattr(runs, name)[:, CURVE_STRIDE - 1 :: CURVE_STRIDE].mean(axis=0))]
            for name in ("clip_fraction", "approx_kl")
        },
    }
    return {
        "score": runs.score.tolist(),
        "success": (runs.final_return >= CARTPOLE_SOLVED).tolist(),
        "collapsed": (runs.final_return < RANDOM_RETURN).tolist(),
        "clip_fraction": runs.clip_fraction.mean(axis=1).tolist(),
        "approx_kl": runs.approx_kl.mean(axis=1).tolist(),
        "final_return": runs.final_return.tolist(),
        "curves": curves,
    }


def cell_summary(raw: Mapping[str, Any], reference: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the results keep of one cell (see the module's docstring)."""
    score = np.asarray(raw["score"])
    p10, p90 = np.percentile(score, (10.0, 90.0))
    summary = {
        "mean": float(score.mean()),
        "p10": float(p10),
        "p90": float(p90),
        "ci": list(bootstrap_interval(score)),
        "solved": int(np.sum(raw["success"])),
        "collapsed": int(np.sum(raw["collapsed"])),
        "clip_fraction": float(np.mean(raw["clip_fraction"])),
        "approx_kl": float(np.mean(raw["approx_kl"])),
    }
    if reference is not None:
        summary["vs_ppo"] = paired_difference(score, reference["score"])
    if "final_return" in raw:
        summary["final_return"] = [round(r, 1) for r in raw["final_return"]]
        summary["curves"] = raw["curves"]
    return summary


def summarize_sweep(
    sweep: Sweep, raw: Mapping[str, Mapping[float, Mapping[str, Any]]]
) -> dict[str, Any]:
    """The sweep's entry in the results: its settings, and per method its cells, its stable
    range and its best step size (``raw[method][value]`` from :func:`run_cell`)."""
    reference = raw.get(REFERENCE, {})
    methods: dict[str, Any] = {}
    for key in sweep.methods:
        cells = {
            v: cell_summary(raw[key][v], None if key == REFERENCE else reference.get(v))
            for v in sweep.values
        }
        shares = [cells[v]["solved"] / sweep.seeds for v in sweep.values]
        best = max(sweep.values, key=lambda v: cells[v]["mean"])
        entry = {
            "cells": [{"value": v, **cells[v]} for v in sweep.values],
            "stable": stable_range(sweep.values, shares),
            "best": {"value": best, "mean": cells[best]["mean"], "ci": cells[best]["ci"]},
        }
        if reference and key != REFERENCE:
            ppo_best = max(reference, key=lambda v: np.mean(reference[v]["score"]))
            versus = paired_difference(raw[key][best]["score"], reference[ppo_best]["score"])
            entry["best"]["vs_ppo_best"] = versus
        methods[key] = entry
    scale = {
        "random_return": RANDOM_RETURN,
        "solved_return": CARTPOLE_SOLVED,
        "episodes": SCORE_EPISODES,
    }
    if isinstance(sweep.base, CartPoleSettings):
        steps = sweep.base.batch_size * np.arange(1, sweep.base.iterations + 1)
        scale["curve_steps"] = steps[CURVE_STRIDE - 1 :: CURVE_STRIDE].tolist()
    cartpole = sweep.task == "cartpole"
    return {
        "title": sweep.title,
        "task": sweep.task,
        "settings": asdict(sweep.base),
        "swept": sweep.swept,
        "values": list(sweep.values),
        "seeds": sweep.seeds,
        "success_score": float(score_of(CARTPOLE_SOLVED)) if cartpole else BANDIT_SUCCESS,
        **({"scale": scale} if cartpole else {}),
        "methods": methods,
    }


def _digits(values: np.ndarray) -> list[float | None]:
    """Three significant digits each (a curve for a figure), None for NaN."""
    return [float(f"{v:.3g}") if np.isfinite(v) else None for v in values]
