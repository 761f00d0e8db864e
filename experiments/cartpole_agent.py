"""PPO on CartPole-v1 in numpy, for many seeds side by side (notebook 4's CartPole runs).

The agent is CleanRL's ``ppo.py`` for CartPole, written out by hand:

* a policy network and a value network, each a two-hidden-layer tanh MLP of
  width 64 (:class:`experiments.networks.MLP`);
* each iteration collects ``rollout_steps`` steps from ``num_envs``
  environments (:class:`cartpole.CartPoleVector`) with the current policy;
* GAE(lambda) advantages and returns (:func:`llm_clip.gae`);
* ``epochs`` passes over the rollout in ``minibatches`` shuffled minibatches,
  each an Adam step on ``policy loss - ent_coef * entropy + vf_coef * value
  loss``, with advantages normalized per minibatch and gradients clipped to
  a global norm of ``max_grad_norm``; the learning rate falls linearly to 0.

The policy loss's gradient with respect to each sample's log-probability
comes from :mod:`ppo_clip` (:func:`bandit.sample_gradients`);
this module chains it through the softmax and the network.  The methods that
are not an objective of :mod:`ppo_clip` alone, as :class:`bandit.Method`
describes them:

* the PPO paper's KL penalty adds ``beta * mean_t KL(pi_old(.|s_t) || pi(.|s_t))``
  to the loss, the exact KL over the two actions; its gradient on each state's
  logits is ``beta * (pi - pi_old) / n`` (:func:`bandit.kl_penalty_grad`);
  an adaptive ``beta`` follows the paper's rule after each iteration, on the
  mean exact KL over the rollout's states;
* early stopping (``target_kl``): Stable-Baselines3's rule.  Before each
  minibatch step, the k3 estimate of KL(old || current) on that minibatch is
  compared with ``target_kl`` (the study's 0.015 is Stable-Baselines3's
  ``1.5 * target_kl`` at ``target_kl = 0.01``); a run whose estimate exceeds it
  skips that step and every later one on the rollout
  (``stable_baselines3/ppo/ppo.py`` at commit e05d2db, lines 262-271).
  Spinning Up checks k1 on the whole batch instead, and CleanRL checks k3 of
  each epoch's last minibatch only between epochs, against ``target_kl``
  itself: notebook 3 compares the three.

Three deliberate differences from CleanRL: the value loss is not clipped
(CleanRL's ``clip_vloss``; :func:`value_loss` computes both), so that only the
policy's objective differs between methods; a truncated episode (500 steps) is
bootstrapped with the value of its last observation rather than treated as a
failure; and the learning rate falls to 0 over the run's own ``total_steps``
(50,000 by default, where CleanRL runs 500,000).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

import bandit
import llm_clip
from bandit import FloatArray, Method, checked_fields, sample_gradients
from cartpole import MAX_EPISODE_STEPS, CartPoleVector
from experiments.networks import MLP, Adam, clip_by_global_norm

#: A random policy's mean return on CartPole-v1 (measured by :func:`random_policy_return`
#: over 10,000 episodes): the 0 of the normalized score; 500 is its 1.
RANDOM_RETURN = 22.1
#: A run's score, and each point of its learning curve: the mean return of the last this
#: many episodes.
SCORE_EPISODES = 20
#: Where each run's agent draws its random numbers: ``default_rng([AGENT_STREAM, seed])``.
AGENT_STREAM = 12_345
OBSERVATION_SIZE, N_ACTIONS, HIDDEN = 4, 2, 64


#: The range of each setting: (low, high, whole number?).
CARTPOLE_RANGES = {
    "total_steps": (512, 10_000_000, True),
    "num_envs": (1, 64, True),
    "rollout_steps": (8, 4096, True),
    "epochs": (1, 50, True),
    "minibatches": (1, 64, True),
    "learning_rate": (1e-6, 0.1, False),
    "gamma": (0.5, 1.0, False),
    "gae_lambda": (0.0, 1.0, False),
    "ent_coef": (0.0, 1.0, False),
    "vf_coef": (0.0, 10.0, False),
    "max_grad_norm": (0.01, 100.0, False),
}


@dataclass(frozen=True)
class CartPoleSettings:
    """The agent's settings: CleanRL's CartPole defaults, except 50,000 steps, not 500,000.

    Checked on creation against :data:`CARTPOLE_RANGES` (a ``ValueError`` or ``TypeError`` naming
    the setting).
    """

    total_steps: int = 50_000
    num_envs: int = 4
    rollout_steps: int = 128
    epochs: int = 4
    minibatches: int = 4
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    def __post_init__(self) -> None:
        checked_fields(self, CARTPOLE_RANGES)
        if self.batch_size % self.minibatches:
            raise ValueError(
                f"minibatches ({self.minibatches}) must divide the rollout of "
                f"{self.batch_size} steps"
            )

    @property
    def batch_size(self) -> int:
        """Steps per iteration: ``num_envs * rollout_steps`` (CleanRL: 512)."""
        return self.num_envs * self.rollout_steps

    @property
    def iterations(self) -> int:
        """How many rollouts ``total_steps`` allows (at least one)."""
        return max(1, self.total_steps // self.batch_size)


@dataclass(frozen=True)
class CartPoleRuns:
    """The learning curves of one method, one row per seed, one column per iteration."""

    method: Method
    settings: CartPoleSettings
    seeds: tuple[int, ...]
    #: The mean return of the last :data:`SCORE_EPISODES` episodes finished by the end of
    #: each iteration (NaN before a run's first episode ends).
    return_curve: FloatArray
    #: The share of minibatch samples PPO's rule clipped, over the iteration's updates.
    clip_fraction: FloatArray
    #: The k3 estimate of KL(policy before || policy after the iteration) on its rollout.
    approx_kl: FloatArray
    #: Per seed, the mean return of its last :data:`SCORE_EPISODES` episodes.
    final_return: FloatArray

    @property
    def score(self) -> FloatArray:
        """Per seed, :attr:`final_return` normalized (see :func:`score_of`)."""
        return score_of(self.final_return)


def score_of(final_return: FloatArray) -> FloatArray:
    """Returns normalized: a random policy's :data:`RANDOM_RETURN` is 0, the 500 steps 1."""
    return (np.asarray(final_return) - RANDOM_RETURN) / (MAX_EPISODE_STEPS - RANDOM_RETURN)


