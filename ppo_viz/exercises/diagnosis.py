"""From the learner's answers to named findings, each with the batch where it shows.

:func:`diagnose` looks at the core batches first, then at the robustness ones.
On each group of calls, in this order:

1. a call that did not return within the time limit: ``timeout``;
2. an exception (other than writing into read-only inputs): ``error``;
3. a value of the wrong type or shape: ``wrong_type``;
4. NaN exactly where an overflowing ratio meets ``A = 0``: ``nan_overflow``
   (those entries are then left out of the comparison);
5. the smallest set of variant mistakes (:mod:`.mistakes`, predicted by
   :mod:`.variants`) that explains every remaining answer, single mistakes
   first, then pairs and triples; if none does, ``mismatch`` with the
   smallest batch where an answer differs;
6. changed input arrays, or a failure on read-only ones: ``mutated``; names of
   ``ppo_clip`` the function replaced: ``patched_module``.

The core batches' findings decide whether the exercise passed.  On the
robustness batches the mistakes found on the core ones are taken as given, and
only robustness variants are searched for; what is left are the "going
further" notes, each naming the lesson of notebook 5 its batch relates to.

Each finding quotes its evidence: the smallest batch (and, for a gradient,
the sample) where the mistake shows, with the expected and the actual value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppo_viz.exercises.answers import read_answer
from ppo_viz.exercises.battery import BoolArray, CheckBatch, FloatArray, Kind, Role
from ppo_viz.exercises.calling import LearnerCall, error_text, learner_line
from ppo_viz.exercises.mistakes import MISTAKES, VALUE_MISTAKES, candidate_mistake_sets, explanation
from ppo_viz.exercises.time_limit import TIME_LIMIT_S
from ppo_viz.exercises.variants import Forms, forms_of, predict
from ppo_viz.numbers import exact, rounded, vector

#: Answers match a prediction when ``np.isclose`` with these tolerances holds.
RTOL, ATOL = 1e-9, 1e-12
#: Looser tolerances for the normalized-advantage variant (codes add 1e-8 to the std).
NORMALIZED_RTOL, NORMALIZED_ATOL = 1e-6, 1e-9
#: How many entries of an array evidence quotes.
ARRAY_LIMIT = 8


@dataclass(frozen=True)
class Finding:
    """One problem found: a stable ``key``, a title, the explanation and evidence.

    ``further`` names the lesson of notebook 5 a robustness finding relates to.
    """

    key: str
    title: str
    message: str
    evidence: str = ""
    further: str = ""

    def text(self) -> str:
        """Plain text: title, explanation, evidence, the related lesson."""
        lines = [f"{self.title}: {self.message}"]
        if self.evidence:
            lines.append(f"  {self.evidence}")
        if self.further:
            lines.append(f"  See {self.further}.")
        return "\n".join(lines)


def finding(
    key: str, kind: Kind, message: str | None = None, evidence: str = "", batch: Any = None
) -> Finding:
    """The finding of mistake ``key``, with its standard explanation unless ``message`` is given.

    ``batch``, the batch where it shows, gives the notebook 5 lesson of a robustness batch.
    """
    further = batch.further if batch is not None else ""
    return Finding(key, MISTAKES[key].title, message or explanation(key, kind), evidence, further)


@dataclass(frozen=True)
class Explained:
    """The variant mistakes (and their forms) that explain a group of answers."""

    flags: frozenset[str] = frozenset()
    forms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose` found: the core findings, the robustness notes, the matches.

    ``matching[role]`` counts the batches of ``role`` on which every answer was right.
    """

    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...]
    matching: Mapping[Role, int]


def diagnose(
    kind: Kind,
    function: Callable[..., Any],
    calls: Sequence[LearnerCall],
    limit_s: float = TIME_LIMIT_S,
) -> Diagnosis:
    """Name every problem the ``calls`` of ``function`` show: core findings, then notes."""
    core = [c for c in calls if c.batch.role == "core"]
    robust = [c for c in calls if c.batch.role == "robustness"]
    findings, explained, core_matching = _diagnose(kind, function, core, Explained(), "core")
    notes, _, robust_matching = _diagnose(kind, function, robust, explained, "robustness")
    timed_out = next((c for c in calls if c.timed_out), None)
    if timed_out is not None:
        timeout = _timeout_finding(function, timed_out, calls, limit_s)
        (findings if timed_out.batch.role == "core" else notes).insert(0, timeout)
    keys = {f.key for f in findings}
    return Diagnosis(
        tuple(findings),
        tuple(note for note in notes if note.key not in keys),
        {"core": core_matching, "robustness": robust_matching},
    )


