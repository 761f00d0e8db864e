"""Notebook 3: several epochs of PPO on one batch of a 4-armed bandit.

Four groups of tests:

* the toy problem and the training loop: the chain rule through the softmax
  agrees with central finite differences for all three objectives, and each
  epoch is one gradient step on ppo_clip's loss;
* the KL estimates and the early stop;
* every sentence of the notebook that quotes a number about its seeded runs:
  each test computes the numbers, builds the sentence from them and checks
  that the notebook says exactly that sentence;
* the headless app: each control changes the figure to exactly the run with
  the new settings, and a bad entry leaves a message and the last good run.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_rgba
from PIL import Image

import ppo_clip
from ppo_viz.app import MAIN_CONTROL
from ppo_viz.epochs import (
    ARM_COLORS,
    ARM_MEANS,
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_SEED,
    DEFAULT_STEP_SIZE,
    N_SAMPLES,
    OBJECTIVES,
    EpochsExplorer,
    EpochsFigure,
    Run,
    SettingError,
    Settings,
    approx_kl_k3,
    chain_through_softmax,
    default_bandit,
    describe_batch,
    draw_batch,
    exact_kl,
    grad_wrt_logits,
    log_softmax,
    loss_wrt_logits,
    run_all,
    softmax,
    train,
)
from ppo_viz.epochs.bandit import REWARD_NOISE
from ppo_viz.epochs.layout import EPOCH_AXIS_MAX
from ppo_viz.epochs.text import sample_label
from ppo_viz.epochs.training import EPOCHS_RANGE, EPS_RANGE, STEP_SIZE_RANGE, TARGET_KL_RANGE
from ppo_viz.figure_view import figure_to_png
from ppo_viz.numbers import rounded
from ppo_viz.style import SLIDE_DPI, SLIDE_SIZE

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03_epochs_on_one_batch.ipynb"
EPS = DEFAULT_EPS
ARM_2 = 2
SAMPLE_8 = 8  # arm 2, A < 0: the sample its siblings carry out of the band


@pytest.fixture(scope="module")
def default_runs() -> dict[str, Run]:
    return run_all(Settings())


def outside_band(ratios: np.ndarray, eps: float = EPS) -> np.ndarray:
    """How far each ratio is outside [1 - eps, 1 + eps] (negative inside)."""
    return np.maximum(ratios - (1 + eps), (1 - eps) - ratios)


# --------------------------------------------------------------------------
# The toy problem and the loop
# --------------------------------------------------------------------------


def test_batch_is_seeded_sorted_and_its_advantages_are_not_normalized():
    batch, again = draw_batch(DEFAULT_SEED), draw_batch(DEFAULT_SEED)
    np.testing.assert_array_equal(batch.rewards, again.rewards)
    assert not np.array_equal(batch.rewards, draw_batch(DEFAULT_SEED + 1).rewards)
    # A = R - mean(R), exactly, and nothing else (no division by a std).
    np.testing.assert_allclose(batch.advantages, batch.rewards - batch.rewards.mean(), atol=1e-15)
    assert np.std(batch.advantages) != pytest.approx(1.0, abs=0.05)
    # Sorted by arm, then by advantage (best first) inside an arm.
    assert np.all(np.diff(batch.actions) >= 0)
    for arm in range(4):
        assert np.all(np.diff(batch.advantages[batch.actions == arm]) <= 0)
    np.testing.assert_allclose(batch.logp_old, np.log(0.25) * np.ones(batch.n), rtol=1e-15)


def test_softmax_is_stable_and_normalized():
    logits = np.array([1000.0, 0.0, -1000.0, 999.0])
    probs = softmax(logits)
    assert np.isfinite(log_softmax(logits)[:2]).all()
    assert probs.sum() == pytest.approx(1.0)
    assert probs[0] / probs[3] == pytest.approx(np.e)


def test_chain_rule_equals_the_explicit_softmax_jacobian():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=4)
    actions = np.array([0, 0, 1, 2, 3, 3, 3])
    dlogp = rng.normal(size=actions.size)
    probs = softmax(logits)
    jacobian = np.eye(4)[actions] - probs  # d logp_t / d logits_k = [a_t == k] - pi_k
    np.testing.assert_allclose(
        chain_through_softmax(dlogp, actions, probs), dlogp @ jacobian, atol=1e-15
    )


def _states_away_from_kinks(runs: list[Run], margin: float = 1e-5):
    """``(batch, logits, eps)`` of the runs' states with no ratio within ``margin`` of a kink."""
    for run in runs:
        eps = run.settings.eps
        for logits, ratios in zip(run.logits, run.ratios, strict=True):
            if np.min(np.abs(np.abs(ratios - 1.0) - eps)) > margin:
                yield run.batch, logits, eps