def curve_of_returns(
    episodes: Sequence[tuple[int, float]], steps: NDArray[np.int64], window: int
) -> FloatArray:
    """At each of ``steps``, the mean return of the last ``window`` episodes ended by then."""
    ends = np.array([step for step, _ in episodes], dtype=np.int64)
    returns = np.array([value for _, value in episodes])
    finished = np.searchsorted(ends, steps, side="right")
    return np.array(
        [returns[max(0, count - window) : count].mean() if count else np.nan for count in finished]
    )


def policy_terms(logits: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(log pi, pi, entropy)`` of softmax policies over the last axis."""
    log_probs = bandit.log_softmax(logits)
    probs = np.exp(log_probs)
    return log_probs, probs, -(probs * log_probs).sum(axis=-1)


def taken(log_probs: FloatArray, actions: NDArray[np.int64]) -> FloatArray:
    """The log-probability of each sample's action: ``log_probs[..., t, actions[..., t]]``."""
    return np.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]


@dataclass
class Rollout:
    """One iteration's experience for every run: arrays of shape ``(runs, steps, ...)``.

    ``old_log_probs`` is the collecting policy's ``log pi`` of both actions in each state.
    """

    observations: FloatArray
    actions: NDArray[np.int64]
    old_log_probs: FloatArray
    advantages: FloatArray
    returns: FloatArray

    @property
    def logp(self) -> FloatArray:
        """The collecting policy's log-probability of each sample's action."""
        return taken(self.old_log_probs, self.actions)

    def rows(self, indices: NDArray[np.int64]) -> Rollout:
        """Run ``i``'s samples ``indices[i]`` (a minibatch), for every run."""

        def take(array: np.ndarray) -> np.ndarray:
            index = indices.reshape(indices.shape + (1,) * (array.ndim - 2))
            return np.take_along_axis(array, index, axis=1)

        return Rollout(*(take(getattr(self, field.name)) for field in fields(self)))


