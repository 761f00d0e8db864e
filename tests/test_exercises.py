"""Notebook 5's checker names each mistake, and only that one; its questions explain themselves.

Every wrong implementation below is a learner-style numpy function with exactly one
deliberate mistake; the checker must report that mistake's key and no other.  The module
itself, a correct learner-style function and the plain-Python reference must pass with no
message.  The notebook runs headless with its exercise bodies empty and with them filled in.
"""

from __future__ import annotations

import ast
import html
import inspect
import itertools
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import escape
from notebook_runner import execute_notebook, output_problems, printed_text, run_committed

import ppo_clip
from benchmarks import reference
from ppo_viz.app import WIDGET_VIEW_MIME
from ppo_viz.exercises import (
    MISTAKES,
    VALUE_MISTAKES,
    CheckBatch,
    ConceptQuestion,
    Option,
    battery,
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
    concept_questions,
    exercise_summary,
    explanation,
    predict,
)
from ppo_viz.numbers import exact, rounded, vector

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_exercises.ipynb"
KINDS = ("loss", "clip_fraction", "grad")
REFERENCE = {
    "loss": ppo_clip.ppo_clip_loss,
    "clip_fraction": ppo_clip.clip_fraction,
    "grad": ppo_clip.ppo_clip_grad,
}

# --------------------------------------------------------------------------
# Learner-style implementations with one switchable mistake
# --------------------------------------------------------------------------


def _ratio(logp_new, logp_old, mistake):
    if mistake == "ratio_underflow":
        return np.exp(logp_new) / np.exp(logp_old)
    if mistake == "mutated":
        logp_new -= logp_old  # writes into the caller's array
        return np.exp(logp_new)
    return np.exp(logp_new - logp_old)


def _advantages(advantages, mistake):
    a = np.asarray(advantages, dtype=float)
    if mistake == "normalized":
        return (a - a.mean()) / (a.std() + 1e-8)
    if mistake == "normalized_torch_style":  # unbiased std, no epsilon
        return (a - a.mean()) / a.std(ddof=1)
    return a


def _times(values, advantages, mistake):
    if mistake == "nan_overflow":
        return values * advantages  # inf * 0 is NaN
    return np.multiply(values, advantages, out=np.zeros_like(values), where=advantages != 0)


def _is_clipped(ratio, a, eps, mistake):
    lower, upper = 1 - eps, 1 + eps
    if mistake == "sign_blind":
        return (ratio < lower) | (ratio > upper)
    if mistake == "non_strict":
        return ((a > 0) & (ratio >= upper)) | ((a < 0) & (ratio <= lower))
    return ((a > 0) & (ratio > upper)) | ((a < 0) & (ratio < lower))


def learner_loss(mistake: str | None = None) -> Callable[..., Any]:
    def ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2):
        a = _advantages(advantages, mistake)
        r = _ratio(logp_new, logp_old, mistake)
        clipped_term = _times(np.clip(r, 1 - eps, 1 + eps), a, mistake)
        if mistake == "sign_blind":  # clip(r)*A wherever r left the band
            terms = clipped_term
        else:
            terms = np.minimum(_times(r, a, mistake), clipped_term)
        if mistake == "per_sample":
            return -terms / len(a)
        if mistake == "float32":
            return np.float32(-np.mean(terms))
        if mistake == "zero_d":
            return np.asarray(-np.mean(terms))
        total = np.sum(terms) if mistake == "no_mean" else np.mean(terms)
        return float(total if mistake == "sign" else -total)

    return ppo_clip_loss


def learner_clip_fraction(mistake: str | None = None) -> Callable[..., Any]:
    def clip_fraction(logp_new, logp_old, advantages, eps=0.2):
        a = _advantages(advantages, mistake)
        r = _ratio(logp_new, logp_old, mistake)
        clipped = _is_clipped(r, a, eps, mistake)
        if mistake == "no_mean":
            return int(np.count_nonzero(clipped))
        if mistake == "per_sample":
            return clipped
        return float(np.mean(clipped))

    return clip_fraction


