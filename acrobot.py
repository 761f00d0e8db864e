"""Acrobot-v1 in numpy, behind gymnasium's API, for one environment or many at once.

Two links hang from a fixed joint; the joint between them is driven with a torque of -1, 0
or +1 (actions 0, 1, 2).  Every step pays -1 until the free end swings above the line one link
length over the fixed joint (``-cos(theta1) - cos(theta1 + theta2) > 1``), which *terminates*
the episode with a reward of 0; it is *truncated* after 500 steps.  Observations are
``(cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2)`` as float32.

This module matches gymnasium 1.4.0's ``gymnasium/envs/classic_control/acrobot.py``
(``AcrobotEnv``: the book's dynamics, one fourth-order Runge-Kutta step of 0.2 s, angles wrapped
to [-pi, pi] and velocities bounded to 4 pi and 9 pi) wrapped by ``gymnasium.make("Acrobot-v1")``
(its ``TimeLimit`` of 500 steps), step for step: the same arithmetic in the same order, a reset
state drawn as float32 from ``numpy.random.default_rng(seed)`` as gymnasium draws it.  The
project's tests check it against gymnasium; chaotic as the double pendulum is, one last-bit
difference in numpy's ``sin`` or ``cos`` on another CPU would grow, so the tests compare bit for
bit and report the first step that differs.  gymnasium is not needed to use this module.

* :class:`Acrobot`: one environment, ``reset(seed=None, options=None) -> (obs, info)`` and
  ``step(action) -> (obs, reward, terminated, truncated, info)``;
* :class:`AcrobotVector`: ``num_envs`` environments stepped together, each reset in the step
  its episode ends (gymnasium's ``SyncVectorEnv`` with ``AutoresetMode.SAME_STEP``), with
  ``info`` as :class:`cartpole.CartPoleVector` gives it.

Seeds, actions, ``options`` (``"low"``/``"high"``, default -0.1 and 0.1) and spaces are checked
and refused as in :mod:`cartpole` (a ``ValueError`` or ``TypeError`` naming the argument).
Steps after termination keep integrating, as gymnasium's do, without a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cartpole import (
    Box,
    Discrete,
    MultiDiscrete,
    _checked_int,
    _checked_seed,
    _generator,
    _NoRendering,
)

MAX_EPISODE_STEPS = 500
#: The integration step (s), gravity, and the torque of each action.
DT, GRAVITY = 0.2, 9.8
TORQUES = (-1.0, 0.0, 1.0)
#: Both links: length and mass 1, centre of mass at 0.5, moment of inertia 1.
LENGTH, MASS, CENTRE, INERTIA = 1.0, 1.0, 0.5, 1.0
MAX_VEL_1, MAX_VEL_2 = 4 * np.pi, 9 * np.pi
RESET_BOUND = 0.1
OBSERVATION_HIGH = np.array([1.0, 1.0, 1.0, 1.0, MAX_VEL_1, MAX_VEL_2], dtype=np.float32)

FloatArray = NDArray[np.float64]


def derivatives(y: FloatArray) -> FloatArray:
    """``d/dt (theta1, theta2, dtheta1, dtheta2, torque)`` for states of shape ``(5, ...)``, in
    gymnasium's ``_dsdt`` arithmetic and order (the book's equations)."""
    m1 = m2 = MASS
    l1, lc1, lc2, i1, i2 = LENGTH, CENTRE, CENTRE, INERTIA, INERTIA
    theta1, theta2, dtheta1, dtheta2, a = y
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * np.cos(theta2)) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * np.cos(theta2)) + i2
    phi2 = m2 * lc2 * GRAVITY * np.cos(theta1 + theta2 - np.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * np.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * np.sin(theta2)
        + (m1 * lc1 + m2 * l1) * GRAVITY * np.cos(theta1 - np.pi / 2)
        + phi2
    )
    ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * np.sin(theta2) - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return np.stack([dtheta1, dtheta2, ddtheta1, ddtheta2, np.zeros_like(a)])


def wrap(x: FloatArray, low: float, high: float) -> FloatArray:
    """Angles shifted by whole turns into ``[low, high]``, one turn at a time as gymnasium does."""
    x = np.array(x, dtype=np.float64)
    while (x > high).any() or (x < low).any():
        x = np.where(x > high, x - (high - low), x)
        x = np.where(x < low, x + (high - low), x)
    return x


def next_state(state: ArrayLike, torque: ArrayLike) -> FloatArray:
    """One step of 0.2 s for states of shape ``(4,)`` or ``(4, n)`` (rows: theta1, theta2,
    dtheta1, dtheta2): a Runge-Kutta step, angles wrapped, velocities bounded."""
    y0 = np.concatenate([np.asarray(state, np.float64), np.asarray(torque, np.float64)[None]])
    dt2 = DT / 2.0
    k1 = derivatives(y0)
    k2 = derivatives(y0 + dt2 * k1)
    k3 = derivatives(y0 + dt2 * k2)
    k4 = derivatives(y0 + DT * k3)
    y = (y0 + DT / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4))[:4]
    return np.stack(
        [
            wrap(y[0], -np.pi, np.pi),
            wrap(y[1], -np.pi, np.pi),
            np.clip(y[2], -MAX_VEL_1, MAX_VEL_1),
            np.clip(y[3], -MAX_VEL_2, MAX_VEL_2),
        ]
    )


def reached(state: FloatArray) -> NDArray[np.bool_]:
    """Termination: the free end above the target height."""
    return -np.cos(state[0]) - np.cos(state[1] + state[0]) > 1.0


def observation(state: ArrayLike) -> NDArray[np.float32]:
    """``(cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2)`` as float32 (in the
    state's own precision: float32 right after a reset, as in gymnasium)."""
    s = np.asarray(state)
    rows = [np.cos(s[0]), np.sin(s[0]), np.cos(s[1]), np.sin(s[1]), s[2], s[3]]
    return np.stack(rows).astype(np.float32)


def _bounds(options: Mapping[str, Any] | None) -> tuple[float, float]:
    """``options["low"]`` and ``["high"]`` (default -0.1 and 0.1), checked."""
    if options is None:
        return -RESET_BOUND, RESET_BOUND
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    given = (options.get("low", -RESET_BOUND), options.get("high", RESET_BOUND))
    try:
        low, high = (float(bound) for bound in given)
    except (TypeError, ValueError):
        raise ValueError(f"options: low and high must be numbers, got {given}") from None
    if not (np.isfinite(low) and np.isfinite(high) and low <= high):
        raise ValueError(f"options: low and high must be finite, low <= high; got {low}, {high}")
    return low, high


def _start(rng: np.random.Generator, low: float, high: float) -> NDArray[np.float32]:
    """A reset state as gymnasium draws it: four uniform numbers, kept as float32."""
    return rng.uniform(low=low, high=high, size=(4,)).astype(np.float32)


def _torque(space: Discrete, action: object, name: str) -> float:
    if not space.contains(action):
        raise ValueError(f"{name} must be 0, 1 or 2 (torque -1, 0, +1), got {action!r}")
    return TORQUES[int(action)]  # type: ignore[call-overload]


class Acrobot(_NoRendering):
    """One Acrobot-v1 environment: gymnasium's ``reset`` and ``step``, in numpy."""

    def __init__(self, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        self.max_episode_steps = _checked_int(max_episode_steps, "max_episode_steps", 1)
        self.action_space = Discrete(3)
        self.observation_space = Box(-OBSERVATION_HIGH, OBSERVATION_HIGH)
        self.state: NDArray[np.floating] | None = None
        self.np_random: np.random.Generator | None = None
        self.np_random_seed: int | None = None
        self.elapsed_steps = 0

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode near hanging down; with ``seed``, re-create the generator first."""
        seed = _checked_seed(seed)
        low, high = _bounds(options)
        if seed is not None or self.np_random is None:
            self.np_random, self.np_random_seed = _generator(seed)
        self.state = _start(self.np_random, low, high)
        self.elapsed_steps = 0
        return observation(self.state), {}

    def step(self, action: int) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Apply the torque of ``action`` for 0.2 s."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        self.state = next_state(self.state, _torque(self.action_space, action, "action"))
        terminated = bool(reached(self.state))
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        return observation(self.state), 0.0 if terminated else -1.0, terminated, truncated, {}


class AcrobotVector(_NoRendering):
    """``num_envs`` Acrobot-v1 environments stepped together, each reset as soon as it ends.

    Seeds and ``info`` as :class:`cartpole.CartPoleVector`: ``reset(seed=s)`` seeds the
    environments ``s, s + 1, ...``; a step where an episode ended adds ``"final_obs"`` (float32,
    ``(num_envs, 6)``), ``"_final_obs"``, ``"final_info"`` (``{}``) and ``"_final_info"``.
    """

    def __init__(self, num_envs: int, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        self.num_envs = _checked_int(num_envs, "num_envs", 1)
        self.max_episode_steps = _checked_int(max_episode_steps, "max_episode_steps", 1)
        self.single_action_space = Discrete(3)
        self.action_space = MultiDiscrete(np.full(self.num_envs, 3))
        high = np.tile(OBSERVATION_HIGH, (self.num_envs, 1))
        self.observation_space = Box(-high, high)
        #: One row per environment: float32 right after its reset, float64 once it has moved.
        self.states: list[NDArray[np.floating]] = []
        self.np_random: list[np.random.Generator | None] = [None] * self.num_envs
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start every environment's episode; observations have shape ``(num_envs, 6)``."""
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        elif isinstance(seed, Sequence) and len(seed) == self.num_envs:
            seeds = list(seed)
        else:
            raise TypeError(f"seed must be None, an int or {self.num_envs} seeds, got {seed!r}")
        seeds = [_checked_seed(s, f"seed[{i}]") for i, s in enumerate(seeds)]
        low, high = _bounds(options)
        for i, env_seed in enumerate(seeds):
            if env_seed is not None or self.np_random[i] is None:
                self.np_random[i] = _generator(env_seed)[0]
        self.states = [_start(rng, low, high) for rng in self.np_random]  # type: ignore[arg-type]
        self.elapsed_steps[:] = 0
        return self.observations(), {}

    def observations(self) -> NDArray[np.float32]:
        """The current observations, shape ``(num_envs, 6)``, float32."""
        if not self.states:
            raise RuntimeError("call reset() before step()")
        return np.stack([observation(state) for state in self.states])

    def step(
        self, actions: ArrayLike
    ) -> tuple[
        NDArray[np.float32], FloatArray, NDArray[np.bool_], NDArray[np.bool_], dict[str, Any]
    ]:
        """Step every environment; those whose episode ended start a new one at once."""
        if not self.states:
            raise RuntimeError("call reset() before step()")
        entries = list(np.asarray(actions).reshape(-1)) if np.ndim(actions) else [actions]
        if len(entries) != self.num_envs:
            raise ValueError(f"actions needs one action per environment ({self.num_envs})")
        space = self.single_action_space
        torques = [_torque(space, a, f"actions[{i}]") for i, a in enumerate(entries)]
        moved = next_state(np.stack(self.states, axis=1), torques)
        self.states = list(moved.T)
        terminated = reached(moved)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        ended = terminated | truncated
        info: dict[str, Any] = {}
        if ended.any():
            info = {"final_obs": self.observations(), "_final_obs": ended}
            info |= {"final_info": {}, "_final_info": ended.copy()}
            for i in np.flatnonzero(ended):
                self.states[i] = _start(self.np_random[i], -RESET_BOUND, RESET_BOUND)  # type: ignore[arg-type]
                self.elapsed_steps[i] = 0
        rewards = np.where(terminated, 0.0, -1.0)
        return self.observations(), rewards, terminated, truncated, info
