"""Notebook 3: several epochs of PPO on one batch of the bandit (``bandit``).

* the bandit and the loop: the chain rule through the softmax agrees with the Jacobian and
  with central differences of ppo_clip's loss, each epoch is one gradient step on it, the
  early stop stops before the step that would follow an estimate above the target;
* the batch the notebook starts from meets its documented rule;
* what the notebook says about the default run, as claims on the runs (the prose states no
  number that depends on the batch; the settings it names come from the constants);
* the explorer, headless: a control changes the figure's data to the run with the new settings;
  a setting it cannot use, set from code, shows a message and keeps the last good run.
"""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pytest
import traitlets
from epochs_rule import TRY_2_OUTSIDE, first_seed, misleading_problems
from helpers import assert_states, markdown_of, plain
from matplotlib.colors import to_rgba

import ppo_clip
from bandit import ARM_MEANS, chain_through_softmax, log_softmax, softmax
from ppo_clip import OBJECTIVES
from ppo_viz.epochs import EpochsExplorer
from ppo_viz.epochs.app import EPOCH_AXIS_MAX
from ppo_viz.epochs.text import sample_label
from ppo_viz.epochs.training import (
    BIG_STEP,
    COLUMNS,
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_STEP_SIZE,
    DEFAULT_TARGET_KL,
    MISLEADING_SEED,
    PULLS_PER_ARM,
    SETTING_RANGES,
    Column,
    Settings,
    arm_sums,
    batch_of,
    n_samples,
    outside_band,
    run_all,
    survey,
    train,
)
from ppo_viz.numbers import rounded
from ppo_viz.style import arm_styles

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03_epochs_on_one_batch.ipynb"
K = len(ARM_MEANS)
EPS = DEFAULT_EPS


@pytest.fixture(scope="module")
def runs():
    return run_all(Settings())


@pytest.fixture(scope="module")
def favoured() -> int:
    """The arm the default batch favours: its largest advantage sum."""
    return int(np.argmax(arm_sums(batch_of(MISLEADING_SEED))))


def loss_at(logits, batch, eps, objective) -> float:
    return ppo_clip.surrogate_loss(
        log_softmax(logits)[batch.actions],
        batch.logp_old,
        batch.advantages,
        eps,
        objective=objective,
    )


def assert_each_epoch_is_one_gradient_step(run, objective, eps, eps_high=None) -> None:
    """Every epoch's sample gradients are ppo_clip's at its policy, and the next policy is one
    step of the run's step size against them, chained through the softmax."""
    b = run.batch
    for epoch, logits in enumerate(run.logits):
        logp = log_softmax(logits)[b.actions]
        breakdown = ppo_clip.clip_breakdown(logp, b.logp_old, b.advantages, eps, eps_high=eps_high)
        grads = ppo_clip.objective_grad(breakdown, objective)
        np.testing.assert_array_equal(run.sample_grads[epoch], grads)
        if epoch < run.epochs_run:
            chained = chain_through_softmax(grads, b.actions, softmax(logits))
            step = logits - run.settings.step_size * chained
            np.testing.assert_allclose(run.logits[epoch + 1], step, rtol=0, atol=1e-15)


# --------------------------------------------------------------------------
# The bandit and the loop
# --------------------------------------------------------------------------


def test_a_batch_is_seeded_sorted_and_its_advantages_are_not_normalized():
    batch = batch_of(7)
    assert batch.n == n_samples() == PULLS_PER_ARM * K
    np.testing.assert_allclose(batch.advantages, batch.rewards - batch.rewards.mean(), atol=1e-15)
    assert np.all(np.diff(batch.actions) >= 0)
    for arm in range(K):
        assert np.all(np.diff(batch.advantages[batch.actions == arm]) <= 0)
    np.testing.assert_allclose(batch.logp_old, np.log(1 / K), rtol=1e-15)
    assert not batch.rewards.flags.writeable  # cached and shared


