"""From the learner's answers to named findings, each with the batch where it shows.

:func:`diagnose` looks at the core batches, then at the robustness ones; on each group:

1. an exception (other than writing into read-only inputs), or the process ending: ``error``;
2. a value of the wrong type or shape: ``wrong_type``;
3. the same answer on every batch whatever the inputs, a placeholder such as ``return 0.0``:
   ``mismatch``, saying what it should be on the smallest batch.  No mistake is read into such
   answers, although a combination of mistakes may happen to give them;
4. NaN exactly where an overflowing ratio meets ``A = 0``: ``nan_overflow`` (those entries are
   then left out);
5. the fewest variant mistakes (:mod:`.mistakes`, predicted by :mod:`.variants`) that explain
   every remaining answer, single mistakes first, then pairs and triples.  Each mistake must
   show on some batch (leaving it out changes the answer there), and k mistakes together need
   more than k answers: fewer would fit almost anything.  If none, ``mismatch``;
6. changed inputs, or a failure on read-only ones: ``mutated``; names of ``ppo_clip`` or numpy
   rebound: ``patched_module``.

A call that did not return in time comes first: ``timeout``.  The core batches' findings decide
the pass.  On the robustness batches the mistakes found on the core ones are taken as given and
only robustness variants are searched for: the "going further" notes.  Each finding quotes its
evidence: the smallest batch (and, for a gradient, the sample) where it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ppo_viz.exercises.battery import BoolArray, CheckBatch, FloatArray, Kind, Role
from ppo_viz.exercises.mistakes import TITLES, VALUE_MISTAKES, candidate_mistake_sets, explanation
from ppo_viz.exercises.sandbox import Call
from ppo_viz.exercises.variants import Prediction, predict
from ppo_viz.numbers import exact, rounded, vector

#: Answers match a prediction when ``np.isclose`` with these tolerances holds.
RTOL, ATOL = 1e-9, 1e-12
#: Looser tolerances for the normalized-advantage variant (codes add 1e-8 to the std).
LOOSE_RTOL, LOOSE_ATOL = 1e-6, 1e-9
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
        lines += [f"  {self.evidence}"] if self.evidence else []
        lines += [f"  See {self.further}."] if self.further else []
        return "\n".join(lines)


def finding(
    key: str, kind: Kind, message: str = "", evidence: str = "", batch: CheckBatch | None = None
) -> Finding:
    """Mistake ``key``'s finding, with its own explanation unless ``message`` is given."""
    further = batch.further if batch is not None else ""
    return Finding(key, TITLES[key], message or explanation(key, kind), evidence, further)


@dataclass(frozen=True)
class Diagnosis:
    """The core findings, the robustness notes, and how many batches of each role matched."""

    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...]
    matching: dict[str, int]


@dataclass
class _Answer:
    """One batch's answer as floats; ``ignore`` marks entries left out of the comparison."""

    call: Call
    got: FloatArray
    ignore: BoolArray = field(init=False)

    def __post_init__(self) -> None:
        self.ignore = np.zeros(self.got.shape, dtype=bool)

    @property
    def batch(self) -> CheckBatch:
        return self.call.batch


def diagnose(kind: Kind, calls: Sequence[Call], limit_s: float) -> Diagnosis:
    """Name every problem the ``calls`` show: core findings, then robustness notes."""
    core = [c for c in calls if c.batch.role == "core"]
    robust = [c for c in calls if c.batch.role == "robustness"]
    findings, explained, core_matching = _diagnose(kind, core, frozenset(), "core")
    notes, _, robust_matching = _diagnose(kind, robust, explained, "robustness")
    late = next((c for c in calls if c.timed_out), None)
    if late is not None:
        (findings if late.batch.role == "core" else notes).insert(
            0, _timeout(kind, late, calls, limit_s)
        )
    keys = {f.key for f in findings}
    return Diagnosis(
        tuple(findings),
        tuple(note for note in notes if note.key not in keys),
        {"core": core_matching, "robustness": robust_matching},
    )


def _diagnose(
    kind: Kind, calls: Sequence[Call], assumed: frozenset[str] | None, role: Role
) -> tuple[list[Finding], frozenset[str] | None, int]:
    """One group's findings, the mistakes that explain its answers, how many batches match."""
    findings = []
    failed = [c for c in calls if c.error and not c.timed_out and not c.read_only_failure]
    if failed:
        call = min(failed, key=lambda c: c.batch.n)
        message = f"On {call.batch.label} your function {call.error}. {_tests(call.batch)}"
        findings.append(finding("error", kind, message, batch=call.batch))
    returned = [c for c in calls if c.returned]
    wrong = next((c for c in returned if isinstance(c.answer, str)), None)
    if wrong is not None:
        message, evidence = (
            f"Your function returned {wrong.answer}.",
            f"Seen on {wrong.batch.label}.",
        )
        findings.append(finding("wrong_type", kind, message, evidence, wrong.batch))
    answers = [_Answer(c, c.answer) for c in returned if not isinstance(c.answer, str)]
    values, explained = _value_findings(kind, answers, assumed, role)
    findings += values + _side_effects(kind, calls)
    matching = sum(
        not (a.call.mutated or a.ignore.any() or _differs(a, kind).any()) for a in answers
    )
    return findings, explained, matching


