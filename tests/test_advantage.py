"""Notebook 8 (where the advantage comes from): the agent's public loss functions, the study's
continuations and estimates, the explorer's figure against them, and the prose's claims.

Expectations are computed here, in the same run, from the plain definitions (the TD error, the
return minus the value, CleanRL's value loss written out) or from the study's own arrays; no
number of one machine is pinned.
"""

from __future__ import annotations

import re

import nbformat
import numpy as np
import pytest
from helpers import assert_drawn_in_place, assert_states, markdown_of
from notebook_runner import NOTEBOOK_DIR

from experiments.cartpole_agent import CartPoleSettings, Rollout, bootstrapped, value_loss
from experiments.evidence import simultaneous_band
from ppo_viz.advantage import apps, study
from ppo_viz.numbers import rounded
from ppo_viz.rlhf.results import cell_of, load_results

NOTEBOOK = NOTEBOOK_DIR / "08_where_the_advantage_comes_from.ipynb"
RNG = np.random.default_rng(8)


# -- the agent's value loss -----------------------------------------------------------------------


@pytest.mark.parametrize("clip_coef", [None, 0.2, 5.0])
def test_value_loss_is_cleanrls_and_its_gradient_its_derivative(clip_coef):
    """CleanRL ``ppo.py``'s value loss, its ``clip_vloss`` branch written out here, and its
    gradient by central differences."""
    new, returns, old = RNG.normal(0, 3, (3, 40))
    kwargs = {} if clip_coef is None else {"old_values": old, "clip_coef": clip_coef}
    loss, grad = value_loss(new, returns, coef=0.5, **kwargs)
    moved = new if clip_coef is None else old + np.clip(new - old, -clip_coef, clip_coef)
    expected = 0.5 * np.maximum((new - returns) ** 2, (moved - returns) ** 2).mean()
    assert loss == pytest.approx(0.5 * expected, rel=1e-12)
    steps = 1e-6 * np.eye(len(new))
    rise = [value_loss(new + e, returns, coef=0.5, **kwargs)[0] for e in steps]
    fall = [value_loss(new - e, returns, coef=0.5, **kwargs)[0] for e in steps]
    assert grad == pytest.approx((np.array(rise) - fall) / 2e-6, abs=1e-6)


def test_clipped_value_loss_switches_off_a_value_that_moved_past_the_band_towards_its_target():
    old, target = np.array([0.0]), np.array([10.0])
    towards = value_loss(np.array([1.0]), target, old_values=old, clip_coef=0.2)[1]
    away = value_loss(np.array([-1.0]), target, old_values=old, clip_coef=0.2)[1]
    assert towards[0] == 0.0
    assert away[0] == pytest.approx(-11.0)
    with pytest.raises(ValueError, match="old_values and clip_coef"):
        value_loss(np.zeros(2), np.ones(2), clip_coef=0.2)


def test_a_truncation_is_bootstrapped_and_a_termination_is_not():
    rewards = bootstrapped(np.ones(2), np.array([3.0, 3.0]), np.array([True, False]), 0.5)
    assert rewards.tolist() == [2.5, 1.0]


# -- the study ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def played():
    return study.play_outs()


def test_the_episodes_advantages_are_the_td_error_and_the_return_minus_the_value(played):
    episode, gamma = played[0], 0.9
    v = episode.values
    next_v = np.append(v[1:], 0.0 if episode.terminated else episode.final_value)
    td = 1.0 + gamma * next_v - v
    assert study.advantages_of(episode, gamma, 0.0)[0] == pytest.approx(td, rel=1e-12)
    returns = [sum(gamma**k for k in range(len(v) - t)) for t in range(len(v))]
    if not episode.terminated:
        returns = [r + gamma ** (len(v) - t) * episode.final_value for t, r in enumerate(returns)]
    assert study.advantages_of(episode, gamma, 1.0)[0] == pytest.approx(np.array(returns) - v)


