"""Notebook 4's claims: the engine (experiments/claims.py) judged on made-up seed sets whose
truth is known (verdicts on each set, the winner's-curse-free best step size, upper ends of
stable ranges, flip chances, and the wording each status allows); then the committed claims and
every number notebook 4's prose states, computed from the committed results (each claim
evaluated again from its seeds, on both sets), the plan's constants and the notebook's own live
runs, formatted as the prose formats them."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest
from helpers import assert_states, markdown_of

from bandit_loop import BanditLoopSettings
from experiments import claims, study
from experiments import why_clip as command
from experiments.cartpole_agent import SCORE_EPISODES
from experiments.claims import (
    ABOVE,
    CLAIMS,
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
    arm_data,
    evaluate,
    fresh_set_verdicts,
)
from experiments.evidence import HIGHER, LOWER, NOT_DISTINGUISHABLE, SEED_SETS
from ppo_viz.results import difference
from ppo_viz.why_clip.apps import CHOICES, DEFAULT_SEEDS, MORE_BANDIT_SEEDS
from ppo_viz.why_clip.methods import MAIN_METHODS, run_bandit_methods
from ppo_viz.why_clip.results import (
    RESULTS_DIR,
    cell_at,
    claim_estimate,
    claim_tier,
    flip_text,
    in_tier,
    load_results,
    one_set,
)

NOTEBOOK = RESULTS_DIR.parent / "notebooks" / "04_why_clip.ipynb"
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


# --------------------------------------------------------------------------
# Notebook 4's prose: every number it states, computed from the committed results (each claim
# evaluated again from its seeds, on both sets), the plan's constants and the notebook's own
# live runs, formatted as the prose formats them
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prose() -> str:
    return markdown_of(NOTEBOOK)


@cache
def committed() -> dict:
    return load_results()


@cache
def claim(key: str) -> dict:
    """A claim, evaluated again from the committed seeds (and the same as committed)."""
    return next(c for c in committed()["claims"] if c["key"] == key)


def with_interval(key: str, seed_set: str) -> str:
    """A difference claim's estimate and interval on one set, as the notebook's claims table
    writes it: ``+0.0015 [-0.0003, +0.0050]``."""
    return claim_estimate(claim(key), seed_set).partition(":")[0]


def point(key: str, seed_set: str) -> str:
    """A difference claim's estimate on one set as the prose writes it: ``-0.197``."""
    return with_interval(key, seed_set).split()[0]


def both(key: str) -> str:
    """``-0.197 and -0.211``: a difference on the discovery set, then the confirmation set."""
    return f"{point(key, 'discovery')} and {point(key, 'confirmation')}"


def tops(key: str, seed_set: str = "confirmation") -> list[float | None]:
    return claim(key)[seed_set]["estimate"]


def test_the_study_states_many_claims_that_together_rarely_flip():
    """(Each stated claim held on both sets and flips at most FLIP_PLAIN: status_of's table
    above, on the claims re-derived from the committed seeds in test_study_results.py.)"""
    stated = [c for c in committed()["claims"] if c["stated"]]
    assert len(stated) >= 10
    flips = sum(c["flip"] for c in stated)
    assert flips < 0.1  # a re-run on fresh seeds keeps every stated verdict, bar bad luck


