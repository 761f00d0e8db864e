"""Three concept questions that ask why, each decided by a computation with :mod:`ppo_clip`.

* :func:`why_min_question`: why PPO keeps ``min(r*A, clip(r)*A)`` and not the
  clipped term alone (a sample that strayed the unfavourable way);
* :func:`first_update_question`: why the first update on a freshly collected
  batch is exactly the ordinary policy gradient;
* :func:`epochs_question`: what happens to a ratio over several epochs on one
  batch, and why the band is only a soft trust region.

Each builds the facts its options are judged by (a mapping of names to
values) from the checker's copy of :mod:`ppo_clip`, so the right option and
every number in the explanation come from the module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppo_viz.exercises.battery import FloatArray
from ppo_viz.exercises.questions import ConceptQuestion, Option, single_sample
from ppo_viz.exercises.reference import reference
from ppo_viz.numbers import rounded, vector

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
