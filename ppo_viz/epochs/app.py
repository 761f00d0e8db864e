"""The app of notebook 3: controls for the settings over :class:`EpochsFigure` and a table."""

from __future__ import annotations

import math
import numbers
from typing import Any

import ipywidgets as widgets
import traitlets

from ppo_viz.app import App, InputError, control_layout, main_control, slider
from ppo_viz.epochs.figure import EpochsFigure
from ppo_viz.epochs.text import summary_html
from ppo_viz.epochs.training import (
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    DEFAULT_SEED,
    DEFAULT_STEP_SIZE,
    DEFAULT_TARGET_KL,
    EPOCHS_RANGE,
    EPS_RANGE,
    STEP_SIZE_RANGE,
    TARGET_KL_RANGE,
    Run,
    SettingError,
    Settings,
    run_all,
)


class EpochsExplorer(App):
    """Controls for eps, step size, epochs, batch seed and early stop over :class:`EpochsFigure`.

    Every change re-trains the three objectives (cached per settings) and
    updates the figure and the summary table in place.  A setting the app
    cannot use (a batch seed out of range, a NaN set from code) shows a
    message and keeps the last good run on screen.  The constructor's
    arguments are the controls' starting values; values out of range raise
    :class:`SettingError` (a ``ValueError``) naming the argument and its
    range, rather than being clamped by a slider.
    """

    description = "Several epochs of PPO on one batch: three objectives side by side"
    slide_name = "ppo_epochs_on_one_batch"

    def __init__(
        self,
        eps: float = DEFAULT_EPS,
        step_size: float = DEFAULT_STEP_SIZE,
        n_epochs: int = DEFAULT_EPOCHS,
        seed: int = DEFAULT_SEED,
        target_kl: float | None = None,
    ) -> None:
        #: The settings on screen (the last good ones while an entry is bad).
        self.settings = Settings(eps, step_size, n_epochs, seed, target_kl)
        self.eps = slider("ε (clip size)", eps, EPS_RANGE, 0.01, name="eps")
        self.step_size = slider("step size", step_size, STEP_SIZE_RANGE, 0.05, name="step-size")
        self.epochs = slider("epochs", n_epochs, EPOCHS_RANGE, 1, name="epochs", integer=True)
        self.seed = main_control(
            WholeNumberText(
                value=seed,
                description="batch seed",
                continuous_update=False,  # one redraw on Enter, not one per digit typed
                **control_layout(),
            ),
            "seed",
        )
        self.early_stop = main_control(
            widgets.Checkbox(
                value=target_kl is not None,
                description="stop early when k3 KL > target",
                indent=False,
                **control_layout(),
            ),
            "early-stop",
        )
        self.target_kl = main_control(
            widgets.FloatLogSlider(
                value=target_kl or DEFAULT_TARGET_KL,
                base=10,
                min=math.log10(TARGET_KL_RANGE[0]),
                max=math.log10(TARGET_KL_RANGE[1]),
                step=0.05,
                description="target KL",
                readout_format=".3f",
                disabled=target_kl is None,
                **control_layout(),
            ),
            "target-kl",
        )
        # Registered before App's own observer, so the slider is enabled before the redraw.
        self.early_stop.observe(self._enable_target_kl, names="value")
        self.summary = widgets.HTML()
        super().__init__(
            controls=[
                [self.eps, self.step_size],
                [self.epochs, self.seed],
                [self.early_stop, self.target_kl],
            ],
            readouts=[self.summary],
        )

    @property
    def runs(self) -> dict[str, Run]:
        """The three runs on screen."""
        return self.plot.runs

    def make_plot(self, slides: bool) -> EpochsFigure:
        return EpochsFigure(self.settings, slides=slides)

    def draw(self, plot: EpochsFigure) -> None:
        settings = self.settings_from_controls()
        plot.show(run_all(settings), settings.n_epochs)
        self.settings = settings

    def update_readouts(self) -> None:
        self.summary.value = str(summary_html(self.runs))

    def settings_from_controls(self) -> Settings:
        """The controls' values as :class:`Settings`; :class:`InputError` if one is unusable."""
        try:
            return Settings(
                eps=self.eps.value,
                step_size=self.step_size.value,
                n_epochs=self.epochs.value,
                seed=self.seed.value,
                target_kl=self._target_kl() if self.early_stop.value else None,
            )
        except SettingError as error:
            raise InputError(
                f"The {error.setting} {error.problem}. The figure still shows the last valid "
                f"settings. Fix the {error.setting} to apply other changes."
            ) from error

    def _target_kl(self) -> float:
        """The target KL slider's value, its ends read as the range's ends.

        A log slider's end is ``10 ** log10(0.2)``, which is 0.20000000000000004.
        """
        value = self.target_kl.value
        return next(
            (end for end in TARGET_KL_RANGE if math.isclose(value, end, rel_tol=1e-12)), value
        )

    def _enable_target_kl(self, _change: Any = None) -> None:
        self.target_kl.disabled = not self.early_stop.value


class _WholeNumber(traitlets.TraitType):
    """A whole number of any size; anything else is refused at assignment."""

    info_text = "a whole number"

    def validate(self, obj: Any, value: Any) -> int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        self.error(obj, value)


class WholeNumberText(widgets.IntText):
    """An ``IntText`` that refuses, with a ``TraitError`` before anything changes, a non-integer.

    ``IntText`` itself turns 2.5 into 2 and "12" into 12 without a word.  An
    integer of any size is taken: the app says when it is out of range.
    """

    value = _WholeNumber(0, help="Int value").tag(sync=True)
