"""The controls every app uses, laid out alike (:func:`slider`, :func:`selection`,
:func:`checkbox`, :func:`method_boxes`), and the checks of an app's start values
(:func:`checked_number`, :func:`checked_flag`): a slider would silently clamp a start value
out of its range, so a constructor refuses it by name instead.  The figure they drive is
:class:`ppo_viz.app.LiveFigure`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import numpy as np

CONTROL_STYLE = {"description_width": "140px"}
CONTROL_WIDTH = "430px"


def control_layout() -> dict[str, Any]:
    """The ``style`` and ``layout`` keywords every control uses, so they line up."""
    return {"style": CONTROL_STYLE, "layout": widgets.Layout(width=CONTROL_WIDTH)}


def slider(
    description: str,
    value: float,
    bounds: tuple[float, float],
    step: float,
    *,
    integer: bool = False,
    log: bool = False,
    readout_format: str = ".2f",
    **options: Any,
) -> widgets.FloatSlider | widgets.IntSlider | widgets.FloatLogSlider:
    """A slider laid out like every other control, updating while it is dragged; ``log``: one
    whose positions are evenly spaced in log10 (``step`` then is a step of log10)."""
    if not integer:
        options["readout_format"] = readout_format
    kind = widgets.IntSlider if integer else widgets.FloatLogSlider if log else widgets.FloatSlider
    if log:  # a log slider's min and max are exponents of its base, 10
        bounds = tuple(np.log10(bounds))
    low, high = bounds
    options = {**control_layout(), **options}
    return kind(value=value, min=low, max=high, step=step, description=description, **options)


def selection(
    description: str, options: Sequence[float], value: float, *, continuous_update: bool = False
) -> widgets.SelectionSlider:
    """A slider over ``options``, laid out like every other control, that acts when released
    (each position may start a computation), or with ``continuous_update`` at each position a
    drag passes (for positions drawn in well under 150 ms)."""
    return widgets.SelectionSlider(
        options=list(options),
        value=value,
        description=description,
        continuous_update=continuous_update,
        **control_layout(),
    )


def checkbox(description: str, value: bool) -> widgets.Checkbox:
    """A checkbox laid out like every other control."""
    return widgets.Checkbox(value=value, description=description, indent=False, **control_layout())


def method_boxes(
    labels: Mapping[str, str], shown: Iterable[str] | None = None, prefix: str = ""
) -> dict[str, widgets.Checkbox]:
    """One checkbox per method (``labels``: key to label), as wide as its label, ticked if its
    key is in ``shown`` (default: every one), named ``<prefix>show_<key>`` without dots
    (``show_kl_adaptive_001`` for ``kl_adaptive_0.01``): :func:`ticked` reads them."""
    shown, boxes = list(labels if shown is None else shown), {}
    for key, label in labels.items():
        box = checkbox(label, key in shown)
        box.layout = widgets.Layout(width="auto", margin="0 14px 0 0")
        boxes[f"{prefix}show_{key.replace('.', '')}"] = box
    return boxes


def ticked(values: Mapping[str, Any], keys: Iterable[str], prefix: str = "") -> list[str]:
    """The ``keys`` whose checkbox (:func:`method_boxes`) is ticked in ``update``'s values."""
    return [key for key in keys if values[f"{prefix}show_{key.replace('.', '')}"]]


def checked_number(
    name: str, value: object, bounds: tuple[float, float], *, whole: bool = False
) -> float:
    """``value`` if it is a real number within ``bounds``, else an error naming ``name``.

    For an app's constructor: a slider would silently clamp an out-of-range start value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    low, high = bounds
    if not low <= value <= high:  # also refuses NaN
        raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")
    if whole and value != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return value


def checked_flag(name: str, value: object) -> bool:
    """``value`` if it is a bool, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)
