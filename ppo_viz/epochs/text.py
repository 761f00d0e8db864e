"""Notebook 3's tables: the bandit, the batch, the runs' final numbers, the KL estimators.

Every number goes through :mod:`ppo_viz.numbers` and every table through
:func:`ppo_viz.html.table`.  The notebook's prose states no number that depends on the
batch: these tables do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from IPython.display import HTML

from bandit import ARM_MEANS, KL_FORMULAS, REWARD_NOISE, FloatArray
from ppo_viz.epochs.foundations import EstimatorStudy
from ppo_viz.epochs.training import COLUMNS, Run, arm_sums, batch_of, outside_band, start_reward
from ppo_viz.html import Markup, page, table, tag
from ppo_viz.numbers import rounded, signed


def html_table(header: Sequence[str], rows: Sequence[Sequence[object]], caption: str) -> HTML:
    """A table for a notebook cell, styled by the bundle's stylesheet."""
    return HTML(str(page(table(header, rows, caption=caption))))


def sample_label(t: int, arm: int, advantage: float) -> str:
    """The label of sample ``t`` left of the gradient map: ``#8  arm 2  A -0.34``."""
    return f"#{t:<2d} arm {arm}  A {signed(advantage, 2)}"


def bandit_table() -> HTML:
    """The bandit: each arm's true mean and its probability under the old (uniform) policy."""
    k = len(ARM_MEANS)
    rows = tuple((f"arm {arm}", signed(mu, 2), f"1/{k}") for arm, mu in enumerate(ARM_MEANS))
    caption = (
        f"{k} arms; each reward is the arm's true mean plus Gaussian noise of standard deviation "
        f"{rounded(REWARD_NOISE)}. The old policy's true expected reward is "
        f"{rounded(start_reward(), 3)}."
    )
    return html_table(("arm", "true mean m", "old policy π_old"), rows, caption)


def batch_table(seed: int) -> HTML:
    """The batch drawn with ``seed``, arm by arm: its samples, mean reward and sum of A."""
    batch, k = batch_of(seed), len(ARM_MEANS)
    sums, rows = arm_sums(batch), []
    for arm in range(k):
        members = np.flatnonzero(batch.actions == arm)
        samples = ", ".join(f"#{t} ({signed(batch.advantages[t], 2)})" for t in members)
        mean = rounded(batch.rewards[members].mean(), 3) if members.size else "–"
        mu, total = signed(ARM_MEANS[arm], 2), signed(sums[arm], 3)
        rows.append((f"arm {arm}", mu, samples or "none", mean, total))
    caption = (
        f"Batch seed {seed}: N = {batch.n}, mean reward {rounded(batch.rewards.mean(), 3)}, "
        f"advantage A = R − mean reward. The batch favours arm {int(np.argmax(sums))}, the arm "
        "with the largest sum of A."
    )
    header = ("arm", "true mean m", "samples (advantage A)", "batch mean reward", "sum of A")
    return html_table(header, tuple(rows), caption)


#: The summary's columns: header, and the cell of one run (after the last epoch it took).
SUMMARY_COLUMNS: dict[str, Callable[[Run], object]] = {
    "objective": lambda run: tag(
        "span",
        COLUMNS[run.objective].name,
        classes="ppo-strong",
        style=f"color: {COLUMNS[run.objective].line['color']}",
    ),
    "epochs run": lambda run: f"{run.epochs_run}{' (early stop)' if run.stopped_early else ''}",
    "ratios seen": lambda run: f"{rounded(run.ratios.min(), 3)} to {rounded(run.ratios.max(), 3)}",
    "largest distance outside the band": lambda run: rounded(
        max(outside_band(run.ratios, run.band).max(), 0.0), 3
    ),
    "samples with zero gradient": lambda run: (
        f"{int(run.zero_grad[-1].sum())} of {run.batch.n} "
        f"({rounded(run.zero_grad_fraction[-1], 3)})"
    ),
    "KL: k3 / exact": lambda run: (
        f"{rounded(run.approx_kl[-1], 3)} / {rounded(run.exact_kl[-1], 3)}"
    ),
    "true reward": lambda run: rounded(run.true_reward[-1], 3),
}


def summary_html(runs: dict[str, Run]) -> Markup:
    """One row of final numbers per objective, after the last epoch each run took."""
    start = rounded(next(iter(runs.values())).true_reward[0], 3)
    caption = (
        "After each run's last epoch. Ratios seen: the smallest and largest of all epochs. "
        "For PPO the samples with zero gradient are its clip fraction. "
        f"The true reward started at {start}."
    )
    rows = [[cell(run) for cell in SUMMARY_COLUMNS.values()] for run in runs.values()]
    return tag("div", table(list(SUMMARY_COLUMNS), rows, caption=caption), classes="ppo")


#: The KL table's columns: header, and the cell of one estimator (its estimates ``values``)
#: on one study's policy.
KL_COLUMNS: dict[str, Callable[[EstimatorStudy, str, FloatArray], object]] = {
    "new policy (exact KL)": lambda study, name, values: (
        f"{study.label} ({rounded(study.exact, 3)})"
    ),
    "estimator": lambda study, name, values: f"{name} = {KL_FORMULAS[name]}",
    "mean of the estimates": lambda study, name, values: rounded(values.mean(), 3),
    "bias: mean − exact": lambda study, name, values: signed(values.mean() - study.exact, 2),
    "bias in standard errors": lambda study, name, values: signed(
        study.bias_in_standard_errors(name), 2
    ),
    "spread: sd of one estimate": lambda study, name, values: rounded(values.std(ddof=1), 2),
    "estimates below 0": lambda study, name, values: (
        f"{np.count_nonzero(values < 0)} of {values.size}"
    ),
}


def kl_estimator_table(studies: Sequence[EstimatorStudy]) -> HTML:
    """One row per policy and estimator: mean, bias, spread and sign over the fresh batches."""
    rows = [
        [cell(study, name, values) for cell in KL_COLUMNS.values()]
        for study in studies
        for name, values in study.estimates.items()
    ]
    caption = (
        f"Each estimate is the mean of one term over one fresh batch of {batch_of(0).n} samples "
        f"from the old policy; {studies[0].estimates['k1'].size} batches (seeds 0, 1, 2, …) "
        "per policy."
    )
    return html_table(list(KL_COLUMNS), rows, caption)
