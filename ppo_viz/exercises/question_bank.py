"""The concept questions of notebook 6, each decided and explained by :mod:`ppo_clip`.

Five ask what happens to one sample or one batch: clipped or not, its gradient, the clip
fraction, a ratio exactly on the edge, an overflowing ratio.  Three ask why: why PPO keeps
``min(r*A, clip(r)*A)`` and not the clipped term alone, why the first update on a freshly
collected batch is the ordinary policy gradient, and why the band is only a soft trust region
over several epochs.  Every number a question quotes is computed with the checker's copy of
:mod:`ppo_clip` (:data:`.battery.reference`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ppo_viz.exercises.battery import BATTERY, FloatArray, reference
from ppo_viz.exercises.questions import ConceptQuestion, Option, single_sample
from ppo_viz.numbers import rounded, vector


def concept_questions() -> dict[str, ConceptQuestion]:
    """Fresh concept questions, keyed by a short name, in teaching order.

    Five ask what happens to a sample or a batch; three (``why_min``, ``first_update``,
    ``epochs``) ask why.
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
        f"for the usual max(-A*r, -A*clip(r)). {_EDGE_IN_FLOAT64}",
    )


def _edge_in_float64() -> str:
    """What this machine's numpy does on the checker's edge batch (its last bit varies)."""
    edge = next(b for b in BATTERY if b.name == "ratios exactly on the band's edges")
    if edge.breakdown.ratio[0] == 1.2:
        return (
            "In float64 this case is real: the checker's edge batch has log-probabilities whose "
            "ratio numpy computes as exactly 1.2 here. Another exp (math.exp, or numpy on "
            "another CPU) may land one unit in the last place away, so the checker accepts "
            "either verdict where that happens."
        )
    return (
        "In float64 such a ratio is hard to hit: for the log-probabilities the checker tried, "
        "numpy's exp here lands one unit in the last place off 1.2, so its edge batch accepts "
        "either verdict there."
    )


_EDGE_IN_FLOAT64 = _edge_in_float64()


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


#: The KL early stop, as the libraries do it (read from their sources).
EARLY_STOP = (
    "some codes also watch an approximate KL between the old and the new policy and stop "
    "the updates on a batch early (Spinning Up by default; Stable-Baselines3 and CleanRL "
    "only when target_kl is set)"
)


def why_min_question() -> ConceptQuestion:
    """Why the min: clip-only would leave a sample that strayed the wrong way with no gradient."""
    strayed = single_sample(0.5, 1.0)
    facts = {
        "is_clipped": bool(strayed.is_clipped[0]),
        "grad": float(strayed.grad[0]),
        "objective_term": float(strayed.objective_term[0]),
        "clip_only_grad": float(reference.objective_terms(strayed, "clip_only")[1][0]),
    }
    unclipped, clipped = strayed.unclipped_term[0], strayed.clipped_term[0]
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
                "For A > 0 only r > 1 + eps is clipped. r = 0.5 moved the unfavourable way, "
                "and the min keeps its gradient.",
            ),
            Option(
                "Clip-only gives it gradient 0, so its term never pulls it back; with the min "
                "it is -0.5.",
                {"clip_only_grad": 0.0, "grad": -0.5, "objective_term": 0.5},
            ),
            Option(
                "Clip-only would push it further the wrong way, with gradient +0.5.",
                {"clip_only_grad": 0.5},
                "clip(r)*A is flat below the band: its gradient is 0, not +0.5.",
            ),
        ],
        facts,
        f"The min is a pessimistic bound: of r*A = {rounded(unclipped)} and clip(r)*A = "
        f"{rounded(clipped)} it keeps the smaller, r*A, so the sample keeps its gradient "
        f"-r*A/N = {rounded(facts['grad'])} and gradient descent raises logp_new back towards "
        f"the band. With the clipped term alone, its term would be the constant "
        f"clip(0.5)*A = {rounded(clipped)}, gradient {rounded(facts['clip_only_grad'])}: its "
        "own term would never pull back a sample that strayed the unfavourable way, however "
        "far it went. Clipping switches the gradient off only for moves that would improve "
        "the objective beyond the band; thanks to the min, moves that make it worse keep "
        "their full gradient.",
    )


