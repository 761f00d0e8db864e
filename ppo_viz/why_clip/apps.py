"""Notebook 4's three apps: the range figure, the bandit's loop and CartPole's curves.

* :class:`RangeExplorer`: the committed score-against-step-size figure (:func:`.range_figure`)
  with a button that re-runs the bandit's sweep on fresh seeds, live, and marks the result;
* :class:`BanditLoopExplorer`: the six main methods on the bandit over many seeds, run live
  whenever K, the step size, the batch size or the number of iterations changes (every
  setting one slider's move away is run ahead, so that once the look-ahead has caught up, in
  seconds (a minute at the largest settings), a slider released anywhere only draws); a
  button adds seeds;
* :class:`CartPoleExplorer`: the committed CartPole curves of one cell of the study, on either
  seed set.

Checkboxes choose the methods drawn; the readout above each figure is a table of numbers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import replace
from queue import SimpleQueue
from typing import Any

import ipywidgets as widgets
import numpy as np

from bandit_loop import STEP_SIZES, BanditLoopHistory, BanditLoopSettings, run_side_by_side
from ppo_viz.app import LiveFigure
from ppo_viz.controls import checked_number, control_layout, method_boxes, selection, ticked
from ppo_viz.html import Markup, table, tag
from ppo_viz.numbers import rounded
from ppo_viz.why_clip import figures
from ppo_viz.why_clip.methods import MAIN_METHODS, METHOD_LINES, METHODS, run_bandit_methods
from ppo_viz.why_clip.results import (
    bandit_note,
    cell_at,
    difference,
    load_results,
    one_set,
    seeds_text,
    stable_text,
    step_text,
)

#: Seeds of the bandit app at the start, and how many its button adds.
DEFAULT_SEEDS = 20
MORE_BANDIT_SEEDS = 20
#: The range figure's button: how many fresh seeds each press runs, and the first of them
#: (far from the committed seeds and from a ``--seed-offset 100`` re-run).
FRESH_SEEDS = 20
FRESH_OFFSET = 10_000
FRESH_MARK = {"ls": "none", "marker": "D", "ms": 6, "mfc": "white", "mew": 1.6, "zorder": 5}
#: The values each of the bandit app's sliders offers: few enough (30 settings one move
#: away from any) that the app runs them all ahead (:class:`LookAhead`).
CHOICES = {
    "epochs": (1, 2, 3, 4, 5, 10, 15, 20, 30, 40),
    "step_size": STEP_SIZES,
    "batch_size": (2, 4, 8, 16, 32, 64, 128),
    "iterations": (5, 10, 20, 30, 50, 75, 100),
}


class LookAhead(Executor):
    """One daemon thread (a kernel's exit or restart does not wait for it) that runs the bandit
    loop explorers' runs one at a time (a cell's bandit runs still run beside it).  After
    :meth:`cancel_all`, every job submitted before it, whichever app submitted it, sees
    :meth:`gave_way` answer True: a run not started is skipped, the one under way stops."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue = SimpleQueue()
        self._generation = self._running = 0  # of the last cancel_all; of the job under way
        self._worker = threading.Thread(target=self._work, name="ppo-look-ahead", daemon=True)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        if self._worker.ident is None:  # started by the first job: importing starts no thread
            self._worker.start()
        future: Future = Future()
        self._jobs.put((self._generation, future, fn, args, kwargs))
        return future

    def cancel_all(self) -> None:
        self._generation += 1

    def gave_way(self) -> bool:
        """Whether :meth:`cancel_all` followed this job's submission."""
        return self._running != self._generation

    def _work(self) -> None:
        while True:
            self._running, future, fn, args, kwargs = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:  # the waiting thread gets it
                    future.set_exception(error)


LOOK_AHEAD = LookAhead()


