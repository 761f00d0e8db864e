"""The GRPO-family trainers on the tiny language model (tiny_rlhf.py).

* With mu = 1 every ratio is exactly 1: nothing is clipped, and the methods that differ only
  in their clip are the same run, bit for bit (GRPO, GSPO and the unclipped surrogate; DAPO
  with and without clip-higher, and CISPO).
* The unclipped control never clips; GSPO's tiny range clips most tokens once mu > 1.
* Runs are seeded, independent of the seeds and methods beside them, and share their
  prompts and uniforms across methods (common random numbers).
* Each update's gradient is llm_clip's, chained through the model; PPO's GAE follows its
  definition; training improves on the reference.
* Settings and method names are checked by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import llm_clip
from tiny_lm import (
    MAX_LEN,
    pack,
    parameter_grad,
    reference_model,
    rewards,
    right_answer_probability,
    sample,
    score,
)
from tiny_rlhf import (
    CURVES,
    METHODS,
    History,
    Trainer,
    TrainSettings,
    methods_named,
    train,
)

SHORT = TrainSettings(iterations=6, learning_rate=0.02)


def same_runs(a: History, b: History) -> bool:
    return all(np.array_equal(getattr(a, n), getattr(b, n), equal_nan=True) for n in CURVES) and (
        np.array_equal(a.score, b.score)
    )


def test_with_one_update_nothing_is_clipped_and_only_the_aggregation_matters():
    runs = train(list(METHODS.values()), TrainSettings(iterations=6, updates=1), (0, 1))
    for history in runs.values():
        assert (history.clip_fraction == 0).all()
    assert same_runs(runs["grpo"], runs["gspo"])
    assert same_runs(runs["grpo"], runs["unclipped"])
    assert same_runs(runs["grpo"], runs["grpo_tight"])  # the controls of GSPO's band
    assert same_runs(runs["grpo"], runs["gspo_wide"])
    assert same_runs(runs["dapo"], runs["dapo_sym"])
    assert same_runs(runs["dapo"], runs["cispo"])
    assert not same_runs(runs["grpo"], runs["dapo"])  # seq-mean-token-mean against token-mean
    assert not same_runs(runs["grpo"], runs["dr_grpo"])


def test_the_unclipped_control_never_clips_and_gspo_clips_most_tokens():
    runs = train([METHODS[k] for k in ("unclipped", "grpo", "gspo")], SHORT, (0, 1))
    assert (runs["unclipped"].clip_fraction == 0).all()
    assert runs["grpo"].clip_fraction.max() > 0
    assert runs["gspo"].clip_fraction.mean() > 0.3 > runs["grpo"].clip_fraction.mean()
    by_length = {k: np.nanmean(runs[k].clip_by_length, axis=0) for k in runs}  # lengths 3 to 7
    assert (by_length["unclipped"] == 0).all()
    assert (by_length["gspo"] > by_length["grpo"]).all()


def test_a_run_depends_only_on_its_seed_and_method_and_methods_share_each_seeds_draws():
    trainer = Trainer([METHODS["grpo"], METHODS["cispo"]], SHORT, (5, 6))
    prompts, uniforms = trainer.draw()
    assert np.array_equal(prompts[:2], prompts[2:])
    assert np.array_equal(uniforms[:2], uniforms[2:])
    assert (np.bincount(prompts[0]) % SHORT.group_size == 0).all()  # whole groups
    alone = train([METHODS["dapo"]], SHORT, (3,))["dapo"]
    together = train([METHODS["ppo"], METHODS["dapo"]], SHORT, (1, 3))["dapo"]
    for name in [*CURVES, "score"]:
        assert np.array_equal(getattr(alone, name)[0], getattr(together, name)[1], equal_nan=True)
    again = train([METHODS["dapo"]], SHORT, (3,))["dapo"]
    assert same_runs(alone, again)


def test_per_seed_references_and_a_prompt_pool_change_only_the_start_and_the_draws():
    """Each seed's runs start from the reference distilled with that seed, alone or beside
    others; training draws only from the pool; the defaults are the shared reference, all 35."""
    pool = [0, 6, 12, 18, 24, 30]
    trainer = Trainer(
        [METHODS["grpo"], METHODS["dapo"]], SHORT, (5, 6), per_seed_reference=True, prompts=pool
    )
    for run, seed in enumerate((5, 6, 5, 6)):
        own = reference_model(seed).params
        assert all(
            np.array_equal(p[run], q[0]) for p, q in zip(trainer.policy.params, own, strict=True)
        )
    assert not np.array_equal(own[0], reference_model().params[0])
    assert set(np.concatenate([trainer.draw()[0].ravel() for _ in range(20)])) <= set(pool)
    alone = train([METHODS["dapo"]], SHORT, (6,), per_seed_reference=True, prompts=pool)["dapo"]
    together = train([METHODS["dapo"]], SHORT, (5, 6), per_seed_reference=True, prompts=pool)
    assert np.array_equal(alone.accuracy[0], together["dapo"].accuracy[1])
    assert alone.score[0] == alone.accuracy[0].mean()
    default = train([METHODS["dapo"]], SHORT, (6,))["dapo"]
    named = train([METHODS["dapo"]], SHORT, (6,), prompts=range(35))["dapo"]
    assert same_runs(default, named)
    assert not same_runs(default, alone)


def test_an_update_follows_llm_clips_gradient_through_the_model():
    """The first update of a run is Adam's first step, ``lr * g / (|g| + 1e-8)``, on the
    parameter gradient that llm_clip's gradient of the run's batch gives through the model."""
    settings = TrainSettings(iterations=1, updates=1, learning_rate=0.01)
    trainer = Trainer([METHODS["dr_grpo"]], settings, (4,))
    twin = Trainer([METHODS["dr_grpo"]], settings, (4,))  # the same seed: the same draws
    before = [p.copy() for p in trainer.policy.params]
    trainer.iteration()
    responses = sample(twin.policy, *twin.draw())
    reward, _, _ = rewards(responses)
    scored = score(twin.policy, pack(responses))
    advantages = llm_clip.group_advantages(reward[0], settings.group_size, scale_by_std=False)
    grad = llm_clip.policy_loss_grad(
        scored.logp[0], scored.logp[0], advantages, responses.mask[0], objective="dr_grpo",
        max_len=MAX_LEN,
    )  # fmt: skip
    grads = parameter_grad(twin.policy, scored, grad[None])
    for old, new, g in zip(before, trainer.policy.params, grads, strict=True):
        step = settings.learning_rate * g / (np.abs(g) + 1e-8)
        assert np.allclose(old - new, step, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("key", ["grpo", "ppo", "gspo"])
def test_training_answers_better_than_the_reference(key):
    settings = TrainSettings(iterations=25, learning_rate=0.01, updates=2)
    start = right_answer_probability(reference_model()).mean()
    history = train([METHODS[key]], settings, (0, 1, 2))[key]
    assert history.score.mean() > start + 0.2
    assert history.reward[:, -5:].mean() > history.reward[:, :3].mean()


def test_the_history_records_what_its_docstring_says():
    history = train([METHODS["grpo"]], SHORT, (0,))["grpo"]
    assert history.reward.shape == (1, SHORT.iterations)
    assert (history.length >= 1).all()
    assert (history.length <= MAX_LEN).all()
    assert (history.entropy > 0).all()


@pytest.mark.parametrize(
    ("make", "said"),
    [  # bandit.checked_fields's NaN, not-whole and str cases: test_why_clip's, test_epochs'
        (lambda: TrainSettings(updates=0), "updates must be between 1 and 64, got 0"),
        (lambda: TrainSettings(kl_coef=True), "kl_coef must be a number, got bool"),
        (lambda: methods_named(["GRPO"]), "no method is named 'GRPO'; choose from grpo, unclipped"),
        (lambda: train([], SHORT, (0,)), "at least one method"),
        (
            lambda: train([METHODS["grpo"]], SHORT, (0,), prompts=[1, 1, 2, 3]),
            "prompts lists 1 twice",
        ),
        (lambda: train([METHODS["grpo"]], SHORT, (0,), prompts=[0, 35]), "from 0 to 34"),
        (lambda: train([METHODS["grpo"]], SHORT, (0,), prompts=[0, 1]), "at least 4"),
        (lambda: train([METHODS["grpo"]], SHORT, (0,), prompts="01"), "list of prompt numbers"),
    ],
)
def test_bad_settings_and_unknown_methods_are_refused_by_name(make, said):
    with pytest.raises((TypeError, ValueError), match=said):
        make()
