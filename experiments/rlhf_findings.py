"""What the RLHF study concludes, chosen on one set of seeds and checked on another.

Every number here comes from the per-seed values the study stores (4 significant digits), so
anyone can recompute it from ``rlhf_study.json``, with the intervals of
:mod:`experiments.evidence` (of a mean, or of a mean paired difference over the seeds both
methods ran on).

* :func:`cell_statistics`: per cell, each metric's mean and interval, and the score minus
  GRPO's at the same learning rate and mu, seed by seed;
* :func:`best_settings`: per method and mu, the learning rate with the best mean score on the
  discovery seeds, and that cell's score on the confirmation seeds, paired with GRPO's best;
* :data:`FINDINGS`: published claims about these trainers (a table, :data:`FINDINGS_TABLE`),
  each a comparison of two methods on one metric; :func:`evaluate` chooses, on the discovery
  seeds, the cell that supports the claim most strongly and the one that goes most strongly
  against it, and checks each on the confirmation seeds.  A side is *confirmed* when both
  sets' intervals exclude 0 on that side (a claim confirmed on its side whose other side the
  discovery seeds found too is :data:`UNSETTLED`, not plainly reproduced);
  :func:`experiments.evidence.replication_chance` says how often a third, fresh set would
  confirm it again;
* :func:`facts_at_one_update`: with mu = 1 the ratio is exactly 1 and nothing is clipped, so
  GRPO, GSPO and the unclipped surrogate are the same run, and so are DAPO with and without
  clip-higher and CISPO.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.evidence import SEED_SETS, mean_interval, paired, replication_chance, sign_of
from ppo_viz.rlhf.results import cell_of

REFERENCE = "grpo"
METRICS = {
    "score": "final accuracy (exact, over all prompts)",
    "reward_mean": "mean batch reward over training",
    "excess": "mean response length minus the right one's, last quarter (tokens)",
    "wrong_excess": "wrong responses' length minus the right one's, last quarter (tokens)",
    "entropy": "policy entropy per token, last quarter (nats)",
    "clip_fraction": "share of tokens clipped, mean over updates",
}
#: The verdict of a claim confirmed on its side whose other side the discovery seeds also found
#: (but the confirmation seeds did not): "reproduces" would promise more than the seeds show.
UNSETTLED = "reproduces, other side unsettled"
#: Methods that are the same run at mu = 1 (every ratio is 1, nothing is clipped).
SAME_AT_ONE_UPDATE = (("grpo", "gspo", "unclipped"), ("dapo", "dapo_sym", "cispo"))


@dataclass(frozen=True)
class Finding:
    """A published claim: ``metric`` of ``method`` minus that of ``versus`` has the sign
    ``direction``, tested at every learning rate and mu in ``updates`` (or, with
    ``best_vs_best``, at each mu with each method at its own best learning rate)."""

    key: str
    source: str
    claim: str
    metric: str
    method: str
    versus: str
    direction: int = 1
    updates: tuple[int, ...] = (2, 4, 8)
    best_vs_best: bool = False


#: The findings' table: one published claim per row, as :class:`Finding`'s fields (``updates``
#: separated by spaces; ``best_vs_best`` "yes" or empty).
FINDINGS_TABLE = Path(__file__).with_name("rlhf_findings.csv")


def read_findings(path: Path = FINDINGS_TABLE) -> tuple[Finding, ...]:
    """The findings of a table (:data:`FINDINGS_TABLE`), in its order."""
    with path.open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        row["direction"] = int(row["direction"])
        row["updates"] = tuple(int(mu) for mu in row["updates"].split())
        row["best_vs_best"] = row["best_vs_best"] == "yes"
    return tuple(Finding(**row) for row in rows)


FINDINGS = read_findings()


# --------------------------------------------------------------------------
# Cells and best settings
# --------------------------------------------------------------------------


def strength(comparison: Mapping[str, Any]) -> float:
    """The difference in units of its interval's half-width (about 2 at the interval's edge)."""
    low, high = comparison["ci"]
    half, diff = (high - low) / 2, comparison["diff"]
    if half > 0:
        return diff / half
    return 0.0 if diff == 0 else float(np.copysign(np.inf, diff))


def cell_statistics(results: dict[str, Any]) -> None:
    """Add each cell's mean score with its interval, and its score minus GRPO's (paired)."""
    for cell in results["cells"]:
        cell["mean"] = {"score": mean_interval(cell["per_seed"]["score"])}
        if cell["method"] != REFERENCE and REFERENCE in results["methods"]:
            grpo = cell_of(results, cell["set"], REFERENCE, cell["learning_rate"], cell["updates"])
            cell["vs_grpo"] = paired(cell["per_seed"]["score"], grpo["per_seed"]["score"])


def best_lr(results: Mapping[str, Any], method: str, mu: int, metric: str = "score") -> float:
    """The learning rate with the best mean ``metric`` on the discovery seeds."""
    means = {
        lr: np.nanmean(cell_of(results, "discovery", method, lr, mu)["per_seed"][metric])
        for lr in results["learning_rates"]
    }
    return max(means, key=means.__getitem__)


def best_settings(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per method and mu: the best learning rate on the discovery seeds, the score there on
    both sets, and (confirmation) the paired difference from GRPO at GRPO's best."""
    best: dict[str, dict[str, Any]] = {}
    for method in results["methods"]:
        for mu in results["updates"]:
            lr = best_lr(results, method, mu)
            entry = {"learning_rate": lr}
            for seed_set in SEED_SETS:
                scores = cell_of(results, seed_set, method, lr, mu)["per_seed"]["score"]
                entry[seed_set] = mean_interval(scores)
            if method != REFERENCE and REFERENCE in results["methods"]:
                grpo_lr = best_lr(results, REFERENCE, mu)
                mine = cell_of(results, "confirmation", method, lr, mu)["per_seed"]["score"]
                grpo = cell_of(results, "confirmation", REFERENCE, grpo_lr, mu)["per_seed"]
                entry["vs_grpo_best"] = paired(mine, grpo["score"])
            best.setdefault(method, {})[str(mu)] = entry
    return best


