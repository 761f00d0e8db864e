"""Notebooks 7's and 8's exercises: GRPO's loss, GSPO's loss and GAE, checked against llm_clip.

Every implementation here is written as a learner would (numpy, loops, masked arrays), with
switchable mistakes from the trackers the notebooks cite; the checker must pass the correct ones
in every style and name each mistake, alone and in pairs: one table (:data:`CASES`), one test.
"""

from __future__ import annotations

import gc
import math
import os
import re
from multiprocessing.connection import Connection

import numpy as np
import pytest
from test_exercises import assert_diagnosis

import llm_advantages
import llm_clip
from ppo_viz.exercises import check_corrected_loss, check_gae, gae, rollout
from ppo_viz.exercises.llm import (
    EXCLUSIVE,
    battery,
    check_grpo_loss,
    check_gspo_loss,
    gspo_answer,
)
from ppo_viz.numbers import rounded

# -- GRPO's loss, three ways -------------------------------------------------------------------


def grpo_numpy(
    logp_new, logp_old, rewards, mask, group_size, eps=0.2, beta=0.0, logp_ref=None, mistakes=()
):
    groups = rewards.reshape(-1, len(rewards) if "batch_std" in mistakes else group_size)
    std = groups.std(axis=1, ddof=0 if "population_std" in mistakes else 1, keepdims=True)
    std = std + (1e-6 if "std_eps" in mistakes else 1e-4)
    if "sqrt_of_var" in mistakes:  # sqrt(var + 1e-4): 1e-5 off, not float32's rounding
        std = np.sqrt(groups.var(axis=1, ddof=1, keepdims=True) + 1e-4)
    a = groups - groups.mean(axis=1, keepdims=True)
    a = a if "no_std" in mistakes else a / std
    a = (a / std if "std_twice" in mistakes else a).reshape(-1)
    a = a if "no_token_axis" in mistakes else a[:, None]  # (B,) meets (B, T) along T
    eps = 0.2 if "fixed_eps" in mistakes else eps
    m = np.ones(mask.shape) if "no_mask" in mistakes else mask.astype(float)
    d = logp_new - logp_old  # masked before the exp, unless the mistake is to mask after it
    d = d if "padding_nan" in mistakes else np.where(m > 0, d, 0.0)
    r = np.exp(-d if "ratio_inverted" in mistakes else d)
    term = np.clip(r, 1 - eps, 1 + eps) * a
    if "clip_only" not in mistakes:
        term = (np.maximum if "max_for_min" in mistakes else np.minimum)(r * a, term)
    if beta and "no_kl" not in mistakes:
        d = logp_new - logp_ref if "kl_direction" in mistakes else logp_ref - logp_new
        k = -d if "k1" in mistakes else d**2 / 2 if "k2" in mistakes else np.exp(d) - d - 1
        k = r * k if "kl_times_ratio" in mistakes else k  # TRL 1.16's use_bias_correction_kl
        term = term + beta * k if "kl_sign" in mistakes else term - beta * k
    if "token_mean" in mistakes:
        loss = -(term * m).sum() / m.sum()
    elif "over_T" in mistakes:
        loss = -np.mean(term * m, axis=1).mean()
    else:
        loss = -((term * m).sum(axis=1) / (1 if "token_sum" in mistakes else m.sum(axis=1))).mean()
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
    a, low, high = advantages, eps_low, eps_high
    low, high = (high, low) if "bounds_swapped" in mistakes else (low, high)
    pick = np.maximum if "max_for_min" in mistakes else np.minimum
    if "token_clip" in mistakes:
        r = np.exp(logp_new - logp_old)
        terms = np.minimum(r * a[:, None], np.clip(r, 1 - low, 1 + high) * a[:, None])
        per_answer = (terms * m).sum(axis=1) / n
    elif "clip_only" in mistakes:
        per_answer = np.clip(s, 1 - low, 1 + high) * a
    else:
        per_answer = pick(s * a, np.clip(s, 1 - low, 1 + high) * a)
    per_answer = per_answer * n if "token_sum" in mistakes else per_answer  # summed over tokens
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


def in_float32(function):  # the learner's function on every float64 array cast to float32
    return lambda *args, **keywords: function(
        *(np.float32(x) if np.ndim(x) and x.dtype == float else x for x in args), **keywords
    )


