"""GRPO-family trainers on :mod:`tiny_lm`: RLHF in miniature, many seeds side by side.

One iteration, for every run (a method on a seed):

1. draw :attr:`TrainSettings.prompts_per_batch` prompts and sample a group of
   :attr:`TrainSettings.group_size` responses to each from the current policy, the *old*
   policy of this batch (:func:`tiny_lm.sample`), and score them (:func:`tiny_lm.rewards`);
2. compute advantages: the group's (:func:`llm_clip.group_advantages`, over the group's std for
   GRPO, not for Dr. GRPO), or PPO's per token: GAE over the response with a value model, each
   token's reward carrying the KL penalty to the reference (as TRL's ``PPOTrainer``);
3. take :attr:`TrainSettings.updates` (mu) Adam steps on the batch.  Each step's gradient with
   respect to every token's log-probability comes from :func:`llm_clip.token_breakdown`, the
   single source of every clipped loss and its gradient, called per run on that run's batch
   with the method's objective, clip range and aggregation (and a KL to the reference in the
   loss when :attr:`TrainSettings.kl_coef` is not 0); :func:`tiny_lm.parameter_grad` chains it
   to the parameters.  At the first step the policy *is* the old one: every ratio is exactly 1
   and nothing is clipped, so with mu = 1 clipping never engages.

A :class:`Method` is data: an objective of :mod:`llm_clip`, its clip range and the advantages
it uses (:data:`METHODS`).  Every method runs on the same seeds, and a seed's prompts and
uniform numbers are the same for every method (common random numbers), so methods compare
seed by seed.  A run's score is the exact probability that its final policy answers right,
averaged over every prompt (:func:`tiny_lm.right_answer_probability`).

What the methods follow (TRL ``f2cd577``, verl ``b178a3c``): PPO is TRL's ``PPOTrainer``
(``trl/experimental/ppo/ppo_trainer.py`` L772-798: the k1 KL penalty per token with
``kl_coef`` 0.05, the score added at the last token, GAE with gamma 1 and lambda 0.95,
advantages whitened over the batch) with an unclipped value loss; GSPO takes its paper's clip
range (3e-4, 4e-4); CISPO verl's example (``examples/cispo_trainer/
run_cispo_qwen2_5_0_5b_gsm8k.sh`` L13-14: no lower bound, ``clip_ratio_high`` 0.2, here
``eps_low`` 1); the unclipped control is GRPO with a band no ratio leaves.  No method has
dynamic sampling, overlong shaping or an entropy bonus; gradients are not norm-clipped.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter

import numpy as np

import llm_clip
from bandit import checked_fields
from ppo_clip_inputs import checked_choice, checked_real
from rollout_correction import ROLLOUT_MODES, checked_bounds
from tiny_lm import (
    MAX_LEN,
    PROMPTS,
    RIGHT_LENGTH,
    Adam,
    Engine,
    FloatArray,
    IntArray,
    Packed,
    Responses,
    Scored,
    TinyLM,
    engine_logp,
    engine_sample,
    entropy,
    gathered,
    pack,
    parameter_grad,
    reference_model,
    rewards,
    right_answer_probability,
    score,
)

#: Where each run draws its prompts and uniforms, and where PPO's value model its weights.
SAMPLING_STREAM, CRITIC_STREAM = 2_402_03300, 1_707_06347
#: An upper clip edge no ratio reaches: the unclipped control (a ratio above it is inf).
UNBOUNDED = sys.float_info.max
#: The right answers' lengths, ``<eos>`` included (3 to 7).
LENGTHS = np.unique(RIGHT_LENGTH)
#: PPO's GAE lambda (gamma is 1) and the beta of its KL penalty in the reward (TRL's defaults).
PPO_LAMBDA, PPO_KL_COEF = 0.95, 0.05


@dataclass(frozen=True)
class Method:
    """A trainer as data: an objective of :mod:`llm_clip` with its clip range (None: the
    module's default) and its advantages: ``"group"`` (GRPO's, over the group's std),
    ``"group_mean"`` (Dr. GRPO's, the mean only) or ``"gae"`` (PPO's, with a value model)."""

    key: str
    label: str
    objective: str
    eps_low: float | None = None
    eps_high: float | None = None
    advantages: str = "group"


#: The methods of the study, in the order of legends and tables.
METHODS = {
    method.key: method
    for method in (
        Method("grpo", "GRPO", "grpo"),
        Method("unclipped", "unclipped (r·A)", "grpo", eps_low=1.0, eps_high=UNBOUNDED),
        Method("ppo", "PPO (KL in reward)", "ppo", advantages="gae"),
        Method("dr_grpo", "Dr. GRPO", "dr_grpo", advantages="group_mean"),
        Method("dapo", "DAPO (ε_high 0.28)", "dapo"),
        Method("dapo_sym", "DAPO, ε_high 0.2", "dapo", eps_high=0.2),
        Method("gspo", "GSPO", "gspo", eps_low=3e-4, eps_high=4e-4),
        Method("cispo", "CISPO", "cispo", eps_low=1.0, eps_high=0.2),
        # controls, each one change from a method above (issue 44): GSPO's band on GRPO's
        # token ratios, GRPO's band on GSPO's sequence ratio, Dr. GRPO's two changes apart
        Method("grpo_tight", "GRPO, ε 0.02", "grpo", eps_low=0.02, eps_high=0.02),
        Method("gspo_wide", "GSPO, ε 0.2", "gspo", eps_low=0.2, eps_high=0.2),
        Method("dr_grpo_agg", "Dr. GRPO's aggregation only", "dr_grpo"),
        Method("grpo_mean", "GRPO, no std division", "grpo", advantages="group_mean"),
    )
}

#: The range of each setting: (low, high, whole number?).
SETTING_RANGES = {
    "iterations": (1, 1000, True),
    "prompts_per_batch": (1, len(PROMPTS), True),
    "group_size": (2, 64, True),
    "updates": (1, 64, True),
    "learning_rate": (1e-6, 1.0, False),
    "kl_coef": (0.0, 10.0, False),
}


@dataclass(frozen=True)
class TrainSettings:
    """A training run's settings; a ``TypeError`` or ``ValueError`` naming a bad one.

    ``updates`` is mu, the Adam steps on each batch; ``kl_coef`` is beta, the weight of k3 to
    the reference in the loss of every method but PPO (whose KL is in its reward, beta
    :data:`PPO_KL_COEF`).
    """

    iterations: int = 40
    prompts_per_batch: int = 4
    group_size: int = 8
    updates: int = 4
    learning_rate: float = 3e-3
    kl_coef: float = 0.0

    def __post_init__(self) -> None:
        checked_fields(self, SETTING_RANGES)

    @property
    def batch_size(self) -> int:
        """Responses per batch: prompts times the group size."""
        return self.prompts_per_batch * self.group_size


@dataclass
class History:
    """One method's runs, per seed (rows) and iteration (columns): the batch's mean reward,
    its mean length (tokens, ``<eos>`` included) and mean *excess* length (length minus the
    right response's, so that which prompts were drawn does not move it), the number of wrong
    responses and the sum of their excess lengths, the policy's mean entropy per response
    token, and the share of tokens clipped with A < 0 (``clip_low``) and with A > 0
    (``clip_high``) over the mu updates (``TokenBreakdown.is_clipped``: for GSPO every token of
    a clipped response; for CISPO the tokens whose weight was capped, their gradient kept, on
    either side of the band whatever the sign of A); ``score``, the final exact accuracy, the
    mean over every prompt of ``accuracy`` ``(seeds, len(PROMPTS))``, each prompt's;
    ``clip_by_length`` ``(seeds, len(LENGTHS))``: per right-answer length, the share of the
    tokens of responses to such prompts clipped over all updates (NaN where none was drawn)."""

    method: Method
    settings: TrainSettings
    seeds: tuple[int, ...]
    reward: FloatArray = field(repr=False)
    length: FloatArray = field(repr=False)
    excess: FloatArray = field(repr=False)
    wrong: FloatArray = field(repr=False)
    wrong_excess: FloatArray = field(repr=False)
    entropy: FloatArray = field(repr=False)
    clip_low: FloatArray = field(repr=False)
    clip_high: FloatArray = field(repr=False)
    score: FloatArray = field(repr=False)
    accuracy: FloatArray = field(repr=False)
    clip_by_length: FloatArray = field(repr=False)

    @property
    def clip_fraction(self) -> FloatArray:
        """The share of tokens whose clip engaged, on either side."""
        return self.clip_low + self.clip_high

    def curve(self, name: str) -> FloatArray:
        """Per iteration, the mean over seeds of what ``name`` records; for ``wrong_excess``,
        the wrong responses' mean excess length, all seeds pooled (NaN where none was wrong)."""
        if name == "wrong_excess":
            return share(self.wrong_excess.sum(axis=0), self.wrong.sum(axis=0))
        return getattr(self, name).mean(axis=0)

    def per_seed(self) -> dict[str, FloatArray]:
        """The study's measures, per seed: the final exact accuracy (``score``); the mean reward
        over all iterations (``reward_mean``); over the last quarter of the iterations, the mean
        excess length, the wrong responses' mean excess length (pooled over those iterations)
        and the entropy; the mean clip fraction over all updates."""
        late = slice(-max(1, self.settings.iterations // 4), None)
        return {
            "score": self.score,
            "reward_mean": self.reward.mean(axis=1),
            "excess": self.excess[:, late].mean(axis=1),
            "wrong_excess": share(self.wrong_excess[:, late].sum(1), self.wrong[:, late].sum(1)),
            "entropy": self.entropy[:, late].mean(axis=1),
            "clip_fraction": self.clip_fraction.mean(axis=1),
        }


#: What one iteration records per run (the fields of :class:`History` over iterations).
CURVES = tuple(f.name for f in fields(History))[3:-3]


def share(part: FloatArray, whole: FloatArray) -> FloatArray:
    """``part / whole``, NaN where ``whole`` is 0."""
    return np.divide(part, whole, out=np.full(np.shape(whole), np.nan), where=whole > 0)


def train(
    methods: Sequence[Method],
    settings: TrainSettings,
    seeds: Sequence[int],
    rollout: Rollout | None = None,
    *,
    per_seed_reference: bool = False,
    prompts: Sequence[int] | None = None,
) -> dict[str, History]:
    """Train every method on every seed, side by side: each method's :class:`History`.  The
    arguments are :class:`Trainer`'s."""
    trainer = Trainer(
        methods, settings, seeds, rollout, per_seed_reference=per_seed_reference, prompts=prompts
    )
    steps = [trainer.iteration() for _ in range(settings.iterations)]
    per_run = {name: np.array([step[name] for step in steps], dtype=float).T for name in CURVES}
    accuracy = right_answer_probability(trainer.policy)
    per_run |= {"score": accuracy.mean(axis=1), "accuracy": accuracy}
    per_run["clip_by_length"] = share(*trainer.by_length)
    runs = np.split(np.arange(trainer.runs), len(methods))
    return {
        method.key: History(
            method, settings, tuple(seeds), **{k: v[at] for k, v in per_run.items()}
        )
        for method, at in zip(methods, runs, strict=True)
    }


def _checked_inputs(
    methods: object, settings: object, seeds: object, rollout: object, prompts: object
) -> tuple[IntArray, Rollout]:
    """Refuse what would fail deep inside, train twice or lose a result, naming the argument;
    the prompts training draws from (None: every one) and the rollout (None: the defaults)."""
    if not isinstance(settings, TrainSettings):
        raise TypeError(f"settings must be a TrainSettings, got {type(settings).__name__}")
    if not isinstance(rollout, (Rollout, type(None))):
        raise TypeError(f"rollout must be a Rollout or None, got {type(rollout).__name__}")
    pool = np.arange(len(PROMPTS)) if prompts is None else prompts
    for name, values, kind, example, key in (  # key: what makes two of them the same
        ("methods", methods, Method, " of Method, e.g. methods_named(['grpo'])", attrgetter("key")),
        ("seeds", seeds, numbers.Integral, " of whole numbers", int),
        ("prompts", pool, numbers.Integral, " of prompt numbers", int),
    ):
        listed = isinstance(values, (Sequence, np.ndarray)) and not isinstance(values, str | bytes)
        if not listed or not all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
            raise TypeError(f"{name} must be a list{example}, got {values!r}")  # not an iterator
        keys = [key(v) for v in values]
        if not keys:
            raise ValueError(f"{name} is empty: train needs at least one method, seed and prompt")
        twice = [v for i, v in enumerate(keys) if v in keys[:i]]
        if twice:
            raise ValueError(f"{name} lists {twice[0]!r} twice; each must be distinct")
    if min(seeds) < 0:
        raise ValueError(f"seeds must be at least 0 (numpy's seeds), got {min(seeds)}")
    enough, n = settings.prompts_per_batch, len(PROMPTS)
    if len(pool) < enough or not 0 <= min(pool) <= max(pool) < n:
        raise ValueError(f"prompts must be at least {enough} distinct numbers from 0 to {n - 1}")
    rollout = Rollout() if rollout is None else rollout
    if settings.batch_size % rollout.steps_per_generation:
        raise ValueError(
            f"steps_per_generation ({rollout.steps_per_generation}) must divide the batch of "
            f"{settings.batch_size} responses"
        )
    return np.asarray(pool), rollout


class Trainer:
    """Every run's policy and optimizer (runs: each method on each seed), PPO's value models,
    the frozen reference, and one iteration.

    ``methods``: distinct :class:`Method` objects (e.g. ``methods_named(["grpo"])``);
    ``seeds``: distinct whole numbers >= 0.  Anything else is a ``TypeError`` or ``ValueError``
    naming the argument.  ``rollout``: how the batches are generated (:class:`Rollout`; None:
    by the current policy itself, exactly).  ``per_seed_reference``: each seed's runs start from
    (and keep their KL to) ``reference_model(seed)``, distilled with the run's seed, instead of
    the one shared reference; ``prompts``: the indices into :data:`tiny_lm.PROMPTS` training
    draws from (None: all; the others are held out).  Their defaults change nothing.
    """

    def __init__(
        self,
        methods: Sequence[Method],
        settings: TrainSettings,
        seeds: Sequence[int],
        rollout: Rollout | None = None,
        *,
        per_seed_reference: bool = False,
        prompts: Sequence[int] | None = None,
    ) -> None:
        self.pool, self.rollout = _checked_inputs(methods, settings, seeds, rollout, prompts)
        self.methods, self.settings = list(methods), settings
        self.served: list[list[FloatArray]] = []  # the engine's weights, oldest first
        self.run_methods = [m for m in self.methods for _ in seeds]
        self.runs = len(self.run_methods)
        self.by_length = np.zeros((2, self.runs, len(LENGTHS)))  # clipped tokens; all tokens
        self.rngs = [np.random.default_rng([SAMPLING_STREAM, seed]) for seed in seeds]
        # each run's own arrays: the reference of its seed, or the one reference
        shared = [reference_model()] * len(seeds)
        starts = [reference_model(seed) for seed in seeds] if per_seed_reference else shared
        runs = [m.params for _ in self.methods for m in starts]
        self.reference, self.policy = (  # the reference is frozen
            TinyLM([np.concatenate(p) for p in zip(*runs, strict=True)]) for _ in range(2)
        )
        self.optimizer = Adam(self.policy.params)
        self.ppo_runs = np.array([m.advantages == "gae" for m in self.run_methods])
        ppo_seeds = [seed for m in self.methods for seed in seeds if m.advantages == "gae"]
        critic_rngs = [np.random.default_rng([CRITIC_STREAM, seed]) for seed in ppo_seeds]
        self.critic = TinyLM.initial(critic_rngs, outputs=1) if critic_rngs else None
        self.critic_optimizer = Adam(self.critic.params) if self.critic else None

    def draw(self) -> tuple[IntArray, FloatArray]:
        """Each seed's prompts (each repeated for its group) and uniforms, for every method."""
        s = self.settings
        prompts, uniforms = [], []
        for rng in self.rngs:
            chosen = self.pool[rng.choice(len(self.pool), size=s.prompts_per_batch, replace=False)]
            prompts.append(np.repeat(chosen, s.group_size))
            uniforms.append(rng.random((s.batch_size, MAX_LEN)))
        copies = len(self.methods)
        return np.tile(np.array(prompts), (copies, 1)), np.tile(np.array(uniforms), (copies, 1, 1))

    def generate(self) -> tuple[Responses, TinyLM]:
        """A batch sampled by the rollout's engine from the policy ``stale`` iterations old
        (the oldest kept, early on), and that policy."""
        sampler = self.policy
        if self.rollout.stale:
            self.served = [*self.served, [p.copy() for p in self.policy.params]]
            self.served = self.served[-(self.rollout.stale + 1) :]
            sampler = TinyLM(self.served[0])
        return engine_sample(sampler, *self.draw(), self.rollout.engine), sampler

    def iteration(self) -> dict[str, FloatArray]:
        """Sample a batch, score it, take the mu updates; what :class:`History` keeps of it."""
        s = self.settings
        responses, sampler = self.generate()
        reward, right, _ = rewards(responses)
        batch = pack(responses)
        old = score(self.policy, batch)
        ref = score(self.reference, batch)
        advantages = self.advantages(responses, reward, old, ref)
        clip_low, clip_high = np.zeros(self.runs), np.zeros(self.runs)
        tokens = responses.mask.sum(axis=(1, 2))
        logp_rollout = None  # the engine's log-probabilities, where a correction needs them
        if self.rollout.correction is not None:
            logp_rollout = engine_logp(sampler, batch, self.rollout.engine)
        new = old  # at the first update the policy is the old one: the same numbers
        steps = [rows for _ in range(s.updates) for rows in self.rollout.minibatches(s.batch_size)]
        for step, rows in enumerate(steps):
            if step:
                new = score(self.policy, batch)
            dloss_dlogp = np.zeros_like(new.logp)
            arrays = (new.logp, old.logp, advantages, responses.mask, ref.logp)
            for run, method in enumerate(self.run_methods):
                *run_batch, logp_ref = (a[run, rows] for a in arrays)  # (new, old, A, mask)
                adv, mask = run_batch[2:]
                engine = None if logp_rollout is None else logp_rollout[run, rows]
                group = method.advantages != "gae"  # one advantage per response: OPSM applies
                corrected = self.rollout.corrected(run_batch, engine, group)
                kl_coef = self.settings.kl_coef if group else 0.0  # PPO's KL is in its reward
                b = llm_clip.token_breakdown(
                    *run_batch,
                    objective=method.objective,
                    eps_low=method.eps_low,
                    eps_high=method.eps_high,
                    max_len=MAX_LEN,
                    logp_ref=logp_ref if kl_coef else None,
                    kl_coef=kl_coef,
                    **corrected,
                )
                dloss_dlogp[run, rows] = b.grad
                clip_low[run] += (b.is_clipped & (adv < 0)).sum()
                clip_high[run] += (b.is_clipped & (adv > 0)).sum()
                at = np.searchsorted(LENGTHS, RIGHT_LENGTH[responses.prompts[run, rows]])
                for i, per_response in enumerate((b.is_clipped & mask, mask)):
                    np.add.at(self.by_length[i, run], at, per_response.sum(axis=1))
            grads = parameter_grad(self.policy, new, dloss_dlogp)
            self.optimizer.step(grads, s.learning_rate)
        wrong = ~right
        excess = responses.lengths - RIGHT_LENGTH[responses.prompts]
        return {
            "reward": reward.mean(axis=1),
            "length": responses.lengths.mean(axis=1),
            "excess": excess.mean(axis=1),
            "wrong": wrong.sum(axis=1),
            "wrong_excess": np.where(wrong, excess, 0).sum(axis=1),
            "entropy": batch.mean(entropy(old.log_probs)),
            "clip_low": clip_low / (tokens * s.updates),
            "clip_high": clip_high / (tokens * s.updates),
        }

    def advantages(
        self, responses: Responses, reward: FloatArray, old: Scored, ref: Scored
    ) -> FloatArray:
        """Each run's advantage of every token ``(runs, B, MAX_LEN)``: its response's, for the
        group methods, or PPO's own (:meth:`ppo_advantages`); 0 on padding."""
        g = self.settings.group_size
        out = np.zeros(responses.tokens.shape)
        for run, method in enumerate(self.run_methods):
            if method.advantages != "gae":
                scaled = method.advantages == "group"
                per_response = llm_clip.group_advantages(reward[run], g, scale_by_std=scaled)
                out[run] = np.where(responses.mask[run], per_response[:, None], 0.0)
        if self.critic is not None:
            ppo = self.ppo_runs
            kl = old.logp[ppo] - ref.logp[ppo]  # k1 of each token, as TRL's default estimator
            ppo_responses = Responses(*(a[ppo] for a in vars(responses).values()))
            out[ppo] = self.ppo_advantages(ppo_responses, reward[ppo], kl)
        return out

    def ppo_advantages(
        self, responses: Responses, reward: FloatArray, kl: FloatArray
    ) -> FloatArray:
        """PPO's token advantages: token rewards ``-beta * kl``, plus the score at the last
        token; GAE(lambda) with gamma 1 on the value model's values (0 after the end), whitened
        per run over the response tokens.  Then the value model is fitted (:meth:`fit_critic`)."""
        mask = responses.mask
        last = mask & ~np.concatenate([mask[..., 1:], np.zeros_like(mask[..., :1])], axis=-1)
        token_reward = np.where(mask, -PPO_KL_COEF * kl, 0.0) + np.where(last, reward[..., None], 0)
        batch = pack(responses)
        values = batch.unpacked(self.critic.forward(batch.x)[0][..., 0])  # 0 on padding
        # GAE with gamma 1 over each response's tokens (TRL L787-795), time first for gae: V and
        # r are 0 on padding, so nothing is carried past a response's end
        tokens = [a.reshape(-1, MAX_LEN).T for a in (token_reward, values)]
        no_starts = np.zeros_like(tokens[0])
        raw, returns = (
            a.T.reshape(values.shape)
            for a in llm_clip.gae(*tokens, no_starts, 0.0, False, gamma=1.0, lam=PPO_LAMBDA)
        )
        self.fit_critic(batch, returns)
        n = mask.sum(axis=(1, 2), keepdims=True)
        mean = np.where(mask, raw, 0.0).sum(axis=(1, 2), keepdims=True) / n
        var = np.where(mask, (raw - mean) ** 2, 0.0).sum(axis=(1, 2), keepdims=True) / (n - 1)
        return np.where(mask, (raw - mean) / np.sqrt(var + 1e-8), 0.0)

    def fit_critic(self, batch: Packed, returns: FloatArray) -> None:
        """mu Adam steps of the value model on ``0.5 * mean((V - return)^2)`` over tokens."""
        n = batch.valid.sum(axis=1, keepdims=True)
        for _ in range(self.settings.updates):
            values, cache = self.critic.forward(batch.x)
            d_rows = np.where(batch.valid, values[..., 0] - gathered(returns, batch.rows), 0.0) / n
            grads = self.critic.backward(cache, d_rows[..., None])
            self.critic_optimizer.step(grads, self.settings.learning_rate)


def methods_named(keys: Sequence[str]) -> list[Method]:
    """The methods named ``keys``; a ``ValueError`` naming an unknown one and the valid ones."""
    if isinstance(keys, str):  # its letters are not method names
        raise TypeError(f"keys must be a list of method names, e.g. [{keys!r}], got a str")
    unknown = [key for key in keys if key not in METHODS]
    if unknown:
        raise ValueError(f"no method is named {unknown[0]!r}; choose from {', '.join(METHODS)}")
    return [METHODS[key] for key in keys]


# --------------------------------------------------------------------------
# Batches from an inference engine (issue 45): ratios that are not 1
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Correction:
    """What the trainer does about the engine: TRL 1.16's importance weights
    (:func:`llm_clip.rollout_weights`; ``mode`` None: none) and DeepSeek-V3.2's off-policy
    sequence masking at threshold ``opsm`` (:func:`llm_clip.off_policy_keep`; None: off; for
    the group methods, whose advantage is one per response).  The defaults are TRL's; bounds
    other than them without a mode are refused, as they would do nothing."""

    mode: str | None = "sequence_mask"
    clip_min: float | None = None
    clip_max: float | None = 3.0
    opsm: float | None = None

    def __post_init__(self) -> None:
        if self.mode is not None:  # rollout_weights' own checks, naming the bad field
            checked_choice("mode", self.mode, ROLLOUT_MODES)
        checked_bounds(self.clip_min, self.clip_max)  # whatever the mode
        if self.mode is None and (self.clip_min, self.clip_max) != (None, 3.0):
            raise ValueError("clip_min and clip_max bound a mode's weights: give a mode too")
        if self.opsm is not None:  # off_policy_keep's check of its threshold, under this name
            checked_real("opsm", self.opsm)


@dataclass(frozen=True)
class Rollout:
    """How a batch is generated and used: sampled by ``engine`` (:class:`tiny_lm.Engine`)
    from the policy ``stale`` iterations old (an asynchronous trainer), split into
    ``steps_per_generation`` minibatches of responses, one Adam step each (per update), and
    corrected by ``correction`` (None: not at all).  The defaults reproduce the trainer without
    an engine to the bit.  With several steps per generation the ratio is not 1 at mu = 1 from
    the second step on, and the clip can engage (the module's "never" holds for one step)."""

    engine: Engine = field(default_factory=Engine)
    stale: int = 0
    steps_per_generation: int = 1
    correction: Correction | None = None

    def __post_init__(self) -> None:
        checked_fields(self, {"stale": (0, 64, True), "steps_per_generation": (1, 64, True)})
        if not isinstance(self.engine, Engine):
            raise TypeError(f"engine must be an Engine, got {type(self.engine).__name__}")
        if not isinstance(self.correction, (Correction, type(None))):
            raise TypeError(f"correction must be a Correction or None, got {self.correction!r}")

    def minibatches(self, batch_size: int) -> list[slice]:
        """The responses of each optimizer step on one batch."""
        size = batch_size // self.steps_per_generation
        return [slice(i * size, (i + 1) * size) for i in range(self.steps_per_generation)]

    def corrected(
        self, batch: Sequence[np.ndarray], logp_rollout: FloatArray | None, per_response: bool
    ) -> dict[str, np.ndarray]:
        """``rollout_weights``/``keep`` of one run's minibatch ``batch`` (``logp_new``,
        ``logp_old``, the advantages and the mask) for :func:`llm_clip.token_breakdown` (TRL:
        weights from the batch's ``logp_old``, OPSM's mask from the current ``logp_new``; no
        OPSM unless the advantages are ``per_response``, so not for PPO's)."""
        c, out = self.correction, {}
        if c is None or logp_rollout is None:
            return out
        logp_new, logp_old, advantages, mask = batch
        if c.mode is not None:
            out["rollout_weights"] = llm_clip.rollout_weights(
                logp_old, logp_rollout, mask, mode=c.mode, clip_min=c.clip_min, clip_max=c.clip_max
            )
        if c.opsm is not None and per_response:
            out["keep"] = llm_clip.off_policy_keep(
                logp_new, logp_rollout, advantages, mask, threshold=c.opsm
            )
        return out
