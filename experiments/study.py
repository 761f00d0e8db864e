"""The why-clip study as data: which cells run, how one runs, and what is kept of it.

A :class:`Sweep` varies one step size (the bandit's ``step_size``, CartPole's
``learning_rate``) over a grid with everything else fixed, for several methods on the same
seeds.  Each (method, step size, seed set) is a :class:`Cell`: the unit that runs in a worker,
is cached, and is summarized (:func:`summarize_sweep`) into what ``why_clip.json`` keeps.

Every sweep runs on the two sets of seeds of :mod:`experiments.evidence`: with ``n`` seeds per
set and a seed offset ``k``, discovery uses seeds ``k .. k + n - 1`` and confirmation
``k + n .. k + 2n - 1``.

Kept per cell and set: every seed's score (to six decimals; every statistic is computed from
these), which seeds succeeded, the mean score, the 10th and 90th percentiles over seeds, a
bootstrap 95% interval of the mean, how many seeds succeeded and collapsed, the mean clip
fraction and KL, the paired difference from PPO (ε = 0.2) at the same step size, and the CPU
seconds the cell took.  Per method and set: its stable range
(:func:`experiments.evidence.stable_range`) and its best step size, *chosen on the discovery
set* and scored on each set, so the confirmation set's score at the best is free of the
winner's curse (choosing on the seeds one scores).

Scores are normalized: 0 for a uniform random policy, 1 for the best possible one (the
bandit's best arm; CartPole's 500 steps).  A bandit seed *succeeds* with a score of at least
:data:`BANDIT_SUCCESS` and *collapses* when its final policy sits on a wrong arm; a CartPole
seed succeeds with a final return of at least :data:`CARTPOLE_SOLVED` and collapses below a
random policy's return.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from bandit_loop import BanditLoopSettings, run_bandit_loop
from experiments.cartpole_agent import (
    RANDOM_RETURN,
    SCORE_EPISODES,
    CartPoleSettings,
    run_cartpole,
    score_of,
)
from experiments.evidence import SEED_SETS, bootstrap_interval, paired, stable_range, verdict_of
from experiments.runner import digits
from ppo_viz.why_clip.methods import METHODS, spread

#: Success: a bandit score of at least this (0.95 of the way from uniform to the best arm),
#: and CartPole-v1's reward threshold.
BANDIT_SUCCESS = 0.95
CARTPOLE_SOLVED = 475.0
#: The method every other one is compared with, seed by seed.
REFERENCE = "ppo"
#: Per-seed scores are kept to this many decimals; every statistic is computed from them.
SCORE_DECIMALS = 6
#: The stored curves keep every this many iterations (the return's mean and middle half; the
#: clip fraction's and the KL's mean over seeds).
CURVE_STRIDE = 2
#: CPU seconds per seed and iteration on CartPole: a rollout, plus this per epoch (measured
#: here with one BLAS thread: 0.49, 1.45 and 3.23 s per seed of 50,000 steps at K = 1, 4, 10);
#: per seed and epoch-iteration on the bandit.  For the progress bar and the work's order.
CARTPOLE_ROLLOUT_SECONDS = 0.0017
CARTPOLE_EPOCH_SECONDS = 0.0032
BANDIT_SECONDS = 1.0e-7


@dataclass(frozen=True)
class Cell:
    """One method at one step size of a sweep, on seeds ``first_seed .. first_seed + seeds - 1``
    (of the seed set ``seed_set``)."""

    sweep: str
    method: str
    settings: BanditLoopSettings | CartPoleSettings
    first_seed: int
    seeds: int
    seed_set: str = SEED_SETS[0]

    @property
    def key(self) -> str:
        """Everything the cell's numbers depend on, as text (the cache's key).

        Two cells that compute the same thing have the same key: plain policy gradient at any
        K is the unclipped surrogate at K = 1, so the study runs it once.
        """
        method = METHODS[self.method]
        kind = type(self.settings).__name__
        settings = replace(self.settings, epochs=method.epochs(self.settings.epochs))
        computation = asdict(replace(method, one_step=False))
        for name in ("key", "label"):
            computation.pop(name)
        fields = {"method": computation, kind: asdict(settings)}
        return json.dumps({**fields, "seeds": [self.first_seed, self.seeds]}, sort_keys=True)

    @property
    def cost(self) -> float:
        """Estimated CPU seconds (see :data:`CARTPOLE_EPOCH_SECONDS`)."""
        s, epochs = self.settings, METHODS[self.method].epochs(self.settings.epochs)
        if isinstance(s, CartPoleSettings):
            per_iteration = CARTPOLE_ROLLOUT_SECONDS + CARTPOLE_EPOCH_SECONDS * epochs
            return per_iteration * self.seeds * s.iterations
        return BANDIT_SECONDS * self.seeds * s.iterations * s.batch_size * epochs

    def label(self) -> str:
        swept = "learning rate" if isinstance(self.settings, CartPoleSettings) else "step size"
        method = METHODS[self.method].label
        return f"{self.seed_set}, {self.sweep}: {method}, {swept} {self.value:g}"

    @property
    def value(self) -> float:
        s = self.settings
        return s.learning_rate if isinstance(s, CartPoleSettings) else s.step_size


@dataclass(frozen=True)
class Sweep:
    """A step-size sweep: ``base`` settings with ``swept`` set to each of ``values``, on
    ``seeds`` seeds per seed set."""

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

    def first_seed(self, seed_offset: int, seed_set: str) -> int:
        """The first seed of ``seed_set``: the sets follow each other from ``seed_offset``."""
        return seed_offset + SEED_SETS.index(seed_set) * self.seeds

    def cells(self, seed_offset: int, seed_sets: tuple[str, ...] = SEED_SETS) -> list[Cell]:
        """Every (method, value) cell of each of ``seed_sets``."""
        return [
            Cell(
                self.name,
                key,
                replace(self.base, **{self.swept: v}),
                self.first_seed(seed_offset, seed_set),
                self.seeds,
                seed_set,
            )
            for seed_set in seed_sets
            for key in self.methods
            for v in self.values
        ]


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; per seed its score, whether it succeeded and collapsed, its mean clip
    fraction and KL (and on CartPole the final return and the curves' spread); and the CPU
    seconds it took."""
    started = time.process_time()
    method, seeds = (
        METHODS[cell.method],
        tuple(range(cell.first_seed, cell.first_seed + cell.seeds)),
    )
    extra: dict[str, Any] = {}
    if isinstance(cell.settings, BanditLoopSettings):
        run = run_bandit_loop(method, cell.settings, seeds)
        success, collapsed = run.score >= BANDIT_SUCCESS, run.collapsed[:, -1]
    else:
        run = run_cartpole(method, cell.settings, seeds)
        success, collapsed = run.final_return >= CARTPOLE_SOLVED, run.final_return < RANDOM_RETURN
        returns = spread(run.return_curve[:, CURVE_STRIDE - 1 :: CURVE_STRIDE])
        every = slice(CURVE_STRIDE - 1, None, CURVE_STRIDE)
        curves = {
            "return_curve": [digits(row, 3) for row in (returns.mean, returns.low, returns.high)],
            **{
                name: [digits(getattr(run, name)[:, every].mean(axis=0), 3)]
                for name in ("clip_fraction", "approx_kl")
            },
        }
        extra = {"final_return": [round(float(r), 2) for r in run.final_return], "curves": curves}
    return {
        "score": _rounded(run.score),
        "success": success.tolist(),
        "collapsed": collapsed.tolist(),
        "clip_fraction": run.clip_fraction.mean(axis=1).tolist(),
        "approx_kl": run.approx_kl.mean(axis=1).tolist(),
        **extra,
        "cpu_seconds": round(time.process_time() - started, 2),
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
        "scores": list(raw["score"]),
        "succeeded": "".join("1" if s else "0" for s in raw["success"]),
        "cpu_seconds": raw.get("cpu_seconds", 0.0),
    }
    if reference is not None:
        summary["vs_ppo"] = versus(score, reference["score"])
    if "final_return" in raw:
        summary["final_return"] = list(raw["final_return"])
        summary["curves"] = raw["curves"]
    return summary