def over_int64_count(*args):  # in float32, the terms' sum over an int64 count: a float64 answer
    return len(args[2]) * np.float32(gspo_masked(*args)) / np.int64(len(args[2]))


def with_mistakes(function, *mistakes):
    def learner(*args, **keywords):
        return function(*args, **keywords, mistakes=mistakes)

    return learner


# -- GAE, a loop and a vectorised way ---------------------------------------------------------


def gae_loop(rewards, values, dones, last_value, last_done, *, gamma, lam, mistakes=()):
    """CleanRL's loop (``dones[t]``: observation t starts an episode)."""
    gamma, lam = (lam, gamma) if "swapped" in mistakes else (gamma, lam)
    shifted, advantages, following = "dones_shifted" in mistakes, np.zeros_like(rewards), 0.0
    float_type = np.float32 if "float32" in mistakes else np.float64
    advantages = advantages.astype(float_type)
    steps = range(len(rewards)) if "forwards" in mistakes else reversed(range(len(rewards)))
    for t in steps:
        last = t == len(rewards) - 1
        ending = 0.0 if "last_done_ignored" in mistakes else last_done
        nonterminal = 1.0 - (dones[t] if shifted else ending if last else dones[t + 1])
        next_value = (0.0 if "no_bootstrap" in mistakes else last_value) if last else values[t + 1]
        bootstrap = 1.0 if "through_done" in mistakes else nonterminal
        delta = rewards[t] + gamma * next_value * bootstrap - values[t]
        advantages[t] = following = delta + gamma * lam * nonterminal * following
    returns = advantages.copy() if "returns_are_advantages" in mistakes else advantages + values
    if "discounted_returns" in mistakes:
        running = 0.0 if "no_bootstrap" in mistakes else last_value
        for t in reversed(range(len(rewards))):
            nonterminal = 1.0 - (last_done if t == len(rewards) - 1 else dones[t + 1])
            returns[t] = running = rewards[t] + gamma * nonterminal * running
    return advantages.astype(np.float64), returns


def gae_vectorised(rewards, values, dones, last_value, last_done, *, gamma, lam):
    """delta for every step at once, then A[t] = sum_k (gamma lam)^(k - t) delta[k], cut at the
    first new episode: one (T, T) matrix of weights (per environment)."""
    extra = (None,) * (rewards.ndim - 1)
    cut = 1.0 - np.concatenate([dones[1:], np.asarray(last_done, float)[None]])
    next_values = np.concatenate([values[1:], np.asarray(last_value, float)[None]])
    delta = rewards + gamma * next_values * cut - values
    upper = np.triu(np.ones((len(rewards),) * 2, bool))[(..., *extra)]
    steps = np.where(upper, (gamma * lam * cut)[None], 1.0)  # steps[t, j]: factor j, if j >= t
    before = np.concatenate([np.ones_like(steps[:, :1]), steps[:, :-1]], axis=1)
    advantages = np.einsum("tk...,k...->t...", np.cumprod(before, axis=1) * upper, delta)
    return advantages, advantages + values


# -- The loss with the rollout engine's corrections (notebook 9), as TRL writes it -------------


def corrected_numpy(
    logp_new, logp_old, logp_rollout, advantages, mask, logp_ref, *, mode, clip_max, threshold,
    beta, mistakes=(),
):  # fmt: skip
    if "token_mask_as_truncate" in mistakes and mode == "token_mask":
        mode = "token_truncate"
    seen = np.ones_like(mask) if "padding_counted" in mistakes else mask
    d = logp_rollout - logp_old if "ratio_inverted" in mistakes else logp_old - logp_rollout
    d = np.where(seen, d, 0.0)
    if mode.startswith("sequence"):
        total = d.sum(axis=1, keepdims=True)
        d = total / seen.sum(axis=1, keepdims=True) if "sequence_mean" in mistakes else total
    w = np.exp(d)
    truncate = mode.endswith("truncate") != ("mode_confused" in mistakes)
    w = np.minimum(w, clip_max) if truncate else np.where(w > clip_max, 0.0, w)
    logp = logp_old if "opsm_old" in mistakes else logp_new
    gap = np.where(seen, logp_rollout - logp, 0.0) * (-1 if "opsm_sign" in mistakes else 1)
    n = seen.shape[1] if "opsm_over_T" in mistakes else seen.sum(axis=1)
    statistic = gap.sum(axis=1) / (1 if "opsm_sum" in mistakes else n)
    keep = ((advantages >= 0) | (statistic <= threshold))[:, None]
    r, a = np.exp(np.where(mask, logp_new - logp_old, 0.0)), advantages[:, None]
    term = r * a if "unclipped" in mistakes else np.minimum(r * a, np.clip(r, 0.8, 1.2) * a)
    d_ref = np.where(mask, logp_ref - logp_new, 0.0)
    kl = beta * (np.exp(d_ref) - d_ref - 1)
    per_token = w * keep * (term - kl) if "kl_weighted" in mistakes else w * keep * term - kl
    return -float((np.where(mask, per_token, 0.0).sum(axis=1) / mask.sum(axis=1)).mean())


