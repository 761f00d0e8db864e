"""Notebook 7's live explorer: the trainers of :mod:`tiny_rlhf`, run on a few seeds.

:class:`TrainingExplorer` trains the ticked methods at the sliders' learning rate, mu and KL
weight on seeds ``0 .. seeds - 1`` (the study's first discovery seeds: at the study's grid
points it shows the committed runs of those seeds) and draws the batch reward, the response
length, the wrong responses' excess length and the entropy over training, with a table of
each method's final numbers and the seconds the training took (it grows with mu and with the
runs, ticked methods times seeds).  Runs are kept by settings and method, so ticking a method
trains only that one and going back to a setting trains nothing.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from numpy.lib.stride_tricks import sliding_window_view

from ppo_viz.app import LiveFigure
from ppo_viz.controls import checked_number, method_boxes, selection, ticked
from ppo_viz.html import Markup, table, tag
from ppo_viz.numbers import rounded
from ppo_viz.rlhf.figures import CURVE_PANELS, draw_curves
from ppo_viz.style import figure_size, figure_style
from tiny_lm import reference_model
from tiny_rlhf import METHODS, History, TrainSettings, methods_named, train

LEARNING_RATES = (1e-3, 3e-3, 1e-2, 2e-2, 3e-2, 5e-2)
UPDATES = (1, 2, 4, 8)
KL_COEFS = (0.0, 0.01, 0.04, 0.1)
#: The settings at the start: the methods ticked (their runs, times the seeds, train within
#: the one-second budget at every setting), a learning rate and mu at which clipping matters.
SHOWN_AT_START = ("grpo", "unclipped")
START_LEARNING_RATE, START_UPDATES = 2e-2, 4
DEFAULT_SEEDS = 3
#: The curves are means over seeds and over this many iterations (a few seeds are noisy).
SMOOTHING = 5


class TrainingExplorer(LiveFigure):
    """The ticked methods trained live: reward, length and entropy over training."""

    description = "GRPO-family trainers on a tiny language model, trained live"

    def __init__(self, seeds: int = DEFAULT_SEEDS, shown: Sequence[str] = SHOWN_AT_START) -> None:
        self.seeds = tuple(range(int(checked_number("seeds", seeds, (1, 20), whole=True))))
        methods_named(shown)  # refuses an unknown one by name
        self.runs: dict[tuple[TrainSettings, str], History] = {}
        self.seconds = 0.0
        reference_model()  # every run starts from it: made once, not timed as training
        controls: dict[str, widgets.Widget] = {
            "learning_rate": selection("Adam's learning rate", LEARNING_RATES, START_LEARNING_RATE),
            "updates": selection("μ (updates)", UPDATES, START_UPDATES),
            "kl_coef": selection("β (KL in the loss)", KL_COEFS, 0.0),
        }
        labels = {key: m.label for key, m in METHODS.items()}
        controls |= method_boxes(labels, shown)
        with figure_style():
            figure = Figure(figsize=figure_size((9.0, 3.3), (9.6, 3.2)), layout="constrained")
            empty = {key: {name: [np.nan] * 2 for name, _, _ in CURVE_PANELS} for key in METHODS}
            self.lines = draw_curves(figure, np.arange(2.0), empty, labels, len(CURVE_PANELS))
        boxes = [f"show_{key}" for key in METHODS]
        rows = [["learning_rate", "updates"], ["kl_coef"], boxes[:4], boxes[4:8], boxes[8:]]
        moving = [line for group in self.lines.values() for line in group]
        super().__init__(figure, self.update, controls, moving=moving, rows=rows)

    def trained(self, settings: TrainSettings, keys: Sequence[str]) -> dict[str, History]:
        """The runs of ``keys`` at ``settings``, training the ones not kept yet (together)."""
        missing = [key for key in keys if (settings, key) not in self.runs]
        if missing:
            started = time.perf_counter()
            with self.busy():
                new = train([METHODS[key] for key in missing], settings, self.seeds)
            self.seconds = time.perf_counter() - started
            self.runs.update({(settings, key): history for key, history in new.items()})
        return {key: self.runs[(settings, key)] for key in keys}

    def update(self, learning_rate: float, updates: int, kl_coef: float, **shown: bool) -> Markup:
        """Train (or recall) the ticked methods and draw them; the others are hidden."""
        # every option of the three selection sliders is a valid setting (they take no other)
        settings = TrainSettings(learning_rate=learning_rate, updates=updates, kl_coef=kl_coef)
        keys = ticked(shown, METHODS)
        runs = self.trained(settings, keys)
        x = np.arange(1.0, settings.iterations + 1)
        for key, lines in self.lines.items():
            for line, (name, _, _) in zip(lines, CURVE_PANELS, strict=True):
                if key in runs:
                    line.set_data(x, smoothed(runs[key].curve(name)))
                line.set_visible(key in runs)
        self.figure.axes[0].set_xlim(0.0, float(settings.iterations))  # the panels share it
        return summary(runs, len(self.seeds), self.seconds)


def smoothed(values: np.ndarray, window: int = SMOOTHING) -> np.ndarray:
    """The mean of each value and the ``window - 1`` before it that are not NaN (NaN where
    all are)."""
    windows = sliding_window_view(np.concatenate([np.full(window - 1, np.nan), values]), window)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns of an all-NaN window
        return np.nanmean(windows, axis=1)


def summary(runs: dict[str, History], seeds: int, seconds: float) -> Markup:
    """Per method the study's measures (final accuracy, mean batch reward, the wrong responses'
    excess length and entropy over the last quarter, share clipped); the last training's time."""
    rows = []
    for key, run in runs.items():
        late = slice(-max(1, run.reward.shape[1] // 4), None)
        wrong = run.wrong[:, late].sum()
        excess = run.wrong_excess[:, late].sum() / wrong if wrong else np.nan
        name = tag("span", METHODS[key].label, classes="ppo-strong")
        score, reward = rounded(run.score.mean(), 3), rounded(run.reward.mean(), 3)
        entropy = rounded(run.entropy[:, late].mean(), 3)
        clipped = rounded(run.clip_fraction.mean(), 2)
        rows.append([name, score, reward, rounded(excess, 2), entropy, clipped])
    header = ["method", "final accuracy", "reward", "wrong responses' excess", "entropy", "clipped"]
    caption = (
        f"Means over {seeds} seeds (0–{seeds - 1}): reward over training; excess length (tokens) "
        f"and entropy (nats) over its last quarter; share of tokens clipped. Curves also over "
        f"{SMOOTHING} iterations. Last training {seconds:.2f} s."
    )
    return tag("div", table(header, rows, caption=caption), classes="ppo")
