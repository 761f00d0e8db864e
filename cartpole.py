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

* :class:`CartPole`: one environment.  ``reset(seed=None, options=None) -> (obs, info)``
  and ``step(action) -> (obs, reward, terminated, truncated, info)``.
* :class:`CartPoleVector`: ``num_envs`` environments stepped together.  An
  environment whose episode ends is reset in the same step (gymnasium's
  ``SyncVectorEnv`` with ``autoreset_mode=AutoresetMode.SAME_STEP``): the step
  returns the new episode's first observation, and ``info`` the one it ended on.
* :class:`Discrete`, :class:`MultiDiscrete`, :class:`Box`: both forms' ``action_space``
  and ``observation_space``, with gymnasium's attributes and ``contains``, and the
  same ``sample()`` draws after the same ``seed()``.

Also as in gymnasium: which actions and seeds are accepted (``True`` is an action,
``numpy.int64(3)`` is not a seed), ``reset(options={"low": ..., "high": ...})``, a
reset without a seed carrying on with each generator, and steps after the episode
terminated: a reward of 1 while the pole is back within bounds, 0 while it is out,
and one warning.

Differences from gymnasium, on purpose:

* Refused input raises ``ValueError`` or ``TypeError`` naming the argument, where
  gymnasium raises ``AssertionError`` (an action), ``gymnasium.error.Error`` (a
  seed) or ``OverflowError`` (``options`` bounds, or their distance, beyond float64),
  and ``RuntimeError`` for ``step`` before ``reset`` (gymnasium's ``ResetNeeded``).  ``reset`` and
  ``step`` refuse the same inputs, and a refused call changes nothing; only
  ``options["reset_mask"]`` (a partial reset of the vector form) is refused here.
* The vector form matches ``SyncVectorEnv`` with ``AutoresetMode.SAME_STEP``;
  gymnasium 1.x's default is ``NEXT_STEP`` (and ``gymnasium.make_vec("CartPole-v1")``
  builds its own ``CartPoleVectorEnv``: ``NEXT_STEP``, one generator for all).
  ``info`` has gymnasium's keys only in a step where an episode ended:
  ``"final_obs"``, ``"_final_obs"``, ``"final_info"`` (``{}``), ``"_final_info"``.
  But ``info["final_obs"]`` is one float32 array of shape ``(num_envs, 4)``, not an
  object array with ``None`` where no episode ended: row ``i`` equals gymnasium's
  entry where ``info["_final_obs"][i]``, and is the current observation elsewhere.
* ``np_random`` and ``np_random_seed`` are ``None`` until the first ``reset``, where
  gymnasium seeds them from the operating system when first read.
* Nothing is drawn: ``render_mode`` is ``None``; ``render()`` warns, as
  gymnasium's does without a render mode, and returns ``None`` (one per environment
  in the vector form).

>>> env = CartPole()
>>> obs, info = env.reset(seed=0)
>>> obs
array([ 0.01369617, -0.02302133, -0.04590265, -0.04834723], dtype=float32)
>>> obs, reward, terminated, truncated, info = env.step(1)
>>> reward, terminated, truncated
(1.0, False, False)
>>> env.action_space, env.observation_space.shape
(Discrete(2), (4,))
"""

from __future__ import annotations

import math
import numbers
import reprlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "MAX_EPISODE_STEPS",
    "Box",
    "CartPole",
    "CartPoleVector",
    "Discrete",
    "MultiDiscrete",
    "next_state",
    "pole_has_fallen",
]

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
#: The observation space's bounds: twice the termination limits, velocities unbounded.
OBSERVATION_HIGH = np.array([X_LIMIT * 2, np.inf, THETA_LIMIT * 2, np.inf], dtype=np.float32)
#: gymnasium's warning when ``step`` is called again after ``terminated = True``.
STEP_AFTER_TERMINATION = (
    "You are calling 'step()' even though this environment has already returned "
    "terminated = True. You should always call 'reset()' once you receive "
    "'terminated = True' -- any further steps are undefined behavior."
)

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


def _checked_int(value: object, name: str, minimum: int) -> int:
    """``value`` if it is a Python int (bools too, as in gymnasium) of at least ``minimum``."""
    if not isinstance(value, int):
        raise TypeError(f"{name} must be a Python int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _checked_seed(seed: object, name: str = "seed") -> int | None:
    """``seed`` if gymnasium accepts it: None or a Python int >= 0."""
    return None if seed is None else _checked_int(seed, name, 0)


def _checked_action(space: Discrete, action: object, name: str) -> bool:
    """Whether ``action`` pushes right, if ``space`` contains it, as gymnasium checks it."""
    if not space.contains(action):
        raise ValueError(
            f"{name} must be 0 (push left) or 1 (push right): an int, a bool or a numpy "
            f"integer scalar, as gymnasium's Discrete(2) accepts; got {action!r}"
        )
    return action == 1


def _generator(seed: int | None) -> tuple[np.random.Generator, int]:
    """gymnasium's ``seeding.np_random``: the generator and the seed it came from."""
    sequence = np.random.SeedSequence(seed)
    return np.random.default_rng(sequence), int(sequence.entropy)


