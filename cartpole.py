"""CartPole-v1 in numpy, with gymnasium's ``reset`` and ``step``, for one environment or many.

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

* :func:`next_state` and :func:`pole_has_fallen`: the physics, for one state or many.
* :class:`CartPole`: one environment.  ``reset(seed=None) -> (obs, info)``
  and ``step(action) -> (obs, reward, terminated, truncated, info)``.
* :class:`CartPoleVector`: ``num_envs`` environments stepped together.  An
  environment whose episode ends is reset in the same step (gymnasium's
  ``SyncVectorEnv`` with ``autoreset_mode=AutoresetMode.SAME_STEP``): the step
  returns the new episode's first observation, and ``info["final_obs"]`` the one
  it ended on.

Only what the project uses is offered: no action or observation spaces, no
``render``, no ``reset`` options, no seeds recorded.  Where it differs from gymnasium:

* An action is 0 or 1 as an int, a bool or a numpy integer; refused input raises
  ``ValueError`` or ``TypeError`` naming the argument (gymnasium raises
  ``AssertionError`` for an action, ``gymnasium.error.Error`` for a seed), and
  changes nothing.  ``step`` before ``reset``, or after the episode ended, raises
  ``RuntimeError`` (gymnasium refuses the first and lets the second run on,
  "undefined behavior").
* The vector form matches ``SyncVectorEnv`` with ``AutoresetMode.SAME_STEP``;
  gymnasium 1.x's default is ``NEXT_STEP`` (and ``gymnasium.make_vec("CartPole-v1")``
  builds its own ``CartPoleVectorEnv``: ``NEXT_STEP``, one generator for all).
  ``info`` is empty unless an episode ended; then it holds ``"final_obs"``, one
  float32 array of shape ``(num_envs, 4)`` (not gymnasium's object array with
  ``None`` where no episode ended: row ``i`` equals gymnasium's entry where
  ``info["_final_obs"][i]``, and is the current observation elsewhere), and the
  mask ``"_final_obs"``; gymnasium's ``"final_info"`` (always ``{}`` here) is left out.

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


def _checked_seed(seed: object, name: str = "seed") -> int | None:
    """``seed`` if gymnasium accepts it: None or a Python int >= 0 (``numpy.int64(3)`` is not)."""
    if seed is None:
        return None
    if not isinstance(seed, int):
        raise TypeError(f"{name} must be None or a Python int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be at least 0, got {seed}")
    return seed


def _pushes_right(actions: object, shape: tuple[int, ...], name: str) -> NDArray[np.bool_]:
    """``actions == 1``, if ``actions`` has ``shape`` and holds only 0 and 1 (ints or bools)."""
    wanted = f"{name} must be 0 (push left) or 1 (push right), as ints or bools"
    if shape:
        wanted += f", one per environment: shape {shape}"
    try:
        given = np.asarray(actions)
    except ValueError:  # a ragged list
        raise ValueError(f"{wanted}; got {actions!r}") from None
    if given.dtype.kind not in "biu":
        raise TypeError(f"{wanted}; got {actions!r}")
    if given.shape != shape or not ((given == 0) | (given == 1)).all():
        raise ValueError(f"{wanted}; got {actions!r}")
    return given == 1


def _initial_state(rng: np.random.Generator) -> FloatArray:
    """Four coordinates drawn uniformly from (-0.05, 0.05), as gymnasium draws them."""
    return rng.uniform(low=-RESET_BOUND, high=RESET_BOUND, size=(4,))


class CartPole:
    """One CartPole-v1 environment: gymnasium's ``reset`` and ``step``, in numpy."""

    def __init__(self) -> None:
        self.state: FloatArray | None = None
        #: The generator the initial states are drawn from; None until the first reset.
        self.np_random: np.random.Generator | None = None
        self.elapsed_steps = 0
        self._ended = False

    def reset(self, *, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode; with ``seed``, first re-create the random generator from it.

        Without a seed the generator carries on (or is seeded from the operating
        system on the first reset), as in gymnasium.
        """
        seed = _checked_seed(seed)
        if seed is not None or self.np_random is None:
            self.np_random = np.random.default_rng(seed)
        self.state = _initial_state(self.np_random)
        self.elapsed_steps, self._ended = 0, False
        return self.state.astype(np.float32), {}

    def step(self, action: int) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Push the cart left (0) or right (1) for one step of 0.02 s."""
        if self.state is None or self._ended:
            raise RuntimeError("call reset() before step(), and again after an episode ends")
        push_right = _pushes_right(action, (), "action")
        self.state = next_state(self.state, push_right)
        terminated = bool(pole_has_fallen(self.state))
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= MAX_EPISODE_STEPS
        self._ended = terminated or truncated
        return self.state.astype(np.float32), 1.0, terminated, truncated, {}


class CartPoleVector:
    """``num_envs`` CartPole-v1 environments stepped together, each reset as soon as it ends.

    Environment ``i`` has its own random generator, so
    ``reset(seed=s)`` gives the environments the seeds ``s, s + 1, ...``
    (or pass one seed, or None, per environment), as gymnasium's ``SyncVectorEnv`` does.
    """

    def __init__(self, num_envs: int) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
            raise TypeError(f"num_envs must be an integer, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.state: FloatArray | None = None  # shape (4, num_envs)
        #: Each environment's generator; None until the first reset.
        self.np_random: list[np.random.Generator | None] = [None] * self.num_envs
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start every environment's episode; observations have shape ``(num_envs, 4)``.

        An environment given no seed carries on with its generator.
        """
        for i, env_seed in enumerate(self._checked_seeds(seed)):
            if env_seed is not None or self.np_random[i] is None:
                self.np_random[i] = np.random.default_rng(env_seed)
        self.state = np.stack([_initial_state(rng) for rng in self.np_random], axis=1)
        self.elapsed_steps[:] = 0
        return self._observations(), {}

    def _checked_seeds(self, seed: object) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int):
            return [_checked_seed(seed + i) for i in range(self.num_envs)]
        if not isinstance(seed, Sequence):
            raise TypeError(
                f"seed must be None, a Python int or a list of them, got {type(seed).__name__}"
            )
        if len(seed) != self.num_envs:
            raise ValueError(f"seed has {len(seed)} entries; it needs one per environment")
        return [_checked_seed(s, f"seed[{i}]") for i, s in enumerate(seed)]

    def _observations(self) -> NDArray[np.float32]:
        return self.state.T.astype(np.float32)  # type: ignore[union-attr]

    def step(
        self, actions: ArrayLike
    ) -> tuple[
        NDArray[np.float32], FloatArray, NDArray[np.bool_], NDArray[np.bool_], dict[str, Any]
    ]:
        """Step every environment; those whose episode ended start a new one at once.

        Returns observations ``(num_envs, 4)``, rewards, terminated and truncated
        flags ``(num_envs,)``, and ``info``: empty, or, in a step where an episode
        ended, ``"final_obs"`` (float32, ``(num_envs, 4)``: the observation each
        ended episode ended on, where the mask ``info["_final_obs"]`` is True).
        """
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        push_right = _pushes_right(actions, (self.num_envs,), "actions")
        self.state = next_state(self.state, push_right)
        terminated = pole_has_fallen(self.state)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= MAX_EPISODE_STEPS
        ended = terminated | truncated
        info: dict[str, Any] = {}
        if ended.any():
            info = {"final_obs": self._observations(), "_final_obs": ended}
            for i in np.flatnonzero(ended):
                self.state[:, i] = _initial_state(self.np_random[i])  # type: ignore[arg-type]
                self.elapsed_steps[i] = 0
        rewards = np.ones(self.num_envs, dtype=np.float64)
        return self._observations(), rewards, terminated, truncated, info
