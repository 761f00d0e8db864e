"""The checks a learner runs: :func:`check_loss`, :func:`check_clip_fraction`, :func:`check_grad`.

Each runs the learner's function on every batch of :func:`.battery` (through
:func:`.call_learner`), names its mistakes (:func:`.diagnose`) and returns a
:class:`CheckResult`, which a notebook shows as a coloured card: green when it
passed, blue while the body is empty, red with one item per finding otherwise.
A check never raises because of the learner's function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ppo_viz.exercises.battery import FUNCTION_NAMES, Kind, battery
from ppo_viz.exercises.calling import call_learner
from ppo_viz.exercises.diagnosis import Finding, diagnose, finding
from ppo_viz.html import Markup, join, message, page, tag
from ppo_viz.numbers import count


@dataclass(frozen=True)
class CheckResult:
    """The outcome of checking one function: findings (empty when it passed)."""

    exercise: str
    kind: str
    findings: tuple[Finding, ...]
    batches: int
    matching_batches: int

    @property
    def passed(self) -> bool:
        """True when no problem was found."""
        return not self.findings

    @property
    def implemented(self) -> bool:
        """False while the function's body is still empty."""
        return not any(f.key == "not_implemented" for f in self.findings)

    @property
    def mistakes(self) -> tuple[str, ...]:
        """The keys of the findings, in report order (empty when it passed)."""
        return tuple(f.key for f in self.findings)

    @property
    def status(self) -> str:
        """``passed``, ``not implemented yet`` or ``needs work``."""
        if self.passed:
            return "passed"
        return "needs work" if self.implemented else "not implemented yet"

    def headline(self) -> str:
        """One line: the function and how it did."""
        if self.passed:
            return (
                f"{self.exercise}: passed. It matches the reference on all {self.batches} batches."
            )
        if not self.implemented:
            return f"{self.exercise}: not implemented yet."
        return (
            f"{self.exercise}: {count(len(self.findings), 'problem')} found (it matches the "
            f"reference on {self.matching_batches} of {self.batches} batches)."
        )

    def __str__(self) -> str:
        lines = [self.headline()]
        if not self.implemented:
            return "\n".join([*lines, "  " + self.findings[0].message])
        for number, item in enumerate(self.findings, start=1):
            prefix = f"{number}. " if len(self.findings) > 1 else "- "
            lines.append(prefix + item.text().replace("\n", "\n   "))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return str(result_html(self))


def result_html(result: CheckResult) -> Markup:
    """A check's card: its headline in bold, then the empty-body note or one item per finding."""
    if result.passed:
        kind, body = "ok", Markup("")
    elif not result.implemented:
        kind, body = "info", tag("div", result.findings[0].message)
    else:
        kind, body = "error", tag("ul", *(finding_html(f) for f in result.findings))
    card = message(join([tag("b", result.headline()), body]), kind)
    return page(card, classes=f"ppo-check ppo-check-{result.status.replace(' ', '-')}")


def finding_html(item: Finding) -> Markup:
    """One finding as a list item: title, explanation, and the evidence in monospace."""
    evidence = tag("div", item.evidence, classes="ppo-num") if item.evidence else ""
    return tag("li", tag("b", f"{item.title}."), " ", item.message, evidence)


def check(kind: Kind, function: Callable[..., Any]) -> CheckResult:
    """Run ``function`` on every batch of :func:`.battery` and name its mistakes.

    ``kind`` is ``"loss"``, ``"clip_fraction"`` or ``"grad"``; ``function`` takes
    ``(logp_new, logp_old, advantages, eps)`` like the :mod:`ppo_clip` function
    of that name.  Exceptions raised by ``function`` are caught and reported;
    warnings it triggers are silenced.  Raises ``ValueError`` for an unknown
    ``kind``, never for a bad ``function``.
    """
    if kind not in FUNCTION_NAMES:
        raise ValueError(f"kind must be one of {tuple(FUNCTION_NAMES)}, got {kind!r}")
    name, batches = FUNCTION_NAMES[kind], battery()
    if not callable(function):
        text = (
            f"check_{kind} expects your function (the name after def, without "
            f"parentheses), got {function!r:.60}."
        )
        return CheckResult(name, kind, (finding("error", kind, text),), len(batches), 0)
    calls = [call_learner(function, batch) for batch in batches]
    if calls[0].not_implemented or all(c.not_implemented for c in calls):
        return CheckResult(name, kind, (finding("not_implemented", kind),), len(batches), 0)
    diagnosis = diagnose(kind, function, calls)
    return CheckResult(name, kind, diagnosis.findings, len(batches), diagnosis.matching_batches)


def check_loss(function: Callable[..., Any]) -> CheckResult:
    """Check a learner's ``ppo_clip_loss(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("loss", function)


def check_clip_fraction(function: Callable[..., Any]) -> CheckResult:
    """Check a learner's ``clip_fraction(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("clip_fraction", function)


def check_grad(function: Callable[..., Any]) -> CheckResult:
    """Check a learner's ``ppo_clip_grad(logp_new, logp_old, advantages, eps=0.2)``."""
    return check("grad", function)
