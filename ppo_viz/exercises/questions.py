"""Concept questions: multiple choice, with the right answer decided by :mod:`ppo_clip`.

Each option of a :class:`ConceptQuestion` states claims: about one sample (clipped or not, its
gradient, its term of the objective), about a batch (its clip fraction), or about facts a
question computes with :mod:`ppo_clip` (the gradient of the clip-only objective, a ratio after
several epochs, ...).  The right option is the one whose claims all hold for the question's
``truth``, so a question cannot quietly disagree with the module; every number a question quotes
is computed with the checker's copy of it (:data:`.battery.reference`).  After a choice the
learner reads whether it was right, a note on the option chosen and the explanation.

:func:`.question_bank.concept_questions` gives eight of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import numpy as np

from ppo_viz.app import StaticFallback
from ppo_viz.exercises.battery import reference
from ppo_viz.html import message, page, style_tag, tag

_LETTERS = "abcdefgh"


@dataclass(frozen=True)
class Option:
    """One answer: its label, what it claims, and a note on why it is (not) right.

    ``claims`` maps a ``ppo_clip.ClipBreakdown`` attribute (``is_clipped``, ``grad``,
    ``objective_term``, ``clip_fraction``), or the name of a fact the question computed, to the
    value the option says it has (sample 0 for per-sample attributes).
    """

    label: str
    claims: Mapping[str, float | bool]
    note: str = ""


def single_sample(ratio: float, advantage: float, eps: float = 0.2) -> Any:
    """One sample with this ratio and advantage, in a batch of one (a breakdown)."""
    return reference.ratio_sweep([ratio], advantage, eps)


def claim_holds(truth: Any, attribute: str, claimed: float | bool) -> bool:
    """Whether ``truth``'s ``attribute`` (a fact, or sample 0 of an array) is ``claimed``."""
    actual = truth[attribute] if isinstance(truth, Mapping) else getattr(truth, attribute)
    value = actual[0] if isinstance(actual, np.ndarray) else actual
    if isinstance(claimed, bool):
        return bool(value) is claimed
    return bool(np.isclose(float(value), float(claimed), rtol=1e-12, atol=0.0))


class ConceptQuestion(StaticFallback, widgets.VBox):
    """A multiple-choice question whose answer :mod:`ppo_clip` decides.

    Choosing an option (the ``choice`` radio buttons, or :meth:`choose`) shows whether it is
    right, a note on that option and the explanation.  The right option is the one whose claims
    all hold for ``truth`` (a breakdown, or a mapping of facts); there must be exactly one, else
    ``ValueError``.  Without a kernel the question shows as HTML with the answer folded away.
    """

    def __init__(
        self,
        key: str,
        title: str,
        prompt: str,
        options: Sequence[Option],
        truth: Any,
        explanation: str,
    ) -> None:
        self.key, self.title, self.prompt = key, title, prompt
        self.options, self.explanation = tuple(options), explanation
        self.description = f"Concept question: {prompt}"
        right = [
            index
            for index, option in enumerate(self.options)
            if all(claim_holds(truth, a, v) for a, v in option.claims.items())
        ]
        if len(right) != 1:
            raise ValueError(f"question {key!r} must have exactly one right option, got {right}")
        self.answer = right[0]
        self.attempts: list[int] = []
        self.choice = widgets.RadioButtons(
            options=[(self.option_text(i), i) for i in range(len(self.options))],
            value=None,
            layout=widgets.Layout(width="auto"),
        )
        self.choice.add_class("ppo-quiz-choice")
        self.feedback = widgets.HTML("")
        self.feedback.add_class("ppo-quiz-feedback")
        prompt_html = tag("div", tag("b", "Question."), " ", prompt, classes="ppo")
        super().__init__([widgets.HTML(style_tag() + prompt_html), self.choice, self.feedback])
        self.add_class("ppo-quiz")
        self.choice.observe(self._on_choice, names="value")

    def option_text(self, index: int) -> str:
        """``(b) Not clipped; ...``: option ``index`` with its letter."""
        return f"({_LETTERS[index]}) {self.options[index].label}"

    def choose(self, index: int) -> None:
        """Pick option ``index``, as a click would."""
        self.choice.value = index

    @property
    def right_first_time(self) -> bool:
        """Whether the first choice was the right one."""
        return bool(self.attempts) and self.attempts[0] == self.answer

    @property
    def outcome(self) -> str:
        """``right at the first try``, ``right after N tries``, ``not yet right`` or
        ``not answered``."""
        if not self.attempts:
            return "not answered"
        if self.right_first_time:
            return "right at the first try"
        if self.answer in self.attempts:
            return f"right after {self.attempts.index(self.answer) + 1} tries"
        return "not yet right"

    def feedback_text(self, index: int) -> str:
        """What the learner reads after choosing option ``index``."""
        if index == self.answer:
            return f"Right. {self.explanation}"
        answer = f"The answer is {self.option_text(self.answer).rstrip('.')}."
        note = self.options[index].note
        return " ".join(part for part in ("Not quite.", note, answer, self.explanation) if part)

    def _on_choice(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index is None:
            return
        self.attempts.append(int(index))
        kind = "ok" if index == self.answer else "error"
        self.feedback.value = str(message(self.feedback_text(int(index)), kind))

    def static_html(self) -> str:
        """The question and its options as HTML, the answer folded away."""
        answer = f"{self.option_text(self.answer)} {self.explanation}"
        return str(
            page(
                tag("p", tag("b", "Question."), " ", self.prompt),
                tag("ul", *(tag("li", self.option_text(i)) for i in range(len(self.options)))),
                tag("details", tag("summary", "Show the answer"), tag("p", answer)),
                classes="ppo-quiz",
            )
        )