#: What the prose states as findings (held on both sets, flip chance <= 5%).
STATED_IN_PROSE = (
    "bandit_top_ppo_above_unclipped",
    "bandit_top_clip_only_above_unclipped",
    "bandit_top_early_stop_above_unclipped",
    "bandit_top_plain_pg_above_unclipped",
    "bandit_top_ppo_above_kl_adaptive_0.01",
    "bandit_top_ppo_above_kl_fixed_1",
    "bandit_unclipped_below_ppo_at_1",
    "bandit_unclipped_above_ppo_at_0.2",
    "bandit_plain_pg_below_ppo_at_0.5",
    "cartpole_ppo_not_stable_at_cleanrl_lr",
    "cartpole_unclipped_below_ppo_at_0.01",
    "cartpole_adaptive_above_unclipped_at_0.01",
    "epochs_top_ppo_above_unclipped_k10",
    "epochs_help_ppo_more_than_unclipped_at_0.005",
    "epochs_ppo_k10_above_k1_at_0.005",
    "epochs_unclipped_k10_above_k1_at_0.0005",
    "epochs_k1_ppo_above_unclipped_at_0.025",
    "epochs_unclipped_below_ppo_at_k10",
)
#: What the prose gives as tendencies, each with its flip chance.
TENDENCIES_IN_PROSE = (
    "bandit_top_clip_only_above_ppo",
    "bandit_plain_pg_best_vs_ppo_best",
    "bandit_adaptive_below_unclipped_at_1",
    "cartpole_top_ppo_above_unclipped",
    "cartpole_top_ppo_above_kl_adaptive_0.01",
    "cartpole_adaptive_best_vs_ppo_best",
    "cartpole_unclipped_best_below_ppo_best",
    "epochs_unclipped_k10_below_k1_at_0.005",
    "epochs_k1_ppo_vs_unclipped_at_0.0025",
)
#: What the prose says is not stated, and why.
NOT_STATED_IN_PROSE = {
    "bandit_top_adaptive_above_unclipped": "would flip",
    "bandit_clip_only_best_above_ppo_best": "would flip",
    "bandit_early_stop_best_above_ppo_best": "confirmation set disagrees",
    "bandit_eps_0.3_vs_0.2_at_1": "confirmation set disagrees",
    "cartpole_adaptive_below_ppo_at_0.01": "would flip",
    "epochs_k10_widens_the_gap_at_0.0025": "discovery set disagrees",
}


def test_the_notebook_states_each_finding_with_both_sets_numbers(prose):
    for key in STATED_IN_PROSE:
        assert claim(key)["stated"], key
    differences = [k for k in STATED_IN_PROSE if claim(k)["kind"] in ("difference", "interaction")]
    assert_states(prose, *(both(key) for key in differences))
    for seed_set in ("discovery", "confirmation"):  # the upper ends, the same on both sets
        assert tops("bandit_top_ppo_above_unclipped", seed_set) == [10.0, 0.2]
        for key in ("clip_only", "early_stop", "plain_pg"):
            assert tops(f"bandit_top_{key}_above_unclipped", seed_set)[0] == 20.0
        for key in ("kl_adaptive_0.01", "kl_fixed_1"):
            assert tops(f"bandit_top_ppo_above_{key}", seed_set) == [10.0, 0.5]
        assert tops("epochs_top_ppo_above_unclipped_k10", seed_set) == [0.01, None]
        assert claim("cartpole_ppo_not_stable_at_cleanrl_lr")[seed_set]["estimate"] == 0.0
    assert_states(
        prose,
        "upper end of PPO's stable range is $\\alpha$ = 10, and that of the unclipped surrogate, "
        "with the same 20 epochs, 0.2",
        "reach $\\alpha$ = 20 on both sets",
        "($\\beta = 1$), 0.5 on both sets",
        "the upper end of its range is 0.01 on both sets, and the unclipped surrogate has none",
    )


def test_the_notebook_gives_each_tendency_with_its_flip_chance(prose):
    for key in TENDENCIES_IN_PROSE:
        assert claim(key)["status"] == HEDGED, key
        assert flip_text(claim(key)["flip"]) in prose, key
    plain_pg = "bandit_plain_pg_best_vs_ppo_best"
    assert_states(
        prose,
        f"({with_interval(plain_pg, 'discovery')} and {with_interval(plain_pg, 'confirmation')};",
        f"flip chance {flip_text(claim('bandit_top_clip_only_above_ppo')['flip'])}.)",
        f"({both('bandit_adaptive_below_unclipped_at_1')}; a tendency",
        f"({both('epochs_unclipped_k10_below_k1_at_0.005')}, a tendency",
    )
    same = {
        flip_text(claim(f"cartpole_top_ppo_above_{k}")["flip"])
        for k in ("unclipped", "clip_only", "plain_pg", "early_stop")
    }
    assert len(same) == 1  # "8% of the time each"
    assert f"{same.pop()} of the time each" in prose


