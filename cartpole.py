"""CartPole-v1 in numpy, behind gymnasium's API, for one environment or many at once.

A pole stands on a cart that moves along a frictionless track; each step the
agent pushes the cart left (action 0) or right (action 1) with a force of 10 N.
Every step pays a reward of 1, the step that ends the episode included.  The
episode *terminates* when the pole leaves +-12 degrees or the cart leaves
+-2.4, and is *truncated* after 500 steps.  Observations are
``(cart position, cart velocity, pole angle, pole angular velocity)`` as
float32; the state itself is kept in float64, as gymnasium keeps it.

This module matches gymnasium 1.4.0's ``gymnasium/envs/classic_control/cartpole.py``
(``CartPoleEnv``, Euler integration, default reward) wrapped by
``gymnasium.make("CartPole-v1")`` (its ``TimeLimit`` of 500 steps), step for step
and bit for bit: the same arithmetic in the same order, and ``reset(seed=s)``
draws the initial state from ``numpy.random.default_rng(s)`` exactly as
``gymnasium.utils.seeding.np_random(s)`` does.  The project's tests check this
against gymnasium itself.  gymnasium is not needed to use this module.

* :class:`CartPole`: one environment.  ``reset(seed=None) -> (obs, info)`` and
  ``step(action) -> (obs, reward, terminated, truncated, info)``.
* :class:`CartPoleVector`: ``num_envs`` environments stepped together.  An
  environment whose episode ends is reset in the same step (gymnasium's
  ``SyncVectorEnv`` with ``autoreset_mode=AutoresetMode.SAME_STEP``): the step
  returns the new episode's first observation, and ``info["final_obs"]`` holds
  the observation the episode ended on (rows where ``info["_final_obs"]``).

>>> env = CartPole()
>>> obs, info = env.reset(seed=0)
>>> obs
array([ 0.01369617, -0.02302133, -0.04590265, -0.04834723], dtype=float32)
>>> obs, reward, terminated, truncated, info = env.step(1)
>>> reward, terminated, truncated
(1.0, False, False)
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["MAX_EPISODE_STEPS", "CartPole", "CartPoleVector", "next_state", "pole_has_fallen"]

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
#: Half the pole's length (gymnasium's ``length``).
HALF_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE = 10.0
#: Seconds between two steps.
TAU = 0.02
#: The episode terminates when the pole's angle leaves +-12 degrees ...
THETA_LIMIT = 12 * 2 * math.pi / 360
#: ... or the cart's position leaves +-2.4.
X_LIMIT = 2.4
#: CartPole-v1's time limit: the episode is truncated after this many steps.
MAX_EPISODE_STEPS = 500
#: The initial state is drawn uniformly from this interval, per coordinate.
RESET_BOUND = 0.05

FloatArray = NDArray[np.float64]


def next_state(state: FloatArray, push_right: NDArray[np.bool_] | bool) -> FloatArray:
    """The state one step of Euler integration later, for states of shape ``(4,)`` or ``(4, n)``.

    ``state`` rows are ``x, x_dot, theta, theta_dot``; ``push_right`` says which
    way the force acts.  The arithmetic is gymnasium's, in its order, so the
    results agree to the last bit.
    """
    x, x_dot, theta, theta_dot = state
    force = np.where(push_right, FORCE, -FORCE)
    costheta = np.cos(theta)
    sintheta = np.sin(theta)
    temp = (force + POLE_MASS_LENGTH * np.square(theta_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * np.square(costheta) / TOTAL_MASS)
    )
    xacc = temp - POLE_MASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return np.stack(
        (
            x + TAU * x_dot,
            x_dot + TAU * xacc,
            theta + TAU * theta_dot,
            theta_dot + TAU * thetaacc,
        )
    ).astype(np.float64)


def pole_has_fallen(state: FloatArray) -> NDArray[np.bool_]:
    """Termination: the cart beyond +-2.4 or the pole beyond +-12 degrees (strict)."""
    x, theta = state[0], state[2]
    return (x < -X_LIMIT) | (x > X_LIMIT) | (theta < -THETA_LIMIT) | (theta > THETA_LIMIT)


def _checked_seed(seed: object) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be None or a non-negative integer, got {seed!r}")
    return int(seed)


def _initial_state(rng: np.random.Generator) -> FloatArray:
    """Four coordinates drawn uniformly from (-0.05, 0.05), as gymnasium draws them."""
    return rng.uniform(low=-RESET_BOUND, high=RESET_BOUND, size=(4,))


def _checked_actions(actions: ArrayLike, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """``actions == 1`` after checking every action is 0 or 1 (any integer type)."""
    array = np.asarray(actions)
    if array.shape != shape or array.dtype.kind not in "iu":
        expected = "an integer 0 or 1" if shape == () else f"integers 0 or 1 of shape {shape}"
        raise ValueError(f"action must be {expected}, got {actions!r}")
    if not ((array == 0) | (array == 1)).all():
        raise ValueError(f"action must be 0 (push left) or 1 (push right), got {actions!r}")
    return array == 1


class CartPole:
    """One CartPole-v1 environment: gymnasium's ``reset`` and ``step``, in numpy.

    After an episode terminates, further steps keep integrating and pay a
    reward of 0, and a warning says to reset, as in gymnasium.
    """

    def __init__(self, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        self.max_episode_steps = int(max_episode_steps)
        self.state: FloatArray | None = None
        self.np_random: np.random.Generator | None = None
        self.elapsed_steps = 0
        self._terminated = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode; with ``seed``, first re-create the random generator from it.

        Without a seed the generator carries on (or is seeded from the operating
        system on the first reset).  ``options`` is accepted for gymnasium's API
        and ignored.
        """
        seed = _checked_seed(seed)
        if seed is not None or self.np_random is None:
            self.np_random = np.random.default_rng(seed)
        self.state = _initial_state(self.np_random)
        self.elapsed_steps = 0
        self._terminated = False
        return self.state.astype(np.float32), {}

    def step(self, action: int) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Push the cart left (0) or right (1) for one step of 0.02 s."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        push_right = _checked_actions(action, ())
        self.state = next_state(self.state, push_right)
        terminated = bool(pole_has_fallen(self.state))
        reward = 1.0
        if self._terminated:
            warnings.warn(
                "step() called after the episode terminated: reset() first (reward 0)",
                stacklevel=2,
            )
            reward = 0.0
        self._terminated = self._terminated or terminated
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        return self.state.astype(np.float32), reward, terminated, truncated, {}


