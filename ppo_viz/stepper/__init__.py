"""Notebook 2: the worked example, one sample at a time, and your own batch.

:class:`BatchStepper` walks through a batch sample by sample, showing every
quantity of the current sample, the running totals (which end at the
module's three numbers, bit for bit) and the sample on notebook 1's figure.
Every number comes from :func:`ppo_clip.clip_breakdown`; this package only
lays the numbers out.  Its modules, by concern:

* :mod:`.batch`: the data (:class:`StepperBatch`) and the presets;
* :mod:`.entry`: reading the text fields (:func:`parse_batch`, :class:`EntryError`);
* :mod:`.readout`: the rows of the sample card, the clip rule in words, the
  running totals and the check against the module;
* :mod:`.cards`: all of that as HTML;
* :mod:`.figure`: the figure;
* :mod:`.app`: the widgets.
"""

from ppo_viz.stepper.app import BatchStepper
from ppo_viz.stepper.batch import PRESETS, Preset, StepperBatch, preset_batch
from ppo_viz.stepper.entry import EntryError, parse_batch
from ppo_viz.stepper.figure import FigureLimits, StepperFigure, figure_limits
from ppo_viz.stepper.readout import (
    ModuleCheck,
    ReadoutRow,
    RunningTotals,
    SampleReadout,
    clip_rule,
    compare_with_module,
    running_totals,
    sample_readout,
)

__all__ = [
    "PRESETS",
    "BatchStepper",
    "EntryError",
    "FigureLimits",
    "ModuleCheck",
    "Preset",
    "ReadoutRow",
    "RunningTotals",
    "SampleReadout",
    "StepperBatch",
    "StepperFigure",
    "clip_rule",
    "compare_with_module",
    "figure_limits",
    "parse_batch",
    "preset_batch",
    "running_totals",
    "sample_readout",
]