def learner_grad(mistake: str | None = None) -> Callable[..., Any]:
    def ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2):
        a = _advantages(advantages, mistake)
        r = _ratio(logp_new, logp_old, mistake)
        n = len(a)
        grad = -a / n if mistake == "minus_A" else -_times(r, a, mistake) / n
        clipped = _is_clipped(r, a, eps, mistake)
        if mistake == "clipped_ratio_on_clipped":  # -clip(r)*A/N where clipped
            grad = np.where(clipped, -_times(np.clip(r, 1 - eps, 1 + eps), a, None) / n, grad)
        elif mistake != "grad_on_clipped":
            grad = np.where(clipped, 0.0, grad)
        if mistake == "sign":
            grad = -grad
        if mistake == "no_mean":
            grad = grad * n
        if mistake == "list":
            return list(grad)
        if mistake == "float32":
            return grad.astype(np.float32)
        if mistake == "column":
            return grad[:, None]
        if mistake == "scalar":
            return float(grad.sum())
        return grad

    return ppo_clip_grad


LEARNERS = {"loss": learner_loss, "clip_fraction": learner_clip_fraction, "grad": learner_grad}


def plain_python(kind: str) -> Callable[..., Any]:
    """The contract's plain-Python reference as a learner would hand it in (one loop per call)."""

    def function(logp_new, logp_old, advantages, eps=0.2):
        loss, fraction, grad = reference.contract(
            list(logp_new), list(logp_old), list(advantages), eps
        )
        return {"loss": loss, "clip_fraction": fraction, "grad": np.array(grad)}[kind]

    return function


#: (kind, how the learner's code is wrong, the mistake the checker must report)
WRONG_IMPLEMENTATIONS = [
    ("loss", "sign", "sign"),
    ("loss", "no_mean", "no_mean"),
    ("loss", "sign_blind", "sign_blind"),
    ("loss", "normalized", "normalized"),
    ("loss", "normalized_torch_style", "normalized"),
    ("loss", "mutated", "mutated"),
    ("loss", "nan_overflow", "nan_overflow"),
    ("loss", "ratio_underflow", "ratio_underflow"),
    ("loss", "per_sample", "wrong_type"),
    ("loss", "float32", "wrong_type"),
    ("loss", "zero_d", "wrong_type"),
    ("clip_fraction", "no_mean", "no_mean"),
    ("clip_fraction", "sign_blind", "sign_blind"),
    ("clip_fraction", "non_strict", "non_strict"),
    ("clip_fraction", "normalized", "normalized"),
    ("clip_fraction", "normalized_torch_style", "normalized"),
    ("clip_fraction", "mutated", "mutated"),
    ("clip_fraction", "ratio_underflow", "ratio_underflow"),
    ("clip_fraction", "per_sample", "wrong_type"),
    ("grad", "sign", "sign"),
    ("grad", "no_mean", "no_mean"),
    ("grad", "sign_blind", "sign_blind"),
    ("grad", "non_strict", "non_strict"),
    ("grad", "grad_on_clipped", "grad_on_clipped"),
    ("grad", "clipped_ratio_on_clipped", "grad_on_clipped"),
    ("grad", "minus_A", "minus_A"),
    ("grad", "normalized", "normalized"),
    ("grad", "normalized_torch_style", "normalized"),
    ("grad", "mutated", "mutated"),
    ("grad", "nan_overflow", "nan_overflow"),
    ("grad", "ratio_underflow", "ratio_underflow"),
    ("grad", "list", "wrong_type"),
    ("grad", "float32", "wrong_type"),
    ("grad", "column", "wrong_type"),
    ("grad", "scalar", "wrong_type"),
]


# --------------------------------------------------------------------------
# The checker's verdicts
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_the_module_itself_passes_with_no_message(kind):
    result = check(kind, REFERENCE[kind])
    assert result.passed
    assert result.mistakes == ()
    assert result.matching_batches == result.batches == len(battery())
    assert str(result).startswith(f"{result.exercise}: passed")


@pytest.mark.parametrize("kind", KINDS)
def test_a_correct_learner_implementation_passes(kind):
    result = check(kind, LEARNERS[kind]())
    assert result.passed, str(result)


@pytest.mark.parametrize("kind", KINDS)
def test_the_plain_python_reference_passes(kind):
    result = check(kind, plain_python(kind))
    assert result.passed, str(result)


