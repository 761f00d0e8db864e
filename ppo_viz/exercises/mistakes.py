"""The mistakes the checker knows: their answers, and which explain a learner's.

Each mistake has a key, a title (:data:`.advice.TITLES`) and what the learner reads
(:data:`.advice.EXPLANATIONS`), in an exercise's own words where they differ
(:data:`.advice.IN_EXERCISE`).  Those in :data:`VALUE_MISTAKES` show in the values returned:
:func:`predict` follows the reference computation one step at a time and lets each mistake change
the step it affects (inputs, ratio, band, which samples count as clipped, terms kept, scale), and
:func:`value_findings` names the fewest that explain every answer.  To teach the checker a new
mistake, add its title and explanation (:mod:`.advice`), and for a value mistake its key in
:data:`VALUE_MISTAKES` and the step of :func:`predict` it changes.  The others (an error, a
timeout, a wrong type, changed inputs) are recognised by their symptom (:mod:`.checker`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from functools import cache, partial
from typing import Any, NamedTuple

import numpy as np

from ppo_viz.exercises.advice import EXERCISES, words
from ppo_viz.exercises.battery import (
    BoolArray,
    CheckBatch,
    FloatArray,
    Kind,
    Role,
    lesson_of,
    reference,
)
from ppo_viz.exercises.sandbox import Call
from ppo_viz.numbers import exact, rounded, vector

#: One answer: the call, and what it returned as floats; a set of mistakes.
Answer, Flags = tuple[Call, FloatArray], frozenset[str]
#: The mistakes each exercise's answers can show, in report order.
VALUE_MISTAKES: dict[str, tuple[str, ...]] = {
    kind: tuple(names.split())
    for kind, names in {
        "loss": "sign no_mean ratio_inverted no_exp fixed_eps unclipped clip_only max_for_min "
        "clip_swapped min_of_ratios no_negative_branch upper_sign_blind normalized nan_overflow "
        "ratio_underflow",
        "clip_fraction": "no_mean ratio_inverted no_exp fixed_eps max_for_min sign_blind "
        "zero_advantage non_strict min_of_ratios no_negative_branch upper_sign_blind normalized "
        "ratio_underflow",
        "grad": "sign no_mean ratio_inverted no_exp fixed_eps unclipped clip_only max_for_min "
        "non_strict min_of_ratios no_negative_branch upper_sign_blind grad_on_clipped minus_A "
        "normalized nan_overflow ratio_underflow",
    }.items()
}


#: The value mistakes that show only at float64's edges, on the robustness batches.
ROBUSTNESS_MISTAKES = ("nan_overflow", "ratio_underflow")

#: ``[0.5, 1, ...]``: at most 8 values, rounded (an input array, in messages).
numbers = partial(vector, each=rounded, limit=8)
#: The most mistakes one answer is explained by.
MAX_MISTAKES = 3
#: Answers match a prediction where ``np.isclose`` with these (rtol, atol) holds: float64's;
#: looser for normalized advantages (codes add 1e-8 to the standard deviation); and the
#: "close, but not to float64 precision" answers of float32 arithmetic or finite differences;
#: of float32 arithmetic alone for the :data:`EXERCISES` (a formula 1e-5 off is a mismatch there,
#: and so is one closer whose answers float32 does not hold: :func:`_not_float32`).
TOLERANCES = {
    "float64": (1e-9, 1e-12),
    "normalized": (1e-6, 1e-9),
    "precision": (1e-4, 1e-7),
    "float32": (1e-6, 2e-7),
}
#: Mistakes after which a ratio or band is not the reference's: undecided samples get their
#: verdict from the variant alone (and with ``fixed_eps``, on a batch of another eps).
_OWN_RATIOS = frozenset({"normalized", "ratio_inverted", "no_exp", "clip_swapped"})
#: The eps a learner writes in for ``fixed_eps``: the exercises' default.
FIXED_EPS = 0.2


class Finding(NamedTuple):
    """One problem found: a stable ``key``, its title, the explanation and the evidence.

    ``further`` names the section of notebook 5 a robustness finding relates to.
    """

    key: str
    title: str
    message: str
    evidence: str = ""
    further: str = ""


def finding(
    key: str, text: str = "", evidence: str = "", batch: CheckBatch | None = None, kind: str = ""
) -> Finding:
    """Mistake ``key``'s finding, with its own explanation unless ``text`` is given, both in
    exercise ``kind``'s own words (:func:`.advice.words`)."""
    title, explanation = words(key, kind)
    further = batch.further if batch is not None else ""
    return Finding(key, title, text or explanation, evidence, further)