#: Each exercise's check, its learner with switchable mistakes, the groups of mistakes it
#: names (each named alone, as the learner's code writes it: k1 or k2 for kl_estimator).
CHECKS = {
    "grpo": (check_grpo_loss, grpo_numpy, EXCLUSIVE["grpo"]),
    "gspo": (check_gspo_loss, gspo_numpy, EXCLUSIVE["gspo"]),
    "gae": (check_gae, gae_loop, gae.GROUPS),
    "rollout": (check_corrected_loss, corrected_numpy, rollout.GROUPS),
}
CODES = {"kl_estimator": ("k1", "k2")}
#: Each mistake's key by the code the learner's function takes, and the exercises it has.
KEY_OF = {c: key for e in CHECKS for g in CHECKS[e][2] for key in g for c in CODES.get(key, [key])}
EXERCISE_OF = {c: {e for e in CHECKS if any(KEY_OF[c] in g for g in CHECKS[e][2])} for c in KEY_OF}
#: Pairs of mistakes made at once, by exercise.
PAIRS = {
    "grpo": "kl_sign+no_std population_std+token_mean no_mask+sign fixed_eps+sign batch_std+over_T "
    "clip_only+kl_sign padding_nan+sign k2+max_for_min",
    "gspo": "no_mask+product sign+token_clip arithmetic_mean+sign clip_only+no_mask "
    "over_T+ratio_inverted bounds_swapped+max_for_min",
    "gae": "forwards+no_bootstrap discounted_returns+swapped dones_shifted+no_bootstrap",
    "rollout": "ratio_inverted+kl_weighted mode_confused+opsm_sum padding_counted+sequence_mean",
}