def _value_findings(
    kind: Kind, answers: list[_Answer], assumed: frozenset[str] | None, role: Role
) -> tuple[list[Finding], frozenset[str] | None]:
    """The findings about the values, and the mistakes that explain them (None if none do)."""
    constant = _constant(kind, answers)
    if constant:
        return constant, None
    nan = _nan_overflow(kind, answers)
    if assumed is None or not answers:
        return nan, assumed
    for extra in candidate_mistake_sets(kind, role):
        flags = assumed | extra
        if (len(extra) > 1 and len(answers) <= len(extra)) or not _explains(kind, answers, flags):
            continue  # k mistakes need more than k answers to show them: fewer fit anything
        shown = {flag: _shows(kind, answers, flags, flag) for flag in extra}
        if all(shown.values()):
            order = [flag for flag in VALUE_MISTAKES[kind] if flag in extra]
            return [shown[flag] for flag in order] + nan, flags  # type: ignore[misc]
    return _mismatch(kind, answers, assumed) + nan, None


def _constant(kind: Kind, answers: Sequence[_Answer]) -> list[Finding]:
    """``mismatch`` when every answer is one and the same value though the references differ."""
    if len(answers) < 2:
        return []
    values = np.concatenate([a.got for a in answers])
    references = np.concatenate([np.atleast_1d(a.batch.answers[kind]) for a in answers])
    if not _all_equal(values) or _all_equal(references):
        return []
    item = min((a for a in answers if _differs(a, kind).any()), key=lambda a: a.batch.n)
    shown = f"an array of {exact(values[0])}s" if kind == "grad" else exact(values[0])
    message = (
        f"Your function returns {shown} on every batch it answered, whatever the inputs (a "
        "placeholder?), and that differs from the reference. The smallest batch where it "
        f"differs tests this: {item.batch.lesson}."
    )
    evidence = _evidence(item, kind, _first(_differs(item, kind)))
    return [finding("mismatch", kind, message, evidence, item.batch)]


def _all_equal(values: FloatArray) -> bool:
    return bool(np.array_equal(values, np.full_like(values, values[0]), equal_nan=True))


def _nan_overflow(kind: Kind, answers: Sequence[_Answer]) -> list[Finding]:
    """NaN where an overflowing ratio meets ``A = 0`` (its own entry, for a gradient)."""
    shown = []
    for a in answers:
        overflow = a.batch.overflowing_zero_advantage
        nan = np.isnan(a.got) & (overflow if kind == "grad" else overflow.any())
        if nan.any():
            shown.append((a, _first(nan)))
            a.ignore |= nan
    if not shown:
        return []
    a, index = shown[0]
    return [finding("nan_overflow", kind, evidence=_evidence(a, kind, index), batch=a.batch)]


def _close(got: FloatArray, expected: FloatArray, loose: bool = False) -> BoolArray:
    """Elementwise agreement; infinities must agree exactly, NaN matches only NaN."""
    rtol, atol = (LOOSE_RTOL, LOOSE_ATOL) if loose else (RTOL, ATOL)
    with np.errstate(invalid="ignore"):
        return np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def _agrees(got: FloatArray, prediction: Prediction) -> BoolArray:
    """Where ``got`` is one of the answers the prediction allows."""
    agree = np.zeros(got.shape, dtype=bool)
    for value in prediction.values:
        agree |= _close(got, value, prediction.loose)
    return agree | (prediction.free if prediction.free is not None else False)


@cache
def _reference(batch: CheckBatch, kind: Kind) -> Prediction:
    prediction = predict(batch, kind)
    assert prediction is not None
    return prediction


def _differs(a: _Answer, kind: Kind) -> BoolArray:
    """Where the answer is not the reference's (either verdict on an undecided sample)."""
    return ~_agrees(a.got, _reference(a.batch, kind)) & ~a.ignore


def _explains(kind: Kind, answers: Sequence[_Answer], flags: frozenset[str]) -> bool:
    """Whether an implementation with exactly the mistakes ``flags`` gives every answer."""
    for a in answers:
        prediction = predict(a.batch, kind, flags)
        if prediction is not None and not (_agrees(a.got, prediction) | a.ignore).all():
            return False
    return True


def _shows(
    kind: Kind, answers: Sequence[_Answer], flags: frozenset[str], flag: str
) -> Finding | None:
    """``flag``'s finding, on the smallest batch where the answers need it; None if none does.

    A batch needs ``flag`` where leaving it out changes the prediction; the evidence prefers a
    batch where the answer is also wrong.
    """
    needed = []
    for a in sorted(answers, key=lambda a: a.batch.n):
        with_flag, without = predict(a.batch, kind, flags), predict(a.batch, kind, flags - {flag})
        if with_flag is None or without is None:
            continue
        if flag == "grad_on_clipped":
            shows = with_flag.free if with_flag.free is not None else np.zeros(a.batch.n, bool)
        else:
            shows = ~_agrees(with_flag.value, without)
        shows &= ~a.ignore
        if (shows & _differs(a, kind)).any():
            index = _first(shows & _differs(a, kind))
            return finding(flag, kind, evidence=_evidence(a, kind, index), batch=a.batch)
        if shows.any():
            needed.append((a, _first(shows), without.value))
    if not needed:
        return None
    a, index, without = needed[0]
    evidence = (
        f"On {a.batch.label} your answer {exact(a.got[index])} takes this mistake too: "
        f"without it the others give {exact(without[index])}."
    )
    return finding(flag, kind, evidence=evidence, batch=a.batch)


