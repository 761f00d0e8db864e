"""The numpy CartPole against gymnasium's CartPole-v1, step for step and bit for bit.

gymnasium comes with the test requirements; ``cartpole`` itself never imports it.
Each episode is driven by one of three kinds of action sequence, so that episodes
end in every way: uniformly random actions (short episodes, terminated), a biased
coin (the cart runs off the track), and a balancing rule with 5% of its actions
flipped (long episodes, most truncated at 500 steps).
"""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from cartpole import MAX_EPISODE_STEPS, CartPole, CartPoleVector

#: A rule that keeps the pole up: push towards where the pole is falling.
BALANCE_GAINS = np.array([0.05, 0.1, 1.0, 0.5])


def action_rule(kind: int, rng: np.random.Generator):
    """An action chooser ``obs -> 0 or 1`` of the given kind (0, 1 or 2)."""
    bias = rng.uniform(0.1, 0.9)

    def choose(obs: np.ndarray) -> int:
        if kind == 0:
            return int(rng.integers(2))
        if kind == 1:
            return int(rng.random() < bias)
        balanced = int(np.dot(BALANCE_GAINS, obs) > 0)
        return 1 - balanced if rng.random() < 0.05 else balanced

    return choose


def test_single_environment_matches_gymnasium_on_many_action_sequences():
    endings = {"terminated": 0, "truncated": 0}
    for seed in range(240):
        reference = gymnasium.make("CartPole-v1")
        ours = CartPole()
        expected_obs, _ = reference.reset(seed=seed)
        obs, info = ours.reset(seed=seed)
        assert obs.dtype == np.float32
        assert obs.shape == (4,)
        assert np.array_equal(obs, expected_obs)
        assert info == {}
        rng = np.random.default_rng(10_000 + seed)
        choose = action_rule(seed % 3, rng)
        for step in range(1, MAX_EPISODE_STEPS + 1):
            action = choose(obs)
            expected = reference.step(action)
            obs, reward, terminated, truncated, _ = ours.step(action)
            assert np.array_equal(obs, expected[0]), (seed, step)
            assert (reward, terminated, truncated) == tuple(expected[1:4]), (seed, step)
            assert type(terminated) is bool
            assert type(truncated) is bool
            if terminated or truncated:
                endings["terminated" if terminated else "truncated"] += 1
                assert truncated == (step == MAX_EPISODE_STEPS)
                break
    assert endings["terminated"] >= 100, endings
    assert endings["truncated"] >= 30, endings


def test_steps_after_termination_pay_nothing_and_warn_as_in_gymnasium():
    reference = gymnasium.make("CartPole-v1").unwrapped
    ours = CartPole()
    reference.reset(seed=7)
    ours.reset(seed=7)
    terminated = False
    while not terminated:
        expected = reference.step(1)
        _, reward, terminated, _, _ = ours.step(1)
        assert reward == expected[1] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = reference.step(1)
    with pytest.warns(UserWarning, match="reset"):
        obs, reward, terminated, _, _ = ours.step(1)
    assert np.array_equal(obs, expected[0])
    assert (reward, terminated) == (expected[1], expected[2]) == (0.0, True)


def test_a_reset_without_seed_carries_on_with_the_same_generator():
    reference = gymnasium.make("CartPole-v1")
    ours = CartPole()
    assert np.array_equal(ours.reset(seed=3)[0], reference.reset(seed=3)[0])
    for _ in range(5):
        assert np.array_equal(ours.reset()[0], reference.reset()[0])


def test_vector_form_matches_gymnasiums_same_step_autoreset():
    num_envs = 6
    reference = gymnasium.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    ours = CartPoleVector(num_envs)
    expected_obs, _ = reference.reset(seed=11)
    obs, _ = ours.reset(seed=11)
    assert obs.dtype == np.float32
    assert obs.shape == (num_envs, 4)
    assert np.array_equal(obs, expected_obs)
    rng = np.random.default_rng(0)
    ended = {"terminated": 0, "truncated": 0}
    for step in range(4000):
        actions = (obs @ BALANCE_GAINS > 0).astype(np.int64)
        flip = rng.random(num_envs) < (0.05 if step < 3000 else 0.5)
        actions = np.where(flip, 1 - actions, actions)
        expected = reference.step(actions)
        obs, rewards, terminated, truncated, info = ours.step(actions)
        assert np.array_equal(obs, expected[0]), step
        assert np.array_equal(rewards, expected[1]), step
        assert np.array_equal(terminated, expected[2]), step
        assert np.array_equal(truncated, expected[3]), step
        done = terminated | truncated
        assert np.array_equal(info["_final_obs"], done)
        for i in np.flatnonzero(done):
            assert np.array_equal(info["final_obs"][i], expected[4]["final_obs"][i])
        ended["terminated"] += int(terminated.sum())
        ended["truncated"] += int(truncated.sum())
    assert ended["terminated"] >= 20, ended
    assert ended["truncated"] >= 20, ended


def test_vector_reset_takes_one_seed_per_environment():
    ours = CartPoleVector(3)
    obs, _ = ours.reset(seed=[5, 0, 9])
    for row, seed in zip(obs, [5, 0, 9], strict=True):
        assert np.array_equal(row, CartPole().reset(seed=seed)[0])


@pytest.mark.parametrize(
    ("action", "message"),
    [(2, "0 \\(push left\\) or 1"), (-1, "0 \\(push left\\) or 1"), (0.5, "integer 0 or 1")],
)
def test_bad_actions_are_refused_by_name(action, message):
    env = CartPole()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(action)


def test_misuse_is_reported_plainly():
    with pytest.raises(RuntimeError, match="reset"):
        CartPole().step(0)
    with pytest.raises(ValueError, match="seed"):
        CartPole().reset(seed=-1)
    with pytest.raises(ValueError, match="one per environment"):
        CartPoleVector(2).reset(seed=[1, 2, 3])
    vector = CartPoleVector(2)
    vector.reset(seed=0)
    with pytest.raises(ValueError, match="shape \\(2,\\)"):
        vector.step([1, 0, 1])
