"""The mistakes the checker knows: their texts, their answers, and which explain a learner's.

Each mistake has a key, a title (:data:`TITLES`) and what the learner reads
(:data:`EXPLANATIONS`).  Those in :data:`VALUE_MISTAKES` show in the values returned:
:func:`predict` follows the reference computation one step at a time and lets each mistake change
the step it affects (inputs, ratio, band, which samples count as clipped, terms kept, scale), and
:func:`value_findings` names the fewest that explain every answer.  To teach the checker a new
mistake, add its title and explanation, and for a value mistake its key in :data:`VALUE_MISTAKES`
and the step of :func:`predict` it changes.  The others (an error, a timeout, a wrong type,
changed inputs) are recognised by their symptom (:mod:`.checker`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from ppo_viz.exercises.battery import (
    NUMERICS_NOTEBOOK,
    BoolArray,
    CheckBatch,
    FloatArray,
    Kind,
    Role,
    reference,
)
from ppo_viz.exercises.sandbox import Call
from ppo_viz.numbers import exact, rounded, vector

#: Every mistake's title, in the order findings are reported.
TITLES = {
    "not_implemented": "Not implemented yet",
    "error": "Your function raised an error",
    "timeout": "Your function did not return in time",
    "wrong_type": "Wrong return type or shape",
    "patched_module": "Changed the module ppo_clip",
    "sign": "Objective instead of loss (the sign)",
    "no_mean": "Forgot the 1/N",
    "ratio_inverted": "Ratio inverted (old over new)",
    "no_exp": "Log-ratio used as the ratio (the exp is missing)",
    "unclipped": "The unclipped objective r*A",
    "clip_only": "The clip-only objective (np.clip without the min)",
    "max_for_min": "The wrong side clipped (max instead of min)",
    "clip_swapped": "np.clip's bounds swapped",
    "sign_blind": "Counted |r - 1| > eps as clipped",
    "zero_advantage": "Counted A = 0 as clipped",
    "non_strict": "Non-strict comparisons at r = 1 ± eps",
    "grad_on_clipped": "Non-zero gradient on clipped samples",
    "minus_A": "-A/N instead of -r*A/N",
    "normalized": "Normalized the advantages",
    "nan_overflow": "NaN for A = 0 with an overflowing ratio",
    "ratio_underflow": "Ratio computed from probabilities",
    "mutated": "Changed the input arrays",
    "mismatch": "Differs from the reference",
}
#: The mistakes each exercise's answers can show, in report order.
VALUE_MISTAKES: dict[str, tuple[str, ...]] = {
    kind: tuple(names.split())
    for kind, names in {
        "loss": "sign no_mean ratio_inverted no_exp unclipped clip_only max_for_min clip_swapped "
        "normalized nan_overflow ratio_underflow",
        "clip_fraction": "no_mean ratio_inverted no_exp max_for_min sign_blind zero_advantage "
        "non_strict normalized ratio_underflow",
        "grad": "sign no_mean ratio_inverted no_exp unclipped clip_only max_for_min non_strict "
        "grad_on_clipped minus_A normalized nan_overflow ratio_underflow",
    }.items()
}
#: The value mistakes that show only at float64's edges, on the robustness batches.
ROBUSTNESS_MISTAKES = ("nan_overflow", "ratio_underflow")

_CLIPPED = "A > 0 with r > 1 + eps, or A < 0 with r < 1 - eps"
_UNFAVOURABLE = "A > 0 with r < 1 - eps, or A < 0 with r > 1 + eps"
_NEW_OVER_OLD = "the ratio is new over old: r = np.exp(logp_new - logp_old)"

#: What the learner reads about each mistake.  Checked against cleanrl/ppo.py @020cf0e
#: (norm_adv), stable_baselines3/ppo/ppo.py @cef4cf2 (normalize_advantage) and
#: spinup/algos/pytorch/ppo/ppo.py @2092113 (the buffer's get()).
EXPLANATIONS = {
    "not_implemented": "The body is still empty (it raises NotImplementedError or returns "
    "nothing): write your code in the cell above, run it, then run this check again.",
    "patched_module": "Your function rebinds names in ppo_clip or numpy. The verdict and your "
    "notebook are safe (the checker keeps its own reference and ran your function in a copy of "
    "the process), but a loss function should not change other modules: remove those lines.",
    "sign": "Your answer has the opposite sign: the loss to minimize is minus the mean of "
    "min(r*A, clip(r)*A), the objective PPO maximizes, and an unclipped sample's gradient is "
    "-r*A/N.",
    "no_mean": "You sum over the batch where the contract averages (the loss, the fraction of "
    "clipped samples, the 1/N of each gradient entry): np.mean, not np.sum.",
    "ratio_inverted": f"You compute exp(logp_old - logp_new), pi_old / pi_new; {_NEW_OVER_OLD}.",
    "no_exp": f"You use the log-ratio logp_new - logp_old as the ratio; {_NEW_OVER_OLD}, 1 where "
    "nothing changed, the centre of the band [1 - eps, 1 + eps].",
    "unclipped": f"You ignore clipping: a clipped sample ({_CLIPPED}) keeps the constant "
    "clip(r)*A, whose gradient is 0: np.minimum(r * A, np.clip(r, 1 - eps, 1 + eps) * A).",
    "clip_only": "You keep clip(r)*A alone, without the np.minimum: a sample that moved the "
    f"unfavourable way ({_UNFAVOURABLE}) keeps r*A, whose gradient -r*A/N pulls it back.",
    "max_for_min": "You keep the larger of r*A and clip(r)*A, which clips the moves the "
    f"unfavourable way ({_UNFAVOURABLE}); PPO keeps the smaller (np.minimum, or "
    f"max(-A*r, -A*clip(r)) in PyTorch style), which clips the favourable ones: {_CLIPPED}.",
    "clip_swapped": "You call np.clip(r, 1 + eps, 1 - eps), which returns its upper bound, 1 - "
    "eps, for every sample; the lower bound comes first: np.clip(r, 1 - eps, 1 + eps).",
    "sign_blind": "You count every sample with |r - 1| > eps (as Stable-Baselines3 and CleanRL "
    f"log it); this contract counts only those whose gradient clipping switches off: {_CLIPPED}.",
    "zero_advantage": "You count a sample with A = 0 outside the band as clipped (with A >= 0, "
    "or np.where(A > 0, r > 1 + eps, r < 1 - eps)); its term r*A is 0 whatever r is, so there is "
    "no gradient to switch off.",
    "non_strict": "You treat a sample exactly on the edge (r = 1 + eps with A > 0, r = 1 - eps "
    "with A < 0) as clipped; the comparisons are strict, r > 1 + eps, which with eps = 0 decides "
    f"every sample with r == 1 (float32 can also push 1.2 over the edge: {NUMERICS_NOTEBOOK}, "
    "section 3).",
    "grad_on_clipped": "Your gradient is not 0 on clipped samples, whose term is the constant "
    "clip(r)*A = (1 ± eps)*A: np.where(clipped, 0.0, -r * A / N).",
    "minus_A": "You use -A/N where the gradient is -r*A/N: dr/dlogp_new = r, the derivative of "
    "exp. They agree only where r = 1, as in the first update on a freshly collected batch.",
    "normalized": "You normalize the advantages; PPO codes do that before the loss (CleanRL's "
    "norm_adv and Stable-Baselines3's normalize_advantage per minibatch, Spinning Up once per "
    "batch), and here it shifts them, flips signs and changes which samples are clipped.",
    "nan_overflow": "r = exp(1000) is inf in float64 and inf * 0 is NaN, so a sample with A = 0 "
    "and an overflowing ratio makes your answer NaN: multiply only where A != 0, "
    "np.multiply(r, A, out=np.zeros_like(r), where=A != 0).",
    "ratio_underflow": "exp(logp_new) / exp(logp_old) is 0/0 = NaN when both log-probabilities "
    "are near -1000 (normal for whole sequences in RLHF); compute the ratio from the "
    "difference: r = np.exp(logp_new - logp_old).",
    "mutated": "Your function changes its input arrays, which the caller reuses (PPO runs "
    "several epochs on one batch): write x = x - y, not x -= y, or work on a copy.",
}

#: The most mistakes one answer is explained by.
MAX_MISTAKES = 3
#: Answers match a prediction where ``np.isclose`` with these (rtol, atol) holds; the looser
#: ones for normalized advantages (codes add 1e-8 to the standard deviation).
TOLERANCES = {False: (1e-9, 1e-12), True: (1e-6, 1e-9)}
#: Mistakes after which a ratio or band is not the reference's: undecided samples get their
#: verdict from the variant alone.
_OWN_RATIOS = frozenset({"normalized", "ratio_inverted", "no_exp", "clip_swapped"})


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
    key: str, text: str = "", evidence: str = "", batch: CheckBatch | None = None
) -> Finding:
    """Mistake ``key``'s finding, with its own explanation unless ``text`` is given."""
    further = batch.further if batch is not None else ""
    return Finding(key, TITLES[key], text or EXPLANATIONS[key], evidence, further)


