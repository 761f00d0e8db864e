"""Notebook 4's two apps: PPO's loop on the bandit (part A) and on CartPole (part B).

:class:`BanditLoopExplorer` runs every method of part A on the same seeds whenever K, the
step size, the batch size or the number of iterations changes; :class:`CartPoleExplorer`
starts from the committed runs of the results command and trains more seeds live.  In both
a button adds seeds, with a progress bar, and checkboxes choose the methods drawn.  The
readout above each figure is a table of the runs' final numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ppo_viz.app import LiveFigure, checkbox, checked_flag, checked_number, control_layout, slider
from ppo_viz.html import Markup, table, tag
from ppo_viz.numbers import rounded
from ppo_viz.style import figure_style
from ppo_viz.why_clip.bandit_loop import (
    BANDIT_METHODS,
    SETTING_RANGES,
    BanditLoopHistory,
    BanditLoopSettings,
    run_bandit_loop,
    run_bandit_methods,
)
from ppo_viz.why_clip.cartpole_ppo import CARTPOLE_METHODS, CartPoleRuns, run_cartpole
from ppo_viz.why_clip.figures import (
    SpreadPanels,
    bandit_axes,
    cartpole_axes,
    legend,
    show_bandit_runs,
    show_cartpole_runs,
)
from ppo_viz.why_clip.methods import METHOD_LINES, METHODS
from ppo_viz.why_clip.results import (
    BIGGER_STEPS,
    CLEANRL,
    load_results,
    stored_cartpole_runs,
)

#: Seeds of part A at the start, and how many its button adds.
DEFAULT_SEEDS = 20
MORE_BANDIT_SEEDS = 20
#: How many seeds part B's button trains (each takes seconds).
MORE_CARTPOLE_SEEDS = 2
#: CartPole-v1's reward threshold: a mean return of 475 counts as solved.
SOLVED_RETURN = 475.0
#: The final-score panel: one dot per seed, a bar at the mean.
SEED_DOT = {"ls": "none", "marker": "o", "ms": 3.5, "alpha": 0.55}
MEAN_BAR = {"ls": "none", "marker": "_", "ms": 18, "mew": 2.5}


def show_name(key: str) -> str:
    """The control name of a method's checkbox: ``show_ppo_eps_01`` for ``ppo_eps_0.1``."""
    return "show_" + key.replace(".", "")


def method_boxes(keys: Sequence[str], prefix: str = "") -> dict[str, widgets.Checkbox]:
    """One checkbox per method, named ``<prefix>show_<method>``."""
    boxes = {}
    for key in keys:
        box = checkbox(METHODS[key].label, True)
        box.layout = widgets.Layout(width="auto", margin="0 14px 0 0")
        boxes[prefix + show_name(key)] = box
    return boxes


class SeedsButton:
    """A button that adds seeds, with a progress bar that counts the work as it is done."""

    def __init__(self, description: str, on_click: Callable[[], None]) -> None:
        self.button = widgets.Button(
            description=description, icon="plus", layout=control_layout()["layout"]
        )
        self.button.add_class("ppo-more-seeds")
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="progress")
        self.progress.layout.visibility = "hidden"
        self.button.on_click(lambda _button: on_click())
        self.widget = widgets.HBox([self.button, self.progress])

    def start(self, total: int) -> None:
        self.button.disabled = True
        self.progress.max, self.progress.value = max(1, total), 0
        self.progress.layout.visibility = "visible"

    def advance(self) -> None:
        self.progress.value += 1

    def finish(self) -> None:
        self.button.disabled = False
        self.progress.layout.visibility = "hidden"


def method_cell(key: str) -> Markup:
    return tag("span", METHODS[key].label, classes="ppo-strong")


