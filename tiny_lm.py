"""A tiny language model in numpy, and a task with a verifiable reward (issue 29).

**The task**, *count from a to b*: the prompt is two digits ``a < b`` (``b - a`` from 1 to 5:
:data:`PROMPTS`, 35 of them); the right response is the digits ``a, a+1, ..., b`` and then the
end-of-sequence token, ``3 4 5 <eos>`` for (3, 5).  Its length is known, ``b - a + 2`` tokens,
and length and correctness pull apart: a response can be wrong and short (it stopped early),
wrong and long (it overshot b, or ran on to the length limit), or right.  The reward
(:func:`rewards`) is verifiable:

* ``1`` for exactly the right response;
* ``0`` for a well-formed wrong one (digits, then ``<eos>``);
* ``-0.5`` where the format rule is broken: a token that is not a digit, an empty answer, or no
  ``<eos>`` within :data:`MAX_LEN` tokens (a truncated response).

**The model** (:class:`TinyLM`) predicts each response token from one-hot features of the
prompt's two digits, the position and the previous token (:func:`features`), through one
tanh layer: ``logits = tanh(x E + c) W + d``, 2,128 parameters.  Every array has a leading axis
of *runs* (seeds, or methods side by side): run ``i`` has its own parameters and its own
responses, and nothing mixes runs.  Sampling (:func:`sample`) draws each token by inverting
the cumulative probabilities at a uniform number, so a seed's uniforms decide its responses;
:func:`score` gives each response token's log-probability under any model (computed on the
tokens only: :func:`pack`), and :func:`parameter_grad` the parameter gradient from
``d loss / d logp`` of each token (:func:`logit_grad`, :meth:`TinyLM.backward`:
backpropagation written out).

**The reference** (:func:`reference_model`) is the "pretrained" model every RL run starts
from and is compared with: the model distilled from a noisy teacher (:func:`teacher_probs`)
that counts on with probability 0.85 per step and otherwise stops early, skips or repeats a
digit, writes a non-digit, or overshoots b.  It answers about 45% of the prompts right, worse
the longer the count.  RL improves on it; the runs' KL is measured against it.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

from bandit import log_softmax  # the policy's softmax, shared with the bandit
from ppo_clip_inputs import checked_real

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: The vocabulary: ``<eos>`` ends a response; ten digits; five tokens that break the format.
VOCAB = ("<eos>", *"0123456789", "+", "=", "x", "?", "#")
EOS = 0
DIGIT_TOKENS = np.arange(1, 11)  # the token of digit d is d + 1
V = len(VOCAB)
#: The "previous token" of a response's first token (a feature, never sampled).
BOS = V
#: The longest response: a response without ``<eos>`` after this many tokens is truncated.
MAX_LEN = 12
#: The prompts (a, b): every pair of digits with b - a from 1 to 5.
PROMPTS = tuple((a, b) for a in range(10) for b in range(a + 1, min(a + 5, 9) + 1))
PROMPT_A = np.array([a for a, _ in PROMPTS])
PROMPT_B = np.array([b for _, b in PROMPTS])
#: The length of each prompt's right response, ``<eos>`` included.
RIGHT_LENGTH = PROMPT_B - PROMPT_A + 2
#: Each prompt's right response ``(len(PROMPTS), MAX_LEN)``: its digits, then ``<eos>`` padding.
RIGHT_TOKENS = np.where(
    np.arange(MAX_LEN) < RIGHT_LENGTH[:, None] - 1, PROMPT_A[:, None] + 1 + np.arange(MAX_LEN), EOS
)
#: The reward of a right, a well-formed wrong and a malformed response.
REWARD_RIGHT, REWARD_WRONG, REWARD_MALFORMED = 1.0, 0.0, -0.5
#: One-hot features: a (10), b (10), the position (MAX_LEN), the previous token (V + 1).
FEATURE_OFFSETS = (0, 10, 20, 20 + MAX_LEN)
N_FEATURES = 20 + MAX_LEN + V + 1
HIDDEN = 32
#: The reference's pretraining: its seed, Adam steps, contexts per step and learning rate.
PRETRAIN_SEED, PRETRAIN_STEPS, PRETRAIN_BATCH, PRETRAIN_RATE = 2024, 400, 128, 0.01


def right_response(prompt: int) -> list[int]:
    """The tokens of the right response to prompt number ``prompt``, ``<eos>`` included."""
    checked_whole("prompt", prompt, 0, len(PROMPTS) - 1)  # PROMPTS[-1]: the last prompt's
    return RIGHT_TOKENS[prompt, : RIGHT_LENGTH[prompt]].tolist()


def checked_whole(name: str, value: object, low: int, high: int) -> None:
    """A ``TypeError`` unless ``value`` is a whole number (not a bool), a ``ValueError`` unless
    it is from ``low`` to ``high``; each naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be from {low} to {high}, got {value}")


