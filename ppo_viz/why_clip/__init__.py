"""Notebook 4: why PPO clips, measured over many seeds (the PPO paper's Table 1, in numpy).

* :mod:`.methods`: the methods compared, as data, and statistics over seeds;
* :mod:`.bandit_loop`: part A, PPO's loop (collect, K epochs, repeat) on notebook 3's bandit;
* :mod:`.networks` and :mod:`.cartpole_ppo`: part B, a numpy actor-critic on CartPole;
* :mod:`.figures` and :mod:`.apps`: the figures and the two interactive apps;
* :mod:`.results`: the reproduced table (written by ``python -m experiments.why_clip``).
"""

from ppo_viz.why_clip.apps import BanditLoopExplorer, CartPoleExplorer
from ppo_viz.why_clip.bandit_loop import BanditLoopSettings, run_bandit_methods
from ppo_viz.why_clip.cartpole_ppo import CartPoleSettings, run_cartpole
from ppo_viz.why_clip.methods import METHODS
from ppo_viz.why_clip.results import comparison_table, load_results

__all__ = [
    "METHODS",
    "BanditLoopExplorer",
    "BanditLoopSettings",
    "CartPoleExplorer",
    "CartPoleSettings",
    "comparison_table",
    "load_results",
    "run_bandit_methods",
    "run_cartpole",
]
