"""Notebook 7's batch: :mod:`tiny_lm`'s model answers "count from a to b", and learns.

**The task and the model** are those Part B trains (:mod:`tiny_lm`): the prompt is two digits
``a < b``; the right answer is ``a, a+1, ..., b`` and then the end token ``⏎`` (``3 4 5 ⏎`` for
(3, 5)); the reward is verifiable (:func:`tiny_lm.rewards`): 1 for the right answer, 0 for a
well-formed wrong one, -0.5 for a broken format.  The reference is
:func:`tiny_lm.reference_model`; the policy that samples the batch has drifted from it: seeded
noise of spread :data:`POLICY_SPREAD` on every weight (:func:`policies`).

**The batch** (:func:`response_batch`): the first ``group_size`` of :data:`MAX_GROUP` answers
sampled for each of :data:`PROMPTS`, with every token's log-probability under the reference,
under the policy that sampled it, and under the policy after each update on this batch: update
``mu`` (1 to :data:`MAX_MU`) sees the policy after ``mu - 1`` gradient steps of GRPO's loss,
every ``d loss / d logp`` from :func:`llm_clip.policy_loss_grad`.  At ``mu = 1`` the policy is
the one that sampled the batch, computed again: every ratio is exactly 1.  Everything is seeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

import llm_clip
import tiny_lm
from ppo_viz.controls import checked_number
from tiny_lm import MAX_LEN, BoolArray, FloatArray, IntArray, Responses, TinyLM

#: tiny_lm's vocabulary as the notebook shows it: ``⏎`` ends an answer.
VOCAB = ("⏎", *tiny_lm.VOCAB[1:])
#: The prompts (a, b) of the batch: two short counts and a long one.
PROMPTS = ((3, 5), (1, 6), (5, 7))
#: Answers sampled per prompt; the group-size slider takes the first ``group_size``.
MAX_GROUP = 8
#: Updates per batch shown (mu = 1 is the first, on the policy that sampled the batch).
MAX_MU = 4
#: The updates' gradient steps: GRPO's loss at eps 0.2 without a KL term (TRL's beta 0), this size.
#: Notebook 7's counts (tokens switched off at each mu) are tuned to it: at 0.41, mu = 2's 7 is
#: 8. tests/test_llm_notebook.py computes each count and checks the prose states it.
STEP_SIZE = 0.4
#: The weight w of a token of answer i (of n_i tokens) under each aggregation of llm_clip.
WEIGHTS = dict(
    zip(
        llm_clip.AGGREGATIONS,
        ("1/(tokens in the batch)", "1/(B·n_i)", f"1/(B·L), L = {MAX_LEN}"),
        strict=True,
    )
)
#: The spread of the noise on each weight that moved the sampling policy off the reference.
POLICY_SPREAD = 0.15
POLICY_SEED, SAMPLE_SEED = 47, 13


@dataclass(frozen=True, eq=False)
class ResponseBatch:
    """``group_size`` answers to each of :data:`PROMPTS`, consecutive per prompt (B rows).

    ``logp_new[mu - 1]`` is each token's log-probability at update ``mu``; ``logp_new[0]`` is
    ``logp_old`` computed again (the same floats).  Arrays are (B, MAX_LEN), read-only; the
    log-probabilities are 0 on padding.
    """

    group_size: int
    prompts: IntArray
    tokens: IntArray
    mask: BoolArray
    rewards: FloatArray
    logp_ref: FloatArray
    logp_old: FloatArray
    logp_new: tuple[FloatArray, ...]

    @property
    def lengths(self) -> IntArray:
        """Tokens per answer, ``⏎`` included."""
        return self.mask.sum(axis=1)

    def advantages(self, scale_by_std: bool = True) -> FloatArray:
        """GRPO's group advantages (Dr. GRPO's without the std: ``scale_by_std=False``)."""
        return llm_clip.group_advantages(self.rewards, self.group_size, scale_by_std=scale_by_std)

    def text(self, row: int) -> str:
        """Answer ``row`` as text: ``3 4 5 ⏎``."""
        return " ".join(VOCAB[t] for t in self.tokens[row, : self.lengths[row]])

    def prompt_text(self, row: int) -> str:
        a, b = self.prompts[row]
        return f"{a}→{b}"


@cache
def policies() -> tuple[TinyLM, TinyLM]:
    """The reference and the policy that sampled the batch."""
    reference = tiny_lm.reference_model()
    rng = np.random.default_rng(POLICY_SEED)
    drifted = [p + rng.normal(0.0, POLICY_SPREAD, p.shape) for p in reference.params]
    return reference, TinyLM(drifted)


@cache
def _all_answers() -> Responses:
    """:data:`MAX_GROUP` answers per prompt, sampled by the policy (one run of tiny_lm)."""
    numbers = np.repeat([tiny_lm.PROMPTS.index(p) for p in PROMPTS], MAX_GROUP)[None]
    uniforms = np.random.default_rng(SAMPLE_SEED).random((*numbers.shape, MAX_LEN))
    return tiny_lm.sample(policies()[1], numbers, uniforms)


@cache
def response_batch(group_size: int = 4) -> ResponseBatch:
    """The batch with the first ``group_size`` (2 to :data:`MAX_GROUP`) answers per prompt,
    and the policy at each update on it (cached: every app shares one)."""
    size = int(checked_number("group_size", group_size, (2, MAX_GROUP), whole=True))
    reference, policy = policies()
    every = _all_answers()
    rows = (np.arange(len(PROMPTS))[:, None] * MAX_GROUP + np.arange(size)).ravel()
    answers = Responses(every.prompts[:, rows], every.tokens[:, rows], every.mask[:, rows])
    packed = tiny_lm.pack(answers)
    rewards = tiny_lm.rewards(answers)[0][0]  # (reward, right, malformed): the reward, run 0
    advantages = llm_clip.group_advantages(rewards, size)
    logp_old, mask = tiny_lm.score(policy, packed).logp[0], answers.mask[0]
    model, logp_new = policy, []
    for _ in range(MAX_MU):
        scored = tiny_lm.score(model, packed)
        logp_new.append(scored.logp[0])
        g = llm_clip.policy_loss_grad(scored.logp[0], logp_old, advantages, mask, objective="grpo")
        grads = tiny_lm.parameter_grad(model, scored, g[None])
        model = TinyLM([p - STEP_SIZE * d for p, d in zip(model.params, grads, strict=True)])
    prompts = np.array(PROMPTS).repeat(size, axis=0)
    logp_ref = tiny_lm.score(reference, packed).logp[0]
    arrays = (prompts, answers.tokens[0], mask, rewards, logp_ref, logp_old)
    for array in (*arrays, *logp_new):  # every app shares them (cached): read-only
        array.flags.writeable = False
    return ResponseBatch(size, *arrays, tuple(logp_new))
