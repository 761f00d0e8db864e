"""Notebook 7's exercises: GRPO's loss and GSPO's loss, checked against llm_clip.

Every implementation here is written as a learner would (numpy, loops, masked arrays), with
switchable mistakes from the trackers notebook 7 cites; the checker must pass the correct ones in
all three styles and name each mistake, alone and in pairs.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

import llm_clip
from ppo_viz.exercises.llm import (
    EXCLUSIVE,
    MISTAKES,
    battery,
    check_grpo_loss,
    check_gspo_loss,
    grpo_answer,
    gspo_answer,
)
from ppo_viz.numbers import rounded

# -- GRPO's loss, three ways -------------------------------------------------------------------


def grpo_numpy(
    logp_new, logp_old, rewards, mask, group_size, eps=0.2, beta=0.0, logp_ref=None, mistakes=()
):
    groups = rewards.reshape(-1, group_size)
    std = groups.std(axis=1, ddof=0 if "population_std" in mistakes else 1, keepdims=True)
    a = groups - groups.mean(axis=1, keepdims=True)
    if "no_std" not in mistakes:
        a = a / (std + 1e-4)
    if "std_twice" in mistakes:
        a = a / (std + 1e-4)
    a = a.reshape(-1)[:, None]
    m = np.ones(mask.shape) if "no_mask" in mistakes else mask.astype(float)
    r = np.exp(logp_new - logp_old)
    term = np.minimum(r * a, np.clip(r, 1 - eps, 1 + eps) * a)
    if beta:
        d = logp_new - logp_ref if "kl_direction" in mistakes else logp_ref - logp_new
        k3 = np.exp(d) - d - 1
        term = term + beta * k3 if "kl_sign" in mistakes else term - beta * k3
    if "token_mean" in mistakes:
        loss = -(term * m).sum() / m.sum()
    else:
        loss = -((term * m).sum(axis=1) / m.sum(axis=1)).mean()
    return float(-loss if "sign" in mistakes else loss)


def grpo_loops(logp_new, logp_old, rewards, mask, group_size, eps=0.2, beta=0.0, logp_ref=None):
    advantages = []
    for start in range(0, len(rewards), group_size):
        group = [float(x) for x in rewards[start : start + group_size]]
        mean = sum(group) / len(group)
        std = math.sqrt(sum((x - mean) ** 2 for x in group) / (len(group) - 1))
        advantages += [(x - mean) / (std + 1e-4) for x in group]
    total = 0.0
    for i, a in enumerate(advantages):
        terms = []
        for t in range(mask.shape[1]):
            if not mask[i, t]:
                continue
            r = math.exp(logp_new[i, t] - logp_old[i, t])
            term = min(r * a, min(max(r, 1 - eps), 1 + eps) * a)
            if beta:
                d = logp_ref[i, t] - logp_new[i, t]
                term -= beta * (math.exp(d) - d - 1)
            terms.append(term)
        total += sum(terms) / len(terms)
    return -total / len(advantages)


def grpo_masked(logp_new, logp_old, rewards, mask, group_size, eps=0.2, beta=0.0, logp_ref=None):
    groups = rewards.reshape(-1, group_size)
    a = (groups - groups.mean(axis=1, keepdims=True)) / (
        groups.std(axis=1, ddof=1, keepdims=True) + 1e-4
    )
    r = np.ma.masked_array(np.exp(logp_new - logp_old), mask=~mask)
    a = a.reshape(-1, 1)
    term = np.ma.minimum(r * a, np.ma.clip(r, 1 - eps, 1 + eps) * a)
    if beta:
        d = np.ma.masked_array(logp_ref - logp_new, mask=~mask)
        term = term - beta * (np.ma.exp(d) - d - 1)
    return -float(term.mean(axis=1).mean())


# -- GSPO's loss, three ways -------------------------------------------------------------------


def gspo_numpy(logp_new, logp_old, advantages, mask, eps_low=3e-4, eps_high=4e-4, mistakes=()):
    m = np.ones(mask.shape) if "no_mask" in mistakes else mask.astype(float)
    log_ratio, n = (logp_new - logp_old) * m, m.sum(axis=1)
    if "product" in mistakes:
        s = np.exp(log_ratio.sum(axis=1))
    else:
        s = np.exp(log_ratio.sum(axis=1) / n)
    a = advantages
    if "token_clip" in mistakes:
        r = np.exp(logp_new - logp_old)
        terms = np.minimum(r * a[:, None], np.clip(r, 1 - eps_low, 1 + eps_high) * a[:, None])
        per_answer = (terms * m).sum(axis=1) / n
    else:
        per_answer = np.minimum(s * a, np.clip(s, 1 - eps_low, 1 + eps_high) * a)
    loss = -per_answer.mean()
    return float(-loss if "sign" in mistakes else loss)


def gspo_loops(logp_new, logp_old, advantages, mask, eps_low=3e-4, eps_high=4e-4):
    total = 0.0
    for i, a in enumerate(advantages):
        gaps = [logp_new[i, t] - logp_old[i, t] for t in range(mask.shape[1]) if mask[i, t]]
        s = math.exp(sum(gaps) / len(gaps))
        total += min(s * a, min(max(s, 1 - eps_low), 1 + eps_high) * a)
    return -total / len(advantages)


def gspo_masked(logp_new, logp_old, advantages, mask, eps_low=3e-4, eps_high=4e-4):
    s = np.ma.exp(np.ma.masked_array(logp_new - logp_old, mask=~mask).mean(axis=1)).filled()
    return -float(
        np.mean(np.minimum(s * advantages, np.clip(s, 1 - eps_low, 1 + eps_high) * advantages))
    )


def with_mistakes(function, *mistakes):
    def learner(*args):
        return function(*args, mistakes=mistakes)

    return learner


CHECKS = {"grpo": (check_grpo_loss, grpo_numpy), "gspo": (check_gspo_loss, gspo_numpy)}


# -- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "function"),
    [(check_grpo_loss, f) for f in (grpo_numpy, grpo_loops, grpo_masked)]
    + [(check_gspo_loss, f) for f in (gspo_numpy, gspo_loops, gspo_masked)],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_a_correct_implementation_passes_in_each_style(check, function):
    result = check(function)
    assert result.passed, str(result)
    assert result.matching_core == result.core_batches == len(battery(function.__name__[:4]))
    assert "passed" in result.headline()


def test_the_reference_answers_are_llm_clips():
    for batch in battery("grpo"):
        group_size, eps, beta, ref = batch.extras
        a = llm_clip.group_advantages(batch.advantages, group_size)
        assert grpo_answer(batch) == llm_clip.policy_loss(
            batch.logp_new,
            batch.logp_old,
            a,
            batch.mask,
            objective="grpo",
            eps_low=eps,
            logp_ref=ref,
            kl_coef=beta,
        )
    for batch in battery("gspo"):
        assert gspo_answer(batch) == llm_clip.policy_loss(
            batch.logp_new,
            batch.logp_old,
            batch.advantages,
            batch.mask,
            objective="gspo",
            eps_low=batch.extras[0],
            eps_high=batch.extras[1],
        )


def _single_mistakes(exercise: str) -> list[tuple[str, str]]:
    return [(exercise, m) for group in EXCLUSIVE[exercise] for m in group]


@pytest.mark.parametrize(
    ("exercise", "mistake"), _single_mistakes("grpo") + _single_mistakes("gspo")
)
def test_each_mistake_is_named_alone(exercise, mistake):
    check, function = CHECKS[exercise]
    result = check(with_mistakes(function, mistake))
    assert result.mistakes == (mistake,), str(result)
    (finding,) = result.findings
    assert finding.title == MISTAKES[mistake][0]
    assert finding.evidence.startswith("On batch")


@pytest.mark.parametrize(
    ("exercise", "mistakes"),
    [
        ("grpo", ("kl_sign", "no_std")),
        ("grpo", ("population_std", "token_mean")),
        ("grpo", ("no_mask", "sign")),
        ("gspo", ("no_mask", "product")),
        ("gspo", ("sign", "token_clip")),
    ],
)
def test_two_mistakes_are_named_together(exercise, mistakes):
    check, function = CHECKS[exercise]
    assert check(with_mistakes(function, *mistakes)).mistakes == tuple(sorted(mistakes))


def test_every_battery_tells_each_single_mistake_apart():
    """No two single mistakes give the same answers on a whole battery (else one hides)."""
    for exercise, answer in (("grpo", grpo_answer), ("gspo", gspo_answer)):
        seen = {}
        for mistake in ["", *(m for group in EXCLUSIVE[exercise] for m in group)]:
            key = frozenset({mistake} - {""})
            answers = tuple(round(answer(b, key), 12) for b in battery(exercise))
            assert answers not in seen, (mistake, seen.get(answers))
            seen[answers] = mistake


def test_an_empty_body_an_error_a_wrong_type_and_a_changed_input_are_reported():
    def empty(*args):
        raise NotImplementedError

    assert not check_grpo_loss(empty).implemented

    def raises(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
        return np.min(logp_new, logp_old)  # np.min's second argument is the axis

    result = check_grpo_loss(raises)
    assert result.mistakes[0] == "error"
    assert "raises" in str(result)
    assert "np.minimum" in str(result)

    def an_array(logp_new, logp_old, advantages, mask, eps_low, eps_high):
        return np.zeros(len(advantages))

    assert check_gspo_loss(an_array).mistakes[0] == "wrong_type"

    def changes_rewards(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
        rewards -= rewards.mean()  # in place: the caller's rewards change
        return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)

    result = check_grpo_loss(changes_rewards)
    assert "mutated" in result.mistakes
    assert "rewards" in str(result)

    def writes_mask(logp_new, logp_old, advantages, mask, eps_low, eps_high):
        mask[:, 0] = True
        return 0.0

    assert "read-only" in str(check_gspo_loss(writes_mask))
    assert check_gspo_loss("gspo_loss").mistakes == ("error",)


def test_a_function_that_never_returns_is_stopped_at_the_time_limit():
    def sleeps(*args):
        time.sleep(30)

    started = time.perf_counter()
    result = check_gspo_loss(sleeps, time_limit_s=0.3)
    assert result.mistakes == ("timeout",)
    assert time.perf_counter() - started < 10


def test_a_placeholder_is_a_mismatch_with_the_batch_it_fails_on():
    result = check_gspo_loss(lambda *args: 0.25)
    assert result.mistakes == ("mismatch",)
    assert "returns 0.25 on every batch" in str(result)
    first = battery("gspo")[0]  # the smallest batch, where llm_clip's answer differs
    assert f"On {first.label}: expected {rounded(gspo_answer(first))}, got 0.25." in str(result)


def test_the_card_shows_the_mistakes_as_html():
    html = check_grpo_loss(with_mistakes(grpo_numpy, "token_mean"))._repr_html_()
    assert "ppo-check-needs-work" in html
    assert MISTAKES["token_mean"][0] in html


def test_a_float32_answer_is_close_but_not_to_float64_precision():
    result = check_gspo_loss(lambda *args: float(np.float32(gspo_masked(*args))))
    assert result.mistakes == ("precision",), str(result)
    assert re.search(r"agree with the exact ones to about [78] significant digits", str(result))


def test_a_time_limit_that_is_not_a_positive_number_is_refused():
    with pytest.raises(ValueError, match=r"^time_limit_s must be a positive number"):
        check_grpo_loss(grpo_numpy, time_limit_s=0)


def test_an_unknown_exercise_has_no_battery_and_the_error_names_it():
    with pytest.raises(ValueError, match=r"exercise must be one of \('grpo', 'gspo'\), got 'GRPO'"):
        battery("GRPO")