@cache
def candidate_mistake_sets(kind: Kind, role: Role = "core") -> tuple[frozenset[str], ...]:
    """Every set of up to :data:`MAX_MISTAKES` value mistakes of ``role``, fewest first."""
    names = [m for m in VALUE_MISTAKES[kind] if (m in ROBUSTNESS_MISTAKES) == (role != "core")]
    return tuple(
        frozenset(combination)
        for size in range(MAX_MISTAKES + 1)
        for combination in itertools.combinations(names, size)
    )


class Prediction(NamedTuple):
    """What an implementation with some mistakes returns on one batch.

    ``values``: the answers it may give (1-D float arrays), the reference's verdicts and the
    mistakes' first forms first; several where a mistake has several forms, or a sample's verdict
    depends on the ``exp`` used (:attr:`.CheckBatch.undecided`).  ``free``: gradient entries it
    claims nothing about.  ``loose``: looser tolerances (normalizing adds 1e-8 to the std).
    """

    values: tuple[FloatArray, ...]
    free: BoolArray | None = None
    loose: bool = False


def predict(batch: CheckBatch, kind: Kind, mistakes: Iterable[str] = ()) -> Prediction | None:
    """What an implementation with exactly these ``mistakes`` returns on ``batch``.

    With no mistakes, :mod:`ppo_clip`'s own answer comes first.  None where the variant is
    undefined (normalizing advantages whose standard deviation is 0).  Cached: a check tries
    hundreds of sets of mistakes on the same batches.
    """
    return _predict(batch, kind, frozenset(mistakes))


