"""The tiny language model (tiny_lm.py): task, reward, sampling, log-probabilities, gradients.

* The reward: right, wrong-but-well-formed and malformed responses on hand-made batches.
* Sampling is exact: each token is the inverse CDF of the model's probabilities at its uniform
  number (so a response comes as often as the product of its tokens' probabilities), and
  responses stop at ``<eos>`` and pad after it.
* Log-probabilities sum to 1 over the vocabulary; packing computes the same numbers as the
  whole padded batch; padding is never read.
* Gradients: the parameter gradient (through llm_clip's loss, ``d logp / d logits`` and the
  backpropagation) against central finite differences (Adam's first step: test_tiny_rlhf's
  update test).
* The reference is the distilled teacher: close to it, and right about 45% of the time.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import central_difference

import llm_clip
from tiny_lm import (
    BOS,
    DIGIT_TOKENS,
    EOS,
    MAX_LEN,
    PROMPTS,
    REWARD_MALFORMED,
    REWARD_RIGHT,
    REWARD_WRONG,
    VOCAB,
    Responses,
    TinyLM,
    features,
    gathered,
    inverse_cdf,
    log_softmax,
    pack,
    parameter_grad,
    reference_model,
    rewards,
    right_answer_probability,
    right_response,
    sample,
    sample_teacher,
    score,
    teacher_probs,
)

V = len(VOCAB)


def responses_of(prompt: int, *texts: str) -> Responses:
    """One run's responses to one prompt, each written as tokens separated by spaces."""
    tokens = np.full((1, len(texts), MAX_LEN), EOS)
    mask = np.zeros(tokens.shape, dtype=bool)
    for i, text in enumerate(texts):
        ids = [VOCAB.index(word) for word in text.split()]
        tokens[0, i, : len(ids)] = ids
        mask[0, i, : len(ids)] = True
    return Responses(np.full((1, len(texts)), prompt), tokens, mask)


def random_model(seed: int, runs: int = 2, outputs: int = V) -> TinyLM:
    """A model with every parameter random (biases too), so no gradient entry is trivially 0."""
    rng = np.random.default_rng(seed)
    model = TinyLM.initial([rng] * runs, outputs)
    for p in model.params:
        p += 0.3 * rng.standard_normal(p.shape)
    return model


def random_responses(model: TinyLM, seed: int, batch: int = 6) -> Responses:
    rng = np.random.default_rng(seed)
    prompts = rng.integers(len(PROMPTS), size=(model.runs, batch))
    return sample(model, prompts, rng.random((model.runs, batch, MAX_LEN)))


# --------------------------------------------------------------------------
# The task and its reward
# --------------------------------------------------------------------------


def test_the_prompts_are_the_counts_of_one_to_five_steps_in_digit_tokens():
    assert [VOCAB[t] for t in DIGIT_TOKENS] == list("0123456789")
    assert len(PROMPTS) == 35
    assert all(1 <= b - a <= 5 and 0 <= a < b <= 9 for a, b in PROMPTS)
    assert [VOCAB[t] for t in right_response(PROMPTS.index((3, 5)))] == ["3", "4", "5", "<eos>"]


def test_the_reward_tells_right_wrong_and_malformed_apart():
    prompt = PROMPTS.index((3, 5))
    batch = responses_of(
        prompt,
        "3 4 5 <eos>",  # right
        "3 4 <eos>",  # stopped early: wrong, well formed
        "3 4 5 6 <eos>",  # overshot: wrong, well formed
        "3 4 + 5 <eos>",  # a non-digit: malformed
        "<eos>",  # an empty answer: malformed
        " ".join(["3"] * MAX_LEN),  # no <eos> within MAX_LEN tokens: truncated, malformed
    )
    reward, right, malformed = rewards(batch)
    assert reward[0].tolist() == [REWARD_RIGHT, REWARD_WRONG, REWARD_WRONG] + [REWARD_MALFORMED] * 3
    assert right[0].tolist() == [True] + [False] * 5
    assert malformed[0].tolist() == [False] * 3 + [True] * 3
    assert batch.truncated[0].tolist() == [False] * 5 + [True]
    assert batch.lengths[0].tolist() == [4, 3, 5, 5, 1, MAX_LEN]


