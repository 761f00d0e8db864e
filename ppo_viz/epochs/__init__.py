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
from ppo_viz.epochs.layout import ARM_COLORS
from ppo_viz.epochs.text import BatchTable, describe_batch, summary_html
from ppo_viz.epochs.training import (
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_SEED,
    DEFAULT_STEP_SIZE,
    OBJECTIVES,
    Run,
    SettingError,
    Settings,
    approx_kl_k3,
    chain_through_softmax,
    exact_kl,
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
    "N_SAMPLES",
    "OBJECTIVES",
    "Bandit",
    "BanditBatch",
    "BatchTable",
    "EpochsExplorer",
    "EpochsFigure",
    "Run",
    "SettingError",
    "Settings",
    "approx_kl_k3",
    "chain_through_softmax",
    "default_bandit",
    "describe_batch",
    "draw_batch",
    "exact_kl",
    "grad_wrt_logits",
    "log_softmax",
    "loss_wrt_logits",
    "run_all",
    "softmax",
    "summary_html",
    "train",
]