@cache
def candidate_mistake_sets(kind: Kind, role: Role = "core") -> tuple[tuple[str, ...], ...]:
    """Every set of up to :data:`MAX_MISTAKES` value mistakes of ``role``, fewest first, each in
    the order findings are reported (at most one of each group of an :data:`EXERCISES`
    exercise, whose mistakes are reported in alphabetical order)."""
    groups = EXERCISES[kind].groups if kind in EXERCISES else ()
    order = sorted(m for group in groups for m in group) if groups else VALUE_MISTAKES[kind]
    names = [m for m in order if (m in ROBUSTNESS_MISTAKES) == (role != "core")]
    return tuple(
        combination
        for size in range(MAX_MISTAKES + 1)
        for combination in itertools.combinations(names, size)
        if all(len(set(combination) & set(group)) <= 1 for group in groups)
    )


class Prediction(NamedTuple):
    """What an implementation with some mistakes returns on one batch.

    ``values``: the answers it may give (1-D float arrays), the reference's verdicts and the
    mistakes' first forms first; several where a mistake has several forms, or a sample's verdict
    depends on the ``exp`` used (:attr:`.CheckBatch.undecided`).  ``free``: gradient entries it
    claims nothing about.  ``tolerance``: the key of :data:`TOLERANCES` the answers match with.
    """

    values: tuple[FloatArray, ...]
    free: BoolArray
    tolerance: str = "float64"


@cache
def predict(batch: CheckBatch, kind: Kind, flags: Flags = frozenset()) -> Prediction | None:
    """What an implementation with exactly the mistakes ``flags`` (a frozenset of their keys)
    returns on ``batch``.

    With no mistakes, :mod:`ppo_clip`'s own answer comes first.  None where the variant is
    undefined (normalizing advantages whose standard deviation is 0).  Cached: a check tries
    hundreds of sets of mistakes on the same batches.
    """
    tolerance = next((t for t in ("precision", "normalized") if t in flags), "float64")
    if kind in EXERCISES:
        answers = EXERCISES[kind].answer(batch, flags - {"precision"})  # one, or several forms
        forms = answers if isinstance(answers, list) else [answers]
        values = tuple(np.ravel(np.asarray(form, dtype=np.float64)) for form in forms)
        tolerance = "float32" if tolerance == "precision" else tolerance
        return Prediction(values, np.zeros(1, bool), tolerance)
    no_ratio = batch.underflows if "ratio_underflow" in flags else np.zeros(batch.n, bool)
    nan = no_ratio | (batch.overflowing_zero_advantage & ("nan_overflow" in flags))
    scale = (-1.0 if "sign" in flags else 1.0) * (batch.n if "no_mean" in flags else 1)
    values, free = [], np.zeros(batch.n if kind == "grad" else 1, bool)
    if "precision" in flags and kind == "grad":
        free = _edge_samples(batch)
    for b in _breakdowns_used(batch, flags):
        for clipped in _clip_masks(batch, b, flags):
            clipped &= ~no_ratio  # NaN > 1 + eps is False
            if kind == "loss":
                values.append(math.nan if nan.any() else _masked_loss(b, clipped))
            elif kind == "clip_fraction":
                values.append(np.count_nonzero(clipped) / b.n)
            else:
                with np.errstate(all="ignore"):
                    full = (-b.advantages if "minus_A" in flags else -b.unclipped_term) / b.n + 0.0
                full[nan] = math.nan
                if "grad_on_clipped" in flags:  # claims nothing where any verdict clips
                    free = free | clipped
                values.append(full if "grad_on_clipped" in flags else np.where(clipped, 0.0, full))
    if not values:
        return None
    arrays = [scale * np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in values]
    if not flags:
        arrays[0] = np.atleast_1d(batch.answers[kind])
    return Prediction(tuple(arrays), free, tolerance)


def _edge_samples(batch: CheckBatch) -> BoolArray:
    """Samples within :data:`TOLERANCES`' precision of an edge, where a finite difference
    straddles the kink (an answer there is not held against "precision")."""
    b, (rtol, _) = batch.breakdown, TOLERANCES["precision"]
    return np.isclose(b.ratio, b.upper, rtol=rtol) | np.isclose(b.ratio, b.lower, rtol=rtol)