def _central_difference(batch, logits, eps, objective, h=1e-6):
    grad = np.zeros_like(logits)
    for k in range(logits.size):
        step = np.zeros_like(logits)
        step[k] = h
        grad[k] = (
            loss_wrt_logits(logits + step, batch, eps, objective)
            - loss_wrt_logits(logits - step, batch, eps, objective)
        ) / (2 * h)
    return grad


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_gradients_agree_with_central_finite_differences_along_the_runs(objective):
    runs = [
        run_all(Settings())[objective],
        run_all(Settings(step_size=3.0))[objective],
        run_all(Settings(eps=0.1, seed=10))[objective],
    ]
    checked = 0
    for batch, logits, eps in _states_away_from_kinks(runs):
        analytic = grad_wrt_logits(logits, batch, eps, objective)
        numeric = _central_difference(batch, logits, eps, objective)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9)
        checked += 1
    assert checked >= 60


@settings(max_examples=60, deadline=None)
@given(
    logits=st.lists(st.floats(-2.0, 2.0), min_size=4, max_size=4),
    eps=st.floats(0.05, 0.5),
    seed=st.integers(0, 200),
    objective=st.sampled_from(OBJECTIVES),
)
def test_gradients_agree_with_finite_differences_at_random_policies(logits, eps, seed, objective):
    batch = draw_batch(seed)
    logits = np.array(logits)
    ratios = softmax(logits)[batch.actions] / 0.25
    assume(np.min(np.abs(np.abs(ratios - 1.0) - eps)) > 1e-4)
    analytic = grad_wrt_logits(logits, batch, eps, objective)
    numeric = _central_difference(batch, logits, eps, objective)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9)
    # Adding a constant to every logit changes nothing, so the gradient sums to 0.
    assert analytic.sum() == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_each_epoch_is_one_gradient_step_on_the_objective_s_loss(objective):
    run = run_all(Settings(step_size=1.0, n_epochs=15))[objective]
    batch, step = run.batch, run.settings.step_size
    for epoch, logits in enumerate(run.logits):
        logp_new = log_softmax(logits)[batch.actions]
        expected = ppo_clip.surrogate_grad(
            logp_new, batch.logp_old, batch.advantages, EPS, objective=objective
        )
        np.testing.assert_array_equal(run.sample_grads[epoch], expected)
        np.testing.assert_allclose(run.ratios[epoch], np.exp(logp_new - batch.logp_old))
        assert run.true_reward[epoch] == pytest.approx(softmax(logits) @ np.array(ARM_MEANS))
        if epoch < run.epochs_run:
            np.testing.assert_array_equal(
                run.logits[epoch + 1],
                logits - step * grad_wrt_logits(logits, batch, EPS, objective),
            )


def test_unclipped_loss_is_linear_in_the_policy_and_favours_arm_2(default_runs):
    """The prose's identity: L = -sum_k pi_k / pi_old_k * (1/N) sum_{a_t = k} A_t."""
    batch = default_runs["unclipped"].batch
    sums = np.bincount(batch.actions, weights=batch.advantages, minlength=4)
    for logits in default_runs["unclipped"].logits[::5]:
        linear = -np.sum(softmax(logits) / 0.25 * sums / batch.n)
        assert loss_wrt_logits(logits, batch, EPS, "unclipped") == pytest.approx(linear, abs=1e-14)
    assert int(np.argmax(sums)) == ARM_2


def test_samples_of_one_arm_share_one_ratio():
    for run in [*run_all(Settings()).values(), *run_all(Settings(seed=10)).values()]:
        for arm in range(4):
            members = run.ratios[:, run.batch.actions == arm]
            assert (members == members[:, :1]).all()


# --------------------------------------------------------------------------
# KL and early stopping
# --------------------------------------------------------------------------


