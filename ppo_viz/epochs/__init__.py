"""Notebook 3: several epochs of PPO on one batch, on a bandit whose answer is known.

The bandit and the training step are :mod:`bandit`'s (shared with notebook 4).

* :mod:`.training`: the batch (:func:`batch_of`, and the misleading one the notebook starts
  from, :data:`MISLEADING_SEED`), :class:`Settings`, :class:`Run`,
  :func:`train`, :func:`run_all`;
* :mod:`.app`: :class:`EpochsExplorer`, the three runs under their controls, and
  :class:`InterpolationExplorer`, Figure 2 with ε on a slider;
* :mod:`.foundations`: the line through PPO's update (the PPO paper's Figure 2), the
  small-step limit and its hard-constraint optimum, the KL estimators k1, k2, k3;
* :mod:`.text`: the tables (bandit, batch, summary, KL estimators).
"""

from ppo_viz.epochs.app import EpochsExplorer, InterpolationExplorer
from ppo_viz.epochs.foundations import DRIFTING_SEED, estimator_studies, small_step_study
from ppo_viz.epochs.text import bandit_table, batch_table, kl_estimator_table
from ppo_viz.epochs.training import (
    BIG_STEP,
    COLUMNS,
    MISLEADING_SEED,
    Column,
    Settings,
    batch_of,
    hard_constraint_optimum,
    run_all,
    survey,
)

__all__ = [
    "BIG_STEP",
    "COLUMNS",
    "DRIFTING_SEED",
    "MISLEADING_SEED",
    "Column",
    "EpochsExplorer",
    "InterpolationExplorer",
    "Settings",
    "bandit_table",
    "batch_of",
    "batch_table",
    "estimator_studies",
    "hard_constraint_optimum",
    "kl_estimator_table",
    "run_all",
    "small_step_study",
    "survey",
]