def _mismatch(kind: Kind, answers: Sequence[_Answer], assumed: frozenset[str]) -> list[Finding]:
    """ "Differs from the reference", with the smallest batch where it does and its inputs."""
    failing = [a for a in answers if _differs(a, kind).any()]
    if not failing:
        return []
    a = min(failing, key=lambda a: a.batch.n)
    b = a.batch
    unexplained = (
        "differ in a way the mistakes above do not explain"
        if assumed
        else "match none of the common mistakes this checker knows"
    )
    message = f"Your answers differ from the reference and {unexplained}. {_tests(b, 'smallest')}"
    inputs = (
        f"{_evidence(a, kind, _first(_differs(a, kind)))} Inputs: logp_new = {_numbers(b.logp_new)}"
        f", logp_old = {_numbers(b.logp_old)} (ratios {_numbers(b.breakdown.ratio)}), "
        f"advantages = {_numbers(b.advantages)}, eps = {exact(b.eps)}."
    )
    return [finding("mismatch", kind, message, inputs, b)]


def _evidence(a: _Answer, kind: Kind, index: int) -> str:
    """``On batch ..: expected .., got ..`` (for a gradient, at sample ``index``)."""
    batch, expected = a.batch, np.atleast_1d(a.batch.answers[kind])
    if kind != "grad":
        return f"On {batch.label}: {expected_and_got(expected[0], a.got[0])}."
    b = batch.breakdown
    return (
        f"On {batch.label}, sample {index} (r = {rounded(b.ratio[index])}, "
        f"A = {rounded(b.advantages[index])}): {expected_and_got(expected[index], a.got[index])}."
    )


def expected_and_got(expected: float, got: float) -> str:
    """``expected 0.5, got 1``: rounded, or with every digit when the rounded forms look equal."""
    short = rounded(expected), rounded(got)
    if short[0] == short[1]:
        short = exact(expected), exact(got)
    return f"expected {short[0]}, got {short[1]}"


def _tests(batch: CheckBatch, which: str = "") -> str:
    where = f"The {which} batch where they differ" if which else "That batch"
    return f"{where} tests this: {batch.lesson}."


def _numbers(values: FloatArray) -> str:
    return vector(values, each=rounded, limit=ARRAY_LIMIT)


def _first(mask: BoolArray) -> int:
    return int(np.flatnonzero(mask)[0])


def _timeout(kind: Kind, call: Call, calls: Sequence[Call], limit_s: float) -> Finding:
    """The finding of ``call``, which did not return in time (the check stopped calling there)."""
    skipped = sum(c.skipped for c in calls)
    sentences = [
        f"On {call.batch.label} your function did not return within {exact(limit_s)} s, the "
        "checker's time limit for one call."
    ]
    if call.stopped:
        sentences.append("The checker stopped it" + (f" ({call.where})." if call.where else "."))
    else:
        sentences.append(
            "The checker cannot stop it here (this system cannot run it in a separate "
            "process): it is still running in the background and keeps a CPU core busy until "
            "you restart the kernel (Kernel > Restart Kernel)."
        )
    if skipped:
        sentences.append(
            f"It was not called on the {skipped} batch{'es' * (skipped > 1)} after that one."
        )
    sentences.append(
        "Look for a loop whose condition never changes, a sleep, or work that grows much "
        f"faster than N. {_tests(call.batch)}"
    )
    return finding("timeout", kind, " ".join(sentences), batch=call.batch)


def _side_effects(kind: Kind, calls: Sequence[Call]) -> list[Finding]:
    """``mutated`` if a call changed its inputs or failed on read-only ones; ``patched_module``."""
    found, evidence = [], []
    changed = next((c for c in calls if c.before_after is not None), None)
    if changed is not None and changed.before_after is not None:
        before, after = changed.before_after
        evidence.append(
            f"On {changed.batch.label}, {changed.mutated[0]} was {_numbers(before)} before the "
            f"call and {_numbers(after.ravel())} after it."
        )
    read_only = next((c for c in calls if c.read_only_failure), None)
    if read_only is not None:
        evidence.append(
            f"On {read_only.batch.label}, whose arrays are read-only, your function "
            f"{read_only.error}."
        )
    if evidence:
        found.append(finding("mutated", kind, evidence=" ".join(evidence)))
    patched = next((c for c in calls if c.patched), None)
    if patched is not None:
        evidence_text = f"On {patched.batch.label} it changed {', '.join(patched.patched)}."
        found.append(finding("patched_module", kind, evidence=evidence_text))
    return found