class CartPoleVector:
    """``num_envs`` CartPole-v1 environments stepped together, each reset as soon as it ends.

    Environment ``i`` has its own random generator, so
    ``reset(seed=s)`` gives the environments the seeds ``s, s + 1, ...``
    (or pass one seed per environment), as gymnasium's vector environments do.
    """

    def __init__(self, num_envs: int, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
            raise TypeError(f"num_envs must be an integer, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.max_episode_steps = int(max_episode_steps)
        self.state: FloatArray | None = None  # shape (4, num_envs)
        self.generators: list[np.random.Generator] = []
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start every environment's episode; observations have shape ``(num_envs, 4)``."""
        seeds = self._seeds(seed)
        self.generators = [np.random.default_rng(s) for s in seeds]
        self.state = np.stack([_initial_state(rng) for rng in self.generators], axis=1)
        self.elapsed_steps[:] = 0
        return self.observations(), {}

    def _seeds(self, seed: int | Sequence[int] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            return [_checked_seed(seed + i) for i in range(self.num_envs)]
        seeds = [_checked_seed(s) for s in seed]  # type: ignore[union-attr]
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed has {len(seeds)} entries; it needs one per environment")
        return seeds

    def observations(self) -> NDArray[np.float32]:
        """The current observations, shape ``(num_envs, 4)``, float32."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        return self.state.T.astype(np.float32)

    def step(
        self, actions: ArrayLike
    ) -> tuple[
        NDArray[np.float32], FloatArray, NDArray[np.bool_], NDArray[np.bool_], dict[str, Any]
    ]:
        """Step every environment; those whose episode ended start a new one at once.

        Returns observations ``(num_envs, 4)``, rewards, terminated and
        truncated flags ``(num_envs,)``, and ``info`` with ``"final_obs"``
        (the last observation of each episode that ended, shape ``(num_envs, 4)``,
        meaningful where ``info["_final_obs"]``).
        """
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        push_right = _checked_actions(actions, (self.num_envs,))
        self.state = next_state(self.state, push_right)
        terminated = pole_has_fallen(self.state)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        ended = terminated | truncated
        final_obs = self.observations()
        for i in np.flatnonzero(ended):
            self.state[:, i] = _initial_state(self.generators[i])
            self.elapsed_steps[i] = 0
        info = {"final_obs": final_obs, "_final_obs": ended}
        rewards = np.ones(self.num_envs, dtype=np.float64)
        return self.observations(), rewards, terminated, truncated, info