def _breakdowns_used(batch: CheckBatch, flags: Flags) -> list[Any]:
    """The reference breakdowns of the inputs, ratios and band the implementation uses."""
    breakdowns = [batch.breakdown]
    eps = FIXED_EPS if "fixed_eps" in flags else batch.eps  # the band's half-width it uses
    if {"normalized", "ratio_inverted"} & flags or eps != batch.eps:
        pair = batch.logp_new, batch.logp_old
        new, old = pair[::-1] if "ratio_inverted" in flags else pair
        advantages = [batch.advantages]
        if "normalized" in flags:  # with numpy's std and with the unbiased one, where defined
            a = batch.advantages
            stds = [float(a.std(ddof=ddof)) for ddof in (0, 1) if batch.n > ddof]
            advantages = [(a - a.mean()) / std for std in stds if std > 0]
        breakdowns = [reference.clip_breakdown(new, old, a, eps) for a in advantages]
    if "no_exp" in flags:
        breakdowns = [replace(b, ratio=b.log_ratio.copy()) for b in breakdowns]
    if "clip_swapped" in flags:
        breakdowns = [replace(b, upper=b.lower) for b in breakdowns]
    return breakdowns


def _clip_masks(batch: CheckBatch, b: Any, flags: Flags) -> list[BoolArray]:
    """Which samples the implementation counts as clipped: one mask per possible verdict."""
    if "unclipped" in flags:
        return [np.zeros(b.n, dtype=bool)]
    if "non_strict" in flags:
        above, below = b.ratio >= b.upper, b.ratio <= b.lower
    else:
        above, below = b.ratio > b.upper, b.ratio < b.lower
    positive, negative, zero = b.advantages > 0, b.advantages < 0, b.advantages == 0
    sides = [(positive, negative)]
    if "zero_advantage" in flags:  # A = 0 counted with A > 0, with A < 0, or with both
        sides = [(positive | zero, negative), (positive, negative | zero), (~negative, ~positive)]
    if {"sign_blind", "clip_only"} & flags:
        masks = [above | below]
    elif "max_for_min" in flags:
        masks = [(p & below) | (n & above) for p, n in sides]
    elif "min_of_ratios" in flags:  # min(r, clip(r)) * A: the upper edge for either sign
        masks = [above]
    else:
        upper = [above if "upper_sign_blind" in flags else p & above for p, _ in sides]
        lower = [n & below & ("no_negative_branch" not in flags) for _, n in sides]
        masks = [u | low for u, low in zip(upper, lower, strict=True)]
    near_edges = _edge_samples(batch) if "precision" in flags else False
    own = _OWN_RATIOS & flags or ("fixed_eps" in flags and batch.eps != FIXED_EPS)
    undecided = [] if own else np.flatnonzero(batch.undecided | near_edges)[:4]
    chosen = (c for k in range(len(undecided) + 1) for c in itertools.combinations(undecided, k))
    flips = [np.isin(np.arange(b.n), flipped) for flipped in chosen]  # either verdict on each
    return [mask ^ flip for flip in flips for mask in masks]


def _masked_loss(b: Any, clipped: BoolArray) -> float:
    """The loss that keeps ``clip(r)*A`` where ``clipped`` and ``r*A`` elsewhere: with the clip
    mask of the objective kept, min, max, r*A alone or clip(r)*A alone."""
    terms = np.where(clipped, b.clipped_term, b.unclipped_term)
    with np.errstate(all="ignore"):  # inf - inf is NaN here: no such answer is right
        return float(-terms.sum() / b.n) + 0.0


def value_findings(
    kind: Kind, answers: list[Answer], assumed: Flags | None, role: Role
) -> tuple[list[Finding], Flags | None]:
    """The findings about the values, and the mistakes that explain them (None if none do).

    The fewest value mistakes of ``role`` that, with the ``assumed`` ones, explain every answer,
    each shown on a batch where leaving it out changes the answer; k mistakes together need more
    than k answers (fewer would fit almost anything).  Only where none do at float64's precision
    are they tried at :data:`TOLERANCES`' ``"precision"``, adding that finding.  The same answer
    on every batch, a placeholder such as ``return 0.0``, is a ``mismatch`` even where mistakes
    happen to give it.
    """
    if assumed is None or not answers:
        return [], assumed
    candidates = () if _placeholder(kind, answers) else candidate_mistake_sets(kind, role)
    precisions = [frozenset(), frozenset({"precision"})]
    for precision in precisions[: 1 if kind in EXERCISES and _not_float32(answers, kind) else 2]:
        for extra in candidates:
            flags = assumed | frozenset(extra) | precision
            too_few_answers = len(extra) > 1 and len(answers) <= len(extra)
            if too_few_answers or not _explains(kind, answers, flags):
                continue
            shown = [_shows(kind, answers, flags, key) for key in extra]
            if all(shown):
                if precision - assumed:
                    shown.append(_imprecision(kind, answers, flags))
                return shown, flags  # type: ignore[return-value]
    return _mismatch(kind, answers, assumed), None


