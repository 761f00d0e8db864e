"""Notebook 3's foundations: the PPO paper's Figure 2, the small-step limit, the KL estimators.

* The line through PPO's update: every plotted curve is minus ppo_clip's
  loss at those parameters, the three objectives share their slope at
  factor 0 (central finite differences), PPO's curve is a lower bound, and
  the app's eps slider moves exactly that.
* The small-step limit: the runs are the training loop's, the overshoot
  shrinks with the step size, the ratios end at the hard constraint's optimum.
* The KL estimators: k1 and k3 unbiased, k3 never negative, k1 negative on
  some batch, k2 biased upwards.
* What the notebook says about all three, sentence by sentence, and the
  corrected statements (early stopping, the summary table, the details for
  implementers).
"""

from __future__ import annotations

import base64
import itertools

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from test_epochs import NOTEBOOK, assert_says, outside_band

import ppo_clip
from ppo_viz.app import MAIN_CONTROL, InputError
from ppo_viz.epochs import (
    ARM_MEANS,
    KL_TERMS,
    OBJECTIVES,
    STEP_SIZES,
    TOTAL_MOVEMENT,
    EpochsExplorer,
    InterpolationExplorer,
    Settings,
    approx_kl_k3,
    clipped_peak,
    default_bandit,
    draw_batch,
    estimator_studies,
    exact_kl,
    hard_constraint_optimum,
    kl_estimates,
    kl_estimator_table,
    ppo_update_line,
    run_all,
    small_step_study,
    softmax,
)
from ppo_viz.epochs.interpolation import EPS_RANGE
from ppo_viz.epochs.interpolation_app import value_range
from ppo_viz.epochs.small_steps import run_with_step_size
from ppo_viz.export import make_static
from ppo_viz.numbers import rounded
from ppo_viz.style import SLIDE_DPI, SLIDE_SIZE

EPS = ppo_clip.DEFAULT_EPS
ARM_2 = 2


@pytest.fixture(scope="module")
def prose() -> str:
    """The notebook's markdown, with every run of white space made one space."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    return " ".join(" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")


@pytest.fixture(scope="module")
def line():
    return ppo_update_line()


@pytest.fixture
def explorer() -> InterpolationExplorer:
    return InterpolationExplorer()


def module_objective(line, objective: str, factor: float, eps: float) -> float:
    """Minus ppo_clip's loss at theta(factor): what the figure must plot there."""
    batch = line.batch
    logp = batch.sample_logp(line.start + factor * (line.end - line.start))
    return -ppo_clip.surrogate_loss(
        logp, batch.logp_old, batch.advantages, eps, objective=objective
    )


# --------------------------------------------------------------------------
# The line through PPO's update (the PPO paper's Figure 2)
# --------------------------------------------------------------------------


def test_the_line_runs_from_the_old_policy_through_ppo_s_default_update(line):
    run = run_all(Settings())["clipped"]
    np.testing.assert_array_equal(line.start, default_bandit().old_logits)
    np.testing.assert_array_equal(line.end, run.logits[-1])
    assert (run.epochs_run, run.settings.step_size, run.settings.eps) == (30, 0.5, EPS)
    np.testing.assert_array_equal(line.factors, np.arange(-50, 151) / 50)  # as the details say
    assert {0.0, 1.0} <= set(line.factors)
    assert (line.factors[0], line.factors[-1]) == (-1.0, 3.0)


@pytest.mark.parametrize("eps", [0.2, 0.07, 0.45])
def test_every_plotted_curve_is_minus_ppo_clip_s_loss_at_those_parameters(explorer, eps):
    explorer.eps.value = eps
    plot = explorer.plot
    lines = {"unclipped": plot.unclipped_line, **plot.moving}
    for objective, artist in lines.items():
        np.testing.assert_array_equal(artist.get_xdata(), plot.line.factors)
        expected = [module_objective(plot.line, objective, t, eps) for t in plot.line.factors]
        np.testing.assert_array_equal(artist.get_ydata(), expected)
    old = default_bandit().old_probs
    kl = [exact_kl(old, softmax(plot.line.logits_at(t))) for t in plot.line.factors]
    np.testing.assert_array_equal(plot.kl_line.get_ydata(), kl)