def test_k3_is_the_mean_of_nonnegative_terms_and_exact_kl_is_the_categorical_kl():
    ratio = np.array([0.5, 1.0, 2.0])
    assert approx_kl_k3(np.log(ratio)) == pytest.approx(
        np.mean([0.5 - 1 - np.log(0.5), 0.0, 1.0 - np.log(2.0)])
    )
    old, new = np.array([0.25] * 4), np.array([0.4, 0.3, 0.2, 0.1])
    assert exact_kl(old, new) == pytest.approx(np.sum(old * np.log(old / new)))
    assert exact_kl(old, old) == 0.0
    for run in run_all(Settings(seed=10)).values():
        assert (run.approx_kl >= 0).all()


@pytest.mark.parametrize("target", [0.005, 0.02, 0.05])
def test_early_stop_happens_before_the_step_once_k3_exceeds_the_target(target):
    for objective, run in run_all(Settings(target_kl=target, step_size=1.0)).items():
        free = run_all(Settings(step_size=1.0))[objective]
        stop = run.epochs_run
        assert run.stopped_early == (stop < DEFAULT_EPOCHS)
        assert (run.approx_kl[:-1] <= target).all()
        if run.stopped_early:
            assert run.approx_kl[-1] > target
        np.testing.assert_array_equal(run.logits, free.logits[: stop + 1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"eps": 0.9}, r"^eps must be between 0 and 0\.5, got 0\.9$"),
        ({"step_size": 0.0}, r"^step_size must be between 0\.05 and 4, got 0\.0$"),
        ({"n_epochs": 2.5}, r"^n_epochs must be a whole number, got 2\.5$"),
        ({"seed": "seven"}, r"^seed must be a number, got str$"),
        ({"seed": -1}, r"^seed must be between 0 and 4294967295, got -1$"),
        ({"target_kl": float("nan")}, r"^target_kl must be between 0\.001 and 0\.2, got nan$"),
    ],
)
def test_bad_settings_are_refused_with_a_message_naming_the_argument(kwargs, message):
    with pytest.raises(SettingError, match=message):
        Settings(**kwargs)
    with pytest.raises(SettingError, match=message):
        EpochsExplorer(**kwargs)


# --------------------------------------------------------------------------
# What the notebook says about its seeded runs, sentence by sentence
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prose() -> str:
    """The notebook's markdown, with every run of white space made one space."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    return " ".join(" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")


def assert_says(prose: str, sentence: str) -> None:
    assert " ".join(sentence.split()) in prose, f"the notebook does not say: {sentence}"


def test_the_notebook_describes_the_bandit_it_uses(prose):
    bandit = default_bandit()
    means = ",\\ ".join(f"{mu:.1f}" for mu in ARM_MEANS)
    assert_says(
        prose,
        f"Pulling arm $k$ pays a reward with true mean $\\mu = ({means})$ plus Gaussian noise "
        f"of standard deviation {REWARD_NOISE:g}.",
    )
    assert (bandit.old_logits == 0).all()
    start = bandit.expected_reward(bandit.old_probs)
    assert_says(
        prose,
        f"The **old policy** ($\\theta = 0$) picks every arm with probability $1/{bandit.k}$, "
        f"so its true expected reward is $\\sum_k \\pi(k)\\,\\mu_k = {start:.2f}$.",
    )
    assert_says(prose, f"The old policy draws one batch of $N = {N_SAMPLES}$ pulls.")
    assert_says(
        prose,
        f"same step size ($\\alpha = {DEFAULT_STEP_SIZE:g}$) and $\\epsilon = {DEFAULT_EPS:g}$ "
        f"for {DEFAULT_EPOCHS} epochs.",
    )
    assert_says(
        prose, f"Every panel's epoch axis runs to {EPOCH_AXIS_MAX}, the most the epochs slider"
    )


def test_what_the_notebook_says_about_the_batch(prose):
    batch = draw_batch(DEFAULT_SEED)
    counts = batch.arm_counts()
    means = [batch.rewards[batch.actions == arm].mean() for arm in range(4)]
    sums = np.bincount(batch.actions, weights=batch.advantages, minlength=4)
    assert (counts == 3).all()
    assert_says(prose, "**This batch misleads.** Each arm was drawn three times.")
    assert int(np.argmax(means)) == ARM_2
    assert_says(
        prose,
        f"Arm 2, whose true mean is {ARM_MEANS[ARM_2]:.1f}, had lucky pulls: its batch mean "
        f"reward is {means[ARM_2]:.2f}, the best of the four, and its advantages add up to "
        f"${sums[ARM_2]:+.2f}$.",
    )
    assert int(np.argmax(ARM_MEANS)) == 0
    assert_says(
        prose,
        f"Arm 0, truly the best arm, averages {means[0]:.2f} here and its advantages add up to "
        f"${sums[0]:+.2f}$.",
    )
    assert_says(prose, f"Arms 1 and 3 add up to ${sums[1]:+.2f}$ and ${sums[3]:+.2f}$.")
    assert int(np.argmax(sums)) == ARM_2  # "So the batch says 'play arm 2 more'"
    assert batch.actions[SAMPLE_8] == ARM_2
    assert batch.advantages[SAMPLE_8] < 0 < batch.advantages[SAMPLE_8 - 1]
    assert_says(
        prose,
        f"it drew arm 2 but got a below-average reward ($A = {batch.advantages[SAMPLE_8]:.2f}$)",
    )
    assert_says(prose, f"We chose this batch (seed {DEFAULT_SEED}) *because* it misleads.")


def _final_rewards(seed: int) -> dict[str, float]:
    """Each objective's final true reward at default settings (uncached: many seeds)."""
    batch = draw_batch(seed)
    return {o: train(batch, o, Settings(seed=seed)).true_reward[-1] for o in OBJECTIVES}


