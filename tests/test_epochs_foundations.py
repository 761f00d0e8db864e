"""Notebook 3's foundations: the PPO paper's Figure 2, the small-step limit, the KL estimators.

* The line through PPO's update: every plotted curve is minus ppo_clip's loss at those
  parameters, the three objectives share their slope at factor 0, PPO's curve is a lower
  bound, its maximum lies near PPO's own update, and the slider moves exactly that.
* The small-step limit: the runs are the training loop's, PPO's overshoot halves with the step
  size and its ratios end at the hard constraint's optimum; the clip-only objective's do not.
* The KL estimators: k1 and k3 unbiased, k3 never negative, k1 negative on some batches, k2
  biased upwards.
* What the notebook says about all three, as claims on the same computations.
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction

import nbformat
import numpy as np
import pytest
from epochs_rule import drifting_problems, every_arm_drawn_twice, first_seed, one_signed_arms
from helpers import assert_states, markdown_of, plain
from hypothesis import given, settings
from hypothesis import strategies as st
from test_epochs import NOTEBOOK

import ppo_clip
from bandit import ARM_MEANS, KL_TERMS, approx_kl, exact_kl, softmax
from ppo_clip import OBJECTIVES
from ppo_viz.epochs import InterpolationExplorer
from ppo_viz.epochs.app import EPS_RANGE, value_range
from ppo_viz.epochs.foundations import (
    DRIFTING_SEED,
    FACTORS,
    STEP_SIZES,
    STUDY_BATCHES,
    estimator_studies,
    ppo_update_line,
    small_step_study,
)
from ppo_viz.epochs.training import (
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_STEP_SIZE,
    HALVING_FROM,
    HARD_MARGIN,
    TOTAL_MOVEMENT,
    Settings,
    arm_sums,
    batch_of,
    draw_batches,
    hard_constraint_optimum,
    run_all,
)
from ppo_viz.numbers import rounded

EPS = DEFAULT_EPS
K = len(ARM_MEANS)


@pytest.fixture(scope="module")
def prose() -> str:
    return markdown_of(NOTEBOOK)


@pytest.fixture(scope="module")
def line():
    return ppo_update_line()


@pytest.fixture(scope="module")
def explorer() -> InterpolationExplorer:
    return InterpolationExplorer()


def module_objective(line, objective: str, factor: float, eps: float) -> float:
    """Minus ppo_clip's loss at theta(factor): what the figure must plot there."""
    b = line.batch
    logp = b.logp(line.logits_at(factor))
    return -ppo_clip.surrogate_loss(logp, b.logp_old, b.advantages, eps, objective=objective)


# --------------------------------------------------------------------------
# The line through PPO's update (the PPO paper's Figure 2)
# --------------------------------------------------------------------------


def test_the_line_runs_from_the_old_policy_through_ppos_default_update(line, prose):
    run = run_all(Settings())["clipped"]
    np.testing.assert_array_equal(line.start, np.zeros(K))
    np.testing.assert_array_equal(line.end, run.logits[-1])
    np.testing.assert_array_equal(line.factors, FACTORS)
    assert {0.0, 1.0} <= set(line.factors)
    step = line.factors[1] - line.factors[0]
    assert_states(
        prose,
        f"factors are ${line.factors[0]:g}$ to ${line.factors[-1]:g}$ in steps of ${step:.2f}$",
    )


@pytest.mark.parametrize("eps", [0.2, 0.07, 0.13, 0.31, 0.45])
def test_the_curves_are_minus_ppo_clips_loss_and_the_marker_and_readout_show_their_maximum(
    explorer, eps
):
    explorer.controls["figure2_eps"].value = eps
    for objective, artist in explorer.curves.items():
        expected = [module_objective(explorer.line, objective, t, eps) for t in FACTORS]
        np.testing.assert_array_equal(artist.get_ydata(), expected)
    kl = [exact_kl(softmax(np.zeros(K)), softmax(explorer.line.logits_at(t))) for t in FACTORS]
    np.testing.assert_allclose(explorer.line.kl, kl, rtol=1e-12, atol=1e-18)
    factor, value, kl = explorer.line.peak(eps)
    assert value == explorer.curves["clipped"].get_ydata().max()
    assert list(explorer.peak.get_xdata()) == [factor]
    assert f"largest at t = {rounded(factor, 3)}" in plain(explorer.readout.value)
    assert f"KL(π_old ‖ π_θ) = {rounded(kl, 3)}" in plain(explorer.readout.value)
    assert explorer.line.peak(0.0)[0] == 0.0  # and out with ε on a grid of 11 (test below)