@pytest.mark.parametrize(
    ("kind", "code", "mistake"),
    WRONG_IMPLEMENTATIONS,
    ids=[f"{k}-{c}" for k, c, _ in WRONG_IMPLEMENTATIONS],
)
def test_each_mistake_is_named_and_no_other(kind, code, mistake):
    result = check(kind, LEARNERS[kind](code))
    assert result.mistakes == (mistake,), str(result)
    text = str(result)
    title = MISTAKES[mistake].title
    assert title in text
    if mistake != "wrong_type":
        assert explanation(mistake, kind) in text
    assert result.findings[0].evidence, "a mistake comes with the batch where it shows"
    assert not result.passed
    assert result.status == "needs work"
    card = result._repr_html_()
    assert escape(title) in card
    assert escape(result.findings[0].evidence) in card


def test_every_listed_mistake_has_a_test_and_an_explanation():
    tested = {(kind, mistake) for kind, _, mistake in WRONG_IMPLEMENTATIONS}
    for kind, names in VALUE_MISTAKES.items():
        for name in names:
            assert (kind, name) in tested, f"no wrong {kind} implementation shows {name!r}"
            assert explanation(name, kind), f"no explanation of {name!r} for {kind}"
    for kind in KINDS:
        for shared in ("mutated", "wrong_type"):
            assert (kind, shared) in tested


def test_evidence_quotes_the_answer_and_the_reference():
    result = check_loss(learner_loss("sign"))
    assert result.findings[0].evidence == (
        "On batch 'one sample' (N = 1, eps = 0.2): expected -1.25, got 1.25."
    )


def test_sign_blind_gradient_points_at_a_sample_that_moved_the_wrong_way():
    evidence = check_grad(learner_grad("sign_blind")).findings[0].evidence
    assert "sample 0 (r = 0.5, A = 2.5): expected -1.25, got 0." in evidence


def test_non_strict_fraction_is_shown_on_the_edge_batch():
    evidence = check_clip_fraction(learner_clip_fraction("non_strict")).findings[0].evidence
    assert "ratios exactly on the band's edges" in evidence
    assert f"expected 0, got {rounded(2 / 3)}." in evidence  # two of its three samples


def test_non_strict_comparisons_do_not_change_the_loss():
    # On the edge both terms of the min are equal, so a non-strict loss is the loss.
    assert check_loss(learner_loss("non_strict")).passed


@pytest.mark.parametrize(
    ("first", "second"),
    [("sign", "no_mean"), ("sign", "sign_blind"), ("no_mean", "non_strict")],
)
def test_two_mistakes_in_one_gradient_are_both_named(first, second):
    base = learner_grad(second)

    def both(logp_new, logp_old, advantages, eps=0.2):
        grad = base(logp_new, logp_old, advantages, eps)
        n = len(advantages)
        return -grad if first == "sign" else grad * n

    assert set(check_grad(both).mistakes) == {first, second}


def test_a_naive_summing_loss_gets_both_of_its_mistakes():
    def naive(logp_new, logp_old, advantages, eps=0.2):
        r = np.exp(logp_new - logp_old)
        return -np.sum(np.minimum(r * advantages, np.clip(r, 1 - eps, 1 + eps) * advantages))

    assert check_loss(naive).mistakes == ("no_mean", "nan_overflow")


def test_an_unknown_error_falls_back_to_the_smallest_failing_batch():
    def off_for_big_batches(logp_new, logp_old, advantages, eps=0.2):
        loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
        return loss + 0.001 if len(advantages) >= 5 else loss

    result = check_loss(off_for_big_batches)
    assert result.mistakes == ("mismatch",)
    evidence = result.findings[0].evidence
    smallest = min((b for b in battery() if b.n >= 5), key=lambda b: b.n)
    assert f"batch '{smallest.name}' (N = 5" in evidence
    expected = ppo_clip.ppo_clip_loss(
        smallest.logp_new, smallest.logp_old, smallest.advantages, smallest.eps
    )
    assert f"expected {rounded(expected)}, got {rounded(expected + 0.001)}" in evidence
    assert "logp_new = [" in evidence
    assert "advantages = [" in evidence


