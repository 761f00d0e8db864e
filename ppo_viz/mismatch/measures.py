"""What an engine's mismatch does to a batch and to the gradient, measured (issue 45); the study
and notebook 9 call these.  Every number comes from :mod:`tiny_lm` (the engine, the scores),
:mod:`tiny_rlhf` (the trainer: a policy ``k`` iterations ahead of the engine's) and
:mod:`llm_clip` (ratios, clip decisions, rollout weights, OPSM, gradients).

:func:`mismatch_batch` samples GRPO batches with an engine and scores them by the trainer
(``logp_old``) and the engine (``logp_rollout``); :func:`gaps`, :func:`ratio_at_mu1` and
:func:`corrections` read them; :func:`bias_by_correction` measures the gradient's bias.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import llm_clip
import tiny_lm as lm
from tiny_lm import Engine, FloatArray, TinyLM
from tiny_rlhf import Correction, Rollout, Trainer, TrainSettings, methods_named

#: A GRPO batch: prompts, responses per prompt; the seed stream of the measurements.
PROMPTS_PER_BATCH, GROUP, STREAM = 4, 8, 45_2025
#: The corrections compared: TRL's four modes (its bounds: none below, 3 above) and OPSM.
MODES = llm_clip.ROLLOUT_MODES
#: The corrections, and a control: every negative-advantage response dropped whatever its gap
#: (OPSM at a threshold no mean gap reaches), which OPSM becomes where every gap passes its own.
CORRECTIONS, CLIP_MAX = ("none", *MODES, "opsm", "negatives_dropped"), 3.0
NEVER = -1e308  #: a threshold below every mean gap
#: OPSM's threshold on a response's mean gap (chosen for this model: its gaps are small).
OPSM_THRESHOLD = 0.02
#: Each source of mismatch and its sizes, the first "off" (:class:`tiny_rlhf.Rollout`).
SOURCES = {"bits": (None, 10, 8, 7, 6), "top_p": (1.0, 0.99, 0.95, 0.9, 0.8)}
SOURCES |= {"stale": (0, 1, 2, 4, 8), "steps_per_generation": (1, 2, 4, 8)}
#: The learning rate and seed of the one GRPO run whose policies serve as "k iterations ahead".
AHEAD_LEARNING_RATE, AHEAD_SEED, MAX_STALE = 1e-2, 0, 8


@dataclass(frozen=True)
class MismatchBatch:
    """``runs`` batches: responses, advantages, the trainer's scores, the engine's logp, model."""

    responses: lm.Responses
    advantages: FloatArray
    trainer: lm.Scored
    logp_rollout: FloatArray
    model: TinyLM

    @property
    def logp_old(self) -> FloatArray:
        return self.trainer.logp

    @property
    def mask(self) -> np.ndarray:
        return self.responses.mask


@cache
def policies_ahead(seed: int = AHEAD_SEED) -> tuple[TinyLM, ...]:
    """A GRPO run's policy (mu = 1) after 0 to :data:`MAX_STALE` iterations from the reference."""
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
    """``runs`` batches sampled by ``engine`` from the reference while the trainer is ``stale``
    iterations ahead (:func:`policies_ahead`), or from ``trainer_policy``, which then trains."""
    policies = policies_ahead()
    current, served = policies[stale], policies[0]
    if trainer_policy is not None:
        current = served = trainer_policy
    rng = np.random.default_rng([STREAM, seed])
    draws = [rng.choice(len(lm.PROMPTS), PROMPTS_PER_BATCH, replace=False) for _ in range(runs)]
    prompts = np.repeat(np.stack(draws), GROUP, axis=1)
    uniforms = rng.random((runs, prompts.shape[1], lm.MAX_LEN))
    responses = lm.engine_sample(served.repeated(runs), prompts, uniforms, engine)
    reward = lm.rewards(responses)[0]
    advantages = np.stack([llm_clip.group_advantages(r, GROUP) for r in reward])
    batch = lm.pack(responses)
    model = current.repeated(runs)
    logp_rollout = lm.engine_logp(served.repeated(runs), batch, engine)
    return MismatchBatch(responses, advantages, lm.score(model, batch), logp_rollout, model)


def gaps(batch: MismatchBatch) -> FloatArray:
    """``logp_old - logp_rollout`` of every response token."""
    return (batch.logp_old - batch.logp_rollout)[batch.mask]