@cache
def _predict(batch: CheckBatch, kind: Kind, flags: frozenset[str]) -> Prediction | None:
    no_ratio = batch.underflows if "ratio_underflow" in flags else np.zeros(batch.n, bool)
    nan = no_ratio | (batch.overflowing_zero_advantage & ("nan_overflow" in flags))
    scale = (-1.0 if "sign" in flags else 1.0) * (batch.n if "no_mean" in flags else 1)
    values, free = [], None
    for b in _breakdowns_used(batch, flags):
        if kind == "loss":
            values.append(math.nan if nan.any() else _loss(b, flags))
            continue
        for clipped in _clip_masks(batch, b, flags):
            clipped &= ~no_ratio  # NaN > 1 + eps is False
            if kind == "clip_fraction":
                values.append(np.count_nonzero(clipped) / b.n)
                continue
            with np.errstate(all="ignore"):
                full = (-b.advantages if "minus_A" in flags else -b.unclipped_term) / b.n + 0.0
            full[nan] = math.nan
            if "grad_on_clipped" in flags:  # claims nothing where any verdict clips
                free = clipped if free is None else free | clipped
            values.append(full if free is not None else np.where(clipped, 0.0, full))
    if not values:
        return None
    arrays = [scale * np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in values]
    if not flags:
        arrays[0] = np.atleast_1d(batch.answers[kind])
    return Prediction(tuple(arrays), free, loose="normalized" in flags)