def test_what_padding_holds_never_changes_a_reward_or_a_log_probability():
    model = random_model(1)
    batch = random_responses(model, 2)
    noisy = Responses(batch.prompts, np.where(batch.mask, batch.tokens, 13), batch.mask)
    assert all(np.array_equal(x, y) for x, y in zip(rewards(batch), rewards(noisy), strict=True))
    assert np.array_equal(score(model, pack(batch)).logp, score(model, pack(noisy)).logp)


# --------------------------------------------------------------------------
# Sampling and log-probabilities
# --------------------------------------------------------------------------


def test_inverse_cdf_picks_the_token_whose_interval_holds_the_uniform():
    probs = np.array([0.25, 0.0, 0.5, 0.25])
    uniforms = np.array([0.0, 0.2499, 0.25, 0.7499, 0.75, 0.9999999])
    assert inverse_cdf(np.tile(probs, (6, 1)), uniforms).tolist() == [0, 0, 2, 2, 3, 3]


def test_a_sampled_response_stops_at_eos_and_is_padded_after_it():
    model = random_model(3)
    batch = random_responses(model, 4, batch=40)
    for run in range(model.runs):
        for tokens, mask in zip(batch.tokens[run], batch.mask[run], strict=True):
            n = mask.sum()
            assert mask[:n].all()  # the tokens come first
            assert not mask[n:].any()
            assert (tokens[n:] == EOS).all()
            assert (tokens[: n - 1] != EOS).all()  # <eos> only at the end, if at all
            assert tokens[n - 1] == EOS or n == MAX_LEN


def test_each_token_is_drawn_from_the_models_next_token_probabilities():
    """Token t of a response is the inverse CDF, at its uniform, of the model's probabilities
    given the prompt, position t and the token before: what ``score`` computes."""
    model = random_model(5)
    rng = np.random.default_rng(6)
    prompts = rng.integers(len(PROMPTS), size=(2, 30))
    uniforms = rng.random((2, 30, MAX_LEN))
    batch = sample(model, prompts, uniforms)
    logits, _ = model.forward(features(prompts, np.array(0), np.full((2, 30), BOS)))
    first = inverse_cdf(np.exp(log_softmax(logits)), uniforms[..., 0])
    assert np.array_equal(batch.tokens[..., 0], first)
    packed = pack(batch)
    probs = np.exp(score(model, packed).log_probs)
    drawn = inverse_cdf(probs, gathered(uniforms, packed.rows))
    assert np.array_equal(
        np.where(packed.valid, drawn, 0), np.where(packed.valid, packed.tokens, 0)
    )


