"""From the learner's answers to named findings, each with the batch where it shows.

:func:`diagnose` looks at the core batches, then at the robustness ones; on each group:

1. an exception (other than writing into read-only inputs), or the process ending: ``error``;
2. a value of the wrong type or shape: ``wrong_type``;
3. the same answer on every batch whatever the inputs, a placeholder such as ``return 0.0``:
   ``mismatch``, saying what it should be on the smallest batch.  No mistake is read into it,
   although a combination of mistakes may happen to give it;
4. the fewest variant mistakes (:mod:`.mistakes`) that explain every answer, single mistakes
   first, then pairs and triples.  Each must show on some batch (leaving it out changes the
   answer there), and k mistakes together need more than k answers: fewer would fit almost
   anything.  If none explains them, ``mismatch`` with the smallest batch where they differ;
5. changed inputs, or a failure on read-only ones: ``mutated``; names of ``ppo_clip`` or numpy
   rebound: ``patched_module``.

A call that did not return in time comes first: ``timeout``.  The core batches' findings decide
the pass.  On the robustness batches the mistakes found on the core ones are taken as given and
only robustness variants are searched for: the "going further" notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from ppo_viz.exercises.battery import BoolArray, CheckBatch, FloatArray, Kind, Role
from ppo_viz.exercises.mistakes import (
    TITLES,
    VALUE_MISTAKES,
    Prediction,
    candidate_mistake_sets,
    explanation,
    predict,
)
from ppo_viz.exercises.sandbox import Call
from ppo_viz.numbers import exact, rounded, vector

#: Answers match a prediction when ``np.isclose`` with these tolerances holds; the looser ones
#: for normalized advantages (codes add 1e-8 to the standard deviation).
TOLERANCES = {False: (1e-9, 1e-12), True: (1e-6, 1e-9)}

#: One answer: the call, and what it returned as floats.
Answer = tuple[Call, FloatArray]


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
        return "\n".join(lines + ([f"  See {self.further}."] if self.further else []))


def finding(
    key: str, kind: Kind, message: str = "", evidence: str = "", batch: CheckBatch | None = None
) -> Finding:
    """Mistake ``key``'s finding, with its own explanation unless ``message`` is given."""
    further = batch.further if batch is not None else ""
    return Finding(key, TITLES[key], message or explanation(key, kind), evidence, further)


def diagnose(
    kind: Kind, calls: Sequence[Call], limit_s: float
) -> tuple[list[Finding], list[Finding], dict[str, int]]:
    """The core findings, the robustness notes, and how many batches of each role matched."""
    core = [c for c in calls if c.batch.role == "core"]
    findings, explained, core_matching = _diagnose(kind, core, frozenset(), "core")
    robust = [c for c in calls if c.batch.role == "robustness"]
    notes, _, robust_matching = _diagnose(kind, robust, explained, "robustness")
    late = next((c for c in calls if c.timed_out), None)
    if late is not None:
        (findings if late.batch.role == "core" else notes).insert(
            0, _timeout(kind, late, calls, limit_s)
        )
    notes = [note for note in notes if note.key not in {f.key for f in findings}]
    return findings, notes, {"core": core_matching, "robustness": robust_matching}


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
        message, seen = f"Your function returned {wrong.answer}.", f"Seen on {wrong.batch.label}."
        findings.append(finding("wrong_type", kind, message, seen, wrong.batch))
    answers = [(c, c.answer) for c in returned if not isinstance(c.answer, str)]
    values, explained = _value_findings(kind, answers, assumed, role)
    matching = sum(not (c.changed or _differs(kind, c, got).any()) for c, got in answers)
    return findings + values + _side_effects(kind, calls), explained, matching


def _value_findings(
    kind: Kind, answers: list[Answer], assumed: frozenset[str] | None, role: Role
) -> tuple[list[Finding], frozenset[str] | None]:
    """The findings about the values, and the mistakes that explain them (None if none do)."""
    if assumed is None or not answers:
        return [], assumed
    for extra in () if _placeholder(kind, answers) else candidate_mistake_sets(kind, role):
        flags = assumed | extra
        if (len(extra) > 1 and len(answers) <= len(extra)) or not _explains(kind, answers, flags):
            continue  # k mistakes need more than k answers to show them: fewer fit anything
        shown = [
            _shows(kind, answers, flags, flag) for flag in VALUE_MISTAKES[kind] if flag in extra
        ]
        if all(shown):
            return shown, flags  # type: ignore[return-value]
    return _mismatch(kind, answers, assumed), None


def _placeholder(kind: Kind, answers: Sequence[Answer]) -> bool:
    """Whether every answer is one and the same value, though the reference answers differ."""
    values = np.concatenate([got for _, got in answers])
    references = np.concatenate([np.atleast_1d(c.batch.answers[kind]) for c, _ in answers])
    return len(answers) > 1 and _all_equal(values) and not _all_equal(references)


def _all_equal(values: FloatArray) -> bool:
    return bool(np.array_equal(values, np.full_like(values, values[0]), equal_nan=True))


def _agrees(got: FloatArray, prediction: Prediction) -> BoolArray:
    """Where ``got`` is one of the answers the prediction allows."""
    rtol, atol = TOLERANCES[prediction.loose]
    agree = prediction.free.copy() if prediction.free is not None else np.zeros(got.shape, bool)
    with np.errstate(invalid="ignore"):  # infinities must agree exactly, NaN matches only NaN
        for value in prediction.values:
            agree |= np.isclose(got, value, rtol=rtol, atol=atol, equal_nan=True)
    return agree


