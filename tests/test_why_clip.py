"""Notebook 4 (why PPO clips, as a range of step sizes): math, study, command, apps.

* The gradients: ppo_clip's per-run gradients exactly; the softmax chain, the KL penalty, the
  networks' backpropagation and the whole CartPole loss against finite differences.
* The study: a seed's runs independent of the seeds beside it, early stopping and the adaptive
  penalty as specified (its statistics and committed files: test_study_results.py).
* The results command: the committed study has the design the notebook describes; re-running
  a bandit slice of the plan it stores gives the committed numbers; unknown names are refused
  before any work; a partial run never writes over the committed results; an interrupted run
  resumes from its cache.
* The apps draw what the results and runs say (the claims, and every number the notebook's
  prose states: test_why_clip_claims.py).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import CancelledError, Future
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from helpers import assert_drawn_in_place, central_difference, plain

import ppo_clip
from bandit import (
    adapted_kl_coef,
    chain_through_softmax,
    exact_kl,
    kl_penalty_grad,
    log_softmax,
    sample_gradients,
    softmax,
)
from bandit_loop import BanditLoopSettings, run_bandit_loop, run_side_by_side
from experiments import runner, study
from experiments import why_clip as command
from experiments.cartpole_agent import (
    RANDOM_RETURN,
    CartPoleAgent,
    CartPoleSettings,
    Rollout,
    normalized,
    policy_terms,
    random_policy_return,
    run_cartpole,
    taken,
)
from experiments.evidence import SEED_SETS
from experiments.networks import MLP, Adam, clip_by_global_norm
from experiments.runner import run_cells
from ppo_viz.machine import fingerprint
from ppo_viz.why_clip.apps import (
    CHOICES,
    DEFAULT_SEEDS,
    MORE_BANDIT_SEEDS,
    BanditLoopExplorer,
    CartPoleExplorer,
    LookAhead,
    RangeExplorer,
)
from ppo_viz.why_clip.methods import (
    MAIN_METHODS,
    METHODS,
    run_bandit_methods,
    spread,
)
from ppo_viz.why_clip.results import (
    RESULTS_DIR,
    bandit_note,
    cell_at,
    load_results,
    one_set,
)

REPOSITORY = RESULTS_DIR.parent
PENALIZED = ("kl_fixed_1", "kl_adaptive_0.01")


class RecordingLookAhead(LookAhead):
    """The bandit app's look-ahead thread, keeping what was submitted to it."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted: list[tuple[tuple, Future]] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future = super().submit(fn, *args, **kwargs)
        self.submitted.append((args, future))
        return future


@pytest.fixture(autouse=True)
def look_ahead(monkeypatch):
    """Each test's bandit apps run ahead in a thread of their own, whose queued work is
    dropped at the end (it would slow down the tests after it)."""
    import ppo_viz.why_clip.apps as apps

    executor = RecordingLookAhead()
    monkeypatch.setattr(apps, "LOOK_AHEAD", executor)
    yield executor
    executor.cancel_all()
    executor.submit(lambda: None).result(timeout=120)  # the run under way ends


@cache
def committed():
    return load_results()


