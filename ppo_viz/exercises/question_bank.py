"""The concept questions of notebook 6, each decided and explained by :mod:`ppo_clip`.

Five ask what happens to one sample or one batch (clipped or not, its
gradient, the clip fraction, an overflowing ratio); three ask why, and are in
:mod:`.why_questions`: why the ``min`` and not the clipped term alone, why
the first update on a fresh batch is the ordinary policy gradient, and why
the band is only a soft trust region over several epochs.  Every number a
question quotes is computed with the checker's copy of :mod:`ppo_clip`
(:data:`.reference`).
"""

from __future__ import annotations

import math

import numpy as np

from ppo_viz.exercises.questions import ConceptQuestion, Option, single_sample
from ppo_viz.exercises.reference import reference
from ppo_viz.exercises.why_questions import epochs_question, first_update_question, why_min_question
from ppo_viz.numbers import rounded


def concept_questions() -> dict[str, ConceptQuestion]:
    """Fresh concept questions, keyed by a short name, in teaching order.

    Five ask what happens to a sample or a batch; three (``why_min``,
    ``first_update``, ``epochs``) ask why.
    """
    questions = [
        _favourable_question(),
        _wrong_way_question(),
        why_min_question(),
        _fraction_question(),
        _edge_question(),
        first_update_question(),
        epochs_question(),
        _overflow_question(),
    ]
    return {question.key: question for question in questions}


def _favourable_question() -> ConceptQuestion:
    favourable = single_sample(1.3, 2.0)
    return ConceptQuestion(
        "favourable",
        "A = +2, r = 1.3",
        "A sample has advantage A = +2 and its ratio is now r = 1.3 (eps = 0.2, a batch "
        "of N = 1). Is it clipped, and what is d loss / d logp_new?",
        [
            Option("Clipped; the gradient is 0.", {"is_clipped": True, "grad": 0.0}),
            Option(
                "Not clipped; the gradient is -r*A = -2.6.",
                {"is_clipped": False, "grad": -2.6},
                "r*A = 2.6 is larger than clip(r)*A = 2.4, so the min does not keep it.",
            ),
            Option(
                "Clipped; the gradient is -(1 + eps)*A = -2.4.",
                {"is_clipped": True, "grad": -2.4},
                "(1 + eps)*A is a constant: it does not change when logp_new does.",
            ),
            Option(
                "Not clipped; the gradient is -A = -2.",
                {"is_clipped": False, "grad": -2.0},
                "-A is the derivative with respect to r. With respect to logp_new it is -r*A, "
                "which equals -A only at r = 1. And this sample is clipped anyway, so its "
                "gradient is 0.",
            ),
        ],
        favourable,
        f"With A > 0 the objective rewards making the action more likely, and r = 1.3 is "
        f"already past 1 + eps = {rounded(favourable.upper)}. The min keeps the clipped term "
        f"clip(r)*A = {rounded(favourable.clipped_term[0])}, a constant, so the gradient is "
        f"{rounded(favourable.grad[0])}: no further push from this sample.",
    )


def _wrong_way_question() -> ConceptQuestion:
    wrong_way = single_sample(1.5, -1.0)
    return ConceptQuestion(
        "wrong_way",
        "A = -1, r = 1.5",
        "A sample has advantage A = -1 and its ratio is now r = 1.5 (eps = 0.2, N = 1). "
        "Is it clipped, and what is d loss / d logp_new?",
        [
            Option(
                "Clipped, since r is outside the band; the gradient is 0.",
                {"is_clipped": True, "grad": 0.0},
                "Being outside the band is not enough: the direction matters.",
            ),
            Option("Not clipped; the gradient is -r*A = 1.5.", {"is_clipped": False, "grad": 1.5}),
            Option(
                "Not clipped; the gradient is -A = 1.",
                {"is_clipped": False, "grad": 1.0},
                "dr/dlogp_new = r, so the gradient carries the factor r = 1.5.",
            ),
            Option(
                "Clipped; the gradient is -(1 + eps)*A = 1.2.",
                {"is_clipped": True, "grad": 1.2},
                "A clipped sample has gradient 0, and this one is not clipped.",
            ),
        ],
        wrong_way,
        f"A < 0 means the action was worse than expected, yet r = 1.5 made it more "
        f"likely: a move the unfavourable way. The min is min(r*A, clip(r)*A) = "
        f"min({rounded(wrong_way.unclipped_term[0])}, {rounded(wrong_way.clipped_term[0])}) = "
        f"{rounded(wrong_way.objective_term[0])}, the unclipped term, so the gradient is "
        f"-r*A/N = {rounded(wrong_way.grad[0])} > 0 and gradient descent lowers logp_new, "
        f"pulling the sample back. For A < 0 only r < 1 - eps = {rounded(wrong_way.lower)} is "
        f"clipped.",
    )


