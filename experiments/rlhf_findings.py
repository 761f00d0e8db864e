"""What the RLHF study concludes: each finding a curve over the grid, with a simultaneous band.

Every number here comes from the per-seed values the study stores (4 significant digits), so
anyone can recompute it from ``rlhf_study.json``.

* :data:`FINDINGS`: published claims about these trainers, and controls that each change one
  thing (a table, :data:`FINDINGS_TABLE`); each is a comparison of two methods on one metric;
* :func:`evaluate`: on each of the three sets of seeds
  (:data:`experiments.evidence.ALL_SEED_SETS`), the paired difference, seed by seed, at every
  learning rate and mu the finding is tested at, with a simultaneous 95% band over all those
  settings (:func:`experiments.evidence.simultaneous_band`).  A finding is *stated* where the
  discovery and the confirmation set's bands both exclude 0 on one side; the third set then
  tests the statement: the settings where it holds there too, and where it is contradicted (the
  third set's band excludes 0 on the other side).  No setting where both sets agree: "not
  detectable here".  No best-versus-best comparison: every setting is shown;
* :func:`facts_at_one_update`: with mu = 1 the ratio is exactly 1 and nothing is clipped, so
  the methods that differ only in their clip are the same run.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments import evidence
from experiments.evidence import ALL_SEED_SETS, simultaneous_band, stated_side, third_set_count
from ppo_viz.rlhf.results import cell_of

METRICS = {
    "score": "final accuracy (exact, over all prompts)",
    "reward_mean": "mean batch reward over training",
    "excess": "mean response length minus the right one's, last quarter (tokens)",
    "wrong_excess": "wrong responses' length minus the right one's, last quarter (tokens)",
    "entropy": "policy entropy per token, last quarter (nats)",
    "clip_fraction": "share of tokens clipped, mean over updates",
}
#: Methods that are the same run at mu = 1 (every ratio is 1, nothing is clipped).
SAME_AT_ONE_UPDATE = (
    ("grpo", "gspo", "unclipped", "grpo_tight", "gspo_wide"),
    ("dapo", "dapo_sym", "cispo"),
)


@dataclass(frozen=True)
class Finding:
    """A claim (``kind`` "claim": ``quote`` is its paper's words) or a control (``kind``
    "control": ``quote`` says what it isolates): ``metric`` of ``method`` minus that of
    ``versus`` has the sign ``direction``, tested at every learning rate and every mu in
    ``updates``."""

    key: str
    kind: str
    source: str
    quote: str
    claim: str
    metric: str
    method: str
    versus: str
    direction: int = 1
    updates: tuple[int, ...] = (2, 4, 8)


#: The findings' table: one row per finding, as :class:`Finding`'s fields (``updates``
#: separated by spaces).
FINDINGS_TABLE = Path(__file__).with_name("rlhf_findings.csv")


def read_findings(path: Path = FINDINGS_TABLE) -> tuple[Finding, ...]:
    """The findings of a table (:data:`FINDINGS_TABLE`), in its order."""
    with path.open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        row["direction"] = int(row["direction"])
        row["updates"] = tuple(int(mu) for mu in row["updates"].split())
    return tuple(Finding(**row) for row in rows)


FINDINGS = read_findings()
Settings = Sequence[Sequence[float]] | None  # [mu, lr] pairs


def settings_of(finding: Finding, results: Mapping[str, Any]) -> list[tuple[int, float]]:
    """The settings ``(mu, lr)`` a finding is tested at, mu by mu."""
    mus = [mu for mu in finding.updates if mu in results["updates"]]
    return [(mu, lr) for mu in mus for lr in results["learning_rates"]]


def differences(
    finding: Finding, results: Mapping[str, Any], seed_set: str, settings: Settings = None
) -> np.ndarray:
    """``(seeds, settings)``: each seed's ``method`` minus ``versus`` at each setting (None:
    every one it is tested at, :func:`settings_of`)."""
    columns = []
    for mu, lr in settings or settings_of(finding, results):
        mine, theirs = (
            np.array(cell_of(results, seed_set, m, lr, mu)["per_seed"][finding.metric], float)
            for m in (finding.method, finding.versus)
        )
        columns.append(mine - theirs)
    return np.array(columns).T


def curve(
    finding: Finding, results: Mapping[str, Any], seed_set: str, settings: Settings = None
) -> dict[str, Any]:
    """The finding's curve on one set: the simultaneous band over its settings (or ``settings``)
    (:func:`~experiments.evidence.simultaneous_band`) and the side each setting's band is on
    (``sign``: +1 above 0, -1 below, 0 holding it); a seed without a value at some setting
    (no wrong response) is left out, and counted in ``left_out``."""
    d = differences(finding, results, seed_set, settings)
    whole = np.isfinite(d).all(axis=1)
    band = simultaneous_band(d[whole])
    sign = [evidence.sign_of(ci) for ci in zip(band["low"], band["high"], strict=True)]
    return {**band, "sign": sign, "left_out": int((~whole).sum())}


def evaluate(finding: Finding, results: Mapping[str, Any]) -> dict[str, Any]:
    """The finding's curves on the three sets and, for the claimed side and the other one, the
    settings where it is stated (discovery and confirmation agree), where the third set agrees
    too (``held``) and where it goes the other way (``contradicted``)."""
    settings = settings_of(finding, results)
    curves = {s: curve(finding, results, s) for s in ALL_SEED_SETS}
    signs = {s: c["sign"] for s, c in curves.items()}
    sides = {
        name: {k: [list(settings[i]) for i in v] for k, v in stated_side(signs, sign).items()}
        for name, sign in (("supports", finding.direction), ("against", -finding.direction))
    }
    return {
        **asdict(finding),
        "settings": [list(s) for s in settings],
        "curves": curves,
        **sides,
    }


def facts_at_one_update(results: Mapping[str, Any]) -> dict[str, Any]:
    """At mu = 1: the largest clip fraction of any cell, and for each group of methods that
    are the same run there, whether their stored per-seed values are equal in every cell."""
    if 1 not in results["updates"]:
        return {}
    at_one = [c for c in results["cells"] if c["updates"] == 1]
    largest = max(max(c["per_seed"]["clip_fraction"]) for c in at_one)
    identical = {}
    for group in SAME_AT_ONE_UPDATE:
        ran = [m for m in group if m in results["methods"]]
        if len(ran) > 1:
            identical[" = ".join(ran)] = all(
                cell_of(results, s, m, lr, 1)["per_seed"]
                == cell_of(results, s, ran[0], lr, 1)["per_seed"]
                for s in results["sets"]
                for m in ran
                for lr in results["learning_rates"]
            )
    return {"largest_clip_fraction": largest, "identical": identical}


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the statistics: each cell's mean accuracy, the findings whose two
    methods ran (each on every set it has), how many stated findings the third set confirms,
    the facts at mu = 1."""
    for cell in results["cells"]:
        scores = np.array(cell["per_seed"]["score"], dtype=float)
        cell["mean"] = {"score": {"mean": float(np.nanmean(scores))}}
    results["metrics"] = METRICS
    complete = all(s in results["sets"] for s in ALL_SEED_SETS)
    results["findings"] = [
        evaluate(f, results)
        for f in FINDINGS
        if complete
        and f.method in results["methods"]
        and f.versus in results["methods"]
        and any(mu in results["updates"] for mu in f.updates)
    ]
    sides = [f[side] for f in results["findings"] for side in ("supports", "against")]
    results["third_set"] = third_set_count(sides)
    results["facts_at_one_update"] = facts_at_one_update(results)
    return results
