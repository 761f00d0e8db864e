"""Notebook 8's measurements: a partly trained CartPole agent (:func:`trained_agent`), one
episode, and continuations of each of its states (:func:`continuations`: each action first,
then the policy, to the episode's end, a time limit bootstrapped as the agent does).  The
*reference* ``Q(s, a_t) - V(s)`` takes ``Q`` of both actions from :data:`REFERENCE_RUNS` of
them and ``V = sum_a pi(a|s) Q(s, a)``; GAE(lambda) is measured on :data:`ESTIMATOR_RUNS`
others (:func:`gamma_study`, cached: sliders only look).  Every advantage and return is
:func:`llm_clip.gae`'s; values, log-probabilities and the loss's parts are the agent's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

import llm_clip
import ppo_clip
from bandit import sample_gradients
from cartpole import MAX_EPISODE_STEPS, CartPole, next_state, pole_has_fallen
from experiments.cartpole_agent import (
    CartPoleAgent,
    CartPoleSettings,
    bootstrapped,
    logit_grads,
    normalized,
    policy_terms,
    taken,
    train_agents,
    value_loss,
)
from ppo_viz.why_clip.methods import METHODS

FloatArray = np.ndarray
#: The agent's training seed (and the episode's environment seed), and its length in steps.
SEED, TRAIN_STEPS = 0, 16_384
#: The gammas the sliders offer, and the lambdas (0 to 1 in steps of 0.05).
GAMMAS = (0.9, 0.95, 0.98, 0.99)
LAMBDAS = np.arange(21) / 20
#: Continuations per state and first action: for the estimator, and for the reference.
ESTIMATOR_RUNS, REFERENCE_RUNS = 32, 128
#: The random streams of the episode's and the continuations' actions.
EPISODE_STREAM, ESTIMATOR_STREAM, REFERENCE_STREAM = 8_801, 8_802, 8_803
#: The constant a shifted critic adds to the trained critic's values.
SHIFT = 10.0


#: The agent's settings: CleanRL's CartPole defaults, :data:`TRAIN_STEPS` steps.
SETTINGS = CartPoleSettings(total_steps=TRAIN_STEPS)


@cache
def trained_agent() -> CartPoleAgent:
    """PPO (ε = 0.2) on CartPole for :data:`TRAIN_STEPS` steps, seed :data:`SEED`."""
    return train_agents(METHODS["ppo"], SETTINGS, [SEED])[0]


def values_of(agent: CartPoleAgent, observations: FloatArray) -> FloatArray:
    """The agent's critic on observations ``(n, 4)``."""
    return agent.values(observations[None])[0]


@dataclass(frozen=True)
class Episode:
    """One episode: each step's state (float64, as the environment keeps it), observation,
    action, log pi of both actions and value; the value of the observation it ended on, and
    whether the pole fell (else the time limit cut it)."""

    states: FloatArray
    observations: FloatArray
    actions: np.ndarray
    log_probs: FloatArray
    values: FloatArray
    final_value: float
    terminated: bool

    def __len__(self) -> int:  # its steps
        return len(self.actions)


def episode_of(agent: CartPoleAgent, seed: int = SEED) -> Episode:
    """One episode of ``agent`` in ``CartPole().reset(seed=seed)``, actions seeded too."""
    env, rng = CartPole(), np.random.default_rng([EPISODE_STREAM, seed])
    observation, _ = env.reset(seed=seed)
    rows: list[tuple] = []
    while True:
        state, seen = env.state.copy(), observation.astype(np.float64)
        actions, log_probs = agent.act(seen[None, None], rng.random((1, 1)))
        rows.append((state, seen, int(actions[0, 0]), log_probs[0, 0]))
        observation, _, terminated, truncated, _ = env.step(int(actions[0, 0]))
        if terminated or truncated:
            break
    states, seen, actions, log_probs = (np.array(column) for column in zip(*rows, strict=True))
    final_value = float(values_of(agent, observation[None].astype(np.float64))[0])
    values = values_of(agent, seen)
    return Episode(states, seen, actions, log_probs, values, final_value, terminated)