def assert_gradient(loss, params, grads, rel=None, abs=1e-8, samples=None) -> None:
    """``grads`` (one array per parameter array) against central differences of ``loss()`` in
    each entry of ``params`` (about ``samples`` entries of each, spread out; None: all)."""
    for i, param in enumerate(params):
        entries = list(np.ndindex(param.shape))
        for entry in entries[:: max(1, param.size // samples) if samples else 1]:
            numeric = central_difference(loss, param, entry)
            assert grads[i][entry] == pytest.approx(numeric, rel=rel, abs=abs), (i, entry)


# --------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("runs", "n"), [(1, 16), (3, 16), (300, 16), (5, 4096)])
def test_each_run_gets_exactly_ppo_clips_gradient_of_its_own_batch(runs, n):
    rng = np.random.default_rng(runs * n)
    logp_new = np.log(rng.uniform(0.05, 1.0, (runs, n)))
    logp_old = np.log(rng.uniform(0.05, 1.0, (runs, n)))
    advantages = rng.normal(size=(runs, n)) * 3
    for method in METHODS.values():
        grads, clipped = sample_gradients(logp_new, logp_old, advantages, method)
        for row in range(runs):
            args = (logp_new[row], logp_old[row], advantages[row], method.eps)
            expected = ppo_clip.surrogate_grad(*args, objective=method.objective)
            assert np.array_equal(grads[row], expected)
            assert np.array_equal(clipped[row], ppo_clip.clip_breakdown(*args).is_clipped)


@pytest.mark.parametrize("key", ["ppo", "unclipped", "clip_only", *PENALIZED])
def test_the_bandits_logit_gradient_agrees_with_finite_differences(key):
    """The objective's gradient (from ppo_clip) chained through the softmax, plus for a
    penalty ``beta * d KL(old || new) / d logits`` (:func:`kl_penalty_grad`)."""
    method = METHODS[key]
    rng = np.random.default_rng(1)
    arms = rng.integers(0, 4, (1, 12))
    advantages = rng.normal(size=(1, 12))
    old_logits = rng.normal(size=(1, 4)) * 0.3
    logits = [old_logits + rng.normal(size=(1, 4)) * 0.3]
    logp_old = np.take_along_axis(log_softmax(old_logits), arms, axis=1)
    beta = 2.5 if method.kl_coef else 0.0

    def loss() -> float:
        logp = np.take_along_axis(log_softmax(logits[0]), arms, axis=1)
        surrogate = ppo_clip.surrogate_loss(
            logp[0], logp_old[0], advantages[0], method.eps, objective=method.objective
        )
        return surrogate + beta * float(exact_kl(softmax(old_logits), softmax(logits[0]))[0])

    logp_all = log_softmax(logits[0])
    grads, _ = sample_gradients(
        np.take_along_axis(logp_all, arms, axis=1), logp_old, advantages, method
    )
    probs = np.exp(logp_all)
    analytic = chain_through_softmax(grads, arms, probs)
    analytic += beta * kl_penalty_grad(softmax(old_logits), probs)
    assert_gradient(loss, logits, [analytic])


def test_the_networks_backpropagation_agrees_with_finite_differences():
    rng = np.random.default_rng(2)
    rngs = [np.random.default_rng(s) for s in range(2)]
    net = MLP.initial(rngs, (4, 5, 6, 3), output_gain=1.0)
    for param in net.params:
        param += rng.normal(size=param.shape) * 0.3  # non-zero biases too
    inputs = rng.normal(size=(2, 7, 4))
    weights = rng.normal(size=(2, 7, 3))

    def loss() -> float:
        return float((net(inputs) * weights).sum())

    _, cache_ = net.forward(inputs)
    grads = net.backward(cache_, weights)
    assert_gradient(loss, net.params, grads, rel=1e-6)


def cartpole_batch(agent: CartPoleAgent, seed: int = 3) -> Rollout:
    """A minibatch of 16 samples per run whose old policy is near the current one."""
    rng = np.random.default_rng(seed)
    observations = rng.normal(size=(2, 16, 4))
    log_probs, _, _ = policy_terms(agent.policy(observations) + rng.uniform(-0.4, 0.4, (2, 16, 2)))
    return Rollout(
        observations=observations,
        actions=rng.integers(0, 2, (2, 16)),
        old_log_probs=log_probs,  # ratios in and out of the band
        advantages=rng.normal(size=(2, 16)),
        returns=rng.normal(size=(2, 16)),
    )


@pytest.mark.parametrize("key", ["ppo", "unclipped", "clip_only", *PENALIZED])
def test_the_whole_cartpole_loss_gradient_agrees_with_finite_differences(key):
    """Policy surrogate (from ppo_clip) + KL penalty - entropy bonus + value loss, through
    both networks."""
    settings, method = CartPoleSettings(), METHODS[key]
    agent = CartPoleAgent((0, 1), settings, method)
    agent.kl_coef = np.array([0.7, 3.0]) if method.kl_coef else agent.kl_coef
    batch = cartpole_batch(agent)
    params = agent.policy.params + agent.value.params

    def loss() -> float:
        log_probs, probs, entropy = policy_terms(agent.policy(batch.observations))
        logp = taken(log_probs, batch.actions)
        advantages = normalized(batch.advantages)
        total = 0.0
        for run in range(2):
            total += ppo_clip.surrogate_loss(
                logp[run], batch.logp[run], advantages[run], 0.2, objective=method.objective
            )
            kl = exact_kl(np.exp(batch.old_log_probs[run]), probs[run]).mean()
            total += agent.kl_coef[run] * kl
        values = agent.values(batch.observations)
        total -= settings.ent_coef * entropy.mean(axis=1).sum()
        total += settings.vf_coef * 0.5 * ((values - batch.returns) ** 2).mean(axis=1).sum()
        return total

    grads, _, _ = agent.gradients(batch)
    assert_gradient(loss, params, grads, rel=1e-5, samples=25)


def test_adams_first_step_moves_each_parameter_by_the_learning_rate():
    params = [np.array([[1.0, -2.0, 0.5]])]
    grads = [np.array([[0.3, -4.0, 1e-9]])]
    Adam(params).step(grads, learning_rate=0.01)
    moved = np.array([1.0, -2.0, 0.5]) - params[0][0]
    assert moved == pytest.approx(0.01 * grads[0][0] / (np.abs(grads[0][0]) + 1e-5))


def test_a_run_left_out_of_an_adam_step_is_as_if_the_step_never_happened():
    both = [np.array([[1.0, 2.0], [1.0, 2.0]])]
    alone = [np.array([[1.0, 2.0]])]
    grads = [np.array([[0.5, -1.0], [0.5, -1.0]])]
    paused, single = Adam(both), Adam(alone)
    paused.step([g * 3 for g in grads], 0.1, active=np.array([True, False]))
    paused.step(grads, 0.1)
    single.step([grads[0][:1]], 0.1)
    assert np.array_equal(both[0][1], alone[0][0])
    assert paused.steps.tolist() == [2, 1]


def test_gradients_are_clipped_to_a_global_norm_per_run():
    grads = [np.array([[3.0, 0.0], [0.1, 0.0]]), np.array([[[4.0]], [[0.0]]])]
    clipped = clip_by_global_norm(grads, 0.5)
    assert np.hypot(clipped[0][0, 0], clipped[1][0, 0, 0]) == pytest.approx(0.5, rel=1e-5)
    assert clipped[0][1, 0] == 0.1  # run 1's norm is below 0.5: untouched


# --------------------------------------------------------------------------
# The study's methods and statistics
# --------------------------------------------------------------------------


def test_early_stopping_on_cartpole_stops_a_run_once_its_kl_passes_the_target():
    """Before the first step the policy is the old one (KL exactly 0): one step, then stop."""
    method = replace(METHODS["early_stop"], target_kl=1e-12)
    agent = CartPoleAgent((0, 1), CartPoleSettings(), method)
    rollout = cartpole_batch(agent)
    rollout.old_log_probs = policy_terms(agent.policy(rollout.observations))[0]
    agent.update(rollout, 2.5e-4)
    assert agent.optimizer.steps.tolist() == [1, 1]
    free = CartPoleAgent((0, 1), CartPoleSettings(), METHODS["unclipped"])
    free.update(rollout, 2.5e-4)
    assert free.optimizer.steps.tolist() == [16, 16]  # 4 epochs of 4 minibatches


def test_the_adaptive_penalty_follows_the_papers_rule_on_the_bandit():
    """After each batch, beta halves below d_targ / 1.5 and doubles above 1.5 d_targ (on the
    exact KL the batch's steps moved the policy), and the steps use that beta."""
    method = METHODS["kl_adaptive_0.01"]
    settings = BanditLoopSettings(iterations=6, step_size=0.5)
    run = run_bandit_loop(method, settings, (0, 1, 2, 3))
    assert np.all(run.kl_coef[:, 0] == method.kl_coef)
    for i in range(settings.iterations - 1):
        moved = exact_kl(run.probs[:, i], run.probs[:, i + 1])
        expected = adapted_kl_coef(run.kl_coef[:, i], moved, method.kl_target)
        assert np.array_equal(run.kl_coef[:, i + 1], expected)
    changes = run.kl_coef[:, 1:] / run.kl_coef[:, :-1]
    assert {0.5, 2.0} <= set(changes.ravel().tolist())  # both ways, for these seeds
    fixed = run_bandit_loop(replace(method, kl_target=None), settings, (0, 1, 2, 3))
    assert np.all(fixed.kl_coef == method.kl_coef)
    assert not np.array_equal(fixed.probs, run.probs)


# --------------------------------------------------------------------------
# Runs: seeds, determinism, the random policy, settings
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "settings", "keys", "curve"),
    [
        (
            run_bandit_loop,
            BanditLoopSettings(iterations=12),
            ("unclipped", "kl_adaptive_0.01"),
            "probs",
        ),
        (
            run_cartpole,
            CartPoleSettings(total_steps=1024, epochs=10, learning_rate=2.5e-3),
            ("early_stop", "kl_adaptive_0.01"),
            "return_curve",
        ),
    ],
)
def test_a_seeds_run_does_not_depend_on_the_seeds_beside_it(run, settings, keys, curve):
    for key in keys:
        together = run(METHODS[key], settings, (0, 1, 2))
        alone = run(METHODS[key], settings, (2,))
        for name in (curve, "approx_kl"):
            assert np.array_equal(
                getattr(together, name)[2], getattr(alone, name)[0], equal_nan=True
            )