# --------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------


def candidates(finding: Finding, results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Where a finding can be tested: every (lr, mu), or per mu each method's best lr."""
    mus = [mu for mu in finding.updates if mu in results["updates"]]
    if finding.best_vs_best:
        return [
            {
                "updates": mu,
                "learning_rate": best_lr(results, finding.method, mu, finding.metric),
                "versus_learning_rate": best_lr(results, finding.versus, mu, finding.metric),
            }
            for mu in mus
        ]
    return [
        {"updates": mu, "learning_rate": lr, "versus_learning_rate": lr}
        for mu in mus
        for lr in results["learning_rates"]
    ]


def compare(
    finding: Finding, results: Mapping[str, Any], where: Mapping[str, Any], seed_set: str
) -> dict[str, Any]:
    """The finding's paired difference at ``where`` on one set of seeds."""
    mu = where["updates"]
    mine = cell_of(results, seed_set, finding.method, where["learning_rate"], mu)
    theirs = cell_of(results, seed_set, finding.versus, where["versus_learning_rate"], mu)
    return paired(mine["per_seed"][finding.metric], theirs["per_seed"][finding.metric])


def evaluate(finding: Finding, results: Mapping[str, Any]) -> dict[str, Any]:
    """The finding on both sets: for the claim's side and the opposite one, the candidate
    with the strongest discovery difference on that side, and that candidate on the
    confirmation seeds; the verdict."""
    places = candidates(finding, results)
    found = [compare(finding, results, where, "discovery") for where in places]
    sides = {}
    for name, sign in (("supports", finding.direction), ("against", -finding.direction)):
        i = max(range(len(places)), key=lambda k: sign * strength(found[k]))
        confirmation = compare(finding, results, places[i], "confirmation")
        discovered = sign_of(found[i]["ci"]) == sign
        sides[name] = {
            "where": places[i],
            "discovery": found[i],
            "confirmation": confirmation,
            "discovered": discovered,
            "confirmed": discovered and sign_of(confirmation["ci"]) == sign,
            "replication_chance": replication_chance(confirmation["ci"], sign),
        }
    verdicts = {
        (True, False): "reproduces",
        (True, True): "depends on the setting",
        (False, True): "reversed",
        (False, False): "not reproduced",
    }
    verdict = verdicts[(sides["supports"]["confirmed"], sides["against"]["confirmed"])]
    if verdict == "reproduces" and sides["against"]["discovered"]:
        verdict = UNSETTLED  # a fresh set may confirm the other side too
    return {
        **asdict(finding),
        **sides,
        "discovery_sides": {
            "supports": sum(sign_of(f["ci"]) == finding.direction for f in found),
            "against": sum(sign_of(f["ci"]) == -finding.direction for f in found),
            "of": len(found),
        },
        "verdict": verdict,
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
        if all(m in results["methods"] for m in group):
            identical[" = ".join(group)] = all(
                cell_of(results, s, m, lr, 1)["per_seed"]
                == cell_of(results, s, group[0], lr, 1)["per_seed"]
                for s in SEED_SETS
                for m in group
                for lr in results["learning_rates"]
            )
    return {"largest_clip_fraction": largest, "identical": identical}


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the statistics: per cell, best settings, findings, facts at mu = 1."""
    cell_statistics(results)
    results["metrics"] = METRICS
    results["best"] = best_settings(results)
    results["findings"] = [
        evaluate(f, results)
        for f in FINDINGS
        if f.method in results["methods"]
        and f.versus in results["methods"]
        and any(mu in results["updates"] for mu in f.updates)
    ]
    results["facts_at_one_update"] = facts_at_one_update(results)
    return results
