"""Errors at the door, never NaN, never a silent wrong number (issue 43, class B).

One table of hostile calls to the public functions of :mod:`llm_clip`, :mod:`tiny_lm`,
:mod:`tiny_rlhf` and the worked-example stepper (``ppo_viz.stepper``): each is refused with a
``TypeError`` or ``ValueError`` whose message names the argument, or answers the right number
without a warning (RuntimeWarnings are errors under pytest, ``pyproject.toml``).  The first rows
each failed before (the row's id says how).  ppo_clip's bad inputs, every kind times every
function, are in ``test_ppo_clip_inputs.py``; what the stepper's fields show, in
``test_hostile_input.py``.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import llm_clip
import tiny_lm
import tiny_rlhf
from llm_clip import DEFAULT_EPS, policy_loss, policy_loss_grad
from ppo_viz.stepper import BatchStepper, compare_with_module, preset_batch
from ppo_viz.stepper.batch import EntryError, StepperBatch, parse_batch, read_field

GRPO = tiny_rlhf.METHODS["grpo"]
ONE = {"mask": [[True]], "advantages": [1.0]}
FAR = {"logp_new": [[1e308]], "logp_old": [[-1e308]]}  # log r = 2e308: beyond float64
#: GSPO's sum of log-ratios overflows on the way to a mean of -3.5e307: s = 0, no clip.
SUM_PAST_FLOAT64 = ([[1e308, 1e308, -1.7e308, -1.7e308]], np.zeros((1, 4)), [1.0], [[True] * 4])
#: Log-ratios -1e308 + 1, 1 and 1e308 + 1: float64's sum is 0, the exact one 3 (issue 43).
CANCELLING = ([[-1e308, -0.5, 1e308]], [[-1.0, -1.5, -1.0]], [1.0], [[True] * 3])
HIGH, LOW, _, ALL = CANCELLING


def refused(kind: type[Exception], *words: str) -> Any:
    """A call must raise ``kind`` with a message holding ``words``, in that order."""
    return pytest.raises(kind, match=".*".join(map(re.escape, words)))


def three_tokens(**options: object) -> float:
    return llm_clip.token_breakdown(np.full((1, 3), -1.0), np.full((1, 3), -1.0), [1.0],
                                    [[True] * 3], **options).loss  # fmt: skip


def settings() -> tiny_rlhf.TrainSettings:
    return tiny_rlhf.TrainSettings(iterations=1)


CASES: dict[str, tuple[Callable[[], object], object]] = {
    # the examples
    "k3 overflowing is +inf (was: ValueError cannot convert NaN to integer ratio)": (
        lambda: policy_loss(
            [[-1e308]],
            [[-1e308]],
            [1.0],
            [[True]],
            objective="grpo",
            logp_ref=[[1e308]],
            kl_coef=0.1,
        ),
        math.inf,
    ),
    "log r beyond float64 is +inf, the clip's edge kept (was: overflow warning)": (
        lambda: policy_loss(**FAR, **ONE, objective="ppo"),
        -(1 + DEFAULT_EPS),
    ),
    "max_len below the longest response (was: the loss tripled)": (
        lambda: three_tokens(objective="dr_grpo", max_len=1),
        refused(ValueError, "max_len", "longest response"),
    ),
    "a boolean among logp_new's numbers (was: read as 1.0)": (
        lambda: policy_loss([[True, -0.5]], [[-0.5, -0.5]], [1.0], [[True, True]], objective="ppo"),
        refused(TypeError, "logp_new[0][0]", "boolean"),
    ),
    "a boolean among (B, T) advantages (was: read as 1.0)": (
        lambda: policy_loss(
            [[-0.5, -0.5]], [[-0.5, -0.5]], [[1.0, False]], [[True, True]], objective="ppo"
        ),
        refused(TypeError, "advantages[0][1]", "boolean"),
    ),
    "train given a name (was: AttributeError 'str' has no 'advantages')": (
        lambda: tiny_rlhf.train("grpo", settings(), [0]),
        refused(TypeError, "methods", "methods_named"),
    ),
    "train given a method twice (was: trained twice, one result)": (
        lambda: tiny_rlhf.train([GRPO, GRPO], settings(), [0]),
        refused(ValueError, "methods", "'grpo' twice"),
    ),
    "train given a generator of methods (was: trained, then returned {})": (
        lambda: tiny_rlhf.train((m for m in [GRPO]), settings(), [0]),
        refused(TypeError, "methods", "list of Method"),
    ),
    "train given a negative seed (was: numpy's 'expected non-negative integer')": (
        lambda: tiny_rlhf.train([GRPO], settings(), [-1]),
        refused(ValueError, "seeds", "at least 0"),
    ),
    # further cases
    "GSPO's sum of log-ratios past float64 (was: -1.2, s read as inf)": (
        lambda: policy_loss(*SUM_PAST_FLOAT64, objective="gspo"),
        0.0,
    ),
    "verl's GSPO clip fraction, the same batch (was: 1.0)": (
        lambda: llm_clip.clip_fraction_verl(*SUM_PAST_FLOAT64, objective="gspo"),
        {"actor/pg_clipfrac": 0.0, "actor/pg_clipfrac_lower": 0.0},
    ),
    "GSPO with log r = +inf and -inf in one response (was: NaN, then ValueError)": (
        lambda: policy_loss(
            [[1e308, -1e308]], [[-1e308, 1e308]], [1.0], [[True, True]], objective="gspo"
        ),
        -1.0,  # the exact mean log r is 0: s = 1, term = A
    ),
    "SAPO's gradient where log r overflowed (was: inf - inf = NaN, then ValueError)": (
        lambda: policy_loss_grad(**FAR, **ONE, objective="sapo").tolist(),
        [[0.0]],  # the gate is flat there: r * sigmoid'(x) -> 0
    ),
    "SAPO's gradient where r overflows but tau * r does not (was: 0, not -1.6e230)": (
        lambda: policy_loss_grad(
            [[709.79]], [[0.0]], [1.0], [[True]], objective="sapo", tau_pos=1e-306
        )[0, 0],
        pytest.approx(-4 * math.exp(709.79 - math.exp(709.79 + math.log(1e-306))), rel=1e-9),
    ),
    "GSPO's log-ratios cancelling past float64's digits: s = e, clipped (was: -1.0, s = 1)": (
        lambda: policy_loss(*CANCELLING, objective="gspo"),
        -(1 + DEFAULT_EPS),
    ),
    "a sequence rollout weight of the same gaps, e^3 truncated to 3 (was: 1.0)": (
        lambda: llm_clip.rollout_weights(HIGH, LOW, ALL, mode="sequence_truncate").tolist(),
        [[3.0]],
    ),
    "OPSM on the same gaps, a mean of 1 above 0.2: dropped (was: kept)": (
        lambda: llm_clip.off_policy_keep(LOW, HIGH, [-1.0], ALL, threshold=0.2).tolist(),
        [False],
    ),
    "a long double beyond float64 (was: overflow warning, then 'is inf')": (
        lambda: policy_loss(
            np.array([[np.longdouble("1e400")]]), [[0.0]], [1.0], [[True]], objective="ppo"
        ),
        refused(ValueError, "logp_new[0, 0]", "too large for float64"),
    ),
    "group_advantages' scale_by_std='False' (was: scaled, a string being true)": (
        lambda: llm_clip.group_advantages([1.0, 0.0], 2, scale_by_std="False"),
        refused(TypeError, "scale_by_std"),
    ),
    "methods_named given one name (was: 'no method is named g')": (
        lambda: tiny_rlhf.methods_named("grpo"),
        refused(TypeError, "keys", "['grpo']"),
    ),
    "GMPO's sum of clipped log-ratios past float64 (was: -inf; the mean log r is 0)": (
        lambda: policy_loss(
            [[1e308, 1e308, -1e308, -1e308]],
            np.zeros((1, 4)),
            [1.0],
            [[True] * 4],
            objective="gmpo",
            eps_high=1e308,
        ),
        -1.0,
    ),
    "GMPO, the same sum with a negative mean (was: -inf; exp(mean) is 0)": (
        lambda: policy_loss(*SUM_PAST_FLOAT64, objective="gmpo", eps_high=1e308),
        0.0,
    ),
    "CISPO's product of two factors past float64 (was: an overflow warning escaped)": (
        lambda: policy_loss(
            [[-1e308, 0.0]],
            [[-1.5e308, 0.0]],
            [1.0],
            [[True, True]],
            objective="cispo",
            eps_low=1.0,
            eps_high=4.0,
        ),
        math.inf,
    ),
    "gae's rewards beyond 1e150 (was: NaN and overflow warnings)": (
        lambda: llm_clip.gae([1e308, -1e308], [0.0, 1e308], [0, 0], 0.0, False, gamma=1.0, lam=1.0),
        refused(ValueError, "rewards", "1e+150"),
    ),
    "gae's last_value beyond 1e150": (
        lambda: llm_clip.gae([1.0], [0.0], [0], 1e200, False, gamma=1.0, lam=1.0),
        refused(ValueError, "last_value", "1e+150"),
    ),
    "right_response(-1) (was: the last prompt's answer)": (
        lambda: tiny_lm.right_response(-1),
        refused(ValueError, "prompt", str(len(tiny_lm.PROMPTS) - 1)),
    ),
}


HALF = np.log([0.5])
#: The stepper's constructor and public functions: (call, exception, pattern of its message).
STEPPER = [
    (lambda: BatchStepper(""), ValueError, "a preset's name is one of"),
    (lambda: BatchStepper("x" * 5000), ValueError, f"got {re.escape(reprlib.repr('x' * 5000))}$"),
    (lambda: BatchStepper(inputs="no"), TypeError, "inputs must be True or False, got 'no'"),
    (lambda: BatchStepper(batch=[]), TypeError, "batch must be a StepperBatch, a WorkedExample"),
    (lambda: preset_batch(None), ValueError, "a preset's name is one of .*, got None$"),
    (lambda: parse_batch("0.5", b"0.5", "1", "0.2"), TypeError, "the text of π_old must be a str"),
    (lambda: read_field(None, "A", "advantage"), TypeError, "text of A must be a str, got None"),
    (lambda: compare_with_module([]), TypeError, "^batch must be a StepperBatch, a Worked"),
    (lambda: compare_with_module(3.5), TypeError, "got float$"),
    (
        lambda: StepperBatch.from_probabilities([0.5, 0.5], [0.5, 1.5], [1, 1]),
        EntryError,
        r"^prob_old, sample 1: “1.5” is not a probability",
    ),
    (lambda: StepperBatch(HALF, np.log([0.5, 0.5]), np.ones(1), 0.2), ValueError, "same len"),
    (
        lambda: StepperBatch.from_probabilities([0.5], [0.5], [1.0], eps=2.0),
        ValueError,
        "eps must be between 0 and 1",
    ),
    (
        lambda: StepperBatch(HALF, HALF, np.ones(1), 0.2, name=3),
        TypeError,
        "name must be a str, got int",
    ),
]
CASES.update(
    {f"stepper: {pattern}": (call, pytest.raises(kind, match=pattern))
     for call, kind, pattern in STEPPER}
)  # fmt: skip


@pytest.mark.parametrize(("call", "expected"), CASES.values(), ids=CASES.keys())
def test_hostile_input_is_refused_by_name_or_answered_right(call, expected):
    """Refused naming the argument, or the right value (no NaN, no warning)."""
    if hasattr(expected, "__enter__"):  # pytest.raises(...)
        with expected:
            call()
    else:
        assert call() == expected