class SeedsButton:
    """A button that runs more seeds, with a progress bar that counts the work as it is done."""

    def __init__(self, description: str, on_click: Callable[[], None]) -> None:
        self.button = widgets.Button(
            description=description, icon="plus", layout=control_layout()["layout"]
        )
        self.button.add_class("ppo-more-seeds")
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="progress")
        self.progress.layout.visibility = "hidden"
        self.button.on_click(lambda _button: on_click())
        self.widget = widgets.HBox([self.button, self.progress])

    @contextmanager
    def running(self, total: int) -> Iterator[None]:
        """The button off and the bar shown (``progress.value += 1`` per unit of work) while
        the work runs."""
        self.button.disabled = True
        self.progress.max, self.progress.value = max(1, total), 0
        self.progress.layout.visibility = "visible"
        try:
            yield
        finally:
            self.button.disabled = False
            self.progress.layout.visibility = "hidden"


def summary_html(runs: Mapping[str, Any], columns: Mapping[str, Any], caption: str) -> Markup:
    """One row per method: its name, then ``cell(run)`` for each column (header: cell)."""
    rows = [
        [tag("span", METHODS[key].label, classes="ppo-strong"), *(c(run) for c in columns.values())]
        for key, run in runs.items()
    ]
    return tag("div", table(["method", *columns], rows, caption=caption), classes="ppo")


class RangeExplorer(LiveFigure):
    """The committed range figure (``panels``: sweeps and methods); with the bandit's panel, a
    button re-runs the bandit's sweep on fresh seeds."""

    description = "Final score against step size, per method, over many seeds"

    def __init__(
        self,
        results: Mapping[str, Any] | None = None,
        panels: Sequence[tuple[str, Sequence[str]]] = figures.HEADLINE,
        prefix: str = "range_",
    ) -> None:
        self.results = load_results() if results is None else results
        self.panels, self.prefix = tuple(panels), prefix
        self.methods = [k for k in MAIN_METHODS if any(k in methods for _, methods in panels)]
        names = [name for name, _ in panels]
        self.sweep = self.results["sweeps"]["bandit"] if "bandit" in names else None
        #: Per method, per step size: the final scores of the fresh seeds run so far.
        self.fresh: dict[str, np.ndarray] = {}
        self.next_seed = FRESH_OFFSET
        figure = figures.range_figure(self.results, panels)
        found = figure.findobj(lambda artist: artist.get_gid() in self.methods)  # drawn per method
        self.artists = {key: [a for a in found if a.get_gid() == key] for key in self.methods}
        self.marks: dict[str, Any] = {}
        below = []
        if self.sweep is not None:
            top = figure.axes[2 * names.index("bandit")]  # each panel: its scores, its strip
            self.marks = {
                key: top.plot([], [], **FRESH_MARK, color=METHOD_LINES[key]["color"])[0]
                for key in self.methods
            }
            self.more = SeedsButton(
                f"re-run on {FRESH_SEEDS} fresh seeds", self.in_turn(self.run_fresh_seeds)
            )
            below.append(self.more.widget)
        boxes = method_boxes({k: METHODS[k].label for k in self.methods}, prefix=prefix)
        moving = [a for artists in self.artists.values() for a in artists]
        super().__init__(
            figure,
            self.update,
            boxes,
            moving=[*moving, *self.marks.values()],
            rows=[list(boxes)[:3], list(boxes)[3:]] if len(boxes) > 3 else [list(boxes)],
            below=below,
        )

    def update(self, **values: bool) -> Markup:
        """Show the ticked methods; the readout: each panel's stable ranges on each seed set, on
        the fresh seeds (the study's bandit) once the button ran, and if today's bandit differs."""
        shown = ticked(values, self.methods, self.prefix)
        for key in self.methods:
            marks = [self.marks[key]] if key in self.marks else []
            for artist in (*self.artists[key], *marks):
                artist.set_visible(key in shown)
        columns = {}
        for name, _ in self.panels:
            sweep = self.results["sweeps"][name]
            for seed_set in sweep["sets"]:
                heading = f"{sweep['title']}: {seed_set} {seeds_text(sweep, seed_set)}"
                columns[heading] = lambda key, n=name, s=seed_set: stable_text(
                    self.stable(key, n, s)
                )
        share = f"{self.results['stable_share']:.0%}"
        caption = f"Step sizes where ≥ {share} of the seeds succeed"
        if self.fresh:
            fresh = f"fresh seeds {FRESH_OFFSET}–{self.next_seed - 1}"
            columns[f"bandit: {fresh}"] = lambda key: stable_text(self.stable(key, "bandit"))
            caption += f"; diamonds: the mean score on {fresh}"
        if self.sweep is not None and (note := bandit_note(self.results)):  # never mixed silently
            caption += f"; {note}: fresh seeds run the study's bandit, the apps below today's"
        return summary_html({key: key for key in shown}, columns, caption)

    def stable(self, key: str, name: str, seed_set: str = "fresh") -> list[float] | None:
        """A method's stable range in a sweep on a committed seed set, or on the fresh seeds."""
        sweep = self.results["sweeps"][name]
        if seed_set != "fresh":
            entry = sweep["sets"][seed_set]["methods"].get(key)
            return None if entry is None else entry["stable"]
        shares = np.mean(self.fresh[key] >= sweep["success_score"], axis=1)
        stable = np.array(sweep["values"])[shares >= self.results["stable_share"]]
        return [stable.min(), stable.max()] if stable.size else None

    def run_fresh_seeds(self) -> None:
        """Run the bandit's sweep for every main method on the next :data:`FRESH_SEEDS` seeds
        (joined to the fresh seeds run before), then mark their mean scores."""
        seeds = tuple(range(self.next_seed, self.next_seed + FRESH_SEEDS))
        base = BanditLoopSettings(**self.sweep["settings"])  # the study's bandit, not today's
        scores: dict[str, list[np.ndarray]] = {key: [] for key in self.methods}
        with self.more.running(len(self.sweep["values"])):
            for value in self.sweep["values"]:
                runs = run_bandit_methods(
                    replace(base, step_size=value), seeds, tuple(self.methods)
                )
                for key, run in runs.items():
                    scores[key].append(run.score)
                self.more.progress.value += 1
        for key in self.methods:
            new = np.array(scores[key])  # one row per step size, one column per seed
            self.fresh[key] = np.hstack([self.fresh[key], new]) if key in self.fresh else new
            self.marks[key].set_data(self.sweep["values"], self.fresh[key].mean(axis=1))
        self.next_seed += FRESH_SEEDS
        self.refresh()