def test_the_notebook_says_which_claims_are_not_stated_and_why(prose):
    for key, why in NOT_STATED_IN_PROSE.items():
        assert not claim(key)["stated"], key
        assert claim(key)["status"] != HEDGED, key
        assert why in claim(key)["status"], key
    assert_states(
        prose,
        f"confirm that order {flip_text(claim('bandit_top_adaptive_above_unclipped')['flip'])}",
        f"would flip on {flip_text(claim('bandit_clip_only_best_above_ppo_best')['flip'])} of",
    )
    assert claim("bandit_early_stop_best_above_ppo_best")["confirmation"]["verdict"] == (
        "not distinguishable"
    )
    eps = claim("bandit_eps_0.3_vs_0.2_at_1")
    assert eps["discovery"]["verdict"] == "not distinguishable"
    assert eps["confirmation"]["verdict"] == "higher"  # "puts ε = 0.3 higher"
    assert tops("bandit_top_adaptive_above_unclipped", "discovery") == [0.5, 0.2]
    assert tops("bandit_top_adaptive_above_unclipped") == [0.5, 0.2]
    assert claim("epochs_k10_widens_the_gap_at_0.0025")["discovery"]["verdict"] == (
        "not distinguishable"
    )
    assert 0.4 < claim("cartpole_adaptive_below_ppo_at_0.01")["flip"] < 0.6  # "about half"
    assert_states(prose, "would fail to confirm that last order about half the time")


def fresh_verdicts(key: str) -> np.ndarray:
    """A claim's verdict on each of the fresh sets its flip chance draws."""
    found, results = next(c for c in CLAIMS if c.key == key), committed()
    data = [[arm_data(results, arm, s, found) for arm in found.arms] for s in SEED_SETS]
    return fresh_set_verdicts(found, data, results["sweeps"][found.arms[0].sweep]["seeds"])


def test_a_fresh_set_fails_to_confirm_higher_or_lower_by_not_distinguishing_them(prose):
    """A flip is any other verdict; for 'higher' or 'lower', almost never the opposite one."""
    opposite = {"higher": "lower", "lower": "higher"}
    for found in committed()["claims"]:
        if found["expect"] in opposite:
            verdicts = fresh_verdicts(found["key"])
            assert np.mean(verdicts != found["expect"]) == found["flip"], found["key"]
            assert np.mean(verdicts == opposite[found["expect"]]) < 0.001, found["key"]
    assert_states(prose, 'one method scores higher, almost always "not distinguishable", not lower')


def test_at_the_best_step_size_the_bandits_gaps_are_small_and_cartpoles_not(prose):
    """The five other main methods' bests within 0.01 of PPO's on the bandit, on both sets; on
    CartPole early stopping's below PPO's on both sets, a range-table entry and no claim."""
    early = []
    for seed_set in SEED_SETS:
        sweeps = one_set(committed(), seed_set)["sweeps"]
        for key in MAIN_METHODS[1:]:
            assert abs(sweeps["bandit"]["methods"][key]["best"]["vs_ppo_best"]["diff"]) < 0.01
        gap = sweeps["cartpole"]["methods"]["early_stop"]["best"]["vs_ppo_best"]
        assert gap["verdict"] == "lower", seed_set
        early.append(difference(gap).split()[0])
    assert all(Arm("cartpole", "early_stop") not in c.arms for c in CLAIMS if c.kind != "upper end")
    assert_states(
        prose, f"stopping's ({' and '.join(early)} seed by", "the five others within 0.01"
    )


