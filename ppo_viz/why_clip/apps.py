"""Notebook 4's two apps: PPO's loop on the bandit (part A) and on CartPole (part B).

:class:`BanditLoopExplorer` re-runs every method of part A on the same seeds
whenever K, the step size, the batch size or the number of iterations
changes; :class:`CartPoleExplorer` starts from the committed runs of the
results command and trains more seeds live.  In both, a button adds seeds,
with a progress bar, and checkboxes choose which methods are drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ipywidgets as widgets

from ppo_viz.app import (
    App,
    InputError,
    checked_flag,
    checked_number,
    control_layout,
    main_control,
    slider,
)
from ppo_viz.why_clip.bandit_loop import (
    BANDIT_METHODS,
    SETTING_RANGES,
    BanditLoopHistory,
    BanditLoopSettings,
    run_bandit_loop,
    run_bandit_methods,
)
from ppo_viz.why_clip.cartpole_ppo import CARTPOLE_METHODS, CartPoleRuns, run_cartpole
from ppo_viz.why_clip.figures import BanditLoopFigure, CartPoleFigure
from ppo_viz.why_clip.methods import METHODS
from ppo_viz.why_clip.results import (
    BIGGER_STEPS,
    CARTPOLE_SETTINGS,
    CLEANRL,
    load_results,
    stored_cartpole_runs,
)
from ppo_viz.why_clip.text import bandit_summary_html, cartpole_summary_html

#: Seeds of part A at the start, and how many the button adds.
DEFAULT_SEEDS = 20
MORE_BANDIT_SEEDS = 20
#: How many seeds part B's button trains (each takes seconds).
MORE_CARTPOLE_SEEDS = 2


def method_checkboxes(keys: Sequence[str], prefix: str) -> dict[str, widgets.Checkbox]:
    """One checkbox per method, each a main control named ``<prefix>show-<method>``."""
    boxes = {}
    for key in keys:
        box = widgets.Checkbox(
            value=True,
            description=METHODS[key].label,
            indent=False,
            layout=widgets.Layout(width="auto", margin="0 14px 0 0"),
        )
        boxes[key] = main_control(box, f"{prefix}show-{key.replace('_', '-').replace('.', '')}")
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


class BanditLoopExplorer(App):
    """Part A: six methods over many seeds; controls for K, step size, batch size, iterations."""

    description = "PPO's loop on a bandit: six methods over many seeds"
    slide_name = "ppo_why_clip_bandit"

    def __init__(self, settings: BanditLoopSettings | None = None, seeds: int = DEFAULT_SEEDS):
        settings = BanditLoopSettings() if settings is None else settings
        if not isinstance(settings, BanditLoopSettings):
            raise TypeError(f"settings must be BanditLoopSettings, got {type(settings).__name__}")
        self.seed_count = int(checked_number("seeds", seeds, (1, 1000), whole=True))
        self.epochs = self._slider("K (epochs per batch)", "epochs", settings.epochs, 1)
        self.step_size = self._slider("step size", "step-size", settings.step_size, 0.05)
        self.batch_size = self._slider("batch size (pulls)", "batch-size", settings.batch_size, 1)
        self.iterations = self._slider("iterations", "iterations", settings.iterations, 1)
        self.shown = method_checkboxes(BANDIT_METHODS, "")
        self.more = SeedsButton(f"run {MORE_BANDIT_SEEDS} more seeds", self.add_seeds)
        self.summary = widgets.HTML()
        self._runs: dict[tuple[BanditLoopSettings, int], dict[str, BanditLoopHistory]] = {}
        super().__init__(
            controls=[
                [self.epochs, self.step_size],
                [self.batch_size, self.iterations],
                list(self.shown.values()),
            ],
            readouts=[self.summary],
            below=[self.more.widget],
        )

    @staticmethod
    def _slider(description: str, name: str, value: float, step: float) -> widgets.Widget:
        low, high, whole = SETTING_RANGES[name.replace("-", "_")]
        control = slider(description, value, (low, high), step, name=name, integer=whole)
        control.continuous_update = False  # each change re-runs every method: once, on release
        return control

    @property
    def settings(self) -> BanditLoopSettings:
        """The settings the controls show (:class:`InputError` if one cannot be used)."""
        return BanditLoopSettings(
            epochs=self.epochs.value,
            step_size=self.step_size.value,
            batch_size=self.batch_size.value,
            iterations=self.iterations.value,
        )

    def runs(self, settings: BanditLoopSettings) -> dict[str, BanditLoopHistory]:
        """Every method at ``settings`` on seeds ``0 .. seed_count - 1`` (cached)."""
        key = (settings, self.seed_count)
        if key not in self._runs:
            self.view.show_busy()  # the six methods take a moment: dim the old figure meanwhile
            self._runs[key] = run_bandit_methods(settings, tuple(range(self.seed_count)))
        return self._runs[key]

    def make_plot(self, slides: bool) -> BanditLoopFigure:
        return BanditLoopFigure(BANDIT_METHODS, slides=slides)

    def draw(self, plot: BanditLoopFigure) -> None:
        runs = self.runs(self.settings)
        plot.update(runs, [key for key, box in self.shown.items() if box.value])

    def update_readouts(self) -> None:
        self.summary.value = bandit_summary_html(self.runs(self.settings))

    def add_seeds(self) -> None:
        """Run :data:`MORE_BANDIT_SEEDS` more seeds at the current settings and redraw."""
        try:
            settings = self.settings
        except InputError as error:
            self.show_message(str(error))
            return
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
        self.redraw()


class CartPoleExplorer(App):
    """Part B: the committed CartPole runs of one setting, and a button that trains more."""

    description = "PPO on CartPole in numpy: return, clip fraction and KL over many seeds"
    slide_name = "ppo_why_clip_cartpole"

    def __init__(self, bigger_steps: bool = True) -> None:
        checked_flag("bigger_steps", bigger_steps)
        results = load_results()
        self.stored = {name: stored_cartpole_runs(results, name) for name in CARTPOLE_SETTINGS}
        bigger, cleanrl = CARTPOLE_SETTINGS[BIGGER_STEPS], CARTPOLE_SETTINGS[CLEANRL]
        self.bigger_steps = main_control(
            widgets.Checkbox(
                value=bigger_steps,
                description=(
                    f"{BIGGER_STEPS}: K = {bigger.epochs}, learning rate {bigger.learning_rate:g} "
                    f"(off: {CLEANRL}'s K = {cleanrl.epochs}, {cleanrl.learning_rate:g})"
                ),
                indent=False,
                layout=widgets.Layout(width="auto"),
            ),
            "cartpole-bigger-steps",
        )
        self.shown = method_checkboxes(CARTPOLE_METHODS, "cartpole-")
        self.more = SeedsButton(f"train {MORE_CARTPOLE_SEEDS} more seeds", self.add_seeds)
        self.summary = widgets.HTML()
        super().__init__(
            controls=[self.bigger_steps, list(self.shown.values())],
            readouts=[self.summary],
            below=[self.more.widget],
        )

    @property
    def setting(self) -> str:
        """The name of the setting shown."""
        return BIGGER_STEPS if self.bigger_steps.value else CLEANRL

    @property
    def runs(self) -> dict[str, CartPoleRuns]:
        """The runs of the chosen setting, by method."""
        return self.stored[self.setting]

    def make_plot(self, slides: bool) -> CartPoleFigure:
        return CartPoleFigure(CARTPOLE_METHODS, slides=slides)

    def draw(self, plot: CartPoleFigure) -> None:
        plot.update(self.runs, [key for key, box in self.shown.items() if box.value])

    def update_readouts(self) -> None:
        self.summary.value = cartpole_summary_html(self.setting, self.runs)

    def add_seeds(self) -> None:
        """Train :data:`MORE_CARTPOLE_SEEDS` new seeds of every method here, then redraw."""
        runs = self.runs
        first = next(iter(runs.values()))
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
        self.redraw()
