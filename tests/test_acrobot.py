"""The numpy Acrobot against gymnasium's Acrobot-v1, step for step and bit for bit.

Each episode is driven by one of three action rules, so that episodes end both ways:
uniformly random torques (the free end rarely rises: truncated at 500 steps), pumping energy
(torque along the second joint's swing: terminated within about a hundred steps), and pumping
with a third of the actions random.  Beyond the dynamics: steps after termination, the reset
options, the vector form with same-step autoreset, and refused input.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from acrobot import MAX_EPISODE_STEPS, Acrobot, AcrobotVector


def action_rule(kind: int, rng: np.random.Generator):
    """An action chooser ``obs -> 0, 1 or 2`` of the given kind (0, 1 or 2)."""

    def choose(obs: np.ndarray) -> int:
        pump = 2 if obs[5] > 0 else 0
        if kind == 0 or (kind == 2 and rng.random() < 1 / 3):
            return int(rng.integers(3))
        return pump

    return choose


def test_single_environment_matches_gymnasium_on_many_action_sequences():
    endings = {"terminated": 0, "truncated": 0}
    for seed in range(30):
        reference, ours = gymnasium.make("Acrobot-v1"), Acrobot()
        expected_obs, _ = reference.reset(seed=seed)
        obs, info = ours.reset(seed=seed)
        assert obs.dtype == np.float32
        assert np.array_equal(obs, expected_obs)
        assert info == {}
        choose = action_rule(seed % 3, np.random.default_rng(1_000 + seed))
        for step in range(1, MAX_EPISODE_STEPS + 1):
            action = choose(obs)
            expected = reference.step(action)
            obs, reward, terminated, truncated, _ = ours.step(action)
            assert np.array_equal(obs, expected[0]), (seed, step)
            assert (reward, terminated, truncated) == tuple(expected[1:4]), (seed, step)
            if terminated or truncated:
                endings["terminated" if terminated else "truncated"] += 1
                break
    assert endings["terminated"] >= 15, endings
    assert endings["truncated"] >= 5, endings


def test_steps_after_termination_and_reset_options_are_gymnasiums():
    reference, ours = gymnasium.make("Acrobot-v1"), Acrobot()
    options = {"low": -0.2, "high": 0.3}
    assert np.array_equal(
        ours.reset(seed=3, options=options)[0], reference.reset(seed=3, options=options)[0]
    )
    ends = []
    for _ in range(MAX_EPISODE_STEPS - 1):  # pumping past the end, as gymnasium allows
        action = 2 if ours.state[3] > 0 else 0
        expected, result = reference.step(action), ours.step(action)
        assert np.array_equal(result[0], expected[0])
        assert result[1:4] == tuple(expected[1:4])
        ends.append(result[2])
    assert True in ends
    assert ends[ends.index(True) + 1 :].count(False) > 0  # the end swings below the line again
    assert np.array_equal(ours.reset()[0], reference.reset()[0])  # the generator carries on


def test_the_vector_form_matches_gymnasiums_same_step_autoreset():
    reference = gymnasium.make_vec(
        "Acrobot-v1",
        num_envs=4,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    ours = AcrobotVector(4)
    expected_obs, _ = reference.reset(seed=11)
    obs, _ = ours.reset(seed=11)
    assert np.array_equal(obs, expected_obs)
    rng, ended = np.random.default_rng(5), 0
    for step in range(700):
        actions = np.where(obs[:, 5] > 0, 2, 0)
        actions = np.where(rng.random(4) < 0.3, rng.integers(0, 3, 4), actions)
        expected = reference.step(actions)
        obs, rewards, terminated, truncated, info = ours.step(actions)
        assert np.array_equal(obs, expected[0]), step
        for mine, theirs in zip((rewards, terminated, truncated), expected[1:4], strict=True):
            assert np.array_equal(mine, theirs), step
        if "_final_obs" in info:
            assert np.array_equal(info["_final_obs"], expected[4]["_final_obs"])
            for i in np.flatnonzero(info["_final_obs"]):
                assert np.array_equal(info["final_obs"][i], expected[4]["final_obs"][i])
            ended += int(info["_final_obs"].sum())
    assert ended >= 10


@pytest.mark.parametrize(
    ("call", "error", "said"),
    [
        (lambda env: env.step(3), ValueError, "action must be 0, 1 or 2"),
        (lambda env: env.step(1.0), ValueError, "action must be 0, 1 or 2"),
        (lambda env: env.reset(seed=-1), ValueError, "seed must be at least 0"),
        (lambda env: env.reset(seed=np.int64(3)), TypeError, "seed must be a Python int"),
        (lambda env: env.reset(options={"low": 1.0, "high": 0.0}), ValueError, "low <= high"),
        (lambda env: env.reset(options=[0.1]), TypeError, "options must be a dict"),
    ],
)
def test_refused_input_names_the_argument_and_changes_nothing(call, error, said):
    env = Acrobot()
    env.reset(seed=0)
    before = env.state.copy()
    with pytest.raises(error, match=said):
        call(env)
    assert np.array_equal(env.state, before)


def test_the_vector_form_refuses_wrong_actions_and_a_step_before_reset():
    env = AcrobotVector(2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step([0, 1])
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one action per environment"):
        env.step([0, 1, 2])
    with pytest.raises(ValueError, match=r"actions\[1\] must be 0, 1 or 2"):
        env.step([0, 7])