def test_softmax_is_stable():
    """(The chain rule through it: test_why_clip.py's finite differences.)"""
    probs = softmax([1000.0, 0.0, -1000.0, 999.0])
    assert probs.sum() == pytest.approx(1.0)
    assert probs[0] / probs[3] == pytest.approx(np.e)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_each_epoch_is_one_gradient_step_on_the_objectives_loss(objective):
    run = run_all(Settings(step_size=1.0, n_epochs=15))[objective]
    assert_each_epoch_is_one_gradient_step(run, objective, EPS)
    assert run.true_reward[-1] == pytest.approx(softmax(run.logits[-1]) @ ARM_MEANS)


def test_the_unclipped_loss_is_linear_in_the_policy(runs):
    """The prose's identity: L = -sum_k pi_k / pi_old_k * (1/N) sum_{a_t = k} A_t."""
    run = runs["unclipped"]
    sums = arm_sums(run.batch)
    for logits in run.logits[::5]:
        linear = -np.sum(softmax(logits) * K * sums / run.batch.n)
        assert loss_at(logits, run.batch, EPS, "unclipped") == pytest.approx(linear, abs=1e-14)


def test_samples_of_one_arm_share_one_ratio(runs):
    for run in runs.values():
        for arm in range(K):
            members = run.ratios[:, run.batch.actions == arm]
            assert (members == members[:, :1]).all()


@pytest.mark.parametrize("target", [0.005, 0.02, 0.05])
def test_the_early_stop_comes_before_the_step_once_k3_exceeds_the_target(target):
    for objective, run in run_all(Settings(target_kl=target, step_size=1.0)).items():
        free = run_all(Settings(step_size=1.0))[objective]
        assert (run.approx_kl[:-1] <= target).all()
        assert run.stopped_early == (run.epochs_run < DEFAULT_EPOCHS)
        if run.stopped_early:
            assert run.approx_kl[-1] > target
        np.testing.assert_array_equal(run.logits, free.logits[: run.epochs_run + 1])
        assert (run.approx_kl >= 0).all()


def test_the_columns_trained_together_are_each_what_it_is_trained_alone():
    """The explorer trains its columns in one call; early stops end them at different epochs
    (at the first target where they do, for any bandit)."""
    for target in (0.02, 0.01, 0.005, 0.05, 0.1):
        settings = Settings(step_size=1.0, target_kl=target)
        together = train(batch_of(settings.seed), list(COLUMNS), settings)
        if len({run.epochs_run for run in together.values()}) > 1:
            break
    assert len({run.epochs_run for run in together.values()}) > 1
    for key, run in together.items():
        alone = train(batch_of(settings.seed), [key], settings)[key]
        for name in ("logits", "sample_grads", "clip_fraction", "approx_kl"):
            np.testing.assert_array_equal(getattr(run, name), getattr(alone, name))
        assert (run.objective, run.stopped_early) == (key, alone.stopped_early)


#: Settings refused: the setting, the value, the error and its message (the explorer's seed box
#: says the same, of the batch seed).
OUT_OF_RANGE_SEEDS = {
    -1: "-1",
    10**400: "about 10^400",
    -(10**400): "about -10^400",
    2**64: "about 10^19",
    2**32: "4294967296",
}
BAD_SETTINGS = [
    ("eps", 0.9, ValueError, "eps must be between 0 and 0.5, got 0.9"),
    ("eps", math.inf, ValueError, "eps must be between 0 and 0.5, got inf"),
    ("step_size", 0.0, ValueError, "step_size must be between 0.05 and 4, got 0.0"),
    ("n_epochs", 2.5, ValueError, "n_epochs must be a whole number, got 2.5"),
    ("target_kl", math.nan, ValueError, "target_kl must be between 0.001 and 0.2, got nan"),
    ("seed", "seven", TypeError, "seed must be a number, got str"),
    *[
        ("seed", seed, ValueError, f"seed must be between 0 and 4294967295, got {said}")
        for seed, said in OUT_OF_RANGE_SEEDS.items()
    ],
]