class CartPoleAgent:
    """The policy and value networks of every run, their optimizers, and one PPO update.

    ``kl_coef`` is each run's ``beta`` of the KL penalty (the method's, adapted after each
    iteration when the method has a ``kl_target``).
    """

    def __init__(self, seeds: Sequence[int], settings: CartPoleSettings, method: Method) -> None:
        self.settings = settings
        self.method = method
        self.rngs = [np.random.default_rng([AGENT_STREAM, seed]) for seed in seeds]
        sizes = (OBSERVATION_SIZE, HIDDEN, HIDDEN, N_ACTIONS)
        self.policy = MLP.initial(self.rngs, sizes, output_gain=0.01)
        self.value = MLP.initial(self.rngs, (*sizes[:3], 1), output_gain=1.0)
        self.optimizer = Adam(self.policy.params + self.value.params)
        self.kl_coef = np.full(len(seeds), method.kl_coef)

    def act(self, observations: FloatArray, uniforms: FloatArray) -> tuple[NDArray, FloatArray]:
        """Actions (1 where ``uniform < pi(1)``, else 0) and ``log pi`` of both actions."""
        log_probs, probs, _ = policy_terms(self.policy(observations))
        return (uniforms < probs[..., 1]).astype(np.int64), log_probs

    def values(self, observations: FloatArray) -> FloatArray:
        return self.value(observations)[..., 0]

    def update(self, rollout: Rollout, learning_rate: float) -> FloatArray:
        """``epochs`` passes of minibatch Adam steps (fewer for a run that stops early);
        returns each run's clip fraction over the steps it took."""
        s, target = self.settings, self.method.target_kl
        runs, size = rollout.actions.shape
        clipped_share, steps = np.zeros(runs), np.zeros(runs)
        active = np.ones(runs, dtype=bool)
        for _ in range(self.method.epochs(s.epochs)):
            order = np.stack([rng.permutation(size) for rng in self.rngs])
            for chunk in np.split(order, s.minibatches, axis=1):
                grads, clipped, kl = self.gradients(rollout.rows(chunk))
                if target is not None:
                    active &= ~(kl > target)
                clipped_share += np.where(active, clipped.mean(axis=1), 0.0)
                steps += active
                grads = clip_by_global_norm(grads, s.max_grad_norm)
                self.optimizer.step(grads, learning_rate, active)
        return clipped_share / np.maximum(steps, 1)

    def gradients(self, batch: Rollout) -> tuple[list[FloatArray], NDArray[np.bool_], FloatArray]:
        """For one minibatch (all runs): the loss's gradients, where PPO's rule clipped, and
        the k3 estimate of KL(old || current policy) on it."""
        s = self.settings
        n = batch.actions.shape[1]
        logits, policy_cache = self.policy.forward(batch.observations)
        terms = policy_terms(logits)
        logp_new = taken(terms[0], batch.actions)
        advantages = normalized(batch.advantages)
        d_logp, clipped = sample_gradients(logp_new, batch.logp, advantages, self.method)
        d_logits, d_entropy = logit_grads(d_logp, batch.actions, terms, s.ent_coef)
        d_logits += d_entropy
        if self.kl_coef.any():
            penalty = bandit.kl_penalty_grad(np.exp(batch.old_log_probs), terms[1])
            d_logits += (self.kl_coef[:, None, None] / n) * penalty
        values, value_cache = self.value.forward(batch.observations)
        d_values = value_loss(values[..., 0], batch.returns, coef=s.vf_coef)[1]
        grads = self.policy.backward(policy_cache, d_logits)
        grads += self.value.backward(value_cache, d_values[..., None])
        return grads, clipped, bandit.approx_kl(logp_new - batch.logp)

    def adapt_kl_coef(self, rollout: Rollout, log_probs_after: FloatArray) -> None:
        """The adaptive penalty's rule, on the mean exact KL over the rollout's states."""
        if self.method.kl_target is not None:
            old = rollout.old_log_probs
            kl = (np.exp(old) * (old - log_probs_after)).sum(axis=-1).mean(axis=-1)
            self.kl_coef = bandit.adapted_kl_coef(self.kl_coef, kl, self.method.kl_target)