class BanditLoopExplorer(LiveFigure):
    """Part A: six methods over many seeds; controls for K, step size, batch size, iterations."""

    def __init__(self, settings: BanditLoopSettings | None = None, seeds: int = DEFAULT_SEEDS):
        settings = BanditLoopSettings() if settings is None else settings
        if not isinstance(settings, BanditLoopSettings):
            raise TypeError(f"settings must be BanditLoopSettings, got {type(settings).__name__}")
        self.seed_count = int(checked_number("seeds", seeds, (1, 1000), whole=True))
        self.arm_means = settings.arm_means
        self._runs: dict[tuple[BanditLoopSettings, int], dict[str, BanditLoopHistory]] = {}
        self._drawn: Any = None
        words = {
            "epochs": "K (epochs per batch)",
            "step_size": "step size",
            "batch_size": "batch size (pulls)",
            "iterations": "iterations",
        }
        controls: dict[str, widgets.Widget] = {}
        for name, description in words.items():
            low, high, whole = SETTING_RANGES[name]
            step = 1 if whole else 0.05
            controls[name] = slider(
                description,
                getattr(settings, name),
                (low, high),
                step,
                integer=whole,
                continuous_update=False,
            )
        controls |= method_boxes(BANDIT_METHODS)
        with figure_style():
            figure = Figure(figsize=(9.0, 6.6), layout="constrained")
            axes = bandit_axes(figure, self.arm_means)
            self.panels = SpreadPanels(axes[:5], BANDIT_METHODS)
            score, c = axes[5], lambda key: METHOD_LINES[key]["color"]
            self.dots = {k: score.plot([], [], **SEED_DOT, color=c(k))[0] for k in BANDIT_METHODS}
            self.means = {k: score.plot([], [], **MEAN_BAR, color=c(k))[0] for k in BANDIT_METHODS}
            score.set_xticks(
                range(len(BANDIT_METHODS)),
                [METHODS[k].label for k in BANDIT_METHODS],
                rotation=30,
                ha="right",
            )
            score.set_xlim(-0.6, len(BANDIT_METHODS) - 0.4)
            legend(figure, self.panels)
        self.more = SeedsButton(f"run {MORE_BANDIT_SEEDS} more seeds", self.add_seeds)
        boxes = [show_name(key) for key in BANDIT_METHODS]
        super().__init__(
            figure,
            self.update,
            controls,
            moving=[*self.panels.moving, *self.dots.values(), *self.means.values()],
            rows=[["epochs", "step_size"], ["batch_size", "iterations"], boxes[:3], boxes[3:]],
            below=[self.more.widget],
            description="PPO's loop on a bandit: six methods over many seeds",
        )

    @property
    def settings(self) -> BanditLoopSettings:
        """The settings the controls show (:class:`~ppo_viz.app.InputError` if unusable)."""
        values = {name: self.controls[name].value for name in SETTING_RANGES}
        return BanditLoopSettings(**values, arm_means=self.arm_means)

    def runs(self, settings: BanditLoopSettings) -> dict[str, BanditLoopHistory]:
        """Every method at ``settings`` on seeds ``0 .. seed_count - 1`` (cached)."""
        key = (settings, self.seed_count)
        if key not in self._runs:
            with self.busy():  # the six methods take a moment: the old figure dims meanwhile
                self._runs[key] = run_bandit_methods(settings, tuple(range(self.seed_count)))
        return self._runs[key]

    def update(self, **values: Any) -> Markup:
        """Draw every method's runs at the controls' settings, showing the ticked methods."""
        runs = self.runs(self.settings)
        if runs is not self._drawn:
            show_bandit_runs(self.panels, runs)
            for position, (key, run) in enumerate(runs.items()):
                jitter = np.linspace(-0.22, 0.22, len(run.seeds)) if len(run.seeds) > 1 else [0.0]
                self.dots[key].set_data(position + np.asarray(jitter), run.score)
                self.means[key].set_data([position], [run.score.mean()])
            self._drawn = runs
        shown = [key for key in BANDIT_METHODS if values[show_name(key)]]
        self.panels.show_only(shown)
        for key in BANDIT_METHODS:
            self.dots[key].set_visible(key in shown)
            self.means[key].set_visible(key in shown)
        return bandit_summary_html(runs)

    def add_seeds(self) -> None:
        """Run :data:`MORE_BANDIT_SEEDS` more seeds of every method, then redraw."""
        settings = self.settings
        runs = self.runs(settings)
        new_seeds = tuple(range(self.seed_count, self.seed_count + MORE_BANDIT_SEEDS))
        self.more.start(len(runs))
        joined = {}
        for key, history in runs.items():
            joined[key] = history.joined(run_bandit_loop(METHODS[key], settings, new_seeds))
            self.more.advance()
        self.seed_count += MORE_BANDIT_SEEDS
        self._runs[(settings, self.seed_count)] = joined
        self.more.finish()
        self.refresh()


def summary_html(runs: Mapping[str, Any], columns: Mapping[str, Any], caption: str) -> Markup:
    """One row per method: its name, then ``cell(run)`` for each column (header: cell)."""
    rows = [
        [method_cell(key), *(cell(run) for cell in columns.values())] for key, run in runs.items()
    ]
    return tag("div", table(["method", *columns], rows, caption=caption), classes="ppo")