def test_the_default_batch_is_a_rare_misleading_one(prose, default_runs):
    seeds = range(300)
    good_arm, unclipped_wins = 0, []
    for seed in seeds:
        batch = draw_batch(seed)
        sums = np.bincount(batch.actions, weights=batch.advantages, minlength=4)
        good_arm += int(np.argmax(sums)) in (0, 1)
        final = _final_rewards(seed)
        unclipped_wins.append(final["unclipped"] > final["clipped"])
    assert_says(
        prose,
        f"over the batch seeds 0 to {seeds[-1]}, the largest advantage sum falls on arm 0 or "
        f"arm 1 in {good_arm} batches, and after {DEFAULT_EPOCHS} epochs the unclipped run ends "
        f"with more true reward than PPO in {sum(unclipped_wins)}.",
    )
    first = 20
    assert all(unclipped_wins[: first + 1])
    assert_says(
        prose,
        f"Try batch seeds 0 to {first}. On all of them, the unclipped run ends with a higher "
        "true reward than PPO.",
    )
    assert default_runs["unclipped"].true_reward[-1] < default_runs["clipped"].true_reward[-1]


def test_what_the_notebook_says_about_the_first_epochs(prose, default_runs):
    ppo = default_runs["clipped"]
    parted = min(
        int(np.flatnonzero((default_runs[o].logits != ppo.logits).any(axis=1))[0])
        for o in ("unclipped", "clip_only")
    )
    assert_says(prose, f"**Epochs 0 to {parted - 1}: the three runs are identical.**")
    arm2 = ppo.arm_ratios()[:, ARM_2]
    assert (ppo.arm_ratios()[:5] <= 1 + EPS).all()
    assert arm2[5] > 1 + EPS
    assert_says(
        prose,
        f"Arm 2's ratio climbs to {arm2[4]:.3f} after four epochs and to {arm2[5]:.3f} after "
        "the fifth step, the first one to cross $1+\\epsilon$.",
    )


def test_what_the_notebook_says_about_the_unclipped_run(prose, default_runs):
    run = default_runs["unclipped"]
    arm2 = run.arm_ratios()[:, ARM_2]
    others = np.delete(run.arm_ratios()[-1], ARM_2)
    assert (np.diff(arm2) > 0).all()
    assert_says(
        prose,
        f"Its ratio rises every single epoch, to {arm2[-1]:.2f} after {run.epochs_run} epochs "
        f"({arm2[-1] - (1 + EPS):.1f} above the band's edge), while the other three arms fall "
        f"to between {others.min():.2f} and {others.max():.2f}.",
    )
    assert_says(prose, f"The KL from the old policy reaches {run.exact_kl[-1]:.2f}.")
    losses = [loss_wrt_logits(logits, run.batch, EPS, "unclipped") for logits in run.logits]
    assert (np.diff(losses) < 0).all()
    assert (np.diff(run.true_reward) < 0).all()
    assert_says(
        prose,
        "The loss on the batch improves every epoch, yet the true expected reward *falls* every "
        f"epoch, from {run.true_reward[0]:.3f} to {run.true_reward[-1]:.3f}, below where it "
        "started.",
    )