@cache
def _reference(batch: CheckBatch, kind: Kind) -> Prediction:
    return predict(batch, kind)  # type: ignore[return-value]


def _differs(kind: Kind, call: Call, got: FloatArray) -> BoolArray:
    """Where the answer is not the reference's (either verdict on an undecided sample)."""
    return ~_agrees(got, _reference(call.batch, kind))


def _explains(kind: Kind, answers: Sequence[Answer], flags: frozenset[str]) -> bool:
    """Whether an implementation with exactly the mistakes ``flags`` gives every answer."""
    for call, got in answers:
        prediction = predict(call.batch, kind, flags)
        if prediction is not None and not _agrees(got, prediction).all():
            return False
    return True


def _shows(
    kind: Kind, answers: Sequence[Answer], flags: frozenset[str], flag: str
) -> Finding | None:
    """``flag``'s finding on the smallest batch where the answers need it; None if none does.

    A batch needs ``flag`` where leaving it out changes the prediction; the evidence prefers a
    batch where the answer is also wrong.
    """
    needed = []
    for call, got in sorted(answers, key=_size):
        with_flag, without = (
            predict(call.batch, kind, flags),
            predict(call.batch, kind, flags - {flag}),
        )
        if with_flag is None or without is None:
            continue
        if flag == "grad_on_clipped":
            shows = with_flag.free if with_flag.free is not None else np.zeros(got.shape, bool)
        else:
            shows = ~_agrees(with_flag.value, without)
        if (shows & _differs(kind, call, got)).any():
            index = _first(shows & _differs(kind, call, got))
            return finding(flag, kind, evidence=_evidence(kind, call, got, index), batch=call.batch)
        if shows.any():
            needed.append((call, got, _first(shows), without.value))
    if not needed:
        return None
    call, got, index, without_value = needed[0]
    evidence = (
        f"On {call.batch.label} your answer {exact(got[index])} takes this mistake too: "
        f"without it the others give {exact(without_value[index])}."
    )
    return finding(flag, kind, evidence=evidence, batch=call.batch)


def _mismatch(kind: Kind, answers: Sequence[Answer], assumed: frozenset[str]) -> list[Finding]:
    """ "Differs from the reference", with the smallest batch where it does and its inputs."""
    failing = [(c, got) for c, got in answers if _differs(kind, c, got).any()]
    if not failing:
        return []
    call, got = min(failing, key=_size)
    b, value = call.batch, answers[0][1][0]
    if _placeholder(kind, answers):
        shown = f"an array of {exact(value)}s" if kind == "grad" else exact(value)
        message = f"Your function returns {shown} on every batch, whatever the inputs (a "
        message += "placeholder?), and that differs from the reference."
    elif assumed:
        message = "Your answers differ from the reference in a way the mistakes above do not "
        message += "explain."
    else:
        message = "Your answers differ from the reference and match none of the common mistakes "
        message += "this checker knows."
    message += f" {_tests(b, 'smallest')}"
    evidence = (
        f"{_evidence(kind, call, got, _first(_differs(kind, call, got)))} Inputs: logp_new = "
        f"{_numbers(b.logp_new)}, logp_old = {_numbers(b.logp_old)} (ratios "
        f"{_numbers(b.breakdown.ratio)}), advantages = {_numbers(b.advantages)}, "
        f"eps = {exact(b.eps)}."
    )
    return [finding("mismatch", kind, message, evidence, b)]


def _evidence(kind: Kind, call: Call, got: FloatArray, index: int) -> str:
    """``On batch ..: expected .., got ..`` (for a gradient, at sample ``index``)."""
    b, expected = call.batch.breakdown, np.atleast_1d(call.batch.answers[kind])
    sample = f", sample {index} (r = {rounded(b.ratio[index])}, A = {rounded(b.advantages[index])})"
    where = call.batch.label + (sample if kind == "grad" else "")
    return f"On {where}: {expected_and_got(expected[index], got[index])}."


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
    return vector(values, each=rounded, limit=8)


def _first(mask: BoolArray) -> int:
    return int(np.flatnonzero(mask)[0])


def _size(answer: Answer) -> int:
    return answer[0].batch.n


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
            "The checker cannot stop it here (this system cannot run it in a separate process): "
            "it is still running in the background and keeps a CPU core busy until you restart "
            "the kernel (Kernel > Restart Kernel)."
        )
    if skipped:
        batches = "batch" if skipped == 1 else "batches"
        sentences.append(f"It was not called on the {skipped} {batches} after that one.")
    sentences.append(
        "Look for a loop whose condition never changes, a sleep, or work that grows much faster "
        f"than N. {_tests(call.batch)}"
    )
    return finding("timeout", kind, " ".join(sentences), batch=call.batch)


def _side_effects(kind: Kind, calls: Sequence[Call]) -> list[Finding]:
    """``mutated`` if a call changed its inputs or failed on read-only ones; ``patched_module``."""
    found, evidence = [], []
    changed = next((c for c in calls if c.changed is not None), None)
    if changed is not None and changed.changed is not None:
        name, before, after = changed.changed
        evidence.append(
            f"On {changed.batch.label}, {name} was {_numbers(before)} before the call and "
            f"{_numbers(after.ravel())} after it."
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
        changes = f"On {patched.batch.label} it changed {', '.join(patched.patched)}."
        found.append(finding("patched_module", kind, evidence=changes))
    return found