def raises(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    return np.min(logp_new, logp_old)  # np.min's second argument is the axis


def changes_rewards(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    rewards -= rewards.mean()  # in place: the caller's rewards change
    return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)


def writes_mask(logp_new, logp_old, advantages, mask, eps_low, eps_high):
    mask[:, 0] = True
    return 0.0


def writes_logp_new(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    logp_new[~mask] = 0.0  # the padding zeroed in the caller's 2-D array
    return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)


def guarded_mean(logp_new, logp_old, advantages, mask, eps_low, eps_high):
    s = np.exp(np.where(mask, logp_new - logp_old, 0.0).sum(axis=1) / mask.sum(axis=1))
    terms = np.minimum(s * advantages, np.clip(s, 1 - eps_low, 1 + eps_high) * advantages)
    return -float(terms.sum() / (len(advantages) + 1e-6))  # 3e-7 off: not float32's rounding


def empty(*args, **keywords):
    raise NotImplementedError


def return_forgotten_in_1d(rewards, values, dones, last_value, last_done, *, gamma, lam):
    if np.ndim(rewards) == 2:  # the first batches are 1-D: a missing return is no placeholder
        return gae_loop(rewards, values, dones, last_value, last_done, gamma=gamma, lam=lam)
    return None


def rebinds_llm_clip(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    llm_clip.policy_loss = lambda *args, **keywords: 0.0
    return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)


def forks(*args, **keywords):
    """Both copies would answer: the checker must hear the one it started, once per batch."""
    os.fork()
    return gae_loop(*args, **keywords)


def writes_into_the_checkers_channel(*args, **keywords):
    """Bytes that are no message, into the connection the sandbox answers on (only it: another
    descriptor may be the test runner's own channel)."""
    for channel in gc.get_objects():
        if isinstance(channel, Connection) and not channel.closed and channel.writable:
            os.write(channel.fileno(), b"\0\0\0\5hello")
    return gae_loop(*args, **keywords)


def tokens_only(*args, mode, **keywords):
    """Written for the token modes; the sequence modes still raise the template's error."""
    if mode.startswith("sequence"):
        raise NotImplementedError
    return corrected_numpy(*args, mode=mode, **keywords)


def rebinds_llm_advantages(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    llm_advantages.group_advantages = lambda *args, **keywords: 0.0
    return grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)


def hides_a_change(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref):
    answer = grpo_numpy(logp_new, logp_old, rewards, mask, group_size, eps, beta, logp_ref)
    logp_new[...] = 0.0
    np.array_equal = lambda *args, **keywords: True
    return answer


def unlocks_the_mask(logp_new, logp_old, advantages, mask, eps_low, eps_high):
    mask.setflags(write=True)
    return gspo_numpy(logp_new, logp_old, advantages, mask, eps_low, eps_high)


FLOAT32_DIGITS = re.compile(r"agree with the exact ones to about [5-8] significant digits")
NOT_A_GRADIENT = re.compile(r"\A(?![\s\S]*(gradient|finite difference))")  # no gradient here
FIRST = battery("gspo")[0]  # the smallest batch, where llm_clip's answer differs from 0.25
NO_FLOAT32 = re.compile(r"\A(?![\s\S]*float32)")  # no float32 excuse for a wrong formula
#: (exercise, a learner's function, the keys the checker names, texts its result shows)
CASES = [
    *[("grpo", f, ()) for f in (grpo_numpy, grpo_loops, grpo_masked)],
    *[("gspo", f, ()) for f in (gspo_numpy, gspo_loops, gspo_masked)],
    *[("gae", f, ()) for f in (gae_loop, gae_vectorised)],
    *[  # each mistake alone (each form the learner's code writes), and pairs
        (
            exercise,
            with_mistakes(CHECKS[exercise][1], *codes),
            tuple(sorted(map(KEY_OF.get, codes))),
        )
        for exercise, codes in [
            *[(e, [code]) for e in CHECKS for code in KEY_OF if e in EXERCISE_OF[code]],
            *[(e, pair.split("+")) for e, pairs in PAIRS.items() for pair in pairs.split()],
        ]
    ],
    ("grpo", empty, ("not_implemented",), "grpo_loss: not implemented yet."),
    ("gae", empty, ("not_implemented",), "gae: not implemented yet."),
    ("gae", return_forgotten_in_1d, ("wrong_type",), "returned None"),
    *[
        ("rollout", with_mistakes(corrected_numpy, v), ("mismatch",))  # no key names these
        for v in ("unclipped", "token_mask_as_truncate", "opsm_old", "opsm_over_T")
    ],
    ("gae", forks, (), "matches llm_clip.gae on all"),
    ("gae", lambda r, *_, **k: (np.full(r.shape, 1e39),) * 2, ("mismatch",)),  # past float32's
    ("rollout", tokens_only, ("error",), "raised NotImplementedError"),
    ("gae", writes_into_the_checkers_channel, ("error",), "wrote into the checker's channel"),
    ("grpo", rebinds_llm_clip, ("patched_module",), "llm_clip.policy_loss"),
    ("grpo", rebinds_llm_advantages, ("patched_module",), "llm_advantages.group_advantages"),
    ("grpo", hides_a_change, ("mutated", "patched_module"), "logp_new was [", "array_equal"),
    ("gspo", unlocks_the_mask, ("mutated",), "wrote into a read-only input"),
    ("grpo", raises, ("error",), "in raises", "np.minimum"),
    ("gspo", lambda *args: np.zeros(len(args[2])), ("wrong_type",)),
    ("gae", lambda *args, **keywords: gae_loop(*args, **keywords)[0], ("wrong_type",), "a tuple"),
    ("gae", lambda *args, **keywords: list(gae_loop(*args, **keywords)), ("wrong_type",)),
    (
        "gae",
        lambda r, *_, **k: (0 * r,) * 2,
        ("mismatch",),
        "returns an array of 0s on every batch",
    ),
    ("grpo", changes_rewards, ("mutated",), "rewards was"),
    ("gspo", writes_mask, ("mutated",), "wrote into a read-only input", "mask[:, 0] = True"),
    ("grpo", writes_logp_new, ("mutated",), "logp_new was ["),
    ("grpo", with_mistakes(grpo_numpy, "padding_nan"), ("padding_nan",), "np.where(mask"),
    ("grpo", with_mistakes(grpo_numpy, "k1"), ("kl_estimator",), "KL to the reference"),
    ("gae", with_mistakes(gae_loop, "forwards"), ("forwards",), re.compile(r"advantages\[\d")),
    (
        "grpo",
        with_mistakes(grpo_numpy, "sqrt_of_var"),
        ("mismatch",),
        NO_FLOAT32,
        re.compile(r"expected -?0\.0*\d{6,}, got"),
    ),
    ("gspo", guarded_mean, ("mismatch",), NO_FLOAT32),
    ("grpo", in_float32(grpo_numpy), ("precision",), "float32"),
    ("rollout", in_float32(corrected_numpy), ("precision",), "float32"),  # times a float mask
    (
        "grpo",
        with_mistakes(grpo_numpy, "no_token_axis"),
        ("error", "mismatch"),
        "could not be broadcast",
        "a[:, None]",
    ),
    ("gspo", "gspo_loss", ("not_a_function",), "expects your function"),
    ("gae", lambda r, v, d, lv, ld, *, discount, lam: 0, ("error",), "keep the names"),
    (
        "gspo",
        lambda *args: 0.25,
        ("mismatch",),
        "returns 0.25 on every batch",
        f"On {FIRST.label}: expected {rounded(gspo_answer(FIRST))}, got 0.25.",
    ),
    *[
        (exercise, function, ("precision",), FLOAT32_DIGITS, NOT_A_GRADIENT)
        for exercise, function in [
            ("gspo", lambda *args: float(np.float32(gspo_masked(*args)))),
            ("grpo", lambda *args: float(np.float32(grpo_loops(*args)))),
            ("gae", with_mistakes(gae_loop, "float32")),
            ("gspo", in_float32(over_int64_count)),
        ]
    ],
]


@pytest.mark.parametrize(
    ("exercise", "function", "mistakes", "texts"),
    [(exercise, function, mistakes, texts) for exercise, function, mistakes, *texts in CASES],
    ids=[f"{c[0]}-{getattr(c[1], '__name__', c[1])}-{'+'.join(c[2])}" for c in CASES],
)
def test_each_function_gets_its_diagnosis(exercise, function, mistakes, texts):
    """A correct function passes in each style (numpy, loops, masked arrays); each mistake is
    named alone and in pairs, with its title on the card and the batch where it shows."""
    assert_diagnosis(CHECKS[exercise][0](function), mistakes, (), texts)


def test_the_gae_batches_end_episodes_mid_rollout_and_at_the_last_step_in_both_shapes():
    shapes = {batch.arrays["dones"].ndim for batch in gae.battery()}
    mid = [batch.arrays["dones"][1:].any() for batch in gae.battery()]
    last = [np.any(batch.extras[1]) for batch in gae.battery()]
    assert shapes == {1, 2}
    assert all(mid)
    assert any(last)
    assert all(b.keywords["gamma"] != b.keywords["lam"] < 1 for b in gae.battery())


def test_an_unknown_exercise_has_no_battery_and_the_error_names_it():
    with pytest.raises(ValueError, match=r"exercise must be one of \('grpo', 'gspo'\), got 'GRPO'"):
        battery("GRPO")


@pytest.mark.parametrize("exercise", CHECKS)
def test_a_notebook_that_rebinds_llm_clip_leaves_the_checks_answers_alone(monkeypatch, exercise):
    """The checkers compute with their own copy of llm_clip: ``llm_clip.gae = my_gae`` in a
    notebook would otherwise make ``check_gae(my_gae)`` pass whatever ``my_gae`` returns."""

    def rebound(*args, **keywords):
        raise AssertionError("the checker computed with the notebook's llm_clip")

    for name in ("policy_loss", "group_advantages", "gae", "rollout_weights", "token_breakdown"):
        monkeypatch.setattr(llm_clip, name, rebound)
    check, correct, _ = CHECKS[exercise]
    assert_diagnosis(check(correct), (), (), ())