@pytest.mark.parametrize("eps", [0.2, 0.05, 0.5])
def test_the_three_objectives_share_their_slope_at_factor_0(line, eps):
    slopes = {o: line.start_slope(o, eps) for o in OBJECTIVES}
    assert slopes["clipped"] == slopes["unclipped"] == slopes["clip_only"] > 0
    h = 1e-6
    for objective in OBJECTIVES:
        central = (
            module_objective(line, objective, h, eps) - module_objective(line, objective, -h, eps)
        ) / (2 * h)
        assert central == pytest.approx(slopes[objective], rel=1e-6)
        # The plotted curve's own central difference across factor 0 agrees as well.
        curve = line.objective(objective, eps)
        zero = int(np.flatnonzero(line.factors == 0.0)[0])
        step = line.factors[zero + 1] - line.factors[zero - 1]
        plotted = (curve[zero + 1] - curve[zero - 1]) / step
        assert plotted == pytest.approx(slopes[objective], rel=1e-3)


@pytest.mark.parametrize("eps", np.linspace(*EPS_RANGE, 11))
def test_ppo_s_curve_is_a_pessimistic_bound_and_every_curve_fits_the_axes(line, eps):
    clipped = line.objective("clipped", eps)
    assert (clipped <= line.unclipped).all()
    assert (clipped <= line.objective("clip_only", eps)).all()
    low, high = value_range(line)
    for curve in (clipped, line.objective("clip_only", eps), line.unclipped, line.kl):
        assert low < curve.min()
        assert curve.max() < high


def test_the_curves_coincide_exactly_where_every_ratio_is_in_the_band(line):
    lower, upper = ppo_clip.clip_band(EPS)
    clipped, clip_only = line.objective("clipped", EPS), line.objective("clip_only", EPS)
    for index, factor in enumerate(line.factors):
        ratios = np.exp(line.sample_logps[index] - line.batch.logp_old)
        inside = ((ratios >= lower) & (ratios <= upper)).all()
        same = clipped[index] == line.unclipped[index] == clip_only[index]
        assert same == inside, factor


@pytest.mark.parametrize("eps", [0.2, 0.13, 0.31])
def test_the_marker_and_readout_show_the_clipped_curve_s_maximum(explorer, eps):
    explorer.eps.value = eps
    plot = explorer.plot
    clipped = plot.moving["clipped"].get_ydata()
    best = int(np.argmax(clipped))
    assert plot.peak_marker.get_xdata()[0] == plot.line.factors[best]
    assert plot.peak_marker.get_ydata()[0] == clipped.max()
    assert plot.peak.kl == plot.line.kl[best]
    assert plot.peak_text.get_text() == f"PPO's maximum\nKL {rounded(plot.line.kl[best], 3)}"
    readout = explorer.readout.value
    assert f"largest at t = <b>{rounded(plot.line.factors[best], 3)}</b>" in readout
    assert f"KL(π_old ‖ π_θ) = {rounded(plot.line.kl[best], 3)}" in readout


def test_the_maximum_moves_out_with_eps(line):
    peaks = [clipped_peak(line, line.objective("clipped", e)) for e in np.linspace(0, 0.5, 11)]
    assert peaks[0].factor == 0.0
    assert all(a.factor < b.factor and a.kl < b.kl for a, b in itertools.pairwise(peaks))


def test_the_explorer_carries_its_own_control_name_and_refuses_a_bad_eps(explorer):
    assert MAIN_CONTROL in explorer.eps._dom_classes
    assert "ppo-control-figure2-eps" in explorer.eps._dom_classes
    assert "ppo-control-eps" not in explorer.eps._dom_classes  # the epochs explorer's name
    with pytest.raises(InputError, match=r"eps must be between 0 and 0\.5, got 0\.9"):
        InterpolationExplorer(eps=0.9)
    with pytest.raises(InputError, match="eps must be a number, got str"):
        InterpolationExplorer(eps="0.2")