@pytest.mark.parametrize(
    "settings",
    [BanditLoopSettings(iterations=8), BanditLoopSettings(epochs=7, step_size=20.0, batch_size=5)],
)
def test_methods_side_by_side_give_each_method_what_it_gives_alone(settings):
    """The explorer runs its methods side by side; the study runs each alone: the same numbers,
    bit for bit, for every method of the study (three clip sizes, penalties, early stopping)."""
    seeds = (0, 1, 2, 3, 4)
    together = run_bandit_methods(settings, seeds, tuple(METHODS))
    for key, run in together.items():
        alone = run_bandit_loop(METHODS[key], settings, seeds)
        for name in ("probs", "approx_kl", "clip_fraction", "kl_coef"):
            assert np.array_equal(getattr(run, name), getattr(alone, name)), (key, name)


def test_the_random_policys_return_is_the_scores_zero():
    assert round(random_policy_return(10_000), 1) == RANDOM_RETURN


def test_settings_out_of_range_are_refused_by_name():
    with pytest.raises(ValueError, match="epochs must be between 1 and 40"):
        BanditLoopSettings(epochs=0)
    with pytest.raises(ValueError, match="batch_size must be a whole number"):
        BanditLoopSettings(batch_size=12.5)
    with pytest.raises(TypeError, match="iterations must be a number, got str"):
        BanditLoopSettings(iterations="50")
    with pytest.raises(ValueError, match="learning_rate must be between"):
        CartPoleSettings(learning_rate=float("nan"))
    with pytest.raises(ValueError, match=r"minibatches \(3\) must divide"):
        CartPoleSettings(minibatches=3)
    with pytest.raises(ValueError, match="step_size must be one of"):
        BanditLoopExplorer(BanditLoopSettings(step_size=0.3))
    with pytest.raises(ValueError, match=r"batch_size must be one of \(2, 4, 8,.*got 12"):
        BanditLoopExplorer(BanditLoopSettings(batch_size=12))