@pytest.mark.parametrize(
    ("name", "value", "error", "message"), BAD_SETTINGS, ids=[row[3] for row in BAD_SETTINGS]
)
def test_bad_settings_are_refused_naming_the_argument(name, value, error, message):
    for make in (Settings, EpochsExplorer):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            make(**{"seed": 0, name: value})


# --------------------------------------------------------------------------
# The batch the notebook starts from
# --------------------------------------------------------------------------


def test_the_starting_batch_meets_the_documented_rule():
    """MISLEADING_SEED's batch is the first to meet every point of its rule, tests/epochs_rule.py's
    (the tests below check the rest of what the notebook says of it, and how it says it)."""
    assert misleading_problems(MISLEADING_SEED, every=True) == []
    assert first_seed(misleading_problems, stop=MISLEADING_SEED + 1) == MISLEADING_SEED


# --------------------------------------------------------------------------
# What the notebook says
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prose() -> str:
    return markdown_of(NOTEBOOK)


def test_the_notebook_states_the_default_settings(prose):
    assert_states(
        prose,
        f"$\\alpha = {DEFAULT_STEP_SIZE:g}$",
        f"$\\epsilon = {DEFAULT_EPS:g}$ for {DEFAULT_EPOCHS} epochs",
        f"epoch axis runs to {EPOCH_AXIS_MAX}",
        f"{DEFAULT_EPOCHS} epochs of step size {DEFAULT_STEP_SIZE:g}",
        f"$N = {n_samples()}$ pulls from the {K} arms, on average {PULLS_PER_ARM} per arm",
    )


def test_most_batches_point_at_a_good_arm_and_the_unclipped_run_wins_on_most(prose):
    """The claims around the survey cell ("most batches ...", things to try 3), whose counts
    the cell prints on the reader's machine, and what is typical of the batches that favour a
    worse arm, against what MISLEADING_SEED's was chosen to show (cells 0, 8, 12, Summary)."""
    seeds = range(300)
    count = survey(seeds)
    assert count["good_arm"] > len(seeds) / 2
    assert count["unclipped_wins"] > len(seeds) / 2
    wrong = count["wrong_way"]
    assert wrong == len(seeds) - count["good_arm"]
    assert min(count["unclipped_below"], count["ppo_above"]) > wrong / 2  # "most"
    assert 0.35 < count["clip_only_below"] / wrong < 0.65  # "about half"
    assert_states(
        prose,
        f"on {count['unclipped_wins']} of {len(seeds)} batches the unclipped run ends",
        f"all three at once, as here, on {count['as_chosen']} of {wrong}",
        "the first batch seed meeting a stated rule",
    )


def test_the_runs_are_identical_until_a_ratio_leaves_the_band(runs):
    ppo = runs["clipped"]
    parted = min(
        int(np.flatnonzero((runs[o].logits != ppo.logits).any(axis=1))[0])
        for o in ("unclipped", "clip_only")
    )
    outside = (outside_band(ppo.ratios) > 0).any(axis=1)
    assert parted == int(np.flatnonzero(outside)[0]) + 1  # the step after it differs
    assert (ppo.clip_fraction[: parted - 1] == 0).all()  # nothing clipped before


def test_ppo_stalls_at_the_edges_and_keeps_the_wrong_way_gradients(runs, favoured):
    run = runs["clipped"]
    on_arm = run.batch.actions == favoured
    positive, negative = on_arm & (run.batch.advantages > 0), on_arm & (run.batch.advantages < 0)
    assert not run.zero_grad[:, negative].any()  # yellow in every epoch
    above = run.arm_ratios()[:, favoured] > 1 + EPS
    for t in np.flatnonzero(positive):
        np.testing.assert_array_equal(run.zero_grad[:, t], above)  # white once past the edge
    # Small KL and ratios close to the band, and the arm never below it: the rule's point (9).