class BanditLoopExplorer(LiveFigure):
    """The six main methods over many seeds; controls for K, step size, batch size, iterations."""

    description = "PPO's loop on a bandit: six methods over many seeds"

    def __init__(self, settings: BanditLoopSettings | None = None, seeds: int = DEFAULT_SEEDS):
        settings = BanditLoopSettings() if settings is None else settings
        if not isinstance(settings, BanditLoopSettings):
            raise TypeError(f"settings must be BanditLoopSettings, got {type(settings).__name__}")
        for name, values in CHOICES.items():
            if getattr(settings, name) not in values:
                raise ValueError(f"{name} must be one of {values}, got {getattr(settings, name)}")
        self.seed_count = int(checked_number("seeds", seeds, (1, 1000), whole=True))
        self.arm_means = settings.arm_means
        self._runs: dict[tuple[BanditLoopSettings, int], dict[str, BanditLoopHistory]] = {}
        self._drawn: Any = None
        self._shown = (settings, 0)  # the settings and seeds drawn and run ahead of
        words = ("K (epochs per batch)", "step size α", "batch size (pulls)", "iterations")
        controls: dict[str, widgets.Widget] = {
            name: selection(text, values, getattr(settings, name))
            for text, (name, values) in zip(words, CHOICES.items(), strict=True)
        }
        controls |= method_boxes({k: METHODS[k].label for k in MAIN_METHODS})
        names = list(controls)
        self.panels = figures.bandit_panels(self.arm_means)
        self.more = SeedsButton(f"run {MORE_BANDIT_SEEDS} more seeds", self.in_turn(self.add_seeds))
        super().__init__(
            self.panels.figure,
            self.update,
            controls,
            moving=self.panels.moving,
            rows=[["epochs", "step_size"], ["batch_size", "iterations"], names[4:7], names[7:]],
            below=[self.more.widget],
        )

    @property
    def settings(self) -> BanditLoopSettings:
        """The settings the controls show (every position of a control is in range)."""
        values = {name: self.controls[name].value for name in CHOICES}
        return BanditLoopSettings(**values, arm_means=self.arm_means)

    def runs(self, settings: BanditLoopSettings) -> dict[str, BanditLoopHistory]:
        """Every main method at ``settings`` on seeds ``0 .. seed_count - 1`` (cached)."""
        key = (settings, self.seed_count)
        if key not in self._runs:
            with self.busy():  # the six methods take a moment: the old figure dims meanwhile
                self._runs[key] = run_bandit_methods(settings, tuple(range(self.seed_count)))
        return self._runs[key]

    def update(self, **values: Any) -> Markup:
        """Draw every method's runs at the controls' settings, showing the ticked methods."""
        settings = self.settings
        runs = self.runs(settings)
        if runs is not self._drawn:
            iterations_before = self.panels.axes[0].get_xlim()
            figures.show_bandit_runs(self.panels, runs)
            self._drawn = runs
            if self.panels.axes[0].get_xlim() != iterations_before:
                self.redraw_axes(*self.panels.axes)  # not the legend
        self.panels.show_only(ticked(values, MAIN_METHODS))
        return bandit_summary_html(runs)

    def refresh(self) -> bool:
        """Draw the controls' settings; if they or the seeds changed, run ahead of them once
        the figure drew (in a kernel, the drawing waits for the event loop's next turn).  The
        look-ahead gives way to the run they need (``gave_way``)."""
        before, now = self._shown, (self.settings, self.seed_count)
        if now != before:
            LOOK_AHEAD.cancel_all()
        drawn = super().refresh()
        if drawn and now != before:
            self._shown = now
            try:
                asyncio.get_running_loop().call_soon(self.run_ahead, before[0], now[0])
            except RuntimeError:  # a script, a test: the figure drew already
                self.run_ahead(before[0], now[0])
        return drawn

    def run_ahead(self, before: BanditLoopSettings, now: BanditLoopSettings) -> None:
        """Run, in :data:`LOOK_AHEAD`'s thread, every setting one slider's move away from
        ``now`` that is not run yet: first along the slider just moved (from ``before``), then
        along the others, nearest first.  Runs not started yet give way to these; runs no
        slider reaches from ``now`` are let go."""
        moved = [name for name in CHOICES if getattr(now, name) != getattr(before, name)]
        moves = []  # (not the slider moved, how far, name, value)
        for name, values in CHOICES.items():
            here = values.index(getattr(now, name))
            moves += [(name not in moved, abs(i - here), name, v) for i, v in enumerate(values)]
        ahead = [replace(now, **{n: v}) for _, distance, n, v in sorted(moves) if distance > 0]
        keys = [(settings, self.seed_count) for settings in [now, *ahead]]
        for key in set(list(self._runs)) - set(keys):  # in place: the thread may add one
            del self._runs[key]
        for key in keys[1:]:
            LOOK_AHEAD.submit(self.run_one, key)

    def run_one(self, key: tuple[BanditLoopSettings, int]) -> None:
        """Run one setting on seeds ``0 .. key[1] - 1`` unless it is run already or the
        look-ahead gave way (then it stops, see :class:`LookAhead`)."""
        if key not in self._runs and not LOOK_AHEAD.gave_way():
            methods = [METHODS[k] for k in MAIN_METHODS]
            runs = run_side_by_side(methods, key[0], tuple(range(key[1])), LOOK_AHEAD.gave_way)
            if not LOOK_AHEAD.gave_way():  # in its last iteration at a new plan: out of reach
                self._runs[key] = dict(zip(MAIN_METHODS, runs, strict=True))

    def add_seeds(self) -> None:
        """Run :data:`MORE_BANDIT_SEEDS` more seeds of every method, then redraw (all the
        seeds are run again: a seed's numbers do not depend on the seeds beside it)."""
        with self.more.running(1):
            self.seed_count += MORE_BANDIT_SEEDS
            self.refresh()
            self.more.progress.value += 1


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
        "mean KL per iteration": lambda run: rounded(run.approx_kl.mean(), 3),
        "mean clip fraction": lambda run: rounded(run.clip_fraction.mean(), 3),
    }
    caption = f"{seeds} seeds; score 0 = uniform policy, 1 = always the best arm"
    return summary_html(runs, columns, caption)