def _edge_question() -> ConceptQuestion:
    edge = single_sample(1.2, 1.0)
    return ConceptQuestion(
        "edge",
        "A = +1, r = 1.2 exactly",
        "A sample has A = +1 and its ratio is exactly on the edge: r = 1 + eps = 1.2 "
        "(eps = 0.2, N = 1). Is it clipped, and what is its gradient?",
        [
            Option(
                "Clipped; the gradient is 0.",
                {"is_clipped": True, "grad": 0.0},
                "Clipping needs r > 1 + eps, strictly.",
            ),
            Option(
                "Not clipped; the gradient is -r*A = -1.2.", {"is_clipped": False, "grad": -1.2}
            ),
            Option(
                "Not clipped; the gradient is -A = -1.",
                {"is_clipped": False, "grad": -1.0},
                "dr/dlogp_new = r, so the gradient carries the factor r = 1.2.",
            ),
        ],
        edge,
        f"The comparisons are strict: clipped means r > 1 + eps. On the edge both terms "
        f"of the min are equal ({rounded(edge.unclipped_term[0])}) and the sample keeps the "
        f"gradient of r*A: -r*A/N = {rounded(edge.grad[0])}, as PyTorch's autograd gives "
        f"for the usual max(-A*r, -A*clip(r)). In float64 this case is real: "
        f"exp(log(0.6) - log(0.5)) is exactly 1.2.",
    )


def _overflow_question() -> ConceptQuestion:
    overflow = reference.clip_breakdown([0.0], [-1000.0], [0.0])
    return ConceptQuestion(
        "overflow",
        "A = 0, r = inf",
        "A sample has A = 0 and logp_new - logp_old = 1000, so r = exp(1000) overflows "
        "to inf. What does it add to the loss, and what is its gradient?",
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
        overflow,
        f"A sample with A = 0 is never clipped (clipping needs A > 0 or A < 0) and adds "
        f"exactly {rounded(overflow.objective_term[0])} to the loss and to the gradient, "
        f"even when r is inf. IEEE arithmetic says inf * 0 is NaN, so code must not "
        f"compute that product: multiply only where A != 0.",
    )


def _fraction_question() -> ConceptQuestion:
    four = reference.clip_breakdown(
        np.log([0.75, 0.75, 0.25, 0.25]), np.log([0.5] * 4), [1.0, -1.0, 1.0, -1.0]
    )
    return ConceptQuestion(
        "fraction",
        "clip fraction of four samples",
        "Four samples have r = [1.5, 1.5, 0.5, 0.5] and A = [+1, -1, +1, -1], "
        "eps = 0.2. What does clip_fraction return?",
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
        four,
        f"All four ratios are outside [0.8, 1.2], but only sample 0 (A > 0, r > 1.2) and "
        f"sample 3 (A < 0, r < 0.8) moved the favourable way, so only their gradients "
        f"are switched off: {rounded(four.clip_fraction)}. Samples 1 and 2 keep r*A and their "
        f"full gradient. Stable-Baselines3, CleanRL, OpenAI Baselines and Spinning Up "
        f"log mean(|r - 1| > eps) instead, which is {rounded(four.band_fraction)} here; TRL, "
        f"verl and this project count {rounded(four.clip_fraction)}.",
    )