@pytest.mark.parametrize("eps", [0.2, 0.05, 0.5])
def test_the_three_objectives_share_their_slope_at_factor_0(line, eps):
    h = 1e-6
    slopes = [
        (module_objective(line, o, h, eps) - module_objective(line, o, -h, eps)) / (2 * h)
        for o in OBJECTIVES
    ]
    assert slopes[0] > 0
    np.testing.assert_allclose(slopes, slopes[0], rtol=1e-6)


@pytest.mark.parametrize("eps", np.linspace(*EPS_RANGE, 6))
def test_ppos_curve_is_a_pessimistic_bound_and_every_curve_fits_the_axes(line, eps):
    clipped, clip_only, unclipped = (
        line.objective(o, eps) for o in ("clipped", "clip_only", "unclipped")
    )
    assert (clipped <= unclipped).all()
    assert (clipped <= clip_only).all()
    low, high = value_range(line)
    for curve in (clipped, clip_only, unclipped, line.kl):
        assert low < curve.min()
        assert curve.max() < high


def test_what_the_notebook_says_about_the_line(line):
    clipped, clip_only, unclipped = (
        line.objective(o, EPS) for o in ("clipped", "clip_only", "unclipped")
    )
    ratios = np.exp(line.sample_logps - line.batch.logp_old)
    inside = ((ratios >= 1 - EPS) & (ratios <= 1 + EPS)).all(axis=1)
    same = (clipped == unclipped) & (clip_only == unclipped)
    np.testing.assert_array_equal(same, inside)  # the same exactly while no ratio left the band
    b = line.batch
    for logp in line.sample_logps:
        terms = ppo_clip.clip_breakdown(logp, b.logp_old, b.advantages, EPS)
        hurt = ((b.advantages > 0) & (terms.ratio < 1 - EPS)) | (
            (b.advantages < 0) & (terms.ratio > 1 + EPS)
        )
        assert (terms.clipped_term[hurt] > terms.unclipped_term[hurt]).all()  # optimistic
    # The same around t = 0, such samples on the line (12); where PPO's objective peaks and falls,
    # the unclipped one climbs, and ε moves the peak (6): points of MISLEADING_SEED's rule
    # (test_the_starting_batch_meets_the_documented_rule).


def test_the_line_explorer_refuses_a_bad_eps():
    """A NaN set on its slider is refused as on every app's (tests/test_app.py)."""
    with pytest.raises(ValueError, match=r"eps must be between 0 and 0\.5, got 0\.9"):
        InterpolationExplorer(eps=0.9)
    with pytest.raises(TypeError, match="eps must be a number, got str"):
        InterpolationExplorer(eps="0.2")


# --------------------------------------------------------------------------
# The small-step limit
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study():
    return small_step_study()


def test_a_study_run_is_the_training_loops_run_on_each_batch_side_by_side():
    expected = run_all(Settings())["clipped"].arm_ratios()
    batches = batch_of(Settings().seed), draw_batches([Settings().seed, 0, 1])
    alone, together = (
        small_step_study(("clipped",), (0.5,), total=15.0, batch=b)["clipped"][0] for b in batches
    )  # 0.5 x 30 epochs, as the default run
    np.testing.assert_array_equal(alone.arm_ratios, expected)
    np.testing.assert_allclose(together.arm_ratios[:, 0], expected, rtol=1e-12)
    with pytest.raises(ValueError, match="whole number of epochs"):
        small_step_study(("clipped",), (0.3,))


