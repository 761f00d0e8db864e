"""Checking a learner's function: run it, name its mistakes, show the result; the summary.

:func:`check_loss`, :func:`check_clip_fraction` and :func:`check_grad` run the function on every
batch (:func:`.call_battery`), name its mistakes (:func:`diagnose`) and return a
:class:`CheckResult`, shown as a card: green when the core batches pass, blue while the body is
empty, red with one item per finding; robustness notes follow under "Going further" and never
decide the pass.  :func:`exercise_summary` adds the concept questions' outcomes.  Notebook 7's
checks (:mod:`.llm`) run the same way, through :func:`run_check`.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ppo_clip_inputs import checked_choice
from ppo_viz.exercises.battery import FUNCTION_NAMES, GOING_FURTHER, Kind, Role, battery, lesson_of
from ppo_viz.exercises.mistakes import Finding, differs, finding, numbers, value_findings
from ppo_viz.exercises.questions import ConceptQuestion
from ppo_viz.exercises.sandbox import (
    MAX_TIME_LIMIT_S,
    OUTPUT_LIMIT,
    TIME_LIMIT_S,
    Call,
    Function,
    call_battery,
)
from ppo_viz.html import Markup, join, message, page, tag
from ppo_viz.numbers import count, exact

#: A check's findings and notes, and how many core and robustness batches matched.
Diagnosis = tuple[list[Finding], list[Finding], int, int]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of checking one function.

    ``findings`` come from the core batches and decide the pass; ``notes`` from the robustness
    batches ("going further").  ``matching_core`` and ``matching_robustness`` count the batches
    whose answers were right, of ``core_batches`` and ``robustness_batches``; ``printed``
    describes what the function printed ("" if nothing); ``reference`` names what the answers
    are compared with.
    """

    exercise: str
    kind: str
    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...] = ()
    matching_core: int = 0
    matching_robustness: int = 0
    printed: str = ""
    core_batches: int = field(kw_only=True)
    robustness_batches: int = field(kw_only=True)
    reference: str = "the reference"

    @property
    def passed(self) -> bool:
        """True when the core batches show no problem (robustness notes do not count)."""
        return not self.findings

    @property
    def implemented(self) -> bool:
        """False while the function's body is still empty."""
        return self.mistakes != ("not_implemented",)

    @property
    def mistakes(self) -> tuple[str, ...]:
        """The keys of the core findings, in report order (empty when it passed)."""
        return tuple(f.key for f in self.findings)

    @property
    def note_keys(self) -> tuple[str, ...]:
        """The keys of the robustness notes, in report order."""
        return tuple(f.key for f in self.notes)

    @property
    def status(self) -> str:
        """``passed``, ``not implemented yet`` or ``needs work``."""
        if self.passed:
            return "passed"
        return "needs work" if self.implemented else "not implemented yet"

    def headline(self) -> str:
        """One line: the function and how it did on the core batches."""
        if not self.implemented:
            return f"{self.exercise}: not implemented yet."
        batches = "core batches" if self.robustness_batches else "batches"
        if not self.passed:
            found = f"{self.exercise}: {count(len(self.findings), 'problem')} found"
            matches = f"{self.matching_core} of {self.core_batches} {batches}"
            if "timeout" in self.mistakes:
                return f"{found} (the check stopped at the time limit; it matched {matches})."
            return f"{found} (it matches {self.reference} on {matches})."
        line = f"{self.exercise}: passed. It matches {self.reference} on all {self.core_batches}"
        if self.notes:
            return f"{line} {batches}. Going further: {count(len(self.notes), 'note')} below."
        if not self.robustness_batches:
            return f"{line} {batches}."
        return f"{line} {batches}, and on the {self.robustness_batches} robustness batches too."

    def __str__(self) -> str:
        if not self.implemented:
            return f"{self.headline()}\n  {self.findings[0].message}"
        lines = [self.headline(), *_numbered(self.findings)]
        lines += [GOING_FURTHER, *_numbered(self.notes)] if self.notes else []
        return "\n".join(lines + ([self.printed] if self.printed else []))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        kind, body = "error", tag("ul", *map(_html, self.findings))
        if self.passed:
            kind, body = "ok", Markup("")
        elif not self.implemented:
            kind, body = "info", tag("div", self.findings[0].message)
        parts = [tag("b", self.headline()), body]
        if self.notes:
            notes = tag("ul", *map(_html, self.notes))
            parts.append(tag("div", GOING_FURTHER, notes, classes="ppo-note"))
        if self.printed:
            parts.append(tag("div", self.printed, classes="ppo-small ppo-num"))
        classes = f"ppo-check ppo-check-{self.status.replace(' ', '-')}"
        return str(page(message(join(parts), kind), classes=classes))


