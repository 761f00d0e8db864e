"""What an engine's mismatch does to one batch and to the gradient, measured (issue 45).

Every number comes from :mod:`tiny_lm` (the engine, the scores), :mod:`tiny_rlhf` (the
trainer, for a policy ``k`` iterations ahead of the engine's) and :mod:`llm_clip` (ratios,
clip decisions, rollout weights, OPSM, gradients); the study and notebook 9 call these.

* :func:`mismatch_batch`: ``runs`` batches (a GRPO batch each: 4 prompts, groups of 8) sampled
  by an engine from the *served* policy, scored by the trainer's current policy (``logp_old``,
  TRL's recomputation) and by the engine (``logp_rollout``);
* :func:`ratio_at_mu1`: the ratio ``pi_trainer / pi_engine`` a trainer that takes the engine's
  log-probabilities as ``logp_old`` (verl's bypass mode) sees at mu = 1, and the share clipped;
* :func:`corrections`: each correction's weights and kept responses on a batch;
* :func:`gradient_bias`: how far the gradient of a batch from the engine lies from the one of
  the same draws from the trainer's own policy, relative to its norm, with its noise floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

import llm_clip
from tiny_lm import (
    MAX_LEN,
    PROMPTS,
    Engine,
    FloatArray,
    Responses,
    Scored,
    TinyLM,
    engine_logp,
    engine_sample,
    pack,
    parameter_grad,
    rewards,
    score,
)
from tiny_rlhf import Correction, Rollout, Trainer, TrainSettings, methods_named

#: A GRPO batch: prompts, responses per prompt; the seed stream of the measurements.
PROMPTS_PER_BATCH, GROUP = 4, 8
STREAM = 45_2025
#: The corrections compared: TRL's four modes (its bounds: none below, 3 above) and OPSM.
MODES = llm_clip.ROLLOUT_MODES
CORRECTIONS = ("none", *MODES, "opsm")
CLIP_MAX = 3.0
#: OPSM's threshold on a response's mean gap (chosen for this model: its gaps are small).
OPSM_THRESHOLD = 0.02
#: Each source of mismatch and its sizes, the first "off" (:class:`tiny_rlhf.Rollout`).
SOURCES = {
    "bits": (None, 10, 8, 7, 6),
    "top_p": (1.0, 0.99, 0.95, 0.9, 0.8),
    "stale": (0, 1, 2, 4, 8),
    "steps_per_generation": (1, 2, 4, 8),
}
#: The learning rate of the GRPO run whose policies serve as "k iterations ahead".
AHEAD_LEARNING_RATE, MAX_STALE = 1e-2, 8


@dataclass(frozen=True)
class MismatchBatch:
    """``runs`` batches: the responses, GRPO's advantage per response ``(runs, B)``, the
    trainer's scores (``trainer``, with ``logp`` = ``logp_old``), the engine's
    ``logp_rollout`` ``(runs, B, MAX_LEN)`` and the trainer's ``model`` (``runs`` copies)."""

    responses: Responses
    advantages: FloatArray
    trainer: Scored
    logp_rollout: FloatArray
    model: TinyLM

    @property
    def logp_old(self) -> FloatArray:
        return self.trainer.logp

    @property
    def mask(self) -> np.ndarray:
        return self.responses.mask


@cache
def policies_ahead(seed: int = 0) -> tuple[TinyLM, ...]:
    """The policy of a GRPO run (mu = 1) after 0, 1, ..., :data:`MAX_STALE` iterations from the
    reference: entry ``k`` is the trainer's while the engine still serves entry 0."""
    settings = TrainSettings(updates=1, learning_rate=AHEAD_LEARNING_RATE)
    trainer = Trainer(methods_named(["grpo"]), settings, [seed])
    kept = [TinyLM([p.copy() for p in trainer.policy.params])]
    for _ in range(MAX_STALE):
        trainer.iteration()
        kept.append(TinyLM([p.copy() for p in trainer.policy.params]))
    return tuple(kept)


def mismatch_batch(
    engine: Engine, runs: int, seed: int, stale: int = 0, trainer_policy: TinyLM | None = None
) -> MismatchBatch:
    """``runs`` batches sampled by ``engine`` from the policy ``stale`` iterations behind the
    trainer's (:func:`policies_ahead`: the reference serves; stale 0: the reference trains), or
    from ``trainer_policy`` when given (it trains and serves)."""
    policies = policies_ahead()
    current, served = policies[stale], policies[0]
    if trainer_policy is not None:
        current = served = trainer_policy
    rng = np.random.default_rng([STREAM, seed])
    draws = [rng.choice(len(PROMPTS), PROMPTS_PER_BATCH, replace=False) for _ in range(runs)]
    prompts = np.repeat(np.stack(draws), GROUP, axis=1)
    uniforms = rng.random((runs, prompts.shape[1], MAX_LEN))
    responses = engine_sample(served.repeated(runs), prompts, uniforms, engine)
    reward = rewards(responses)[0]
    advantages = np.stack([llm_clip.group_advantages(r, GROUP) for r in reward])
    batch = pack(responses)
    model = current.repeated(runs)
    logp_rollout = engine_logp(served.repeated(runs), batch, engine)
    return MismatchBatch(responses, advantages, score(model, batch), logp_rollout, model)


def gaps(batch: MismatchBatch) -> FloatArray:
    """``logp_old - logp_rollout`` of every response token (trainer minus engine)."""
    return (batch.logp_old - batch.logp_rollout)[batch.mask]