def bandit_summary_html(runs: Mapping[str, BanditLoopHistory]) -> Markup:
    """Per method: final score, seeds on a wrong arm, mean KL and mean clip fraction."""
    seeds = len(next(iter(runs.values())).seeds)
    columns = {
        "final score: mean [25th, 75th percentile]": lambda run: (
            f"{rounded(run.score.mean(), 3)} ["
            + ", ".join(rounded(q, 3) for q in np.percentile(run.score, [25, 75]))
            + "]"
        ),
        "seeds on a wrong arm at the end": lambda run: f"{run.collapsed[:, -1].sum()} of {seeds}",
        "… at some iteration": lambda run: f"{run.collapsed.any(axis=1).sum()} of {seeds}",
        "mean KL per iteration": lambda run: rounded(run.approx_kl.mean(), 3),
        "mean clip fraction": lambda run: rounded(run.clip_fraction.mean(), 3),
    }
    caption = f"{seeds} seeds; score 0 = uniform policy, 1 = always the best arm"
    return summary_html(runs, columns, caption)


class CartPoleExplorer(LiveFigure):
    """Part B: the committed CartPole runs of one setting, and a button that trains more."""

    def __init__(self, bigger_steps: bool = True) -> None:
        checked_flag("bigger_steps", bigger_steps)
        results = load_results()
        self.stored = {name: stored_cartpole_runs(results, name) for name in results["cartpole"]}
        self._drawn: Any = None
        bigger, cleanrl = (
            next(iter(self.stored[n].values())).settings for n in (BIGGER_STEPS, CLEANRL)
        )
        switch = checkbox(
            f"{BIGGER_STEPS}: K = {bigger.epochs}, learning rate {bigger.learning_rate:g} "
            f"(off: {CLEANRL}'s K = {cleanrl.epochs}, {cleanrl.learning_rate:g})",
            bigger_steps,
        )
        switch.layout = widgets.Layout(width="auto")
        controls = {"cartpole_bigger_steps": switch, **method_boxes(CARTPOLE_METHODS, "cartpole_")}
        with figure_style():
            figure = Figure(figsize=(9.0, 3.9), layout="constrained")
            self.panels = SpreadPanels(cartpole_axes(figure), CARTPOLE_METHODS)
            legend(figure, self.panels)
        self.more = SeedsButton(f"train {MORE_CARTPOLE_SEEDS} more seeds", self.add_seeds)
        super().__init__(
            figure,
            self.update,
            controls,
            moving=self.panels.moving,
            rows=[["cartpole_bigger_steps"], list(controls)[1:]],
            below=[self.more.widget],
            description="PPO on CartPole in numpy: return, clip fraction and KL over many seeds",
        )

    @property
    def setting(self) -> str:
        """The name of the setting shown."""
        return BIGGER_STEPS if self.controls["cartpole_bigger_steps"].value else CLEANRL

    @property
    def runs(self) -> dict[str, CartPoleRuns]:
        """The runs of the setting shown, by method."""
        return self.stored[self.setting]

    def update(self, cartpole_bigger_steps: bool, **shown: bool) -> Markup:
        """Draw the runs of the chosen setting, showing the ticked methods."""
        if self.runs is not self._drawn:
            show_cartpole_runs(self.panels, self.runs)
            self._drawn = self.runs
        self.panels.show_only(
            [key for key in CARTPOLE_METHODS if shown["cartpole_" + show_name(key)]]
        )
        return cartpole_summary_html(self.setting, self.runs)

    def add_seeds(self) -> None:
        """Train :data:`MORE_CARTPOLE_SEEDS` new seeds of every method here, then redraw."""
        runs, first = self.runs, next(iter(self.runs.values()))
        new_seeds = tuple(range(max(first.seeds) + 1, max(first.seeds) + 1 + MORE_CARTPOLE_SEEDS))
        self.more.start(len(runs) * first.settings.iterations)
        joined = {}
        for key, stored in runs.items():
            fresh = run_cartpole(
                METHODS[key], stored.settings, new_seeds, lambda _d, _t: self.more.advance()
            )
            joined[key] = stored.joined(fresh)
        self.stored[self.setting] = joined
        self.more.finish()
        self.refresh()


def cartpole_summary_html(setting: str, runs: Mapping[str, CartPoleRuns]) -> Markup:
    """Per method: final return and score, seeds solving it, the largest KL, the clip fraction."""
    first = next(iter(runs.values()))
    columns = {
        "final return (last 20 episodes)": lambda run: rounded(run.final_return.mean(), 3),
        "score": lambda run: rounded(run.score.mean(), 2),
        f"seeds solving it (≥ {SOLVED_RETURN:g})": lambda run: (
            f"{(run.final_return >= SOLVED_RETURN).sum()} of {len(run.seeds)}"
        ),
        "largest KL per iteration": lambda run: rounded(np.nanmax(run.approx_kl), 3),
        "mean clip fraction": lambda run: rounded(run.clip_fraction.mean(), 3),
    }
    caption = (
        f"{setting}: {len(first.seeds)} seeds × {first.settings.total_steps:,} steps "
        f"(seeds {first.seeds[0]}–{first.seeds[-1]})"
    )
    return summary_html(runs, columns, caption)