def _diagnose(
    kind: Kind,
    function: Callable[..., Any],
    calls: Sequence[LearnerCall],
    assumed: Explained | None,
    role: Role,
) -> tuple[list[Finding], Explained | None, int]:
    """Findings on one group of calls, what explains its answers, and how many batches match."""
    findings = _error_findings(kind, function, calls)
    answers = [(c, read_answer(kind, c)) for c in calls if c.returned]
    findings += _type_findings(kind, answers)
    observed = [_Observed(c, got) for c, got in answers if not isinstance(got, str)]
    value_findings, explained = _value_findings(observed, kind, assumed, role)
    findings += value_findings
    findings += _mutation_findings(kind, function, calls)
    findings += _patch_findings(kind, calls)
    matching = sum(
        1
        for item in observed
        if not item.call.mutated and not item.masked.any() and not _differences(item, kind).any()
    )
    return findings, explained, matching


# --------------------------------------------------------------------------
# Timeouts, errors and wrong types
# --------------------------------------------------------------------------


def _timeout_finding(
    function: Callable[..., Any], call: LearnerCall, calls: Sequence[LearnerCall], limit_s: float
) -> Finding:
    """The finding of ``call``, which ran out of time (the check stopped calling there)."""
    batch, skipped = call.batch, sum(c.skipped for c in calls)
    where = learner_line(call.error, function) if call.error is not None else ""
    sentences = [
        f"On {batch.label} your function did not return within {exact(limit_s)} s, the "
        "checker's time limit for one call."
    ]
    if call.stopped:
        sentences.append("The checker stopped it" + (f" ({where})." if where else "."))
    else:
        sentences.append(
            "The checker cannot stop it here (there is no timer signal in this thread or on "
            "this system): it is still running in the background and keeps a CPU core busy "
            "until you restart the kernel (Kernel > Restart Kernel)."
        )
    if skipped:
        batches = "batch" if skipped == 1 else "batches"
        sentences.append(f"It was not called on the {skipped} {batches} after that one.")
    sentences.append(
        "Look for a loop whose condition never changes, a sleep, or work that grows much "
        f"faster than N. That batch tests this: {batch.lesson}."
    )
    message = " ".join(sentences)
    return Finding("timeout", MISTAKES["timeout"].title, message, further=batch.further)


def _error_findings(
    kind: Kind, function: Callable[..., Any], calls: Sequence[LearnerCall]
) -> list[Finding]:
    """The first exception, on the smallest batch (read-only failures count as ``mutated``)."""
    errors = [
        (c.batch, c.error)
        for c in calls
        if c.error is not None and not c.timed_out and not c.read_only_failure
    ]
    if not errors:
        return []
    batch, error = min(errors, key=lambda pair: pair[0].n)
    message = (
        f"On {batch.label} your function raised {error_text(error, function)}. "
        f"That batch tests this: {batch.lesson}."
    )
    return [finding("error", kind, message, batch=batch)]


def _type_findings(
    kind: Kind, answers: Sequence[tuple[LearnerCall, FloatArray | str]]
) -> list[Finding]:
    """The first answer of the wrong type or shape."""
    for call, answer in answers:
        if isinstance(answer, str):
            evidence = f"Seen on {call.batch.label}."
            message = f"Your function returned {answer}."
            return [finding("wrong_type", kind, message, evidence, batch=call.batch)]
    return []


# --------------------------------------------------------------------------
# Comparing answers with the variants
# --------------------------------------------------------------------------


@dataclass
class _Observed:
    """One batch's answer as floats, ready to compare; ``masked`` entries are ignored."""

    call: LearnerCall
    got: FloatArray
    masked: BoolArray = field(init=False)

    def __post_init__(self) -> None:
        self.masked = np.zeros(self.got.shape, dtype=bool)

    @property
    def batch(self) -> CheckBatch:
        return self.call.batch

    @property
    def fully_masked(self) -> bool:
        return bool(self.masked.all())


def _as_floats(value: Any) -> FloatArray:
    """A prediction's value as a 1-D float64 array."""
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def _close(got: FloatArray, expected: FloatArray, loose: bool = False) -> BoolArray:
    """Elementwise agreement; infinities must agree exactly, NaN matches only NaN."""
    rtol, atol = (NORMALIZED_RTOL, NORMALIZED_ATOL) if loose else (RTOL, ATOL)
    with np.errstate(invalid="ignore"):
        return np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def _differences(item: _Observed, kind: Kind, assumed: Explained | None = None) -> BoolArray:
    """Where the answer differs from the reference, or from the variant ``assumed``."""
    expected: Any = item.batch.reference(kind)
    if assumed is not None and assumed.flags:
        prediction = predict(item.batch, kind, assumed.flags, assumed.forms)
        expected = expected if prediction is None else prediction.value
    return ~_close(item.got, _as_floats(expected)) & ~item.masked


def _explains(
    observed: Sequence[_Observed], kind: Kind, flags: frozenset[str], forms: Forms
) -> bool:
    """Whether an implementation with exactly the mistakes ``flags`` explains every answer.

    "grad_on_clipped" must also show somewhere: a nonzero gradient on a clipped sample.
    """
    shows_free_gradient = False
    for item in observed:
        if item.fully_masked:
            continue
        prediction = predict(item.batch, kind, flags, forms)
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