def advantages_of(
    episode: Episode,
    gamma: float,
    lam: float,
    values: FloatArray | None = None,
    *,
    cut: bool | None = None,
) -> tuple[FloatArray, FloatArray]:
    """``llm_clip.gae`` on the episode (rewards 1; ``values`` by default the episode's):
    advantages and returns.  An episode the time limit cut (or any, with ``cut=True``) has its
    last reward bootstrapped from the final observation's value, as the agent does."""
    values = episode.values if values is None else values
    cut = not episode.terminated if cut is None else cut
    rewards = np.ones(len(episode))
    rewards[-1] = bootstrapped(rewards[-1], episode.final_value, cut, gamma)
    starts = np.zeros(len(episode))
    return llm_clip.gae(rewards, values, starts, 0.0, True, gamma=gamma, lam=lam)


@dataclass(frozen=True)
class Continuations:
    """Play-outs, one column each: length, the value a cut one bootstraps from, whether the
    time limit cut it and, if kept, the critic's value at every step (0 after the end)."""

    lengths: np.ndarray
    final_values: FloatArray
    truncated: np.ndarray
    values: FloatArray | None

    def rewards(self, gamma: float) -> FloatArray:
        """Rewards ``(longest, n)``: 1 per step, a cut episode's last bootstrapped, 0 after."""
        steps = np.arange(self.lengths.max())[:, None]
        last = bootstrapped(np.ones(len(self.lengths)), self.final_values, self.truncated, gamma)
        return np.where(steps < self.lengths - 1, 1.0, np.where(steps == self.lengths - 1, last, 0))

    def starts(self) -> FloatArray:
        """``dones`` for :func:`llm_clip.gae`: each step after a play-out's end starts anew."""
        return (np.arange(self.lengths.max())[:, None] >= self.lengths).astype(np.float64)


def continuations(
    agent: CartPoleAgent, episode: Episode, runs: int, stream: int, keep_values: bool
) -> Continuations:
    """``runs`` play-outs from every state of ``episode`` with each first action, then the
    policy's, to the episode's end; columns ordered (state, first action, run)."""
    rng = np.random.default_rng([stream, SEED])
    count = len(episode) * 2 * runs
    state = np.repeat(episode.states, 2 * runs, axis=0).T.copy()  # (4, count)
    action = np.tile(np.repeat([0, 1], runs), len(episode))
    elapsed = np.repeat(np.arange(len(episode)), 2 * runs)
    lengths, alive = np.zeros(count, dtype=np.int64), np.ones(count, dtype=bool)
    final_values, truncated, values = np.zeros(count), np.zeros(count, dtype=bool), []
    while alive.any():
        live = np.flatnonzero(alive)
        seen = state[:, live].T.astype(np.float32).astype(np.float64)
        if keep_values:
            values.append(np.zeros(count))
            values[-1][live] = values_of(agent, seen)
        if lengths.max() > 0:  # after the first step, the policy chooses
            action[live] = agent.act(seen[None], rng.random((1, len(live))))[0][0]
        state[:, live] = next_state(state[:, live], action[live] == 1)
        lengths[live] += 1
        fell = pole_has_fallen(state[:, live])
        cut = ~fell & (elapsed[live] + lengths[live] >= MAX_EPISODE_STEPS)
        if cut.any():
            ended = live[cut]
            final = state[:, ended].T.astype(np.float32).astype(np.float64)
            final_values[ended], truncated[ended] = values_of(agent, final), True
        alive[live[fell | cut]] = False
    kept = np.array(values) if keep_values else None
    return Continuations(lengths, final_values, truncated, kept)