def test_what_the_notebook_says_about_ppo(prose, default_runs):
    run = default_runs["clipped"]
    ratios = run.arm_ratios()
    assert_says(
        prose,
        f"After epoch 5 arm 2's ratio stays between {ratios[5:, ARM_2].min():.2f} and "
        f"{ratios[5:, ARM_2].max():.2f} up to epoch {run.epochs_run}, and arm 1 settles near the "
        f"lower edge (between {ratios[9:, 1].min():.2f} and {ratios[9:, 1].max():.2f} from "
        "epoch 9).",
    )
    assert_says(
        prose,
        f"Over all {run.epochs_run} epochs no ratio gets more than "
        f"{outside_band(run.ratios).max():.3f} outside the band.",
    )
    # PPO's clip fraction is exactly where its gradients vanish (its line in the panel).
    fractions = run.clip_fraction
    np.testing.assert_array_equal(run.zero_grad_fraction, fractions)
    first_clipped = int(np.flatnonzero(fractions)[0])
    zero_after = int(np.count_nonzero(fractions[first_clipped:] == 0))
    assert zero_after == 2
    assert_says(
        prose,
        f"is 0 for epochs 0 to {first_clipped - 1}; from epoch {first_clipped} it is nonzero in "
        f"all but two epochs and never above {Fraction(fractions.max()).limit_denominator(12)}.",
    )
    dip = int(np.argmin(run.true_reward))
    assert run.true_reward[-1] > run.true_reward[0]
    assert_says(
        prose,
        f"The KL never exceeds {run.exact_kl.max():.3f} and the true reward ends at "
        f"{run.true_reward[-1]:.3f}, above the start (after a dip to "
        f"{run.true_reward[dip]:.3f} at epoch {dip}).",
    )


def test_ppo_keeps_the_gradient_of_the_sample_that_moved_the_wrong_way(prose, default_runs):
    run = default_runs["clipped"]
    assert not run.zero_grad[:, SAMPLE_8].any()  # yellow in every epoch
    assert (run.sample_grads[:, SAMPLE_8] > 0).all()  # its gradient lowers arm 2
    above = run.arm_ratios()[:, ARM_2] > 1 + EPS
    np.testing.assert_array_equal(run.zero_grad[:, 6], above)
    np.testing.assert_array_equal(run.zero_grad[:, 7], above)
    assert_says(prose, f"Samples 6 and 7 ($A>0$) turn white once the ratio passes {1 + EPS:g}")


def test_what_the_notebook_says_about_the_clip_only_run(prose, default_runs):
    run = default_runs["clip_only"]
    zero = run.zero_grad[:, SAMPLE_8]
    vanishes = int(np.flatnonzero(zero)[0])
    assert zero[vanishes:].all()
    assert_says(
        prose, f"sample 8's gradient vanishes at epoch {vanishes} together with its siblings'"
    )
    assert_says(
        prose,
        f"sample 8 has no gradient from epoch {vanishes} to epoch {run.epochs_run}.",
    )
    arm2 = run.arm_ratios()[:, ARM_2]
    assert run.arms_without_gradient()[vanishes:, ARM_2].all()  # the hollow circles
    assert (np.diff(arm2[vanishes:]) >= 0).all()
    assert_says(
        prose,
        f"arm 2's ratio keeps drifting up, from {arm2[vanishes]:.2f} to {arm2[-1]:.2f}, with no "
        "sample of arm 2 pushing at all",
    )
    silent = run.zero_grad.sum(axis=1)
    settled = int(np.flatnonzero(silent != silent[-1])[-1]) + 1
    assert_says(
        prose,
        f"By epoch {settled}, {silent[-1]} of the {run.batch.n} samples have no gradient (the "
        f"orange line at {run.zero_grad_fraction[-1]:.2f}).",
    )
    assert (run.clip_fraction[settled:] == 5 / 12).all()  # PPO's rule would say 5, not 9
    ppo = default_runs["clipped"]
    assert run.true_reward[-1] < ppo.true_reward[-1]
    assert_says(
        prose,
        f"The true reward ends at {run.true_reward[-1]:.3f}, below PPO's "
        f"{ppo.true_reward[-1]:.3f}.",
    )


