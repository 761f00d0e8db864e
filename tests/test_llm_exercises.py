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
    groups = rewards.reshape(-1, len(rewards) if "batch_std" in mistakes else group_size)
    std = groups.std(axis=1, ddof=0 if "population_std" in mistakes else 1, keepdims=True)
    a = groups - groups.mean(axis=1, keepdims=True)
    if "no_std" not in mistakes:
        a = a / (std + 1e-4)
    if "std_twice" in mistakes:
        a = a / (std + 1e-4)
    a = a.reshape(-1)[:, None]
    eps = 0.2 if "fixed_eps" in mistakes else eps
    m = np.ones(mask.shape) if "no_mask" in mistakes else mask.astype(float)
    d = logp_new - logp_old  # masked before the exp, unless the mistake is to mask after it
    d = d if "padding_nan" in mistakes else np.where(m > 0, d, 0.0)
    r = np.exp(-d if "ratio_inverted" in mistakes else d)
    term = np.clip(r, 1 - eps, 1 + eps) * a
    if "clip_only" not in mistakes:
        term = np.minimum(r * a, term)
    if beta:
        d = logp_new - logp_ref if "kl_direction" in mistakes else logp_ref - logp_new
        k3 = np.exp(d) - d - 1
        term = term + beta * k3 if "kl_sign" in mistakes else term - beta * k3
    if "token_mean" in mistakes:
        loss = -(term * m).sum() / m.sum()
    elif "over_T" in mistakes:
        loss = -np.mean(term * m, axis=1).mean()
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
    elif "over_T" in mistakes:
        s = np.exp(np.mean(log_ratio, axis=1))
    elif "arithmetic_mean" in mistakes:
        s = (np.exp(log_ratio) * m).sum(axis=1) / n
    else:
        s = np.exp(log_ratio.sum(axis=1) / n)
    s = 1 / s if "ratio_inverted" in mistakes else s
    a = advantages
    if "token_clip" in mistakes:
        r = np.exp(logp_new - logp_old)
        terms = np.minimum(r * a[:, None], np.clip(r, 1 - eps_low, 1 + eps_high) * a[:, None])
        per_answer = (terms * m).sum(axis=1) / n
    elif "clip_only" in mistakes:
        per_answer = np.clip(s, 1 - eps_low, 1 + eps_high) * a
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


