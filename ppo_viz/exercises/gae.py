"""Notebook 8's exercise: GAE(λ), the advantages and value targets of a rollout.

:func:`check_gae` is the same check as the others (:func:`.run_check`): the learner's
``gae(rewards, values, dones, last_value, last_done, *, gamma, lam)``, with the arguments of
:func:`llm_clip.gae`, returns ``(advantages, returns)``; it runs in the sandbox on each batch of
:func:`battery` and every answer is compared with :func:`llm_clip.gae`.  The mistakes it names
are :data:`EXPLANATIONS` (with :data:`TITLES`), and :func:`gae_answer` says what an
implementation with some of them returns: CleanRL's loop, each mistake changing its step.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ppo_viz.exercises.advice import EXERCISES, Exercise, float32_like
from ppo_viz.exercises.battery import ExerciseBatch, llm_reference
from ppo_viz.exercises.checker import CheckResult, run_check
from ppo_viz.exercises.sandbox import TIME_LIMIT_S, Function

_RECURSION = "A[t] = delta[t] + gamma * lam * (1 - dones[t + 1]) * A[t + 1]"
_STARTS = (
    "dones[t] says observation t starts a new episode, so step t's future is cut by dones[t + 1]"
)
#: Every mistake the check names: its title (unless :data:`.advice.TITLES` has it) and what the
#: learner reads.
TITLES = {
    "forwards": "The recursion run forwards",
    "dones_shifted": "dones shifted by one",
    "no_bootstrap": "No bootstrap at the rollout's end",
    "through_done": "Bootstrapped through a termination",
    "swapped": "λ and γ swapped",
    "discounted_returns": "Returns as discounted rewards",
    "returns_are_advantages": "Returns without the values",
    "last_done_ignored": "last_done ignored",
}
#: What the learner reads about each mistake.
EXPLANATIONS = {
    "forwards": f"You run t from 0 up, so each advantage sums the past; GAE sums the future, from "
    f"the last step back: for t in reversed(range(T)): {_RECURSION}.",
    "dones_shifted": f"You cut step t's future with dones[t]; {_STARTS} (last_done at the last "
    f"step): delta[t] = rewards[t] + gamma * V[t + 1] * (1 - dones[t + 1]) - values[t].",
    "no_bootstrap": "At the last step you take the next value as 0; the rollout stops, the episode "
    "need not: its next value is last_value, times (1 - last_done).",
    "through_done": f"You add gamma * V of the next observation even where a new episode starts "
    f"there; {_STARTS}, which zeroes both its bootstrap and the advantage carried back.",
    "swapped": f"Your TD error discounts the next value by lam instead of gamma (the recursion's "
    f"gamma * lam is the same either way): delta[t] = rewards[t] + gamma * V[t + 1] * "
    f"(1 - dones[t + 1]) - values[t], then {_RECURSION}.",
    "discounted_returns": "Your returns are the discounted sums of the rewards; the value targets "
    "are the advantages plus the values, returns = advantages + values (the λ-return), which equal "
    "the discounted rewards only at lam = 1.",
    "returns_are_advantages": "Your returns are the advantages; the value targets add the critic's "
    "values back: returns = advantages + values.",
    "last_done_ignored": "You bootstrap the last step from last_value even when last_done says the "
    "observation after the rollout starts a new episode: its future is cut by (1 - last_done), "
    "as dones[t + 1] cuts every other step's.",
    "precision": float32_like("Your answers agree with llm_clip.gae's") + " np.zeros_like of a "
    "float32 array is float32 too.",
}
#: The mistakes in groups of those that exclude one another.
GROUPS = [
    ("forwards",),
    ("dones_shifted", "through_done", "last_done_ignored"),
    ("no_bootstrap",),
    ("swapped",),
    ("discounted_returns", "returns_are_advantages"),
]


def gae_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> list[np.ndarray]:
    """The advantages then the returns, flattened, of CleanRL's loop with ``mistakes``: every
    form a mistake may take (dones shifted with last_done or dones[-1] at the end; through a
    termination with or without the advantage's cut; discounted rewards with or without the
    bootstrap)."""
    (rewards, values, dones), (last_value, last_done) = batch.arrays.values(), batch.extras
    if not mistakes:
        answer = llm_reference.gae(rewards, values, dones, last_value, last_done, **batch.keywords)
        return [np.concatenate([np.ravel(x) for x in answer])]
    gamma, lam, m = batch.keywords["gamma"], batch.keywords["lam"], mistakes
    gamma, lam = (lam, gamma) if "swapped" in m else (gamma, lam)
    last = np.asarray(last_done, float)[None] * ("last_done_ignored" not in m)
    cuts = [np.concatenate([dones[1:], last])]  # step t's future is cut by dones[t + 1]
    if "dones_shifted" in m:
        cuts = [dones, np.concatenate([dones[:-1], last])]
    next_values = np.concatenate([values[1:], np.asarray(last_value, float)[None]])
    if "no_bootstrap" in m:  # the last step's next value taken as 0
        next_values[-1] = 0.0
    forms = []
    for cut in cuts:
        bootstrap_cut = np.zeros_like(cut) if "through_done" in m else cut
        for carry_cut in [cut, bootstrap_cut] if "through_done" in m else [cut]:
            delta = rewards + gamma * next_values * (1 - bootstrap_cut) - values
            carry = gamma * lam * (1 - carry_cut)
            advantages = _sweep(delta, carry, backwards="forwards" not in m)
            returns = [advantages if "returns_are_advantages" in m else advantages + values]
            if "discounted_returns" in m:
                returns = [
                    _discounted(rewards, gamma * (1 - bootstrap_cut), end)
                    for end in (next_values[-1], 0 * next_values[-1])
                ]
            forms += [np.concatenate([advantages.ravel(), r.ravel()]) for r in returns]
    return forms


def _sweep(start: np.ndarray, factor: np.ndarray, backwards: bool = True) -> np.ndarray:
    """``x[t] = start[t] + factor[t] * x[t + 1]`` from the last step back (``x[T] = 0``), or
    ``x[t] = start[t] + factor[t] * x[t - 1]`` from the first step up (``x[-1] = 0``)."""
    out, carried = np.zeros_like(start), np.zeros_like(start[0])
    for t in reversed(range(len(start))) if backwards else range(len(start)):
        out[t] = carried = start[t] + factor[t] * carried
    return out


def _discounted(rewards: np.ndarray, discount: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The discounted sums of the rewards, ``R[t] = rewards[t] + discount[t] * R[t + 1]``, with
    ``R[T] = end``."""
    start = rewards.copy()
    start[-1] = start[-1] + discount[-1] * end
    return _sweep(start, discount)


