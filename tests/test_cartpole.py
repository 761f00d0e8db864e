"""The numpy CartPole against gymnasium's CartPole-v1, step for step and bit for bit.

gymnasium comes with the test requirements; ``cartpole`` itself never imports it.
Each episode is driven by one of three kinds of action sequence, so that episodes
end in every way: uniformly random actions (short episodes, terminated), a biased
coin (the cart runs off the track), and a balancing rule with 5% of its actions
flipped (long episodes, most truncated at 500 steps).

Beyond the dynamics, every part of gymnasium's API that ``cartpole`` offers is
compared with gymnasium's own: which actions, seeds and options are accepted,
steps after termination, resets, spaces, the vector form's ``info``.  Where
``cartpole``'s docstring documents a difference, the test shows it.
"""

from __future__ import annotations

import reprlib
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from cartpole import MAX_EPISODE_STEPS, Box, CartPole, CartPoleVector, Discrete, MultiDiscrete

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


def reference_vector(num_envs: int):
    """gymnasium's vector form that :class:`CartPoleVector` matches (same-step autoreset)."""
    return gymnasium.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )


def assert_same_step(result, expected):
    """One step's observation, reward, terminated and truncated equal gymnasium's."""
    assert np.array_equal(result[0], expected[0])
    for ours, theirs in zip(result[1:4], expected[1:4], strict=True):
        assert np.array_equal(ours, theirs)


def quietly(call):
    """``call()`` with gymnasium's warnings (e.g. "Casting input x to numpy array") hidden."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def warnings_of(call) -> tuple[object, list[warnings.WarningMessage]]:
    """``call()``'s result and every warning it gave, repeated ones included."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, caught


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
            assert type(reward) is float
            assert type(terminated) is bool
            assert type(truncated) is bool
            if terminated or truncated:
                endings["terminated" if terminated else "truncated"] += 1
                assert truncated == (step == MAX_EPISODE_STEPS)
                break
    assert endings["terminated"] >= 100, endings
    assert endings["truncated"] >= 30, endings


def test_steering_back_after_termination_pays_and_warns_as_in_gymnasium():
    # Issue 24's reproduction: seed 1, random actions until the episode terminates,
    # then push the cart under the leaning pole until it is back upright.
    reference, ours = gymnasium.make("CartPole-v1"), CartPole()
    reference.reset(seed=1)
    ours.reset(seed=1)
    random_actions = np.random.RandomState(1)
    terminated = False
    while not terminated:
        action = int(random_actions.randint(2))
        expected = reference.step(action)
        result = ours.step(action)
        assert_same_step(result, expected)
        terminated = result[2]
    outcomes, warned = [], {"gymnasium": 0, "ours": 0}
    for _ in range(40):
        action = int(result[0][2] > 0)
        expected, caught = warnings_of(lambda a=action: reference.step(a))
        warned["gymnasium"] += len(caught)
        result, caught = warnings_of(lambda a=action: ours.step(a))
        warned["ours"] += len(caught)
        assert_same_step(result, expected)
        outcomes.append(result[1:3])
    assert outcomes[0] == (0.0, True)
    assert outcomes[14] == (1.0, False)  # the 15th step after termination: back in bounds
    assert (0.0, True) in outcomes[15:]  # out again: nothing paid, no new warning
    assert warned == {"gymnasium": 1, "ours": 1}


def test_each_terminated_episode_warns_once_after_a_reset():
    ours = CartPole()
    for seed in (7, 8):
        ours.reset(seed=seed)
        while not ours.step(1)[2]:
            pass
        caught = [warnings_of(lambda: ours.step(1))[1] for _ in range(5)]
        assert [len(w) for w in caught] == [1, 0, 0, 0, 0]
        assert "reset()" in str(caught[0][0].message)


def both(vector: bool):
    """gymnasium's CartPole-v1 and ours, single or the vector form of 3 environments."""
    if vector:
        return reference_vector(3), CartPoleVector(3)
    return gymnasium.make("CartPole-v1"), CartPole()


#: Candidate actions: gymnasium's ``Discrete(2).contains`` decides which are accepted (True
#: among them); for 3 environments, gymnasium checks each entry the same way.
ACTIONS = [
    *(0, 1, True, False, np.int64(1), np.int8(0), np.uint8(1), np.array(1)),
    *(np.True_, np.uint64(1), np.array([1]), 1.0, np.float64(0.0), 2, -1, 2**70, "1", None),
]
VECTOR_ACTIONS = [
    *([1, 0, 1], (1, 0, 1), [True, False, True], [np.int8(1), 0, True], np.array([1, 0, 1])),
    *(np.array([1, 0, 1], dtype=t) for t in (np.int8, object, np.uint64)),
    *(np.array([True, False, True]), np.array([1.0, 0.0, 1.0]), np.array([[1], [0], [1]])),
    *([1, 0, 2], [1, 0], 5),
]


