"""Notebook 7's batch: a tiny numpy language model answers "count from a to b", and learns.

**The task.** The prompt is two digits ``a < b``; the right answer is ``a, a+1, ..., b`` and then
the end token ``⏎`` (``3 4 5 ⏎`` for (3, 5)).  The reward is verifiable (:func:`reward`): 1 for
the right answer, 0 for a well-formed wrong one (digits, then ``⏎``), -0.5 for a broken format
(a token that is not a digit, no digit at all, or no ``⏎`` within :data:`MAX_LEN` tokens).

**The model** is log-linear: each token's logits are ``x @ W``, ``x`` the one-hot features of
its context (the previous token, whether that was ``b``, the prompt's ``a`` at the first
position, the position).  :data:`REFERENCE_SEED`'s weights count, with mistakes: that is the
reference model.  The policy that samples the batch has drifted from it (:data:`POLICY_SEED`).

**The batch** (:func:`response_batch`): the first ``group_size`` of :data:`MAX_GROUP` answers
sampled for each prompt, with every token's log-probability under the reference, under the
policy that sampled it, and under the policy after each update on this batch: update ``mu``
(1 to :data:`MAX_MU`) sees the policy after ``mu - 1`` gradient steps of GRPO's loss, every
``d loss / d logp`` from :func:`llm_clip.policy_loss_grad`.  At ``mu = 1`` the policy is the
one that sampled the batch, computed again: every ratio is exactly 1.  Everything is seeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

import llm_clip
from ppo_viz.app import checked_number
from tiny_lm import inverse_cdf, log_softmax, logit_grad

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: The vocabulary: ``⏎`` ends an answer; the ten digits; two tokens that break the format.
VOCAB = ("⏎", *"0123456789", "+", "?")
EOS, V = 0, len(VOCAB)
#: The longest answer: one without ``⏎`` after this many tokens is cut off (and malformed).
MAX_LEN = 10
#: The prompts (a, b) of the batch: two short counts and a long one.
PROMPTS = ((3, 5), (1, 7), (5, 7))
#: Answers sampled per prompt; the group-size slider takes the first ``group_size``.
MAX_GROUP = 8
#: Updates per batch shown (mu = 1 is the first, on the policy that sampled the batch).
MAX_MU = 4
#: The updates' gradient steps: GRPO's loss at eps 0.2 without a KL term (TRL's beta 0), this size.
STEP_SIZE = 6.0
REFERENCE_SEED, POLICY_SEED, SAMPLE_SEED = 24, 7, 4
REWARD_RIGHT, REWARD_WRONG, REWARD_MALFORMED = 1.0, 0.0, -0.5

# The features of a token's context, as blocks of one-hot columns.
_PREVIOUS, _AFTER_B, _FIRST_A, _POSITION = 0, V + 1, V + 2, V + 12  # the previous token: V + 1
N_FEATURES = _POSITION + MAX_LEN
_BOS = V  # the "previous token" of an answer's first token


def _digit(d: int | IntArray) -> int | IntArray:
    return d + 1  # the token of digit d


def features(a: IntArray, b: IntArray, previous: IntArray, position: int) -> FloatArray:
    """One-hot features ``(n, N_FEATURES)`` of n contexts at the same ``position``."""
    x = np.zeros((len(a), N_FEATURES))
    rows = np.arange(len(a))
    x[rows, _PREVIOUS + previous] = 1.0
    x[rows, _AFTER_B] = previous == _digit(b)
    if position == 0:
        x[rows, _FIRST_A + a] = 1.0
    x[rows, _POSITION + position] = 1.0
    return x


def _reference_weights() -> FloatArray:
    """A model that counts: after digit d comes d+1, after b comes ``⏎``; plus seeded noise."""
    rng = np.random.default_rng(REFERENCE_SEED)
    w = rng.normal(0.0, 0.5, (N_FEATURES, V))
    for d in range(9):
        w[_PREVIOUS + _digit(d), _digit(d + 1)] += 4.0
    w[_AFTER_B, EOS] += 6.0
    w[_FIRST_A + np.arange(10), _digit(np.arange(10))] += 5.0
    return w


class Answers(NamedTuple):
    """Sampled answers: prompts (n, 2), tokens and mask (n, MAX_LEN), and the features of each
    token's context (n, MAX_LEN, N_FEATURES); padding holds ``⏎``."""

    prompts: IntArray
    tokens: IntArray
    mask: BoolArray
    contexts: FloatArray