def first_advantages(play: Continuations, gamma: float, lams: FloatArray) -> FloatArray:
    """GAE(lambda)'s advantage at the first step of every play-out, from :func:`llm_clip.gae`,
    one row per lambda of ``lams``."""
    rewards, starts = play.rewards(gamma), play.starts()
    gae = [
        llm_clip.gae(rewards, play.values, starts, 0.0, True, gamma=gamma, lam=lam)[0][0]
        for lam in lams
    ]
    return np.array(gae)


def discounted_returns(play: Continuations, gamma: float) -> FloatArray:
    """Each play-out's discounted return: ``llm_clip.gae`` with lambda 1 and V = 0, computed
    once per distinct (length, bootstrap) and spread back."""
    keys = np.stack([play.lengths, play.final_values, play.truncated])
    keys, index = np.unique(keys, axis=1, return_inverse=True)
    unique = Continuations(keys[0].astype(np.int64), keys[1], keys[2] == 1, None)
    rewards = unique.rewards(gamma)
    returns = llm_clip.gae(rewards, 0 * rewards, unique.starts(), 0.0, True, gamma=gamma, lam=1)
    return returns[1][0][index.ravel()]


@cache
def play_outs() -> tuple[Episode, Continuations, Continuations]:
    """The trained agent's episode and its continuations (estimator's, reference's)."""
    agent = trained_agent()
    episode = episode_of(agent)
    estimator = continuations(agent, episode, ESTIMATOR_RUNS, ESTIMATOR_STREAM, True)
    reference = continuations(agent, episode, REFERENCE_RUNS, REFERENCE_STREAM, False)
    return episode, estimator, reference


@dataclass(frozen=True)
class GammaStudy:
    """At one gamma, per step ``t``: the reference ``Q(s_t, a_t) - V(s_t)``,
    ``policy_values`` (``V`` of the policy, from the reference's ``Q``); per lambda (rows
    of :data:`LAMBDAS`) GAE's mean and std at ``(s_t, a_t)`` and the episode's own; ``curves``
    over the states (mean, half-width of a 95% interval): ``bias2`` (mean less reference,
    squared), ``action_bias2`` (of the part that differs between the actions, which alone
    biases the policy gradient) and ``variance``."""

    gamma: float
    reference: FloatArray
    policy_values: FloatArray
    mean: FloatArray
    std: FloatArray
    own: FloatArray
    curves: dict[str, tuple[FloatArray, FloatArray]]