def test_continuations_start_from_the_episodes_states_with_each_action(played):
    episode, estimator, reference = played
    runs = study.ESTIMATOR_RUNS
    assert estimator.lengths.size == len(episode) * 2 * runs
    assert reference.lengths.size == len(episode) * 2 * study.REFERENCE_RUNS
    # the first step's value is the critic's at the episode's state
    first = estimator.values[0].reshape(len(episode), 2 * runs)
    assert first == pytest.approx(np.repeat(episode.values[:, None], 2 * runs, axis=1))
    # every play-out ends by a fall or at the time limit: never longer than the limit allows
    elapsed = np.repeat(np.arange(len(episode)), 2 * runs)
    assert (elapsed + estimator.lengths <= 500).all()


def test_lambda_1_on_a_continuation_is_its_discounted_return_minus_the_first_value(played):
    _, estimator, _ = played
    gamma = 0.95
    at_one = study.first_advantages(estimator, gamma, [1.0])[0]
    returns = study.discounted_returns(estimator, gamma)
    assert at_one == pytest.approx(returns - estimator.values[0], abs=1e-9)
    plain = (1 - gamma**estimator.lengths) / (1 - gamma)  # no continuation was truncated here
    assert returns[~estimator.truncated] == pytest.approx(plain[~estimator.truncated])


def test_the_reference_and_the_estimates_are_those_of_the_continuations(played):
    """The reference: Q of the action taken (the mean of its continuations' returns) less the
    policy's V; GAE's mean and spread: those of the estimator's continuations."""
    episode, estimator, reference = played
    steps = np.arange(len(episode))
    s = study.gamma_study(0.98)
    q = study.discounted_returns(reference, 0.98).reshape(len(episode), 2, -1).mean(axis=-1)
    pi = np.exp(episode.log_probs)
    assert s.reference == pytest.approx(q[steps, episode.actions] - (pi * q).sum(axis=-1))
    assert s.policy_values == pytest.approx((pi * q).sum(axis=-1))
    samples = study.first_advantages(estimator, 0.98, [study.LAMBDAS[10]])[0]
    samples = samples.reshape(len(episode), 2, -1)[steps, episode.actions]
    assert s.mean[10] == pytest.approx(samples.mean(axis=-1))
    assert s.std[10] == pytest.approx(samples.std(axis=-1, ddof=1))


# -- the explorer ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def explorer():
    return apps.AdvantageExplorer()


@pytest.mark.parametrize(("gamma", "lam"), [(0.99, 0.0), (0.9, 1.0), (0.95, 0.45)])
def test_a_slider_moves_the_figure_to_the_study_at_its_values(explorer, played, gamma, lam):
    explorer.controls["gamma"].value = gamma
    explorer.controls["lam"].value = lam
    s, row = study.gamma_study(gamma), round(lam * 20)
    episode = played[0]
    assert explorer.own.get_ydata() == pytest.approx(study.advantages_of(episode, gamma, lam)[0])
    assert explorer.mean.get_ydata() == pytest.approx(s.mean[row])
    assert explorer.reference.get_ydata() == pytest.approx(s.reference)
    assert explorer.marker.get_xdata()[0] == pytest.approx(lam)
    assert explorer.curves["variance"].get_ydata() == pytest.approx(s.curves["variance"][0])
    assert rounded(s.curves["action_bias2"][0][row], 3) in explorer.readout.value
    lo, hi = explorer.top.get_ylim()
    assert lo <= s.reference.min()
    assert hi >= (s.mean + s.std).max()


def test_a_step_of_gamma_redraws_the_top_axes_in_place(explorer):
    """A new gamma changes the top axes' limits only; they are drawn again into the kept
    background (a whole draw took 220 ms), showing what a whole draw shows."""
    explorer.controls["gamma"].value = 0.99
    assert_drawn_in_place(explorer, "gamma", [0.9, 0.95, 0.99])


# -- what the prose says ---------------------------------------------------------------------


