"""Notebook 4 (why PPO clips): the math, the runs behind every claim, the table, the apps.

* The gradients: ppo_clip's per-run gradients exactly, the softmax chain, the networks'
  backpropagation and the whole CartPole loss against finite differences.
* The claims the notebook makes about its runs, asserted on the same seeded runs: part A's
  live default run and the committed results of the results command
  (``experiments/why_clip.json``); the settings the prose names come from the constants.
* The results command: re-running slices gives the committed numbers; an unknown name is
  refused before any work; a partial run never writes over the committed results.
* The apps draw what the runs say, and the seeds buttons add seeds.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_states, markdown_of, plain

import ppo_clip
from experiments import why_clip as command
from ppo_viz.app import InputError
from ppo_viz.bandit import chain_through_softmax, log_softmax, sample_gradients
from ppo_viz.machine import fingerprint
from ppo_viz.why_clip.apps import (
    DEFAULT_SEEDS,
    MORE_BANDIT_SEEDS,
    BanditLoopExplorer,
    CartPoleExplorer,
)
from ppo_viz.why_clip.bandit_loop import (
    COLLAPSE_PROBABILITY,
    BanditLoopSettings,
    run_bandit_loop,
    run_bandit_methods,
)
from ppo_viz.why_clip.cartpole_ppo import (
    RANDOM_RETURN,
    CartPoleAgent,
    CartPoleSettings,
    Rollout,
    gae,
    normalized,
    policy_terms,
    random_policy_return,
    run_cartpole,
)
from ppo_viz.why_clip.methods import METHODS, spread
from ppo_viz.why_clip.networks import MLP, Adam, clip_by_global_norm
from ppo_viz.why_clip.results import (
    PAPER_TABLE_1,
    RESULTS_DIR,
    RESULTS_MARKDOWN,
    comparison_rows,
    load_results,
    stored_cartpole_runs,
)

REPOSITORY = RESULTS_DIR.parent
NOTEBOOK = REPOSITORY / "notebooks" / "04_why_clip.ipynb"
OBJECTIVES = ("ppo", "unclipped", "clip_only")
SEEDS = tuple(range(DEFAULT_SEEDS))


@cache
def default_runs():
    """Part A at the notebook's defaults: the runs the notebook draws and describes."""
    return run_bandit_methods(BanditLoopSettings(), SEEDS)


@cache
def committed():
    return load_results()


def finite_difference(loss, params: list[np.ndarray], index: tuple, h: float = 1e-6) -> float:
    """Central difference of ``loss()`` in the parameter entry ``params[i][index]``."""
    i, entry = index
    original = params[i][entry]
    params[i][entry] = original + h
    up = loss()
    params[i][entry] = original - h
    down = loss()
    params[i][entry] = original
    return (up - down) / (2 * h)


# --------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("runs", "n"), [(1, 16), (3, 16), (20, 16), (300, 16), (5, 4096)])
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


