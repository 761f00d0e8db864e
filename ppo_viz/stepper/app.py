"""Notebook 2's app: step through a batch sample by sample, or type your own batch.

:class:`BatchStepper` shows, for the current sample, a card with every
quantity (both log-probabilities, the log-ratio, the ratio, the two
candidate terms of the ``min`` and the one it keeps, whether it is clipped,
with the rule written out in its numbers, its share of the loss and its
gradient entry), the running totals, and the figure with the sample
highlighted.  Below: the two clip fractions and the whole batch as a table
(closed until the reader opens it).  At the last sample the totals are
exactly what :func:`ppo_clip.ppo_clip_loss`, :func:`ppo_clip.clip_fraction`
and :func:`ppo_clip.ppo_clip_grad` return.

Above the stepper, "Your own batch": text fields for the probabilities (or
log-probabilities), the advantages and ``eps``, and three presets.  A batch
that cannot be used, or drawn, is refused with a message next to the
fields before anything on screen changes; the last good batch stays.
"""

from __future__ import annotations

import numbers
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets

from ppo_viz.app import App, Fallback, main_control
from ppo_viz.figure_view import figure_to_png
from ppo_viz.html import join, message, tag
from ppo_viz.numbers import count, exact
from ppo_viz.stepper.batch import PRESETS, StepperBatch, preset_batch
from ppo_viz.stepper.cards import (
    batch_table_html,
    clip_fractions_html,
    fallback_html,
    position_html,
    sample_view_html,
)
from ppo_viz.stepper.entry import (
    EntryError,
    converted_field,
    field_labels,
    numbers_text,
    parse_batch,
)
from ppo_viz.stepper.figure import StepperFigure, figure_limits
from ppo_viz.stepper.readout import (
    RunningTotals,
    SampleReadout,
    running_totals,
    sample_readout,
)

__all__ = ["BatchStepper"]

MODES = ("probabilities", "log-probabilities")


