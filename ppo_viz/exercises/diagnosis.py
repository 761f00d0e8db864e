"""From the learner's answers to named findings, each with the batch where it shows.

:func:`diagnose` looks at the calls of one check in this order:

1. an exception (other than writing into read-only inputs): ``error``;
2. a value of the wrong type or shape: ``wrong_type``;
3. NaN exactly where an overflowing ratio meets ``A = 0``: ``nan_overflow``
   (those entries are then left out of the comparison);
4. the smallest set of variant mistakes (:mod:`.mistakes`) that explains
   every remaining answer, single mistakes first, then pairs and triples;
   if none does, ``mismatch`` with the smallest batch where an answer differs;
5. changed input arrays, or a failure on read-only ones: ``mutated``.

Each finding quotes its evidence: the smallest batch (and, for a gradient,
the sample) where the mistake shows, with the expected and the actual value.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppo_viz.exercises.battery import BoolArray, CheckBatch, FloatArray, Kind
from ppo_viz.exercises.calling import LearnerCall, error_text
from ppo_viz.exercises.mistakes import (
    MISTAKES,
    VALUE_MISTAKES,
    candidate_mistake_sets,
    explanation,
    predict,
)
from ppo_viz.numbers import exact, rounded, vector

#: Answers match a prediction when ``np.isclose`` with these tolerances holds.
RTOL, ATOL = 1e-9, 1e-12
#: Looser tolerances for the normalized-advantage variant (codes add 1e-8 to the std).
NORMALIZED_RTOL, NORMALIZED_ATOL = 1e-6, 1e-9
#: How many entries of an array evidence quotes.
ARRAY_LIMIT = 8


@dataclass(frozen=True)
class Finding:
    """One problem found: a stable ``key``, a title, the explanation and evidence."""

    key: str
    title: str
    message: str
    evidence: str = ""

    def text(self) -> str:
        """Plain text: title, explanation, evidence."""
        lines = [f"{self.title}: {self.message}"]
        if self.evidence:
            lines.append(f"  {self.evidence}")
        return "\n".join(lines)


def finding(key: str, kind: Kind, message: str | None = None, evidence: str = "") -> Finding:
    """The finding of mistake ``key``, with its standard explanation unless ``message`` is given."""
    return Finding(key, MISTAKES[key].title, message or explanation(key, kind), evidence)


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose` found, and on how many batches every answer was right."""

    findings: tuple[Finding, ...]
    matching_batches: int


def diagnose(kind: Kind, function: Callable[..., Any], calls: Sequence[LearnerCall]) -> Diagnosis:
    """Name every problem the ``calls`` of ``function`` show, in report order.

    ``calls`` may be any batches' calls (all of :func:`.battery`, or only its
    core batches): findings and evidence come from those calls alone.
    """
    findings = [*_error_findings(kind, function, calls)]
    typed = [c for c in calls if c.error is None and _type_problem(kind, c) is None]
    findings.extend(_type_findings(kind, calls))
    observed = [_observe(c, kind) for c in typed]
    findings.extend(_value_findings(observed, kind))
    findings.extend(_mutation_findings(kind, function, calls))
    matching = sum(
        1
        for item, c in zip(observed, typed, strict=True)
        if not c.mutated and not item.masked.any() and not _differences(item, kind).any()
    )
    return Diagnosis(tuple(findings), matching)


# --------------------------------------------------------------------------
# Errors and wrong types
# --------------------------------------------------------------------------


def _error_findings(
    kind: Kind, function: Callable[..., Any], calls: Sequence[LearnerCall]
) -> list[Finding]:
    """The first exception, on the smallest batch (read-only failures count as ``mutated``)."""
    errors = [(c.batch, c.error) for c in calls if c.error is not None and not c.read_only_failure]
    if not errors:
        return []
    batch, error = min(errors, key=lambda pair: pair[0].n)
    message = (
        f"On {batch.label} your function raised {error_text(error, function)}. "
        f"That batch tests this: {batch.lesson}."
    )
    return [finding("error", kind, message)]


def _type_findings(kind: Kind, calls: Sequence[LearnerCall]) -> list[Finding]:
    """The first answer of the wrong type or shape."""
    for call in calls:
        problem = _type_problem(kind, call) if call.error is None else None
        if problem is not None:
            message = f"Your function returned {problem}."
            return [finding("wrong_type", kind, message, f"Seen on {call.batch.label}.")]
    return []