@pytest.mark.parametrize("key", OBJECTIVES)
def test_the_bandits_logit_gradient_agrees_with_finite_differences(key):
    method = METHODS[key]
    rng = np.random.default_rng(1)
    arms = rng.integers(0, 4, (1, 12))
    advantages = rng.normal(size=(1, 12))
    logits = [rng.normal(size=(1, 4)) * 0.3]
    logp_old = np.take_along_axis(log_softmax(np.zeros((1, 4))), arms, axis=1)

    def loss() -> float:
        logp = np.take_along_axis(log_softmax(logits[0]), arms, axis=1)
        return ppo_clip.surrogate_loss(
            logp[0], logp_old[0], advantages[0], method.eps, objective=method.objective
        )

    logp_all = log_softmax(logits[0])
    grads, _ = sample_gradients(
        np.take_along_axis(logp_all, arms, axis=1), logp_old, advantages, method
    )
    analytic = chain_through_softmax(grads, arms, np.exp(logp_all))
    for k in range(4):
        assert analytic[0, k] == pytest.approx(
            finite_difference(loss, logits, (0, (0, k))), abs=1e-8
        )


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
    for i, param in enumerate(net.params):
        for entry in np.ndindex(param.shape):
            numeric = finite_difference(loss, net.params, (i, entry))
            assert grads[i][entry] == pytest.approx(numeric, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("key", OBJECTIVES)
def test_the_whole_cartpole_loss_gradient_agrees_with_finite_differences(key):
    """Policy surrogate (from ppo_clip) - entropy bonus + value loss, through both networks."""
    settings = CartPoleSettings()
    agent = CartPoleAgent((0, 1), settings, METHODS[key])
    rng = np.random.default_rng(3)
    observations = rng.normal(size=(2, 16, 4))
    actions = rng.integers(0, 2, (2, 16))
    log_probs, _, _ = policy_terms(agent.policy(observations))
    current = np.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]
    batch = Rollout(
        observations=observations,
        actions=actions,
        logp=current + rng.uniform(-0.4, 0.4, current.shape),  # ratios in and out of the band
        advantages=rng.normal(size=(2, 16)),
        returns=rng.normal(size=(2, 16)),
    )
    params = agent.policy.params + agent.value.params

    def loss() -> float:
        log_probs, _, entropy = policy_terms(agent.policy(batch.observations))
        logp = np.take_along_axis(log_probs, batch.actions[..., None], axis=-1)[..., 0]
        advantages = normalized(batch.advantages)
        total = 0.0
        for run in range(2):
            total += ppo_clip.surrogate_loss(
                logp[run], batch.logp[run], advantages[run], 0.2, objective=METHODS[key].objective
            )
        values = agent.values(batch.observations)
        total -= settings.ent_coef * entropy.mean(axis=1).sum()
        total += settings.vf_coef * 0.5 * ((values - batch.returns) ** 2).mean(axis=1).sum()
        return total

    grads, _ = agent.gradients(batch)
    for i, param in enumerate(params):
        for entry in list(np.ndindex(param.shape))[:: max(1, param.size // 25)]:
            numeric = finite_difference(loss, params, (i, entry))
            assert grads[i][entry] == pytest.approx(numeric, rel=1e-5, abs=1e-8), (i, entry)


def test_gae_follows_its_definition():
    rng = np.random.default_rng(4)
    steps, gamma, lam = 30, 0.9, 0.8
    rewards, values = rng.normal(size=steps), rng.normal(size=steps)
    ends = rng.random(steps) < 0.15
    next_value = 0.7
    advantages, returns = gae(rewards, values, np.float64(next_value), ends, gamma, lam)
    following = [*values[1:], next_value]
    deltas = [rewards[t] + gamma * following[t] * (not ends[t]) - values[t] for t in range(steps)]
    for t in range(steps):
        expected, discount = 0.0, 1.0
        for k in range(t, steps):
            expected += discount * deltas[k]
            if ends[k]:
                break
            discount *= gamma * lam
        assert advantages[t] == pytest.approx(expected, abs=1e-12)
    assert np.allclose(returns, advantages + values)


def test_adams_first_step_moves_each_parameter_by_the_learning_rate():
    params = [np.array([[1.0, -2.0, 0.5]])]
    grads = [np.array([[0.3, -4.0, 1e-9]])]
    Adam(params).step(grads, learning_rate=0.01)
    moved = np.array([1.0, -2.0, 0.5]) - params[0][0]
    assert moved == pytest.approx(0.01 * grads[0][0] / (np.abs(grads[0][0]) + 1e-5))


def test_gradients_are_clipped_to_a_global_norm_per_run():
    grads = [np.array([[3.0, 0.0], [0.1, 0.0]]), np.array([[[4.0]], [[0.0]]])]
    clipped = clip_by_global_norm(grads, 0.5)
    assert np.hypot(clipped[0][0, 0], clipped[1][0, 0, 0]) == pytest.approx(0.5, rel=1e-5)
    assert clipped[0][1, 0] == 0.1  # run 1's norm is below 0.5: untouched


# --------------------------------------------------------------------------
# Runs: seeds, determinism, the random policy
# --------------------------------------------------------------------------


def test_a_seeds_bandit_run_does_not_depend_on_the_seeds_beside_it():
    settings = BanditLoopSettings(iterations=12)
    together = run_bandit_loop(METHODS["unclipped"], settings, (0, 1, 2, 3, 4))
    alone = run_bandit_loop(METHODS["unclipped"], settings, (3,))
    assert np.array_equal(together.probs[3], alone.probs[0])
    assert np.array_equal(together.approx_kl[3], alone.approx_kl[0])


def test_a_seeds_cartpole_run_does_not_depend_on_the_seeds_beside_it():
    settings = CartPoleSettings(total_steps=512, epochs=10, learning_rate=2.5e-3)
    together = run_cartpole(METHODS["unclipped"], settings, (0, 1))
    alone = run_cartpole(METHODS["unclipped"], settings, (1,))
    assert np.array_equal(together.return_curve[1], alone.return_curve[0], equal_nan=True)
    assert np.array_equal(together.approx_kl[1], alone.approx_kl[0])


def test_the_random_policys_return_is_the_scores_zero():
    assert round(random_policy_return(10_000), 1) == RANDOM_RETURN


def test_settings_out_of_range_are_refused_by_name():
    with pytest.raises(InputError, match="epochs must be between 1 and 40"):
        BanditLoopSettings(epochs=0)
    with pytest.raises(InputError, match="batch_size must be a whole number"):
        BanditLoopSettings(batch_size=12.5)
    with pytest.raises(InputError, match="learning_rate must be between"):
        CartPoleSettings(learning_rate=float("nan"))
    with pytest.raises(InputError, match=r"minibatches \(3\) must divide"):
        CartPoleSettings(minibatches=3)


# --------------------------------------------------------------------------
# Part A: the claims of the notebook, on its own runs (20 seeds, defaults)
# --------------------------------------------------------------------------


def test_part_a_without_clipping_is_fast_at_first_then_stuck_on_wrong_arms():
    runs = default_runs()
    unclipped, ppo = runs["unclipped"], runs["ppo"]
    assert unclipped.true_reward[:, 3].mean() > ppo.true_reward[:, 3].mean()
    assert unclipped.collapsed[:, -1].sum() >= 2
    assert unclipped.collapsed.any(axis=1).sum() > unclipped.collapsed[:, -1].sum()  # escapes
    for key in ("ppo", "ppo_eps_0.1", "ppo_eps_0.3"):
        assert runs[key].collapsed[:, -1].sum() == 0
    assert unclipped.approx_kl.mean() > 10 * ppo.approx_kl.mean()
    assert unclipped.entropy[:, 5].mean() < 0.5 * ppo.entropy[:, 5].mean()
    assert unclipped.score.mean() < min(r.score.mean() for k, r in runs.items() if k != "unclipped")


def test_part_a_ppo_beats_plain_pg_clip_only_matches_ppo_and_eps_order():
    runs = default_runs()
    score = {key: run.score.mean() for key, run in runs.items()}
    assert score["ppo"] > score["plain_pg"]
    assert abs(score["clip_only"] - score["ppo"]) < 0.01
    assert score["ppo_eps_0.3"] > score["ppo"] > score["ppo_eps_0.1"]


def committed_scores() -> dict[str, dict[str, float]]:
    """Per column of the committed table (each bandit and CartPole setting): method -> score."""
    results, columns = committed(), {}
    for name, part in results["bandit"].items():
        columns[f"bandit, {name}"] = {k: row["score"] for k, row in part["methods"].items()}
    for name in results["cartpole"]:
        runs = stored_cartpole_runs(results, name)
        columns[f"CartPole, {name}"] = {k: float(run.score.mean()) for k, run in runs.items()}
    return columns


def test_part_a_where_clipping_does_not_help():
    one_epoch = run_bandit_methods(BanditLoopSettings(epochs=1), SEEDS)
    for run in one_epoch.values():
        assert np.array_equal(run.probs, one_epoch["ppo"].probs)
    live = run_bandit_methods(BanditLoopSettings(step_size=0.2), SEEDS)
    assert live["ppo"].clip_fraction[:, :10].mean() > 0.1  # "the clip still engages"
    scores = committed_scores()
    for small in (
        {key: run.score.mean() for key, run in live.items()},
        scores["bandit, small steps (step size 0.2)"],
    ):
        assert small["unclipped"] >= small["ppo"]
        assert small["plain_pg"] < small["ppo"] - 0.1
    gap = {
        name: scores[name]["ppo"] - scores[name]["unclipped"]
        for name in ("bandit, defaults", "bandit, large batches (64 pulls)")
    }
    assert gap["bandit, large batches (64 pulls)"] < gap["bandit, defaults"] / 5


def test_the_notebook_states_part_as_settings(prose):
    defaults = BanditLoopSettings()
    assert_states(
        prose,
        f"$K = {defaults.epochs}$ epochs per batch",
        f"$\\alpha = {defaults.step_size:g}$",
        f"$N = {defaults.batch_size}$ pulls per batch",
        f"{defaults.iterations} iterations, {DEFAULT_SEEDS} seeds",
        f"adds {MORE_BANDIT_SEEDS} seeds",
        f"at least {COLLAPSE_PROBABILITY:g} on a wrong arm",
        f"{command.FULL_PLAN.bandit_seeds} seeds for each of the four bandit settings",
        f"{command.FULL_PLAN.cartpole_seeds} seeds × 50,000 steps",
    )
    assert len(command.BANDIT_SETTINGS) == 4


@pytest.fixture(scope="module")
def prose() -> str:
    return markdown_of(NOTEBOOK)


# --------------------------------------------------------------------------
# Part B and the table: the claims, on the committed runs
# --------------------------------------------------------------------------


def test_part_b_at_cleanrls_settings_the_clip_never_engages():
    runs = stored_cartpole_runs(committed(), "CleanRL")
    assert runs["ppo"].clip_fraction.mean() < 0.01
    scores = [run.score.mean() for run in runs.values()]
    assert max(scores) - min(scores) < 0.1
    assert np.array_equal(runs["ppo"].return_curve, runs["clip_only"].return_curve)


def test_part_b_with_bigger_steps_the_unclipped_objective_falls_apart():
    runs = stored_cartpole_runs(committed(), "bigger steps")
    ppo, unclipped, clip_only = runs["ppo"], runs["unclipped"], runs["clip_only"]
    assert ppo.clip_fraction.mean() > 0.01
    assert (ppo.final_return >= 475).sum() >= 9
    assert np.nanmax(unclipped.approx_kl) > 100 * np.nanmax(ppo.approx_kl)
    assert (unclipped.final_return < RANDOM_RETURN).sum() >= 2
    assert (unclipped.final_return <= 11).sum() >= 2  # "loses the pole within ten steps"
    assert np.nanmean(ppo.return_curve[:, -20:]) >= 475  # "and stays there"
    assert (clip_only.final_return >= 475).sum() >= 8  # "clip-only gets there too"
    assert unclipped.final_return.mean() < ppo.final_return.mean() - 100
    assert np.nanmean(clip_only.return_curve) < np.nanmean(ppo.return_curve)
    assert clip_only.final_return.mean() <= ppo.final_return.mean()


def test_the_table_agrees_with_table_1_where_updates_are_large_and_differs_elsewhere():
    scores = committed_scores()
    for name in ("bandit, defaults", "CartPole, bigger steps"):
        column = {k: v for k, v in scores[name].items() if k in PAPER_TABLE_1}
        assert min(column, key=column.get) == "unclipped"
        assert column["ppo"] >= max(column.values()) - 0.01
    defaults = scores["bandit, defaults"]
    assert defaults["ppo_eps_0.3"] > defaults["ppo"] > defaults["ppo_eps_0.1"]
    assert scores["CartPole, CleanRL"]["unclipped"] >= scores["CartPole, CleanRL"]["ppo"] - 0.05
    assert all(column["unclipped"] > 0 for column in scores.values())


# --------------------------------------------------------------------------
# The results command: the committed files are its output, slices re-run, nothing overwritten
# --------------------------------------------------------------------------


def test_the_committed_plan_is_the_full_plan():
    """The committed results are the full plan's, for the bandit whose arm means they record."""
    results = committed()
    assert set(results["bandit"]) == set(command.BANDIT_SETTINGS)
    assert set(results["cartpole"]) == set(command.CARTPOLE_SETTINGS)
    for name, entry in results["bandit"].items():
        recorded = BanditLoopSettings(**entry["settings"])
        planned = command.BANDIT_SETTINGS[name]
        assert recorded == BanditLoopSettings(
            **{**planned.__dict__, "arm_means": recorded.arm_means}
        )
        assert entry["seeds"] == command.FULL_PLAN.bandit_seeds
    for name, entry in results["cartpole"].items():
        assert CartPoleSettings(**entry["settings"]) == command.CARTPOLE_SETTINGS[name]
        assert entry["seeds"] == list(range(command.FULL_PLAN.cartpole_seeds))


def test_rerunning_part_a_reproduces_the_committed_numbers():
    entry = committed()["bandit"]["defaults"]
    settings, seeds = BanditLoopSettings(**entry["settings"]), tuple(range(entry["seeds"]))
    for key in ("ppo", "unclipped"):  # a slice: two methods, every seed
        run = run_bandit_loop(METHODS[key], settings, seeds)
        stored = entry["methods"][key]
        assert run.score.mean() == pytest.approx(stored["score"], rel=1e-12)
        assert run.approx_kl.mean() == pytest.approx(stored["approx_kl"], rel=1e-12)
        assert run.clip_fraction.mean() == pytest.approx(stored["clip_fraction"], rel=1e-12)
        assert run.collapsed[:, -1].mean() == stored["collapsed"]


@pytest.mark.slow
def test_rerunning_a_slice_of_the_results_command_reproduces_its_committed_runs(tmp_path):
    """The command itself, for seed 0 of the unclipped objective with bigger steps."""
    run = [sys.executable, "-m", "experiments.why_clip", "--setting", "bigger steps"]
    run += ["--method", "unclipped", "--cartpole-seeds", "1", "--output-dir", str(tmp_path)]
    subprocess.run(run, cwd=REPOSITORY, check=True, capture_output=True, timeout=600)
    results = load_results(tmp_path / "why_clip.json")
    fresh = results["cartpole"]["bigger steps"]["methods"]
    stored = committed()["cartpole"]["bigger steps"]["methods"]["unclipped"]
    assert set(fresh) == {"unclipped"}
    assert results["machine"] == fingerprint()
    if committed()["machine"] == fingerprint():  # the same last bits: the same run, exactly
        for name, values in fresh["unclipped"].items():
            assert values[0] == stored[name][0], name
    else:  # chaotic: one last-bit difference changes the run; it is one draw of the same spread
        returns = np.array(stored["final_return"])
        assert abs(fresh["unclipped"]["final_return"][0] - returns.mean()) <= 3 * returns.std()


def test_results_md_shows_the_table_of_the_committed_json():
    markdown = RESULTS_MARKDOWN.read_text(encoding="utf-8")
    header, rows = comparison_rows(committed())
    for line in (header, *rows):
        assert "| " + " | ".join(line) + " |" in markdown
    assert "arm means (" in markdown


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """The command's scratch folder for partial runs, here a temporary one."""
    folder = tmp_path / "scratch"
    monkeypatch.setattr(command, "SCRATCH_DIR", folder)
    return folder


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--method", "PPO"], "invalid choice: 'PPO' (choose from"),
        (["--method", "ppo_eps_0.2"], "invalid choice: 'ppo_eps_0.2' (choose from"),
        (["--setting", "default"], "invalid choice: 'default' (choose from"),
        (["--setting", "bigger steps", "--method", "plain_pg"], "nothing to run"),
        (["--bandit-seeds", "0"], "must be a whole number of at least 1, got '0'"),
        (["--cartpole-seeds", "2.5"], "must be a whole number of at least 1, got '2.5'"),
        (["--quick", "--setting", "bigger steps"], "no setting is named 'bigger steps'"),
    ],
)
def test_an_unknown_name_is_refused_with_the_valid_ones_before_any_work(
    arguments, said, scratch, monkeypatch, capsys
):
    ran = []
    monkeypatch.setattr(command, "run_comparison", lambda *a: ran.append(a))
    before = {path.name: path.read_bytes() for path in RESULTS_DIR.iterdir() if path.is_file()}
    with pytest.raises(SystemExit) as exit_:
        command.main(arguments)
    assert exit_.value.code == 2
    shown = capsys.readouterr().err
    assert said in shown
    valid = [*METHODS, *command.FULL_PLAN.setting_names] if "choose from" in said else []
    assert all(name in shown for name in valid)  # the list of valid names
    assert ran == []
    assert not scratch.exists()
    assert before == {
        path.name: path.read_bytes() for path in RESULTS_DIR.iterdir() if path.is_file()
    }


def test_an_output_folder_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(SystemExit):
        command.main(["--setting", "defaults", "--output-dir", str(tmp_path / "file")])
    assert "is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.parametrize(
    "arguments",
    [
        ["--setting", "defaults", "--bandit-seeds", "2"],
        ["--method", "ppo", "--setting", "defaults", "--bandit-seeds", "3"],
    ],
)
def test_a_partial_run_writes_to_the_scratch_folder_and_the_committed_results_stay(
    arguments, scratch
):
    before = {path.name: path.read_bytes() for path in RESULTS_DIR.iterdir() if path.is_file()}
    assert command.main(arguments) == 0
    after = {path.name: path.read_bytes() for path in RESULTS_DIR.iterdir() if path.is_file()}
    assert after == before
    written = load_results(scratch / "why_clip.json")
    assert list(written["bandit"]) == ["defaults"]
    assert written["bandit"]["defaults"]["seeds"] == int(arguments[-1])
    assert written["cartpole"] == {}
    assert {path.name for path in scratch.iterdir()} == {
        "why_clip.json",
        "RESULTS.md",
        "why_clip.png",
    }


