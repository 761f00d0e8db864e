"""The checks a learner runs: :func:`check_loss`, :func:`check_clip_fraction`, :func:`check_grad`.

Each runs the learner's function on every batch of :func:`.battery` (through
:func:`.call_battery`: a time limit per call, printed output captured), names
its mistakes (:func:`.diagnose`) and returns a :class:`CheckResult`, which a
notebook shows as a coloured card: green when the core batches pass, blue
while the body is empty, red with one item per finding otherwise.  Notes
from the robustness batches follow under "Going further", whatever the
colour: they never decide the pass.  A check never raises because of the
learner's function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ppo_viz.exercises.battery import FUNCTION_NAMES, NUMERICS_NOTEBOOK, Kind, battery
from ppo_viz.exercises.calling import LearnerCall, call_battery, safe_repr
from ppo_viz.exercises.diagnosis import Finding, diagnose, finding
from ppo_viz.exercises.time_limit import OUTPUT_LIMIT, TIME_LIMIT_S
from ppo_viz.html import Markup, join, message, page, tag
from ppo_viz.numbers import count

#: What the robustness batches are, said once above their notes.
GOING_FURTHER = (
    "Going further: the robustness batches test float64's edges (overflowing ratios, "
    "log-probabilities near -1000) and the contract's largest batch. They do not decide "
    f"the pass; each note names the lesson of {NUMERICS_NOTEBOOK} it relates to."
)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of checking one function.

    ``findings`` come from the core batches and decide the pass; ``notes``
    come from the robustness batches ("going further").  ``matching_core``
    and ``matching_robustness`` count the batches whose answers were right;
    ``printed`` describes what the function printed ("" if nothing).
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
        return not any(f.key == "not_implemented" for f in self.findings)

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
        lines = [self.headline()]
        if not self.implemented:
            return "\n".join([*lines, "  " + self.findings[0].message])
        lines += _numbered(self.findings)
        if self.notes:
            lines += [GOING_FURTHER, *_numbered(self.notes)]
        if self.printed:
            lines.append(self.printed)
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return str(result_html(self))


def _numbered(findings: Sequence[Finding]) -> list[str]:
    """Findings as text items: ``- `` for one, ``1. ``, ``2. `` for several."""
    return [
        (f"{number}. " if len(findings) > 1 else "- ") + item.text().replace("\n", "\n   ")
        for number, item in enumerate(findings, start=1)
    ]


def result_html(result: CheckResult) -> Markup:
    """A check's card: headline, empty-body note or findings, going-further notes, output."""
    if result.passed:
        kind, body = "ok", Markup("")
    elif not result.implemented:
        kind, body = "info", tag("div", result.findings[0].message)
    else:
        kind, body = "error", tag("ul", *(finding_html(f) for f in result.findings))
    parts = [tag("b", result.headline()), body]
    if result.notes:
        notes = tag("ul", *(finding_html(f) for f in result.notes))
        parts.append(tag("div", GOING_FURTHER, notes, classes="ppo-note"))
    if result.printed:
        parts.append(tag("div", result.printed, classes="ppo-small ppo-num"))
    card = message(join(parts), kind)
    return page(card, classes=f"ppo-check ppo-check-{result.status.replace(' ', '-')}")


def finding_html(item: Finding) -> Markup:
    """One finding as a list item: title, explanation, evidence (monospace), related lesson."""
    evidence = tag("div", item.evidence, classes="ppo-num") if item.evidence else ""
    further = tag("div", f"See {item.further}.", classes="ppo-muted") if item.further else ""
    return tag("li", tag("b", f"{item.title}."), " ", item.message, evidence, further)


def printed_summary(calls: Sequence[LearnerCall]) -> str:
    """What the function printed, shortened: how much, and the start of it ("" if nothing)."""
    printed = [c for c in calls if c.printed is not None and c.printed.total]
    if not printed:
        return ""
    total = sum(c.printed.total for c in printed if c.printed is not None)
    first = printed[0].printed
    assert first is not None
    cut = f" (cut at {OUTPUT_LIMIT} characters)" if first.dropped else ""
    return (
        f"Your function printed {count(total, 'character')} in "
        f"{count(len(printed), 'call')} while it was checked; on {printed[0].batch.label} it "
        f"printed{cut}: {first.kept!r}"
    )


def check(
    kind: Kind, function: Callable[..., Any], *, time_limit_s: float = TIME_LIMIT_S
) -> CheckResult:
    """Run ``function`` on every batch of :func:`.battery` and name its mistakes.

    ``kind`` is ``"loss"``, ``"clip_fraction"`` or ``"grad"``; ``function`` takes
    ``(logp_new, logp_old, advantages, eps)`` like the :mod:`ppo_clip` function
    of that name.  Each call may take ``time_limit_s`` seconds; after the first
    that takes longer, the function is not called again.  Whatever ``function``
    raises is caught and reported, what it prints is captured, its warnings
    are silenced.  Raises ``ValueError`` for an unknown ``kind`` or a time limit
    that is not a positive number of seconds, never for a bad ``function``.
    """
    if kind not in FUNCTION_NAMES:
        raise ValueError(f"kind must be one of {tuple(FUNCTION_NAMES)}, got {kind!r}")
    if not (isinstance(time_limit_s, (int, float)) and 0 < time_limit_s < math.inf):
        raise ValueError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}")
    name, batches = FUNCTION_NAMES[kind], battery()
    sizes = {"core_batches": len(battery("core")), "robustness_batches": len(battery("robustness"))}
    if not callable(function):
        text = (
            f"check_{kind} expects your function (the name after def, without "
            f"parentheses), got {safe_repr(function)}."
        )
        return CheckResult(name, kind, (finding("error", kind, text),), **sizes)
    calls = call_battery(function, batches, time_limit_s)
    printed = printed_summary(calls)
    if calls[0].not_implemented or all(c.not_implemented for c in calls if not c.skipped):
        empty = (finding("not_implemented", kind),)
        return CheckResult(name, kind, empty, printed=printed, **sizes)
    found = diagnose(kind, function, calls, time_limit_s)
    return CheckResult(
        name,
        kind,
        found.findings,
        found.notes,
        matching_core=found.matching["core"],
        matching_robustness=found.matching["robustness"],
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