def test_the_explorer_saves_a_slide_and_falls_back_to_its_figure(explorer, tmp_path):
    explorer.eps.value = 0.3
    png, svg = explorer.save(tmp_path / "line")
    assert Image.open(png).size == (int(SLIDE_SIZE[0] * SLIDE_DPI), int(SLIDE_SIZE[1] * SLIDE_DPI))
    assert svg.read_text().startswith("<?xml")
    fallback = explorer.static_fallback()
    assert fallback.png == explorer.view.png
    assert "largest at t = <b>1.46</b>" in fallback.html


def test_what_the_notebook_says_about_the_line(prose, line):
    run = run_all(Settings())["clipped"]
    assert_says(
        prose,
        f"Here $\\theta_\\text{{PPO}}$ is the logits after the default PPO run above "
        f"({run.epochs_run} epochs of step size {run.settings.step_size:g} with "
        f"$\\epsilon = {run.settings.eps:g}$ on the batch of seed {run.settings.seed}):",
    )
    clipped, clip_only = line.objective("clipped", EPS), line.objective("clip_only", EPS)
    same = (clipped == line.unclipped) & (clip_only == line.unclipped)
    zero = int(np.flatnonzero(line.factors == 0.0)[0])
    first = zero - int(np.argmin(same[zero::-1]))
    last = zero + int(np.argmin(same[zero:])) - 1
    assert same[first + 1 : last + 1].all()
    assert not same[first]
    assert not same[last + 1]
    start, end = line.factors[first + 1], line.factors[last]
    assert_says(
        prose,
        f"at $\\epsilon = {EPS:g}$ the three curves are the same from $t = {start:g}$ to "
        f"$t = {end:g}$, for as long as no ratio has left the band.",
    )
    below = line.factors < start
    assert (clip_only[below] > line.unclipped[below]).all()
    assert_says(prose, f"Going backward, below $t = {start:g}$, the clip-only curve rises *above*")
    peak = clipped_peak(line, clipped)
    update = int(np.flatnonzero(line.factors == 1.0)[0])
    assert peak.factor < 1.0
    assert_says(
        prose,
        f"At $\\epsilon = {EPS:g}$ PPO's objective is largest at $t = {peak.factor:g}$, where the "
        f"KL from the old policy is {rounded(peak.kl, 3)}, just short of PPO's own update at "
        f"$t = 1$ (KL {rounded(line.kl[update], 3)}).",
    )
    after = line.factors > peak.factor
    negative = after & (clipped < 0)
    below_start = float(line.factors[negative][0])
    assert (clipped[line.factors >= below_start] < 0).all()
    assert (clipped[(line.factors >= 0) & (line.factors < below_start)] >= 0).all()
    assert (np.diff(line.unclipped[line.factors >= 0]) > 0).all()
    assert_says(
        prose,
        f"from $t = {below_start:g}$ on it is below where it started, while the unclipped "
        f"surrogate keeps climbing, to {rounded(line.unclipped[-1], 3)} at "
        f"$t = {line.factors[-1]:g}$, where the KL is {rounded(line.kl[-1], 3)}.",
    )
    low, high = (clipped_peak(line, line.objective("clipped", e)) for e in (0.1, 0.3))
    assert_says(
        prose,
        f"($t = {low.factor:g}$ at $\\epsilon = 0.1$, $t = {high.factor:g}$ at $\\epsilon = 0.3$)",
    )
    assert_says(prose, f"peaks near a small KL ({rounded(peak.kl, 3)} here)")


# --------------------------------------------------------------------------
# The small-step limit
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study():
    return small_step_study()


def test_a_study_run_is_the_training_loop_s_run():
    """Step size 0.5 for 30 epochs is exactly the explorer's default PPO run."""
    run = run_with_step_size("clipped", 0.5, total=15.0)
    explorer_run = run_all(Settings())["clipped"]
    np.testing.assert_array_equal(run.arm_ratios, explorer_run.arm_ratios())
    np.testing.assert_array_equal(run.exact_kl, explorer_run.exact_kl)
    assert run.largest_excursion == pytest.approx(outside_band(explorer_run.ratios).max())
    with pytest.raises(ValueError, match="whole number of epochs"):
        run_with_step_size("clipped", 0.3)