def test_packing_gives_the_numbers_of_the_whole_padded_batch():
    """Scoring only the tokens (packed rows) gives each token what the model gives it when
    every position of every response is computed; each row's probabilities sum to 1."""
    model = random_model(10)
    batch = random_responses(model, 11, batch=12)
    runs, b, t = batch.tokens.shape
    previous = np.concatenate([np.full((runs, b, 1), BOS), batch.tokens[..., :-1]], axis=-1)
    x = features(batch.prompts[..., None], np.arange(t), previous)
    logits, _ = model.forward(x.reshape(runs, b * t, -1))
    full = np.take_along_axis(log_softmax(logits), batch.tokens.reshape(runs, -1, 1), axis=-1)
    expected = np.where(batch.mask, full.reshape(runs, b, t), 0.0)
    scored = score(model, pack(batch))
    assert np.allclose(scored.logp, expected, rtol=0, atol=1e-13)
    assert np.allclose(np.exp(scored.log_probs).sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert (scored.logp <= 0).all()


def test_right_answer_probability_is_the_product_of_the_right_tokens_probabilities():
    model = random_model(12)
    exact = right_answer_probability(model)
    prompt = PROMPTS.index((6, 9))
    batch = responses_of(prompt, " ".join(VOCAB[t] for t in right_response(prompt)))
    for run in range(model.runs):
        single = TinyLM([p[run : run + 1] for p in model.params])
        alone = np.exp(score(single, pack(batch)).logp.sum())
        assert exact[run, prompt] == pytest.approx(alone, rel=1e-12)


# --------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------


@pytest.mark.parametrize("objective", ["grpo", "dr_grpo", "dapo", "gspo", "cispo"])
def test_the_parameter_gradient_of_llm_clips_loss_agrees_with_finite_differences(objective):
    """The loss of llm_clip on the model's log-probabilities, after the policy moved away from
    the one that sampled (so ratios differ from 1 and some tokens are clipped).  CISPO's
    weight clip(r) is held constant (stop-gradient): its loss is sum(g0 * logp), g0 its
    gradient at the parameters of the test."""
    old_model = random_model(14)
    batch = random_responses(old_model, 15, batch=8)
    old = score(old_model, pack(batch)).logp
    rng = np.random.default_rng(16)
    model = TinyLM([p + 0.05 * rng.standard_normal(p.shape) for p in old_model.params])
    advantages = rng.normal(size=(model.runs, 8))
    options = {"objective": objective, "max_len": MAX_LEN}
    if objective == "gspo":
        options |= {"eps_low": 0.05, "eps_high": 0.05}

    def llm_clip_grad(logp):
        return np.stack([
            llm_clip.policy_loss_grad(logp[r], old[r], advantages[r], batch.mask[r], **options)
            for r in range(model.runs)
        ])  # fmt: skip

    scored = score(model, pack(batch))
    dloss_dlogp = llm_clip_grad(scored.logp)
    if objective != "cispo":  # some tokens are clipped: their gradient is 0
        assert (dloss_dlogp[batch.mask] == 0).any()

    def loss() -> float:
        new = score(model, pack(batch)).logp
        if objective == "cispo":
            return float((dloss_dlogp * new).sum())
        return sum(
            llm_clip.policy_loss(new[r], old[r], advantages[r], batch.mask[r], **options)
            for r in range(model.runs)
        )

    grads = parameter_grad(model, scored, dloss_dlogp)
    for param, grad in zip(model.params, grads, strict=True):
        largest = np.unravel_index(np.argsort(-np.abs(grad), axis=None)[:4], grad.shape)
        for index in zip(*largest, strict=True):
            numeric = central_difference(loss, param, index)
            assert grad[index] == pytest.approx(numeric, rel=1e-5, abs=1e-10)


# --------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------


def test_the_teachers_next_token_probabilities_sum_to_one():
    prompts = np.repeat(np.arange(len(PROMPTS)), V + 1)
    previous = np.tile(np.arange(V + 1), len(PROMPTS))
    assert np.allclose(teacher_probs(prompts, previous).sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def test_the_reference_is_close_to_its_teacher_and_answers_right_about_45_percent():
    model = reference_model()
    accuracy = right_answer_probability(model)[0]
    assert 0.40 <= accuracy.mean() <= 0.50
    spans = np.array([b - a for a, b in PROMPTS])
    assert accuracy[spans == 1].mean() > accuracy[spans == 5].mean() + 0.15  # longer is harder
    rng = np.random.default_rng(21)
    prompts = rng.integers(len(PROMPTS), size=(1, 2000))
    batch = sample_teacher(prompts, rng.random((1, 2000, MAX_LEN)))
    packed = pack(batch)
    scored = score(model, packed)
    previous = np.concatenate([np.full((1, 2000, 1), BOS), batch.tokens[..., :-1]], axis=-1)
    teacher = teacher_probs(np.broadcast_to(prompts[..., None], previous.shape), previous)
    teacher = np.take_along_axis(teacher.reshape(1, -1, V), packed.rows[..., None], axis=1)
    log_teacher = np.log(np.where(teacher > 0, teacher, 1.0))  # 0 * log 0 counts as 0
    kl = (teacher * (log_teacher - scored.log_probs)).sum(axis=-1)
    assert kl[packed.valid].mean() < 0.02  # nats per token