def _over_states(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean over the states (last axis) and the half-width of its normal 95% interval."""
    return values.mean(axis=-1), 1.96 * values.std(axis=-1, ddof=1) / np.sqrt(values.shape[-1])


@cache
def gamma_study(gamma: float) -> GammaStudy:
    """Everything the explorer shows at ``gamma``, for every lambda (about 0.5 s, once)."""
    episode, estimator, reference = play_outs()
    steps, taken = np.arange(len(episode)), episode.actions
    pi = np.exp(episode.log_probs)  # (T, 2)
    q = discounted_returns(reference, gamma).reshape(len(episode), 2, REFERENCE_RUNS)
    q_mean, q_var = q.mean(axis=-1), q.var(axis=-1, ddof=1) / REFERENCE_RUNS
    weight = 1.0 - pi[steps, taken]  # A(a) = Q(a) - sum pi Q = (1 - pi(a)) (Q(a) - Q(other))
    ref = q_mean[steps, taken] - (pi * q_mean).sum(axis=-1)  # Q(s, a_t) - V(s)
    ref_var = weight**2 * q_var.sum(axis=-1)
    means, stds, own, bias2, action_bias2, variance = ([] for _ in range(6))
    estimates = first_advantages(estimator, gamma, LAMBDAS).reshape(
        len(LAMBDAS), len(episode), 2, -1
    )
    for lam, estimate in zip(LAMBDAS, estimates, strict=True):
        m, var = estimate.mean(axis=-1), estimate.var(axis=-1, ddof=1)
        noise = var / ESTIMATOR_RUNS
        means.append(m[steps, taken])
        stds.append(np.sqrt(var[steps, taken]))
        own.append(advantages_of(episode, gamma, lam)[0])
        centred = m[steps, taken] - (pi * m).sum(axis=-1)  # the action-dependent part
        # squared differences less their sampling noise: unbiased estimates of bias squared
        bias2.append((m[steps, taken] - ref) ** 2 - noise[steps, taken] - ref_var)
        action_bias2.append((centred - ref) ** 2 - weight**2 * noise.sum(axis=-1) - ref_var)
        variance.append(var[steps, taken])
    named = {"bias2": bias2, "action_bias2": action_bias2, "variance": variance}
    curves = {name: _over_states(np.array(rows)) for name, rows in named.items()}
    rows = (np.array(means), np.array(stds), np.array(own))
    return GammaStudy(gamma, ref, (pi * q_mean).sum(axis=-1), *rows, curves)


def critics(shift: float = SHIFT) -> dict[str, FloatArray]:
    """Three critics' values along the episode: trained, untrained, trained + ``shift``
    (the trained critic learned at the agent's own gamma, 0.99, whatever gamma a caller studies)."""
    episode = play_outs()[0]
    untrained = values_of(CartPoleAgent([SEED], SETTINGS, METHODS["ppo"]), episode.observations)
    names = ("trained critic", "untrained critic (before training)", f"trained critic + {shift:g}")
    return dict(zip(names, (episode.values, untrained, episode.values + shift), strict=True))


def loss_parts(normalize: bool = True, gamma: float = 0.99, lam: float = 0.95) -> dict:
    """PPO's loss on the episode as one minibatch, by the agent's own functions: each part's
    value (as minimized: ``-L^CLIP``, ``c1 L^VF``, ``-c2 S``) and its gradient's norm on its
    network (the policy's two parts, the critic's one); ``total``: the norm of the whole gradient
    that the one global clip sees (the policy's two parts added on their shared parameters, the
    critic's beside them); ``flipped``: how many advantages
    normalisation turned to the other sign."""
    agent, episode, s = trained_agent(), play_outs()[0], SETTINGS
    advantages, returns = advantages_of(episode, gamma, lam)
    observations, actions = episode.observations[None], episode.actions[None]
    logits, policy_cache = agent.policy.forward(observations)
    terms = policy_terms(logits)
    logp, logp_old = taken(terms[0], actions), taken(episode.log_probs[None], actions)
    used = normalized(advantages[None]) if normalize else advantages[None]
    d_logp, _ = sample_gradients(logp, logp_old, used, agent.method)
    d_clip, d_entropy = logit_grads(d_logp, actions, terms, s.ent_coef)
    values, value_cache = agent.value.forward(observations)
    loss, d_values = value_loss(values[..., 0], returns[None], coef=s.vf_coef)
    grads = {
        "policy −L^CLIP": agent.policy.backward(policy_cache, d_clip),
        "entropy −c2·S": agent.policy.backward(policy_cache, d_entropy),
        "value c1·L^VF": agent.value.backward(value_cache, d_values[..., None]),
    }
    value = {
        "policy −L^CLIP": ppo_clip.ppo_clip_loss(logp[0], logp_old[0], used[0]),
        "entropy −c2·S": -s.ent_coef * float(terms[2].mean()),
        "value c1·L^VF": float(loss[0]),
    }
    norm = {name: float(np.sqrt(sum((g**2).sum() for g in grad))) for name, grad in grads.items()}
    policy, entropy = grads["policy −L^CLIP"], grads["entropy −c2·S"]  # the same parameters
    shared = sum(((p + e) ** 2).sum() for p, e in zip(policy, entropy, strict=True))
    total = float(np.sqrt(shared + norm["value c1·L^VF"] ** 2))
    flipped = int((np.sign(used[0]) != np.sign(advantages)).sum())
    return {"value": value, "norm": norm, "total": total, "flipped": flipped,
            "scale": float(advantages.std())}  # fmt: skip
