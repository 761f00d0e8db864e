"""The study's claims as data: each chosen on the discovery seeds, checked on the confirmation
seeds, and given its chance to flip on another fresh set.

A claim compares *arms*, a method at a step size of a sweep (:class:`Arm`; without a step size,
the one where the method scored best on the discovery set, so that the confirmation set scores
it free of the winner's curse).  Three kinds:

* :class:`Difference`: ``a`` minus ``b``, seed by seed (both ran on the same seeds): the mean
  with its bootstrap 95% interval; the verdict is ``higher``, ``lower`` or ``not
  distinguishable`` (the interval holds 0: not distinguishable with these seeds, which is not
  "equal");
* :class:`UpperEnd`: the top of ``a``'s stable range (the largest step size at which at least
  90% of its seeds succeed) above ``b``'s.  Ranges are compared by their
  upper ends: their lower ends are the grid's edge on the bandit, and on CartPole the budget of
  50,000 steps (a small learning rate is too slow there, not unstable).  No stable step size at
  all counts as below every one.  The interval of an upper end is the 2.5th to 97.5th
  percentile of its value over bootstrap resamples of the seeds;
* :class:`Stable`: whether at least 90% of ``a``'s seeds succeed (its share, with a bootstrap
  95% interval);
* :class:`Interaction`: how a factor changes a difference, ``(a - b) - (c - d)`` seed by seed,
  judged as a difference.

:func:`evaluate_claims` evaluates every claim of :data:`CLAIMS` on each seed set, and
estimates how often its verdict would come out otherwise on a fresh set of as many seeds: it
draws that many seeds, with replacement, from both sets pooled (the best estimate of the
population there is), judges each of :data:`FLIP_RESAMPLES` draws as the claim is judged (a
difference by the normal-approximation 95% interval, ``mean +- 1.96 sd / sqrt(n)``, a quick
stand-in for the bootstrap's), and counts the draws whose verdict differs from the claim's.
That plug-in estimate is the claim's *flip chance*; it decides the wording
(:func:`status_of`): a claim is *stated* when it holds on both sets and would flip on at most
:data:`FLIP_PLAIN` of fresh sets (so that a re-run on other fresh seeds keeps every stated
verdict, all of them together with the chance :func:`keeps_every_verdict` gives); one that held
on both sets but would flip more often, up to :data:`FLIP_HEDGED`, is a tendency given with its
flip chance, not a finding; beyond that it is not stated at all.  (The tiers were fixed with the
claims, before the confirmation set ran; the second tier was then reworded from "stated with its
flip chance" to "not robust" because together its claims would flip about once per re-run.)
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments import evidence
from experiments.evidence import (
    SEED_SETS,
    STABLE_SHARE,
    bootstrap_interval,
    paired,
    verdict_of,
)
from ppo_viz.why_clip.results import in_tier

#: Verdicts of the other two kinds.
ABOVE, NOT_ABOVE = "above", "not above"
STABLE, NOT_STABLE = "stable", "not stable"
#: The resamples behind a flip chance and an upper end's interval, and their seed.
FLIP_RESAMPLES = 4000
FLIP_SEED = 2017_0720
#: Flip chances up to which a claim is stated, or given as a tendency with its flip chance.
FLIP_PLAIN = 0.05
FLIP_HEDGED = 0.25
#: A claim's status, from its verdicts on the two sets and its flip chance.
STATED = "stated"
HEDGED = "held on both sets; not robust, given with its flip chance"
FRAGILE = "held on both sets; not stated: would flip too often"
NOT_CONFIRMED = "not stated: the confirmation set disagrees"
NOT_DISCOVERED = "not stated: the discovery set disagrees"
ONE_SET = "one seed set only"


@dataclass(frozen=True)
class Arm:
    """A method at a step size of a sweep; ``value=None``: its best on the discovery set."""

    sweep: str
    method: str
    value: float | None = None


@dataclass(frozen=True)
class Claim:
    """One claim: ``key`` names it, ``says`` states it in words (no numbers: the tables give
    them), ``arms`` are the arms it compares (``a``, ``b``, ...) and ``expect`` is its verdict."""

    key: str
    says: str
    arms: tuple[Arm, ...]
    expect: str
    kind = ""


@dataclass(frozen=True)
class Difference(Claim):
    """``a`` minus ``b``, seed by seed: :data:`HIGHER`, :data:`LOWER` or
    :data:`NOT_DISTINGUISHABLE`."""

    kind = "difference"

    def pair(self, data: Sequence[Any]) -> list[np.ndarray]:
        """The two per-seed scores compared, from the arms' cells: ``a`` and ``b``."""
        return [np.asarray(cell["scores"]) for cell in data]

    def on_set(self, data: Sequence[Any]) -> dict[str, Any]:
        found = paired(*self.pair(data))
        return {"estimate": found["diff"], "ci": found["ci"], "verdict": verdict_of(found["ci"])}

    def fresh_verdicts(self, pooled: Sequence[Any], draws: np.ndarray) -> np.ndarray:
        a, b = self.pair(pooled)
        return evidence.fresh_verdicts((a - b)[draws])