def _type_problem(kind: Kind, call: LearnerCall) -> str | None:
    """Why the value returned by ``call`` is not the right type or shape, or None if it is."""
    if call.not_implemented:
        return "None (is a return statement missing?)"
    value, n = call.value, call.batch.n
    if kind == "grad":
        return _array_problem(value, n)
    what = "loss" if kind == "loss" else "clip fraction"
    if isinstance(value, (bool, np.bool_)):
        return f"a bool ({value}); the {what} is a float"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return "a 0-d numpy array; return a plain float, e.g. float(...)"
        if value.shape == (n,) and n > 1:
            return (
                f"an array of shape {value.shape}, one value per sample; the {what} is one "
                "number for the whole batch (a mean over the samples)"
            )
        return f"an array of shape {value.shape}; the {what} is a single float"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}; the {what} is a single float"
    if isinstance(value, np.floating) and not isinstance(value, np.float64):
        return f"a {type(value).__name__}; compute in float64 (numpy's default)"
    if not isinstance(value, numbers.Real):
        return f"a {type(value).__name__}; the {what} is a float"
    return None


def _array_problem(value: object, n: int) -> str | None:
    """Why ``value`` is not a float64 gradient of shape ``(n,)``, or None if it is."""
    if isinstance(value, (list, tuple)):
        return (
            f"a {type(value).__name__}; return a numpy array of shape ({n},), e.g. np.asarray(...)"
        )
    if isinstance(value, numbers.Real):
        return f"a single number; the gradient has one entry per sample, an array of shape ({n},)"
    if not isinstance(value, np.ndarray):
        return f"a {type(value).__name__}; return a numpy array of shape ({n},)"
    if value.shape != (n,):
        return f"an array of shape {value.shape}; expected shape ({n},), one entry per sample"
    if value.dtype != np.float64:
        return f"an array of dtype {value.dtype}; the gradient is a float64 array"
    return None


# --------------------------------------------------------------------------
# Comparing answers with the variants
# --------------------------------------------------------------------------


@dataclass
class _Observed:
    """One batch's answer as floats, ready to compare; ``masked`` entries are ignored."""

    batch: CheckBatch
    got: FloatArray
    masked: BoolArray

    @property
    def fully_masked(self) -> bool:
        return bool(self.masked.all())


def _observe(call: LearnerCall, kind: Kind) -> _Observed:
    got = _as_floats(call.value if kind == "grad" else float(call.value))
    return _Observed(call.batch, got, np.zeros(got.shape, dtype=bool))


def _as_floats(value: Any) -> FloatArray:
    """A value (or a prediction's) as a 1-D float64 array."""
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def _close(got: FloatArray, expected: FloatArray, loose: bool = False) -> BoolArray:
    """Elementwise agreement; infinities must agree exactly, NaN matches only NaN."""
    rtol, atol = (NORMALIZED_RTOL, NORMALIZED_ATOL) if loose else (RTOL, ATOL)
    with np.errstate(invalid="ignore"):
        return np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def _differences(item: _Observed, kind: Kind) -> BoolArray:
    """Where the answer differs from the reference (masked entries aside)."""
    return ~_close(item.got, _as_floats(item.batch.reference(kind))) & ~item.masked


def _explains(observed: Sequence[_Observed], kind: Kind, flags: frozenset[str], ddof: int) -> bool:
    """Whether an implementation with exactly the mistakes ``flags`` explains every answer.

    "grad_on_clipped" must also show somewhere: a nonzero gradient on a clipped sample.
    """
    shows_free_gradient = False
    for item in observed:
        if item.fully_masked:
            continue
        prediction = predict(item.batch, kind, flags, ddof)
        if prediction is None:
            continue
        ignore = item.masked.copy()
        if prediction.free is not None:
            ignore |= prediction.free
            nonzero = ~_close(item.got, np.zeros_like(item.got))
            shows_free_gradient |= bool((prediction.free & nonzero & ~item.masked).any())
        if not _close(item.got, _as_floats(prediction.value), prediction.loose)[~ignore].all():
            return False
    return "grad_on_clipped" not in flags or shows_free_gradient


def _find_mistakes(observed: Sequence[_Observed], kind: Kind) -> tuple[frozenset[str], int] | None:
    """The smallest set of mistakes that explains every answer, and its ddof."""
    for flags in candidate_mistake_sets(kind):
        for ddof in (0, 1) if "normalized" in flags else (0,):
            if _explains(observed, kind, flags, ddof):
                return flags, ddof
    return None


# --------------------------------------------------------------------------
# Findings about the values, with evidence
# --------------------------------------------------------------------------


def _value_findings(observed: list[_Observed], kind: Kind) -> list[Finding]:
    """Mask the NaN symptom of an overflow, then find the mistakes that explain the rest."""
    nan_evidence = ""
    for item in observed:
        at_overflow = _nan_at_overflow(item, kind)
        if at_overflow.any():
            nan_evidence = nan_evidence or _evidence(item, kind, _first(at_overflow))
            item.masked |= at_overflow
    findings: list[Finding] = []
    found = _find_mistakes(observed, kind)
    if found is None:
        findings.extend(_mismatch_findings(observed, kind))
    else:
        flags, ddof = found
        findings.extend(
            finding(flag, kind, evidence=_flag_evidence(observed, kind, flags, flag, ddof))
            for flag in VALUE_MISTAKES[kind]
            if flag in flags
        )
    if nan_evidence:
        findings.append(finding("nan_overflow", kind, evidence=nan_evidence))
    return findings