def _reset_bounds(options: Mapping[str, Any] | None) -> tuple[float, float]:
    """The initial state's interval: ``options["low"]`` and ``["high"]``, default +-0.05."""
    if options is None:
        return -RESET_BOUND, RESET_BOUND
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    given = (options.get("low", -RESET_BOUND), options.get("high", RESET_BOUND))
    try:
        low, high = (float(bound) for bound in given)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float64
        shown = reprlib.repr(given)
        raise ValueError(
            f"options: low and high must be numbers float64 holds, got {shown}"
        ) from None
    # numpy draws low + (high - low) * u: the width must be finite too
    if not (math.isfinite(high - low) and low <= high):
        raise ValueError(
            f"options: low and high must be finite, low <= high, and high - low finite in "
            f"float64; got {low}, {high}"
        )
    return low, high


def _initial_state(rng: np.random.Generator, low: float, high: float) -> FloatArray:
    """Four coordinates drawn uniformly from (low, high), as gymnasium draws them."""
    return rng.uniform(low=low, high=high, size=(4,))


class _NoRendering:
    """gymnasium's ``metadata``, ``render_mode``, ``render`` and ``close``; nothing is drawn."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": [], "render_fps": 50}
    render_mode = None

    def render(self) -> None:
        """Nothing to draw: warns and returns None."""
        warnings.warn("render() draws nothing: this CartPole has no render mode", stacklevel=2)

    def close(self) -> None:
        """Nothing to release."""


class _Space:
    """What gymnasium's spaces share: ``shape``, ``dtype`` and a generator ``seed`` re-creates."""

    def __init__(self, shape: tuple[int, ...], dtype: type[np.generic]) -> None:
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self._np_random: np.random.Generator | None = None

    @property
    def np_random(self) -> np.random.Generator:
        """The generator ``sample`` draws from, seeded from the operating system on first use."""
        if self._np_random is None:
            self.seed()
        return self._np_random  # type: ignore[return-value]

    def seed(self, seed: int | None = None) -> int:
        """Re-create the generator from ``seed`` (None: fresh entropy); return the seed used."""
        self._np_random, used = _generator(_checked_seed(seed))
        return used


class Discrete(_Space):
    """The integers ``0, ..., n - 1``, as ``gymnasium.spaces.Discrete(n)``."""

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        super().__init__((), np.int64)
        self.n = np.int64(n)
        self.start = np.int64(0)

    def contains(self, x: object) -> bool:
        """gymnasium's test: a Python int (bools too) or a 0-d numpy integer castable to int64."""
        if isinstance(x, int):
            if not -(2**63) <= x < 2**63:
                return False
            dtype = self.dtype
        elif isinstance(x, np.generic | np.ndarray) and x.dtype.kind in "iu" and x.shape == ():
            dtype = x.dtype
        else:
            return False
        return bool(0 <= int(x) < self.n and np.can_cast(dtype, self.dtype))

    def sample(self) -> np.int64:
        """One integer, uniformly."""
        return self.start + self.np_random.integers(self.n, dtype=np.int64)

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class MultiDiscrete(_Space):
    """One integer in ``0, ..., nvec[i] - 1`` per entry, as ``gymnasium.spaces.MultiDiscrete``."""

    def __init__(self, nvec: ArrayLike) -> None:
        nvec = np.asarray(nvec)
        if nvec.dtype.kind not in "iu" or nvec.ndim != 1 or (nvec < 1).any():
            raise ValueError(f"nvec must be a 1-D array of positive integers, got {nvec!r}")
        super().__init__(nvec.shape, np.int64)
        self.nvec = nvec.astype(np.int64)
        self.start = np.zeros_like(self.nvec)

    def contains(self, x: object) -> bool:
        """gymnasium's test: shape, a dtype castable to int64, every entry in range."""
        if isinstance(x, Sequence):
            x = np.array(x)
        return bool(
            isinstance(x, np.ndarray)
            and x.shape == self.shape
            and np.can_cast(x.dtype, self.dtype)
            and np.all(x >= 0)
            and np.all(x <= self.nvec - 1)
        )

    def sample(self) -> NDArray[np.int64]:
        """One integer per entry, uniformly, drawn as gymnasium draws them."""
        return (self.np_random.random(self.shape) * self.nvec).astype(self.dtype) + self.start

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec})"