@dataclass(frozen=True)
class Interaction(Difference):
    """How much a factor changes a difference: ``(a - b) - (c - d)``, seed by seed (the four
    arms ran on the same seeds), for example the unclipped surrogate's loss against PPO at
    K = 10 minus at K = 4."""

    kind = "interaction"

    def pair(self, data: Sequence[Any]) -> list[np.ndarray]:
        """``a - b`` and ``c - d`` per seed, the two sides of the difference judged."""
        a, b, c, d = super().pair(data)
        return [a - b, c - d]


@dataclass(frozen=True)
class UpperEnd(Claim):
    """The top of ``a``'s stable range above ``b``'s (the arms' step sizes are ignored):
    :data:`ABOVE` or :data:`NOT_ABOVE`."""

    kind = "upper end"

    def on_set(self, data: Sequence[Any]) -> dict[str, Any]:
        tops = [top_of(sweep_cells) for sweep_cells in data]
        draws = resamples(len(data[0][0]["succeeded"]))
        intervals = [top_interval(sweep_cells, draws) for sweep_cells in data]
        above = (tops[0] or 0.0) > (tops[1] or 0.0)
        return {"estimate": tops, "ci": intervals, "verdict": ABOVE if above else NOT_ABOVE}

    def fresh_verdicts(self, pooled: Sequence[Any], draws: np.ndarray) -> np.ndarray:
        tops = [tops_of(sweep_cells, draws) for sweep_cells in pooled]
        return np.where(tops[0] > tops[1], ABOVE, NOT_ABOVE).astype(object)


@dataclass(frozen=True)
class Stable(Claim):
    """Whether at least 90% of ``a``'s seeds succeed: :data:`STABLE` or :data:`NOT_STABLE`."""

    kind = "stable"

    def on_set(self, data: Sequence[Any]) -> dict[str, Any]:
        succeeded = successes(data[0])
        share = float(succeeded.mean())
        return {
            "estimate": share,
            "ci": list(bootstrap_interval(succeeded.astype(float))),
            "verdict": STABLE if share >= STABLE_SHARE else NOT_STABLE,
        }

    def fresh_verdicts(self, pooled: Sequence[Any], draws: np.ndarray) -> np.ndarray:
        shares = successes(pooled[0])[draws].mean(axis=1)
        return np.where(shares >= STABLE_SHARE, STABLE, NOT_STABLE).astype(object)


def successes(cell: Mapping[str, Any]) -> np.ndarray:
    """Per seed, whether it succeeded (the cell's ``succeeded`` string of 0s and 1s)."""
    return np.frombuffer(cell["succeeded"].encode(), dtype=np.uint8) == ord("1")


def top_of(cells: Sequence[Mapping[str, Any]]) -> float | None:
    """The largest step size at which at least 90% of the seeds succeed (None: none)."""
    return float(tops_of(cells, np.arange(len(cells[0]["succeeded"]))[None])[0]) or None


def tops_of(cells: Sequence[Mapping[str, Any]], draws: np.ndarray) -> np.ndarray:
    """:func:`top_of` on each resample of seeds (one per row of ``draws``), 0 for none."""
    values = np.array([c["value"] for c in cells])
    shares = np.stack([successes(c)[draws].mean(axis=1) for c in cells], axis=1)
    return np.where(shares >= STABLE_SHARE, values, 0.0).max(axis=1)


def top_interval(cells: Sequence[Mapping[str, Any]], draws: np.ndarray) -> list[float | None]:
    """The 2.5th and 97.5th percentiles of the upper end over resamples (None: no range)."""
    low, high = np.percentile(tops_of(cells, draws), (2.5, 97.5), method="nearest")
    return [float(low) or None, float(high) or None]


def resamples(seeds: int, size: int | None = None) -> np.ndarray:
    """:data:`FLIP_RESAMPLES` rows of ``size`` seed indices drawn from ``range(seeds)``."""
    rng = np.random.default_rng(FLIP_SEED)
    return rng.integers(0, seeds, (FLIP_RESAMPLES, size or seeds))


# -- the claims ----------------------------------------------------------------------------

#: The claims' table: per claim its key, kind, expected verdict, arms (``sweep:method``, or
#: ``sweep:method@value`` at a step size) and what it says, starting with where it holds.
CLAIMS_TABLE = Path(__file__).with_name("why_clip_claims.csv")
KINDS = {kind.kind: kind for kind in (Difference, Interaction, UpperEnd, Stable)}


def read_claims(path: Path = CLAIMS_TABLE) -> tuple[Claim, ...]:
    """The claims of a table (:data:`CLAIMS_TABLE`), in its order."""
    with path.open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    claims = []
    for row in rows:
        arms = []
        for text in row["arms"].split():
            sweep, _, rest = text.partition(":")
            method, _, value = rest.partition("@")
            arms.append(Arm(sweep, method, float(value) if value else None))
        claims.append(KINDS[row["kind"]](row["key"], row["says"], tuple(arms), row["expect"]))
    return tuple(claims)


