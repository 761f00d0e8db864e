"""The why-clip study's claims (experiments/claims.py) judged on made-up seed sets whose truth is
known: verdicts on each set, the winner's-curse-free best step size, upper ends of stable ranges,
flip chances, and the wording each status allows."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import claims
from experiments.claims import (
    ABOVE,
    FRAGILE,
    HEDGED,
    NOT_CONFIRMED,
    NOT_DISCOVERED,
    NOT_STABLE,
    ONE_SET,
    STABLE,
    STATED,
    Arm,
    Difference,
    Interaction,
    Stable,
    UpperEnd,
    evaluate,
)
from experiments.evidence import HIGHER, LOWER, NOT_DISTINGUISHABLE
from ppo_viz.why_clip.results import claim_tier, in_tier

SEEDS = 40
VALUES = [0.1, 1.0, 10.0]


def cells(means: list[float], succeed: list[float], rng: np.random.Generator, spread=0.05):
    """One method's cells: per step size, scores around ``means`` and a share that succeeds."""
    return [
        {
            "value": value,
            "scores": (mean + spread * rng.standard_normal(SEEDS)).tolist(),
            "succeeded": "".join("1" if u < share else "0" for u in rng.random(SEEDS)),
        }
        for value, mean, share in zip(VALUES, means, succeed, strict=True)
    ]


def made_up(methods: dict[str, tuple[list[float], list[float]]], seed: int = 0) -> dict:
    """Results of one sweep on both seed sets, each method drawn from the same truth on both;
    the best step size (``best``) is chosen on the discovery set, as the study does."""
    rng = np.random.default_rng(seed)
    sets = {}
    for name in ("discovery", "confirmation"):
        entries = {}
        for key, (means, succeed) in methods.items():
            found = cells(means, succeed, rng)
            entries[key] = {"cells": found}
        sets[name] = {"first_seed": 0, "methods": entries}
    for key in methods:
        found = sets["discovery"]["methods"][key]["cells"]
        best = max(found, key=lambda c: np.mean(c["scores"]))["value"]
        for name in sets:
            sets[name]["methods"][key]["best"] = {"value": best}
    sweep = {"values": VALUES, "seeds": SEEDS, "methods": list(methods), "sets": sets}
    return {"seed_sets": ["discovery", "confirmation"], "sweeps": {"s": sweep}}


CLEAR = {"a": ([0.5, 0.9, 0.5], [0, 1, 0]), "b": ([0.5, 0.8, 0.5], [0, 1, 0])}
SAME = {"a": ([0.5, 0.9, 0.5], [0, 1, 0]), "b": ([0.5, 0.9, 0.5], [0, 1, 0])}
RANGES = {"wide": ([0.9, 0.9, 0.9], [1, 1, 1]), "narrow": ([0.9, 0.9, 0.2], [1, 1, 0])}
FOUR = {**CLEAR, "c": ([0.5, 0.9, 0.5], [0, 1, 0]), "d": ([0.5, 0.6, 0.5], [0, 1, 0])}


def arm(key: str, value: float | None = 1.0) -> Arm:
    return Arm("s", key, value)


@pytest.mark.parametrize(
    ("truth", "claim", "estimate", "flip", "statuses"),
    [
        # a clear difference holds on both sets and almost never flips
        (CLEAR, Difference("k", "", (arm("a"), arm("b")), HIGHER), 0.1, (0, 0.01), {STATED}),
        # no true difference: a fresh set finds one about as often as the 5% level allows
        (SAME, Difference("k", "", (arm("a"), arm("b")), NOT_DISTINGUISHABLE), 0, (0.01, 0.25),
         {STATED, HEDGED}),
        (SAME, Difference("k", "", (arm("a"), arm("b")), HIGHER), 0, (0, 1), {NOT_DISCOVERED}),
        # upper ends: the largest step size where at least 90% of the seeds succeed
        (RANGES, UpperEnd("k", "", (arm("wide", None), arm("narrow", None)), ABOVE), [10, 1],
         (0, 0), {STATED}),
        (RANGES, UpperEnd("k", "", (arm("narrow", None), arm("wide", None)), ABOVE), [1, 10],
         (0, 1), {NOT_DISCOVERED}),
        (FOUR, Stable("k", "", (arm("a"),), STABLE), 1, (0, 0), {STATED}),
        (FOUR, Stable("k", "", (arm("a", 10.0),), NOT_STABLE), 0, (0, 0), {STATED}),
        # (a - b) - (c - d) = 0.1 - 0.3 = -0.2
        (FOUR, Interaction("k", "", (arm("a"), arm("b"), arm("c"), arm("d")), LOWER), -0.2,
         (0, 0.01), {STATED}),
    ],
)  # fmt: skip
def test_a_claim_is_judged_on_each_set_and_worded_by_its_flip_chance(
    truth, claim, estimate, flip, statuses
):
    found = evaluate(made_up(truth), claim)
    for seed_set in ("discovery", "confirmation"):
        assert found[seed_set]["estimate"] == pytest.approx(estimate, abs=0.04)
        if not isinstance(claim, UpperEnd):
            low, high = found[seed_set]["ci"]
            assert low <= found[seed_set]["estimate"] <= high
        else:
            assert found[seed_set]["ci"][0] == [estimate[0]] * 2  # every seed succeeds or fails
    assert flip[0] <= found["flip"] <= flip[1]
    assert found["status"] in statuses