# --------------------------------------------------------------------------
# The results command: the committed files are its output, slices re-run, nothing overwritten
# --------------------------------------------------------------------------


def test_the_committed_study_has_the_design_the_notebook_describes():
    """Its cells are the grid it stores, on seeds from 0 (test_study_results.py; the seeds of
    each set: test_the_notebook_states_the_studys_design); that grid is issue 22's and 27's
    design: every method on the bandit, 400 + 400 and 20 + 20 seeds, K as a factor."""
    results = committed()
    bandit, cartpole = results["sweeps"]["bandit"], results["sweeps"]["cartpole"]
    assert set(bandit["methods"]) == set(METHODS)  # every method on the bandit
    assert bandit["seeds"] >= 400  # 400 + 400, and 20 + 20 on CartPole (issue 27)
    assert cartpole["seeds"] >= 20
    epochs = {
        s["settings"]["epochs"]: s for s in results["sweeps"].values() if s["task"] == "cartpole"
    }
    assert {1, 4, 10} <= set(epochs)  # K as a factor of its own
    for sweep in epochs.values():
        assert {"ppo", "unclipped"} <= set(sweep["methods"])
        assert len(sweep["values"]) >= 4
    assert np.log10(max(cartpole["values"]) / min(cartpole["values"])) >= 1.5