def logit_grads(
    d_logp: FloatArray,
    actions: NDArray[np.int64],
    terms: tuple[FloatArray, FloatArray, FloatArray],
    ent_coef: float,
) -> tuple[FloatArray, FloatArray]:
    """``d loss / d logits`` of the policy objective (from its ``d loss / d logp`` of each
    sample's action) and of the entropy bonus ``-ent_coef * mean_t H(pi(.|s_t))``, apart;
    ``terms`` are the policy's :func:`policy_terms`.

    ``d logp(a) / d logits = onehot(a) - pi``;  ``d H / d logits = -pi * (log pi + H)``.
    """
    log_probs, probs, entropy = terms
    n = actions.shape[-1]
    one_hot = np.eye(N_ACTIONS)[actions]
    d_entropy = (ent_coef / n) * probs * (log_probs + entropy[..., None])
    return d_logp[..., None] * (one_hot - probs), d_entropy


def value_loss(
    values: FloatArray,
    returns: FloatArray,
    *,
    coef: float = 1.0,
    old_values: FloatArray | None = None,
    clip_coef: float | None = None,
) -> tuple[FloatArray, FloatArray]:
    """``coef`` times the value loss, a mean over the last axis, and its ``d / d values``.

    Unclipped (the agent's): ``0.5 * mean((V - R)^2)``.  With ``clip_coef``, CleanRL's
    ``clip_vloss`` branch (``cleanrl/ppo.py``, read at commit 020cf0e): ``V_clipped = V_old +
    clip(V - V_old, -clip_coef, clip_coef)`` and ``0.5 * mean(max((V - R)^2, (V_clipped -
    R)^2))``; where the clipped term is the larger and ``V`` is outside the band, the gradient
    is 0 (where the two are equal, the unclipped term's gradient is taken).  ``old_values``
    and ``clip_coef`` come together (else a ``ValueError`` naming them).
    """
    if (old_values is None) != (clip_coef is None):
        raise ValueError("old_values and clip_coef must be given together (CleanRL's clip_vloss)")
    n = values.shape[-1]
    error = values - returns
    if clip_coef is None:
        return coef * 0.5 * (error**2).mean(axis=-1), (coef / n) * error
    moved = np.clip(values - old_values, -clip_coef, clip_coef)
    clipped_error = old_values + moved - returns
    unclipped_wins = error**2 >= clipped_error**2
    inside = np.abs(values - old_values) < clip_coef
    loss = 0.5 * np.maximum(error**2, clipped_error**2).mean(axis=-1)
    grad = np.where(unclipped_wins, error, np.where(inside, clipped_error, 0.0))
    return coef * loss, (coef / n) * grad


def bootstrapped(
    rewards: FloatArray, final_values: FloatArray, truncated: NDArray[np.bool_], gamma: float
) -> FloatArray:
    """Rewards with a truncated episode's bootstrap added: ``r + gamma * V(final obs)`` where
    ``truncated`` (a time limit cut a state that has a future); a termination gets nothing."""
    return rewards + gamma * final_values * truncated


def normalized(advantages: FloatArray) -> FloatArray:
    """Per run, ``(A - mean) / (std + 1e-8)`` over the minibatch (CleanRL's ``norm_adv``)."""
    mean = advantages.mean(axis=1, keepdims=True)
    std = advantages.std(axis=1, ddof=1, keepdims=True)
    return (advantages - mean) / (std + 1e-8)


Progress = Callable[[int, int], None]


def run_cartpole(
    method: Method,
    settings: CartPoleSettings,
    seeds: Sequence[int],
    progress: Progress | None = None,
) -> CartPoleRuns:
    """Train one agent per seed with ``method`` for ``settings.total_steps`` steps each.

    Run ``i``'s environments are seeded ``num_envs * seeds[i] + j``, its agent
    from ``seeds[i]``; ``progress(done, total)`` is called after each iteration.
    """
    return train_agents(method, settings, seeds, progress)[1]