def test_the_study_keeps_the_total_movement_and_the_prose_names_its_numbers(study, prose):
    """The runs behave as the prose says on the batch by points (4) and (5) of MISLEADING_SEED's
    rule (tests/epochs_rule.py), whose step size 2 is the left panel's."""
    np.testing.assert_array_equal(np.diff(np.log2(STEP_SIZES)), -1.0)  # halving each time
    assert STEP_SIZES[1] == 2.0
    assert_states(
        prose,
        f"from {Fraction(STEP_SIZES[0])} down to {Fraction(STEP_SIZES[-1])}, halving each time",
        f"stays {TOTAL_MOVEMENT:g}",
        f"{DEFAULT_STEP_SIZE:g} × {DEFAULT_EPOCHS} = {DEFAULT_STEP_SIZE * DEFAULT_EPOCHS:g}",
        f"never more than {HARD_MARGIN:g} outside the band",
        f"At step size {Fraction(STEP_SIZES[-1])}",
        f"At step size {Fraction(STEP_SIZES[1])}",
        f"from step size {HALVING_FROM:g} down, PPO's largest excursion roughly halves",
    )
    for runs in study.values():
        for run, step in zip(runs, STEP_SIZES, strict=True):
            assert run.step_size == step
            assert run.step_size * run.n_epochs == TOTAL_MOVEMENT
            assert run.movement[-1] == TOTAL_MOVEMENT


def test_the_small_step_figure_shows_every_ratio_of_its_runs():
    """Notebook 3's left and middle panels set their y limits from the runs they draw, so the
    step-size-2 peaks the prose calls "well past the edge" are on screen."""
    code = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    figure_cell = next(source for source in code if "drift_seed = DRIFTING_SEED" in source)
    namespace = {"seed": Settings().seed}
    exec(code[0], namespace)  # the notebook's imports
    exec(figure_cell.replace("plt.show()", "pass"), namespace)
    soft, hard, _ = namespace["figure"].axes[:3]
    for ax, run in zip((soft, hard), namespace["shown"], strict=True):
        low, high = ax.get_ylim()
        assert low < run.arm_ratios.min()
        assert run.arm_ratios.max() < high
    namespace["plt"].close("all")


def test_a_one_signed_arm_can_drift_while_another_arm_moves(prose):
    """Notebook 3's dashed line: DRIFTING_SEED is the first seed whose batch meets its rule,
    tests/epochs_rule.py's (that MISLEADING_SEED's has no one-signed arm: its point (1)). Not
    every one-signed arm drifts: on the first batch with every arm drawn twice and an arm of one
    sign, the notebook's ``calm_seed``, every arm ends at an edge, still, and the band is hard."""
    assert drifting_problems(DRIFTING_SEED, every=True) == []
    assert first_seed(drifting_problems, stop=DRIFTING_SEED + 1) == DRIFTING_SEED
    batches = map(batch_of, itertools.count())
    calm = next(s for s, b in enumerate(batches) if every_arm_drawn_twice(b) and one_signed_arms(b))
    code = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    assert any(f"calm_seed = {calm}  #" in source for source in code)
    (run,) = small_step_study(("clipped",), STEP_SIZES[-1:], batch=batch_of(calm))["clipped"]
    assert run.largest_excursion <= HARD_MARGIN
    np.testing.assert_allclose(np.abs(run.arm_ratios[-1] - 1), EPS, atol=HARD_MARGIN)  # the edges
    np.testing.assert_allclose(
        run.arm_ratios[-1], run.arm_ratios[run.n_epochs // 2], atol=HARD_MARGIN
    )
    assert_states(
        prose, "it *can* drift", f"On seed {calm}, the first batch with every arm drawn twice"
    )


def test_the_hard_constraint_optimum_beats_every_other_ratio_vector_in_the_band():
    batch = batch_of(Settings().seed)
    optimum, sums = hard_constraint_optimum(batch, EPS), arm_sums(batch)
    assert (np.abs(optimum - 1) <= EPS + 1e-15).all()  # in the band
    rng = np.random.default_rng(0)
    candidates = rng.uniform(1 - EPS, 1 + EPS, size=(20000, K))
    candidates[:, -1] = K - candidates[:, :-1].sum(axis=1)  # the probabilities sum to one
    feasible = candidates[np.abs(candidates[:, -1] - 1) <= EPS]
    assert len(feasible) > 500
    assert (feasible @ sums <= optimum @ sums + 1e-12).all()
    assert optimum.mean() == pytest.approx(1.0)
    ranked = np.argsort(-sums)
    assert optimum[ranked[0]] == pytest.approx(1 + EPS)  # the largest advantage sum: top edge


# --------------------------------------------------------------------------
# The KL estimators
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def studies():
    runs = run_all(Settings())
    return estimator_studies(
        {"PPO's policy": runs["clipped"].logits[-1], "unclipped": runs["unclipped"].logits[-1]}
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-30.0, 30.0), min_size=1, max_size=20))
def test_the_three_terms_are_their_formulas_and_k3_is_never_negative(log_ratios):
    log_ratio = np.array(log_ratios)
    np.testing.assert_array_equal(KL_TERMS["k1"](log_ratio), -log_ratio)
    np.testing.assert_array_equal(KL_TERMS["k2"](log_ratio), log_ratio**2 / 2)
    k3 = KL_TERMS["k3"](log_ratio)
    np.testing.assert_allclose(k3, (np.exp(log_ratio) - 1) - log_ratio, rtol=1e-9, atol=1e-15)
    assert (k3 >= 0).all()
    assert approx_kl(log_ratio) == k3.mean()