def _breakdowns_used(batch: CheckBatch, flags: frozenset[str]) -> list[Any]:
    """The reference breakdowns of the inputs, ratios and band the implementation uses."""
    breakdowns = [batch.breakdown]
    if {"normalized", "ratio_inverted"} & flags:
        new, old = batch.logp_new, batch.logp_old
        if "ratio_inverted" in flags:
            new, old = old, new
        advantages = [batch.advantages]
        if "normalized" in flags:  # with numpy's std and with the unbiased one, where defined
            a = batch.advantages
            stds = [float(a.std(ddof=ddof)) for ddof in (0, 1) if batch.n > ddof]
            advantages = [(a - a.mean()) / std for std in stds if std > 0]
        breakdowns = [reference.clip_breakdown(new, old, a, batch.eps) for a in advantages]
    if "no_exp" in flags:
        breakdowns = [replace(b, ratio=b.log_ratio.copy()) for b in breakdowns]
    if "clip_swapped" in flags:
        breakdowns = [replace(b, upper=b.lower) for b in breakdowns]
    return breakdowns


def _clip_masks(batch: CheckBatch, b: Any, flags: frozenset[str]) -> list[BoolArray]:
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
    else:
        masks = [(p & above) | (n & below) for p, n in sides]
    undecided, verdicts = np.flatnonzero(batch.undecided), list(masks)
    for count in range(1, 0 if _OWN_RATIOS & flags else len(undecided) + 1):
        flipped = np.zeros(b.n, dtype=bool)  # the verdict flipped on the first `count`
        flipped[undecided[:count]] = True
        masks += [mask ^ flipped for mask in verdicts]
    return masks


def _loss(b: Any, flags: frozenset[str]) -> float:
    """The loss before the scale: the objective kept decides the terms."""
    if not {"max_for_min", "unclipped", "clip_only"} & flags:
        return b.loss
    if "max_for_min" in flags:
        terms = np.maximum(b.unclipped_term, b.clipped_term)
    else:
        terms = b.unclipped_term if "unclipped" in flags else b.clipped_term
    with np.errstate(all="ignore"):  # inf - inf is NaN here: no such answer is right
        return float(-terms.sum() / b.n) + 0.0


#: One answer: the call, and what it returned as floats; a set of mistakes.
Answer, Flags = tuple[Call, FloatArray], frozenset[str]


def value_findings(
    kind: Kind, answers: list[Answer], assumed: Flags | None, role: Role
) -> tuple[list[Finding], Flags | None]:
    """The findings about the values, and the mistakes that explain them (None if none do).

    The fewest value mistakes of ``role`` that, with the ``assumed`` ones, explain every answer,
    each shown on a batch where leaving it out changes the answer; k mistakes together need more
    than k answers (fewer would fit almost anything).  The same answer on every batch, a
    placeholder such as ``return 0.0``, is a ``mismatch`` even where mistakes happen to give it.
    """
    if assumed is None or not answers:
        return [], assumed
    for extra in () if _placeholder(kind, answers) else candidate_mistake_sets(kind, role):
        flags = assumed | extra
        if (len(extra) > 1 and len(answers) <= len(extra)) or not _explains(kind, answers, flags):
            continue
        shown = [_shows(kind, answers, flags, key) for key in VALUE_MISTAKES[kind] if key in extra]
        if all(shown):
            return shown, flags  # type: ignore[return-value]
    return _mismatch(kind, answers, assumed), None