def test_clip_only_leaves_the_wrong_way_samples_without_gradient(runs, favoured):
    run = runs["clip_only"]  # ends below PPO's, hollow circles on moving ratios: rule (3), (10)
    negative = (run.batch.actions == favoured) & (run.batch.advantages < 0)
    silent = run.zero_grad[:, negative].all(axis=1)
    first = int(np.flatnonzero(silent)[0])
    assert silent[first:].all()  # never gets it back
    assert outside_band(run.arm_ratios()[first, favoured]) > 0  # because it left the band


def test_a_big_step_overshoots_before_anything_is_clipped(prose):
    """The cell under "A soft trust region": the first step, with nothing clipped, carries a
    ratio far past the band; later steps pull it back, and big pushes throw it out again (the
    rule's point (4)); nothing is clipped before the first step, whatever the batch."""
    assert_states(prose, f"at step size {BIG_STEP:g}")
    code = "".join(c.source for c in nbformat.read(NOTEBOOK, 4).cells if c.cell_type == "code")
    assert "Settings(step_size=BIG_STEP)" in code


def test_early_stopping_keeps_the_unclipped_runs_reward_and_stops_ppo_a_little_lower(runs, prose):
    """The unclipped run stops after a few epochs and keeps more of its true reward; PPO stops
    too, a little below its full run (the rule's point (7)): the epochs and rewards the prose
    states are the summary table's."""
    stopped = run_all(Settings(target_kl=DEFAULT_TARGET_KL))
    unclipped, ppo = stopped["unclipped"], stopped["clipped"]
    ppo_reward, full_reward = (rounded(r.true_reward[-1], 3) for r in (ppo, runs["clipped"]))
    assert_states(
        prose,
        f"target of {DEFAULT_TARGET_KL:g}",
        f"stops after {unclipped.epochs_run} epochs",
        f"PPO stops too, after {ppo.epochs_run}, a little below its full run "
        f"({ppo_reward} against {full_reward})",
    )