def sample_answers(weights: FloatArray, prompts: IntArray, seed: int) -> Answers:
    """One answer per prompt row, token by token, each drawn as :func:`tiny_lm.sample` draws
    (:func:`tiny_lm.inverse_cdf` at a seeded uniform number)."""
    n = len(prompts)
    a, b = prompts[:, 0], prompts[:, 1]
    uniforms = np.random.default_rng(seed).random((n, MAX_LEN))
    tokens = np.full((n, MAX_LEN), EOS)
    mask = np.zeros((n, MAX_LEN), dtype=bool)
    contexts = np.zeros((n, MAX_LEN, N_FEATURES))
    previous, going = np.full(n, _BOS), np.ones(n, dtype=bool)
    for t in range(MAX_LEN):
        contexts[:, t] = features(a, b, previous, t)
        drawn = inverse_cdf(np.exp(log_softmax(contexts[:, t] @ weights)), uniforms[:, t])
        tokens[:, t], mask[:, t] = np.where(going, drawn, EOS), going
        going &= drawn != EOS
        previous = tokens[:, t]
    return Answers(prompts, tokens, mask, contexts)


def reward(prompt: tuple[int, int], tokens: IntArray, length: int) -> float:
    """The verifiable reward of one answer (its first ``length`` tokens)."""
    answer = [int(t) for t in tokens[:length]]
    a, b = prompt
    if answer == [*(_digit(d) for d in range(a, b + 1)), EOS]:
        return REWARD_RIGHT
    digits = answer[:-1]
    well_formed = answer[-1] == EOS and digits and all(1 <= t <= 10 for t in digits)
    return REWARD_WRONG if well_formed else REWARD_MALFORMED


def token_logps(weights: FloatArray, answers: Answers) -> FloatArray:
    """Each token's log-probability under ``weights`` (padding too: finite, never read)."""
    logp = log_softmax(answers.contexts @ weights)
    return np.take_along_axis(logp, answers.tokens[..., None], axis=-1)[..., 0]


def grpo_step(weights: FloatArray, answers: Answers, logp_old: FloatArray, advantages: FloatArray
              ) -> FloatArray:  # fmt: skip
    """The weights after one gradient step of GRPO's loss (``llm_clip``'s gradient, chained
    through the softmax by :func:`tiny_lm.logit_grad`)."""
    logp_new = token_logps(weights, answers)
    g = llm_clip.policy_loss_grad(logp_new, logp_old, advantages, answers.mask, objective="grpo")
    dlogits = logit_grad(g, answers.tokens, log_softmax(answers.contexts @ weights))
    return weights - STEP_SIZE * np.einsum("btf,btv->fv", answers.contexts, dlogits)


@dataclass(frozen=True, eq=False)
class ResponseBatch:
    """``group_size`` answers to each of :data:`PROMPTS`, consecutive per prompt (B rows).

    ``logp_new[mu - 1]`` is each token's log-probability at update ``mu``; ``logp_new[0]`` is
    ``logp_old`` computed again (the same floats).  Arrays are (B, MAX_LEN), read-only.
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


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array)
    array.setflags(write=False)
    return array


def policies() -> tuple[FloatArray, FloatArray]:
    """The reference's weights and those of the policy that sampled the batch."""
    reference, policy, _ = _all_answers()
    return reference, policy


@cache
def _all_answers() -> tuple[FloatArray, FloatArray, Answers]:
    """The reference's and the policy's weights, and MAX_GROUP answers per prompt."""
    reference = _reference_weights()
    policy = reference + np.random.default_rng(POLICY_SEED).normal(0.0, 0.4, reference.shape)
    prompts = np.repeat(np.array(PROMPTS), MAX_GROUP, axis=0)
    return reference, policy, sample_answers(policy, prompts, SAMPLE_SEED)


@cache
def response_batch(group_size: int = 4) -> ResponseBatch:
    """The batch with the first ``group_size`` (2 to :data:`MAX_GROUP`) answers per prompt,
    and the policy at each update on it (cached: every app shares one)."""
    size = int(checked_number("group_size", group_size, (2, MAX_GROUP), whole=True))
    reference, policy, every = _all_answers()
    rows = (np.arange(len(PROMPTS))[:, None] * MAX_GROUP + np.arange(size)).ravel()
    answers = Answers(*(part[rows] for part in every))
    lengths = answers.mask.sum(axis=1)
    rewards = np.array([reward(tuple(answers.prompts[i]), answers.tokens[i], lengths[i])
                        for i in range(len(rows))])  # fmt: skip
    logp_old = token_logps(policy, answers)
    advantages = llm_clip.group_advantages(rewards, size)
    weights, logp_new = policy, []
    for _ in range(MAX_MU):
        logp_new.append(_frozen(token_logps(weights, answers)))
        weights = grpo_step(weights, answers, logp_old, advantages)
    arrays = (answers.prompts, answers.tokens, answers.mask, rewards,
              token_logps(reference, answers), logp_old)  # fmt: skip
    return ResponseBatch(size, *map(_frozen, arrays), tuple(logp_new))