@pytest.mark.parametrize(
    ("vector", "action"),
    [(False, action) for action in ACTIONS] + [(True, actions) for actions in VECTOR_ACTIONS],
    ids=repr,
)
def test_an_action_is_accepted_or_refused_as_gymnasium_does(vector, action):
    reference, ours = both(vector)
    reference.reset(seed=0)
    ours.reset(seed=0)
    try:
        expected = reference.step(action)
    except (AssertionError, ValueError, TypeError):
        said = r"^actions" if vector else r"^action must be 0 \(push left\) or 1"
        with pytest.raises((ValueError, TypeError), match=said):
            ours.step(action)
        assert not np.any(ours.elapsed_steps)
        return
    assert_same_step(ours.step(action), expected)


@pytest.mark.parametrize(
    ("vector", "seed", "refusal"),
    [
        *[(False, seed, TypeError) for seed in (np.int64(3), np.uint32(3), 3.0, "3")],
        *[(True, seed, TypeError) for seed in (np.int64(3), 3.0, [np.int64(1), 2, 3])],
        (True, np.array([1, 2, 3]), TypeError),
        *[(True, seed, ValueError) for seed in ([1, 2], [1, -2, 3])],
        *[(vector, -1, ValueError) for vector in (False, True)],
        *[(False, seed, None) for seed in (True, 0, 2**70)],
        *[(True, seed, None) for seed in (True, [1, 2, 3], (4, 0, 9))],
    ],
    ids=repr,
)
def test_a_seed_is_accepted_or_refused_as_gymnasium_does(vector, seed, refusal):
    reference, ours = both(vector)
    if refusal is None:
        assert np.array_equal(ours.reset(seed=seed)[0], reference.reset(seed=seed)[0])
        assert np.array_equal(ours.np_random_seed, reference.np_random_seed)
        return
    # gymnasium raises its own gymnasium.error.Error (or for the vector form's seeds a
    # TypeError or ValueError); ours is the project's TypeError or ValueError naming the
    # argument (a documented difference).
    with pytest.raises((gymnasium.error.Error, TypeError, ValueError)):
        reference.reset(seed=seed)
    with pytest.raises(refusal, match=r"^seed" if vector else r"^seed must be"):
        ours.reset(seed=seed)
    assert ours.state is None


@pytest.mark.parametrize(
    ("vector", "seeds", "last"),
    [
        (False, (3, None, None, None, None, None), 3),
        (True, (5, None, [None, 7, None], None, [2, None, None]), (2, 7, 7)),
    ],
    ids=["single", "vector"],
)
def test_a_reset_without_seed_carries_on_with_each_generator(vector, seeds, last):
    reference, ours = both(vector)
    for seed in seeds:
        assert np.array_equal(ours.reset(seed=seed)[0], reference.reset(seed=seed)[0]), seed
    assert np.array_equal(ours.np_random_seed, last)
    assert np.array_equal(reference.np_random_seed, last)


@pytest.mark.parametrize(
    "options", [{"low": -0.2, "high": 0.3}, {"high": 0.01}, {"low": "-0.1"}, {"other": 1}, {}]
)
def test_reset_options_set_the_initial_interval_as_in_gymnasium(options):
    reference, ours = gymnasium.make("CartPole-v1"), CartPole()
    expected = reference.reset(seed=4, options=options)[0]
    assert np.array_equal(ours.reset(seed=4, options=options)[0], expected)


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"low": 1, "high": 0}, ValueError),
        ({"low": "a"}, ValueError),
        ({"low": None}, ValueError),
        ({"low": -np.inf}, OverflowError),
        ({"low": -1e308, "high": 1e308}, OverflowError),  # high - low is beyond float64
        ({"low": -(10**400)}, OverflowError),  # an int too large for float64
        (5, TypeError),
    ],
    ids=reprlib.repr,
)
def test_bad_reset_options_are_refused_as_gymnasium_refuses_them(options, refusal):
    with pytest.raises(refusal):
        gymnasium.make("CartPole-v1").reset(seed=0, options=options)
    ours = CartPole()
    with pytest.raises((ValueError, TypeError), match=r"^options"):
        ours.reset(seed=0, options=options)
    assert ours.state is None