def raises(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    return np.min(logp_new, logp_old)  # np.min's second argument is the axis


def an_array(logp_new, logp_old, advantages, mask, eps_low, eps_high):
    return np.zeros(len(advantages))


def changes_rewards(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    rewards -= rewards.mean()  # in place: the caller's rewards change
    return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)


def writes_mask(logp_new, logp_old, advantages, mask, eps_low, eps_high):
    mask[:, 0] = True
    return 0.0


def writes_logp_new(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    logp_new[~mask] = 0.0  # the padding zeroed in the caller's 2-D array
    return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)


def writes_logp_old(logp_new, logp_old, advantages, mask, eps_low, eps_high):
    logp_old[:, -1] = 0.0  # the last token, padding in every batch
    return gspo_numpy(logp_new, logp_old, advantages, mask, eps_low, eps_high)


def sqrt_of_var(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    groups = rewards.reshape(-1, group_size)  # std as sqrt(var + 1e-4): 1e-5 off, not float32's
    a = (groups - groups.mean(axis=1, keepdims=True)) / np.sqrt(
        groups.var(axis=1, ddof=1, keepdims=True) + 1e-4
    )
    r = np.exp(np.where(mask, logp_new - logp_old, 0.0))
    a = a.reshape(-1, 1)
    term = np.minimum(r * a, np.clip(r, 1 - eps, 1 + eps) * a)
    if beta:
        d = logp_ref - logp_new
        term = term - beta * (np.exp(d) - d - 1)
    return -float((np.where(mask, term, 0.0).sum(axis=1) / mask.sum(axis=1)).mean())


def no_token_axis(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    groups = rewards.reshape(-1, group_size)
    a = (groups - groups.mean(axis=1, keepdims=True)) / (groups.std(axis=1, ddof=1) + 1e-4)[:, None]
    r = np.exp(np.where(mask, logp_new - logp_old, 0.0))
    a = a.reshape(-1)  # (B,): r * a lines it up with T, an error unless T == B
    term = np.minimum(r * a, np.clip(r, 1 - eps, 1 + eps) * a)
    return -float((np.where(mask, term, 0.0).sum(axis=1) / mask.sum(axis=1)).mean())


def empty(*args):
    raise NotImplementedError


FIRST = battery("gspo")[0]  # the smallest batch, where llm_clip's answer differs from 0.25
#: (exercise, a learner's function, the keys the checker names, texts its result shows)
CASES = [
    *[("grpo", f, ()) for f in (grpo_numpy, grpo_loops, grpo_masked)],
    *[("gspo", f, ()) for f in (gspo_numpy, gspo_loops, gspo_masked)],
    *[  # each mistake alone, and pairs
        (exercise, with_mistakes(CHECKS[exercise][1], *keys.split()), tuple(sorted(keys.split())))
        for exercise, keys in [(e, m) for e, groups in EXCLUSIVE.items() for g in groups for m in g]
        + [("grpo", "kl_sign no_std"), ("grpo", "population_std token_mean")]
        + [("grpo", "no_mask sign"), ("gspo", "no_mask product"), ("gspo", "sign token_clip")]
        + [("grpo", "fixed_eps sign"), ("grpo", "batch_std over_T"), ("grpo", "clip_only kl_sign")]
        + [("grpo", "padding_nan sign"), ("gspo", "arithmetic_mean sign")]
        + [("gspo", "clip_only no_mask"), ("gspo", "over_T ratio_inverted")]
    ],
    ("grpo", empty, ("not_implemented",), "grpo_loss: not implemented yet."),
    ("grpo", raises, ("error",), "in raises", "np.minimum"),
    ("gspo", an_array, ("wrong_type",)),
    ("grpo", changes_rewards, ("mutated",), "rewards was"),
    ("gspo", writes_mask, ("mutated",), "wrote into a read-only input", "mask[:, 0] = True"),
    ("grpo", writes_logp_new, ("mutated",), "logp_new was ["),
    ("gspo", writes_logp_old, ("mutated",), "logp_old was ["),
    ("grpo", with_mistakes(grpo_numpy, "padding_nan"), ("padding_nan",), "np.where(mask"),
    (
        "grpo",
        sqrt_of_var,
        ("mismatch",),
        re.compile(r"\A(?![\s\S]*float32)"),  # no float32 excuse for a wrong formula
        re.compile(r"expected -?0\.0*\d{6,}, got -?0\.0*\d{6,}\."),  # digits enough to differ
    ),
    ("grpo", no_token_axis, ("error", "mismatch"), "could not be broadcast", "a[:, None]"),
    ("gspo", "gspo_loss", ("error",), "expects your function"),
    (
        "gspo",
        lambda *args: 0.25,
        ("mismatch",),
        "returns 0.25 on every batch",
        f"On {FIRST.label}: expected {rounded(gspo_answer(FIRST))}, got 0.25.",
    ),
    (
        "gspo",
        lambda *args: float(np.float32(gspo_masked(*args))),
        ("precision",),
        re.compile(r"agree with the exact ones to about [78] significant digits"),
    ),
]


@pytest.mark.parametrize(
    ("exercise", "function", "mistakes", "texts"),
    [(exercise, function, mistakes, texts) for exercise, function, mistakes, *texts in CASES],
    ids=[f"{c[0]}-{getattr(c[1], '__name__', c[1])}-{'+'.join(c[2])}" for c in CASES],
)
def test_each_function_gets_its_diagnosis(exercise, function, mistakes, texts):
    """A correct function passes in each style (numpy, loops, masked arrays); each mistake is
    named alone and in pairs, with its title on the card and the batch where it shows."""
    result = CHECKS[exercise][0](function)
    text, card = str(result), result._repr_html_()
    assert result.mistakes == mistakes, text
    assert f"ppo-check-{result.status.replace(' ', '-')}" in card
    if not mistakes:
        assert result.matching_core == result.core_batches == len(battery(exercise))
        assert "passed" in result.headline()
    for finding in result.findings:
        if finding.key in MISTAKES:
            assert finding.title == MISTAKES[finding.key][0]
            assert finding.evidence.startswith("On batch")
            assert finding.title in card
    for shown in texts:
        assert shown.search(text) if isinstance(shown, re.Pattern) else shown in text, shown


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


def test_a_function_that_never_returns_is_stopped_at_the_time_limit():
    def sleeps(*args):
        time.sleep(30)

    started = time.perf_counter()
    result = check_gspo_loss(sleeps, time_limit_s=0.3)
    assert result.mistakes == ("timeout",)
    assert time.perf_counter() - started < 10


def test_an_unknown_exercise_has_no_battery_and_the_error_names_it():
    with pytest.raises(ValueError, match=r"exercise must be one of \('grpo', 'gspo'\), got 'GRPO'"):
        battery("GRPO")