def test_a_tiny_difference_is_shown_with_every_digit():
    def nudged(logp_new, logp_old, advantages, eps=0.2):
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps) * (1 + 1e-8)

    evidence = check_loss(nudged).findings[0].evidence
    one = next(b for b in battery() if b.n == 1)
    expected = one.reference("loss")
    assert f"expected {exact(expected)}, got {exact(expected * (1 + 1e-8))}." in evidence


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("body", ["raise", "ellipsis", "pass", "return_ellipsis"])
def test_an_empty_body_is_not_implemented_yet(kind, body):
    def empty(logp_new, logp_old, advantages, eps=0.2):
        if body == "raise":
            raise NotImplementedError
        if body == "return_ellipsis":
            return ...
        if body == "ellipsis":
            ...

    result = check(kind, empty)
    assert result.mistakes == ("not_implemented",)
    assert result.status == "not implemented yet"
    assert "not implemented yet" in str(result)
    assert f"{result.exercise}: not implemented yet." in result._repr_html_()


def test_an_exception_is_reported_readably_with_its_line():
    def crashes(logp_new, logp_old, advantages, eps=0.2):
        n = len(advantages) - len(advantages)
        return 1.0 / n

    result = check_loss(crashes)
    assert result.mistakes == ("error",)
    text = str(result)
    assert "ZeroDivisionError: float division by zero" in text
    assert "return 1.0 / n" in text
    assert "Traceback" not in text
    assert "File " not in text


def test_an_exception_on_some_batches_still_reports_the_others():
    def loops(logp_new, logp_old, advantages, eps=0.2):
        r = np.array([math.exp(x - y) for x, y in zip(logp_new, logp_old, strict=True)])
        terms = np.minimum(r * advantages, np.clip(r, 1 - eps, 1 + eps) * advantages)
        return float(np.sum(terms))

    result = check_loss(loops)
    assert result.mistakes == ("error", "sign", "no_mean")
    assert "OverflowError: math range error" in result.findings[0].message
    assert "overflowing ratio" in result.findings[0].message


def test_a_missing_return_on_some_batches_is_a_wrong_type():
    def forgets(logp_new, logp_old, advantages, eps=0.2):
        if len(advantages) > 1:
            return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    result = check_loss(forgets)
    assert result.mistakes == ("wrong_type",)
    assert "None (is a return statement missing?)" in str(result)


def test_not_a_function_is_reported_not_raised():
    result = check_grad(3)
    assert result.mistakes == ("error",)
    assert "expects your function" in str(result)


def test_learner_warnings_are_silenced_and_never_raise():
    def warns(logp_new, logp_old, advantages, eps=0.2):
        warnings.warn("noisy", RuntimeWarning, stacklevel=1)
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_loss(warns).passed


def test_a_mutating_learner_cannot_change_the_battery():
    before = [(b.logp_new.copy(), b.advantages.copy()) for b in battery()]
    check_grad(learner_grad("mutated"))

    def scribbles(logp_new, logp_old, advantages, eps=0.2):
        advantages[:] = 0.0
        return 0.0

    check_loss(scribbles)
    for batch, (logp_new, advantages) in zip(battery(), before, strict=True):
        np.testing.assert_array_equal(batch.logp_new, logp_new)
        np.testing.assert_array_equal(batch.advantages, advantages)


def test_mutation_evidence_shows_the_array_before_and_after():
    evidence = check_loss(learner_loss("mutated")).findings[0].evidence
    example = ppo_clip.worked_example()
    before = vector(example.logp_new, each=rounded)
    after = vector(example.logp_new - example.logp_old, each=rounded)  # logp_new -= logp_old
    assert f"logp_new was {before} before the call and {after} after it." in evidence
    assert "read-only" in evidence
    assert "logp_new -= logp_old" in evidence


def test_html_is_escaped():
    def shouts(logp_new, logp_old, advantages, eps=0.2):
        raise ValueError("<script>alert(1)</script>")

    page = check_loss(shouts)._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;" in page


# --------------------------------------------------------------------------
# The battery and the variants
# --------------------------------------------------------------------------