def snapshot(env: CartPole | CartPoleVector) -> str:
    """Everything a refused call must leave as it was: state, generators, seeds, counters."""
    generators = env.np_random if isinstance(env, CartPoleVector) else [env.np_random]
    draws = [g.bit_generator.state for g in generators]
    return repr((env.state, draws, env.np_random_seed, env.elapsed_steps))


@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_a_refused_reset_changes_nothing(vector):
    env = CartPoleVector(2) if vector else CartPole()
    env.reset(seed=1)
    env.step([0, 1] if vector else 0)
    before = snapshot(env)
    for options in ({"low": -1e308, "high": 1e308}, {"high": 10**400}, {"low": 1, "high": 0}):
        with pytest.raises(ValueError, match=r"^options"):
            env.reset(seed=5, options=options)
        assert snapshot(env) == before, options


def test_vector_options_apply_to_the_reset_and_not_to_the_autoresets():
    reference, ours = reference_vector(4), CartPoleVector(4)
    options = {"low": -0.2, "high": 0.2}
    assert np.array_equal(
        ours.reset(seed=3, options=options)[0], reference.reset(seed=3, options=options)[0]
    )
    for _ in range(60):
        assert_same_step(ours.step([1, 0, 1, 1]), reference.step([1, 0, 1, 1]))
    with pytest.raises(ValueError, match="reset_mask"):
        ours.reset(options={"reset_mask": np.ones(4, dtype=bool)})


def test_the_time_limit_is_gymnasiums():
    reference = gymnasium.make("CartPole-v1", max_episode_steps=3)
    ours = CartPole(max_episode_steps=3)
    reference.reset(seed=0)
    ours.reset(seed=0)
    flags = []
    for action in (0, 1, 0, 1, 1):
        result = ours.step(action)
        assert_same_step(result, reference.step(action))
        flags.append(result[3])
    assert flags == [False, False, True, True, True]  # stepping on stays truncated
    for steps, refusal in ((0, ValueError), (-2, ValueError), (np.int64(5), TypeError)):
        with pytest.raises(refusal):
            gymnasium.make("CartPole-v1", max_episode_steps=steps)
        with pytest.raises(refusal, match=r"^max_episode_steps"):
            CartPole(max_episode_steps=steps)
        with pytest.raises(refusal, match=r"^max_episode_steps"):
            CartPoleVector(2, max_episode_steps=steps)


def assert_same_space(ours, theirs, candidates):
    """Attributes, ``contains`` on every candidate, and draws after the same seeds."""
    assert (ours.shape, ours.dtype, repr(ours)) == (theirs.shape, theirs.dtype, repr(theirs))
    for name in ("n", "start", "nvec", "low", "high", "bounded_below", "bounded_above"):
        if hasattr(theirs, name):
            assert np.array_equal(getattr(ours, name), getattr(theirs, name)), name
            assert type(getattr(ours, name)) is type(getattr(theirs, name)), name
    for value in candidates:
        assert ours.contains(value) == quietly(lambda v=value: theirs.contains(v)), value
    for seed in (0, 1, 2**40):
        assert ours.seed(seed) == theirs.seed(seed) == seed
        for _ in range(20):
            mine, reference = ours.sample(), theirs.sample()
            assert np.array_equal(mine, reference)
            assert (type(mine), mine.dtype) == (type(reference), reference.dtype)


BOX_CANDIDATES = [
    np.zeros(4, dtype=np.float32),
    np.zeros(4),
    np.zeros(4, dtype=np.int64),
    np.zeros(4, dtype=np.int8),
    [0, 0, 0, 0],
    [0.0, 1e30, 0.4, -1e30],
    [4.8, 0, 0, 0],
    [4.9, 0, 0, 0],
    [0, 0, 0, "a"],
    np.full(4, np.nan, dtype=np.float32),
    np.zeros(3, dtype=np.float32),
]


def test_the_spaces_are_gymnasiums():
    reference, ours = gymnasium.make("CartPole-v1"), CartPole()
    assert_same_space(ours.action_space, reference.action_space, ACTIONS)
    assert_same_space(ours.observation_space, reference.observation_space, BOX_CANDIDATES)
    assert ours.action_space.contains(CartPole().action_space.sample())  # seeded on first use
    obs = ours.reset(seed=0)[0]
    assert ours.observation_space.contains(obs)


