"""The words and tables of notebook 3: sample labels, the batch, summary and KL-estimator tables.

Every number goes through :mod:`ppo_viz.numbers` and every table through
:func:`ppo_viz.html.table`, styled by the bundle's stylesheet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ppo_viz.epochs.bandit import Bandit, BanditBatch, cached_batch, default_bandit
from ppo_viz.epochs.kl import KL_FORMULAS, EstimatorStudy
from ppo_viz.epochs.training import DEFAULT_SEED, OBJECTIVES, Run
from ppo_viz.html import Markup, escape, page, table, tag
from ppo_viz.numbers import count, listing, rounded, signed
from ppo_viz.style import NAMES


def sample_label(t: int, arm: int, advantage: float) -> str:
    """The label of sample ``t`` left of the gradient map: ``#8  arm 2  A -0.34``."""
    return f"#{t:<2d} arm {arm}  A {signed(advantage, 2)}"


def arm_label(arm: int, true_mean: float) -> str:
    """``arm 0 (true mean +1)``: an arm in the figure's legend."""
    return f"arm {arm} (true mean {signed(true_mean, 2)})"


@dataclass(frozen=True)
class TextTable:
    """A table shown as HTML in a notebook and as plain text elsewhere."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str

    def _repr_html_(self) -> str:
        return str(page(table(self.header, self.rows, caption=self.caption)))

    def __repr__(self) -> str:
        lines = [self.caption, " | ".join(self.header)]
        lines += [" | ".join(row) for row in self.rows]
        return "\n".join(lines)


# --------------------------------------------------------------------------
# The batch, arm by arm
# --------------------------------------------------------------------------


class ArmRow(NamedTuple):
    """What the batch says about one arm (``mean_reward`` is None if no sample drew it)."""

    arm: int
    true_mean: float
    samples: list[int]
    advantages: list[float]
    mean_reward: float | None
    advantage_sum: float


def arm_rows(batch: BanditBatch, bandit: Bandit) -> list[ArmRow]:
    """Per arm: its true mean, the samples that drew it, their mean reward and advantage sum."""
    rows = []
    for arm in range(bandit.k):
        members = batch.samples_of(arm)
        rows.append(
            ArmRow(
                arm=arm,
                true_mean=float(bandit.true_means[arm]),
                samples=[int(t) for t in members],
                advantages=[float(batch.advantages[t]) for t in members],
                mean_reward=float(batch.rewards[members].mean()) if members.size else None,
                advantage_sum=float(batch.advantages[members].sum()),
            )
        )
    return rows


@dataclass(frozen=True)
class BatchTable:
    """The batch summarized per arm: an HTML table in a notebook, aligned text elsewhere."""

    batch: BanditBatch
    bandit: Bandit

    HEADER = ("arm", "true mean μ", "samples (advantage A)", "batch mean reward", "sum of A")

    def rows(self) -> list[ArmRow]:
        """One row per arm."""
        return arm_rows(self.batch, self.bandit)

    def caption(self) -> str:
        """The seed, the batch size and the batch's mean reward."""
        mean = rounded(self.batch.rewards.mean(), 3)
        return (
            f"Batch seed {self.batch.seed}: N = {self.batch.n}, mean reward {mean}, "
            "advantage A = R − mean reward"
        )

    def cells(self, row: ArmRow) -> list[str]:
        """A row's cells as text."""
        samples = ", ".join(
            f"#{t} ({signed(a, 2)})" for t, a in zip(row.samples, row.advantages, strict=True)
        )
        return [
            f"arm {row.arm}",
            signed(row.true_mean, 2),
            samples or "none",
            "–" if row.mean_reward is None else rounded(row.mean_reward, 3),
            signed(row.advantage_sum, 3),
        ]

    def text_table(self) -> TextTable:
        """The table's header, cells and caption."""
        rows = tuple(tuple(self.cells(row)) for row in self.rows())
        return TextTable(self.HEADER, rows, self.caption())

    def _repr_html_(self) -> str:
        return self.text_table()._repr_html_()

    def __repr__(self) -> str:
        return repr(self.text_table())


def describe_batch(seed: int = DEFAULT_SEED) -> BatchTable:
    """The batch drawn with ``seed`` (default bandit), summarized per arm, for the notebook."""
    return BatchTable(cached_batch(seed), default_bandit())


# --------------------------------------------------------------------------
# The runs' final numbers
# --------------------------------------------------------------------------

SUMMARY_HEADER = (
    "objective",
    "epochs run",
    "ratios seen",
    "samples with zero gradient",
    "KL: k3 / exact",
    "true reward",
)


def summary_html(runs: dict[str, Run]) -> Markup:
    """One row of final numbers per objective, after the last epoch each run took."""
    start = rounded(runs[OBJECTIVES[0]].true_reward[0], 3)
    caption = (
        "After each run's last epoch. Ratios seen: the smallest and largest of all epochs. "
        "For PPO the samples with zero gradient are its clip fraction. "
        f"The true reward started at {start}."
    )
    rows = [summary_cells(objective, runs[objective]) for objective in OBJECTIVES]
    return tag("div", table(SUMMARY_HEADER, rows, caption=caption), classes="ppo")


def summary_cells(objective: str, run: Run) -> list[object]:
    """The summary table's row of one run."""
    stopped = " (early stop)" if run.stopped_early else ""
    zero = int(run.zero_grad[-1].sum())
    return [
        objective_name(objective),
        f"{run.epochs_run}{stopped}",
        f"{rounded(run.ratios.min(), 3)} to {rounded(run.ratios.max(), 3)}",
        f"{zero} of {count(run.batch.n, 'sample')} ({rounded(run.zero_grad_fraction[-1], 3)})",
        f"{rounded(run.approx_kl[-1], 3)} / {rounded(run.exact_kl[-1], 3)}",
        rounded(run.true_reward[-1], 3),
    ]


def objective_name(objective: str) -> Markup:
    """The objective's name in bold, in its colour."""
    colour_class = "ppo-text-" + objective.replace("_", "-")
    return tag("span", escape(NAMES[objective]), classes=f"ppo-strong {colour_class}")


# --------------------------------------------------------------------------
# The KL estimators over many fresh batches
# --------------------------------------------------------------------------

KL_HEADER = (
    "new policy (exact KL)",
    "estimator",
    "mean of the estimates",
    "bias: mean − exact",
    "bias in standard errors",
    "spread: sd of one estimate",
    "estimates below 0",
)


def kl_estimator_table(studies: Sequence[EstimatorStudy]) -> TextTable:
    """One row per policy and estimator: mean, bias, spread and sign over the fresh batches."""
    rows = []
    for study in studies:
        for name, spread in study.spreads.items():
            rows.append(
                (
                    f"{study.label} ({rounded(study.exact, 3)})",
                    f"{name} = {KL_FORMULAS[name]}",
                    rounded(spread.mean, 3),
                    signed(spread.bias, 2),
                    signed(spread.bias / spread.standard_error, 2),
                    rounded(spread.spread, 2),
                    f"{spread.negative} of {study.n_batches}",
                )
            )
    batches = {study.n_batches for study in studies}
    caption = (
        f"Each estimate is the mean of one term over one fresh batch of 12 samples from the old "
        f"policy; {listing(sorted(batches))} batches (seeds 0, 1, 2, …) per policy."
    )
    return TextTable(KL_HEADER, tuple(rows), caption)