def test_the_prose_states_the_settings_from_the_constants():
    prose = markdown_of(NOTEBOOK)
    assert_states(prose, f"{study.TRAIN_STEPS:,} steps, seed {study.SEED}")
    assert_states(prose, f"{study.REFERENCE_RUNS} times", f"Another {study.ESTIMATOR_RUNS}")
    assert_states(prose, f"trained one plus {study.SHIFT:g}")
    assert_states(prose, f"notebook 4's runs are {CartPoleSettings().total_steps:,} steps")


def test_gae_trades_the_bias_between_the_actions_for_variance():
    """On this episode the bias that misleads the policy falls to 0 (within its interval) at
    lambda 1, the variance is 0 at lambda 0 (CartPole is deterministic) and grows, and their sum
    is nearly flat up to lambda 0.85, its differences there within the intervals, and explodes
    near 1 (where it is smallest is not resolved, and the prose does not say)."""
    bias, half = study.gamma_study(0.99).curves["action_bias2"]
    variance = study.gamma_study(0.99).curves["variance"][0]
    assert bias[0] > 0
    assert (np.diff(bias) < 0).all()  # "on this episode ... falls"
    assert abs(bias[-1]) <= half[-1]
    assert variance[0] == 0.0
    assert (np.diff(variance) > 0).all()
    total = bias + variance
    flat = total[study.LAMBDAS <= 0.85]
    assert np.ptp(flat) < 0.15 * flat.max()
    assert np.ptp(flat) < half[study.LAMBDAS <= 0.85].min()
    assert total[-1] > 10 * flat.max()
    offset = study.gamma_study(0.99).curves["bias2"][0]
    assert (np.diff(offset) > 0).all()  # the dashed line grows with lambda


def test_what_the_explorer_shows_at_the_ends_of_its_sliders(played):
    """At lambda 0 the mean stays near 1 and swings far less than the reference; at lambda 1 it
    follows Q less the critic's value; a smaller gamma shrinks the advantages and the spread."""
    s = study.gamma_study(0.99)
    assert np.abs(s.mean[0][:-1] - 1).max() < 0.75
    assert s.reference[:-1].std() > 3 * s.mean[0][:-1].std()
    aim = s.reference + s.policy_values - played[0].values
    assert np.corrcoef(s.mean[-1], aim)[0, 1] > 0.9
    studies = [study.gamma_study(g) for g in study.GAMMAS]  # gamma rising
    assert np.diff([np.abs(g.reference).max() for g in studies]).min() > 0
    assert np.diff([g.std[-1].mean() for g in studies]).min() > 0


def test_the_critics_the_prose_describes(played):
    episode = played[0]
    truth = study.gamma_study(0.99).policy_values
    critics = list(study.critics().values())
    assert np.mean(critics[0] - truth) < -10  # far below the policy's values
    assert np.mean(critics[0] < truth) > 0.9  # "undervalues nearly every state"
    assert critics[0][-1] > truth[-1]  # "near the fall it overvalues"
    assert np.abs(critics[1]).max() < 1  # the untrained network: close to 0
    td = study.advantages_of(episode, 0.99, 0.0, critics[1])[0]
    assert td.mean() == pytest.approx(1.0, abs=0.05)  # close to 1, give or take a wobble
    assert np.abs(td[:-1] - 1.0).max() < 0.3
    shifted = study.advantages_of(episode, 0.99, 0.0, critics[2])[0]
    plain = study.advantages_of(episode, 0.99, 0.0, critics[0])[0]
    assert shifted[:-1] - plain[:-1] == pytest.approx(-0.01 * study.SHIFT)
    assert shifted[-1] - plain[-1] == pytest.approx(-study.SHIFT)
    at_1 = [study.advantages_of(episode, 0.99, 1.0, c)[0] for c in (critics[2], critics[0])]
    assert at_1[0] - at_1[1] == pytest.approx(-study.SHIFT)  # "down by exactly 10"