def test_battery_covers_the_contracts_edges():
    batches = {b.name: b for b in battery()}
    edge = batches["ratios exactly on the band's edges"].breakdown
    assert edge.ratio[0] == 1.2
    assert edge.ratio[1] == 0.8
    p = np.exp(batches["ratios exactly on the band's edges"].logp_new)
    q = np.exp(batches["ratios exactly on the band's edges"].logp_old)
    assert p[0] / q[0] == 1.2, "dividing probabilities is exact on this batch too"
    assert p[1] / q[1] == 0.8
    overflow = batches["A = 0 with an overflowing ratio"].breakdown
    assert np.isinf(overflow.ratio[0])
    assert overflow.advantages[0] == 0
    assert batches["A < 0 with an overflowing ratio"].reference("loss") == np.inf
    assert {b.eps for b in battery()} >= {0.0, 0.2, 1.0}
    assert min(b.n for b in battery()) == 1
    assert len({b.n for b in battery()}) >= 6
    assert batches["advantages with a nonzero mean"].advantages.mean() == 4.0
    assert batches["read-only inputs"].read_only
    assert len({b.name for b in battery()}) == len(battery())
    for batch in battery():
        assert batch.n <= 4096
        assert 0 <= batch.eps <= 1
        for logp in (batch.logp_new, batch.logp_old):
            assert ((logp >= -1000) & (logp <= 0)).all(), batch.name


def test_robustness_batches_are_the_ones_that_reach_float64s_edges():
    for batch in battery():
        overflows = bool(np.isinf(batch.breakdown.ratio).any())
        underflows = bool(batch.underflows.any())
        assert (batch.role == "robustness") == (overflows or underflows), batch.name
    roles = [batch.role for batch in battery()]
    assert roles == sorted(roles), "core batches come first"


def test_a_batch_from_probabilities_takes_the_steppers_argument_order():
    batch = CheckBatch.from_probabilities(
        [0.7, 0.55], [0.5, 0.5], [1.0, -2.0], 0.2, name="two", lesson="a test"
    )
    np.testing.assert_allclose(batch.breakdown.ratio, [1.4, 1.1])
    assert batch.eps == 0.2
    assert batch.role == "core"
    assert batch.label == "batch 'two' (N = 2, eps = 0.2)"
    with pytest.raises(ValueError, match=r"prob_old\[1\] is 0.0"):
        CheckBatch.from_probabilities([0.5, 0.5], [0.5, 0.0], [1.0, 1.0], 0.2, name="x", lesson="")
    with pytest.raises(ValueError, match="same length"):
        CheckBatch.from_probabilities([0.5], [0.5, 0.5], [1.0], 0.2, name="x", lesson="")
    with pytest.raises(ValueError, match="role"):
        CheckBatch.from_probabilities([0.5], [0.5], [1.0], 0.2, name="x", lesson="", role="edge")


