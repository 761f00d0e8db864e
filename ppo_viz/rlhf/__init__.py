"""Notebook 7's Part B: RLHF in miniature, trained live and measured over seeds.

* :mod:`.results`: the committed results of ``python -m experiments.rlhf_study`` and the
  sentences and tables made from them;
* :mod:`.figures`: final accuracy against the learning rate per method, each finding's
  curve with its simultaneous band, and response length and entropy over training;
* :mod:`.apps`: :class:`TrainingExplorer`, the trainers run live on a few seeds.

The model, the task and the trainers are the top-level modules :mod:`tiny_lm` and
:mod:`tiny_rlhf`; the study (its plan and statistics) lives in ``experiments/``.
"""

from ppo_viz.rlhf.apps import TrainingExplorer
from ppo_viz.rlhf.figures import curves_figure, effects_figure, score_figure
from ppo_viz.rlhf.results import load_results

__all__ = [
    "TrainingExplorer",
    "curves_figure",
    "effects_figure",
    "load_results",
    "score_figure",
]
