"""Notebook 2's figure and app: step through a batch sample by sample, or type your own.

:class:`StepperFigure` is notebook 1's panels with the current sample marked;
:class:`BatchStepper` is the :class:`~ppo_viz.app.LiveFigure` around it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist

import ppo_clip
from ppo_viz.app import LiveFigure
from ppo_viz.controls import checked_flag
from ppo_viz.html import Markup, join, message, tag
from ppo_viz.numbers import exact, exact_or_approx
from ppo_viz.panels import R_AXIS, legend_entries, objective_figure, set_fixed_limits
from ppo_viz.stepper import batch as model
from ppo_viz.stepper import text
from ppo_viz.stepper.batch import PRESETS, EntryError, StepperBatch
from ppo_viz.style import COLORS, PALETTE, figure_style, legend_below

#: The figure's size in inches: it fits JupyterLab's output area (at most 9 wide).
FIGURE_SIZE = (9.0, 6.4)
#: The ratio axis is ``R_AXIS``, widened for larger ratios up to this end.
R_AXIS_CAP = 6.0
#: Above this many samples in a column, its y limits fit 95 % of them (the rest are pinned).
ROBUST_LIMITS_FROM = 20
#: Room on the other side of zero, as a share of an axis' reach (room for the pinned markers).
LIMIT_MARGIN = 0.115
MODES = ("probabilities", "log-probabilities")


def figure_limits(batch: StepperBatch) -> tuple[float, dict[int, float]]:
    """The ratio axis' end and, per advantage sign, the y axes' reach for ``batch`` (for
    :func:`ppo_viz.panels.set_fixed_limits`, with :data:`LIMIT_MARGIN`).  Values off the axes
    (beyond the cap, or in the top 5 % of a large batch) are drawn pinned to the edge."""
    b = batch.breakdown
    finite = b.ratio[np.isfinite(b.ratio)]
    r_end = min(max(R_AXIS[1], math.ceil(finite.max(initial=1.0) * 2.2) / 2), R_AXIS_CAP)
    reaches = {}
    for sign in (+1, -1):
        chosen = np.sign(b.advantages) == sign
        with np.errstate(over="ignore"):  # an overflow gives inf, capped below
            reach = np.abs(b.advantages[chosen]) * np.clip(b.ratio[chosen], b.upper, r_end)
        many = reach.size > ROBUST_LIMITS_FROM
        top = float(np.quantile(reach, 0.95) if many else reach.max(initial=b.upper))
        top = min(top, R_AXIS_CAP * model.MAX_ABS_ADVANTAGE)
        reaches[sign] = 1.22 * top
    return r_end, reaches


class StepperFigure:
    """The two columns of panels with the current sample marked; :meth:`show` moves them."""

    def __init__(self) -> None:
        with figure_style():
            self.figure, self.columns = objective_figure(FIGURE_SIZE)
            self.marks = {sign: self._marks(sign) for sign in self.columns}
            for panel in self.columns.values():
                panel.objective_ax.set_title(" ", fontsize="medium")
                for line in panel.samples:
                    line.set_alpha(0.6)
            self.headline = self.figure.suptitle(" ", fontweight="bold")
            # Six entries, for a projector: the objectives (a diamond marks the current sample's
            # value on each candidate), the band and the points; the hatch is notebook 1's.
            handles, _ = legend_entries(self.columns[+1])
            handles = [*handles[:4], self.marks[+1]["point"], handles[5]]
            labels = [
                "PPO: min(r·A, clip(r)·A)",
                "unclipped r·A (◇ this sample's)",
                "clip-only (◇ this sample's)",
                "clip band",
                "this sample (its kept term)",
                "the other samples",
            ]
            legend_below(self.figure, handles=handles, labels=labels)
        self.batch: StepperBatch | None = None
        #: Every artist :meth:`show` changes.
        self.moving: list[Artist] = [self.headline]
        for sign, panel in self.columns.items():
            self.moving += [*panel.moving, panel.objective_ax.title, *self.marks[sign].values()]

    def _marks(self, sign: int) -> dict[str, Artist]:
        """The current sample's artists in one column, empty until :meth:`show`."""
        top, bottom = self.columns[sign].objective_ax, self.columns[sign].gradient_ax
        big = {"ls": "none", "marker": "o", "ms": 14, "mfc": COLORS["current"], "zorder": 8}
        big |= {"mec": PALETTE["black"], "mew": 1.8}
        small = {"ls": "none", "marker": "D", "ms": 7, "mfc": "white", "mew": 1.8, "zorder": 7}
        return {
            "point": top.plot([], [], **big)[0],
            "gradient": bottom.plot([], [], **big)[0],
            "unclipped": top.plot([], [], mec=COLORS["unclipped"], **small)[0],
            "clip_only": top.plot([], [], mec=COLORS["clip_only"], **small)[0],
        }

    def show(self, batch: StepperBatch, step: int) -> None:
        """Draw sample ``step`` of ``batch``; a new batch first sets its axis limits."""
        if batch is not self.batch:
            self.batch, (r_end, reaches) = batch, figure_limits(batch)
            for sign, panel in self.columns.items():
                panel.r_axis = (0.0, r_end)
                axes, reach = (panel.objective_ax, panel.gradient_ax), reaches[sign]
                set_fixed_limits(*axes, sign, reach=reach, r_axis=panel.r_axis, margin=LIMIT_MARGIN)
        b = batch.breakdown
        alone = replace(b, batch_size=1)  # each sample a batch of one, as the curves' points
        for sign, panel in self.columns.items():
            of_sign = np.flatnonzero(np.sign(b.advantages) == sign)
            earlier = of_sign[of_sign <= step]
            owner = int(earlier[-1]) if earlier.size else int(of_sign[0]) if of_sign.size else None
            advantage = float(sign if owner is None else b.advantages[owner])
            drawn = of_sign[np.isfinite(b.ratio[of_sign])]
            panel.update(advantage, batch.eps, alone, drawn)
            edge = f"r > {exact(b.upper)}" if sign > 0 else f"r < {exact(b.lower)}"
            flat = "never clipped: 1 − ε = 0" if sign < 0 and b.lower <= 0 else f"flat where {edge}"
            whose = "this sample" if owner == step else f"sample {owner}"
            if owner is None:
                whose = "no sample has this sign"
            title = f"A {exact_or_approx(advantage)} ({whose}): {flat}"
            panel.objective_ax.title.set_text(title)
            self._mark(sign, alone, step if owner == step else None)
        state = "clipped" if b.is_clipped[step] else "not clipped"
        a, r = exact_or_approx(b.advantages[step]), exact_or_approx(b.ratio[step])
        if b.ratio[step] > self.columns[+1].r_axis[1]:
            r += ", off the axis"
        headline = f"Sample {step}: A {a}, r {r}, {state}"
        if b.advantages[step] == 0:
            headline = f"Sample {step}: A = 0, so it adds 0 to loss and gradient (on neither curve)"
        self.headline.set_text(headline)

    def _mark(self, sign: int, alone: ppo_clip.ClipBreakdown, step: int | None) -> None:
        """Yellow points at (r, kept term) and (r, N = 1 gradient), diamonds at the candidates.

        A value beyond an axis is pinned to its edge with a marker pointing out (^, v, >).
        """
        marks, panel = self.marks[sign], self.columns[sign]
        if step is None:
            for line in marks.values():
                line.set_data([], [])
            return
        r, r_end = float(alone.ratio[step]), panel.r_axis[1]
        x = min(r, r_end)
        for name, value, ax, shape in (
            ("point", alone.objective_term[step], panel.objective_ax, "o"),
            ("gradient", alone.grad[step], panel.gradient_ax, "o"),  # N = 1, as the curve's
            ("unclipped", alone.unclipped_term[step], panel.objective_ax, "D"),
            ("clip_only", alone.clipped_term[step], panel.objective_ax, "D"),
        ):
            low, high = ax.get_ylim()
            marker = "^" if value > high else "v" if value < low else shape
            marks[name].set_data([x], [min(max(value, low), high)])
            marks[name].set_marker(">" if r > r_end and shape == "o" else marker)


