"""Notebook 2: the worked example, one sample at a time, and your own batch.

:class:`BatchStepper` walks through a batch: a card with every quantity of the current sample,
running totals that end on the module's three numbers, and the sample on notebook 1's figure.
Three modules: the model (:mod:`.batch`), the text (:mod:`.text`), the figure and app (:mod:`.app`).
"""

from ppo_viz.stepper.app import BatchStepper
from ppo_viz.stepper.batch import PRESETS, StepperBatch, compare_with_module, preset_batch

__all__ = ["PRESETS", "BatchStepper", "StepperBatch", "compare_with_module", "preset_batch"]