def ratio_at_mu1(batch: MismatchBatch) -> dict[str, float]:
    """At mu = 1 with the engine's log-probabilities as ``logp_old`` (verl's bypass mode), the
    share of tokens GRPO's clip switches off (``clipped``: llm_clip's ``is_clipped``, as verl and
    TRL count) and of tokens outside the band whatever their A (``outside``: CleanRL's)."""
    clipped = outside = 0.0
    arrays = (batch.logp_old, batch.logp_rollout, batch.advantages, batch.mask)
    for old, engine, a, m in zip(*arrays, strict=True):
        clipped += llm_clip.token_breakdown(old, engine, a, m, objective="grpo").is_clipped.sum()
        outside += llm_clip.clip_fraction_cleanrl(old, engine, m)["losses/clipfrac"] * m.sum()
    n = batch.mask.sum()
    return {"clipped": float(clipped / n), "outside": float(outside / n)}


def corrections(batch: MismatchBatch, run: int) -> dict[str, dict[str, np.ndarray]]:
    """Per correction of :data:`CORRECTIONS`, batch ``run``'s ``rollout_weights`` and ``keep``
    for :func:`llm_clip.token_breakdown`, made as the study's trainer makes them
    (:func:`rollout_at`, :meth:`tiny_rlhf.Rollout.corrected`; at mu = 1 OPSM compares
    ``logp_old``)."""
    old, engine = batch.logp_old[run], batch.logp_rollout[run]
    args = (old, old, batch.advantages[run], batch.mask[run])
    return {c: rollout_at("stale", 0, c).corrected(args, engine, True) for c in CORRECTIONS}


def gradients(batch: MismatchBatch) -> dict[str, FloatArray]:
    """Per correction, each batch's GRPO parameter gradient at mu = 1, flattened ``(runs, P)``
    (TRL's loss: the ratio to its own ``logp_old`` is 1; only the weights and OPSM act)."""
    dloss = {name: np.zeros(batch.logp_old.shape) for name in CORRECTIONS}
    for run in range(len(batch.mask)):
        args = (batch.logp_old[run], batch.logp_old[run], batch.advantages[run], batch.mask[run])
        for name, extra in corrections(batch, run).items():
            dloss[name][run] = llm_clip.token_breakdown(*args, objective="grpo", **extra).grad
    grads = {n: lm.parameter_grad(batch.model, batch.trainer, d) for n, d in dloss.items()}
    return {n: np.concatenate([g.reshape(len(g), -1) for g in gs], 1) for n, gs in grads.items()}


def gradient_bias(grads: FloatArray, reference: FloatArray) -> dict[str, float]:
    """How far the mean of ``grads`` ``(N, P)`` lies from the mean of ``reference`` (the same
    draws on-policy), relative to the reference's norm: ``bias = |mean(D)| / |mean(g_on)|``
    with ``D`` the per-batch differences, and ``floor = sqrt(sum var(D) / N) / |mean(g_on)|``,
    the size that noise alone gives it (Monte Carlo standard error of the difference's norm)."""
    d = grads - reference
    norm = float(np.linalg.norm(reference.mean(axis=0)))
    floor = float(np.sqrt(d.var(axis=0, ddof=1).sum() / len(d)))
    bias = float(np.linalg.norm(d.mean(axis=0))) / norm
    return {"bias": bias, "floor": floor / norm, "batches": len(d)}


def bias_by_correction(engine: Engine, runs: int, seed: int, stale: int = 0) -> dict[str, Any]:
    """Per correction, :func:`gradient_bias` of ``runs`` batches from ``engine`` (and ``stale``)
    against the same draws from the trainer's own policy; ``"control"``: two on-policy sets of
    independent draws (its bias is noise only, the floor's size)."""
    current = policies_ahead()[stale]
    on = gradients(mismatch_batch(Engine(), runs, seed, trainer_policy=current))["none"]
    off = gradients(mismatch_batch(engine, runs, seed, stale))
    other = gradients(mismatch_batch(Engine(), runs, seed + 1, trainer_policy=current))["none"]
    return {n: gradient_bias(g, on) for n, g in off.items()} | {"control": gradient_bias(other, on)}


def rollout_at(source: str, size: object, correction: str = "none") -> Rollout:
    """The :class:`tiny_rlhf.Rollout` of one of :data:`SOURCES` at ``size`` (the others off),
    with a correction of :data:`CORRECTIONS` by name (TRL's bounds, OPSM at its threshold)."""
    if source not in SOURCES or correction not in CORRECTIONS:
        raise ValueError(f"no source {source!r} or correction {correction!r}; see SOURCES")
    named = {"none": None, "opsm": Correction(mode=None, opsm=OPSM_THRESHOLD)}
    named["negatives_dropped"] = Correction(mode=None, opsm=NEVER)
    fixed = named[correction] if correction in named else Correction(correction, clip_max=CLIP_MAX)
    engine = Engine(**{source: size}) if source in ("bits", "top_p") else Engine()
    counts = {k: size if k == source else v for k, v in (("stale", 0), ("steps_per_generation", 1))}
    return Rollout(engine, correction=fixed, **counts)  # type: ignore[arg-type]