EXERCISES["gae"] = Exercise(TITLES, EXPLANATIONS, GROUPS, gae_answer)

#: The batches, by name: dones (T,) or (T, N), last_done, gamma, lam and the seed of the
#: rewards, values and last_value.
BATCHES = {
    "an episode ends mid-rollout": ([0, 0, 0, 1, 0, 0], 0, 0.99, 0.95, 1),
    "the last step ends its episode": ([0, 1, 0, 0, 0], 1, 0.9, 0.8, 2),
    "4 environments": (
        [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0]],
        [0, 1, 0, 1],
        0.95,
        0.7,
        3,
    ),
}


def _batch(name: str) -> ExerciseBatch:
    """Batch ``name`` of :data:`BATCHES`, with seeded rewards and values."""
    dones, last_done, gamma, lam, seed = BATCHES[name]
    dones, rng = np.array(dones, float), np.random.default_rng(seed)
    rewards, values = rng.normal(0.5, 1.0, dones.shape), rng.normal(1.0, 1.0, dones.shape)
    last_value = rng.normal(1.0, 1.0, dones.shape[1:])
    last_value = float(last_value) if dones.ndim == 1 else last_value
    last_done = float(last_done) if dones.ndim == 1 else np.array(last_done, float)
    starts = ", ".join(str(t) for t in np.flatnonzero(dones.reshape(len(dones), -1).any(axis=1)))
    lesson = f"shape {dones.shape}, gamma {gamma:g}, lam {lam:g}, dones[t] = 1 at t = {starts}, "
    lesson += f"last_done {np.asarray(last_done).astype(int).tolist()}"
    arrays = {"rewards": rewards, "values": values, "dones": dones}
    keywords = {"gamma": gamma, "lam": lam}
    entries = tuple(
        f"{which}[{', '.join(map(str, index))}]"
        for which in ("advantages", "returns")
        for index in np.ndindex(dones.shape)
    )
    return ExerciseBatch(name, lesson, arrays, (last_value, last_done), keywords, entries)


@cache
def battery() -> tuple[ExerciseBatch, ...]:
    """The batches :func:`check_gae` runs, (T,) and (T, N), with episode ends mid-rollout and at
    the last step."""
    return tuple(_batch(name) for name in BATCHES)


def check_gae(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check ``gae(rewards, values, dones, last_value, last_done, *, gamma, lam)``, which
    returns ``(advantages, returns)`` as :func:`llm_clip.gae` does."""
    return run_check("gae", "gae", function, battery(), time_limit_s, "llm_clip.gae")
