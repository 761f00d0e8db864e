"""The summary a learner pastes to a teacher: every check and every concept question.

Per exercise it says whether the core batches passed (that is passing the
exercise), and what the robustness batches noted ("going further").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ppo_viz.exercises.checker import CheckResult, check_clip_fraction, check_grad, check_loss
from ppo_viz.exercises.questions import ConceptQuestion
from ppo_viz.exercises.time_limit import TIME_LIMIT_S
from ppo_viz.html import page, tag


@dataclass(frozen=True)
class ExerciseSummary:
    """Every check and concept question in one plain text (``str``) to paste to a teacher."""

    results: tuple[CheckResult, ...]
    questions: tuple[ConceptQuestion, ...] = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        """Whether every exercise passed its core batches."""
        return all(result.passed for result in self.results)

    def lines(self) -> list[str]:
        """The summary, line by line: a count, then each exercise and each question."""
        passed = sum(result.passed for result in self.results)
        lines = [
            "PPO clipped loss: exercise summary",
            f"Exercises passed (core batches): {passed} of {len(self.results)}",
        ]
        width = max(len(result.exercise) for result in self.results)
        for result in self.results:
            lines.append(f"  {result.exercise.ljust(width)}  {_core_status(result)}")
            if result.implemented and result.robustness_batches:
                lines.append(f"  {''.ljust(width)}  {_robustness_status(result)}")
        if self.questions:
            right = sum(q.right_first_time for q in self.questions)
            lines.append(
                f"Concept questions right at the first try: {right} of {len(self.questions)}"
            )
            width = max(len(q.title) for q in self.questions)
            lines.extend(f"  {q.title.ljust(width)}  {q.outcome}" for q in self.questions)
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return str(page(tag("pre", str(self), classes="ppo-summary")))


def _core_status(result: CheckResult) -> str:
    """``core: passed (all 11 batches ...)``, ``core: needs work: ...`` or ``not implemented``."""
    if not result.implemented:
        return result.status
    if result.passed:
        return f"core: passed (all {result.core_batches} batches match the reference)"
    return "core: needs work: " + "; ".join(f.title for f in result.findings)


def _robustness_status(result: CheckResult) -> str:
    """``going further: <titles>`` or ``robustness: all 4 batches match``."""
    if result.notes:
        return "going further: " + "; ".join(f.title for f in result.notes)
    if result.matching_robustness == result.robustness_batches:
        return f"robustness: all {result.robustness_batches} batches match"
    if "timeout" in result.mistakes:
        return "robustness: not checked (the check stopped at the time limit)"
    return "robustness: nothing to note beyond the core findings"


def exercise_summary(
    loss: Callable[..., Any],
    clip_fraction: Callable[..., Any],
    grad: Callable[..., Any],
    questions: Mapping[str, ConceptQuestion] | Iterable[ConceptQuestion] = (),
    *,
    time_limit_s: float = TIME_LIMIT_S,
) -> ExerciseSummary:
    """Check all three functions and collect the concept questions' outcomes.

    ``questions`` is :func:`.concept_questions`'s mapping (or its values);
    anything else raises ``TypeError``.  Nothing the three functions do
    raises: see :func:`.check`.
    """
    chosen = tuple(questions.values() if isinstance(questions, Mapping) else questions)
    strangers = [q for q in chosen if not isinstance(q, ConceptQuestion)]
    if strangers:
        raise TypeError(
            "questions must be the concept questions (concept_questions()), got a "
            f"{type(strangers[0]).__name__}"
        )
    results = (
        check_loss(loss, time_limit_s=time_limit_s),
        check_clip_fraction(clip_fraction, time_limit_s=time_limit_s),
        check_grad(grad, time_limit_s=time_limit_s),
    )
    return ExerciseSummary(results, chosen)