def _imprecision(kind: Kind, answers: Sequence[Answer], flags: Flags) -> Finding:
    """The ``precision`` finding: how many digits the answers share with the exact ones."""
    errors = []  # each answer's largest relative error, with the answer and where it is
    for call, got in answers:
        if (prediction := predict(call.batch, kind, flags)) is not None:
            exact_values = prediction.values[0]
            with np.errstate(all="ignore"):
                error = np.abs(got - exact_values) / np.maximum(np.abs(exact_values), 1e-300)
            error[prediction.free | ~np.isfinite(error)] = 0.0
            errors.append((float(error.max()), call, got, int(np.argmax(error))))
    relative, call, got, index = max(errors, key=lambda e: e[0], default=(0.0, *answers[0], 0))
    digits = max(int(-math.log10(relative)), 0) if relative > 0 else 16
    text = f"Your answers agree with the exact ones to about {digits} significant digits. "
    if digits == 0:  # float32 is off by 1e-7 at most: a decision at the band's edge flipped
        text = "Float32's rounding moved a ratio to the other side of the band's edge. "
    text += evidence(kind, call, got, index)
    return finding("precision", evidence=text, batch=call.batch, kind=kind)


def _not_float32(answers: Sequence[Answer], kind: Kind) -> bool:
    """Whether some answer off the reference has no entry float32 holds exactly (float32
    arithmetic leaves such entries, a float64 formula a little off almost never does), unless
    two batches float32 cannot tell apart got one answer where the reference's differ: float32
    arithmetic followed by a float64 step (a division by an int64 count) is float32's too."""
    if any(_float32_blind(kind, *pair) for pair in itertools.combinations(answers, 2)):
        return False
    for call, got in answers:
        off = got[got != _expected(kind, call)]
        with np.errstate(over="ignore"):  # an answer beyond float32's range is no float32 work
            held = np.any(off.astype(np.float32) == off)
        if off.size and not held:
            return True
    return False


def _float32_blind(kind: Kind, one: Answer, other: Answer) -> bool:
    """Whether the two answers are one where the reference's differ, on batches float32 cannot
    tell apart: arrays alike in float32, the rest the same (:func:`.llm.battery`'s copy)."""
    (call, got), (twin, twin_got) = one, other
    if not np.array_equal(got, twin_got):
        return False
    a, b = call.batch, twin.batch
    pairs = zip(a.arrays.values(), b.arrays.values(), strict=True)
    alike = all(np.array_equal(np.float32(x), np.float32(y)) for x, y in pairs)
    same = all(map(np.array_equal, a.extras, b.extras)) and a.keywords == b.keywords
    return alike and same and not np.array_equal(_expected(kind, call), _expected(kind, twin))


def differs(kind: Kind, call: Call, got: FloatArray) -> BoolArray:
    """Where the answer is not the reference's (either verdict on an undecided sample)."""
    return ~_agrees(got, predict(call.batch, kind))  # type: ignore[arg-type]


def _placeholder(kind: Kind, answers: Sequence[Answer]) -> bool:
    """Whether every answer is one and the same value, though the reference answers differ."""
    values = np.concatenate([got for _, got in answers])
    references = np.concatenate([_expected(kind, c) for c, _ in answers])
    same = [np.array_equal(v, np.full_like(v, v[0]), equal_nan=True) for v in (values, references)]
    return len(answers) > 1 and same == [True, False]


def _agrees(got: FloatArray, prediction: Prediction) -> BoolArray:
    """Where ``got`` is one of the answers the prediction allows."""
    rtol, atol = TOLERANCES[prediction.tolerance]
    with np.errstate(invalid="ignore"):  # infinities must agree exactly, NaN matches only NaN
        close = [np.isclose(got, v, rtol, atol, equal_nan=True) for v in prediction.values]
    return prediction.free | np.any(close, axis=0)


def _explains(kind: Kind, answers: Sequence[Answer], flags: Flags) -> bool:
    """Whether an implementation with exactly the mistakes ``flags`` gives every answer."""
    predictions = [(predict(call.batch, kind, flags), got) for call, got in answers]
    return all(p is None or _agrees(got, p).all() for p, got in predictions)