def test_the_study_keeps_the_total_movement(study):
    assert STEP_SIZES == (4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125)
    for runs in study.values():
        for run, step in zip(runs, STEP_SIZES, strict=True):
            assert run.step_size == step
            assert run.step_size * run.n_epochs == TOTAL_MOVEMENT
            assert run.movement[-1] == TOTAL_MOVEMENT


def test_ppo_s_overshoot_shrinks_in_proportion_to_the_step_size(study):
    excursions = np.array([run.largest_excursion for run in study["clipped"]])
    halvings = excursions[1:] / excursions[:-1]
    assert ((halvings > 0.45) & (halvings < 0.55)).all()
    per_step = excursions / np.array(STEP_SIZES)
    assert ((per_step > 0.10) & (per_step < 0.12)).all()


def test_hard_constraint_optimum_beats_every_other_ratio_vector_in_the_band():
    batch, bandit = draw_batch(2115), default_bandit()
    optimum = hard_constraint_optimum(batch, EPS, bandit)
    np.testing.assert_allclose(optimum, [1.2, 0.8, 1.2, 0.8], atol=1e-12)
    sums = np.bincount(batch.actions, weights=batch.advantages, minlength=4)
    rng = np.random.default_rng(0)
    candidates = rng.uniform(0.8, 1.2, size=(20000, 4))
    candidates[:, 3] = 4.0 - candidates[:, :3].sum(axis=1)  # probabilities sum to one
    feasible = candidates[(candidates[:, 3] >= 0.8) & (candidates[:, 3] <= 1.2)]
    assert len(feasible) > 1000
    assert (feasible @ sums <= optimum @ sums + 1e-12).all()
    assert bandit.old_probs @ optimum == pytest.approx(1.0)


def test_what_the_notebook_says_about_the_small_step_limit(prose, study):
    batch = draw_batch(2115)
    for arm in range(4):
        advantages = batch.advantages[batch.actions == arm]
        assert sorted(set(np.sign(advantages))) == [-1, 1]  # "samples of both signs"
    big = study["clipped"][1]
    assert big.step_size == 2.0
    arm2 = big.arm_ratios[:, ARM_2]
    assert (big.arm_ratios[:2] <= 1 + EPS).all()  # inside the band before the second step
    assert int(np.argmax(arm2)) == 2
    assert_says(
        prose,
        f"With step size 2, PPO's first two steps take arm 2 to {arm2.max():.2f}, "
        f"{arm2.max() - (1 + EPS):.2f} past the edge, before its samples 6 and 7 are clipped, and "
        f"the rest of the run brings it back only to {arm2[-1]:.2f}.",
    )
    small = study["clipped"][-1]
    optimum = hard_constraint_optimum()
    distance = np.abs(small.arm_ratios[-1] - optimum).max()
    assert distance < 0.004
    assert_says(
        prose,
        f"With step size 1/32 no ratio gets more than {small.largest_excursion:.4f} outside the "
        "band.",
    )
    assert_says(
        prose,
        "at the end arms 0 and 2 sit at $1+\\epsilon$ and arms 1 and 3 at $1-\\epsilon$, each "
        "within 0.004.",
    )
    sums = np.bincount(batch.actions, weights=batch.advantages, minlength=4)
    assert list(np.argsort(-sums)[:2]) == [2, 0]
    assert_says(prose, "raises the arms with the largest advantage sums (arm 2, then arm 0)")
    largest = study["clipped"][0].largest_excursion
    assert_says(
        prose,
        f"from {largest:.2f} at step size 4 to {small.largest_excursion:.4f} at 1/32, between "
        "0.10 and 0.12 times the step size throughout.",
    )
    clip_only = [run.largest_excursion for run in study["clip_only"]]
    assert_says(prose, f"at every step size some ratio gets at least {min(clip_only):.3f} outside")
    smallest = study["clip_only"][-1]
    drift = smallest.arm_ratios[:, ARM_2]
    left = int(np.flatnonzero(drift > 1 + EPS)[0])
    assert (np.diff(drift[left:]) >= 0).all()  # carried up with no gradient of its own