def test_what_the_notebook_says_about_a_big_step_size(prose):
    step = 3.0
    ratios = run_all(Settings(step_size=step))["clipped"].arm_ratios()
    highest = ratios[:, ARM_2].max()
    assert_says(
        prose,
        f"With step size {step:.1f} (everything else the same), PPO's very first step, computed "
        f"at $r = 1$ where nothing is clipped, already takes arm 2 to {ratios[1, ARM_2]:.2f}; "
        f"over the 30 epochs arm 2 reaches {highest:.2f}, {highest - (1 + EPS):.2f} past the "
        f"edge, and arm 1 drops to {ratios[:, 1].min():.2f}.",
    )


def test_what_the_notebook_says_about_early_stopping(prose, default_runs):
    target = 0.02
    runs = run_all(Settings(target_kl=target))
    assert_says(
        prose,
        f"With a target of {target:g} and the default step size, the unclipped run stops after "
        f"{runs['unclipped'].epochs_run} epochs with a true reward of "
        f"{runs['unclipped'].true_reward[-1]:.3f} instead of "
        f"{default_runs['unclipped'].true_reward[-1]:.3f}, the clip-only run after "
        f"{runs['clip_only'].epochs_run} epochs, and PPO after {runs['clipped'].epochs_run}.",
    )
    big = run_all(Settings(step_size=3.0, target_kl=target))["clipped"]
    assert_says(
        prose,
        f"at step size 3.0 PPO stops after {big.epochs_run} epochs, but its arm 2 has already "
        f"reached {big.ratios.max():.3f} at that point.",
    )
    # Every arm appears three times, so k3 equals the exact KL; on seed 10 they part.
    for run in default_runs.values():
        np.testing.assert_allclose(run.approx_kl, run.exact_kl, rtol=0, atol=1e-12)
    for objective in ("clipped", "unclipped"):
        run = run_all(Settings(seed=10))[objective]
        assert abs(run.approx_kl[-1] - run.exact_kl[-1]) > 0.3 * run.exact_kl[-1]
    assert_says(prose, "Set the batch seed to 10 to see them part:")


def test_things_to_try_can_be_done_with_the_controls(prose):
    assert_says(prose, "lower $\\epsilon$ to 0.1 and raise it to 0.4.")
    assert EPS_RANGE[0] <= 0.1 < 0.4 <= EPS_RANGE[1]
    # 2: a step size the slider offers takes PPO's ratios more than 0.1 out of the band.
    assert_says(prose, "At which value do PPO's ratios first leave the band by more than 0.1?")
    assert outside_band(run_all(Settings(step_size=0.9))["clipped"].ratios).max() < 0.1
    assert outside_band(run_all(Settings(step_size=1.0))["clipped"].ratios).max() > 0.1
    assert STEP_SIZE_RANGE[0] < 1.0 < STEP_SIZE_RANGE[1]
    # 5: the largest such target KL lies inside the slider's range.
    assert_says(prose, "the unclipped run still ends with a true reward above 0.2")
    assert run_all(Settings(target_kl=0.07))["unclipped"].true_reward[-1] > 0.2
    assert run_all(Settings(target_kl=TARGET_KL_RANGE[1]))["unclipped"].true_reward[-1] < 0.2


# --------------------------------------------------------------------------
# The app, headless
# --------------------------------------------------------------------------


@pytest.fixture
def explorer() -> EpochsExplorer:
    return EpochsExplorer()