def test_at_their_best_rates_the_three_means_lie_in_the_papers_order_on_both_sets(prose):
    """Adaptive KL between no constraint and PPO, by the means only (not distinguishable);
    PPO's best on each set, named as such (beside Table 1's 0.82)."""
    ppo = []
    for seed_set in ("discovery", "confirmation"):
        methods = one_set(committed(), seed_set)["sweeps"]["cartpole"]["methods"]
        best = [methods[k]["best"]["mean"] for k in ("unclipped", "kl_adaptive_0.01", "ppo")]
        assert best == sorted(best), seed_set
        ppo.append(best[-1])
        assert methods["kl_adaptive_0.01"]["best"]["vs_ppo_best"]["verdict"] == (
            "not distinguishable"
        )
    assert_states(prose, "although on both sets the three means lie in the paper's order")
    assert_states(
        prose, f"PPO's {ppo[0]:.3f} at its best learning rate on CartPole here (discovery"
    )
    assert_states(prose, f"set; {ppo[1]:.3f} on the confirmation set")
    assert_states(prose, "the adaptive KL penalty alone a fresh set would fail to confirm it about")
    assert round(1 / claim("cartpole_top_ppo_above_kl_adaptive_0.01")["flip"]) == 6  # "1 in 6"


def test_the_notebook_states_cartpoles_counts(prose):
    """PPO alone stable at K = 4, on both sets, at 0.005 and 0.01; nothing solves at 2.5e-4."""
    for seed_set in ("discovery", "confirmation"):
        sweep = one_set(committed(), seed_set)["sweeps"]["cartpole"]
        assert sweep["methods"]["ppo"]["stable"] == [0.005, 0.01]
        assert all(sweep["methods"][k]["stable"] is None for k in sweep["methods"] if k != "ppo")
        assert all(cell_at(sweep, k, 2.5e-4)["solved"] == 0 for k in sweep["methods"])
    assert_states(prose, "(0.005 and 0.01;", "(PPO: 0 of 20 on both sets)")
    equal = []
    for seed_set in ("discovery", "confirmation"):  # clip-only at CleanRL's rate: PPO's updates
        sweep = one_set(committed(), seed_set)["sweeps"]["cartpole"]
        pair = [np.array(cell_at(sweep, k, 2.5e-4)["scores"]) for k in ("clip_only", "ppo")]
        equal.append(f"{int(np.sum(pair[0] == pair[1]))} of the {sweep['seeds']} {seed_set} seeds")
    assert_states(prose, " and ".join(equal))


def test_the_notebook_states_the_studys_design(prose):
    plan = {sweep.name: sweep for sweep in command.plan_of(committed()).sweeps}
    bandit, cartpole = plan["bandit"], plan["cartpole"]
    paper, methods = committed()["paper"], committed()["methods"]  # as the study ran them
    kl_rows = [v for k, v in paper.items() if k.startswith("kl_")]
    early_stop_kl = methods["early_stop"]["target_kl"]
    assert_states(
        prose,
        f"**{paper['unclipped']:.2f}**",
        f"**{paper['ppo']:.2f}**",
        f"from **{min(kl_rows):.2f}** to **{max(kl_rows):.2f}**",
        f"the arm means the study stored, ({', '.join(f'{m:g}' for m in bandit.base.arm_means)})",
        f"$K = {bandit.base.epochs}$ epochs of full-batch gradient steps",
        f"per batch of {bandit.base.batch_size} pulls, {bandit.base.iterations} batches per run",
        f"from {min(bandit.values):g} to {max(bandit.values):g}",
        f"{bandit.seeds} + {bandit.seeds} seeds per point",
        f"at least {study.BANDIT_SUCCESS:g} (0 is",
        f"$K = {cartpole.base.epochs}$ epochs per rollout",
        f"from {min(cartpole.values):g} to {max(cartpole.values):g}",
        f"{cartpole.seeds} + {cartpole.seeds} seeds × {cartpole.base.total_steps:,} steps per",
        f"last {SCORE_EPISODES} episodes is at least {study.CARTPOLE_SOLVED:g}",
        f"$K = {plan['cartpole_k1'].base.epochs}$ and $K = {plan['cartpole_k10'].base.epochs}$",
        f"on CartPole one epoch of {cartpole.base.minibatches} minibatch steps of the unclipped",
        f"$d_\\text{{targ}} = {methods['kl_adaptive_0.01']['kl_target']:g}$",
        f"$\\beta$ starts at {methods['kl_adaptive_0.01']['kl_coef']:g}",
        f"exceeds {early_stop_kl:g}",
        f"`target_kl = {early_stop_kl / 1.5:g}`",
        f"at least {committed()['stable_share']:.0%} of the seeds succeed *on each set*",
        f"(seeds 0–{bandit.seeds - 1} on the bandit, 0–{cartpole.seeds - 1} on CartPole)",
        f"(the next {bandit.seeds} and {cartpole.seeds} seeds)",
    )
    assert set(plan["cartpole_k1"].methods) == set(plan["cartpole_k10"].methods)
    assert set(plan["cartpole_k1"].methods) == {"ppo", "unclipped"}  # "PPO and the unclipped"
    assert_states(prose, "With $K = 10$, of the two methods run there, only PPO")
    assert not re.search(r"\btie[sd]?\b", prose, re.IGNORECASE)  # "not distinguishable"