def test_the_unclipped_run_s_excursion_does_not_shrink_with_the_step_size():
    """Things to try 7: the unclipped objective has no band to converge to."""
    unclipped = small_step_study(("unclipped",), STEP_SIZES[::3])["unclipped"]
    assert all(run.largest_excursion > 1.5 for run in unclipped)


# --------------------------------------------------------------------------
# The KL estimators
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def studies():
    runs = run_all(Settings())
    return estimator_studies(
        {
            "PPO's policy": runs["clipped"].logits[-1],
            "the unclipped run's policy": runs["unclipped"].logits[-1],
        }
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-30.0, 30.0), min_size=1, max_size=20))
def test_the_three_terms_are_their_formulas_and_k3_is_never_negative(log_ratios):
    log_ratio = np.array(log_ratios)
    np.testing.assert_array_equal(KL_TERMS["k1"](log_ratio), -log_ratio)
    np.testing.assert_array_equal(KL_TERMS["k2"](log_ratio), log_ratio**2 / 2)
    k3 = KL_TERMS["k3"](log_ratio)
    # (r - 1) - log r, to within rounding; and never below 0, even where r rounds to 1.
    np.testing.assert_allclose(k3, (np.exp(log_ratio) - 1) - log_ratio, rtol=1e-9, atol=1e-15)
    assert (k3 >= 0).all()
    assert approx_kl_k3(log_ratio) == k3.mean()


def test_k3_written_naively_dips_below_0_in_float64():
    """The detail for implementers: (r - 1) - log r < 0 once r rounds to exactly 1."""
    log_ratio = np.array([1e-20, 3e-17])
    naive = (np.exp(log_ratio) - 1) - log_ratio
    assert np.exp(1e-20) == 1.0
    assert naive[0] == -1e-20  # the notebook's example
    assert (naive < 0).all()
    assert (KL_TERMS["k3"](log_ratio) >= 0).all()


def test_the_estimates_use_the_batch_s_ratios(studies):
    batch, logits = draw_batch(7), np.array([0.3, -0.1, 0.2, -0.4])
    log_ratio = batch.sample_logp(logits) - batch.logp_old
    estimates = kl_estimates(batch, logits)
    assert estimates["k1"] == pytest.approx(np.mean(-log_ratio), rel=1e-12)
    assert estimates["k3"] == approx_kl_k3(log_ratio)
    ppo_logits = run_all(Settings())["clipped"].logits[-1]
    for name in KL_TERMS:
        assert studies[0].spreads[name].estimates[7] == kl_estimates(batch, ppo_logits)[name]


def test_k1_and_k3_are_unbiased_k2_is_biased_upwards(studies):
    for study in studies:
        assert study.n_batches == 1000
        k1, k2, k3 = (study.spreads[name] for name in ("k1", "k2", "k3"))
        assert abs(k1.bias) < 3 * k1.standard_error
        assert abs(k3.bias) < 3 * k3.standard_error
        assert k2.bias > 5 * k2.standard_error
        assert (k3.estimates >= 0).all()
        assert (k2.estimates >= 0).all()
        assert k1.negative > 0
        assert k3.spread < k1.spread / 4


def test_what_the_notebook_says_about_the_estimators(prose, studies):
    ppo, unclipped = studies
    k1, k2, k3 = (ppo.spreads[name] for name in ("k1", "k2", "k3"))
    assert 2.5 < k1.spread / ppo.exact < 3.0  # "almost three times the KL itself"
    assert_says(
        prose,
        f"On PPO's policy (exact KL {rounded(ppo.exact, 3)}), k1's mean over the "
        f"{ppo.n_batches} batches is {rounded(k1.mean, 3)}, "
        f"{abs(k1.bias) / k1.standard_error:.1f} standard errors from the exact value; but one "
        f"batch's k1 spreads by {rounded(k1.spread, 2)}, almost three times the KL itself, and it "
        f"is negative on {k1.negative} of the {ppo.n_batches} batches.",
    )
    assert k3.negative == 0
    assert_says(
        prose,
        f"Its mean is {rounded(k3.mean, 3)}, {abs(k3.bias) / k3.standard_error:.1f} standard "
        f"errors from the exact value, its spread {k3.spread:.2g}, and it is never "
        "negative.",
    )
    assert_says(
        prose,
        f"It spreads little too ({rounded(k2.spread, 2)}), but its mean lies "
        f"{k2.bias / k2.standard_error:.1f} standard errors above the exact value.",
    )
    far = unclipped.spreads
    assert abs(far["k1"].bias) < 0.1 * far["k1"].standard_error
    assert abs(far["k3"].bias) < 0.1 * far["k3"].standard_error
    assert_says(
        prose,
        f"on the unclipped run's policy (exact KL {rounded(unclipped.exact, 3)}) k2 averages "
        f"{rounded(far['k2'].mean, 3)}, {rounded(far['k2'].bias, 2)} too high, while k1 and k3 "
        "stay within 0.1 standard errors of the exact value.",
    )
    assert_says(
        prose,
        f"evaluates each estimator on 1,000 fresh batches of 12 from the old policy (batch seeds "
        f"0 to {ppo.n_batches - 1})",
    )