def test_the_estimates_use_each_batchs_ratios(studies):
    logits = run_all(Settings())["clipped"].logits[-1]
    batch = batch_of(7)
    log_ratio = batch.logp(logits) - batch.logp_old
    for name, term in KL_TERMS.items():
        assert studies[0].estimates[name][7] == pytest.approx(term(log_ratio).mean(), rel=1e-12)


def test_what_the_notebook_says_about_the_estimators(studies, prose):
    for study in studies:
        assert study.estimates["k1"].size == STUDY_BATCHES
        assert abs(study.bias_in_standard_errors("k1")) < 3
        assert abs(study.bias_in_standard_errors("k3")) < 3
        assert (study.estimates["k3"] >= 0).all()
        assert (study.estimates["k2"] >= 0).all()
        assert study.estimates["k3"].std() < study.estimates["k1"].std()  # k3 steadier
    ppo = studies[0]
    assert ppo.estimates["k1"].std(ddof=1) > ppo.exact  # spreads by more than the KL itself
    assert np.count_nonzero(ppo.estimates["k1"] < 0) > STUDY_BATCHES / 20  # "many batches"
    near, far = (abs(s.estimates["k2"].mean() - s.exact) for s in studies)
    assert far > 5 * near  # the bias grows with the distance
    assert abs(studies[1].bias_in_standard_errors("k2")) > 5  # many standard errors, far away
    assert_states(
        prose, f"{STUDY_BATCHES:,} fresh batches", f"batch seeds 0 to {STUDY_BATCHES - 1}"
    )


def test_the_estimator_table_lists_each_policy_and_estimator(studies):
    from ppo_viz.epochs import kl_estimator_table

    shown = plain(kl_estimator_table(studies).data)
    k1 = studies[0].estimates["k1"]
    assert f"{np.count_nonzero(k1 < 0)} of {k1.size}" in shown
    assert f"PPO's policy ({rounded(studies[0].exact, 3)})" in shown
    assert "k3 = (r − 1) − log r" in shown


# --------------------------------------------------------------------------
# The notebook's other statements
# --------------------------------------------------------------------------


def test_the_notebook_names_its_sources_in_a_list_at_the_end(prose):
    """What codes log and stop on was read at these commits; hashes and paths stay in Sources."""
    text, sources = prose.split("## Sources")
    assert_states(
        sources,
        "`spinup/algos/pytorch/ppo/ppo.py` at commit 038665d",
        "`stable_baselines3/ppo/ppo.py` at commit e05d2db, lines 262–271",
        "`cleanrl/ppo.py` at commit fe8d8a0, lines 254–257",
        "`baselines/ppo2/model.py` (commit ea25b9e)",
        "arXiv 2005.12729",
        "arXiv 1811.02553",
        "arXiv 2006.05990",
    )
    assert not re.search(r"commit [0-9a-f]{7}|\w+/\w+\.py", text)


def test_the_details_for_implementers_are_collapsed_and_true():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    details = [
        c.source for c in notebook.cells if "<summary>For implementers</summary>" in c.source
    ]
    assert len(details) == 1
    assert details[0].startswith("<details><summary>For implementers</summary>")
    assert details[0].rstrip().endswith("</details>")
    on_edge = ppo_clip.ratio_sweep([1 + EPS], advantage=1.0, eps=EPS)
    assert not on_edge.is_clipped[0]
    assert on_edge.grad[0] == -(1 + EPS)  # the gradient from inside the band
    log_ratio = np.array([1e-20, 3e-17])  # (r - 1) - log r < 0 once r rounds to exactly 1 ...
    naive = (np.exp(log_ratio) - 1) - log_ratio
    assert naive[0] == -1e-20
    assert (naive < 0).all()
    assert (KL_TERMS["k3"](log_ratio) >= 0).all()  # ... but not as bandit writes k3