def _find_mistakes(
    observed: Sequence[_Observed], kind: Kind, assumed: Explained, role: Role
) -> Explained | None:
    """The fewest variants of ``role`` that, added to ``assumed``, explain every answer."""
    for extra in candidate_mistake_sets(kind, role):
        flags = assumed.flags | extra
        for forms in forms_of(extra):
            chosen = {**assumed.forms, **forms}
            if _explains(observed, kind, flags, chosen):
                return Explained(flags, chosen)
    return None


# --------------------------------------------------------------------------
# Findings about the values, with evidence
# --------------------------------------------------------------------------


def _value_findings(
    observed: list[_Observed], kind: Kind, assumed: Explained | None, role: Role
) -> tuple[list[Finding], Explained | None]:
    """Mask the NaN symptom of an overflow, then find the mistakes that explain the rest.

    Returns the findings and what explains the answers (None if nothing does,
    or if ``assumed`` is None: the core answers were not explained either).
    """
    nan_finding = _nan_overflow_finding(observed, kind)
    if assumed is None or not observed:
        return nan_finding, assumed
    found = _find_mistakes(observed, kind, assumed, role)
    if found is None:
        return _mismatch_findings(observed, kind, assumed) + nan_finding, None
    new = found.flags - assumed.flags
    findings = [
        _flag_finding(observed, kind, found, flag) for flag in VALUE_MISTAKES[kind] if flag in new
    ]
    return findings + nan_finding, found


def _nan_overflow_finding(observed: Sequence[_Observed], kind: Kind) -> list[Finding]:
    """NaN where an overflowing ratio meets ``A = 0`` (its sample, for a gradient), masked."""
    evidence: list[tuple[_Observed, int]] = []
    for item in observed:
        overflow = item.batch.overflowing_zero_advantage
        nan = np.isnan(item.got)
        at_overflow = nan & overflow if kind == "grad" else nan & overflow.any()
        if at_overflow.any():
            evidence.append((item, _first(at_overflow)))
            item.masked |= at_overflow
    if not evidence:
        return []
    item, index = evidence[0]
    return [finding("nan_overflow", kind, evidence=_evidence(item, kind, index), batch=item.batch)]


def _flag_finding(
    observed: Sequence[_Observed], kind: Kind, found: Explained, flag: str
) -> Finding:
    """The finding of one of the mistakes ``found``: the smallest batch where it shows.

    A batch shows ``flag`` where the answer differs from the reference and the
    variant with all of ``found`` differs from the one without ``flag``.
    """
    for item in sorted(observed, key=lambda o: o.batch.n):
        if item.fully_masked:
            continue
        with_flag = predict(item.batch, kind, found.flags, found.forms)
        without_flag = predict(item.batch, kind, found.flags - {flag}, found.forms)
        if with_flag is None or without_flag is None:
            continue
        differs = _differences(item, kind)
        if flag == "grad_on_clipped":
            shows = differs & (with_flag.free if with_flag.free is not None else False)
        else:
            shows = differs & ~_close(_as_floats(with_flag.value), _as_floats(without_flag.value))
        if shows.any():
            evidence = _evidence(item, kind, _first(shows))
            return finding(flag, kind, evidence=evidence, batch=item.batch)
    return finding(flag, kind)


def _mismatch_findings(
    observed: Sequence[_Observed], kind: Kind, assumed: Explained
) -> list[Finding]:
    """ "Differs from the reference", with the smallest batch where it does and its inputs."""
    failing = [item for item in observed if _differences(item, kind, assumed).any()]
    if not failing:
        return []
    item = min(failing, key=lambda o: o.batch.n)
    batch = item.batch
    unexplained = (
        "match none of the common mistakes this checker knows"
        if not assumed.flags
        else "differ in a way the mistakes above do not explain"
    )
    message = (
        f"Your answers differ from the reference and {unexplained}. The smallest batch "
        f"where they differ tests this: {batch.lesson}."
    )
    index = _first(_differences(item, kind, assumed))
    inputs = (
        f"{_evidence(item, kind, index)} Inputs: logp_new = {_numbers(batch.logp_new)}, "
        f"logp_old = {_numbers(batch.logp_old)} (ratios {_numbers(batch.breakdown.ratio)}), "
        f"advantages = {_numbers(batch.advantages)}, eps = {exact(batch.eps)}."
    )
    return [finding("mismatch", kind, message, inputs, batch=batch)]


def _evidence(item: _Observed, kind: Kind, index: int) -> str:
    """``On batch ..: expected .., got ..`` for one batch (one sample for the gradient)."""
    batch = item.batch
    expected = _as_floats(batch.reference(kind))
    if kind != "grad":
        return f"On {batch.label}: {expected_and_got(expected[0], item.got[0])}."
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
# Side effects: changed inputs, a changed module
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


def _patch_findings(kind: Kind, calls: Sequence[LearnerCall]) -> list[Finding]:
    """One finding if any call replaced names of the module ppo_clip (put back since)."""
    call = next((c for c in calls if c.patched), None)
    if call is None:
        return []
    names = ", ".join(f"ppo_clip.{name}" for name in call.patched)
    evidence = f"On {call.batch.label} it changed {names}."
    return [finding("patched_module", kind, evidence=evidence)]
