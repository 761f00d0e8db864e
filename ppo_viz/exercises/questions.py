"""Concept questions: multiple choice, each decided and explained by :mod:`ppo_clip`.

Each option of a :class:`ConceptQuestion` states claims: about one sample (clipped or not, its
gradient, its term of the objective), a batch (its clip fraction), or facts the question computes
with the checker's copy of :mod:`ppo_clip` (:data:`.battery.reference`).  The right option is the
one whose claims all hold, so a question cannot quietly disagree with the module, and every
number an explanation quotes is computed.  :func:`concept_questions` gives eight: five ask what
happens to a sample or a batch; three ask why PPO keeps the ``min``, why the first update on a
fresh batch is the ordinary policy gradient, and why the band is only a soft trust region.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import numpy as np

from ppo_viz.app import StaticFallback
from ppo_viz.exercises.battery import BATTERY, FloatArray, reference
from ppo_viz.html import message, page, style_tag, tag
from ppo_viz.numbers import rounded, vector


@dataclass(frozen=True)
class Option:
    """One answer: its label, what it claims, and a note on why it is not right.

    ``claims`` maps a ``ppo_clip.ClipBreakdown`` attribute (``is_clipped``, ``grad``,
    ``objective_term``, ``clip_fraction``; sample 0 of an array), or the name of a fact the
    question computed, to the value the option says it has.
    """

    label: str
    claims: Mapping[str, float | bool]
    note: str = ""


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
    right, the option's note and the explanation.  Exactly one option's claims must hold for
    ``truth`` (a breakdown, or a mapping of facts), else ``ValueError``.  Without a kernel the
    question shows as HTML with the answer folded away.
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
            if all(claim_holds(truth, name, value) for name, value in option.claims.items())
        ]
        if len(right) != 1:
            raise ValueError(f"question {key!r} must have exactly one right option, got {right}")
        self.answer, self.attempts = right[0], []
        letters = [(self.option_text(i), i) for i in range(len(self.options))]
        self.choice = widgets.RadioButtons(options=letters, value=None, layout={"width": "auto"})
        self.choice.add_class("ppo-quiz-choice")
        self.feedback = widgets.HTML("")
        self.feedback.add_class("ppo-quiz-feedback")
        question = tag("div", tag("b", "Question."), " ", prompt, classes="ppo")
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

    def _on_choice(self, change: dict[str, Any]) -> None:
        if change["new"] is not None:
            self.attempts.append(int(change["new"]))
            kind = "ok" if change["new"] == self.answer else "error"
            self.feedback.value = str(message(self.feedback_text(change["new"]), kind))

    def static_html(self) -> str:
        """The question and its options as HTML, the answer folded away."""
        answer = tag("p", f"{self.option_text(self.answer)} {self.explanation}")
        options = tag("ul", *(tag("li", self.option_text(i)) for i in range(len(self.options))))
        prompt = tag("p", tag("b", "Question."), " ", self.prompt)
        folded = tag("details", tag("summary", "Show the answer"), answer)
        return str(page(prompt, options, folded, classes="ppo-quiz"))


def concept_questions() -> dict[str, ConceptQuestion]:
    """Fresh concept questions, keyed by a short name, in teaching order."""
    questions = (_favourable, _wrong_way, _why_min, _fraction, _edge, _first_update, _epochs)
    return {q.key: q for q in (make() for make in (*questions, _overflow))}


def _one_sample(ratio: float, advantage: float) -> Any:
    """One sample with this ratio and advantage, eps = 0.2, in a batch of one (a breakdown)."""
    return reference.ratio_sweep([ratio], advantage, 0.2)


def _sample_question(key: str, s: Any, exactly: str, explanation: str) -> ConceptQuestion:
    """Is the one sample of ``s`` clipped, and what is its gradient? Four candidate answers."""
    r, a, kept = float(s.ratio[0]), float(s.advantages[0]), float(s.clipped_term[0])
    return ConceptQuestion(
        key,
        f"A = {a:+g}, r = {r:g}{exactly}",
        f"A sample has A = {a:+g} and ratio r = {r:g}{exactly} (eps = 0.2, a batch of N = 1). Is "
        "it clipped, and what is d loss / d logp_new?",
        [
            Option(
                "Clipped; the gradient is 0.",
                {"is_clipped": True, "grad": 0.0},
                "Only a move the favourable way beyond the band is clipped, strictly: A > 0 with "
                "r > 1 + eps, or A < 0 with r < 1 - eps.",
            ),
            Option(
                f"Not clipped; the gradient is -r*A = {rounded(-r * a)}.",
                {"is_clipped": False, "grad": -r * a},
                "Past the band the min keeps clip(r)*A, a constant: its gradient is 0.",
            ),
            Option(
                f"Not clipped; the gradient is -A = {rounded(-a)}.",
                {"is_clipped": False, "grad": -a},
                "-A is the derivative with respect to r; dr/dlogp_new = r adds the factor r.",
            ),
            Option(
                f"Clipped; the gradient is -clip(r)*A = {rounded(-kept)}.",
                {"is_clipped": True, "grad": -kept},
                "clip(r)*A is what a clipped sample keeps: a constant, whose gradient is 0.",
            ),
        ],
        s,
        explanation,
    )


def _favourable() -> ConceptQuestion:
    s = _one_sample(1.3, 2.0)
    return _sample_question(
        "favourable",
        s,
        "",
        f"With A > 0 the objective rewards a likelier action, and r = 1.3 is past 1 + eps = "
        f"{rounded(s.upper)}: the min keeps the constant clip(r)*A = {rounded(s.clipped_term[0])}, "
        f"so the gradient is {rounded(s.grad[0])}. No further push from this sample.",
    )


def _wrong_way() -> ConceptQuestion:
    s = _one_sample(1.5, -1.0)
    return _sample_question(
        "wrong_way",
        s,
        "",
        "A < 0, yet r = 1.5 made the action likelier: a move the unfavourable way. The min "
        f"keeps r*A = {rounded(s.objective_term[0])} (clip(r)*A is {rounded(s.clipped_term[0])}), "
        f"so the gradient -r*A/N = {rounded(s.grad[0])} > 0 lets gradient descent pull the sample "
        f"back. For A < 0 only r < 1 - eps = {rounded(s.lower)} is clipped.",
    )


def _edge() -> ConceptQuestion:
    s = _one_sample(1.2, 1.0)
    edge = next(b for b in BATTERY if b.name == "ratios exactly on the band's edges")
    lands = "lands" if edge.breakdown.ratio[0] == 1.2 else "does not land"
    return _sample_question(
        "edge",
        s,
        " exactly",
        "It is exactly on the edge, and the comparisons are strict: clipped means r > 1 + eps. "
        f"Both terms of the min are {rounded(s.unclipped_term[0])} and the sample keeps -r*A/N = "
        f"{rounded(s.grad[0])}, as PyTorch's autograd gives for max(-A*r, -A*clip(r)). In float64 "
        f"the case is real: numpy's exp here {lands} exactly on 1.2 for the checker's edge batch; "
        "another exp (math.exp, or another CPU's) may miss by one unit in the last place, so the "
        "checker accepts either verdict there.",
    )


def _overflow() -> ConceptQuestion:
    s = reference.clip_breakdown([0.0], [-1000.0], [0.0])
    return ConceptQuestion(
        "overflow",
        "A = 0, r = inf",
        "A sample has A = 0 and logp_new - logp_old = 1000, so r = exp(1000) overflows to inf. "
        "What does it add to the loss, and what is its gradient?",
        [
            Option(
                "NaN to both: inf * 0 is undefined.",
                {"objective_term": math.nan},
                "That is what naive code computes, and one NaN spoils the whole loss.",
            ),
            Option(
                "0 to the loss and a gradient of 0: with A = 0 it carries no signal.",
                {"objective_term": 0.0, "grad": 0.0, "is_clipped": False},
            ),
            Option(
                "It is clipped, so it adds clip(r)*A = 0 and its gradient is 0.",
                {"objective_term": 0.0, "grad": 0.0, "is_clipped": True},
                "The numbers are right, but a sample with A = 0 is never clipped.",
            ),
            Option(
                "+inf to the loss: r*A with r = inf.",
                {"objective_term": math.inf},
                "inf times 0 is not inf.",
            ),
        ],
        s,
        "A sample with A = 0 is never clipped and adds exactly "
        f"{rounded(s.objective_term[0])} to the loss and the gradient, even when r is inf. In "
        "IEEE arithmetic inf * 0 is NaN, so multiply only where A != 0.",
    )


def _fraction() -> ConceptQuestion:
    s = reference.clip_breakdown(
        np.log([0.75, 0.75, 0.25, 0.25]), np.log([0.5] * 4), [1, -1, 1, -1]
    )
    return ConceptQuestion(
        "fraction",
        "clip fraction of four samples",
        "Four samples have r = [1.5, 1.5, 0.5, 0.5] and A = [+1, -1, +1, -1], eps = 0.2. What "
        "does clip_fraction return?",
        [
            Option("0", {"clip_fraction": 0.0}, "Two samples moved the favourable way."),
            Option("0.25", {"clip_fraction": 0.25}, "Check both signs of A."),
            Option("0.5", {"clip_fraction": 0.5}),
            Option(
                "1.0",
                {"clip_fraction": 1.0},
                "That is mean(|r - 1| > eps), which ignores the advantage's sign.",
            ),
        ],
        s,
        "All four ratios are outside [0.8, 1.2], but only samples 0 (A > 0, r > 1.2) and 3 "
        "(A < 0, r < 0.8) moved the favourable way and have their gradients switched off: "
        f"{rounded(s.clip_fraction)}. Stable-Baselines3, CleanRL, OpenAI Baselines and Spinning "
        f"Up log mean(|r - 1| > eps) instead, {rounded(s.band_fraction)} here; TRL, verl and "
        "this project count the switched-off gradients.",
    )


def _why_min() -> ConceptQuestion:
    s = _one_sample(0.5, 1.0)
    facts = {
        "is_clipped": bool(s.is_clipped[0]),
        "grad": float(s.grad[0]),
        "objective_term": float(s.objective_term[0]),
        "clip_only_grad": float(reference.objective_terms(s, "clip_only")[1][0]),
    }
    return ConceptQuestion(
        "why_min",
        "why the min",
        "A sample has A = +1, and an update made its ratio fall to r = 0.5: the good action "
        "became less likely, past the band (eps = 0.2, N = 1). Why does PPO keep "
        "min(r*A, clip(r)*A) here, rather than the clipped term clip(r)*A alone?",
        [
            Option(
                "Same gradient either way (-0.5): the min matters only for favourable moves.",
                {"clip_only_grad": -0.5},
                "Below the band clip(r) is the constant 1 - eps = 0.8, so clip(r)*A does not "
                "change with logp_new: its gradient is 0.",
            ),
            Option(
                "The min clips it too (gradient 0), as clip-only would; it only lowers the loss.",
                {"is_clipped": True, "grad": 0.0},
                "For A > 0 only r > 1 + eps is clipped; r = 0.5 moved the unfavourable way.",
            ),
            Option(
                "Clip-only gives it gradient 0, so its term never pulls it back; with the min it "
                "is -0.5.",
                {"clip_only_grad": 0.0, "grad": -0.5, "objective_term": 0.5},
            ),
            Option(
                "Clip-only would push it further the wrong way, with gradient +0.5.",
                {"clip_only_grad": 0.5},
                "clip(r)*A is flat below the band: its gradient is 0, not +0.5.",
            ),
        ],
        facts,
        f"The min is a pessimistic bound: of r*A = {rounded(s.unclipped_term[0])} and clip(r)*A "
        f"= {rounded(s.clipped_term[0])} it keeps r*A, whose gradient -r*A/N = "
        f"{rounded(facts['grad'])} lets gradient descent raise logp_new back towards the band. "
        f"The clipped term alone is the constant clip(0.5)*A = {rounded(s.clipped_term[0])}, "
        f"gradient {rounded(facts['clip_only_grad'])}: nothing would pull back a sample that "
        "strayed the unfavourable way. Clipping switches the gradient off only for moves that "
        "would improve the objective beyond the band; moves that make it worse keep it.",
    )


def _first_update() -> ConceptQuestion:
    example = reference.worked_example()
    fresh = reference.clip_breakdown(example.logp_old, example.logp_old, example.advantages)
    moved = reference.clip_breakdown(*example)
    policy_gradient = -example.advantages / len(example.advantages)
    facts = {
        "fresh_clip_fraction": fresh.clip_fraction,
        "fresh_is_policy_gradient": bool(np.array_equal(fresh.grad, policy_gradient)),
        "moved_is_policy_gradient": bool(np.allclose(moved.grad, policy_gradient)),
    }
    pg, moved_grad = vector(policy_gradient, each=rounded), vector(moved.grad, each=rounded)
    return ConceptQuestion(
        "first_update",
        "the first update on a fresh batch",
        "A batch was just collected, so the policy being trained is still the one that "
        "collected it. Why is the gradient of the loss at the first update on it exactly the "
        "gradient of the ordinary policy-gradient loss -(1/N) * sum_t A_t * log pi(a_t | s_t)? "
        "(Take the worked example's advantages [1, 2, -1, -0.5], eps = 0.2.)",
        [
            Option(
                "Every ratio is exactly 1: nothing is clipped, and -r*A/N = -A/N, that loss's "
                "gradient.",
                {"fresh_clip_fraction": 0.0, "fresh_is_policy_gradient": True},
            ),
            Option(
                "-A/N is the clipped loss's gradient at every update: the factor r does not count.",
                {"moved_is_policy_gradient": True},
                f"After an update r is no longer 1: at the worked example's ratios the gradient "
                f"is {moved_grad}, not -A/N = {pg}.",
            ),
            Option(
                "Every sample is clipped at the first update, and clipping leaves the policy "
                "gradient.",
                {"fresh_clip_fraction": 1.0},
                "r = 1 is inside the band, and a clipped sample's gradient is 0 anyway.",
            ),
            Option(
                "It is not: with eps = 0.2 clipping already changes the first update's gradient.",
                {"fresh_is_policy_gradient": False},
                "At r = 1 no sample is clipped, whatever eps (even 0: the comparisons are strict).",
            ),
        ],
        facts,
        "Before the first update logp_new = logp_old, so every ratio is exactly 1, inside the "
        f"band for every eps: the clip fraction is {rounded(fresh.clip_fraction)} and each "
        f"gradient entry is -r*A/N = -A/N, {pg} here. That is the gradient of the ordinary "
        "policy-gradient loss, since the ratio's gradient is r times that of log pi and r = 1. "
        "Only the first update (with minibatches, the first minibatch's) starts at r = 1: "
        "afterwards the gradient is the importance-weighted -r*A/N inside the band and 0 for "
        f"clipped samples, e.g. {moved_grad} at the worked example's ratios.",
    )


#: The toy: log pi_theta = log pi_old + FEATURES * theta, both A = +1, eps = 0.2.
FEATURES = np.array([1.0, 0.5])
EPOCHS, STEP_SIZE = 10, 0.2


def shared_parameter_run() -> tuple[FloatArray, bool]:
    """:data:`EPOCHS` gradient steps of :data:`STEP_SIZE` on θ from θ = 0, shared by two samples.

    Returns the ratios ``(r_0, r_1)`` after each epoch, and whether the last epoch moved θ.
    The loss's gradient with respect to θ is ``g_0 + g_1 / 2``, with ``g`` from
    ``ppo_clip_grad``.
    """
    logp_old, advantages = np.log([0.4, 0.4]), np.array([1.0, 1.0])
    theta, ratios, step = 0.0, [], 0.0
    for _ in range(EPOCHS):
        grad = reference.ppo_clip_grad(logp_old + FEATURES * theta, logp_old, advantages)
        step = STEP_SIZE * float(grad @ FEATURES)
        theta -= step
        moved = reference.clip_breakdown(logp_old + FEATURES * theta, logp_old, advantages)
        ratios.append(moved.ratio)
    return np.array(ratios), step != 0.0


def _epochs() -> ConceptQuestion:
    ratios, moved_last = shared_parameter_run()
    r0, r1 = ratios[:, 0], ratios[:, 1]
    upper = reference.clip_band(0.2)[1]
    crossing = int(np.argmax(r0 > upper))  # the epoch whose step took r_0 past the edge
    before, final = (1.0 if crossing == 0 else float(r0[crossing - 1])), float(r0[-1])
    trail = " → ".join(rounded(r) for r in [1.0, *dict.fromkeys(float(r) for r in r0)])
    return ConceptQuestion(
        "epochs",
        "ratios over several epochs",
        "A toy model of shared parameters: one parameter θ moves two samples, log pi = "
        "log pi_old + θ for sample 0 and log pi_old + θ/2 for sample 1, so r_0 = e^θ and "
        f"r_1 = e^(θ/2). Both have A = +1; eps = 0.2. PPO runs {EPOCHS} epochs on this batch, "
        f"each one gradient-descent step of size {rounded(STEP_SIZE)} on θ (the loss's gradient "
        "with respect to θ is g_0 + g_1/2, with g from ppo_clip_grad), starting from θ = 0. "
        f"Where is r_0 after the {EPOCHS} epochs?",
        [
            Option(
                "Exactly 1.2: once r_0 reaches 1 + eps its gradient is 0, so it stops on the edge.",
                {"final_ratio": 1.2},
                "A step is computed before the sample is clipped, and can jump past the edge.",
            ),
            Option(
                f"About {rounded(final, 3)}, outside the band: the crossing step overshot, and "
                "sample 1 kept moving θ.",
                {"final_ratio": final},
            ),
            Option(
                "It keeps growing with each epoch: once clipped, nothing holds a sample back.",
                {"moves_in_last_epoch": True},
                "Once both samples are clipped every gradient is 0 and θ stops.",
            ),
            Option(
                "Back at 1: clipping undoes the part of an update that left the band.",
                {"final_ratio": 1.0},
                "Clipping only switches gradients off; nothing in it moves a ratio back.",
            ),
        ],
        {"final_ratio": final, "moves_in_last_epoch": moved_last},
        f"Epoch by epoch r_0 goes {trail}, and stays there. The step of epoch {crossing + 1}, "
        f"computed inside the band (r_0 = {rounded(before)}), overshot the edge. Then sample 0's "
        f"gradient is 0, yet sample 1 is still inside (r_1 = {rounded(r1[crossing])}) and its "
        f"gradient pushes θ, and r_0 with it, to {rounded(final)}; only when r_1 passes 1.2 too "
        f"({rounded(r1[-1])}) does every gradient vanish. Clipping removes the incentive, but "
        "it is no wall: the band is a soft trust region, and some codes also watch an "
        "approximate KL between the old and the new policy and stop the epochs early (Spinning "
        "Up by default; Stable-Baselines3 and CleanRL when target_kl is set).",
    )
