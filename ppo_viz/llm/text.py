"""Notebook 7's tables and its KL figure, every number from :mod:`llm_clip` on the batch.

* :func:`batch_table`: the answers, their rewards and advantages;
* :func:`kl_gradient_bias`: k3 in the loss has a biased expected gradient (verl PR #2953);
* :func:`library_table`: where TRL, verl and CleanRL differ, on the same batch, each row
  naming the file and line it follows (TRL ``f2cd577``, verl ``b178a3c``, CleanRL ``fe8d8a0``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

import llm_clip
from ppo_viz.bandit import exact_kl, kl_penalty_grad, log_softmax
from ppo_viz.llm.batch import MAX_LEN, features, policies, response_batch
from ppo_viz.numbers import rounded, signed
from ppo_viz.numerics.text import Demo
from ppo_viz.style import COLORS, LINES, figure_style


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


#: The context of the KL figure: prompt 5→7 after its first token "5".
KL_CONTEXT = ((5, 7), 6, 1)  # (prompt, previous token, position)
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
    logits: ``sum_y π(y) g(y) (onehot(y) - π)``, ``g = d estimator / d log π(y)`` from
    llm_clip (the vocabulary as V one-token answers, token-mean weight 1/V, r = 1)."""
    logp, ref = log_softmax(logits)[:, None], log_softmax(ref_logits)[:, None]
    v, pi = len(logp), np.exp(logp[:, 0])
    parts = llm_clip.token_breakdown(
        logp, logp, np.zeros(v), np.ones((v, 1), bool), objective="ppo", logp_ref=ref, kl_coef=1.0
    )
    g_k3 = v * parts.grad[:, 0]  # d k3 / d log π(y) = 1 - π_ref(y)/π(y)
    slopes = {"k1": np.ones(v), "k3": g_k3, "exact": g_k3 + parts.kl[:, 0]}  # d(r·k3) at r = 1
    return {name: (pi * g) @ (np.eye(v) - pi) for name, g in slopes.items()}


def kl_gradient_bias(t_max: float = 2.5) -> KLBias:
    """The expected gradient of each KL term in the loss against the true gradient of
    KL(π ‖ π_ref), for one next-token distribution moved away from the reference."""
    (a, b), previous, position = KL_CONTEXT
    x = features(np.array([a]), np.array([b]), np.array([previous]), position)[0]
    reference, policy = policies()
    z_ref, z_old = x @ reference, x @ policy
    t = np.linspace(0.0, t_max, 101)[1:]  # from the reference on (at t = 0 both are 0)
    kl, errors, gap = [], {name: [] for name in KL_ESTIMATORS.values()}, 0.0
    for step in t:
        z = z_ref + step * (z_old - z_ref)
        pi, pi_ref = np.exp(log_softmax(z)), np.exp(log_softmax(z_ref))
        true = pi * (np.log(pi) - np.log(pi_ref) - exact_kl(pi, pi_ref))  # d KL / d logits
        kl.append(float(exact_kl(pi, pi_ref)))
        grads = _expected_grads(z, z_ref)
        gap = max(gap, float(np.abs(grads["k3"] - kl_penalty_grad(pi_ref, pi)).max()))
        for name, g in grads.items():
            errors[name].append(np.linalg.norm(g - true) / np.linalg.norm(true))
    kl_values = np.array(kl)
    with figure_style():
        figure = Figure(figsize=(9.0, 3.4), layout="constrained")
        ax = figure.subplots()
        styles = (LINES["unclipped"], LINES["clipped"], LINES["clip_only"])
        for (label, name), style in zip(KL_ESTIMATORS.items(), styles, strict=True):
            ax.plot(kl_values, errors[name], label=label, **style)
        at = int(np.argmin(np.abs(t - 1.0)))
        ax.plot(
            kl_values[at],
            errors["k3"][at],
            "o",
            color=COLORS["sample"],
            label="the policy that sampled the batch",
        )
        ax.set(
            xlabel="KL(π ‖ π_ref) of the next-token distribution",
            ylabel="relative error of the\nexpected gradient",
            ylim=(-0.05, 1.1),
            xlim=(0, kl_values.max()),
        )
        ax.legend(loc="center right", fontsize="small")
    arrays = {name: np.array(values) for name, values in errors.items()}
    return KLBias(figure, t, kl_values, arrays, gap)


#: TRL's CISPO clamps at epsilon_high = 5.0 (recommended, ``grpo_config.py`` L194-195), one-sided:
#: in llm_clip's terms the band [1 - 1, 1 + 4].
TRL_CISPO = {"eps_low": 1.0, "eps_high": 4.0}
#: GSPO's clip range in its paper (arXiv 2507.18071): 3e-4 below, 4e-4 above.
GSPO_EPS = (3e-4, 4e-4)