class BatchStepper(LiveFigure):
    """Step through a batch sample by sample; type your own batch.

    ``batch`` is a :class:`StepperBatch`, the name of a preset, or None for the worked example;
    ``inputs=False`` leaves out the fields and presets.  :attr:`step` is the sample shown and
    :meth:`go` moves to one; :meth:`load` reads the fields, :meth:`load_preset` fills them.
    """

    description = "PPO's clipped loss, one sample at a time"

    def __init__(self, batch: StepperBatch | str | None = None, *, inputs: bool = True) -> None:
        checked_flag("inputs", inputs)
        batch = model.as_batch(batch)
        self.batch, self.plot = batch, StepperFigure()
        self.slider = widgets.IntSlider(0, min=0, max=batch.n - 1, description="sample")
        self.prev_button = widgets.Button(description="◀ Previous")
        self.next_button = widgets.Button(description="Next ▶", button_style="primary")
        for button, move, css in (
            (self.prev_button, -1, "ppo-prev"),
            (self.next_button, +1, "ppo-next"),
        ):
            button.on_click(self.in_turn(lambda _, move=move: self.go(self.step + move)))
            button.add_class(css)
        self.clip_fractions = widgets.HTML()
        self.inputs = self._entry_box()
        stepping = widgets.HBox([self.prev_button, self.slider, self.next_button])
        above = [self.inputs, stepping] if inputs else [stepping]
        below, controls, moving = [self.clip_fractions], {"sample": self.slider}, self.plot.moving
        super().__init__(
            self.plot.figure, self._show, controls, moving=moving, rows=[], above=above, below=below
        )
        stepping.children += (self.reset_button,)  # back to sample 0
        self.sample_view = self.readout
        self.sample_view.add_class("ppo-sample-view")
        self._write_fields(batch)

    @property
    def step(self) -> int:
        """The index of the sample shown."""
        return int(self.slider.value)

    def go(self, step: int) -> None:
        """Show sample ``step``, clamped to the batch; ``TypeError`` if it is not an integer."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"step must be an integer, got {type(step).__name__}")
        self.slider.value = max(0, min(int(step), self.batch.n - 1))

    def _show(self, sample: int) -> Markup:
        """LiveFigure's update: the figure, the buttons and the sample view at ``sample``."""
        batch = self.batch
        self.plot.show(batch, sample)
        self.clip_fractions.value = text.clip_fractions_html(batch)
        self.prev_button.disabled, self.next_button.disabled = sample == 0, sample == batch.n - 1
        return text.sample_view_html(batch, sample)

    # -- your own batch ---------------------------------------------------------------------

    def _entry_box(self) -> widgets.VBox:
        """The "Your own batch" box: the toggle, four fields, Load, the presets, a message line."""
        self.mode = widgets.ToggleButtons(options=MODES)
        self._on_mode = self.in_turn(self._switch_mode)  # one callable: _set_mode unobserves it
        self.mode.observe(self._on_mode, names="value")
        self.new_field, self.old_field, self.advantages_field, self.eps_field = (
            widgets.Text(description=name, layout=widgets.Layout(width="640px"))
            for name in ("π_new", "π_old", "A", "ε")
        )
        self.load_button = widgets.Button(description="Load batch", button_style="primary")
        self.load_button.on_click(self.in_turn(lambda _: self.load()))
        for field in (self.new_field, self.old_field, self.advantages_field, self.eps_field):
            field.on_msg(self.in_turn(self._on_field_message))  # Enter in a field loads the batch
        wide = widgets.Layout(width="auto")  # a preset's whole label
        self.preset_buttons = {}
        for name, preset in PRESETS.items():
            self.preset_buttons[name] = widgets.Button(description=preset.label, layout=wide)
            self.preset_buttons[name].on_click(
                self.in_turn(lambda _, name=name: self.load_preset(name))
            )
        #: Messages about the typed batch, under the fields (they stay while stepping).
        self.entry_message = widgets.HTML()
        self._before_switch: dict[widgets.Text, tuple[str, str]] = {}
        intro = tag("div", tag("b", "Your own batch"), ": one number per sample.", classes="ppo")
        fields = [self.mode, self.new_field, self.old_field, self.advantages_field, self.eps_field]
        presets = [widgets.Label("Presets:"), *self.preset_buttons.values()]
        buttons = widgets.HBox([self.load_button, *presets])
        box = widgets.VBox([widgets.HTML(intro), *fields, buttons, self.entry_message])
        box.add_class("ppo-card")
        return box

    def _on_field_message(self, _field: widgets.Text, content: dict, _buffers: Any) -> None:
        """A text field's front end sends ``{"event": "submit"}`` when Enter is pressed."""
        if content.get("event") == "submit":
            self.load()

    def load(self) -> bool:
        """Read the fields and walk the batch from its first sample; True if it loaded.

        A batch the stepper cannot use is refused with a message under the fields, before
        anything on screen changes: the last good batch stays.  Never raises.
        """
        fields = (self.new_field, self.old_field, self.advantages_field, self.eps_field)
        log_mode = self.mode.value == MODES[1]
        try:
            batch = model.parse_batch(*(f.value for f in fields), log_mode=log_mode)
        except (ValueError, TypeError) as error:  # EntryError, or the module's own checks
            kept = f"Still showing the last batch that loaded, {self.batch.name}."
            said = [message(line) for line in str(error).splitlines()]
            self.entry_message.value = join([*said, message(kept, "info")])
            return False
        self._walk(batch)
        said = f"Loaded {batch.name}: N = {batch.n}, ε = {exact(batch.eps)}. Step with Next ▶."
        self.entry_message.value = message(said, "ok")
        return True

    def load_preset(self, name: str) -> None:
        """Write preset ``name`` (a key of ``PRESETS``) into the fields and walk it."""
        batch = model.preset_batch(name)
        self._write_fields(batch)
        self._walk(batch)
        said = f"Loaded the preset “{PRESETS[name].label}”: N = {batch.n}, ε = {exact(batch.eps)}."
        self.entry_message.value = message(said, "ok")

    def _walk(self, batch: StepperBatch) -> None:
        """Show a checked ``batch`` from its first sample."""
        self.batch, at_start = batch, self.step == 0
        self.slider.value = 0  # redraws, unless the slider is there already
        self.slider.max = batch.n - 1
        if at_start:
            self.refresh()

    def _write_fields(self, batch: StepperBatch) -> None:
        """Write ``batch`` into the fields exactly as it was typed: probabilities, or logs."""
        self._before_switch.clear()
        typed = batch.prob_new is not None and batch.prob_old is not None
        self._set_mode(MODES[0] if typed else MODES[1])
        self.new_field.value = model.numbers_text(batch.prob_new if typed else batch.logp_new)
        self.old_field.value = model.numbers_text(batch.prob_old if typed else batch.logp_old)
        self.advantages_field.value = model.numbers_text(batch.advantages)
        self.eps_field.value = exact(batch.eps)

    def _set_mode(self, mode: str) -> None:
        """Set the toggle without rewriting the fields, and name the fields for it."""
        self.mode.unobserve(self._on_mode, names="value")
        self.mode.value = mode
        self.mode.observe(self._on_mode, names="value")
        logs = "log " if mode == MODES[1] else ""
        self.new_field.description, self.old_field.description = f"{logs}π_new", f"{logs}π_old"

    def _switch_mode(self, change: dict[str, Any]) -> None:
        """Rewrite the first two fields in the other form; switching back restores them exactly.

        A log-probability whose probability float64 cannot hold refuses the switch: the toggle
        and the fields stay as they were, with a message.
        """
        fields = (self.new_field, self.old_field)
        try:
            texts = [self._other_form(field, to_log=change["new"] == MODES[1]) for field in fields]
        except EntryError as error:
            self._set_mode(change["old"])
            self.entry_message.value = message(f"{error} The fields stay as they were.")
            return
        pairs = list(zip(fields, texts, strict=True))
        left = [field.description for field, rewritten in pairs if rewritten is None]
        self._set_mode(change["new"])
        for field, rewritten in pairs:
            if rewritten is not None:
                self._before_switch[field] = (rewritten, field.value)
                field.value = rewritten
        said = f"The first two fields now hold {change['new']}."
        if left:
            said += f" {' and '.join(left)} could not be converted: left as typed."
        self.entry_message.value = message(said + " Press Load batch to use them.", "info")

    def _other_form(self, field: widgets.Text, to_log: bool) -> str | None:
        """``field`` in the other form: what it held before the last switch, if unedited."""
        before = self._before_switch.get(field)
        if before is not None and before[0] == field.value:
            return before[1]
        return model.converted_field(field.value, to_log, field.description)
