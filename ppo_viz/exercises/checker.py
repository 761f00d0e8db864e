"""The checks a learner runs, and the summary to paste to a teacher.

:func:`check_loss`, :func:`check_clip_fraction` and :func:`check_grad` run the learner's function
on every batch of :func:`.battery` (:func:`.call_battery`: in a copy of the process, with a time
limit per call), name its mistakes (:func:`.diagnose`) and return a :class:`CheckResult`, shown
as a card: green when the core batches pass, blue while the body is empty, red with one item per
finding otherwise.  Notes from the robustness batches follow under "Going further", whatever the
colour: they never decide the pass.  :func:`exercise_summary` runs all three checks and adds the
concept questions' outcomes.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ppo_viz.exercises.battery import FUNCTION_NAMES, NUMERICS_NOTEBOOK, Kind, battery
from ppo_viz.exercises.diagnosis import Finding, diagnose, finding
from ppo_viz.exercises.questions import ConceptQuestion
from ppo_viz.exercises.sandbox import OUTPUT_LIMIT, TIME_LIMIT_S, Call, call_battery
from ppo_viz.html import Markup, join, message, page, tag
from ppo_viz.numbers import count

#: What the robustness batches are, said once above their notes.
GOING_FURTHER = (
    "Going further: the robustness batches test float64's edges (overflowing ratios, "
    "log-probabilities near -1000) and the contract's largest batch. They do not decide the "
    f"pass; each note names the lesson of {NUMERICS_NOTEBOOK} it relates to."
)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of checking one function.

    ``findings`` come from the core batches and decide the pass; ``notes`` from the robustness
    batches ("going further").  ``matching_core`` and ``matching_robustness`` count the batches
    whose answers were right; ``printed`` describes what the function printed ("" if nothing).
    """

    exercise: str
    kind: str
    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...] = ()
    core_batches: int = 0
    robustness_batches: int = 0
    matching_core: int = 0
    matching_robustness: int = 0
    printed: str = ""

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
        if not self.passed:
            found = f"{self.exercise}: {count(len(self.findings), 'problem')} found"
            matches = f"{self.matching_core} of {self.core_batches} core batches"
            if "timeout" in self.mistakes:
                return f"{found} (the check stopped at the time limit; it matched {matches})."
            return f"{found} (it matches the reference on {matches})."
        line = f"{self.exercise}: passed. It matches the reference on all {self.core_batches} core "
        if self.notes:
            return line + f"batches. Going further: {count(len(self.notes), 'note')} below."
        return line + f"batches, and on the {self.robustness_batches} robustness batches too."

    def __str__(self) -> str:
        if not self.implemented:
            return f"{self.headline()}\n  {self.findings[0].message}"
        lines = [self.headline(), *_numbered(self.findings)]
        lines += [GOING_FURTHER, *_numbered(self.notes)] if self.notes else []
        return "\n".join(lines + ([self.printed] if self.printed else []))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if self.passed:
            kind, body = "ok", Markup("")
        elif not self.implemented:
            kind, body = "info", tag("div", self.findings[0].message)
        else:
            kind, body = "error", tag("ul", *map(_finding_html, self.findings))
        parts = [tag("b", self.headline()), body]
        if self.notes:
            notes = tag("ul", *map(_finding_html, self.notes))
            parts.append(tag("div", GOING_FURTHER, notes, classes="ppo-note"))
        if self.printed:
            parts.append(tag("div", self.printed, classes="ppo-small ppo-num"))
        classes = f"ppo-check ppo-check-{self.status.replace(' ', '-')}"
        return str(page(message(join(parts), kind), classes=classes))


def _numbered(findings: Sequence[Finding]) -> list[str]:
    """Findings as text items: ``- `` for one, ``1. ``, ``2. `` for several."""
    return [
        (f"{number}. " if len(findings) > 1 else "- ") + item.text().replace("\n", "\n   ")
        for number, item in enumerate(findings, start=1)
    ]


def _finding_html(item: Finding) -> Markup:
    """One finding as a list item: title, explanation, evidence (monospace), related lesson."""
    evidence = tag("div", item.evidence, classes="ppo-num") if item.evidence else ""
    further = tag("div", f"See {item.further}.", classes="ppo-muted") if item.further else ""
    return tag("li", tag("b", f"{item.title}."), " ", item.message, evidence, further)


def _printed(calls: Sequence[Call]) -> str:
    """What the function printed, shortened: how much, and the start of it ("" if nothing)."""
    printed = [c for c in calls if c.printed_total]
    if not printed:
        return ""
    first = printed[0]
    cut = f" (cut at {OUTPUT_LIMIT} characters)" if first.printed_total > len(first.printed) else ""
    return (
        f"Your function printed {count(sum(c.printed_total for c in printed), 'character')} in "
        f"{count(len(printed), 'call')} while it was checked; on {first.batch.label} it "
        f"printed{cut}: {first.printed!r}"
    )