def test_the_whole_study_fits_an_hour_on_two_cores():
    """The cells' CPU time, measured as they ran, fits 60 minutes on 2 free cores, as the
    command's docstring and the README say; the cost model that orders the work and drives
    the progress bar is within a factor of 2 of it."""
    cpu = committed()["cpu_seconds"]
    assert cpu <= 2 * 3600
    cells = command.plan_of(committed()).cells  # the plan the results store
    estimated = sum(c.cost for c in {c.key: c for c in cells}.values())
    assert 0.5 < cpu / estimated < 2.0
    said = f"about {cpu / 60:.0f} CPU minutes"
    for text in (command.__doc__, (REPOSITORY / "README.md").read_text(encoding="utf-8")):
        assert said in " ".join(text.split())
        assert f"{cpu / 120:.0f} minutes on 2 free cores" in " ".join(text.split())


@pytest.mark.parametrize("seed_set", SEED_SETS)
def test_rerunning_a_bandit_slice_reproduces_the_committed_numbers(seed_set):
    """Two cells at α = 1, every seed: the bandit reproduces anywhere (the CPU's last bits only
    move it by rounding; the stored scores have six decimals)."""
    sweep = next(s for s in command.plan_of(committed()).sweeps if s.name == "bandit")
    stored = one_set(committed(), seed_set)["sweeps"]["bandit"]
    cells = {
        c.method: c
        for c in sweep.cells(0, (seed_set,))
        if c.value == 1.0 and c.method in ("ppo", "unclipped")
    }
    raw = {key: study.run_cell(cell) for key, cell in cells.items()}
    for key in cells:
        fresh = study.cell_summary(raw[key], None if key == "ppo" else raw["ppo"])
        kept = cell_at(stored, key, 1.0)
        assert (fresh["solved"], fresh["collapsed"]) == (kept["solved"], kept["collapsed"])
        assert fresh["scores"] == pytest.approx(kept["scores"], abs=2e-6)
        for name in ("mean", "p10", "p90", "clip_fraction", "approx_kl"):
            assert fresh[name] == pytest.approx(kept[name], abs=2e-6), name
    assert fresh["vs_ppo"]["verdict"] == kept["vs_ppo"]["verdict"]


@pytest.mark.slow
def test_rerunning_a_cartpole_slice_of_the_command_reproduces_its_committed_cell(tmp_path):
    """The command itself, for seed 20 (the confirmation set's first) of PPO at K = 4 and a
    learning rate of 0.001."""
    run = [sys.executable, "-m", "experiments.why_clip", "--setting", "cartpole", "--method"]
    run += ["ppo", "--value", "0.001", "--cartpole-seeds", "1", "--seed-offset", "20"]
    run += ["--seed-set", "discovery", "--output-dir", str(tmp_path)]
    subprocess.run(run, cwd=REPOSITORY, check=True, capture_output=True, timeout=600)
    results = load_results(tmp_path / "why_clip.json")
    fresh = cell_at(one_set(results, "discovery")["sweeps"]["cartpole"], "ppo", 0.001)
    kept = one_set(committed(), "confirmation")["sweeps"]["cartpole"]
    stored = np.array(cell_at(kept, "ppo", 0.001)["final_return"])
    assert results["machine"] == fingerprint()
    if committed()["machine"] == fingerprint():  # the same last bits: the same run, exactly
        assert fresh["final_return"][0] == stored[0]
    else:  # chaotic: one last-bit difference changes the run; it is one draw of the same spread
        assert abs(fresh["final_return"][0] - stored.mean()) <= 3 * stored.std() + 1.0