def ratio_at_mu1(batch: MismatchBatch) -> dict[str, float]:
    """At mu = 1 with the engine's log-probabilities as ``logp_old``: GRPO's ratio
    ``exp(logp_old - logp_rollout)`` per token and the shares :mod:`llm_clip` counts: tokens
    whose clip switches the gradient off (``clipped``), and verl's ``pg_clipfrac``."""
    clipped, verl, tokens = 0.0, 0.0, 0
    for run in range(len(batch.mask)):
        args = (
            batch.logp_old[run],
            batch.logp_rollout[run],
            batch.advantages[run],
            batch.mask[run],
        )
        b = llm_clip.token_breakdown(*args, objective="grpo")
        clipped += b.is_clipped.sum()
        n = batch.mask[run].sum()
        verl += llm_clip.clip_fraction_verl(*args)["actor/pg_clipfrac"] * n
        tokens += n
    return {"clipped": clipped / tokens, "verl": verl / tokens}


def corrections(batch: MismatchBatch, run: int) -> dict[str, dict[str, np.ndarray | None]]:
    """Per correction of :data:`CORRECTIONS`, batch ``run``'s ``rollout_weights`` and ``keep``
    for :func:`llm_clip.token_breakdown` (at mu = 1 OPSM compares ``logp_old``)."""
    old, engine, mask = batch.logp_old[run], batch.logp_rollout[run], batch.mask[run]
    out: dict[str, dict[str, np.ndarray | None]] = {"none": {}}
    for mode in MODES:
        w = llm_clip.rollout_weights(old, engine, mask, mode=mode, clip_max=CLIP_MAX)
        out[mode] = {"rollout_weights": w}
    keep = llm_clip.off_policy_keep(
        old, engine, batch.advantages[run], mask, threshold=OPSM_THRESHOLD
    )
    out["opsm"] = {"keep": keep}
    return out


def gradients(batch: MismatchBatch) -> dict[str, FloatArray]:
    """Per correction, each batch's GRPO parameter gradient at mu = 1, flattened ``(runs, P)``
    (TRL's loss: the ratio against the trainer's own ``logp_old`` is 1, so only the weights and
    OPSM change it)."""
    dloss = {name: np.zeros(batch.logp_old.shape) for name in CORRECTIONS}
    for run in range(len(batch.mask)):
        args = (batch.logp_old[run], batch.logp_old[run], batch.advantages[run], batch.mask[run])
        for name, extra in corrections(batch, run).items():
            dloss[name][run] = llm_clip.token_breakdown(*args, objective="grpo", **extra).grad
    return {name: _flat(parameter_grad(batch.model, batch.trainer, d)) for name, d in dloss.items()}


def _flat(grads: list[FloatArray]) -> FloatArray:
    return np.concatenate([g.reshape(len(g), -1) for g in grads], axis=1)


def gradient_bias(grads: FloatArray, reference: FloatArray) -> dict[str, float]:
    """How far the mean of ``grads`` ``(N, P)`` lies from the mean of ``reference`` (the same
    draws on-policy), relative to the reference's norm: ``bias = |mean(D)| / |mean(g_on)|``
    with ``D`` the per-batch differences, and ``floor = sqrt(sum var(D) / N) / |mean(g_on)|``,
    the size that noise alone gives it (Monte Carlo standard error of the difference's norm)."""
    d = grads - reference
    norm = float(np.linalg.norm(reference.mean(axis=0)))
    floor = float(np.sqrt(d.var(axis=0, ddof=1).sum() / len(d)))
    return {
        "bias": float(np.linalg.norm(d.mean(axis=0))) / norm,
        "floor": floor / norm,
        "batches": len(d),
    }


def bias_by_correction(
    engine: Engine, runs: int, seed: int, stale: int = 0
) -> dict[str, dict[str, float]]:
    """Per correction, :func:`gradient_bias` of ``runs`` batches from ``engine`` (and ``stale``)
    against the same draws from the trainer's own policy; ``"control"``: two on-policy sets of
    independent draws (its bias is noise only, the floor's size)."""
    current = policies_ahead()[stale]
    on = gradients(mismatch_batch(Engine(), runs, seed, trainer_policy=current))["none"]
    off = gradients(mismatch_batch(engine, runs, seed, stale))
    out = {name: gradient_bias(g, on) for name, g in off.items()}
    other = gradients(mismatch_batch(Engine(), runs, seed + 1, trainer_policy=current))["none"]
    out["control"] = gradient_bias(other, on)
    return out


def rollout_at(source: str, size: object, correction: str = "none") -> Rollout:
    """The :class:`tiny_rlhf.Rollout` of one of :data:`SOURCES` at ``size`` (the others off),
    with a correction of :data:`CORRECTIONS` by name (TRL's bounds, OPSM at its threshold)."""
    if source not in SOURCES or correction not in CORRECTIONS:
        raise ValueError(f"no source {source!r} or correction {correction!r}; see SOURCES")
    fixed = None
    if correction == "opsm":
        fixed = Correction(mode=None, opsm=OPSM_THRESHOLD)
    elif correction != "none":
        fixed = Correction(mode=correction, clip_max=CLIP_MAX)
    engine = Engine(**{source: size}) if source in ("bits", "top_p") else Engine()
    stale = size if source == "stale" else 0
    steps = size if source == "steps_per_generation" else 1
    return Rollout(engine, stale, steps, fixed)  # type: ignore[arg-type]
