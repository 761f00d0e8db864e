"""The words and tables of notebook 3: sample labels, the batch table, the summary table.

Every number goes through :mod:`ppo_viz.numbers` and every table through
:func:`ppo_viz.html.table`, styled by the bundle's stylesheet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ppo_viz.epochs.bandit import Bandit, BanditBatch, cached_batch, default_bandit
from ppo_viz.epochs.training import DEFAULT_SEED, OBJECTIVES, Run
from ppo_viz.html import Markup, escape, page, table, tag
from ppo_viz.numbers import count, rounded, signed
from ppo_viz.style import NAMES


def sample_label(t: int, arm: int, advantage: float) -> str:
    """The label of sample ``t`` left of the gradient map: ``#8  arm 2  A -0.34``."""
    return f"#{t:<2d} arm {arm}  A {signed(advantage, 2)}"


def arm_label(arm: int, true_mean: float) -> str:
    """``arm 0 (true mean +1)``: an arm in the figure's legend."""
    return f"arm {arm} (true mean {signed(true_mean, 2)})"


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

    def _repr_html_(self) -> str:
        body = table(self.HEADER, [self.cells(row) for row in self.rows()], caption=self.caption())
        return str(page(body))

    def __repr__(self) -> str:
        lines = [self.caption(), " | ".join(self.HEADER)]
        lines += [" | ".join(self.cells(row)) for row in self.rows()]
        return "\n".join(lines)


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