def differs(kind: Kind, call: Call, got: FloatArray) -> BoolArray:
    """Where the answer is not the reference's (either verdict on an undecided sample)."""
    return ~_agrees(got, predict(call.batch, kind))  # type: ignore[arg-type]


def _placeholder(kind: Kind, answers: Sequence[Answer]) -> bool:
    """Whether every answer is one and the same value, though the reference answers differ."""
    values = np.concatenate([got for _, got in answers])
    references = np.concatenate([np.atleast_1d(c.batch.answers[kind]) for c, _ in answers])
    same = [np.array_equal(v, np.full_like(v, v[0]), equal_nan=True) for v in (values, references)]
    return len(answers) > 1 and same == [True, False]


def _agrees(got: FloatArray, prediction: Prediction) -> BoolArray:
    """Where ``got`` is one of the answers the prediction allows."""
    rtol, atol = TOLERANCES[prediction.loose]
    agree = prediction.free.copy() if prediction.free is not None else np.zeros(got.shape, bool)
    with np.errstate(invalid="ignore"):  # infinities must agree exactly, NaN matches only NaN
        for value in prediction.values:
            agree |= np.isclose(got, value, rtol=rtol, atol=atol, equal_nan=True)
    return agree


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
        if key == "grad_on_clipped":
            shows = with_it.free if with_it.free is not None else np.zeros(got.shape, bool)
        else:
            shows = ~_agrees(with_it.values[0], without)
        if (wrong := shows & differs(kind, call, got)).any():
            return finding(key, evidence=evidence(kind, call, got, _first(wrong)), batch=call.batch)
        if shows.any():
            needed.append((call, got, _first(shows), without.values[0]))
    if not needed:
        return None
    call, got, index, without_value = needed[0]
    text = f"On {call.batch.label} your answer {exact(got[index])} takes this mistake too: "
    text += f"without it the others give {exact(without_value[index])}."
    return finding(key, evidence=text, batch=call.batch)


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
        shown = f"an array of {exact(value)}s" if kind == "grad" else exact(value)
        message = f"Your function returns {shown} on every batch, whatever the inputs (a "
        message += "placeholder?), and that differs from the reference."
    elif assumed:
        message = "Your answers differ from the reference in a way the mistakes above do not "
        message += "explain."
    inputs = (
        f" Inputs: logp_new = {numbers(b.logp_new)}, logp_old = {numbers(b.logp_old)} (ratios "
        f"{numbers(b.breakdown.ratio)}), advantages = {numbers(b.advantages)}, "
        f"eps = {exact(b.eps)}."
    )
    shown = evidence(kind, call, got, _first(differs(kind, call, got))) + inputs
    return [finding("mismatch", f"{message} {lesson_of(b, 'smallest')}", shown, b)]


def evidence(kind: Kind, call: Call, got: FloatArray, index: int) -> str:
    """``On batch ..: expected .., got ..`` (a gradient's at sample ``index``): rounded, or with
    every digit where the rounded forms look equal."""
    b, expected = call.batch.breakdown, np.atleast_1d(call.batch.answers[kind])
    shown = [rounded(expected[index]), rounded(got[index])]
    if shown[0] == shown[1]:
        shown = [exact(expected[index]), exact(got[index])]
    sample = f", sample {index} (r = {rounded(b.ratio[index])}, A = {rounded(b.advantages[index])})"
    where = call.batch.label + (sample if kind == "grad" else "")
    return f"On {where}: expected {shown[0]}, got {shown[1]}."


def lesson_of(batch: CheckBatch, which: str = "") -> str:
    """``That batch tests this: <its lesson>.`` (``The <which> batch where they differ ...``)."""
    where = f"The {which} batch where they differ" if which else "That batch"
    return f"{where} tests this: {batch.lesson}."


def numbers(values: FloatArray) -> str:
    """``[0.5, 1, ...]``: at most 8 values, rounded."""
    return vector(values, each=rounded, limit=8)


def _first(mask: BoolArray) -> int:
    return int(np.flatnonzero(mask)[0])
