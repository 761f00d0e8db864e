"""Notebook 9's exercise: GRPO's loss with the rollout engine's corrections, as TRL applies them.

:func:`check_corrected_loss` is the same check as the others (:func:`.run_check`) on this
module's :func:`battery`.  The learner writes::

    corrected_loss(logp_new, logp_old, logp_rollout, advantages, mask, logp_ref,
                   *, mode, clip_max, threshold, beta)

GRPO's loss (each answer's mean over its tokens, then the mean over answers; eps 0.2) whose
token terms are multiplied by TRL's importance weights (``mode``, ``clip_max``, no lower bound)
and by OPSM's keep (``threshold``), with ``beta`` times k3 to the reference added, weighted by
neither: TRL with ``use_bias_correction_kl=False`` (its default, True, multiplies the KL by the
trainer's own ratio, ``grpo_trainer.py`` 1.16.0 L3104-3105).
Every answer is compared with :func:`llm_clip.policy_loss` given :func:`llm_clip.rollout_weights`
and :func:`llm_clip.off_policy_keep`; each mistake of :data:`EXPLANATIONS` is those functions on
changed inputs (:func:`corrected_answer`).  Every batch holds finite values on its padding, so
a padding counted shows in the answer.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ppo_viz.exercises.advice import EXERCISES, Exercise, float32_like
from ppo_viz.exercises.battery import ExerciseBatch, in_float32, llm_reference
from ppo_viz.exercises.checker import CheckResult, run_check
from ppo_viz.exercises.sandbox import TIME_LIMIT_S, Function

_GAP = "d = logp_old - logp_rollout on the answer's own tokens (trainer over engine)"
#: Every mistake the check names: its title (unless :data:`.advice.TITLES` has it) and what the
#: learner reads.
TITLES = {
    "ratio_inverted": "Importance ratio inverted (engine over trainer)",
    "mode_confused": "Masked where truncating was asked (or the reverse)",
    "padding_counted": "Padding counted in the weights or in OPSM's mean",
    "opsm_sum": "OPSM with the sum of the gaps, not their mean",
    "opsm_sign": "OPSM's gap with the wrong sign",
    "sequence_mean": "Sequence weight from the mean of the gaps, not their sum",
    "kl_weighted": "The KL term weighted too",
}
#: What the learner reads about each mistake.
EXPLANATIONS = {
    "ratio_inverted": f"The weight corrects for sampling from the engine, so it is the trainer's "
    f"probability over the engine's: exp(d) with {_GAP}.",
    "mode_confused": "A *_truncate mode clamps each weight to clip_max (np.minimum(w, clip_max)); "
    "a *_mask mode sets every weight above clip_max to 0 and keeps the others as they are.",
    "padding_counted": "Padding holds finite numbers that belong to no answer: use "
    "np.where(mask, d, 0.0) before a sum, and divide OPSM's sum by the answer's own token count, "
    "mask.sum(axis=1).",
    "opsm_sum": "OPSM compares the *mean* over the answer's tokens of logp_rollout - logp_new "
    "with the threshold (TRL's get_off_policy_mask); the sequence weight is the one that takes "
    "the sum, exp(sum_t d).",
    "opsm_sign": "OPSM's gap estimates KL(engine || current policy): logp_rollout - logp_new, "
    "positive where the current policy finds the answer less likely than the engine did.",
    "sequence_mean": "A sequence_* weight is the product of the token ratios, exp(sum_t d) over "
    "the answer's tokens (TRL); the mean of the gaps is GSPO's ratio and OPSM's statistic.",
    "kl_weighted": "TRL multiplies the policy term by the weight and by OPSM's keep, then adds "
    "beta * k3 to every token, weighted by neither: a dropped answer still pays its KL.",
    "precision": float32_like("Your answers agree with llm_clip's"),
}
#: The mistakes in groups of those that exclude one another.
GROUPS = [
    ("ratio_inverted",),
    ("mode_confused",),
    ("padding_counted",),
    ("opsm_sign", "opsm_sum"),
    ("sequence_mean",),
    ("kl_weighted",),
]
#: A mode's other rule: masking for truncating, and the reverse.
_OTHER_RULE = {"truncate": "mask", "mask": "truncate"}


def corrected_answer(batch: ExerciseBatch, mistakes: frozenset[str] = frozenset()) -> float:
    """The loss of an implementation with ``mistakes``: llm_clip's functions on changed inputs."""
    new, old, rollout, advantages, mask = batch.arrays.values()
    (logp_ref,), k = batch.extras, batch.keywords
    m = mistakes
    level, rule = k["mode"].split("_")
    mode = f"{level}_{_OTHER_RULE[rule]}" if "mode_confused" in m else k["mode"]
    seen = np.ones_like(mask) if "padding_counted" in m else mask  # padding read as tokens
    engine, trainer = (old, rollout) if "ratio_inverted" in m else (rollout, old)
    if "sequence_mean" in m and mode.startswith("sequence"):  # the gaps' sum is then their mean
        trainer = engine + (trainer - engine) / seen.sum(axis=1, keepdims=True)
    weights = llm_reference.rollout_weights(
        trainer, engine, seen, mode=mode, clip_max=k["clip_max"]
    )
    gap = np.where(seen, rollout - new, 0.0)
    if "opsm_sign" in m:
        gap = -gap
    statistic = gap.sum(axis=1) / (1 if "opsm_sum" in m else seen.sum(axis=1))
    keep = (advantages >= 0) | (statistic <= k["threshold"])
    b = llm_reference.token_breakdown(
        new, old, advantages, mask, objective="grpo", logp_ref=logp_ref, kl_coef=k["beta"],
        rollout_weights=weights, keep=keep,
    )  # fmt: skip
    if "kl_weighted" not in m:
        return b.loss
    per_token = b.rollout_weight * (b.term - k["beta"] * b.kl)
    return float(-(b.weight * per_token).sum())