def versus(scores: Any, reference: Any) -> dict[str, Any]:
    """``scores - reference`` seed by seed as the results keep it: the mean difference, its
    bootstrap interval and its verdict (:mod:`experiments.evidence`)."""
    found = paired(scores, reference)
    return {"diff": found["diff"], "ci": found["ci"], "verdict": verdict_of(found["ci"])}


def method_summary(
    sweep: Sweep,
    raw: Mapping[str, Mapping[float, Mapping[str, Any]]],
    best_values: Mapping[str, float],
) -> dict[str, Any]:
    """One seed set of a sweep, per method: its cells, stable range and the score at its best
    step size ``best_values[method]`` (with the paired difference from PPO at PPO's best)."""
    reference = raw.get(REFERENCE, {})
    methods: dict[str, Any] = {}
    for key in sweep.methods:
        cells = {
            v: cell_summary(raw[key][v], None if key == REFERENCE else reference.get(v))
            for v in sweep.values
        }
        shares = [cells[v]["solved"] / sweep.seeds for v in sweep.values]
        best = best_values[key]
        entry = {
            "cells": [{"value": v, **cells[v]} for v in sweep.values],
            "stable": stable_range(sweep.values, shares),
            "best": {"value": best, "mean": cells[best]["mean"], "ci": cells[best]["ci"]},
        }
        if reference and key != REFERENCE:
            ppo_best = reference[best_values[REFERENCE]]["score"]
            entry["best"]["vs_ppo_best"] = versus(raw[key][best]["score"], ppo_best)
        methods[key] = entry
    return methods


def best_step(cells: Mapping[float, Mapping[str, Any]]) -> float:
    """The step size with the highest mean score (the first of equals)."""
    return max(cells, key=lambda v: np.mean(cells[v]["score"]))


def summarize_sweep(
    sweep: Sweep,
    raw: Mapping[str, Mapping[str, Mapping[float, Mapping[str, Any]]]],
    seed_offset: int,
) -> dict[str, Any]:
    """The sweep's entry in the results: its settings, and per seed set and method its cells,
    stable range and best step size (``raw[seed_set][method][value]`` from
    :func:`run_cell`; the best step sizes are the discovery set's, when it ran)."""
    chooser = raw.get(SEED_SETS[0]) or next(iter(raw.values()))
    best_values = {key: best_step(chooser[key]) for key in sweep.methods}
    sets = {
        name: {
            "first_seed": sweep.first_seed(seed_offset, name),
            "methods": method_summary(sweep, raw[name], best_values),
        }
        for name in SEED_SETS
        if name in raw
    }
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
        "methods": list(sweep.methods),
        "seeds": sweep.seeds,
        "success_score": float(score_of(CARTPOLE_SOLVED)) if cartpole else BANDIT_SUCCESS,
        **({"scale": scale} if cartpole else {}),
        "sets": sets,
    }


def _rounded(scores: np.ndarray) -> list[float]:
    return [round(float(s), SCORE_DECIMALS) for s in scores]