def _shows(kind: Kind, answers: Sequence[Answer], flags: Flags, key: str) -> Finding | None:
    """``key``'s finding on the smallest batch where leaving it out changes the prediction (one
    where the answer is also wrong if any); None if there is none."""
    needed = []
    for call, got in sorted(answers, key=lambda answer: answer[0].batch.n):
        with_it, without = (predict(call.batch, kind, f) for f in (flags, flags - {key}))
        if with_it is None or without is None:
            continue
        shows = with_it.free if key == "grad_on_clipped" else ~_agrees(with_it.values[0], without)
        if (wrong := shows & differs(kind, call, got)).any():
            shown = evidence(kind, call, got, int(np.argmax(wrong)))
            return finding(key, evidence=shown, batch=call.batch, kind=kind)
        if shows.any():
            needed.append((call, got, int(np.argmax(shows)), without.values[0]))
    if not needed:
        return None
    call, got, index, without_value = needed[0]
    text = f"On {call.batch.label} your answer {exact(got[index])} takes this mistake too: "
    text += f"without it the others give {exact(without_value[index])}."
    return finding(key, evidence=text, batch=call.batch, kind=kind)


def _mismatch(kind: Kind, answers: Sequence[Answer], assumed: Flags) -> list[Finding]:
    """ "Differs from the reference", with the smallest batch where it does and its inputs."""
    failing = [(c, got) for c, got in answers if differs(kind, c, got).any()]
    if not failing:
        return []
    call, got = min(failing, key=lambda answer: answer[0].batch.n)
    b, value = call.batch, answers[0][1][0]
    message = "Your answers differ from the reference and match none of the common mistakes "
    message += "this checker knows."
    if _placeholder(kind, answers):
        shown = f"an array of {exact(value)}s" if kind in ("grad", "gae") else exact(value)
        message = f"Your function returns {shown} on every batch, whatever the inputs (a "
        message += "placeholder?), and that differs from the reference."
    elif assumed:
        message = "Your answers differ from the reference in a way the mistakes above do not "
        message += "explain."
    shown = evidence(kind, call, got, int(np.argmax(differs(kind, call, got))))
    if kind not in EXERCISES:  # the inputs, and each sample's r and A
        shown += f" Inputs: logp_new = {numbers(b.logp_new)}, logp_old = "
        shown += f"{numbers(b.logp_old)}, eps = {exact(b.eps)}. {_samples(kind, call, got)}"
    return [finding("mismatch", f"{message} {lesson_of(b, 'smallest')}", shown, b)]


def _samples(kind: Kind, call: Call, got: FloatArray, limit: int = 8) -> str:
    """Each sample to look at, with its r and A: a gradient's differing entries with both
    values; for a loss or a clip fraction, every sample with the contract's verdict."""
    b = call.batch.breakdown
    if kind == "grad":
        chosen = np.flatnonzero(differs(kind, call, got))
        expected = _expected(kind, call)
        heading = "Entries that differ"
        says = [f"expected {rounded(expected[i])}, got {rounded(got[i])}" for i in chosen]
    else:
        chosen = np.arange(b.n)
        heading = "Its samples"
        says = ["clipped" if b.is_clipped[i] else "not clipped" for i in chosen]
    items = [
        f"sample {i} (r = {rounded(b.ratio[i])}, A = {rounded(b.advantages[i])}): {said}"
        for i, said in zip(chosen[:limit], says, strict=False)
    ]
    more = f"; and {len(chosen) - limit} more" if len(chosen) > limit else ""
    return f"{heading}: " + "; ".join(items) + more + "."


def evidence(kind: Kind, call: Call, got: FloatArray, index: int) -> str:
    """``On batch ..: expected .., got ..`` (a gradient's at sample ``index``): rounded, with
    two digits beyond the first that differs where they are close (every digit if need be)."""
    expected, where = _expected(kind, call), call.batch.label
    pair = float(expected[index]), float(got[index])
    shown = [rounded(v) for v in pair]
    if all(map(math.isfinite, pair)) and pair[0] != pair[1]:
        gap = math.log10(max(map(abs, pair))) - math.log10(abs(pair[0] - pair[1]))
        if (digits := int(gap) + 2) > 4:
            shown = [rounded(v, digits) for v in pair] if digits < 17 else list(map(exact, pair))
    if kind == "grad":
        r, a = call.batch.breakdown.ratio[index], call.batch.breakdown.advantages[index]
        where += f", sample {index} (r = {rounded(r)}, A = {rounded(a)})"
    elif names := call.batch.entries:
        where += f", {names[index]}"
    return f"On {where}: expected {shown[0]}, got {shown[1]}."


def _expected(kind: Kind, call: Call) -> FloatArray:
    """The reference's answer on ``call``'s batch, as a 1-D array."""
    return predict(call.batch, kind).values[0]  # type: ignore[union-attr]