def test_a_partial_run_leaves_no_stale_figure_beside_its_results(tmp_path, scratch):
    """Each run writes the figure of what it ran, next to the table of what it ran."""
    output = tmp_path / "out"
    command.main(["--setting", "defaults", "--bandit-seeds", "2", "--output-dir", str(output)])
    first = (output / "why_clip.png").read_bytes()
    command.main(
        [
            "--setting",
            "large batches (64 pulls)",
            "--bandit-seeds",
            "2",
            "--output-dir",
            str(output),
        ]
    )
    assert (output / "why_clip.png").read_bytes() != first
    assert "large batches" in (output / "RESULTS.md").read_text()
    assert not scratch.exists()


# --------------------------------------------------------------------------
# The apps
# --------------------------------------------------------------------------


def _line(app, panel: int, key: str):
    return app.panels.lines[panel][key]


def test_the_bandit_app_draws_the_runs_of_its_settings():
    app = BanditLoopExplorer()
    app.controls["epochs"].value = 5
    runs = run_bandit_methods(BanditLoopSettings(epochs=5), SEEDS)
    for key, run in runs.items():
        assert np.allclose(_line(app, 0, key).get_ydata(), spread(run.true_reward).mean)
        assert np.allclose(app.dots[key].get_ydata(), run.score)
    assert f"{DEFAULT_SEEDS} seeds" in plain(app.readout.value)
    app.controls["show_unclipped"].value = False
    assert not _line(app, 0, "unclipped").get_visible()
    assert not app.dots["unclipped"].get_visible()
    assert _line(app, 0, "ppo").get_visible()
    app.controls["step_size"].value = float("nan")
    assert "step_size must be between" in plain(app.message.value)