EXERCISES["rollout"] = Exercise(TITLES, EXPLANATIONS, GROUPS, corrected_answer)

#: The batches, by name: mode, clip_max, threshold, beta and the seed of the arrays; one per
#: mode, so that each mode's rule (and mask against truncate) is tested.
BATCHES = {
    "sequence mask": ("sequence_mask", 3.0, 0.05, 0.04, 11),
    "token truncation": ("token_truncate", 1.5, 0.1, 0.1, 12),
    "sequence truncation": ("sequence_truncate", 2.0, 0.02, 0.05, 13),
    "token mask": ("token_mask", 1.5, 0.08, 0.02, 14),
}
#: Each answer's engine offset (logp_old - logp_rollout, before noise) and advantage: weights
#: past clip_max on answers of both signs, and negative answers OPSM keeps and drops.
OFFSETS = np.array([0.5, 0.6, -0.35, -0.3, 0.3, -0.5])
ADVANTAGES = np.array([1.0, -1.0, 0.5, -0.5, -1.5, 1.5])


def _batch(name: str) -> ExerciseBatch:
    """Batch ``name``: six answers of 2 to 5 tokens; ratios new/old that leave GRPO's band on
    both sides; an engine far off on some answers; padding finite and far from the answers'
    values (a padding counted shows)."""
    mode, clip_max, threshold, beta, seed = BATCHES[name]
    rng = np.random.default_rng(seed)
    lengths = np.array([5, 2, 4, 3, 5, 2])
    mask = np.arange(5) < lengths[:, None]
    old = rng.uniform(-3.0, -0.05, mask.shape)
    off = rng.normal(0.0, 0.15, mask.shape) + OFFSETS[:, None]
    rollout = np.where(mask, old - off, old - 2.0)  # the engine's; its padding far off
    new = old + rng.normal(0.0, 0.3, mask.shape)  # r = new / old leaves [0.8, 1.2] often
    # OPSM's mean gap near its threshold on two answers with A < 0: answer 4's half of it (kept;
    # its sum is past it), answer 3's 1.3 times it (dropped; over T, not its 3 tokens, kept)
    for answer, share in ((4, 0.5), (3, 1.3)):
        n = lengths[answer]
        spread = rng.normal(0.0, 0.1, n)
        rollout[answer, :n] = new[answer, :n] + share * threshold + spread - spread.mean()
    logp_ref = new + rng.normal(0.0, 0.2, mask.shape)
    arrays = {"logp_new": new, "logp_old": old, "logp_rollout": rollout,
              "advantages": ADVANTAGES.copy(), "mask": mask}  # fmt: skip
    keywords = {"mode": mode, "clip_max": clip_max, "threshold": threshold, "beta": beta}
    lesson = f"{mode}, clip_max {clip_max:g}, threshold {threshold:g}, beta {beta:g}"
    return ExerciseBatch(name, lesson, arrays, (logp_ref,), keywords)


@cache
def battery() -> tuple[ExerciseBatch, ...]:
    """The batches :func:`check_corrected_loss` runs: the four modes, padding finite, then the
    first again rounded to float32."""
    batches = [_batch(name) for name in BATCHES]
    return (*batches, in_float32(batches[0]))


def check_corrected_loss(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check ``corrected_loss(logp_new, logp_old, logp_rollout, advantages, mask, logp_ref, *,
    mode, clip_max, threshold, beta)`` against :mod:`llm_clip`."""
    return run_check(
        "corrected_loss", "rollout", function, battery(), time_limit_s, "llm_clip.policy_loss"
    )