def test_a_computation_two_cells_share_runs_once(tmp_path, monkeypatch):
    """Plain policy gradient at K = 4 is the unclipped surrogate at K = 1: one run serves both."""
    arguments = "--setting cartpole --setting cartpole_k1 --method plain_pg --method unclipped"
    arguments += f" --value 2.5e-4 --cartpole-seeds 1 --output-dir {tmp_path}"
    plan = runner.parse(command, arguments.split())[0]
    keys = {c.sweep + c.method: c.key for c in plan.cells if c.seed_set == "discovery"}
    assert keys["cartpoleplain_pg"] == keys["cartpole_k1unclipped"]
    ran = []
    monkeypatch.setattr(command, "run_cell", lambda cell: ran.append(cell) or {"cpu_seconds": 0})
    run_cells(plan.cells, None, 1, command.run_cell)
    assert len(ran) == len({c.key for c in plan.cells}) == len(plan.cells) - 2


# --------------------------------------------------------------------------
# The apps
# --------------------------------------------------------------------------


def _line(app, panel: int, key: str):
    return app.panels.lines[panel][key]


def test_the_range_app_draws_the_committed_sweeps_and_marks_fresh_seeds(monkeypatch):
    import ppo_viz.why_clip.apps as apps

    results = json.loads(json.dumps(committed()))
    bandit = results["sweeps"]["bandit"]
    kept, today = [0.5, 5.0], BanditLoopSettings().arm_means
    bandit["values"] = kept
    assert (bandit_note(results) == "") == (bandit["settings"]["arm_means"] == list(today))
    bandit["settings"]["arm_means"] = studied = [*today, -2.0]  # a study of another bandit
    for seed_set in bandit["sets"].values():
        for entry in seed_set["methods"].values():
            entry["cells"] = [c for c in entry["cells"] if c["value"] in kept]
    app = RangeExplorer(results)
    for key in MAIN_METHODS:
        line = next(a for a in app.figure.axes[0].lines if a.get_gid() == key)
        both = [
            [c["scores"] for c in bandit["sets"][s]["methods"][key]["cells"]] for s in SEED_SETS
        ]
        pooled = [np.mean(a + b) for a, b in zip(*both, strict=True)]  # every seed of both sets
        assert line.get_ydata() == pytest.approx(pooled, abs=1e-12)
    shown = plain(app.readout.value)
    for seed_set in SEED_SETS:
        assert f"{seed_set} seeds {bandit['sets'][seed_set]['first_seed']}–" in shown
    arms = f"{len(studied)} arms ({', '.join(f'{m:g}' for m in studied)})"
    assert f"the study ran with {arms}; today's bandit has {len(today)} arms" in shown
    app.controls["range_show_unclipped"].value = False
    assert not any(a.get_visible() for a in app.artists["unclipped"])
    assert "unclipped" not in plain(app.readout.value)
    monkeypatch.setattr(apps, "FRESH_SEEDS", 3)
    app.more.button.click()
    seeds = tuple(range(apps.FRESH_OFFSET, apps.FRESH_OFFSET + 3))
    run = run_bandit_loop(
        METHODS["ppo"], BanditLoopSettings(step_size=5.0, arm_means=studied), seeds
    )
    assert app.marks["ppo"].get_ydata()[1] == pytest.approx(run.score.mean(), rel=1e-12)
    assert f"fresh seeds {seeds[0]}–{seeds[-1]}" in plain(app.readout.value)
    assert app.more.progress.value == app.more.progress.max == len(kept)  # a step size at a time


def test_the_bandit_app_draws_the_runs_of_its_settings_and_its_button_adds_seeds():
    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    app.controls["epochs"].value = 5
    for seeds in (DEFAULT_SEEDS, DEFAULT_SEEDS + MORE_BANDIT_SEEDS):
        runs = run_bandit_methods(BanditLoopSettings(epochs=5, iterations=10), tuple(range(seeds)))
        for key, run in runs.items():
            assert np.allclose(_line(app, 0, key).get_ydata(), spread(run.true_reward).mean)
        assert f"{seeds} seeds" in plain(app.readout.value)
        app.more.button.click()
    assert app.more.progress.value == app.more.progress.max == 1  # the methods side by side
    assert not app.more.button.disabled
    app.controls["show_unclipped"].value = False
    assert not _line(app, 0, "unclipped").get_visible()
    assert _line(app, 0, "ppo").get_visible()
    assert app.message.value == ""