def things_to_try(prose: str) -> list[list[float]]:
    """The numbers each item of the notebook's "Things to try" states, item by item."""
    section = prose.split("## Things to try")[1].split(" ## ")[0]  # whitespace made single
    items = re.split(r"(?:^| )\d+\. ", section.strip())[1:]
    return [[float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", item)] for item in items]


def test_things_to_try_can_be_done_with_the_controls(prose):
    (low_eps, high_eps), (start, outside), *_ = things_to_try(prose)
    low, high, _ = SETTING_RANGES["eps"]
    assert low <= low_eps < high_eps <= high  # 1: lower eps, then raise it
    assert start == DEFAULT_STEP_SIZE  # 2: raise the step size from the default ...
    assert outside == TRY_2_OUTSIDE  # ... until ratios leave the band that far: point (11)
    assert SETTING_RANGES["target_kl"][0] < DEFAULT_TARGET_KL < SETTING_RANGES["target_kl"][1]


# --------------------------------------------------------------------------
# The explorer, headless
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_explorer() -> EpochsExplorer:
    return EpochsExplorer()


@pytest.fixture
def explorer(fresh_explorer: EpochsExplorer) -> EpochsExplorer:
    """One explorer for the module (building one takes a second), back at its start."""
    fresh_explorer.reset()
    assert fresh_explorer.message.value == ""
    return fresh_explorer


def assert_figure_shows(app: EpochsExplorer, expected: Settings, *, message: bool = False) -> None:
    """Every drawn value is the value of ``run_all(expected)``; the table agrees; a message
    shows only with ``message`` (the last good run stays on screen under it)."""
    runs = run_all(expected)
    assert app.settings == expected
    for objective, run in runs.items():
        column = app.columns[objective]
        for arm, line in enumerate(column["arms"]):
            np.testing.assert_array_equal(line.get_xdata(), run.epochs)
            np.testing.assert_array_equal(line.get_ydata(), run.arm_ratios()[:, arm])
        cells = column["cells"].get_array()
        np.testing.assert_array_equal(cells[:, : run.epochs_run + 1], run.push_directions())
        assert cells.mask[:, run.epochs_run + 1 :].all()  # grey: not run
        assert np.isfinite(cells.data).all()  # the colour map normalises hidden values too
        assert column["band"].get_y() == pytest.approx(1 - expected.eps)
        assert column["band"].get_height() == pytest.approx(2 * expected.eps)
        assert column["stop"].get_visible() == run.stopped_early
        for name, line in app.metric_lines[objective].items():
            np.testing.assert_array_equal(line.get_ydata(), getattr(run, name))
        assert f"<td>{rounded(run.true_reward[-1], 3)}</td>" in app.readout.value
    assert app.figure.axes[0].get_xlim() == (-0.5, EPOCH_AXIS_MAX + 0.5)
    assert app.target.get_visible() == (expected.target_kl is not None)
    batch, colors = runs["clipped"].batch, [arm["color"] for arm in arm_styles(K)]
    assert list(app.labelled_map.get_yticks()) == list(range(batch.n))  # a label per row
    for t, label in enumerate(app.labelled_map.get_yticklabels()):
        assert label.get_text() == sample_label(t, batch.actions[t], batch.advantages[t])
        assert to_rgba(label.get_color()) == to_rgba(colors[batch.actions[t]])
    edges = np.cumsum(np.bincount(batch.actions, minlength=K))[:-1] - 0.5
    assert [line.get_ydata()[0] for line in app.columns["clipped"]["separators"]] == list(edges)
    assert (app.message.value != "") == message


def test_the_explorer_starts_at_the_documented_defaults(fresh_explorer):
    explorer, defaults = fresh_explorer, (EPS, DEFAULT_STEP_SIZE, DEFAULT_EPOCHS, MISLEADING_SEED)
    assert (*explorer.values().values(),) == (*defaults, False, DEFAULT_TARGET_KL)
    assert explorer.controls["target_kl"].disabled
    assert_figure_shows(explorer, Settings())
    assert "The true reward started at" in plain(explorer.readout.value)


CONTROL_CHANGES = {
    "eps": (0.3, {"eps": 0.3}),
    "step_size": (1.5, {"step_size": 1.5}),
    "epochs": (12, {"n_epochs": 12}),
    "seed": (10, {"seed": 10}),  # early stop and target KL: test_the_target_kl_slider_...
}


@pytest.mark.parametrize("name", CONTROL_CHANGES)
def test_each_control_moves_the_figure_to_the_run_with_the_new_setting(explorer, name):
    value, changed = CONTROL_CHANGES[name]
    explorer.controls[name].value = value
    assert_figure_shows(explorer, Settings(**changed))


def test_in_presentation_mode_the_maps_rows_are_labelled_by_arm(monkeypatch):
    """Twelve lines of large type do not fit the maps' height: each arm's rows get one label,
    at their middle, drawn with the figure's static part (not at every frame)."""
    monkeypatch.setenv("PPO_PRESENT", "1")
    app = EpochsExplorer()
    actions, labels = app.runs["clipped"].batch.actions, app.labelled_map.get_yticklabels()
    arms = sorted(set(actions.tolist()))
    assert [label.get_text() for label in labels] == [f"arm {arm}" for arm in arms]
    assert list(app.labelled_map.get_yticks()) == [
        np.flatnonzero(actions == a).mean() for a in arms
    ]
    assert not set(labels) & set(app.moving)


def test_the_target_kl_slider_sets_the_threshold_once_early_stop_is_on(explorer):
    target = explorer.controls["target_kl"]
    target.value = 0.05
    assert_figure_shows(explorer, Settings())  # still off
    explorer.controls["early_stop"].value = True
    assert not target.disabled
    assert_figure_shows(explorer, Settings(target_kl=target.value))
    assert explorer.target.get_ydata()[0] == pytest.approx(target.value)
    explorer.controls["early_stop"].value = False
    assert target.disabled
    assert_figure_shows(explorer, Settings())


def test_the_zero_gradient_panel_counts_each_runs_own_gradients(explorer, runs):
    lines = explorer.metric_lines
    assert (lines["unclipped"]["zero_grad_fraction"].get_ydata() == 0).all()
    np.testing.assert_array_equal(
        lines["clipped"]["zero_grad_fraction"].get_ydata(), runs["clipped"].clip_fraction
    )
    shown = plain(explorer.readout.value)
    for run in runs.values():
        assert f"{int(run.zero_grad[-1].sum())} of {run.batch.n}" in shown


# --------------------------------------------------------------------------
# The explorer: settings set from code (moved here from test_hostile_input.py)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", OUT_OF_RANGE_SEEDS, ids=OUT_OF_RANGE_SEEDS.values())
def test_a_seed_the_app_cannot_use_shows_a_short_message_and_keeps_the_run(explorer, seed):
    explorer.controls["seed"].value = 10
    explorer.controls["seed"].value = seed
    said = f"The batch seed must be between 0 and 4294967295, got {OUT_OF_RANGE_SEEDS[seed]}."
    assert plain(explorer.message.value).startswith(said)
    assert "Fix the batch seed to apply other changes." in plain(explorer.message.value)
    assert len(explorer.message.value) < 600
    assert_figure_shows(explorer, Settings(seed=10), message=True)
    explorer.controls["early_stop"].value = True  # the control still responds; nothing redraws
    assert not explorer.controls["target_kl"].disabled
    assert explorer.settings == Settings(seed=10)
    explorer.controls["seed"].value = 11
    assert_figure_shows(explorer, Settings(seed=11, target_kl=DEFAULT_TARGET_KL))


@pytest.mark.parametrize("seed", [2.5, 3.0, float("nan"), "12", "seven", True, None])
def test_a_seed_that_is_not_a_whole_number_is_refused_before_anything_changes(explorer, seed):
    with pytest.raises(traitlets.TraitError, match="expected a whole number"):
        explorer.controls["seed"].value = seed
    assert explorer.controls["seed"].value == MISLEADING_SEED
    assert_figure_shows(explorer, Settings())


def test_the_target_kl_sliders_right_end_is_the_ranges_end(explorer):
    """The log slider's right end is 10 ** log10(0.2) = 0.20000000000000004, above 0.2."""
    explorer.controls["early_stop"].value = True
    explorer.controls["target_kl"].value = 10 ** explorer.controls["target_kl"].max
    assert explorer.controls["target_kl"].value > 0.2
    assert_figure_shows(explorer, Settings(target_kl=SETTING_RANGES["target_kl"][1]))
    assert math.isclose(explorer.settings.target_kl, 0.2)


def test_a_column_added_to_columns_is_trained_and_drawn_with_its_own_band(monkeypatch):
    """Things to try, item 6: the notebook's one entry adds DAPO's clip-higher column."""
    source = "".join(cell.source for cell in nbformat.read(NOTEBOOK, as_version=4).cells)
    (entry,) = re.findall(r"```python\n(.*?COLUMNS\[.*?)```", source, flags=re.S)
    monkeypatch.setitem(COLUMNS, "clip_higher", None)  # removed again after the test
    exec(textwrap.dedent(entry), {})
    assert isinstance(COLUMNS["clip_higher"], Column)
    app, settings = EpochsExplorer(), Settings(eps=0.25, step_size=1.0)
    app.controls["eps"].value, app.controls["step_size"].value = 0.25, 1.0
    run = run_all(settings)["clip_higher"]
    assert list(app.columns) == [*ppo_clip.OBJECTIVES, "clip_higher"]
    assert run.band == pytest.approx((0.75, 1.33))
    band = app.columns["clip_higher"]["band"]
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((0.75, 1.33))
    assert_each_epoch_is_one_gradient_step(run, "clipped", 0.25, eps_high=0.33)
    for arm, line in enumerate(app.columns["clip_higher"]["arms"]):
        np.testing.assert_array_equal(line.get_ydata(), run.arm_ratios()[:, arm])
    assert "clip-higher" in app.readout.value
    assert run.true_reward[-1] != run_all(settings)["clipped"].true_reward[-1]