# --------------------------------------------------------------------------
# Responses and their rewards
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Responses:
    """A batch of responses per run: ``tokens`` and ``mask`` ``(runs, B, MAX_LEN)``.

    ``mask`` is True on response tokens (``<eos>`` included), False on padding, which holds
    ``<eos>``.  ``prompts`` ``(runs, B)`` are indices into :data:`PROMPTS`.
    """

    prompts: IntArray
    tokens: IntArray
    mask: BoolArray

    @property
    def lengths(self) -> IntArray:
        """Tokens per response, ``<eos>`` included."""
        return self.mask.sum(axis=-1)

    @property
    def truncated(self) -> BoolArray:
        """Responses that reached :data:`MAX_LEN` tokens without ``<eos>``."""
        return self.mask[..., -1] & (self.tokens[..., -1] != EOS)


def rewards(responses: Responses) -> tuple[FloatArray, BoolArray, BoolArray]:
    """Each response's reward, whether it is right, and whether it breaks the format rule."""
    tokens, mask = responses.tokens, responses.mask
    is_digit = (tokens >= DIGIT_TOKENS[0]) & (tokens <= DIGIT_TOKENS[-1])
    answer = mask & (tokens != EOS)
    well_formed = ~responses.truncated & (responses.lengths > 1) & ~(answer & ~is_digit).any(-1)
    expected, length = RIGHT_TOKENS[responses.prompts], RIGHT_LENGTH[responses.prompts]
    right = ((tokens == expected) | ~mask).all(-1) & (responses.lengths == length)
    reward = np.where(right, REWARD_RIGHT, np.where(well_formed, REWARD_WRONG, REWARD_MALFORMED))
    return reward, right, ~well_formed


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------


def features(prompts: IntArray, positions: IntArray, previous: IntArray) -> FloatArray:
    """One-hot features ``(..., N_FEATURES)`` of response tokens: the prompt's a and b, the
    token's position and the token before it (:data:`BOS` before the first); the three
    arrays broadcast to one shape."""
    columns = np.broadcast_arrays(PROMPT_A[prompts], PROMPT_B[prompts], positions, previous)
    ones = np.stack([o + c for o, c in zip(FEATURE_OFFSETS, columns, strict=True)], axis=-1)
    x = np.zeros((*columns[0].shape, N_FEATURES))
    flat = x.reshape(-1, N_FEATURES)
    flat[np.arange(len(flat))[:, None], ones.reshape(len(flat), -1)] = 1.0
    return x


#: What :meth:`TinyLM.forward` keeps for :meth:`TinyLM.backward`: the features and the hidden layer.
Cache = tuple[FloatArray, FloatArray]