class BatchStepper(App):
    """Step through a batch sample by sample; type your own batch.

    ``batch`` is a :class:`StepperBatch` or the name of a preset (default:
    the worked example).  ``inputs=False`` leaves out the text fields and
    presets.  :attr:`step` is the current sample; :meth:`readout` and
    :meth:`totals` are what the cards show.
    """

    description = "PPO's clipped loss, one sample at a time"
    slide_name = "ppo_stepper"

    def __init__(self, batch: StepperBatch | str | None = None, *, inputs: bool = True) -> None:
        if not isinstance(inputs, bool):
            raise TypeError(f"inputs must be True or False, got {type(inputs).__name__}")
        self.batch = batch = _checked_batch(batch)
        self._quiet = False
        self._converted: dict[str, tuple[str, str]] = {}
        self._build_stepping_controls()
        self._build_entry()
        self.sample_view = widgets.HTML()
        self.sample_view.add_class("ppo-sample-view")
        self.clip_fractions = widgets.HTML()
        self.table = widgets.HTML()
        self.table_box = widgets.Accordion(
            children=[self.table], titles=("The whole batch as a table",), selected_index=None
        )
        self.table_box.observe(self._on_table_box, names="selected_index")
        stepping = widgets.HBox(
            [self.prev_button, self.slider, self.next_button, self.position],
            layout=widgets.Layout(align_items="center"),
        )
        super().__init__(
            controls=[stepping],
            readouts=[self.sample_view],
            above=[self.inputs] if inputs else [],
            below=[self.clip_fractions, self.table_box],
        )
        self._write_fields(batch)

    # -- building -------------------------------------------------------------

    def _build_stepping_controls(self) -> None:
        self.prev_button = widgets.Button(
            description="◀ Previous", layout=widgets.Layout(width="120px")
        )
        self.prev_button.add_class("ppo-prev")
        self.next_button = widgets.Button(
            description="Next ▶", button_style="primary", layout=widgets.Layout(width="120px")
        )
        self.next_button.add_class("ppo-next")
        self.slider = widgets.IntSlider(
            value=0,
            min=0,
            max=self.batch.n - 1,
            description="sample",
            continuous_update=True,
            style={"description_width": "60px"},
            layout=widgets.Layout(width="420px"),
        )
        main_control(self.slider, "sample")
        self.position = widgets.HTML()
        self.prev_button.on_click(lambda _button: self.go(self.step - 1))
        self.next_button.on_click(lambda _button: self.go(self.step + 1))
        self.slider.observe(self._on_sample, names="value")

    def _build_entry(self) -> None:
        """The "Your own batch" box: mode, fields, Load, presets, and its own message line."""
        self.mode = widgets.ToggleButtons(
            options=MODES, value=MODES[0], style={"button_width": "140px"}
        )
        self.new_field = _text_field("π_new")
        self.old_field = _text_field("π_old")
        self.advantages_field = _text_field("A")
        self.eps_field = _text_field("ε", width="200px")
        self.load_button = widgets.Button(
            description="Load batch",
            button_style="primary",
            icon="upload",
            layout=widgets.Layout(width="130px"),
        )
        self.load_button.on_click(lambda _button: self.load())
        self.preset_buttons: dict[str, widgets.Button] = {}
        for name, preset in PRESETS.items():
            button = widgets.Button(
                description=preset.label,
                layout=widgets.Layout(width=f"{40 + 8 * len(preset.label)}px", flex="0 0 auto"),
            )
            button.on_click(lambda _button, name=name: self.load_preset(name))
            self.preset_buttons[name] = button
        #: Messages about the typed batch, next to the fields (they stay while stepping).
        self.entry_message = widgets.HTML(
            layout=widgets.Layout(flex="1 1 260px", min_width="240px")
        )
        self.mode.observe(self._on_mode, names="value")
        intro = tag(
            "div",
            tag("div", "Your own batch", classes="ppo-title"),
            tag(
                "div",
                "One number per sample, separated by commas. Press ",
                tag("b", "Load batch"),
                "; the stepper below then walks through it.",
                classes="ppo-small ppo-muted",
            ),
            classes="ppo",
        )
        presets = widgets.HBox(
            [widgets.HTML(tag("span", "Presets:", classes="ppo")), *self.preset_buttons.values()],
            layout=widgets.Layout(align_items="center"),
        )
        fields = widgets.VBox(
            [
                self.mode,
                self.new_field,
                self.old_field,
                self.advantages_field,
                widgets.HBox([self.eps_field, self.load_button]),
                presets,
            ],
            layout=widgets.Layout(flex="0 0 auto"),
        )
        self.inputs = widgets.VBox(
            [widgets.HTML(intro), widgets.HBox([fields, self.entry_message])],
            layout=widgets.Layout(margin="0 0 6px 0"),
        )
        self.inputs.add_class("ppo-card")

    # -- stepping ---------------------------------------------------------------

    @property
    def step(self) -> int:
        """The index of the current sample."""
        return int(self.slider.value)

    def go(self, step: int) -> None:
        """Show sample ``step`` (clamped to the batch); ``TypeError`` if it is not an integer."""
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"step must be an integer, got {type(step).__name__}")
        self.slider.value = max(0, min(int(step), self.batch.n - 1))

    def readout(self) -> SampleReadout:
        """What the sample card shows for the current sample."""
        return sample_readout(self.batch, self.step)

    def totals(self) -> RunningTotals:
        """The running totals after the current sample."""
        return running_totals(self.batch, self.step)

    @property
    def table_open(self) -> bool:
        """Whether the reader has opened the whole-batch table (it starts closed)."""
        return self.table_box.selected_index is not None

    def _on_table_box(self, _change: Any) -> None:
        """Write the table when it is opened (while it is closed, steps skip it)."""
        if self.table_open:
            self.table.value = batch_table_html(self.batch, self.step)

    def _on_sample(self, _change: Any) -> None:
        if not self._quiet:
            self.redraw()

    @contextmanager
    def _quietly(self) -> Iterator[None]:
        """Change controls without the redraw or field conversion their change would start."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    # -- App --------------------------------------------------------------------

    def make_plot(self, slides: bool) -> StepperFigure:
        return StepperFigure(self.batch, slides=slides)

    def draw(self, plot: StepperFigure) -> None:
        plot.show(self.batch, self.step)

    def update_readouts(self) -> None:
        batch, step = self.batch, self.step
        self.sample_view.value = sample_view_html(batch, step)
        if self.table_open:
            self.table.value = batch_table_html(batch, step)
        self.clip_fractions.value = clip_fractions_html(batch)
        self.position.value = position_html(batch, step)
        self.prev_button.disabled = step == 0
        self.next_button.disabled = step == batch.n - 1

    def static_fallback(self) -> Fallback:
        """The figure, and a page with the whole-batch table, the totals and both clip fractions."""
        png = self.view.png or figure_to_png(self.plot.figure)
        return Fallback(png=png, html=fallback_html(self.batch, png))

    # -- batches ----------------------------------------------------------------

    @property
    def log_mode(self) -> bool:
        """Whether the first two fields hold log-probabilities."""
        return self.mode.value == MODES[1]

    def load(self) -> bool:
        """Read the fields; show the batch, or say why not and keep the previous batch.

        Everything is checked before anything on screen changes: the entries,
        the module's input checks and the figure's limits.  Returns whether
        the batch was loaded; never raises for bad input.
        """
        try:
            batch = parse_batch(
                self.new_field.value,
                self.old_field.value,
                self.advantages_field.value,
                self.eps_field.value,
                log_mode=self.log_mode,
            )
            figure_limits(batch)
        except (ValueError, TypeError) as error:  # EntryError, or the module's own checks
            self._refuse(str(error).splitlines())
            return False
        self._show_batch(batch)
        self.entry_message.value = message(
            f"Loaded {batch.name}: N = {count(batch.n, 'sample')}, ε = {exact(batch.eps)}. "
            "Step through it with Next ▶.",
            "ok",
        )
        return True

    def load_preset(self, name: str) -> None:
        """Write preset ``name`` into the fields and load it."""
        batch = preset_batch(name)
        self._write_fields(batch)
        self._show_batch(batch)
        self.entry_message.value = message(
            f"Loaded the preset “{PRESETS[name].label}”: N = {batch.n}, ε = {exact(batch.eps)}.",
            "ok",
        )

    def _show_batch(self, batch: StepperBatch) -> None:
        """Swap a checked ``batch`` in at its first sample."""
        self.batch = batch
        with self._quietly():
            self.slider.value = 0
            self.slider.max = batch.n - 1
        self.redraw()

    def _refuse(self, problems: list[str]) -> None:
        """Say why the typed batch was not loaded; the last good batch stays on screen."""
        still = f"Still showing the last batch that loaded ({self.batch.name}, N = {self.batch.n})."
        self.entry_message.value = join(
            [*(message(problem, "error") for problem in problems), message(still, "info")]
        )

    def _write_fields(self, batch: StepperBatch) -> None:
        """Write ``batch`` into the fields exactly, as probabilities when it was typed so."""
        self._converted.clear()
        if self.log_mode or not batch.typed_as_probabilities:
            with self._quietly():
                self.mode.value = MODES[1]
            self._relabel()
            new, old = batch.logp_new, batch.logp_old
        else:
            new, old = batch.prob_new, batch.prob_old
        self.new_field.value = numbers_text(new)
        self.old_field.value = numbers_text(old)
        self.advantages_field.value = numbers_text(batch.advantages)
        self.eps_field.value = exact(batch.eps)

    def _on_mode(self, change: dict[str, Any]) -> None:
        """Rewrite the first two fields in the other form (undone exactly by switching back).

        A log-probability with no faithful probability (``e^-1000`` rounds to
        0) refuses the switch: the fields and the toggle stay as they were.
        """
        if self._quiet:
            return
        to_log = change["new"] == MODES[1]
        fields = {"new": self.new_field, "old": self.old_field}
        try:
            converted = {key: self._converted_text(key, to_log) for key in fields}
        except EntryError as error:
            with self._quietly():
                self.mode.value = change["old"]
            self.entry_message.value = message(
                f"{error} The first two fields stay in log-probabilities.", "error"
            )
            return
        self._relabel()
        left_as_typed = []
        for key, text_field in fields.items():
            if converted[key] is None:
                left_as_typed.append(text_field.description)
            else:
                self._converted[key] = (converted[key], text_field.value)
                text_field.value = converted[key]
        note = ""
        if left_as_typed:
            verb = "was" if len(left_as_typed) == 1 else "were"
            note = (
                f" {' and '.join(left_as_typed)} could not be converted and {verb} left as typed."
            )
        self.entry_message.value = message(
            "The first two fields now hold "
            + ("log-probabilities (each ≤ 0)." if to_log else "probabilities (each in (0, 1]).")
            + note
            + " Press Load batch to use them.",
            "info",
        )

    def _converted_text(self, key: str, to_log: bool) -> str | None:
        """Field ``key`` in the other form: what it held before the last switch, if unedited."""
        text_field = self.new_field if key == "new" else self.old_field
        previous = self._converted.get(key)
        if previous is not None and previous[0] == text_field.value:
            return previous[1]
        return converted_field(text_field.value, to_log, text_field.description)

    def _relabel(self) -> None:
        self.new_field.description, self.old_field.description = field_labels(self.log_mode)


def _checked_batch(batch: object) -> StepperBatch:
    """The constructor's ``batch``: a batch, a preset's name, or None for the worked example."""
    if batch is None:
        return preset_batch("worked example")
    if isinstance(batch, StepperBatch):
        return batch
    if not isinstance(batch, str):
        raise TypeError(
            f"batch must be a StepperBatch, a preset's name or None, got {type(batch).__name__}"
        )
    if batch not in PRESETS:
        raise ValueError(
            f"batch must be one of the presets {list(PRESETS)}, got {reprlib.repr(batch)}"
        )
    return preset_batch(batch)


def _text_field(description: str, width: str = "640px") -> widgets.Text:
    """A field of the "Your own batch" box (read when Load batch is pressed)."""
    return widgets.Text(
        description=description,
        continuous_update=False,
        style={"description_width": "90px"},
        layout=widgets.Layout(width=width),
    )