def _nan_at_overflow(item: _Observed, kind: Kind) -> BoolArray:
    """NaN entries explained by an overflowing ratio with ``A = 0`` (its sample, for a gradient)."""
    overflow = item.batch.overflowing_zero_advantage
    nan = np.isnan(item.got)
    return nan & overflow if kind == "grad" else nan & overflow.any()


def _flag_evidence(
    observed: Sequence[_Observed], kind: Kind, flags: frozenset[str], flag: str, ddof: int
) -> str:
    """Evidence for one of the mistakes ``flags``: the smallest batch where it shows.

    A batch shows ``flag`` where the answer differs from the reference and the
    variant with all of ``flags`` differs from the one without ``flag``.
    """
    for item in sorted(observed, key=lambda o: o.batch.n):
        if item.fully_masked:
            continue
        differs = _differences(item, kind)
        with_flag = predict(item.batch, kind, flags, ddof)
        without_flag = predict(item.batch, kind, flags - {flag}, ddof)
        if with_flag is None or without_flag is None:
            continue
        if flag == "grad_on_clipped":
            shows = differs & with_flag.breakdown.is_clipped
        else:
            shows = differs & ~_close(_as_floats(with_flag.value), _as_floats(without_flag.value))
        if shows.any():
            return _evidence(item, kind, _first(shows))
    return ""


def _mismatch_findings(observed: Sequence[_Observed], kind: Kind) -> list[Finding]:
    """ "Differs from the reference", with the smallest batch where it does and its inputs."""
    failing = [item for item in observed if _differences(item, kind).any()]
    if not failing:
        return []
    item = min(failing, key=lambda o: o.batch.n)
    batch = item.batch
    message = (
        "Your answers differ from the reference and match none of the common mistakes this "
        f"checker knows. The smallest batch where they differ tests this: {batch.lesson}."
    )
    inputs = (
        f"{_evidence(item, kind)} Inputs: logp_new = {_numbers(batch.logp_new)}, "
        f"logp_old = {_numbers(batch.logp_old)} (ratios {_numbers(batch.breakdown.ratio)}), "
        f"advantages = {_numbers(batch.advantages)}, eps = {exact(batch.eps)}."
    )
    return [finding("mismatch", kind, message, inputs)]


def _evidence(item: _Observed, kind: Kind, index: int | None = None) -> str:
    """``On batch ..: expected .., got ..`` for one batch (one sample for the gradient)."""
    batch = item.batch
    expected = _as_floats(batch.reference(kind))
    if kind != "grad":
        return f"On {batch.label}: {expected_and_got(expected[0], item.got[0])}."
    if index is None:
        index = _first(_differences(item, kind))
    b = batch.breakdown
    return (
        f"On {batch.label}, sample {index} (r = {rounded(b.ratio[index])}, "
        f"A = {rounded(b.advantages[index])}): "
        f"{expected_and_got(expected[index], item.got[index])}."
    )


def expected_and_got(expected: float, got: float) -> str:
    """``expected 0.5, got 1``: rounded, or with every digit when the rounded forms look equal."""
    short = rounded(expected), rounded(got)
    if short[0] == short[1]:
        short = exact(expected), exact(got)
    return f"expected {short[0]}, got {short[1]}"


def _numbers(values: Iterable[float]) -> str:
    """An array for evidence: rounded entries, long arrays elided."""
    return vector(values, each=rounded, limit=ARRAY_LIMIT)


def _first(mask: BoolArray) -> int:
    return int(np.flatnonzero(mask)[0])


# --------------------------------------------------------------------------
# Changed inputs
# --------------------------------------------------------------------------


def _mutation_findings(
    kind: Kind, function: Callable[..., Any], calls: Sequence[LearnerCall]
) -> list[Finding]:
    """One finding if any call changed its inputs or failed on read-only ones."""
    evidence = []
    changed = next((c for c in calls if c.before_after is not None), None)
    if changed is not None and changed.before_after is not None:
        before, after = changed.before_after
        evidence.append(
            f"On {changed.batch.label}, {changed.mutated[0]} was {_numbers(before)} before "
            f"the call and {_numbers(after.ravel())} after it."
        )
    read_only = next((c for c in calls if c.read_only_failure), None)
    if read_only is not None and read_only.error is not None:
        evidence.append(
            f"On {read_only.batch.label}, whose arrays are read-only, your function raised "
            f"{error_text(read_only.error, function)}."
        )
    if not evidence:
        return []
    return [finding("mutated", kind, evidence=" ".join(evidence))]
