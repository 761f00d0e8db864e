"""The numpy CartPole against gymnasium's CartPole-v1, step for step and bit for bit.

gymnasium comes with the test requirements; ``cartpole`` itself never imports it.
Each episode is driven by one of three kinds of action sequence, so that episodes
end in every way: uniformly random actions (short episodes, terminated), a biased
coin (the cart runs off the track), and a balancing rule with 5% of its actions
flipped (long episodes, most truncated at 500 steps).  Seeded resets, resets that
carry on with each generator and the vector form's same-step autoreset are compared
with gymnasium's too; refused input is refused by name and changes nothing.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from cartpole import MAX_EPISODE_STEPS, CartPole, CartPoleVector

#: A rule that keeps the pole up: push towards where the pole is falling.
BALANCE_GAINS = np.array([0.05, 0.1, 1.0, 0.5])


def action_rule(kind: int, rng: np.random.Generator):
    """An action chooser ``obs -> 0 or 1`` of the given kind: 0 a fair coin, 1 a biased one,
    2 the balancing rule with 5% of its actions flipped."""
    bias = rng.uniform(0.1, 0.9) if kind == 1 else 0.5

    def choose(obs: np.ndarray) -> int:
        if kind < 2:
            return int(rng.random() < bias)
        balanced = int(np.dot(BALANCE_GAINS, obs) > 0)
        return 1 - balanced if rng.random() < 0.05 else balanced

    return choose


def both(vector: bool, num_envs: int = 3):
    """gymnasium's CartPole-v1 and ours, single or the same-step vector form."""
    if not vector:
        return gymnasium.make("CartPole-v1"), CartPole()
    reference = gymnasium.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    return reference, CartPoleVector(num_envs)


def assert_same_step(result, expected):
    """One step's observation, reward, terminated and truncated equal gymnasium's."""
    for ours, theirs in zip(result[:4], expected[:4], strict=True):
        assert np.array_equal(ours, theirs)


def test_single_environment_matches_gymnasium_on_many_action_sequences():
    endings = {"terminated": 0, "truncated": 0}
    for seed in range(240):
        reference, ours = both(vector=False)
        expected_obs, _ = reference.reset(seed=seed)
        obs, info = ours.reset(seed=seed)
        assert (obs.dtype, obs.shape, info) == (np.float32, (4,), {})
        assert np.array_equal(obs, expected_obs)
        choose = action_rule(seed % 3, np.random.default_rng(10_000 + seed))
        for step in range(1, MAX_EPISODE_STEPS + 1):
            action = choose(obs)
            expected = reference.step(action)
            obs, reward, terminated, truncated, _ = ours.step(action)
            assert np.array_equal(obs, expected[0]), (seed, step)
            assert (reward, terminated, truncated) == tuple(expected[1:4]), (seed, step)
            assert (type(reward), type(terminated), type(truncated)) == (float, bool, bool)
            if terminated or truncated:
                endings["terminated" if terminated else "truncated"] += 1
                assert truncated == (step == MAX_EPISODE_STEPS)
                break
        with pytest.raises(RuntimeError, match="reset"):
            ours.step(0)  # the episode ended
    assert endings["terminated"] >= 100, endings
    assert endings["truncated"] >= 30, endings


def test_vector_form_matches_gymnasiums_same_step_autoreset():
    reference, ours = both(vector=True, num_envs=6)
    expected_obs, _ = reference.reset(seed=11)
    obs, info = ours.reset(seed=11)
    assert (obs.dtype, obs.shape, info) == (np.float32, (6, 4), {})
    assert np.array_equal(obs, expected_obs)
    rng = np.random.default_rng(0)
    ended = {"terminated": 0, "truncated": 0, "steps without an end": 0}
    for step in range(4000):
        actions = (obs @ BALANCE_GAINS > 0).astype(np.int64)
        flip = rng.random(6) < (0.05 if step < 3000 else 0.5)
        actions = np.where(flip, 1 - actions, actions)
        expected = reference.step(actions)
        obs, rewards, terminated, truncated, info = ours.step(actions)
        assert_same_step((obs, rewards, terminated, truncated), expected)
        assert rewards.dtype == expected[1].dtype
        done = terminated | truncated
        if not done.any():
            assert info == {}
            ended["steps without an end"] += 1
            continue
        assert np.array_equal(info["_final_obs"], expected[4]["_final_obs"])
        assert np.array_equal(info["_final_obs"], done)
        # The documented difference: one float32 array, not an object array with None.
        assert (info["final_obs"].dtype, info["final_obs"].shape) == (np.float32, (6, 4))
        for i in range(6):
            theirs = expected[4]["final_obs"][i] if done[i] else obs[i]
            assert np.array_equal(info["final_obs"][i], theirs)
        ended["terminated"] += int(terminated.sum())
        ended["truncated"] += int(truncated.sum())
    assert ended["terminated"] >= 20, ended
    assert ended["truncated"] >= 20, ended
    assert ended["steps without an end"] >= 1000, ended


