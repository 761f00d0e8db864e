"""The summary a learner pastes to a teacher: every check and every concept question."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ppo_viz.exercises.checker import CheckResult, check_clip_fraction, check_grad, check_loss
from ppo_viz.exercises.questions import ConceptQuestion
from ppo_viz.html import page, tag


@dataclass(frozen=True)
class ExerciseSummary:
    """Every check and concept question in one plain text (``str``) to paste to a teacher."""

    results: tuple[CheckResult, ...]
    questions: tuple[ConceptQuestion, ...] = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        """Whether every exercise passed."""
        return all(result.passed for result in self.results)

    def lines(self) -> list[str]:
        """The summary, line by line: a count, then one aligned line per exercise and question."""
        passed = sum(result.passed for result in self.results)
        lines = [
            "PPO clipped loss: exercise summary",
            f"Exercises passed: {passed} of {len(self.results)}",
        ]
        width = max(len(result.exercise) for result in self.results)
        lines.extend(f"  {r.exercise.ljust(width)}  {_status(r)}" for r in self.results)
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


def _status(result: CheckResult) -> str:
    """``passed (all 13 batches ...)``, ``not implemented yet`` or ``needs work: <titles>``."""
    if result.passed:
        return f"{result.status} (all {result.batches} batches match the reference)"
    if not result.implemented:
        return result.status
    return f"{result.status}: " + "; ".join(f.title for f in result.findings)


def exercise_summary(
    loss: Callable[..., Any],
    clip_fraction: Callable[..., Any],
    grad: Callable[..., Any],
    questions: Mapping[str, ConceptQuestion] | Iterable[ConceptQuestion] = (),
) -> ExerciseSummary:
    """Check all three functions and collect the concept questions' outcomes."""
    results = (check_loss(loss), check_clip_fraction(clip_fraction), check_grad(grad))
    chosen = questions.values() if isinstance(questions, Mapping) else questions
    return ExerciseSummary(results, tuple(chosen))