def test_the_critics_gradient_dominates_and_normalising_changes_signs(played):
    normed, raw = study.loss_parts(), study.loss_parts(normalize=False)
    value, policy = normed["norm"]["value c1·L^VF"], normed["norm"]["policy −L^CLIP"]
    assert value > 10 * policy
    assert value > 0.5  # the global clip is set by the critic
    # the clip sees one gradient: the agent's own, of the whole loss on the episode
    episode, agent = played[0], study.trained_agent()
    advantages, returns = study.advantages_of(episode, 0.99, 0.95)
    arrays = (episode.observations, episode.actions, episode.log_probs, advantages, returns)
    whole = agent.gradients(Rollout(*(a[None] for a in arrays)))[0]
    assert normed["total"] == pytest.approx(np.sqrt(sum((g**2).sum() for g in whole)), rel=1e-9)
    assert raw["norm"]["policy −L^CLIP"] > 5 * policy
    assert 0 < normed["flipped"] < len(played[0])
    assert normed["value"]["policy −L^CLIP"] == pytest.approx(0.0, abs=1e-12)
    # one Adam steps both networks, at the eps the prose names
    both = agent.policy.params + agent.value.params
    assert all(a is b for a, b in zip(agent.optimizer.params, both, strict=True))
    assert agent.optimizer.eps == 1e-5
    assert_states(markdown_of(NOTEBOOK), r"\epsilon_\text{Adam} = 10^{-5}")


def test_ppo_and_grpo_are_not_distinguishable_in_the_rlhf_study():
    """ "PPO minus GRPO ... holds 0 at every learning rate on each of the three seed sets"."""
    results = load_results()
    # "its PPO also drew 8 answers per prompt ... while GRPO ran with beta = 0"
    assert results["settings"]["group_size"] == 8
    assert results["settings"]["kl_coef"] == 0.0
    assert_states(markdown_of(NOTEBOOK), f"drew {results['settings']['group_size']} answers per")
    assert len(results["sets"]) == 3
    for seed_set in results["sets"]:
        runs = [
            [
                cell_of(results, seed_set, m, lr, 1)["per_seed"]["score"]
                for lr in results["learning_rates"]
            ]
            for m in ("ppo", "grpo")
        ]
        band = simultaneous_band(np.subtract(*runs).T)
        assert all(low < 0 < high for low, high in zip(band["low"], band["high"], strict=True))


def test_one_markdown_cell_is_the_lecture_with_the_loss_in_pytorch():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    lecture = [c for c in cells if "lecture" in c.metadata.get("tags", [])]
    assert [c.cell_type for c in lecture] == ["markdown"]
    assert "```python" in lecture[0].source
    assert "loss.backward()" in lecture[0].source


@pytest.mark.parametrize(
    ("app", "arguments", "message"),
    [
        ("advantage", {"lam": 2.0}, "λ must be a multiple of 0.05 from 0 to 1, got 2.0"),
        ("advantage", {"lam": 0.33}, "λ must be a multiple of 0.05"),
        ("advantage", {"gamma": 0.5}, "γ must be one of 0.9, 0.95, 0.98, 0.99, got 0.5"),
        ("mismatch", {"bits": 5}, "logits' bits must be one of 0, 10, 8, 7, 6 (0: exact), got 5"),
        ("mismatch", {"stale": 3}, "stale (iterations) must be one of 0, 1, 2, 4, 8, got 3"),
    ],
)
def test_the_new_explorers_refuse_settings_their_study_has_no_numbers_for(app, arguments, message):
    """At construction a ValueError; in ``update`` an InputError before any artist moves (the
    message shown in place, the last figure kept)."""
    from ppo_viz.app import InputError
    from ppo_viz.mismatch.apps import MismatchExplorer

    kind = apps.AdvantageExplorer if app == "advantage" else MismatchExplorer
    with pytest.raises(ValueError, match=re.escape(message)):
        kind(**arguments)
    explorer = kind()
    before = explorer.png()
    with pytest.raises(InputError, match=re.escape(message)):
        explorer.update(**{**explorer.values(), **arguments})
    assert explorer.png() == before