def test_a_new_iteration_count_shows_what_a_whole_redraw_shows_without_one():
    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    assert_drawn_in_place(app, "iterations", (20, 5))
    assert app.panels.axes[0].get_xlim() == (0.0, 10.0)


def test_the_bandit_figure_is_dimmed_while_its_runs_are_computed(monkeypatch):
    import ppo_viz.why_clip.methods as methods

    monkeypatch.setattr(BanditLoopExplorer, "run_ahead", lambda self, before, now: None)
    methods.run_bandit_methods.cache_clear()  # another test's runs: not computed here
    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    dimmed_while_running = []

    def watched(*arguments):
        dimmed_while_running.append("ppo-busy" in app.canvas._dom_classes)
        return run_side_by_side(*arguments)

    monkeypatch.setattr(methods, "run_side_by_side", watched)
    app.controls["epochs"].value = 3
    assert dimmed_while_running == [True]
    assert "ppo-busy" not in app.canvas._dom_classes
    app.controls["epochs"].value = 4
    app.controls["epochs"].value = 3  # computed before: nothing runs
    assert dimmed_while_running == [True, True]


def test_every_setting_one_slider_move_away_is_run_ahead_the_moved_slider_first(
    monkeypatch, look_ahead
):
    """After a change the app runs, in a thread, every setting one slider can reach: the
    slider just moved first, nearest first; a slider then released anywhere only draws, the
    same numbers as a run of its own; runs no slider reaches any more are let go."""
    import ppo_viz.why_clip.apps as apps
    import ppo_viz.why_clip.methods as methods

    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    start = len(look_ahead.submitted)
    app.controls["epochs"].value = 30
    plan = look_ahead.submitted[start:]
    assert (app.settings, DEFAULT_SEEDS) in app._runs  # the run the figure shows: run at once
    ahead = [settings for ((settings, _),), _ in plan]
    assert [s.epochs for s in ahead[:9]] == [20, 40, 15, 10, 5, 4, 3, 2, 1]
    assert len(ahead) == len(set(ahead)) == sum(len(v) - 1 for v in CHOICES.values()) == 30
    for settings in ahead:
        differing = [n for n in CHOICES if getattr(settings, n) != getattr(app.settings, n)]
        assert len(differing) == 1
    assert {seeds for ((_, seeds),), _ in plan} == {DEFAULT_SEEDS}
    kept = [settings for settings, _ in list(app._runs)]  # runs out of reach are let go
    assert all(sum(getattr(s, n) != getattr(app.settings, n) for n in CHOICES) <= 1 for s in kept)
    for _, future in plan:
        future.result(timeout=120)
    computed = []
    monkeypatch.setattr(methods, "run_side_by_side", lambda *a: computed.append(a))
    monkeypatch.setattr(apps, "run_side_by_side", lambda *a: computed.append(a))
    monkeypatch.setattr(app, "run_ahead", lambda before, now: None)
    app.controls["epochs"].value = 1  # a release far along the track
    assert computed == []
    expected = run_side_by_side(
        [METHODS[k] for k in MAIN_METHODS], app.settings, tuple(range(DEFAULT_SEEDS))
    )
    for key, run in zip(MAIN_METHODS, expected, strict=True):
        np.testing.assert_array_equal(app.runs(app.settings)[key].probs, run.probs)