def test_the_stand_in_spaces_are_built_and_refused_by_name():
    assert repr(Discrete(np.int64(3))) == repr(gymnasium.spaces.Discrete(np.int64(3)))
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match=r"^n must be"):
            Discrete(bad)
    with pytest.raises(ValueError, match=r"^nvec must be"):
        MultiDiscrete([2, 0])
    with pytest.raises(ValueError, match=r"^low and high must"):
        Box([1.0, 1.0], [0.0, 2.0])


def test_the_vector_spaces_are_gymnasiums():
    reference, ours = reference_vector(3), CartPoleVector(3)
    assert_same_space(ours.single_action_space, reference.single_action_space, ACTIONS)
    assert_same_space(
        ours.single_observation_space, reference.single_observation_space, BOX_CANDIDATES
    )
    assert_same_space(ours.action_space, reference.action_space, VECTOR_ACTIONS)
    batches = [np.zeros((3, 4), dtype=np.float32), np.zeros((3, 4)), np.zeros((4, 3))]
    assert_same_space(ours.observation_space, reference.observation_space, batches)
    assert ours.action_space.contains(CartPoleVector(3).action_space.sample())


def test_vector_form_matches_gymnasiums_same_step_autoreset():
    num_envs = 6
    reference = reference_vector(num_envs)
    ours = CartPoleVector(num_envs)
    expected_obs, expected_info = reference.reset(seed=11)
    obs, info = ours.reset(seed=11)
    assert obs.dtype == np.float32
    assert obs.shape == (num_envs, 4)
    assert np.array_equal(obs, expected_obs)
    assert info == expected_info == {}
    rng = np.random.default_rng(0)
    ended = {"terminated": 0, "truncated": 0, "steps without an end": 0}
    for step in range(4000):
        actions = (obs @ BALANCE_GAINS > 0).astype(np.int64)
        flip = rng.random(num_envs) < (0.05 if step < 3000 else 0.5)
        actions = np.where(flip, 1 - actions, actions)
        expected = reference.step(actions)
        obs, rewards, terminated, truncated, info = ours.step(actions)
        assert_same_step((obs, rewards, terminated, truncated), expected)
        assert rewards.dtype == expected[1].dtype
        expected_info = expected[4]
        assert sorted(info) == sorted(expected_info), step
        done = terminated | truncated
        if not done.any():
            ended["steps without an end"] += 1
            continue
        assert info["final_info"] == expected_info["final_info"] == {}
        for mask in ("_final_obs", "_final_info"):
            assert np.array_equal(info[mask], expected_info[mask])
            assert np.array_equal(info[mask], done)
        # The documented difference: one float32 array, not an object array with None.
        assert info["final_obs"].dtype == np.float32
        assert info["final_obs"].shape == (num_envs, 4)
        for i in range(num_envs):
            if done[i]:
                assert np.array_equal(info["final_obs"][i], expected_info["final_obs"][i])
            else:
                assert expected_info["final_obs"][i] is None
                assert np.array_equal(info["final_obs"][i], obs[i])
        ended["terminated"] += int(terminated.sum())
        ended["truncated"] += int(truncated.sum())
    assert ended["terminated"] >= 20, ended
    assert ended["truncated"] >= 20, ended
    assert ended["steps without an end"] >= 1000, ended
    assert ours.metadata["autoreset_mode"] == reference.metadata["autoreset_mode"].value


def test_render_and_close_as_gymnasium_without_a_render_mode():
    reference, ours = gymnasium.make("CartPole-v1"), CartPole()
    reference.reset(seed=0)
    ours.reset(seed=0)
    assert ours.render_mode is reference.render_mode is None
    assert ours.unwrapped is ours
    for env in (reference, ours):
        result, caught = warnings_of(env.render)
        assert result is None
        assert [w.category for w in caught] == [UserWarning]
        assert env.close() is None
    reference_many, many = reference_vector(2), CartPoleVector(2)
    reference_many.reset(seed=0)
    many.reset(seed=0)
    assert quietly(many.render) == quietly(reference_many.render) == (None, None)
    assert many.close() is reference_many.close() is None


def test_misuse_is_reported_plainly():
    with pytest.raises(RuntimeError, match="reset"):
        CartPole().step(0)
    with pytest.raises(RuntimeError, match="reset"):
        CartPoleVector(2).step([0, 1])
    with pytest.raises(ValueError, match="one per environment"):
        CartPoleVector(2).reset(seed=[1, 2, 3])
    with pytest.raises(TypeError, match="num_envs"):
        CartPoleVector(2.0)
    vector = CartPoleVector(2)
    vector.reset(seed=0)
    with pytest.raises(ValueError, match="needs one per environment \\(2\\)"):
        vector.step([1, 0, 1])