def test_the_notebook_states_its_live_numbers(prose):
    """The bandit explorer's default run (20 seeds) and the small-step cell (200 seeds), on
    today's bandit: cells print their numbers; the prose states what holds for any bandit."""
    runs = run_bandit_methods(BanditLoopSettings(), tuple(range(DEFAULT_SEEDS)))
    wrong = {key: run.collapsed[:, -1].sum() for key, run in runs.items()}
    assert min(wrong["unclipped"], wrong["kl_adaptive_0.01"]) > 0  # "some", "also loses"
    assert wrong["ppo"] == 0
    assert runs["unclipped"].approx_kl.mean() > 10 * runs["ppo"].approx_kl.mean()
    adaptive = runs["kl_adaptive_0.01"]
    assert adaptive.settings.step_size * adaptive.kl_coef.max() >= 10  # "many times"
    small = run_bandit_methods(
        BanditLoopSettings(step_size=0.2), tuple(range(200)), ("ppo_eps_0.1", "ppo", "unclipped")
    )
    clip = {key: run.clip_fraction[:, :10].mean() for key, run in small.items()}
    assert clip["ppo_eps_0.1"] > clip["ppo"] >= 0.1
    assert small["unclipped"].score.mean() > small["ppo"].score.mean()
    assert_states(
        prose,
        "No PPO seed ends on a wrong arm. The adaptive KL penalty also loses seeds to wrong arms",
        "is many times the policy's change",
        "$\\epsilon = 0.2$ clips at least a tenth of its samples, and with $\\epsilon = 0.1$ more",
        f"({both('bandit_unclipped_above_ppo_at_0.2')} seed by seed), and on the 200 seeds below",
        f"{DEFAULT_SEEDS} seeds. Each slider",
        f"K from {min(CHOICES['epochs'])} to {max(CHOICES['epochs'])}",
        f"N from {min(CHOICES['batch_size'])} to {max(CHOICES['batch_size'])}",
        f"adds {MORE_BANDIT_SEEDS}",
    )


def test_the_notebook_states_the_commands_numbers(prose):
    import ppo_viz.why_clip.apps as apps

    plan = command.plan_of(committed())
    sweeps = {sweep.name: sweep for sweep in plan.sweeps}
    fresh = 2 * max(sweep.seeds for sweep in plan.sweeps)
    assert_states(
        prose,
        f"on {apps.FRESH_SEEDS} seeds that the study never used (from seed {apps.FRESH_OFFSET:,})",
        f"at each of the {len(sweeps['bandit'].values)} step sizes",
        f"re-run on {apps.FRESH_SEEDS} fresh seeds",
        f"`--seed-offset {fresh}` runs both sets on seeds the committed study never used",
        f"(it used 0–{fresh - 1} on the bandit, 0–{2 * sweeps['cartpole'].seeds - 1} on",
        f"--seed-offset {fresh}`,",
    )
    assert fresh <= apps.FRESH_OFFSET
