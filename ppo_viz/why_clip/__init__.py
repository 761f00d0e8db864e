"""Notebook 4: why PPO clips, measured as the range of step sizes each method tolerates.

* :mod:`.methods`: the methods compared (the PPO paper's Table 1 rows and three more), as data,
  and :func:`~.methods.run_bandit_methods`, them all on PPO's loop on notebook 3's bandit
  (``bandit_loop.py`` beside ``ppo_clip.py``: collect, K epochs, repeat);
* :mod:`.results`: the committed results of ``python -m experiments.why_clip`` and the
  tables made from them;
* :mod:`.figures` and :mod:`.apps`: the range figure and the curves over training, live.

The study itself (its plan, the CartPole agent, the statistics) lives in ``experiments/``.
"""

from ppo_viz.why_clip.apps import BanditLoopExplorer, CartPoleExplorer, RangeExplorer
from ppo_viz.why_clip.results import load_results

__all__ = ["BanditLoopExplorer", "CartPoleExplorer", "RangeExplorer", "load_results"]
