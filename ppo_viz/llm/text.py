"""Notebook 7's table of the batch and its KL figure, every number from :mod:`llm_clip`.

* :func:`batch_table`: the answers, their rewards and advantages;
* :func:`objectives_table`: each objective of ``llm_clip.SPECS``, its term, weight and band;
* :func:`kl_gradient_bias`: k3 in the loss has a biased expected gradient (verl PR #2953).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

import llm_clip
from bandit import exact_kl, kl_penalty_grad, log_softmax
from ppo_viz.html import Markup, page, table
from ppo_viz.llm.batch import WEIGHTS, policies, response_batch
from ppo_viz.numbers import signed
from ppo_viz.numerics.text import Demo
from ppo_viz.style import COLORS, LINES, figure_style
from tiny_lm import PROMPTS, features


def batch_table(group_size: int = 4) -> Demo:
    """The batch's answers: prompt, tokens, reward and advantage (GRPO's and Dr. GRPO's)."""
    b = response_batch(group_size)
    columns = {
        "prompt a→b": [b.prompt_text(i) for i in range(len(b.rewards))],
        "answer": [b.text(i) for i in range(len(b.rewards))],
        "tokens": [str(n) for n in b.lengths],
        "reward R": [signed(r) for r in b.rewards],
        "A (GRPO: ÷ std)": [signed(a) for a in b.advantages()],
        "A (Dr. GRPO)": [signed(a) for a in b.advantages(scale_by_std=False)],
    }
    return Demo(b, columns, [])


def objectives_table() -> Markup:
    """Every objective of llm_clip's registry: its term, the weight of its default aggregation,
    its default band (on r; GMPO's on log r; SAPO's temperatures), paper and trainer lines."""
    rows = []
    for spec in llm_clip.SPECS.values():
        if spec.band is None:
            band = "none; τ = {:g} if A > 0, else {:g}".format(*spec.tau)
        else:
            low, high = spec.default_band
            band = f"[{1 - low:g}, {1 + high:g}]" if spec.band == "ratio" else ""
            band = band or f"[−{low:g}, {high:g}] on log r"
        source = f"arXiv {spec.paper}; {spec.follows}"
        weight = f"{spec.aggregation}: {WEIGHTS[spec.aggregation]}"
        rows.append((spec.label, spec.formula, weight, band, source))
    header = [
        "objective",
        "term",
        "aggregation in llm_clip: w of a token",
        "default band",
        "paper; follows",
    ]
    return page(table(header, rows))


#: The context of the KL figure: prompt 3→5 after "3 4 5" (previous token 6 is the digit 5).
KL_CONTEXT = ((3, 5), 6, 3)  # (prompt, previous token, position)
KL_ESTIMATORS = {
    "k1 = log(π/π_ref) in the loss": "k1",
    "k3 in the loss (GRPO)": "k3",
    "k3 × r (TRL's use_bias_correction_kl) and k2": "exact",
}


class KLBias(NamedTuple):
    """The KL figure and its numbers along the path from the reference (t = 0) through the
    sampling policy (t = 1): KL(π ‖ π_ref) and each estimator's relative gradient error."""

    figure: Figure
    t: np.ndarray
    kl: np.ndarray
    errors: dict[str, np.ndarray]
    forward_gap: float  # max |E[grad k3] - grad KL(π_ref ‖ π)| over the path


def _expected_grads(logits: np.ndarray, ref_logits: np.ndarray) -> dict[str, np.ndarray]:
    """The exact expectation over the next token y ~ π of each estimator's gradient w.r.t. the
    logits, per row of ``logits`` (n, V): ``sum_y π(y) g(y) (onehot(y) - π)``, ``g = d estimator
    / d log π(y)`` from llm_clip (the n·V tokens as one-token answers, token-mean weight
    1/(n·V), r = 1)."""
    logp = log_softmax(logits)
    (n, v), pi = logp.shape, np.exp(logp)
    ref = np.broadcast_to(log_softmax(ref_logits), logp.shape).reshape(-1, 1)
    answers = (logp.reshape(-1, 1),) * 2 + (np.zeros(n * v), np.ones((n * v, 1), bool))  # A = 0
    parts = llm_clip.token_breakdown(*answers, objective="ppo", logp_ref=ref, kl_coef=1.0)
    g_k3 = n * v * parts.grad.reshape(n, v)  # d k3 / d log π(y) = 1 - π_ref(y)/π(y)
    slopes = {"k1": np.ones((n, v)), "k3": g_k3, "exact": g_k3 + parts.kl.reshape(n, v)}
    return {name: pi * g - (pi * g).sum(-1, keepdims=True) * pi for name, g in slopes.items()}


def kl_gradient_bias(t_max: float = 2.5) -> KLBias:
    """The expected gradient of each KL term in the loss against the true gradient of
    KL(π ‖ π_ref), for one next-token distribution moved away from the reference."""
    prompt, previous, position = KL_CONTEXT
    x = features(np.array(PROMPTS.index(prompt)), np.array(position), np.array(previous))
    z_ref, z_old = (model.forward(x[None, None])[0][0, 0] for model in policies())
    t = np.linspace(0.0, t_max, 101)[1:]  # from the reference on (at t = 0 both are 0)
    z = z_ref + t[:, None] * (z_old - z_ref)
    pi, pi_ref = np.exp(log_softmax(z)), np.exp(log_softmax(z_ref))
    kl_values = exact_kl(pi, pi_ref)
    true = pi * (np.log(pi) - np.log(pi_ref) - kl_values[:, None])  # d KL / d logits
    grads = _expected_grads(z, z_ref)
    gap = float(np.abs(grads["k3"] - kl_penalty_grad(pi_ref, pi)).max())
    norm = np.linalg.norm
    errors = {name: norm(g - true, axis=1) / norm(true, axis=1) for name, g in grads.items()}
    top = max(1.1, 1.05 * max(e.max() for e in errors.values()))  # k1's is 1; k3's passes it
    with figure_style():
        figure = Figure(figsize=(9.0, 3.4), layout="constrained")
        ax = figure.subplots()
        styles = (LINES["unclipped"], LINES["clipped"], LINES["clip_only"])
        for (label, name), style in zip(KL_ESTIMATORS.items(), styles, strict=True):
            ax.plot(kl_values, errors[name], label=label, **style)
        at = int(np.argmin(np.abs(t - 1.0)))
        sampled = "the policy that sampled the batch"
        ax.plot(kl_values[at], errors["k3"][at], "o", color=COLORS["sample"], label=sampled)
        ax.set(xlabel="KL(π ‖ π_ref) of the next-token distribution", ylim=(-0.05, top))
        ax.set(ylabel="relative error of the\nexpected gradient", xlim=(0, kl_values.max()))
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 0.1), fontsize="small")
    return KLBias(figure, t, kl_values, errors, gap)
