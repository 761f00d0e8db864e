"""Helpers shared by the test files: the contract's numbers as ``docs/contract.md`` states them.

The contract's worked example (sections "ppo_clip" and "What may differ between machines")
gives the loss ``-0.5375000000000001`` and the clip fraction ``0.5`` on every machine tried;
each gradient entry is ``[0, -0.55, 0, 0.1125]`` to within one unit in the last place (ulp),
because numpy's ``exp`` differs in the last bit between CPUs.

Under the simulated other CPU (:mod:`other_cpu`) every ``exp`` *and* ``log`` result moves by one
ulp, which no machine tried does: the ratios then move by up to three ulps, and so may the
loss and the gradient.  The checks below widen to :data:`SIMULATED_ULPS` there.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Sequence

import numpy as np
import other_cpu
import pytest
import reference

import ppo_clip

#: Every ppo_clip function that takes a batch (the three of the contract and the breakdowns).
BATCH_FUNCTIONS = (
    ppo_clip.ppo_clip_loss,
    ppo_clip.clip_fraction,
    ppo_clip.ppo_clip_grad,
    ppo_clip.clip_breakdown,
    ppo_clip.surrogate_loss,
    ppo_clip.surrogate_grad,
)
#: File names and titles a teacher may give (issue 43): (name, title; None: no cell at all).
ANY_NOTEBOOK = [
    ("01_my talk.ipynb", "A talk"),
    ("01_a.ipynb", "Brackets ] and [ too"),
    ("01_a.ipynb", "Q&A: <i>not italic</i>, *not emphasis*"),
    ("01_#1?.ipynb", "Hash and question mark"),
    ("01_50%25 off.ipynb", "Percent"),
    ('01_say "hi".ipynb', "Quotes"),
    ("01_été.ipynb", "Unicode"),
    ("01_untitled.ipynb", None),
    ("01_bad\udcff.ipynb", "Not UTF-8"),  # $'01_bad\xff.ipynb': quote() raised UnicodeEncodeError
]


def file_behind(href: str) -> str:
    """The file name a relative link to an ``ANY_NOTEBOOK`` name opens (%FF: the byte 0xFF)."""
    return urllib.parse.unquote(urllib.parse.urlsplit(href).path, errors="surrogateescape")


CONTRACT_LOSS = -0.5375000000000001
CONTRACT_CLIP_FRACTION = 0.5
CONTRACT_GRAD = (0.0, -0.55, 0.0, 0.1125)
#: How many ulps a value computed through ``exp`` and ``log`` may move under the simulation.
SIMULATED_ULPS = 4


def simulating_another_cpu() -> bool:
    """Whether this session runs under :mod:`other_cpu`'s nudged numpy."""
    return other_cpu.simulated_variant() is not None


def ulps_apart(a: float, b: float) -> float:
    """How many units in the last place of ``b`` separate ``a`` from ``b``."""
    return abs(a - b) / np.spacing(abs(b)) if a != b else 0.0


def assert_contract_loss(loss: float) -> None:
    """The contract's loss: exactly ``-0.5375000000000001`` where sample 1's ratio comes out
    1.1, as on every machine tried (the loss's last digit follows it); else within a few ulps."""
    example = ppo_clip.worked_example()
    if simulating_another_cpu() or np.exp(example.logp_new - example.logp_old)[1] != 1.1:
        assert ulps_apart(loss, CONTRACT_LOSS) <= SIMULATED_ULPS, loss
    else:
        assert loss == CONTRACT_LOSS


def assert_contract_grad(grad: np.ndarray, ulps: int = 1) -> None:
    """The contract's gradient: exact zeros where clipped, each other entry within ``ulps``."""
    grad = np.asarray(grad, dtype=np.float64)
    assert grad.shape == (4,)
    assert grad[0] == 0.0  # clipped: exactly 0 on every machine
    assert grad[2] == 0.0
    allowed = SIMULATED_ULPS if simulating_another_cpu() else ulps
    for got, expected in zip(grad[[1, 3]], CONTRACT_GRAD[1::2], strict=True):
        assert ulps_apart(float(got), expected) <= allowed, (got, expected)


def assert_contract_numbers(loss: float, clip_fraction: float, grad: np.ndarray) -> None:
    """All three contract numbers of the worked example."""
    assert_contract_loss(loss)
    assert clip_fraction == CONTRACT_CLIP_FRACTION
    assert_contract_grad(grad)


def central_difference(loss, array: np.ndarray, index: tuple, step: float = 1e-6) -> float:
    """``loss()``'s slope along ``array[index]`` by central differences (``array`` restored)."""
    original = array[index]
    array[index] = original + step
    up = loss()
    array[index] = original - step
    down = loss()
    array[index] = original
    return (up - down) / (2 * step)


def log_landing_on(ratio: float) -> float:
    """A log-ratio whose ``np.exp`` is exactly ``ratio`` on this machine, next to ``log(ratio)``.

    ``exp(log(1.2)) == 1.2`` holds on the machines tried, but by no rule: another code path
    for ``exp`` or ``log`` may land one ulp away.  The log-ratios within a few ulps of
    ``ratio`` (relative) are searched in steps of a quarter of that, so one of them puts a
    ratio exactly on a band's edge on any machine whose ``exp`` is within an ulp.
    """
    center = math.log(ratio)
    step = max(math.ulp(center), math.ulp(ratio) / ratio / 4)
    for distance in range(64):
        for candidate in (center + distance * step, center - distance * step):
            if np.exp(np.array([candidate]))[0] == ratio:
                return candidate
    raise AssertionError(f"no log-ratio near log({ratio}) lands exactly on {ratio}")


