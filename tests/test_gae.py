"""llm_clip.gae: PPO's advantages, as CleanRL's ``ppo.py`` computes them.

What a user would notice: advantages or returns that differ from CleanRL's loop by any bit (the
CartPole agent and tiny_rlhf's PPO run on it, and their committed studies were made with the same
floats); a bootstrap across a termination; lambda 0 or 1 that is not the TD error or the return;
a bad argument that is not named.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_clip import gae

pytestmark = pytest.mark.filterwarnings("error")

NUMBER = st.floats(-1e6, 1e6)
UNIT = st.one_of(st.sampled_from([0.0, 1.0, 0.95, 0.99]), st.floats(0.0, 1.0))


@st.composite
def rollouts(draw):
    """A rollout of shape (T,) or (T, N), episode starts anywhere, ``dones`` as bool or 0/1."""
    steps, envs = draw(st.integers(1, 12)), draw(st.sampled_from([None, 1, 3]))
    shape = (steps,) if envs is None else (steps, envs)
    size, tail = math.prod(shape), shape[1:]

    def array(elements, count, dtype):
        return np.array(draw(st.lists(elements, min_size=count, max_size=count)), dtype)

    rewards, values = (array(NUMBER, size, float).reshape(shape) for _ in range(2))
    dones = array(st.booleans(), size, bool).reshape(shape)
    last_value = array(NUMBER, math.prod(tail), float).reshape(tail)
    last_done = array(st.booleans(), math.prod(tail), bool).reshape(tail)
    if draw(st.booleans()):
        dones, last_done = dones.astype(int), last_done.astype(int)
    return rewards, values, dones, last_value, last_done


def per_env(rewards, values, dones, last_value, last_done):
    """Each environment's rollout, in Python floats and bools: (r, v, d, last_value, last_done)."""
    steps, tail = len(rewards), np.shape(rewards)[1:]
    columns = [np.reshape(a, (steps, -1)).T.tolist() for a in (rewards, values, dones)]
    lasts = [np.broadcast_to(a, tail).reshape(-1).tolist() for a in (last_value, last_done)]
    return zip(*columns, *lasts, strict=True)


def cleanrl_loop(rewards, values, dones, last_value, last_done, gamma, lam):
    """CleanRL ``ppo.py`` (fe8d8a0) L219-231, one environment and one step at a time."""
    per_column = []
    for r, v, d, next_value, next_done in per_env(rewards, values, dones, last_value, last_done):
        advantages = [0.0] * len(r)
        lastgaelam = 0
        for t in reversed(range(len(r))):
            if t == len(r) - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - d[t + 1]
                nextvalues = v[t + 1]
            delta = r[t] + gamma * nextvalues * nextnonterminal - v[t]
            advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        per_column.append(advantages)
    advantages = np.array(per_column).T.reshape(rewards.shape)
    return advantages, advantages + values


@settings(max_examples=300, deadline=None)
@given(rollouts(), UNIT, UNIT)
def test_gae_is_cleanrls_loop_bit_for_bit(rollout, gamma, lam):
    advantages, returns = gae(*rollout, gamma=gamma, lam=lam)
    expected_advantages, expected_returns = cleanrl_loop(*rollout, gamma, lam)
    assert advantages.dtype == returns.dtype == np.float64
    assert np.array_equal(advantages, expected_advantages)
    assert np.array_equal(returns, expected_returns)
    assert np.array_equal(returns, advantages + rollout[1])


CASES = {  # rewards, values, dones, last_value, last_done
    "one episode, terminated": ([1.0, 2.0, 3.0], [0.5, 1.0, 4.0], [0, 0, 0], 9.0, True),
    "two episodes, then cut": ([1.0, 2.0, 3.0, 4.0], [2.0, 0.0, 1.0, 3.0], [0, 1, 0, 0], 5.0, 0),
    "(T, N)": ([[1.0, -1.0], [2.0, 0.5]], [[0.0, 1.0], [3.0, 0.0]], [[0, 1], [1, 0]],
               [2.0, 3.0], [False, True]),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_lambda_0_is_the_td_error_and_lambda_1_the_return_minus_the_value(case):
    rewards, values, dones, last_value, last_done = map(np.array, CASES[case])
    gamma = 0.9
    next_values = np.concatenate([values[1:], last_value[None] + 0 * values[:1]])
    next_nonterminal = 1 - np.concatenate([dones[1:], last_done[None] + 0 * dones[:1]])
    td = rewards + gamma * next_values * next_nonterminal - values
    assert np.array_equal(gae(*CASES[case], gamma=gamma, lam=0.0)[0], td)
    # gamma = lam = 1: each environment's rewards to its episode's end (bootstrapped if cut) - V
    expected = np.array([returns_to_go(*env) for env in per_env(*CASES[case])])
    advantages = gae(*CASES[case], gamma=1.0, lam=1.0)[0]
    assert advantages == pytest.approx(expected.T.reshape(rewards.shape), rel=1e-12)


def returns_to_go(rewards, values, dones, last_value, last_done):
    """``sum_{k >= t} r_k - V_t`` up to the episode's end, plus V after it if it was cut."""
    expected = []
    for t in range(len(rewards)):
        end = next((k for k in range(t + 1, len(rewards)) if dones[k]), len(rewards))
        bootstrap = last_value * (1 - last_done) if end == len(rewards) else 0.0
        expected.append(sum(rewards[t:end]) + bootstrap - values[t])
    return np.array(expected)


GOOD = {"rewards": [1.0, 2.0], "values": [0.0, 0.5], "dones": [False, True], "last_value": 1.0,
        "last_done": False, "gamma": 0.99, "lam": 0.95}  # fmt: skip
TWO_ENVS = {**GOOD, "rewards": [[1.0, 2.0]], "values": [[0.0, 0.5]], "dones": [[0, 1]]}


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"rewards": None}, TypeError, r"rewards must be a \(T,\) or \(T, N\) array of numbers"),
        ({"rewards": [True, False]}, TypeError, "rewards must contain real numbers"),
        ({"rewards": np.zeros((0, 2))}, ValueError, "rewards is empty"),
        ({"rewards": [[[1.0]]]}, ValueError, r"rewards must be \(T,\) or \(T, N\)"),
        ({"rewards": [1.0, math.nan]}, ValueError, r"rewards\[1\] is nan"),
        ({**TWO_ENVS, "values": [[0.0, math.inf]]}, ValueError, r"values\[0, 1\] is inf"),
        ({"values": [0.0, 0.5, 1.0]}, ValueError, r"values has shape \(3,\); .* must be \(2,\)"),
        ({"dones": [0, 2]}, ValueError, "dones must hold booleans"),
        ({"dones": [[0, 1]]}, ValueError, r"dones has shape \(1, 2\)"),
        ({"last_value": [1.0, 2.0]}, ValueError, "last_value has shape .* must be a number$"),
        ({**TWO_ENVS, "last_value": [1.0]}, ValueError, r"must be a number or \(2,\)"),
        ({"last_value": math.inf}, ValueError, "last_value must be a finite number"),
        ({"last_done": 0.5}, ValueError, "last_done must hold booleans"),
        ({"gamma": 1.5}, ValueError, "gamma must be between 0 and 1"),
        ({"lam": -0.1}, ValueError, "lam must be between 0 and 1"),
        ({"lam": "0.9"}, TypeError, "lam must be a real number"),
    ],
)
def test_each_check_names_the_argument(change, error, message):
    with pytest.raises(error, match=message):
        gae(**{**GOOD, **change})