class Box(_Space):
    """Float32 arrays with ``low <= x <= high`` entrywise, as ``gymnasium.spaces.Box``."""

    def __init__(self, low: ArrayLike, high: ArrayLike) -> None:
        low32, high32 = np.asarray(low, dtype=np.float32), np.asarray(high, dtype=np.float32)
        if low32.shape != high32.shape or np.isnan(low32).any() or (low32 > high32).any():
            raise ValueError(f"low and high must have one shape and low <= high: {low}, {high}")
        super().__init__(low32.shape, np.float32)
        self.low, self.high = low32, high32
        self.bounded_below = -np.inf < self.low
        self.bounded_above = np.inf > self.high

    def contains(self, x: object) -> bool:
        """gymnasium's test: the shape, a dtype castable to float32, and the bounds."""
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (ValueError, TypeError, OverflowError):
                return False
        return bool(
            np.can_cast(x.dtype, self.dtype)
            and x.shape == self.shape
            and np.all(x >= self.low)
            and np.all(x <= self.high)
        )

    def sample(self) -> NDArray[np.float32]:
        """gymnasium's draw: uniform where bounded, exponential where half-bounded, else normal."""
        rng, low, high = self.np_random, self.low, self.high
        below, above = self.bounded_below, self.bounded_above
        free, lower, upper, both = ~below & ~above, below & ~above, ~below & above, below & above
        sample = np.empty(self.shape)
        sample[free] = rng.normal(size=free.sum())
        sample[lower] = rng.exponential(size=lower.sum()) + low[lower]
        sample[upper] = -rng.exponential(size=upper.sum()) + high[upper]
        sample[both] = rng.uniform(low=low[both], high=high[both], size=both.sum())
        return sample.astype(self.dtype)

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high}, {self.shape}, {self.dtype})"