def _numbered(findings: Sequence[Finding]) -> list[str]:
    """Findings as text items (``- `` for one, ``1. ``, ``2. `` for several): title,
    explanation, evidence, the related lesson."""
    items = []
    for number, f in enumerate(findings, start=1):
        lines = [f"{f.title}: {f.message}", f.evidence, f"See {f.further}." if f.further else ""]
        start = f"{number}. " if len(findings) > 1 else "- "
        items.append(start + "\n     ".join(line for line in lines if line))
    return items


def _html(item: Finding) -> Markup:
    """A finding as a list item: title, explanation, evidence (monospace), related lesson."""
    evidence = tag("div", item.evidence, classes="ppo-num") if item.evidence else ""
    further = tag("div", f"See {item.further}.", classes="ppo-muted") if item.further else ""
    return tag("li", tag("b", f"{item.title}."), " ", item.message, evidence, further)


def check(kind: Kind, function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Run ``function`` on every batch of :func:`.battery` and name its mistakes.

    ``kind`` is ``"loss"``, ``"clip_fraction"`` or ``"grad"``; ``function`` takes
    ``(logp_new, logp_old, advantages, eps)`` like the :mod:`ppo_clip` function of that name.
    Each call may take ``time_limit_s`` seconds; after one that takes longer, the function is
    not called again.  Whatever ``function`` does is reported, never raised; Ctrl-C stops the
    check (``KeyboardInterrupt``).  Raises ``ValueError`` for an unknown ``kind`` or a time limit
    that is not a positive number of seconds up to :data:`.MAX_TIME_LIMIT_S`.
    """
    checked_choice("kind", kind, tuple(FUNCTION_NAMES))
    return run_check(FUNCTION_NAMES[kind], kind, function, battery(), time_limit_s)


def run_check(
    exercise: str,
    kind: Kind,
    function: Function,
    batches: Sequence[Any],
    time_limit_s: float,
    reference: str = "the reference",
) -> CheckResult:
    """Check ``function``, the learner's ``exercise``, on ``batches`` as :func:`check` does
    (``kind`` names its mistakes; ``reference`` what its answers are compared with)."""
    roles = [batch.role for batch in batches]
    counts = {"core_batches": roles.count("core"), "robustness_batches": roles.count("robustness")}
    result = partial(CheckResult, exercise, kind, **counts, reference=reference)
    number = isinstance(time_limit_s, (int, float)) and not isinstance(time_limit_s, bool)
    if not (number and 0 < time_limit_s <= MAX_TIME_LIMIT_S):
        raise ValueError(
            f"time_limit_s must be a positive number of seconds, at most {MAX_TIME_LIMIT_S:g} "
            f"(a day), got {time_limit_s!r}"
        )
    if not callable(function):
        return result((finding("not_a_function", evidence=f"It got {reprlib.repr(function)}."),))
    calls = call_battery(function, kind, batches, float(time_limit_s))
    if all(c.not_implemented for c in calls if not c.skipped):  # the template's raise, or no body
        return result((finding("not_implemented"),), printed=_printed(calls))
    findings, notes, core, robustness = diagnose(kind, calls, float(time_limit_s))
    return result(tuple(findings), tuple(notes), core, robustness, _printed(calls))


def check_loss(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check a learner's ``ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("loss", function, time_limit_s=time_limit_s)


def check_clip_fraction(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check a learner's ``clip_fraction(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("clip_fraction", function, time_limit_s=time_limit_s)


def check_grad(function: Function, *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check a learner's ``ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("grad", function, time_limit_s=time_limit_s)


def exercise_summary(
    loss: Function,
    clip_fraction: Function,
    grad: Function,
    questions: Mapping[str, ConceptQuestion] | Iterable[ConceptQuestion] = (),
    *,
    time_limit_s: float = TIME_LIMIT_S,
) -> str:
    """Check all three functions and collect the concept questions' outcomes, in one plain text
    to paste to a teacher.

    ``questions`` is :func:`.concept_questions`'s mapping (or its values); anything else raises
    ``TypeError``.  Nothing the three functions do raises: see :func:`check`.
    """
    chosen = tuple(questions.values() if isinstance(questions, Mapping) else questions)
    stranger = next((type(q).__name__ for q in chosen if not isinstance(q, ConceptQuestion)), "")
    if stranger:
        raise TypeError(f"questions must be concept_questions()'s questions, got a {stranger}")
    functions = zip(FUNCTION_NAMES, (loss, clip_fraction, grad), strict=True)
    results = tuple(check(kind, f, time_limit_s=time_limit_s) for kind, f in functions)
    passed, width = sum(r.passed for r in results), max(len(r.exercise) for r in results)
    lines = [
        "PPO clipped loss: exercise summary",
        f"Exercises passed (core batches): {passed} of 3",
    ]
    for r in results:
        names = [r.exercise, ""]
        lines += [f"  {n.ljust(width)}  {s}" for n, s in zip(names, _statuses(r), strict=False)]
    if chosen:
        right = sum(q.right_first_time for q in chosen)
        lines.append(f"Concept questions right at the first try: {right} of {len(chosen)}")
        width = max(len(q.title) for q in chosen)
        lines += [f"  {q.title.ljust(width)}  {q.outcome}" for q in chosen]
    return "\n".join(lines)


def _statuses(result: CheckResult) -> list[str]:
    """How ``result`` did on the core batches and, if implemented, on the robustness ones."""
    if not result.implemented:
        return [result.status]
    core = f"core: passed (all {result.core_batches} batches match the reference)"
    if not result.passed:
        core = "core: needs work: " + "; ".join(f.title for f in result.findings)
    robustness = "robustness: nothing to note beyond the core findings"
    if result.notes:
        robustness = "going further: " + "; ".join(f.title for f in result.notes)
    elif result.matching_robustness == result.robustness_batches:
        robustness = f"robustness: all {result.robustness_batches} batches match"
    elif "timeout" in result.mistakes:
        robustness = "robustness: not checked (the check stopped at the time limit)"
    return [core, robustness]


def diagnose(kind: Kind, calls: Sequence[Call], limit_s: float) -> Diagnosis:
    """The findings and the notes, and how many core and robustness batches matched.

    On the core batches, then on the robustness ones (the core's mistakes taken as given): an
    exception or the process ending (``error``), a value of the wrong type or shape
    (``wrong_type``), the value mistakes (:func:`.value_findings`), changed inputs (``mutated``),
    rebound module names (``patched_module``); first, a call that did not return in time.
    """
    core = [c for c in calls if c.batch.role == "core"]
    findings, explained, core_matching = _diagnose(kind, core, frozenset(), "core")
    robust = [c for c in calls if c.batch.role == "robustness"]
    notes, _, robust_matching = _diagnose(kind, robust, explained, "robustness")
    late = next((c for c in calls if c.timed_out), None)
    if late is not None:
        found = _timeout(late, sum(c.skipped for c in calls), limit_s)
        (findings if late.batch.role == "core" else notes).insert(0, found)
    notes = [note for note in notes if note.key not in {f.key for f in findings}]
    return findings, notes, core_matching, robust_matching


def _diagnose(
    kind: Kind, calls: Sequence[Call], assumed: frozenset[str] | None, role: Role
) -> tuple[list[Finding], frozenset[str] | None, int]:
    """One role's findings, the mistakes that explain its answers, how many batches match."""
    findings = []
    failed = [c for c in calls if c.error and not c.timed_out and not c.read_only_failure]
    if failed:
        call = min(failed, key=lambda c: c.batch.n)
        message = f"On {call.batch.label} your function {call.error}. {lesson_of(call.batch)}"
        hints = [hint for piece, hint in ERROR_HINTS.items() if piece in call.error]
        findings.append(finding("error", " ".join([message, *hints]), batch=call.batch))
    wrong = next((c for c in calls if isinstance(c.answer, str)), None)
    if wrong is not None:
        message, seen = f"Your function returned {wrong.answer}.", f"Seen on {wrong.batch.label}."
        findings.append(finding("wrong_type", message, seen, wrong.batch))
    answers = [(c, c.answer) for c in calls if isinstance(c.answer, np.ndarray)]
    values, explained = value_findings(kind, answers, assumed, role)
    matching = sum(not (c.changed or differs(kind, c, got).any()) for c, got in answers)
    return findings + values + _side_effects(calls), explained, matching


#: Errors a learner meets, by a piece of their message, and what to write instead: np.min(a, b)
#: reads b as the axis; Python's min(a, b) compares arrays; & and | bind before comparisons;
#: (B,) times (B, T) needs a[:, None]; math.exp takes one number; the checker passes every
#: argument.
ERROR_HINTS = {
    "only integer scalar arrays can be converted to a scalar index": "np.min(a, b) and "
    "np.max(a, b) take b as the axis to reduce over, not a second array: for the elementwise "
    "minimum of two arrays write np.minimum(a, b) (np.maximum for the maximum).",
    "truth value of an array with more than one element is ambiguous": "Python's min(a, b), "
    "max(a, b) and if compare whole arrays, which has no single answer: write np.minimum(a, b) "
    "(or np.maximum) for the elementwise minimum, and np.where(condition, x, y) for an if.",
    "ufunc 'bitwise_": "& and | bind more tightly than comparisons, so A > 0 & r > 1 + eps "
    "reads as A > (0 & r) > 1 + eps: put each comparison in parentheses, (A > 0) & (r > 1 + eps).",
    "could not be broadcast together": "numpy lines up shapes from the right, so an array with "
    "one value per row (per answer, or per group), of shape (B,), meets a (B, T) one along its "
    "last axis: give it that axis, a[:, None], or keep it in the reduction, keepdims=True.",
    "arrays can be converted to Python scalars": "math.exp, math.log and float() take one "
    "number, not an array: write np.exp, np.log (elementwise on a whole array), and float() "
    "only on the final mean.",
    "positional argument": "The checker passes every argument of the exercise's def line, in "
    "its order: keep them all in yours, the ones you do not use too.",
    "unexpected keyword argument": "The checker passes some arguments by name (GAE's gamma and "
    "lam, as llm_clip.gae takes them): keep the names of the exercise's def line.",
}


def _timeout(call: Call, skipped: int, limit_s: float) -> Finding:
    """The finding of ``call``, which did not return in time (the check stopped calling there)."""
    stopped = "The checker stopped it" + (f" ({call.where})." if call.where else ".")
    batches = "batch" if skipped == 1 else "batches"
    sentences = [
        f"On {call.batch.label} your function did not return within {exact(limit_s)} s, the "
        f"checker's time limit for one call. {stopped}",
        f"It was not called on the {skipped} {batches} after that one." if skipped else "",
        "Look for a loop whose condition never changes, a sleep, or work that grows much faster "
        f"than N. {lesson_of(call.batch)}",
    ]
    return finding("timeout", " ".join(s for s in sentences if s), batch=call.batch)


def _side_effects(calls: Sequence[Call]) -> list[Finding]:
    """``mutated`` if a call changed its inputs or failed on read-only ones; ``patched_module``
    if it rebound module names."""
    found, evidence = [], []
    if (changed := next((c for c in calls if c.changed is not None), None)) is not None:
        name, before, after = changed.changed  # type: ignore[misc]
        was, now, label = numbers(before.ravel()), numbers(after.ravel()), changed.batch.label
        evidence.append(f"On {label}, {name} was {was} before the call and {now} after it.")
    if (read_only := next((c for c in calls if c.read_only_failure), None)) is not None:
        label, error = read_only.batch.label, read_only.error
        evidence.append(f"On {label} your function wrote into a read-only input: it {error}.")
    if evidence:
        found.append(finding("mutated", evidence=" ".join(evidence)))
    if (patched := next((c for c in calls if c.patched), None)) is not None:
        changes = f"On {patched.batch.label} it changed {', '.join(patched.patched)}."
        found.append(finding("patched_module", evidence=changes))
    return found


def _printed(calls: Sequence[Call]) -> str:
    """What the function printed, shortened: how much, and the start of it ("" if nothing)."""
    if not (printed := [c for c in calls if c.printed_total]):
        return ""
    total, first = count(sum(c.printed_total for c in printed), "character"), printed[0]
    cut = f" (cut at {OUTPUT_LIMIT} characters)" if first.printed_total > len(first.printed) else ""
    return (
        f"Your function printed {total} in {count(len(printed), 'call')} while it was checked; on "
        f"{first.batch.label} it printed{cut}: {first.printed!r}"
    )