def check(
    kind: Kind, function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
) -> CheckResult:
    """Run ``function`` on every batch of :func:`.battery` and name its mistakes.

    ``kind`` is ``"loss"``, ``"clip_fraction"`` or ``"grad"``; ``function`` takes
    ``(logp_new, logp_old, advantages, eps)`` like the :mod:`ppo_clip` function of that name.
    Each call may take ``time_limit_s`` seconds; after one that takes longer, the function is
    not called again.  Whatever ``function`` does is reported, never raised; Ctrl-C stops the
    check (``KeyboardInterrupt``).  Raises ``ValueError`` for an unknown ``kind`` or a time limit
    that is not a positive number of seconds.
    """
    if kind not in FUNCTION_NAMES:
        raise ValueError(f"kind must be one of {tuple(FUNCTION_NAMES)}, got {kind!r}")
    number = isinstance(time_limit_s, (int, float)) and not isinstance(time_limit_s, bool)
    if not (number and 0 < time_limit_s < math.inf):
        raise ValueError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}")
    name = FUNCTION_NAMES[kind]
    sizes = {"core_batches": len(battery("core")), "robustness_batches": len(battery("robustness"))}
    if not callable(function):
        text = (
            f"check_{kind} expects your function (the name after def, without parentheses), got "
            f"{reprlib.repr(function)}."
        )
        return CheckResult(name, kind, (finding("error", kind, text),), **sizes)
    calls = call_battery(function, kind, battery(), float(time_limit_s))
    printed = _printed(calls)
    if calls[0].not_implemented or all(c.not_implemented for c in calls if not c.skipped):
        return CheckResult(
            name, kind, (finding("not_implemented", kind),), printed=printed, **sizes
        )
    findings, notes, matching = diagnose(kind, calls, float(time_limit_s))
    return CheckResult(
        name,
        kind,
        tuple(findings),
        tuple(notes),
        matching_core=matching["core"],
        matching_robustness=matching["robustness"],
        printed=printed,
        **sizes,
    )


def check_loss(function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check a learner's ``ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("loss", function, time_limit_s=time_limit_s)


def check_clip_fraction(
    function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
) -> CheckResult:
    """Check a learner's ``clip_fraction(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("clip_fraction", function, time_limit_s=time_limit_s)


def check_grad(function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S) -> CheckResult:
    """Check a learner's ``ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("grad", function, time_limit_s=time_limit_s)


class ExerciseSummary(str):
    """Every check and concept question in one plain text to paste to a teacher.

    ``results`` holds the three :class:`CheckResult`; ``all_passed`` says whether every
    exercise passed its core batches.  A notebook shows it as preformatted text.
    """

    results: tuple[CheckResult, ...]

    @property
    def all_passed(self) -> bool:
        """Whether every exercise passed its core batches."""
        return all(result.passed for result in self.results)

    def _repr_html_(self) -> str:
        return str(page(tag("pre", str(self), classes="ppo-summary")))


def exercise_summary(
    loss: Callable[..., Any],
    clip_fraction: Callable[..., Any],
    grad: Callable[..., Any],
    questions: Mapping[str, ConceptQuestion] | Iterable[ConceptQuestion] = (),
    *,
    time_limit_s: float = TIME_LIMIT_S,
) -> ExerciseSummary:
    """Check all three functions and collect the concept questions' outcomes.

    ``questions`` is :func:`.concept_questions`'s mapping (or its values); anything else raises
    ``TypeError``.  Nothing the three functions do raises: see :func:`check`.
    """
    chosen = tuple(questions.values() if isinstance(questions, Mapping) else questions)
    stranger = next((q for q in chosen if not isinstance(q, ConceptQuestion)), None)
    if stranger is not None:
        kind = type(stranger).__name__
        raise TypeError(
            f"questions must be the concept questions (concept_questions()), got a {kind}"
        )
    functions = zip(FUNCTION_NAMES, (loss, clip_fraction, grad), strict=True)
    results = tuple(check(kind, f, time_limit_s=time_limit_s) for kind, f in functions)
    width = max(len(r.exercise) for r in results)
    lines = [
        "PPO clipped loss: exercise summary",
        f"Exercises passed (core batches): {sum(r.passed for r in results)} of {len(results)}",
    ]
    for r in results:
        lines.append(f"  {r.exercise.ljust(width)}  {_core_status(r)}")
        if r.implemented:
            lines.append(f"  {''.ljust(width)}  {_robustness_status(r)}")
    if chosen:
        right = sum(q.right_first_time for q in chosen)
        lines.append(f"Concept questions right at the first try: {right} of {len(chosen)}")
        width = max(len(q.title) for q in chosen)
        lines += [f"  {q.title.ljust(width)}  {q.outcome}" for q in chosen]
    summary = ExerciseSummary("\n".join(lines))
    summary.results = results
    return summary


def _core_status(result: CheckResult) -> str:
    if not result.implemented:
        return result.status
    if result.passed:
        return f"core: passed (all {result.core_batches} batches match the reference)"
    return "core: needs work: " + "; ".join(f.title for f in result.findings)


def _robustness_status(result: CheckResult) -> str:
    if result.notes:
        return "going further: " + "; ".join(f.title for f in result.notes)
    if result.matching_robustness == result.robustness_batches:
        return f"robustness: all {result.robustness_batches} batches match"
    if "timeout" in result.mistakes:
        return "robustness: not checked (the check stopped at the time limit)"
    return "robustness: nothing to note beyond the core findings"