def test_the_bandit_apps_button_adds_seeds():
    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    app.more.button.click()
    runs = run_bandit_methods(
        BanditLoopSettings(iterations=10), tuple(range(DEFAULT_SEEDS + MORE_BANDIT_SEEDS))
    )
    for key, run in runs.items():
        assert np.allclose(_line(app, 0, key).get_ydata(), spread(run.true_reward).mean)
    assert f"{DEFAULT_SEEDS + MORE_BANDIT_SEEDS} seeds" in plain(app.readout.value)
    assert app.more.progress.value == app.more.progress.max == len(runs)
    assert not app.more.button.disabled


def test_the_cartpole_app_shows_the_committed_runs_of_each_setting():
    app = CartPoleExplorer()
    for bigger_steps, setting in ((True, "bigger steps"), (False, "CleanRL")):
        app.controls["cartpole_bigger_steps"].value = bigger_steps
        for key, runs in stored_cartpole_runs(committed(), setting).items():
            line = _line(app, 0, key)
            assert np.allclose(line.get_ydata(), spread(runs.return_curve).mean, equal_nan=True)
        assert f"{setting}: 10 seeds" in plain(app.readout.value)


def test_the_cartpole_apps_button_trains_two_more_seeds():
    app = CartPoleExplorer()
    tiny = CartPoleSettings(total_steps=512)
    app.stored["bigger steps"] = {
        key: run_cartpole(METHODS[key], tiny, (0,)) for key in app.stored["bigger steps"]
    }
    app.more.button.click()
    for key, runs in app.stored["bigger steps"].items():
        assert runs.seeds == (0, 1, 2)
        assert runs.return_curve.shape == (3, tiny.iterations)
        drawn = _line(app, 0, key).get_ydata()
        assert np.allclose(drawn, spread(runs.return_curve).mean, equal_nan=True)
    assert app.more.progress.value == app.more.progress.max
    assert "3 seeds" in plain(app.readout.value)