@pytest.mark.parametrize(
    ("vector", "seeds"),
    [
        (False, (True, 0, 2**70, 3, None, None)),
        (True, (5, None, [None, 7, None], None, [2, None, None], (4, 0, 9))),
    ],
    ids=["single", "vector"],
)
def test_seeded_resets_and_resets_without_seed_are_gymnasiums(vector, seeds):
    reference, ours = both(vector)
    for seed in seeds:
        assert np.array_equal(ours.reset(seed=seed)[0], reference.reset(seed=seed)[0]), seed


@pytest.mark.parametrize(
    ("vector", "seed", "refusal"),
    [
        *[(False, seed, TypeError) for seed in (np.int64(3), np.uint32(3), 3.0, "3")],
        *[(True, seed, TypeError) for seed in (np.int64(3), 3.0, [np.int64(1), 2, 3])],
        (True, np.array([1, 2, 3]), TypeError),
        *[(True, seed, ValueError) for seed in ([1, 2], [1, -2, 3], [1, 2, 3, 4])],
        *[(vector, -1, ValueError) for vector in (False, True)],
    ],
    ids=repr,
)
def test_a_bad_seed_is_refused_by_name(vector, seed, refusal):
    ours = CartPoleVector(3) if vector else CartPole()
    with pytest.raises(refusal, match=r"^seed"):
        ours.reset(seed=seed)
    assert ours.state is None


#: Accepted actions (0 or 1 as ints, bools or numpy integers), and refused ones with
#: their error; for 3 environments, one such entry per environment.
ACTIONS = [
    *[(a, None) for a in (0, 1, True, False, np.int64(1), np.int8(0), np.uint8(1), np.True_)],
    *[(a, TypeError) for a in (1.0, np.float64(0.0), "1", None, 2**70)],
    *[(a, ValueError) for a in (2, -1, np.array([1]))],
]
VECTOR_ACTIONS = [
    *[(a, None) for a in ([1, 0, 1], (1, 0, 1), [True, False, True], [np.int8(1), 0, True])],
    *[(np.array([1, 0, 1], dtype=t), None) for t in (np.int64, np.int8, np.uint64)],
    *[(a, TypeError) for a in (np.array([1, 0, 1], dtype=object), np.array([1.0, 0.0, 1.0]))],
    *[(a, ValueError) for a in (np.array([[1], [0], [1]]), [1, 0, 2], [1, 0], 5, [1, [0]])],
]


@pytest.mark.parametrize(
    ("vector", "action", "refusal"),
    [(False, *row) for row in ACTIONS] + [(True, *row) for row in VECTOR_ACTIONS],
    ids=repr,
)
def test_an_action_is_0_or_1_and_anything_else_is_refused_by_name(vector, action, refusal):
    reference, ours = both(vector)
    reference.reset(seed=0)
    ours.reset(seed=0)
    if refusal is None:
        assert_same_step(ours.step(action), reference.step(np.asarray(action).astype(int)))
        return
    state = ours.state.copy()
    with pytest.raises(refusal, match=r"^actions" if vector else r"^action must be 0 \(push left"):
        ours.step(action)
    assert np.array_equal(ours.state, state)
    assert not np.any(ours.elapsed_steps)


def test_misuse_is_reported_plainly():
    with pytest.raises(RuntimeError, match="reset"):
        CartPole().step(0)
    with pytest.raises(RuntimeError, match="reset"):
        CartPoleVector(2).step([0, 1])
    with pytest.raises(TypeError, match="num_envs"):
        CartPoleVector(2.0)
    with pytest.raises(ValueError, match="num_envs"):
        CartPoleVector(0)