def train_agents(
    method: Method,
    settings: CartPoleSettings,
    seeds: Sequence[int],
    progress: Progress | None = None,
) -> tuple[CartPoleAgent, CartPoleRuns]:
    """:func:`run_cartpole`, and the trained agent (its networks, one run per seed)."""
    s = settings
    runs, envs, steps = len(seeds), s.num_envs, s.rollout_steps
    agent = CartPoleAgent(seeds, s, method)
    env = CartPoleVector(runs * envs)
    observations = env.reset(seed=[envs * seed + j for seed in seeds for j in range(envs)])[0]
    running_return = np.zeros(runs * envs)
    starts = np.zeros(runs * envs, dtype=bool)  # CleanRL's next_done: a new episode begins
    episodes: list[list[tuple[int, float]]] = [[] for _ in seeds]
    clip_fraction, approx_kl = [], []

    def batched(flat: np.ndarray) -> FloatArray:
        """Observations ``(runs * envs, 4)`` as the networks take them: ``(runs, envs, 4)``."""
        return flat.reshape(runs, envs, OBSERVATION_SIZE).astype(np.float64)

    def per_run(stacked: np.ndarray) -> np.ndarray:
        """``(steps, runs, envs, ...)`` to ``(runs, envs * steps, ...)``, as :class:`Rollout`."""
        return np.moveaxis(stacked, 0, 2).reshape(runs, envs * steps, *stacked.shape[3:])

    for iteration in range(s.iterations):
        uniforms = np.stack([rng.random((steps, envs)) for rng in agent.rngs])
        collected = []  # per step: observations, actions, log pi, values, rewards, starts
        for t in range(steps):
            obs = batched(observations)
            actions, log_probs = agent.act(obs, uniforms[:, t])
            observations, rewards, terminated, truncated, info = env.step(actions.ravel())
            running_return += rewards
            bootstrap = truncated & ~terminated
            if bootstrap.any():
                final = agent.values(batched(info["final_obs"])).ravel()
                rewards = bootstrapped(rewards, final, bootstrap, s.gamma)
            step_count = (iteration * steps + t + 1) * envs
            for index in np.flatnonzero(terminated | truncated):
                episodes[index // envs].append((step_count, float(running_return[index])))
                running_return[index] = 0.0
            collected.append((obs, actions, log_probs, agent.values(obs), rewards, starts))
            starts = terminated | truncated
        obs_t, act_t, logp_t, val_t, rew_t, start_t = (
            np.stack(c) for c in zip(*collected, strict=True)
        )
        last = agent.values(batched(observations)).ravel()
        gae = llm_clip.gae(
            rew_t, val_t.reshape(steps, -1), start_t, last, starts, gamma=s.gamma, lam=s.gae_lambda
        )
        advantages, returns = (a.T.reshape(runs, -1) for a in gae)  # runs, then envs * steps
        rollout = Rollout(per_run(obs_t), per_run(act_t), per_run(logp_t), advantages, returns)
        learning_rate = s.learning_rate * (1.0 - iteration / s.iterations)
        clip_fraction.append(agent.update(rollout, learning_rate))
        log_probs_after, _, _ = policy_terms(agent.policy(rollout.observations))
        approx_kl.append(bandit.approx_kl(taken(log_probs_after, rollout.actions) - rollout.logp))
        agent.adapt_kl_coef(rollout, log_probs_after)
        if progress is not None:
            progress(iteration + 1, s.iterations)
    steps_done = s.batch_size * np.arange(1, s.iterations + 1)
    curves = np.stack([curve_of_returns(e, steps_done, SCORE_EPISODES) for e in episodes])
    return agent, CartPoleRuns(
        method=method,
        settings=s,
        seeds=tuple(seeds),
        return_curve=curves,
        clip_fraction=np.stack(clip_fraction, axis=1),
        approx_kl=np.stack(approx_kl, axis=1),
        final_return=curves[:, -1].copy(),  # by the last step, every episode has ended
    )


def random_policy_return(episodes: int = 10_000, seed: int = 0) -> float:
    """The mean return of a policy that pushes left or right with probability 1/2 each."""
    rng = np.random.default_rng(seed)
    env = CartPoleVector(100)
    env.reset(seed=seed)
    returns: list[float] = []
    running = np.zeros(100)
    while len(returns) < episodes:
        _, _, terminated, truncated, _ = env.step(rng.integers(0, 2, 100))
        running += 1.0
        for index in np.flatnonzero(terminated | truncated):
            returns.append(running[index])
            running[index] = 0.0
    return float(np.mean(returns[:episodes]))