def test_a_methods_checkbox_only_shows_or_hides_its_curves(monkeypatch):
    import ppo_viz.why_clip.figures as figures

    app = CartPoleExplorer()
    before = _line(app, 0, "ppo").get_ydata().copy()
    recomputed = []
    monkeypatch.setattr(figures, "spread", lambda values: recomputed.append(1) or spread(values))
    app.controls["cartpole_show_ppo"].value = False
    assert not _line(app, 0, "ppo").get_visible()
    app.controls["cartpole_show_ppo"].value = True
    assert _line(app, 0, "ppo").get_visible()
    assert recomputed == []  # the curves were not computed again
    np.testing.assert_array_equal(_line(app, 0, "ppo").get_ydata(), before)


def test_the_bandit_figure_is_dimmed_while_its_runs_are_computed(monkeypatch):
    import ppo_viz.why_clip.apps as apps

    app = BanditLoopExplorer(BanditLoopSettings(iterations=10))
    dimmed_while_running = []

    def watched(*arguments):
        dimmed_while_running.append("ppo-busy" in app.canvas._dom_classes)
        return run_bandit_methods(*arguments)

    monkeypatch.setattr(apps, "run_bandit_methods", watched)
    app.controls["epochs"].value = 3
    assert dimmed_while_running == [True]
    assert "ppo-busy" not in app.canvas._dom_classes
    app.controls["epochs"].value = 4
    app.controls["epochs"].value = 3  # computed before: nothing runs
    assert dimmed_while_running == [True, True]