def test_the_estimator_table_lists_each_policy_and_estimator(studies):
    table = kl_estimator_table(studies)
    assert len(table.rows) == 6
    html = table._repr_html_()
    k1 = studies[0].spreads["k1"]
    assert f"<td>{k1.negative} of 1000</td>" in html
    assert "PPO&#39;s policy (0.0214)" in html
    assert "k3 = (r − 1) − log r" in repr(table)


# --------------------------------------------------------------------------
# The corrected statements
# --------------------------------------------------------------------------


def test_the_notebook_says_which_codes_stop_early_by_default(prose):
    assert "practical codes also watch" not in prose
    assert_says(
        prose,
        "Because the band is soft, some codes also watch how far the policy has moved and stop the "
        "epochs early: Spinning Up's PPO does so by default, Stable-Baselines3 and CleanRL only "
        "when you set `target_kl`",
    )
    for source in (
        "`spinup/algos/pytorch/ppo/ppo.py` (commit 2092113)",
        "`stable_baselines3/ppo/ppo.py` (commit cef4cf2)",
        "`cleanrl/ppo.py` (commit 020cf0e)",
    ):
        assert_says(prose, source)
    assert_says(prose, "RLHF codes also penalise a KL divergence, but a different one")


def test_seed_10_draws_the_arms_unequally_as_the_notebook_says(prose):
    counts = draw_batch(10).arm_counts()
    assert list(counts) == [3, 2, 2, 5]
    assert_says(prose, "there arm 3 was drawn five times and arms 1 and 2 twice")


def test_the_summary_table_is_where_the_notebook_says_live_and_static(prose):
    assert "table above the figure" not in prose
    assert_says(
        prose, "Between the controls and the figure, the **summary table** gives each run's"
    )
    explorer = EpochsExplorer()
    children = list(explorer.widget.children)
    assert children.index(explorer.summary) < children.index(explorer.view.output)
    bundle = explorer._repr_mimebundle_()
    output = nbformat.v4.new_output("execute_result", data=bundle, execution_count=1)
    static = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[output])])
    html, png = make_static(static, "test").cells[0].outputs
    assert "<caption>After each run" in html.data["text/html"]
    assert base64.b64decode(png.data["image/png"]) == explorer.view.png


def test_the_details_for_implementers_are_collapsed_and_true():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    details = [
        c.source for c in notebook.cells if "<summary>For implementers</summary>" in c.source
    ]
    assert len(details) == 1
    assert details[0].startswith("<details><summary>For implementers</summary>")
    assert details[0].rstrip().endswith("</details>")
    text = " ".join(details[0].split())
    gap = max(np.abs(r.approx_kl - r.exact_kl).max() for r in run_all(Settings()).values())
    assert gap < 1e-15
    assert "over the three default runs they differ by less than $10^{-15}$" in text
    on_edge = ppo_clip.ratio_sweep([1.2], advantage=1.0, eps=EPS)
    assert not on_edge.is_clipped[0]
    assert on_edge.grad[0] == -1.2  # the gradient from inside the band
    assert "`ppo_clip` counts such a sample as not clipped" in text


def test_the_bandit_the_foundations_use_is_notebook_3_s():
    assert tuple(default_bandit().true_means) == ARM_MEANS