def library_table(mu: int = 3) -> Demo:
    """Where the libraries differ, on the batch at update ``mu`` (GRPO's advantages)."""
    batch = response_batch(4)
    logp_new, a, mask = batch.logp_new[mu - 1], batch.advantages(), batch.mask
    args = (logp_new, batch.logp_old, a, mask)
    b = len(a)

    def loss(objective: str, **options: object) -> str:
        return rounded(llm_clip.policy_loss(*args, objective=objective, **options), 4)

    def capped(**options: float) -> str:
        parts = llm_clip.token_breakdown(*args, objective="cispo", **options)
        return f"{int(parts.is_clipped.sum())} of {int(mask.sum())} weights capped"

    verl = llm_clip.clip_fraction_verl(*args, objective="grpo")
    trl = llm_clip.clip_ratio_trl(*args, objective="grpo")
    gspo = {"eps_low": GSPO_EPS[0], "eps_high": GSPO_EPS[1]}
    sum_norm = llm_clip.policy_loss(*args, objective="dr_grpo", max_len=MAX_LEN)
    rows = [
        (
            "CISPO's weight",
            "verl core_algos.py L1753",
            "clamp(r, 1 − 0.2, 1 + 0.2), detached",
            f"loss {loss('cispo')}; {capped()}",
        ),
        (
            "",
            "TRL grpo_trainer.py L3081",
            "clamp(r, max=epsilon_high), 5.0 recommended",
            f"loss {loss('cispo', **TRL_CISPO)}; {capped(**TRL_CISPO)}",
        ),
        (
            "CISPO's clip metric",
            "verl L1761",
            "r ≠ clip(r), any sign of A",
            rounded(llm_clip.clip_fraction_verl(*args, objective="cispo")["actor/pg_clipfrac"], 3),
        ),
        (
            "",
            "TRL L3255-3256",
            "r > epsilon_high and A > 0 (epsilon_high 5.0)",
            rounded(
                llm_clip.clip_ratio_trl(*args, objective="cispo", **TRL_CISPO)["cispo_clip_ratio"],
                3,
            ),
        ),
        (
            "default aggregation",
            "TRL grpo_config.py L244; grpo_trainer.py L3139-3141",
            'loss_type="dapo": sum over the tokens in the batch',
            f"loss {loss('ppo')}",
        ),
        ("", "verl actor.yaml L82; core_algos.py L1055-1058", "token-mean", f"loss {loss('ppo')}"),
        (
            "",
            'TRL L3125 (loss_type="grpo")',
            "mean over answers of each answer's mean",
            f"loss {loss('grpo')}",
        ),
        (
            "Dr. GRPO's constant",
            "TRL L3135",
            "sum / (B · max_completion_length)",
            f"loss {rounded(sum_norm, 4)}",
        ),
        (
            "",
            "verl core_algos.py L1072-1076",
            "sum / loss_scale_factor (the padded length): no 1/B",
            f"loss {rounded(b * sum_norm, 4)} (B = {b} times TRL's)",
        ),
        (
            "clip fraction",
            "CleanRL ppo.py L258",
            "mean(|r − 1| > ε), any sign of A",
            rounded(
                llm_clip.clip_fraction_cleanrl(logp_new, batch.logp_old, mask)["losses/clipfrac"], 3
            ),
        ),
        (
            "",
            "verl L1227 pg_clipfrac",
            "−A·clip(r) > −A·r: the gradient is off",
            rounded(verl["actor/pg_clipfrac"], 3),
        ),
        (
            "",
            "verl L1231-1233 pg_clipfrac_lower",
            "A < 0 and the dual clip's cap c = 3 binds",
            rounded(verl["actor/pg_clipfrac_lower"], 3),
        ),
        (
            "",
            "TRL L3244-3249 low / high / region",
            "r < 1 − ε and A < 0 / r > 1 + ε and A > 0",
            " / ".join(rounded(trl[f"clip_ratio/{k}_mean"], 3) for k in ("low", "high", "region")),
        ),
        (
            "GSPO's clip fraction (the paper's ε)",
            "verl L1317",
            "per token, one ratio per answer",
            rounded(
                llm_clip.clip_fraction_verl(*args, objective="gspo", **gspo)["actor/pg_clipfrac"], 3
            ),
        ),
        (
            "",
            "TRL L3224-3235",
            "per answer",
            rounded(
                llm_clip.clip_ratio_trl(*args, objective="gspo", **gspo)["clip_ratio/region_mean"],
                3,
            ),
        ),
    ]
    columns = dict(
        zip(
            ("what differs", "where (file, line)", "formula", f"on the batch, μ = {mu}"),
            map(list, zip(*rows, strict=True)),
            strict=True,
        )
    )
    notes = [
        "TRL at commit f2cd577 (trl/trainer/), verl at b178a3c (verl/trainer/ppo/ and "
        "verl/trainer/config/actor/), CleanRL at fe8d8a0 (cleanrl/)."
    ]
    return Demo(batch, columns, notes)