def first_update_question() -> ConceptQuestion:
    """Why the first update on a fresh batch is the ordinary policy gradient (r = 1)."""
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
                "-A/N is the clipped loss's gradient at every update; the factor r does not "
                "matter.",
                {"moved_is_policy_gradient": True},
                f"After an update r is no longer 1: at the worked example's ratios "
                f"[1.4, 1.1, 0.6, 0.9] the gradient is {moved_grad}, not -A/N = {pg}.",
            ),
            Option(
                "Every sample is clipped at the first update, and clipping leaves the policy "
                "gradient.",
                {"fresh_clip_fraction": 1.0},
                "r = 1 is inside the band, so no sample is clipped; and a clipped sample's "
                "gradient is 0, not the policy gradient.",
            ),
            Option(
                "It is not: with eps = 0.2 clipping already changes the first update's gradient.",
                {"fresh_is_policy_gradient": False},
                "At r = 1 no sample is clipped, whatever eps (even eps = 0, as the "
                "comparisons are strict).",
            ),
        ],
        facts,
        "Before the first update logp_new = logp_old, so every ratio is exactly 1. That is "
        "inside the band for every eps (and not clipped even at eps = 0, since the "
        f"comparisons are strict), so the clip fraction is {rounded(fresh.clip_fraction)} and "
        f"each gradient entry is -r*A/N = -A/N: {pg} for the worked example's advantages. "
        "That is the gradient of -(1/N) * sum_t A_t * log pi(a_t | s_t), the loss of the "
        "ordinary policy gradient, with respect to logp_new: the ratio's gradient is r times "
        "the gradient of log pi, and r = 1 there. Only that first update starts at r = 1 "
        "(with minibatches, only the first minibatch's): afterwards the gradient is the "
        "importance-weighted -r*A/N inside the band and 0 for clipped samples, e.g. "
        f"{moved_grad} at the worked example's ratios [1.4, 1.1, 0.6, 0.9].",
    )


@dataclass(frozen=True)
class SharedParameterRun:
    """Epochs of gradient descent on one parameter θ shared by two samples (see below).

    ``ratios[k]`` holds ``(r_0, r_1)`` after epoch ``k + 1``; ``start`` is
    ``(1, 1)``.  The loss's gradient with respect to θ is ``g_0 + g_1 / 2``
    with ``g`` from ``ppo_clip_grad``.
    """

    ratios: FloatArray
    upper: float
    moved_in_last_epoch: bool


#: The toy: log pi_theta = log pi_old + FEATURES * theta, both A = +1, eps = 0.2.
FEATURES = np.array([1.0, 0.5])
EPOCHS, STEP_SIZE = 10, 0.2


def shared_parameter_run() -> SharedParameterRun:
    """Run :data:`EPOCHS` full-batch gradient steps of :data:`STEP_SIZE` on θ from θ = 0."""
    logp_old, advantages = np.log([0.4, 0.4]), np.array([1.0, 1.0])
    theta, ratios, last_step = 0.0, [], 0.0
    for _ in range(EPOCHS):
        grad = reference.ppo_clip_grad(logp_old + FEATURES * theta, logp_old, advantages)
        last_step = STEP_SIZE * float(grad @ FEATURES)
        theta -= last_step
        moved = reference.clip_breakdown(logp_old + FEATURES * theta, logp_old, advantages)
        ratios.append(moved.ratio)
    upper = reference.clip_band(0.2)[1]
    return SharedParameterRun(np.array(ratios), upper, last_step != 0.0)


def epochs_question() -> ConceptQuestion:
    """Over several epochs a ratio leaves the band: overshoot and shared parameters."""
    run = shared_parameter_run()
    r0, r1 = run.ratios[:, 0], run.ratios[:, 1]
    final = float(r0[-1])
    crossing = int(np.argmax(r0 > run.upper))  # the epoch whose step took r_0 past the edge
    facts = {"final_ratio": final, "moves_in_last_epoch": run.moved_in_last_epoch}
    before = 1.0 if crossing == 0 else float(r0[crossing - 1])
    trail = [1.0, *dict.fromkeys(float(r) for r in r0)]
    return ConceptQuestion(
        "epochs",
        "ratios over several epochs",
        "A toy model of shared parameters: one parameter θ moves two samples, log pi = "
        "log pi_old + θ for "
        "sample 0 and log pi_old + θ/2 for sample 1, so r_0 = e^θ and r_1 = e^(θ/2). Both "
        f"have A = +1; eps = 0.2. PPO runs {EPOCHS} epochs on this batch, each one "
        f"gradient-descent step of size {rounded(STEP_SIZE)} on θ (the loss's gradient with "
        "respect to θ is g_0 + g_1/2, with g from ppo_clip_grad), starting from θ = 0. "
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
                "Once both samples are clipped every gradient is 0 and θ stops: the last "
                "epochs change nothing.",
            ),
            Option(
                "Back at 1: clipping undoes the part of an update that left the band.",
                {"final_ratio": 1.0},
                "Clipping only switches gradients off; nothing in it moves a ratio back.",
            ),
        ],
        facts,
        f"Epoch by epoch r_0 goes {' → '.join(rounded(r) for r in trail)}, and stays there. "
        f"The step of epoch {crossing + 1} was computed inside the band (r_0 = "
        f"{rounded(before)}) and overshot the edge to {rounded(r0[crossing])}. From "
        "then on ppo_clip_grad gives sample 0 a gradient of 0, yet θ still moves: sample 1 is "
        f"still inside the band (r_1 = {rounded(r1[crossing])}), and its gradient pushes θ "
        f"up, and r_0 with it, to {rounded(final)}. Only when r_1 passes 1.2 too "
        f"({rounded(r1[-1])}) does every gradient vanish and θ stop. Clipping takes away the "
        "incentive to move a sample further, but it is no wall: a step computed inside the "
        "band can jump past its edge, and parameters shared with samples still inside keep "
        f"moving it. That is why the band is called a soft trust region, and why {EARLY_STOP}.",
    )