class TinyLM:
    """``logits = tanh(x E + c) W + d`` for every run: ``params = [E, c, W, d]`` with shapes
    ``(runs, N_FEATURES, HIDDEN)``, ``(runs, HIDDEN)``, ``(runs, HIDDEN, V)``, ``(runs, V)``;
    ``x`` ``(runs, rows, N_FEATURES)``.  ``outputs`` is V for a policy, 1 for a value model.
    Served by an ``engine`` (:class:`Engine`), its outputs are the logits the engine samples
    from (None: the model's own)."""

    def __init__(self, params: list[FloatArray], engine: Engine | None = None) -> None:
        self.params, self.engine = params, engine

    @classmethod
    def initial(cls, rngs: list[np.random.Generator], outputs: int = V) -> TinyLM:
        """Small Gaussian weights (1/sqrt(fan-in)), zero biases: one set per generator."""
        e = np.stack([rng.standard_normal((N_FEATURES, HIDDEN)) for rng in rngs]) / 2.0
        w = np.stack([rng.standard_normal((HIDDEN, outputs)) for rng in rngs]) / np.sqrt(HIDDEN)
        runs = len(rngs)
        return cls([e, np.zeros((runs, HIDDEN)), w, np.zeros((runs, outputs))])

    @property
    def runs(self) -> int:
        return len(self.params[0])

    def repeated(self, runs: int) -> TinyLM:
        """``runs`` copies of this model's first run (each with its own arrays)."""
        return TinyLM([np.repeat(p[:1], runs, axis=0) for p in self.params])

    def forward(self, x: FloatArray) -> tuple[FloatArray, Cache]:
        """Outputs ``(runs, rows, outputs)`` for features ``x`` ``(runs, rows, N_FEATURES)``."""
        e, c, w, d = self.params
        hidden = np.tanh(x @ e + c[:, None, :])
        logits = hidden @ w + d[:, None, :]
        return logits if self.engine is None else self.engine.logits(logits), (x, hidden)

    def backward(self, cache: Cache, d_outputs: FloatArray) -> list[FloatArray]:
        """``d loss / d params`` from ``d loss / d outputs``, in the order of :attr:`params`.

        ``dW = h^T dy``, ``dd = sum of dy`` over rows, ``dz = (dy W^T) * (1 - h^2)``,
        ``dE = x^T dz``, ``dc = sum of dz``.
        """
        (x, hidden), w = cache, self.params[2]
        d_w = np.swapaxes(hidden, 1, 2) @ d_outputs
        d_z = (d_outputs @ np.swapaxes(w, 1, 2)) * (1.0 - hidden**2)
        d_e = np.swapaxes(x, 1, 2) @ d_z
        return [d_e, d_z.sum(axis=1), d_w, d_outputs.sum(axis=1)]


class Adam:
    """``torch.optim.Adam`` (betas 0.9 and 0.999, eps 1e-8) on a list of arrays, in place."""

    def __init__(self, params: list[FloatArray], eps: float = 1e-8) -> None:
        self.params, self.eps, self.steps = params, eps, 0
        self.moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]

    def step(self, grads: list[FloatArray], learning_rate: float) -> None:
        """``p -= lr * m_hat / (sqrt(v_hat) + eps)``, ``m`` and ``v`` the moving averages of the
        gradient and its square, ``m_hat`` and ``v_hat`` corrected for their start at 0."""
        self.steps += 1
        for param, grad, (m, v) in zip(self.params, grads, self.moments, strict=True):
            m += 0.1 * (grad - m)
            v += 0.001 * (grad**2 - v)
            m_hat, v_hat = m / (1.0 - 0.9**self.steps), v / (1.0 - 0.999**self.steps)
            param -= learning_rate * m_hat / (np.sqrt(v_hat) + self.eps)


@dataclass(frozen=True)
class Packed:
    """A batch of :class:`Responses` as the model sees it: each run's tokens *packed* into
    ``N`` rows (the most tokens of any run), computed once per batch.

    ``x`` ``(runs, N, N_FEATURES)``: each token's :func:`features`; ``rows`` ``(runs, N)``:
    where each row's token sits in the batch (``b * MAX_LEN + t``), the run's tokens first
    and in order; ``valid``: False for the rows that only fill a run up to ``N``; ``tokens``,
    ``previous`` and ``prompts``: each row's token, the token before it (:data:`BOS` before the
    first) and its prompt; ``shape``: the batch's ``(runs, B, MAX_LEN)``.
    """

    x: FloatArray
    rows: IntArray
    valid: BoolArray
    tokens: IntArray
    previous: IntArray
    prompts: IntArray
    shape: tuple[int, int, int]

    def unpacked(self, per_row: FloatArray) -> FloatArray:
        """A per-row quantity ``(runs, N)`` back at its tokens ``(runs, B, MAX_LEN)``, 0 on
        padding."""
        out = np.zeros((len(self.rows), self.shape[1] * self.shape[2]))
        np.put_along_axis(out, self.rows, np.where(self.valid, per_row, 0.0), axis=1)
        return out.reshape(self.shape)

    def mean(self, per_row: FloatArray) -> FloatArray:
        """Per run, the mean of a per-row quantity over the run's tokens (summed over those
        rows only, so that the result does not depend on the other runs' lengths)."""
        counts = self.valid.sum(axis=1)
        return np.array([row[:n].sum() / n for row, n in zip(per_row, counts, strict=True)])


