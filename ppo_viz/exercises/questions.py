"""Concept questions: multiple choice, each decided and explained by :mod:`ppo_clip`.

:data:`QUESTIONS` holds each question's facts (computed with the checker's copy of
:mod:`ppo_clip`) and its texts, format strings the facts fill: every number quoted is computed.
Each option claims values of facts; the right one is the option whose claims all hold, so a
question cannot quietly disagree with the module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import ipywidgets as widgets
import numpy as np

from ppo_viz.app import StaticFallback
from ppo_viz.exercises.battery import reference
from ppo_viz.html import message, page, style_tag, tag
from ppo_viz.numbers import rounded, vector

Facts = Mapping[str, Any]
#: Options as data: label -> (claims: fact -> a value or another fact's name, why it is wrong).
Options = Mapping[str, tuple[Mapping[str, object], str]]


class Option(NamedTuple):
    """One answer: its label, what it claims (fact -> value), and why it is not right."""

    label: str
    claims: Mapping[str, float | bool]
    note: str

    def holds(self, facts: Facts) -> bool:
        """Whether every claim holds (a float to within 1e-12 relative; NaN never does)."""
        return all(
            bool(facts[name]) is value
            if isinstance(value, bool)
            else bool(np.isclose(float(facts[name]), float(value), rtol=1e-12, atol=0.0))
            for name, value in self.claims.items()
        )


class ConceptQuestion(StaticFallback, widgets.VBox):
    """A multiple-choice question whose answer its ``facts`` decide.

    Texts are filled with the facts (numbers rounded).  Exactly one option must hold, else
    ``ValueError``.  Choosing one (the ``choice`` radio buttons, or :meth:`choose`) shows whether
    it is right, its note and the explanation.  Without a kernel: HTML, the answer folded away.
    """

    def __init__(
        self, key: str, facts: Facts, title: str, prompt: str, options: Options, explanation: str
    ) -> None:
        shown = {name: _shown(value) for name, value in facts.items()}
        self.key, self.title, self.prompt = key, title.format(**shown), prompt.format(**shown)
        self.explanation = explanation.format(**shown)
        self.description = f"Concept question: {self.prompt}"
        self.options = tuple(
            Option(
                label.format(**shown),
                {name: facts[v] if isinstance(v, str) else v for name, v in claims.items()},
                note.format(**shown),
            )
            for label, (claims, note) in options.items()
        )
        right = [index for index, option in enumerate(self.options) if option.holds(facts)]
        if len(right) != 1:
            raise ValueError(f"question {key!r} must have exactly one right option, got {right}")
        self.answer, self.attempts = right[0], []
        letters = [(self.option_text(i), i) for i in range(len(self.options))]
        self.choice = widgets.RadioButtons(options=letters, value=None, layout={"width": "auto"})
        self.choice.add_class("ppo-quiz-choice")
        self.feedback = widgets.HTML("")
        self.feedback.add_class("ppo-quiz-feedback")
        question = tag("div", tag("b", "Question."), " ", self.prompt, classes="ppo")
        super().__init__([widgets.HTML(style_tag() + question), self.choice, self.feedback])
        self.add_class("ppo-quiz")
        self.choice.observe(self._on_choice, names="value")

    def option_text(self, index: int) -> str:
        """``(b) Not clipped; ...``: option ``index`` with its letter."""
        return f"({'abcdefgh'[index]}) {self.options[index].label}"

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
        parts = ("Not quite.", self.options[index].note, answer, self.explanation)
        return " ".join(part for part in parts if part)

    def _on_choice(self, change: Mapping[str, Any]) -> None:
        if (index := change["new"]) is not None:
            self.attempts.append(int(index))
            text = self.feedback_text(index)
            self.feedback.value = str(message(text, "ok" if index == self.answer else "error"))

    def static_html(self) -> str:
        """The question and its options as HTML, the answer folded away."""
        answer = tag("p", f"{self.option_text(self.answer)} {self.explanation}")
        options = tag("ul", *(tag("li", self.option_text(i)) for i in range(len(self.options))))
        prompt = tag("p", tag("b", "Question."), " ", self.prompt)
        folded = tag("details", tag("summary", "Show the answer"), answer)
        return str(page(prompt, options, folded, classes="ppo-quiz"))


def _one_sample(ratio: float, advantage: float) -> Facts:
    """One sample in a batch of one (eps = 0.2), and the gradients a learner might give it."""
    s = reference.ratio_sweep([ratio], advantage, 0.2)
    r_a, kept, grad = float(s.unclipped_term[0]), float(s.clipped_term[0]), float(s.grad[0])
    facts = {"r": ratio, "A": f"{advantage:+g}", "upper": s.upper, "lower": s.lower, "kept": kept}
    facts.update(is_clipped=bool(s.is_clipped[0]), grad=grad, r_A=r_a, minus_grad=-grad)
    facts["clip_only_grad"] = float(reference.objective_terms(s, "clip_only")[1][0])
    return {**facts, "minus_r_A": -r_a, "minus_A": -advantage, "minus_kept": -kept}


def _first_update() -> Facts:
    example = reference.worked_example()
    fresh = reference.clip_breakdown(example.logp_old, example.logp_old, example.advantages)
    moved = reference.ppo_clip_grad(*example)
    policy_gradient = -example.advantages / len(example.advantages)
    facts = {"fresh_clip_fraction": fresh.clip_fraction, "pg": policy_gradient, "moved": moved}
    facts["fresh_is_pg"] = bool(np.array_equal(fresh.grad, policy_gradient))
    return {**facts, "moved_is_pg": bool(np.allclose(moved, policy_gradient))}


SAMPLE_PROMPT = (
    "A sample has A = {A} and ratio r = {r} (eps = 0.2, a batch of N = 1). Is it clipped, and "
    "what is d loss / d logp_new?"
)
SAMPLE_OPTIONS: Options = {
    "Clipped; the gradient is 0.": (
        {"is_clipped": True, "grad": 0.0},
        "Only a move the favourable way beyond the band is clipped: A > 0 with r > 1 + eps, or "
        "A < 0 with r < 1 - eps.",
    ),
    "Not clipped; the gradient is -r*A = {minus_r_A}.": (
        {"is_clipped": False, "grad": "minus_r_A"},
        "Past the band the min keeps clip(r)*A, a constant: its gradient is 0.",
    ),
    "Not clipped; the gradient is -A = {minus_A}.": (
        {"is_clipped": False, "grad": "minus_A"},
        "-A is the derivative with respect to r; dr/dlogp_new = r adds the factor r.",
    ),
    "Clipped; the gradient is -clip(r)*A = {minus_kept}.": (
        {"is_clipped": True, "grad": "minus_kept"},
        "clip(r)*A is what a clipped sample keeps: a constant, whose gradient is 0.",
    ),
}
#: The title, prompt and options of a question about one sample (its facts: :func:`_one_sample`).
SAMPLE_QUESTION = ("A = {A}, r = {r}", SAMPLE_PROMPT, SAMPLE_OPTIONS)

#: Each question: its facts, title, prompt, options and explanation (texts filled with facts).
QUESTIONS: dict[str, tuple[Callable[[], Facts], str, str, Options, str]] = {
    "favourable": (
        lambda: _one_sample(1.3, 2.0),
        *SAMPLE_QUESTION,
        "With A > 0 the move is favourable, and r = {r} is past 1 + eps = {upper}: the min keeps "
        "the constant clip(r)*A = {kept}, so the gradient is {grad} and this sample pushes no "
        "further.",
    ),
    "wrong_way": (
        lambda: _one_sample(1.5, -1.0),
        *SAMPLE_QUESTION,
        "A < 0, yet r = {r} made the action likelier, a move the unfavourable way: the min keeps "
        "r*A = {r_A} (not clip(r)*A = {kept}), and only r < 1 - eps = {lower} is clipped. Its "
        "gradient -r*A/N = {grad} > 0 lets gradient descent pull the sample back.",
    ),
    "why_min": (
        lambda: _one_sample(0.5, 1.0),
        "why the min",
        "A sample has A = +1, and an update made its ratio fall to r = {r}: the good action became "
        "less likely, past the band (eps = 0.2, N = 1). Why does PPO keep min(r*A, clip(r)*A) "
        "here, rather than the clipped term clip(r)*A alone?",
        {
            "Same gradient either way ({grad}): the min matters only for favourable moves.": (
                {"clip_only_grad": "grad"},
                "Below the band clip(r) is the constant 1 - eps, so clip(r)*A has gradient 0.",
            ),
            "The min clips it too (gradient 0), as clip-only would; it only lowers the loss.": (
                {"is_clipped": True, "grad": 0.0},
                "For A > 0 only r > 1 + eps is clipped; r = {r} moved the unfavourable way.",
            ),
            "Clip-only gives it gradient 0, so nothing pulls it back; the min gives {grad}.": (
                {"clip_only_grad": 0.0, "is_clipped": False},
                "",
            ),
            "Clip-only would push it further the wrong way, with gradient {minus_grad}.": (
                {"clip_only_grad": "minus_grad"},
                "clip(r)*A is flat below the band: its gradient is 0.",
            ),
        },
        "The min keeps r*A = {r_A}, whose gradient -r*A/N = {grad} lets gradient descent raise "
        "logp_new back towards the band. The clipped term alone is the constant "
        "clip({r})*A = {kept}, gradient {clip_only_grad}: nothing would pull back a sample that "
        "strayed the unfavourable way.",
    ),
    "first_update": (
        _first_update,
        "the first update on a fresh batch",
        "A batch was just collected, so the policy being trained is still the one that collected "
        "it. Why is the loss's gradient at the first update on it exactly that of the ordinary "
        "policy-gradient loss -(1/N) * sum_t A_t * log pi(a_t | s_t)? (Take the worked example's "
        "advantages [1, 2, -1, -0.5], eps = 0.2.)",
        {
            "Every ratio is exactly 1: nothing is clipped, and -r*A/N = -A/N, its gradient.": (
                {"fresh_clip_fraction": 0.0, "fresh_is_pg": True},
                "",
            ),
            "-A/N is the clipped loss's gradient at every update: the factor r does not count.": (
                {"moved_is_pg": True},
                "After an update r is no longer 1: the worked example's gradient is {moved}.",
            ),
            "Every sample is clipped at the first update, which leaves the policy gradient.": (
                {"fresh_clip_fraction": 1.0},
                "r = 1 is inside the band, and a clipped sample's gradient is 0 anyway.",
            ),
            "It is not: with eps = 0.2 clipping already changes the first update's gradient.": (
                {"fresh_is_pg": False},
                "At r = 1 no sample is clipped, whatever eps (the comparisons are strict).",
            ),
        },
        "Before the first update on a freshly collected batch logp_new = logp_old, so every ratio "
        "is 1, inside the band: the clip fraction is {fresh_clip_fraction} and each entry -r*A/N "
        "is -A/N = {pg}, the policy gradient (r's gradient is r times log pi's). Later updates, "
        "the first epoch's later minibatches included, give the importance-weighted -r*A/N, e.g. "
        "{moved} at the worked example's ratios.",
    ),
}


def concept_questions() -> dict[str, ConceptQuestion]:
    """Fresh concept questions, keyed by a short name, in teaching order."""
    return {key: ConceptQuestion(key, facts(), *row) for key, (facts, *row) in QUESTIONS.items()}


def _shown(value: Any) -> str:
    """A fact as the texts quote it: numbers rounded, arrays as ``[a, b, ...]``."""
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        return vector(value, each=rounded)
    return rounded(value) if isinstance(value, (float, np.floating)) else str(value)