def assert_figure_shows(app: EpochsExplorer, expected: Settings) -> None:
    """Every drawn value is the value of ``run_all(expected)``; the table agrees."""
    runs = run_all(expected)
    plot = app.plot
    assert app.settings == expected
    for objective, run in runs.items():
        column = plot.columns[objective]
        ratios = run.arm_ratios()
        for arm, line in enumerate(column.arm_lines):
            np.testing.assert_array_equal(line.get_xdata(), run.epochs)
            np.testing.assert_array_equal(line.get_ydata(), ratios[:, arm])
        cells = column.cells.get_array()
        np.testing.assert_array_equal(cells[:, : run.epochs_run + 1], run.push_directions())
        assert cells.mask[:, run.epochs_run + 1 :].all()
        # The colour map normalises the hidden values too: they must be numbers.
        assert np.isfinite(cells.data).all()
        assert column.band.get_y() == pytest.approx(1 - expected.eps)
        assert column.band.get_height() == pytest.approx(2 * expected.eps)
        assert column.stop_line.get_visible() == run.stopped_early
        lines = plot.metric_lines[objective]
        for name in ("zero_grad_fraction", "approx_kl", "exact_kl", "true_reward"):
            np.testing.assert_array_equal(lines[name].get_ydata(), getattr(run, name))
        assert plot.end_labels[objective].get_text() == rounded(run.true_reward[-1], 3)
        assert f"<td>{rounded(run.true_reward[-1], 3)}</td>" in app.summary.value
    # The x-axis never moves: it spans the slider's range and veils the epochs not run.
    assert plot.clip_ax.get_xlim() == (-0.5, EPOCHS_RANGE[1] + 0.5)
    veils = [(v, expected.n_epochs) for v in plot.metric_veils]
    veils += [(v, runs[o].epochs_run) for o, c in plot.columns.items() for v in c.veils]
    for veil, last in veils:
        assert veil.get_visible() == (last < EPOCHS_RANGE[1])
        assert veil.get_x() == last + 0.5
        assert veil.get_x() + veil.get_width() == EPOCHS_RANGE[1] + 0.5
    assert plot.target_line.get_visible() == (expected.target_kl is not None)
    batch = runs["clipped"].batch
    for t, label in enumerate(plot.sample_labels):
        assert label.get_text() == sample_label(t, batch.actions[t], batch.advantages[t])
        assert to_rgba(label.get_color()) == to_rgba(ARM_COLORS[batch.actions[t]])
    boundaries = np.cumsum(batch.arm_counts())[:-1] - 0.5
    assert [line.get_ydata()[0] for line in plot.columns["clipped"].separators] == list(boundaries)
    assert app.message.value == ""


def test_the_app_starts_at_the_documented_defaults(explorer):
    assert (explorer.eps.value, explorer.step_size.value) == (EPS, DEFAULT_STEP_SIZE)
    assert (explorer.epochs.value, explorer.seed.value) == (DEFAULT_EPOCHS, DEFAULT_SEED)
    assert explorer.early_stop.value is False
    assert explorer.target_kl.disabled
    # The slider's maximum is the default, so the first figure has no veil.
    assert explorer.epochs.max == EPOCHS_RANGE[1] == DEFAULT_EPOCHS
    assert not any(v.get_visible() for v in explorer.plot.metric_veils)
    assert_figure_shows(explorer, Settings())


CONTROL_CHANGES = {
    "eps": ("eps", 0.3, Settings(eps=0.3)),
    "step size": ("step_size", 1.5, Settings(step_size=1.5)),
    "epochs": ("epochs", 12, Settings(n_epochs=12)),
    "seed": ("seed", 10, Settings(seed=10)),
    "early stop": ("early_stop", True, Settings(target_kl=0.02)),
}


@pytest.mark.parametrize("name", CONTROL_CHANGES)
def test_each_control_redraws_the_figure_with_the_new_run(explorer, name):
    attribute, value, expected = CONTROL_CHANGES[name]
    before = explorer.view.png
    getattr(explorer, attribute).value = value
    assert_figure_shows(explorer, expected)
    assert explorer.view.png != before


def test_a_new_batch_relabels_the_samples(explorer):
    explorer.seed.value = 10
    batch = draw_batch(10)
    for t, label in enumerate(explorer.plot.sample_labels):
        assert label.get_text() == sample_label(t, batch.actions[t], batch.advantages[t])


def test_sample_labels_give_number_arm_and_advantage():
    assert sample_label(8, 2, -0.33658) == "#8  arm 2  A -0.34"
    assert sample_label(11, 3, 0.18014) == "#11 arm 3  A +0.18"