def pack(responses: Responses) -> Packed:
    """The :class:`Packed` form of ``responses``."""
    runs, _, length = shape = responses.tokens.shape
    flat = responses.mask.reshape(runs, -1)
    counts = flat.sum(axis=1)
    rows = np.argsort(~flat, axis=1, kind="stable")[:, : counts.max()]
    valid = np.arange(rows.shape[1]) < counts[:, None]
    prompts = np.take_along_axis(responses.prompts, rows // length, axis=1)
    before = np.concatenate([np.full((*shape[:2], 1), BOS), responses.tokens[..., :-1]], axis=-1)
    previous = gathered(before, rows)
    x = features(prompts, rows % length, previous)
    return Packed(x, rows, valid, gathered(responses.tokens, rows), previous, prompts, shape)


def gathered(per_token: np.ndarray, rows: IntArray) -> np.ndarray:
    """``per_token`` ``(runs, B, MAX_LEN)`` at each run's rows ``(runs, N)`` (:class:`Packed`)."""
    return np.take_along_axis(per_token.reshape(len(rows), -1), rows, axis=1)


@dataclass
class Scored:
    """A model's log-probabilities on a :class:`Packed` batch: ``logp`` ``(runs, B,
    MAX_LEN)``, each response token's (0 on padding); ``log_probs`` ``(runs, N, V)``, the whole
    vocabulary's at each row; ``cache``, for backpropagation."""

    batch: Packed
    logp: FloatArray
    log_probs: FloatArray
    cache: Cache


def score(model: TinyLM, batch: Packed) -> Scored:
    """The model's :class:`Scored` log-probabilities of a batch (teacher forcing: each token
    predicted from the prompt, its position and the token before it)."""
    logits, cache = model.forward(batch.x)
    log_probs = log_softmax(logits)
    taken = np.take_along_axis(log_probs, batch.tokens[..., None], axis=-1)[..., 0]
    return Scored(batch, batch.unpacked(taken), log_probs, cache)


def logit_grad(dloss_dlogp: FloatArray, tokens: IntArray, log_probs: FloatArray) -> FloatArray:
    """``d loss / d logits`` ``(..., V)`` from ``d loss / d logp`` of each token: since
    ``logp = logits[token] - logsumexp(logits)``, ``d logp / d logits_k = [token == k] - p_k``."""
    one_hot = tokens[..., None] == np.arange(log_probs.shape[-1])
    return dloss_dlogp[..., None] * (one_hot - np.exp(log_probs))


def parameter_grad(model: TinyLM, scored: Scored, dloss_dlogp: FloatArray) -> list[FloatArray]:
    """``d loss / d params`` from ``d loss / d logp`` ``(runs, B, MAX_LEN)`` of each response
    token (0 on padding), through ``scored`` (the model's :func:`score` of the batch)."""
    batch = scored.batch
    g = np.where(batch.valid, gathered(dloss_dlogp, batch.rows), 0.0)
    return model.backward(scored.cache, logit_grad(g, batch.tokens, scored.log_probs))


def entropy(log_probs: FloatArray) -> FloatArray:
    """The entropy ``-sum p log p`` of each next-token distribution (over the last axis)."""
    return -(np.exp(log_probs) * log_probs).sum(axis=-1)


# --------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------


def inverse_cdf(probs: FloatArray, uniforms: FloatArray) -> IntArray:
    """The token ``k`` with ``P(< k) <= u < P(<= k)`` for each uniform ``u`` in [0, 1): a draw
    from ``probs`` (the last token where rounding leaves ``u`` above the total)."""
    below = (probs.cumsum(axis=-1) <= uniforms[..., None]).sum(axis=-1)
    return np.minimum(below, probs.shape[-1] - 1)


def sample(model: TinyLM, prompts: IntArray, uniforms: FloatArray) -> Responses:
    """Responses to ``prompts`` ``(runs, B)``, token ``t`` of each drawn with ``uniforms[..., t]``
    (``(runs, B, MAX_LEN)``) until ``<eos>`` or :data:`MAX_LEN` tokens."""

    def next_probs(t: int, previous: IntArray) -> FloatArray:
        return np.exp(log_softmax(model.forward(features(prompts, np.array(t), previous))[0]))

    return _drawn(prompts, uniforms, next_probs)


def _drawn(prompts: IntArray, uniforms: FloatArray, next_probs: Callable) -> Responses:
    """Token ``t`` of each response is the :func:`inverse_cdf` of ``uniforms[..., t]`` under
    ``next_probs(t, previous)`` (``previous``: ``<eos>`` once a response has ended)."""
    tokens = np.full((*prompts.shape, MAX_LEN), EOS)
    mask = np.zeros(tokens.shape, dtype=bool)
    previous, going = np.full(prompts.shape, BOS), np.ones(prompts.shape, dtype=bool)
    for t in range(MAX_LEN):
        drawn = inverse_cdf(next_probs(t, previous), uniforms[..., t])
        tokens[..., t], mask[..., t] = np.where(going, drawn, EOS), going
        going = going & (drawn != EOS)
        previous = np.where(going, drawn, EOS)
        if not going.any():
            break
    return Responses(prompts, tokens, mask)


# --------------------------------------------------------------------------
# The reference: distilled from a noisy teacher
# --------------------------------------------------------------------------


def teacher_probs(prompts: IntArray, previous: IntArray) -> FloatArray:
    """The noisy teacher's next-token probabilities ``(..., V)`` after ``previous`` (``(...)``).

    First token: a (0.88), a - 1 or a + 1 (0.04 each), a non-digit (0.04).  After a digit d
    below b: d + 1 (0.85), ``<eos>`` (0.04: stops early), d + 2 (0.04), d again (0.04), a
    non-digit (0.03); from b on, ``<eos>`` with 0.75 and otherwise the same (overshoot); a digit
    past 9 is ``<eos>``.  After a non-digit: ``<eos>`` (0.5) or any digit (0.05 each).
    """
    a, b = PROMPT_A[prompts], PROMPT_B[prompts]
    probs = np.zeros((*previous.shape, V))
    junk = np.arange(11, V)

    def add(token: IntArray, p: float | FloatArray, where: BoolArray) -> None:
        np.add.at(probs, (*np.nonzero(where), token[where]), np.broadcast_to(p, where.shape)[where])

    def digit(d: IntArray) -> IntArray:
        return np.where((d >= 0) & (d <= 9), d + 1, EOS)

    first, after_junk = previous == BOS, (previous > 10) & (previous < BOS)
    count = ~first & ~after_junk & (previous != EOS)
    d = previous - 1
    add(digit(a), 0.88, first)
    add(digit(np.maximum(a - 1, 0)), 0.04, first)
    add(digit(a + 1), 0.04, first)
    at_end = count & (d >= b)
    keep_on = np.where(at_end, 0.25, 1.0)
    add(np.full_like(d, EOS), np.where(at_end, 0.75, 0.0) + 0.04 * keep_on, count)
    for step, p in ((1, 0.85), (2, 0.04), (0, 0.04)):
        add(digit(d + step), p * keep_on, count)
    probs[after_junk, EOS] = 0.5
    probs[after_junk, 1:11] = 0.05
    probs[first, 11:] += 0.04 / len(junk)
    probs[count, 11:] += (0.03 * keep_on[count] / len(junk))[:, None]
    probs[previous == EOS, EOS] = 1.0  # padding: never a response token
    return probs


@cache
def reference_model(seed: int = PRETRAIN_SEED) -> TinyLM:
    """The pretrained model every run starts from (computed once per process and ``seed``, in
    about 2 s of CPU); another ``seed`` distils another reference from the same teacher.

    A one-run model distilled from :func:`teacher_probs`: each of :data:`PRETRAIN_STEPS` Adam
    steps samples :data:`PRETRAIN_BATCH` teacher responses and moves the model's next-token
    distributions toward the teacher's at every position (the cross-entropy with the teacher's
    probabilities)."""
    rng = np.random.default_rng(seed)
    model = TinyLM.initial([rng])
    optimizer = Adam(model.params)
    for _ in range(PRETRAIN_STEPS):
        prompts = rng.integers(len(PROMPTS), size=(1, PRETRAIN_BATCH))
        responses = sample_teacher(prompts, rng.random((1, PRETRAIN_BATCH, MAX_LEN)))
        batch = pack(responses)
        scored = score(model, batch)
        target = teacher_probs(batch.prompts, batch.previous)
        d_logits = (np.exp(scored.log_probs) - target) / batch.rows.size  # every row a token
        optimizer.step(model.backward(scored.cache, d_logits), PRETRAIN_RATE)
    return model


def sample_teacher(prompts: IntArray, uniforms: FloatArray) -> Responses:
    """Responses of the teacher (:func:`teacher_probs`), drawn as :func:`sample` draws."""
    return _drawn(prompts, uniforms, lambda t, previous: teacher_probs(prompts, previous))


def right_answer_probability(model: TinyLM) -> FloatArray:
    """Per run and prompt ``(runs, len(PROMPTS))``: the exact probability that the model
    answers right (the product of its probabilities of the right response's tokens)."""
    shape = (model.runs, len(PROMPTS), MAX_LEN)
    mask = np.broadcast_to(np.arange(MAX_LEN) < RIGHT_LENGTH[:, None], shape)
    prompts = np.broadcast_to(np.arange(len(PROMPTS)), shape[:2])
    responses = Responses(prompts, np.broadcast_to(RIGHT_TOKENS, shape), mask)
    return np.exp(score(model, pack(responses)).logp.sum(axis=-1))


# --------------------------------------------------------------------------
# The rollout engine (issue 45): how vLLM or SGLang samples, in miniature
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Engine:
    """An inference engine's departures from the trainer, each a switch with a size.

    ``bits``: the logits rounded to that many significant bits (bf16 keeps 8; None: exact);
    ``top_p``: nucleus sampling, the fewest most likely tokens whose probability reaches
    ``top_p`` (1: off); ``top_k``: only the ``top_k`` most likely tokens (0: off).  Top-k is
    applied first, then top-p on what it kept, as vLLM does.  The engine reports the
    log-probabilities of the distribution it sampled from (vLLM's ``processed_logprobs``, which
    TRL asks for), where the trainer's recomputation does not truncate.
    """

    bits: int | None = None
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        if self.bits is not None:
            checked_whole("bits", self.bits, 2, 52)  # 52: float64's
        checked_whole("top_k", self.top_k, 0, V)
        if not 0.0 < checked_real("top_p", self.top_p) <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")

    def logits(self, logits: FloatArray) -> FloatArray:
        """The logits the engine samples from ``(..., V)``: rounded, and ``-inf`` on the tokens
        top-k and top-p leave out (their ``log_softmax`` is the truncated, renormalised
        distribution); ``logits`` itself when the engine is exact (no rounding, top-k or top-p)."""
        z = logits if self.bits is None else _rounded(logits, self.bits)
        if self.top_k:
            kth = -np.sort(-z, axis=-1)[..., self.top_k - 1 : self.top_k]
            z = np.where(z >= kth, z, -np.inf)
        if self.top_p < 1.0:
            probs = np.exp(log_softmax(z))
            order = np.argsort(-probs, axis=-1, kind="stable")
            ranked = np.take_along_axis(probs, order, axis=-1)
            before = ranked.cumsum(axis=-1) - ranked  # the mass of the likelier tokens
            drop = np.zeros(z.shape, dtype=bool)
            np.put_along_axis(drop, order, before >= self.top_p, axis=-1)
            z = np.where(drop, -np.inf, z)
        return z


def _rounded(x: FloatArray, bits: int) -> FloatArray:
    """``x`` rounded to ``bits`` significant bits (round half to even, as bf16 rounds)."""
    mantissa, exponent = np.frexp(x)
    return np.ldexp(np.round(np.ldexp(mantissa, bits)), exponent - bits)


def engine_sample(
    model: TinyLM, prompts: IntArray, uniforms: FloatArray, engine: Engine
) -> Responses:
    """Responses drawn as :func:`sample` draws them, from ``engine``'s distribution (the same
    responses when the engine is exact)."""
    if not isinstance(engine, Engine):
        raise TypeError(f"engine must be an Engine, got {type(engine).__name__}")
    return sample(TinyLM(model.params, engine), prompts, uniforms)


def engine_logp(model: TinyLM, batch: Packed, engine: Engine) -> FloatArray:
    """The engine's log-probability of each response token ``(runs, B, MAX_LEN)`` (0 on
    padding): of the truncated, renormalised distribution of rounded logits, as an engine with
    ``processed_logprobs`` reports it.  With an exact engine, :func:`score`'s ``logp`` to the
    bit.  (A token the engine did not sample from could be ``-inf``.)"""
    return score(TinyLM(model.params, engine), batch).logp