def test_a_batchs_arrays_cannot_be_changed():
    batch = battery()[0]
    with pytest.raises(ValueError, match="read-only"):
        batch.advantages[0] = 5.0
    handed_out = batch.inputs()[2]
    handed_out[0] = 5.0
    assert batch.advantages[0] == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_the_variant_with_no_mistake_is_the_module(kind):
    for batch in battery():
        prediction = predict(batch, kind, ())
        assert prediction is not None
        np.testing.assert_array_equal(prediction.value, batch.reference(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_the_battery_tells_every_single_mistake_apart(kind):
    variants = ("", *VALUE_MISTAKES[kind])
    for first, second in itertools.combinations(variants, 2):
        distinct = False
        for batch in battery():
            a = predict(batch, kind, {first} - {""})
            b = predict(batch, kind, {second} - {""})
            if a is None or b is None:
                continue
            if not np.allclose(a.value, b.value, rtol=1e-6, equal_nan=True):
                distinct = True
                break
        assert distinct, f"{kind}: {first or 'correct'} and {second} look the same"


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    eps=st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_variant_math_agrees_with_the_plain_reference_on_random_batches(n, eps, seed):
    rng = np.random.default_rng(seed)
    logp_old = rng.uniform(-5, 0, n)
    logp_new = np.minimum(logp_old + rng.normal(0, 0.5, n), 0)
    advantages = rng.normal(0, 1, n) * (rng.random(n) > 0.2)
    batch = CheckBatch(
        name="random",
        logp_new=logp_new,
        logp_old=logp_old,
        advantages=advantages,
        eps=eps,
        lesson="property test",
    )
    samples = reference.batch(logp_new, logp_old, advantages, eps)
    loss, fraction, grad = reference.contract(logp_new, logp_old, advantages, eps)
    close = {"rtol": 1e-12, "atol": 1e-15}
    np.testing.assert_allclose(predict(batch, "loss", ()).value, loss, **close)
    assert predict(batch, "clip_fraction", ()).value == fraction
    np.testing.assert_allclose(predict(batch, "grad", ()).value, grad, **close)
    np.testing.assert_allclose(
        predict(batch, "grad", {"grad_on_clipped"}).value,
        [-s.unclipped_term / n for s in samples],
        **close,
    )
    np.testing.assert_allclose(
        predict(batch, "loss", {"sign", "no_mean"}).value, n * -loss, rtol=1e-12, atol=1e-13
    )


# --------------------------------------------------------------------------
# Concept questions
# --------------------------------------------------------------------------

ANSWERS = {"favourable": 0, "wrong_way": 1, "edge": 1, "overflow": 1, "fraction": 2}


def test_questions_have_the_expected_answers():
    questions = concept_questions()
    assert {key: q.answer for key, q in questions.items()} == ANSWERS


@pytest.mark.parametrize("key", list(ANSWERS))
def test_choosing_the_right_option_explains_it(key):
    question = concept_questions()[key]
    question.choose(question.answer)
    feedback = html.unescape(question.feedback.value)
    assert f"Right. {question.explanation}" in feedback
    assert question.right_first_time
    assert question.outcome == "right at the first try"


@pytest.mark.parametrize("key", list(ANSWERS))
def test_choosing_a_wrong_option_names_the_answer_and_explains(key):
    question = concept_questions()[key]
    wrong = (question.answer + 1) % len(question.options)
    question.choice.value = wrong  # what a click does
    feedback = html.unescape(question.feedback.value)
    assert feedback.count("Not quite. ") == 1
    assert "Right." not in feedback
    assert f"The answer is {question.option_text(question.answer).rstrip('.')}." in feedback
    assert question.explanation in feedback
    assert not question.right_first_time
    assert question.outcome == "not yet right"
    question.choose(question.answer)
    assert question.outcome == "right after 2 tries"


def test_wrong_way_explanation_uses_the_modules_numbers():
    question = concept_questions()["wrong_way"]
    question.choose(0)
    text = question.feedback.value
    assert "Being outside the band is not enough" in text
    assert "min(-1.5, -1.2) = -1.5" in text
    assert "-r*A/N = 1.5 &gt; 0" in text


def test_fraction_explanation_gives_both_definitions():
    question = concept_questions()["fraction"]
    question.choose(3)
    text = question.feedback.value
    assert "which is 1 here" in text
    assert "count 0.5" in text


def test_favourable_question_explains_the_derivative_with_respect_to_r():
    question = concept_questions()["favourable"]
    question.choose(3)  # "Not clipped; the gradient is -A = -2."
    text = html.unescape(question.feedback.value)
    assert "-A is the derivative with respect to r." in text
    assert "With respect to logp_new it is -r*A, which equals -A only at r = 1." in text
    assert "this sample is clipped anyway, so its gradient is 0." in text
    assert "no further push from this sample" in text


def test_no_text_says_every_epoch_starts_at_r_equal_one():
    """Only the first update on a freshly collected batch starts at r = 1."""
    texts = [
        text
        for question in concept_questions().values()
        for text in [question.explanation, *(option.note for option in question.options)]
    ]
    texts += [text for mistake in MISTAKES.values() for text in mistake.explanations.values()]
    joined = " ".join(texts)
    assert "first update on a freshly collected batch" in joined
    for wrong in ("epoch starts", "every epoch", "of an epoch", "this epoch"):
        assert wrong not in joined


def test_a_question_needs_exactly_one_right_option():
    truth = ppo_clip.ratio_sweep([1.5], 1.0)
    options = [Option("clipped", {"is_clipped": True}), Option("grad 0", {"grad": 0.0})]
    with pytest.raises(ValueError, match="exactly one right option"):
        ConceptQuestion("x", "x", "?", options, truth, "")


def test_a_question_displays_as_html_where_widgets_do_not_run():
    question = concept_questions()["edge"]
    bundle = question._repr_mimebundle_()
    assert WIDGET_VIEW_MIME in bundle
    page = bundle["text/html"]
    assert "exactly on the edge" in page
    assert "<li>(a) Clipped; the gradient is 0.</li>" in page
    assert "Show the answer" in page
    for option in question.options:
        assert option.label in page
    assert bundle["text/plain"].startswith("Concept question: A sample has A = +1")
    assert "RadioButtons" not in bundle["text/plain"]


def test_a_question_starts_unanswered_and_carries_the_browser_tests_hook():
    question = concept_questions()["overflow"]
    assert "ppo-quiz" in question.widget._dom_classes  # the browser tests look for it
    assert question.choice.value is None
    assert question.feedback.value == ""
    assert question.outcome == "not answered"


# --------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------


def test_summary_of_a_finished_notebook():
    questions = concept_questions()
    for key, question in questions.items():
        question.choose(question.answer if key != "edge" else 0)
    questions["edge"].choose(questions["edge"].answer)
    summary = exercise_summary(
        ppo_clip.ppo_clip_loss, learner_clip_fraction("sign_blind"), learner_grad(), questions
    )
    text = str(summary)
    assert text.splitlines()[:2] == [
        "PPO clipped loss: exercise summary",
        "Exercises passed: 2 of 3",
    ]
    assert f"ppo_clip_loss  passed (all {len(battery())} batches match the reference)" in text
    assert "clip_fraction  needs work: Counted |r - 1| > eps as clipped" in text
    assert "Concept questions right at the first try: 4 of 5" in text
    assert re.search(r"A = \+1, r = 1\.2 exactly\s+right after 2 tries", text)
    assert not summary.all_passed
    assert escape(text) in summary._repr_html_()


def test_summary_with_empty_bodies():
    def empty(logp_new, logp_old, advantages, eps=0.2):
        raise NotImplementedError

    text = str(exercise_summary(empty, empty, empty))
    assert text.count("not implemented yet") == 3
    assert "Concept questions" not in text


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------

CORRECT_BODIES = {
    "ppo_clip_loss": """
def ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2):
    r = np.exp(logp_new - logp_old)
    a = np.asarray(advantages, dtype=float)
    unclipped = np.multiply(r, a, out=np.zeros_like(r), where=a != 0)
    clipped = np.multiply(np.clip(r, 1 - eps, 1 + eps), a, out=np.zeros_like(r), where=a != 0)
    return float(-np.mean(np.minimum(unclipped, clipped)))
""",
    "clip_fraction": """
def clip_fraction(logp_new, logp_old, advantages, eps=0.2):
    r = np.exp(logp_new - logp_old)
    clipped = ((advantages > 0) & (r > 1 + eps)) | ((advantages < 0) & (r < 1 - eps))
    return float(np.mean(clipped))
""",
    "ppo_clip_grad": """
def ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2):
    r = np.exp(logp_new - logp_old)
    a = np.asarray(advantages, dtype=float)
    clipped = ((a > 0) & (r > 1 + eps)) | ((a < 0) & (r < 1 - eps))
    grad = -np.multiply(r, a, out=np.zeros_like(r), where=a != 0) / len(a)
    return np.where(clipped, 0.0, grad)
""",
}


def _exercise_cells(notebook) -> dict[str, Any]:
    cells = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for name in CORRECT_BODIES:
            if cell.source.lstrip().startswith(f"def {name}("):
                cells[name] = cell
    return cells


def test_exercise_cells_have_the_modules_signatures_and_empty_bodies():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cells = _exercise_cells(notebook)
    assert set(cells) == set(CORRECT_BODIES)
    for name, cell in cells.items():
        function = ast.parse(cell.source).body[0]
        assert isinstance(function, ast.FunctionDef)
        params = [arg.arg for arg in function.args.args]
        reference = inspect.signature(getattr(ppo_clip, name))
        assert params == list(reference.parameters)
        assert ast.literal_eval(function.args.defaults[0]) == reference.parameters["eps"].default
        # Every stub is the same: a docstring, then `raise NotImplementedError`.
        assert len(function.body) == 2, f"{name}'s body is not empty"
        stub = function.body[1]
        assert isinstance(stub, ast.Raise), f"{name}'s stub is not `raise NotImplementedError`"
        assert ast.unparse(stub) == "raise NotImplementedError"
        assert "# Exercise " in cell.source
        assert "replace the next line with your code" in cell.source
        following = notebook.cells[notebook.cells.index(cell) + 1]
        check_name = {"ppo_clip_loss": "check_loss", "clip_fraction": "check_clip_fraction"}
        assert following.source == f"{check_name.get(name, 'check_grad')}({name})"
    sources = "".join(cell.source for cell in notebook.cells)
    assert "reference solution" in sources
    assert "exercise_summary(" in notebook.cells[-2].source


def _one_line(markdown: str) -> str:
    """A markdown cell's text with every run of whitespace (line breaks too) as one space."""
    return " ".join(markdown.split())


def test_the_introduction_quotes_the_battery():
    introduction = _one_line(nbformat.read(NOTEBOOK, as_version=4).cells[0].source)
    batches = battery()
    sentence = (
        f"it calls your function on {len(batches)} batches, from the worked example to a batch "
        f"of {max(b.n for b in batches)} samples, and compares every answer with `ppo_clip`."
    )
    assert sentence in introduction


def test_the_worked_examples_answers_are_the_modules():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    first, second = np.flatnonzero(example.is_clipped)
    sentence = (
        f"Its ratios are ${vector(example.ratio, each=rounded)}$ and its advantages "
        f"${vector(example.advantages, each=rounded)}$. Samples {first} and {second} are "
        f"clipped, so the answers are: loss ${rounded(example.loss)}$, clip fraction "
        f"${rounded(example.clip_fraction)}$, gradient ${vector(example.grad, each=rounded)}$."
    )
    assert _one_line(notebook.cells[4].source).startswith(sentence)


def test_things_to_try_names_notebook_2s_disagreeing_preset_exactly():
    stepper = pytest.importorskip(
        "ppo_viz.stepper", reason="notebook 2's module does not import", exc_type=ImportError
    )
    label = stepper.PRESETS["two clip fractions"][0]
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    assert example.clip_fraction == example.band_fraction
    sentence = (
        f"(on the worked example they agree, {rounded(example.clip_fraction)} and "
        f"{rounded(example.band_fraction)}; try the “{label}” preset in notebook 2)."
    )
    things_to_try = nbformat.read(NOTEBOOK, as_version=4).cells[-1].source
    assert sentence in _one_line(things_to_try)


@pytest.mark.notebook
def test_notebook_runs_with_empty_bodies():
    notebook, _ = run_committed(NOTEBOOK)
    assert not output_problems(notebook)
    printed = printed_text(notebook)
    assert "Exercises passed: 0 of 3" in printed
    assert printed.count("not implemented yet") == 3
    shown = [
        output["data"].get("text/html", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "execute_result"
    ]
    assert sum(": not implemented yet." in page for page in shown) == 3
    quizzes = [page for page in shown if re.search(r'class="[^"]*\bppo-quiz\b', page)]
    assert len(quizzes) == len(ANSWERS)


@pytest.mark.notebook
def test_notebook_runs_clean_with_correct_bodies():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for name, cell in _exercise_cells(notebook).items():
        cell.source = CORRECT_BODIES[name].strip()
    execute_notebook(notebook)
    assert not output_problems(notebook)
    printed = printed_text(notebook)
    assert "Exercises passed: 3 of 3" in printed, printed
    assert printed.count(f"passed (all {len(battery())} batches match the reference)") == 3


def test_a_case_left_unimplemented_is_an_error_on_that_batch():
    def partial(logp_new, logp_old, advantages, eps=0.2):
        if eps == 0:
            raise NotImplementedError("eps = 0 is not handled yet")
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    result = check_loss(partial)
    assert result.mistakes == ("error",)
    assert "batch 'eps = 0'" in result.findings[0].message
    assert "NotImplementedError: eps = 0 is not handled yet" in result.findings[0].message
    assert result.matching_batches == result.batches - 1