class CartPole(_NoRendering):
    """One CartPole-v1 environment: gymnasium's ``reset`` and ``step``, in numpy.

    After an episode terminates, further steps keep integrating, as in gymnasium:
    ``terminated`` says whether the pole is out of bounds now, the reward is 1
    while it is back within bounds and 0 while it is out, and the first of those
    out-of-bounds steps warns that you should reset.
    """

    def __init__(self, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        self.max_episode_steps = _checked_int(max_episode_steps, "max_episode_steps", 1)
        self.action_space = Discrete(2)
        self.observation_space = Box(-OBSERVATION_HIGH, OBSERVATION_HIGH)
        self.state: FloatArray | None = None
        self.np_random: np.random.Generator | None = None
        self.np_random_seed: int | None = None
        self.elapsed_steps = 0
        #: gymnasium's counter: None until the episode terminates, then steps since.
        self.steps_beyond_terminated: int | None = None

    @property
    def unwrapped(self) -> CartPole:
        """The environment itself (gymnasium's wrappers lead here)."""
        return self

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode; with ``seed``, first re-create the random generator from it.

        Without a seed the generator carries on (or is seeded from the operating
        system on the first reset).  ``options`` may set ``"low"`` and ``"high"``,
        the interval the initial state is drawn from (default -0.05 to 0.05).
        """
        seed = _checked_seed(seed)
        low, high = _reset_bounds(options)
        if seed is not None or self.np_random is None:
            self.np_random, self.np_random_seed = _generator(seed)
        self.state = _initial_state(self.np_random, low, high)
        self.elapsed_steps = 0
        self.steps_beyond_terminated = None
        return self.state.astype(np.float32), {}

    def step(self, action: int) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Push the cart left (0) or right (1) for one step of 0.02 s."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        push_right = _checked_action(self.action_space, action, "action")
        self.state = next_state(self.state, push_right)
        terminated = bool(pole_has_fallen(self.state))
        reward = 1.0
        if terminated and self.steps_beyond_terminated is None:
            self.steps_beyond_terminated = 0
        elif terminated:
            if self.steps_beyond_terminated == 0:
                warnings.warn(STEP_AFTER_TERMINATION, UserWarning, stacklevel=2)
            self.steps_beyond_terminated += 1
            reward = 0.0
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        return self.state.astype(np.float32), reward, terminated, truncated, {}


class CartPoleVector(_NoRendering):
    """``num_envs`` CartPole-v1 environments stepped together, each reset as soon as it ends.

    Environment ``i`` has its own random generator, so
    ``reset(seed=s)`` gives the environments the seeds ``s, s + 1, ...``
    (or pass one seed, or None, per environment), as gymnasium's ``SyncVectorEnv`` does.
    ``metadata["autoreset_mode"]`` is ``"SameStep"``, the value of gymnasium's
    ``AutoresetMode.SAME_STEP``.
    """

    metadata: ClassVar[dict[str, Any]] = {**_NoRendering.metadata, "autoreset_mode": "SameStep"}

    def __init__(self, num_envs: int, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
            raise TypeError(f"num_envs must be an integer, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.max_episode_steps = _checked_int(max_episode_steps, "max_episode_steps", 1)
        self.single_action_space = Discrete(2)
        self.single_observation_space = Box(-OBSERVATION_HIGH, OBSERVATION_HIGH)
        self.action_space = MultiDiscrete(np.full(self.num_envs, 2))
        high = np.tile(OBSERVATION_HIGH, (self.num_envs, 1))
        self.observation_space = Box(-high, high)
        self.state: FloatArray | None = None  # shape (4, num_envs)
        #: Each environment's generator and the seed it came from (gymnasium: tuples).
        self.np_random: list[np.random.Generator | None] = [None] * self.num_envs
        self.np_random_seed: list[int | None] = [None] * self.num_envs
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start every environment's episode; observations have shape ``(num_envs, 4)``.

        An environment given no seed carries on with its generator.  ``options``
        is passed to every environment, as :meth:`CartPole.reset` reads it.
        """
        seeds = self._checked_seeds(seed)
        low, high = _reset_bounds(options)
        if options is not None and "reset_mask" in options:
            raise ValueError("options['reset_mask'] (a partial reset) is not supported here")
        for i, env_seed in enumerate(seeds):
            if env_seed is not None or self.np_random[i] is None:
                self.np_random[i], self.np_random_seed[i] = _generator(env_seed)
        starts = [_initial_state(rng, low, high) for rng in self.np_random]
        self.state = np.stack(starts, axis=1)
        self.elapsed_steps[:] = 0
        return self.observations(), {}

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

    def observations(self) -> NDArray[np.float32]:
        """The current observations, shape ``(num_envs, 4)``, float32."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        return self.state.T.astype(np.float32)

    def _checked_actions(self, actions: object) -> NDArray[np.bool_]:
        """``actions == 1``, where each entry passes ``Discrete(2).contains`` (as in gymnasium)."""
        if (
            isinstance(actions, np.ndarray)
            and actions.shape == (self.num_envs,)
            and actions.dtype.kind in "iu"
            and np.can_cast(actions.dtype, np.int64)
            and ((actions == 0) | (actions == 1)).all()
        ):
            return actions == 1
        try:
            entries = list(actions)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(
                f"actions must be a sequence of {self.num_envs} actions, got {actions!r}"
            ) from None
        if len(entries) != self.num_envs:
            raise ValueError(
                f"actions has {len(entries)} entries; it needs one per environment "
                f"({self.num_envs}), shape ({self.num_envs},)"
            )
        space = self.single_action_space
        pushes = [_checked_action(space, a, f"actions[{i}]") for i, a in enumerate(entries)]
        return np.array(pushes, dtype=np.bool_)

    def step(
        self, actions: ArrayLike
    ) -> tuple[
        NDArray[np.float32], FloatArray, NDArray[np.bool_], NDArray[np.bool_], dict[str, Any]
    ]:
        """Step every environment; those whose episode ended start a new one at once.

        Returns observations ``(num_envs, 4)``, rewards, terminated and truncated
        flags ``(num_envs,)``, and ``info``: empty, or, in a step where an episode
        ended, ``"final_obs"`` (float32, ``(num_envs, 4)``: the observation each
        ended episode ended on, where ``info["_final_obs"]``), ``"final_info"``
        (``{}``) and the masks ``"_final_obs"`` and ``"_final_info"``.
        """
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        push_right = self._checked_actions(actions)
        self.state = next_state(self.state, push_right)
        terminated = pole_has_fallen(self.state)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        ended = terminated | truncated
        info: dict[str, Any] = {}
        if ended.any():
            final_obs = self.observations()
            info = {"final_obs": final_obs, "_final_obs": ended}
            info |= {"final_info": {}, "_final_info": ended.copy()}
            for i in np.flatnonzero(ended):  # gymnasium resets them without options
                rng = self.np_random[i]
                self.state[:, i] = _initial_state(rng, -RESET_BOUND, RESET_BOUND)
                self.elapsed_steps[i] = 0
        rewards = np.ones(self.num_envs, dtype=np.float64)
        return self.observations(), rewards, terminated, truncated, info

    def render(self) -> tuple[None, ...]:  # type: ignore[override]
        """Nothing to draw: warns and returns one None per environment."""
        super().render()
        return (None,) * self.num_envs