def test_the_best_step_size_is_the_discovery_sets_on_both_sets():
    """No winner's curse: the confirmation set scores the step size chosen on the discovery set."""
    results = made_up({"a": ([0.5, 0.9, 0.89], [0, 1, 1]), "b": ([0.5, 0.8, 0.5], [0, 1, 0])})
    chosen = results["sweeps"]["s"]["sets"]["discovery"]["methods"]["a"]["best"]["value"]
    claim = Difference("k", "a's best beats b's", (Arm("s", "a"), Arm("s", "b")), HIGHER)
    found = evaluate(results, claim)
    assert found["arms"][0]["value"] == chosen
    cell = next(
        c
        for c in results["sweeps"]["s"]["sets"]["confirmation"]["methods"]["a"]["cells"]
        if c["value"] == chosen
    )
    b = results["sweeps"]["s"]["sets"]["confirmation"]["methods"]["b"]["cells"][1]
    expected = np.mean(np.array(cell["scores"]) - np.array(b["scores"]))
    assert found["confirmation"]["estimate"] == pytest.approx(expected, rel=1e-12)


def test_an_upper_end_on_the_edge_of_the_success_share_flips_often():
    """Exactly 90% of the seeds succeed at the top step size on both sets: a fresh set of as
    many seeds reaches 90% there only about 60% of the time, so the upper end is no claim to
    state plainly."""
    results = made_up({"edge": ([0.9] * 3, [1, 1, 1]), "low": ([0.9] * 3, [1, 1, 0])})
    for entry in results["sweeps"]["s"]["sets"].values():
        entry["methods"]["edge"]["cells"][2]["succeeded"] = "1" * 36 + "0" * 4
    claim = UpperEnd("k", "edge reaches 10", (Arm("s", "edge"), Arm("s", "low")), ABOVE)
    found = evaluate(results, claim)
    assert found["discovery"]["holds"]
    assert found["confirmation"]["holds"]
    assert 0.3 < found["flip"] < 0.45  # P(fewer than 36 of 40 | p = 0.9) = 0.37
    assert found["status"] == FRAGILE


@pytest.mark.parametrize(
    ("discovery", "confirmation", "flip", "status"),
    [
        (True, True, 0.0, STATED),
        (True, True, 0.05, STATED),
        (True, True, 0.2, HEDGED),
        (True, True, 0.4, FRAGILE),
        (True, False, 0.0, NOT_CONFIRMED),
        (False, True, 0.0, NOT_DISCOVERED),
        (True, None, None, ONE_SET),
    ],
)
def test_the_wording_follows_both_sets_verdicts_and_the_flip_chance(
    discovery, confirmation, flip, status
):
    """Stated only where both sets hold and a fresh set would rarely flip it; one set alone
    (a partial run) is never stated."""
    entry = {"discovery": {"holds": discovery}, "confirmation": {"holds": confirmation}}
    assert claims.status_of(entry if flip is None else {**entry, "flip": flip}) == status


def test_the_chance_that_a_rerun_keeps_every_stated_verdict():
    results = {
        "claims": [
            {"key": "a", "status": STATED, "stated": True, "flip": 0.02},
            {"key": "b", "status": STATED, "stated": True, "flip": 0.01},
            {"key": "c", "status": HEDGED, "stated": False, "flip": 0.1},
            {"key": "d", "status": FRAGILE, "stated": False, "flip": 0.5},
        ]
    }
    assert [c["key"] for c in in_tier(results, "stated")] == ["a", "b"]
    assert [c["key"] for c in in_tier(results, "hedged")] == ["c"]
    assert claims.keeps_every_verdict(results) == pytest.approx(0.98 * 0.99)
    tiers = [claim_tier(c) for c in results["claims"]]
    assert tiers == ["stated", "stated", "hedged", "other"]