def test_a_new_setting_not_a_tick_makes_what_was_submitted_before_skip_or_stop(look_ahead):
    """A tick only shows or hides curves: the settings run ahead stay the same.  Whatever a
    move, a cell run again or the seeds button asks for runs next: every job submitted before
    (any app's) is told to give way, the one under way included."""
    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    look_ahead.cancel_all()  # the runs planned when it was built: not this test's
    gates = [threading.Event(), threading.Event()]
    ticked = look_ahead.submit(lambda: gates[0].wait(10) and look_ahead.gave_way())
    planned = len(look_ahead.submitted)
    app.controls["show_ppo"].value = False
    gates[0].set()
    assert ticked.result(timeout=10) is False
    assert len(look_ahead.submitted) == planned
    under_way = look_ahead.submit(lambda: gates[1].wait(10) and look_ahead.gave_way())
    queued = look_ahead.submit(look_ahead.gave_way)
    look_ahead.cancel_all()
    wanted = look_ahead.submit(look_ahead.gave_way)
    gates[1].set()
    assert [f.result(timeout=10) for f in (under_way, queued, wanted)] == [True, True, False]


def test_in_a_kernel_the_look_ahead_starts_after_the_drawing(monkeypatch, look_ahead):
    """Its thread would slow the drawing down (the drawing waits for the event loop's turn)."""
    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    events: list[str] = []
    monkeypatch.setattr(app, "_redraw", lambda: events.append("drawn"))
    submit = look_ahead.submit
    monkeypatch.setattr(look_ahead, "submit", lambda *a: events.append("ahead") or submit(*a))

    async def a_move() -> None:
        app.controls["epochs"].value = 30
        assert events == []
        await asyncio.sleep(0)

    asyncio.run(a_move())
    assert events[0] == "drawn"
    assert len(events) > 1
    assert set(events[1:]) == {"ahead"}


def test_a_side_by_side_run_gives_up_when_told_to():
    answers = iter([False, False, False, True])
    with pytest.raises(CancelledError, match="before iteration 3"):
        run_side_by_side(
            [METHODS["ppo"]], BanditLoopSettings(iterations=10), (0,), answers.__next__
        )


def test_importing_starts_no_thread_and_python_exits_without_waiting_for_the_look_ahead():
    """The study's command imports the apps, then forks worker processes (forking a process
    that has threads can deadlock): the look-ahead's thread starts with the first run.  A
    kernel's exit or restart does not wait for its queue (seconds of runs)."""
    script = (
        "import threading, time\n"
        "import experiments.why_clip\n"
        "from ppo_viz.why_clip.apps import BanditLoopExplorer\n"
        "print(threading.active_count())\n"
        "app = BanditLoopExplorer()\n"
        "app.controls['epochs'].value = 40\n"
        "print(threading.active_count(), time.monotonic(), flush=True)\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    before, after, ended = process.stdout.split()
    assert (before, after) == ("1", "2")
    assert time.monotonic() - float(ended) < 3.0  # the queue holds 10 s or more


def test_the_cartpole_app_shows_the_committed_curves_of_each_cell_and_set(monkeypatch):
    import ppo_viz.why_clip.figures as figures

    app = CartPoleExplorer()
    assert next(iter(app.cells)).startswith("K = 4")  # CleanRL's K first
    for seed_set in SEED_SETS:
        app.controls["cartpole_seeds"].value = seed_set
        for label, (name, value) in app.cells.items():
            app.controls["cartpole_cell"].value = label
            sweep = one_set(committed(), seed_set)["sweeps"][name]
            for key in MAIN_METHODS:
                line = _line(app, 0, key)
                if key not in sweep["methods"]:  # K = 1 and 10: PPO and the unclipped only
                    assert not line.get_visible()
                    continue
                stored = cell_at(sweep, key, value)["curves"]["return_curve"][0]
                np.testing.assert_allclose(line.get_ydata(), np.array(stored, dtype=float))
            solved = f"{cell_at(sweep, 'ppo', value)['solved']} of {sweep['seeds']}"
            assert solved in plain(app.readout.value)
            assert f"{seed_set} set" in plain(app.readout.value)
    app.controls["cartpole_cell"].value = next(iter(app.cells))
    recomputed = []
    monkeypatch.setattr(figures, "Spread", lambda *a: recomputed.append(1))
    app.controls["cartpole_show_ppo"].value = False
    assert not _line(app, 0, "ppo").get_visible()
    app.controls["cartpole_show_ppo"].value = True
    assert _line(app, 0, "ppo").get_visible()
    assert recomputed == []  # the curves were not drawn again