def test_target_kl_slider_sets_the_threshold_once_early_stop_is_on(explorer):
    explorer.target_kl.value = 0.05
    assert_figure_shows(explorer, Settings())  # still off: no early stop
    explorer.early_stop.value = True
    assert not explorer.target_kl.disabled
    assert_figure_shows(explorer, Settings(target_kl=explorer.target_kl.value))
    explorer.target_kl.value = 0.01
    expected = Settings(target_kl=explorer.target_kl.value)
    assert_figure_shows(explorer, expected)
    assert explorer.plot.target_line.get_ydata()[0] == pytest.approx(explorer.target_kl.value)
    assert run_all(expected)["unclipped"].stopped_early
    explorer.early_stop.value = False
    assert explorer.target_kl.disabled
    assert_figure_shows(explorer, Settings())


def test_the_zero_gradient_panel_and_table_count_each_run_s_own_gradients(explorer):
    """Not PPO's clipping rule applied to the other runs' ratios (that said 0.50 for unclipped)."""
    lines = explorer.plot.metric_lines
    assert (lines["unclipped"]["zero_grad_fraction"].get_ydata() == 0).all()
    assert lines["clip_only"]["zero_grad_fraction"].get_ydata()[20] == 0.75
    table = explorer.summary.value
    assert "For PPO the samples with zero gradient are its clip fraction." in table
    assert "0 of 12 samples (0)" in table  # unclipped
    assert "9 of 12 samples (0.75)" in table  # clip-only
    assert "5 of 12 samples (0.417)" in table  # PPO at epoch 30: its clip fraction


def test_the_early_stop_label_shows_enough_digits_to_exceed_the_target(explorer):
    explorer.early_stop.value = True
    run = explorer.runs["clipped"]
    assert run.stopped_early
    text = explorer.plot.columns["clipped"].stop_text.get_text()
    assert float(text.rsplit(" ", 1)[1]) > explorer.target_kl.value, text


@pytest.mark.parametrize("bad_seed", [-3, 2**40])
def test_a_bad_seed_shows_a_message_and_keeps_the_last_good_run(explorer, bad_seed):
    explorer.seed.value = 10
    good_png = explorer.view.png
    explorer.seed.value = bad_seed
    message = explorer.message.value
    assert "batch seed must be between 0 and 4294967295" in message
    assert "Fix the batch seed to apply other changes." in message
    assert "ppo-message-error" in message
    assert explorer.view.png == good_png
    assert explorer.settings == Settings(seed=10)
    explorer.early_stop.value = True  # still a bad seed: nothing redraws, the message stays
    assert not explorer.target_kl.disabled  # the control itself still responds
    assert explorer.view.png == good_png
    assert "Fix the batch seed" in explorer.message.value
    explorer.seed.value = 3
    assert_figure_shows(explorer, Settings(seed=3, target_kl=explorer.target_kl.value))


def test_main_controls_carry_their_stable_names(explorer):
    names = {
        explorer.eps: "eps",
        explorer.step_size: "step-size",
        explorer.epochs: "epochs",
        explorer.seed: "seed",
        explorer.early_stop: "early-stop",
        explorer.target_kl: "target-kl",
    }
    for control, name in names.items():
        assert MAIN_CONTROL in control._dom_classes
        assert f"ppo-control-{name}" in control._dom_classes


def test_without_widgets_the_notebook_shows_the_figure_and_the_table(explorer):
    fallback = explorer.static_fallback()
    assert fallback.png == explorer.view.png
    assert "The true reward started at 0.25." in fallback.html
    assert "<img" in fallback.html


def test_the_figure_can_be_built_for_any_settings_without_the_app():
    plot = EpochsFigure(Settings(eps=0.0, n_epochs=1, seed=4, target_kl=0.001))
    assert figure_to_png(plot.figure).startswith(b"\x89PNG")
    assert plot.runs["clipped"].epochs_run <= 1


def test_save_writes_a_slide_of_the_current_settings(explorer, tmp_path):
    explorer.step_size.value = 3.0
    png, svg = explorer.save(tmp_path / "epochs")
    width, height = Image.open(png).size
    assert (width, height) == (int(SLIDE_SIZE[0] * SLIDE_DPI), int(SLIDE_SIZE[1] * SLIDE_DPI))
    assert svg.read_text().startswith("<?xml")


def test_the_batch_table_lists_every_arm_with_its_samples():
    table = describe_batch()
    rows = table.rows()
    assert [row.samples for row in rows] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    html = table._repr_html_()
    assert "#8 (-0.34)" in html
    assert "Batch seed 2115: N = 12" in html
    assert "#8 (-0.34)" in repr(table)