def assert_loss_as_promised(
    loss: float,
    batch: tuple[Sequence[float], Sequence[float], Sequence[float], float],
    samples: list[reference.Sample],
    **variant: float | None,
) -> str:
    """The loss as ppo_clip promises it, on the module's own ratios; returns which case held.

    ``batch`` is ``(logp_new, logp_old, advantages, eps)``; ``samples`` are the reference's
    for it, each made from the module's own ratio, and ``variant`` the clip variant's keywords.

    Where every float64 term and numpy's float64 sum of them are finite, the loss is that sum
    divided by -N, within rounding of the exact loss.  Where float64 overflowed on the way,
    it is the exact loss (:func:`reference.exact_loss`) rounded once, ``+-inf`` beyond
    float64's range.
    """
    n = len(samples)
    terms = np.array([sample.objective_term for sample in samples])
    with np.errstate(all="ignore"):  # the test's own sum: it may overflow, or underflow
        summed = -terms.sum() / n
    exact = reference.exact_loss(*batch, ratios=[sample.ratio for sample in samples], **variant)
    if not math.isfinite(summed):
        assert loss == exact, (loss, exact)
        return "float64 overflowed: the exact loss"
    assert loss == summed + 0.0
    magnitude = math.fsum(abs(term) / n for term in terms.tolist())
    # each term and the sum round (by at most N + 2 units of 2**-53 of the magnitude), and
    # a product in the subnormal range may lose up to the smallest float64
    tolerance = (n + 2) * 2.0**-53 * magnitude + 2 * math.ulp(0.0)
    assert abs(loss - exact) <= tolerance, (loss, exact)
    return "float64 held every term: numpy's sum"


# -- apps and modules --------------------------------------------------------------------------


def ppo_viz_modules() -> list[tuple[str, str | None]]:
    """Every module of ``ppo_viz``, and why it failed to import (None if it imported)."""
    import importlib
    import pkgutil

    import ppo_viz

    found = []
    for info in pkgutil.walk_packages(ppo_viz.__path__, "ppo_viz."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception as error:  # reported by the caller, module by module
            found.append((info.name, f"{type(error).__name__}: {error}"))
        else:
            found.append((info.name, None))
    return found


def live_figure_classes() -> list[type]:
    """Every :class:`ppo_viz.app.LiveFigure` subclass in ``ppo_viz`` built without arguments."""
    import importlib
    import inspect

    from ppo_viz.app import LiveFigure

    classes: dict[str, type] = {}
    for name, problem in ppo_viz_modules():
        if problem is not None:
            continue
        for _, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass):
            if issubclass(cls, LiveFigure) and cls is not LiveFigure:
                classes[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [classes[key] for key in sorted(classes)]


# -- what a reader sees ------------------------------------------------------------------------


def plain(html_text: str) -> str:
    """HTML as read on screen: one space between blocks and cells, no tags, no entities."""
    import html
    import re

    spaced = re.sub(r"</(div|td|th|tr|li|p|caption)>|<br\s*/?>", " ", str(html_text))
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", spaced)).split())


def markdown_of(path) -> str:
    """A notebook's markdown cells, joined, with runs of whitespace made single spaces."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    return " ".join(text.split())


def assert_states(prose: str, *numbers: str) -> None:
    """Each number, as the prose formats it, appears in ``prose``.

    Prose tests compute the numbers a notebook's sentences state, in the same run, and check
    that the text states them: a copy-edit of the wording passes, a changed result fails.
    """
    missing = [number for number in numbers if number not in prose]
    assert not missing, f"the prose does not state {missing}"


def assert_drawn_in_place(app, name: str, values: Sequence[object]) -> None:
    """Setting control ``name`` of LiveFigure ``app`` to each of ``values`` (each changing an
    axes' limits) shows, pixel for pixel, what drawing the whole figure again shows, without
    drawing it whole: the changed axes are drawn again into the kept background."""
    draws = []
    app.canvas.mpl_connect("draw_event", draws.append)
    start = app.controls[name].value
    try:
        for value in values:
            limits = app._axes_limits()
            app.controls[name].value = value
            assert not np.array_equal(app._axes_limits(), limits)
            shown = np.asarray(app.canvas.buffer_rgba()).copy()
            assert not draws, f"{name} = {value} drew the whole figure"
            app.canvas.draw()
            assert np.array_equal(shown, np.asarray(app.canvas.buffer_rgba())), f"{name} = {value}"
            draws.clear()
    finally:
        app.controls[name].value = start


def assert_panel_draws(panel, advantage: float, eps: float, **variant) -> None:
    """A :mod:`ppo_viz.panels` column draws :func:`ppo_clip.ratio_sweep` on its own grid: the
    three terms, both gradients (broken where they jump), and the band ``variant`` sets."""
    grid = panel.objective.get_xdata()
    sweep = ppo_clip.ratio_sweep(grid, advantage, eps, **variant)
    np.testing.assert_array_equal(panel.objective.get_ydata(), sweep.objective_term)
    np.testing.assert_array_equal(panel.unclipped.get_ydata(), sweep.unclipped_term)
    np.testing.assert_array_equal(panel.clip_only.get_ydata(), sweep.clipped_term)
    _, clip_only_grad = ppo_clip.objective_terms(sweep, "clip_only")
    for line, grad in ((panel.gradient, sweep.grad), (panel.gradient_clip_only, clip_only_grad)):
        x, y = (np.asarray(values, dtype=float) for values in line.get_data())
        np.testing.assert_array_equal(x[~np.isnan(x)], grid)  # NaN: a gap where it jumps
        np.testing.assert_array_equal(y[~np.isnan(x)], grad)
    for band in panel.bands:
        assert band.get_x() == pytest.approx(sweep.lower)
        assert band.get_x() + band.get_width() == pytest.approx(sweep.upper)