#: Every claim of the study (its text in notebook 4 and RESULTS.md), chosen on the discovery
#: set: written down once the discovery set had run, before the confirmation set had.  Some are
#: the claims of the study's first version (one set of seeds), kept to show which replicate.
CLAIMS = read_claims()


# -- evaluation ----------------------------------------------------------------------------


def arm_data(results: Mapping[str, Any], arm: Arm, seed_set: str, claim: Claim) -> Any:
    """What ``claim`` needs of ``arm`` on one set: a cell, or a method's cells (upper ends)."""
    sweep = results["sweeps"][arm.sweep]
    cells = sweep["sets"][seed_set]["methods"][arm.method]["cells"]
    if isinstance(claim, UpperEnd):
        return cells
    return next(c for c in cells if c["value"] == value_of(results, arm))


def value_of(results: Mapping[str, Any], arm: Arm) -> float:
    """The arm's step size: its own, or its method's best on the discovery set."""
    if arm.value is not None:
        return arm.value
    sets = results["sweeps"][arm.sweep]["sets"]
    chooser = sets.get("discovery") or next(iter(sets.values()))
    return chooser["methods"][arm.method]["best"]["value"]


def pooled_data(data: Sequence[Any]) -> Any:
    """Two sets' data as one: per cell, both sets' seeds."""

    def join(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
        scores = list(a["scores"]) + list(b["scores"])
        return {"value": a["value"], "scores": scores, "succeeded": a["succeeded"] + b["succeeded"]}

    first, second = data
    if isinstance(first, list):
        return [join(a, b) for a, b in zip(first, second, strict=True)]
    return join(first, second)


def available(results: Mapping[str, Any], claim: Claim) -> bool:
    """Whether the results hold every arm the claim compares, on some seed set."""
    for arm in claim.arms:
        sweep = results["sweeps"].get(arm.sweep)
        if sweep is None or arm.method not in sweep["methods"]:
            return False
        if arm.value is not None and arm.value not in sweep["values"]:
            return False
    return True


def evaluate(results: Mapping[str, Any], claim: Claim) -> dict[str, Any]:
    """One claim on each seed set the results hold, its flip chance and its status."""
    sets = [s for s in SEED_SETS if s in results["seed_sets"]]
    data = {s: [arm_data(results, arm, s, claim) for arm in claim.arms] for s in sets}
    entry: dict[str, Any] = {
        "key": claim.key,
        "kind": claim.kind,
        "says": claim.says,
        "expect": claim.expect,
        "arms": [
            {"sweep": arm.sweep, "method": arm.method, "value": value_of(results, arm)}
            for arm in claim.arms
        ],
    }
    seeds = results["sweeps"][claim.arms[0].sweep]["seeds"]
    for seed_set in sets:
        found = claim.on_set(data[seed_set])
        entry[seed_set] = {**found, "holds": found["verdict"] == claim.expect, "seeds": seeds}
    if len(sets) == 2:
        flips = fresh_set_verdicts(claim, [data[s] for s in sets], seeds) != claim.expect
        entry["flip"] = float(flips.mean())
    entry["status"] = status_of(entry)
    entry["stated"] = entry["status"] == STATED
    return entry


def fresh_set_verdicts(claim: Claim, data: Sequence[Sequence[Any]], seeds: int) -> np.ndarray:
    """The claim's verdict on each fresh set of ``seeds`` seeds its flip chance draws,
    resampled from the discovery and confirmation sets' seeds pooled (``data``: each arm's data
    on those two sets, as :func:`arm_data` reads it)."""
    pooled = [pooled_data(pair) for pair in zip(*data, strict=True)]
    return claim.fresh_verdicts(pooled, resamples(2 * seeds, seeds))


def status_of(entry: Mapping[str, Any]) -> str:
    """How a claim may be worded, from its verdicts on both sets and its flip chance."""
    if "flip" not in entry:
        return ONE_SET
    if not entry["discovery"]["holds"]:
        return NOT_DISCOVERED
    if not entry["confirmation"]["holds"]:
        return NOT_CONFIRMED
    if entry["flip"] <= FLIP_PLAIN:
        return STATED
    return HEDGED if entry["flip"] <= FLIP_HEDGED else FRAGILE


def evaluate_claims(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every claim of :data:`CLAIMS` the results can judge, evaluated."""
    return [evaluate(results, claim) for claim in CLAIMS if available(results, claim)]


def keeps_every_verdict(results: Mapping[str, Any]) -> float:
    """The estimated chance that a re-run on fresh seeds keeps every stated verdict (the
    flips taken as independent)."""
    return float(np.prod([1.0 - c["flip"] for c in in_tier(results, "stated")]))