class CartPoleExplorer(LiveFigure):
    """The committed CartPole curves of one cell of the study (epochs, learning rate and seed
    set)."""

    description = "PPO on CartPole in numpy: return, clip fraction and KL over many seeds"

    def __init__(self, results: Mapping[str, Any] | None = None) -> None:
        self.results = load_results() if results is None else results
        sweeps = [
            (name, sweep)
            for name, sweep in self.results["sweeps"].items()
            if sweep["task"] == "cartpole"
        ]
        sweeps.sort(key=lambda item: item[1]["settings"]["epochs"] != 4)  # CleanRL's K first
        self.cells = {
            f"K = {sweep['settings']['epochs']}, learning rate {step_text(value)}": (name, value)
            for name, sweep in sweeps
            for value in sweep["values"]
        }
        first = sweeps[0][1]
        scale = first["scale"]
        choice = widgets.Dropdown(options=list(self.cells), description="cell", **control_layout())
        sets = widgets.Dropdown(options=[*first["sets"]], description="seeds", **control_layout())
        controls = {
            "cartpole_cell": choice,
            "cartpole_seeds": sets,
            **method_boxes({k: METHODS[k].label for k in MAIN_METHODS}, prefix="cartpole_"),
        }
        self.panels = figures.cartpole_panels(scale["random_return"], scale["episodes"])
        self._drawn: Any = None
        boxes = list(controls)[2:]
        super().__init__(
            self.panels.figure,
            self.update,
            controls,
            moving=self.panels.moving,
            rows=[["cartpole_cell", "cartpole_seeds"], boxes[:3], boxes[3:]],
        )

    def update(self, cartpole_cell: str, cartpole_seeds: str, **shown: bool) -> Markup:
        """Draw the chosen cell's curves on the chosen seed set, showing the ticked methods
        that ran there."""
        name, value = self.cells[cartpole_cell]
        sweep = one_set(self.results, cartpole_seeds)["sweeps"][name]
        cells = {key: cell_at(sweep, key, value) for key in sweep["methods"]}
        if self._drawn != (cartpole_cell, cartpole_seeds):
            steps = np.array(sweep["scale"]["curve_steps"], dtype=float)
            curves = {key: cell["curves"] for key, cell in cells.items()}
            figures.show_cartpole_curves(self.panels, steps, curves)
            self._drawn = (cartpole_cell, cartpole_seeds)
        chosen = ticked(shown, MAIN_METHODS, "cartpole_")
        self.panels.show_only([k for k in chosen if k in cells])
        solved, seeds = sweep["scale"]["solved_return"], sweep["seeds"]
        columns = {
            "final return (mean)": lambda c: rounded(np.mean(c["final_return"]), 3),
            f"seeds ≥ {solved:g}": lambda c: f"{c['solved']} of {seeds}",
            "seeds below random": lambda c: f"{c['collapsed']} of {seeds}",
            "score minus PPO's, seed by seed": lambda c: (
                difference(c["vs_ppo"]) if "vs_ppo" in c else "–"
            ),
            "mean clip fraction": lambda c: rounded(c["clip_fraction"], 2),
        }
        where = f"{cartpole_seeds} set, {seeds_text(self.results['sweeps'][name], cartpole_seeds)}"
        caption = (
            f"CartPole, {cartpole_cell}, {where}; n.d.: not distinguishable with {seeds} seeds"
        )
        return summary_html(cells, columns, caption)
