"""Notebook 7: clipping as LLM trainers apply it, on one batch of a tiny numpy language model.

* :mod:`.batch`: :mod:`tiny_lm`'s answers to "count from a to b" and the policy at each update;
* :mod:`.tokens`: the heat map of each token's push under an objective (:class:`TokenPushExplorer`);
* :mod:`.apps`: length bias under the three aggregations, and the three clip fractions;
* :mod:`.text`: the batch's table, the objectives' table and the KL figure.

Every ratio, weight, gradient and clip fraction comes from :mod:`llm_clip`.  The exercises'
checks are in :mod:`ppo_viz.exercises.llm`.
"""

from ppo_viz.llm.apps import ClipFractionExplorer, LengthBiasExplorer
from ppo_viz.llm.batch import response_batch
from ppo_viz.llm.text import batch_table, kl_gradient_bias, objectives_table
from ppo_viz.llm.tokens import Setting, TokenPushExplorer

__all__ = [
    "ClipFractionExplorer",
    "LengthBiasExplorer",
    "Setting",
    "TokenPushExplorer",
    "batch_table",
    "kl_gradient_bias",
    "objectives_table",
    "response_batch",
]
