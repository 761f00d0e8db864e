"""Notebook 3: several epochs of PPO on one batch, on a bandit whose answer is known.

A softmax policy over four arms with known mean rewards; the uniform old
policy draws one batch of 12 samples; three objectives (PPO's clipped
``min``, the unclipped ``r*A`` and the clip-only ``clip(r)*A``) each take
several full-batch gradient steps on that batch, with an optional early stop
at a target KL.  Every ratio, loss and gradient comes from :mod:`ppo_clip`.

* :mod:`.bandit`: the toy problem (softmax, :class:`Bandit`,
  :class:`BanditBatch`, :func:`draw_batch`);
* :mod:`.training`: :class:`Settings`, the chain rule through the softmax,
  the KL estimates, :class:`Run`, :func:`train` and :func:`run_all`;
* :mod:`.figure`: :class:`EpochsFigure`, and :mod:`.layout`: its colours and sizes
  on screen and on a slide;
* :mod:`.text`: the sample labels, the batch table (:func:`describe_batch`)
  and the summary table;
* :mod:`.app`: :class:`EpochsExplorer`, the figure with its controls.

The foundations of why PPO uses a ratio and clips it, on the same bandit:

* :mod:`.interpolation` and :mod:`.interpolation_app`: the objectives along
  the line through PPO's update, the analogue of the PPO paper's Figure 2
  (:class:`UpdateLine`, :class:`InterpolationExplorer`);
* :mod:`.small_steps`: the small-step limit, where the band behaves like a
  hard constraint (:func:`small_step_study`, :func:`hard_constraint_optimum`);
* :mod:`.kl`: the exact KL and the estimators k1, k2, k3 over many fresh
  batches (:func:`estimator_studies`), tabled by :func:`kl_estimator_table`.
"""

from ppo_viz.epochs.app import EpochsExplorer
from ppo_viz.epochs.bandit import (
    ARM_MEANS,
    N_SAMPLES,
    Bandit,
    BanditBatch,
    default_bandit,
    draw_batch,
    log_softmax,
    softmax,
)
from ppo_viz.epochs.figure import EpochsFigure
from ppo_viz.epochs.interpolation import UpdateLine, clipped_peak, ppo_update_line
from ppo_viz.epochs.interpolation_app import InterpolationExplorer, InterpolationFigure
from ppo_viz.epochs.kl import (
    KL_FORMULAS,
    KL_TERMS,
    EstimatorStudy,
    approx_kl_k3,
    estimator_studies,
    exact_kl,
    kl_estimates,
)
from ppo_viz.epochs.layout import ARM_COLORS
from ppo_viz.epochs.small_steps import (
    STEP_SIZES,
    TOTAL_MOVEMENT,
    StepSizeRun,
    hard_constraint_optimum,
    small_step_study,
)
from ppo_viz.epochs.text import BatchTable, describe_batch, kl_estimator_table, summary_html
from ppo_viz.epochs.training import (
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_SEED,
    DEFAULT_STEP_SIZE,
    OBJECTIVES,
    Run,
    SettingError,
    Settings,
    chain_through_softmax,
    descend,
    grad_wrt_logits,
    loss_wrt_logits,
    run_all,
    train,
)

__all__ = [
    "ARM_COLORS",
    "ARM_MEANS",
    "DEFAULT_EPOCHS",
    "DEFAULT_EPS",
    "DEFAULT_SEED",
    "DEFAULT_STEP_SIZE",
    "KL_FORMULAS",
    "KL_TERMS",
    "N_SAMPLES",
    "OBJECTIVES",
    "STEP_SIZES",
    "TOTAL_MOVEMENT",
    "Bandit",
    "BanditBatch",
    "BatchTable",
    "EpochsExplorer",
    "EpochsFigure",
    "EstimatorStudy",
    "InterpolationExplorer",
    "InterpolationFigure",
    "Run",
    "SettingError",
    "Settings",
    "StepSizeRun",
    "UpdateLine",
    "approx_kl_k3",
    "chain_through_softmax",
    "clipped_peak",
    "default_bandit",
    "descend",
    "describe_batch",
    "draw_batch",
    "estimator_studies",
    "exact_kl",
    "grad_wrt_logits",
    "hard_constraint_optimum",
    "kl_estimates",
    "kl_estimator_table",
    "log_softmax",
    "loss_wrt_logits",
    "ppo_update_line",
    "run_all",
    "small_step_study",
    "softmax",
    "summary_html",
    "train",
]
