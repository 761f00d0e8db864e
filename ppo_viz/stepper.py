"""Notebook 2: the worked example, one sample at a time, and your own batch.

:class:`BatchStepper` walks through a batch sample by sample.  For the current
sample it shows both log-probabilities, the log-ratio, the ratio, the two
candidate terms of the ``min`` and the one it keeps, whether the sample is
clipped (the rule written out with the actual numbers), its contribution to the
loss and its gradient entry; below that the running loss and clip count, and a
figure with the sample highlighted on the curve of its advantage's sign.  At the
last sample the running totals are exactly what :func:`ppo_clip.ppo_clip_loss`,
:func:`ppo_clip.clip_fraction` and :func:`ppo_clip.ppo_clip_grad` return.

Every number comes from :func:`ppo_clip.clip_breakdown` (or, for points on the
curves, :func:`ppo_clip.ratio_sweep`); this module only lays them out.  The
readout is rendered from :meth:`BatchStepper.current_rows`, a structured list
that tests compare with the module.

"Your own batch": text fields for the probabilities (or log-probabilities),
the advantages and ``eps``.  :func:`parse_batch` turns them into a
:class:`Batch` or raises :class:`EntryError` with a message meant for the
reader; the app shows it next to the fields and keeps the last good batch.
"""

from __future__ import annotations

import base64
import html
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation

import ppo_clip
from ppo_viz.display import App, FigureView, figure_to_png, message_html
from ppo_viz.style import BLACK, COLORS, GREY, VERMILLION, YELLOW, figure_style
from ppo_viz.surrogate import R_MAX, PanelArtists, draw_objective_panel, update_objective_panel

__all__ = [
    "PRESETS",
    "Batch",
    "BatchStepper",
    "EntryError",
    "FigureLimits",
    "ModuleCheck",
    "ReadoutRow",
    "RunningTotals",
    "clip_rule",
    "compare_with_module",
    "figure_limits",
    "fmt",
    "parse_batch",
    "parse_numbers",
    "preset_batch",
    "running_totals",
    "sample_rows",
]

#: The contract's largest batch.
MAX_SAMPLES = 4096
#: The contract's lowest log-probability.
LOGP_MIN = -1000.0
#: The largest advantage (in magnitude) the stepper accepts.  Its figure draws
#: ``r*A`` and ``clip(r)*A`` for ratios up to :data:`R_AXIS_CAP`, so every drawn
#: value stays within ``R_AXIS_CAP * MAX_ABS_ADVANTAGE``: finite, with readable
#: ticks.  (A larger ``r*A`` from a huge ratio is drawn as an arrow at the axis edge.)
#: Advantages are usually within ±100, so this refuses only typing slips.
MAX_ABS_ADVANTAGE = 1e6
#: The ratio axis is at least [0, R_MAX] and widens for larger ratios up to this.
R_AXIS_CAP = 6.0
#: Faint points get their sample number written next to them up to this many per column.
LABELLED_POINTS = 12

FloatArray = np.ndarray


# --------------------------------------------------------------------------
# Numbers as text
# --------------------------------------------------------------------------


def fmt(value: float) -> str:
    """A float as exact, short text: ``repr`` (shortest round-trip), integers without ``.0``.

    ``float(fmt(x)) == x`` for every finite ``x`` (negative zero prints as 0).

    >>> fmt(1.0), fmt(-0.5375000000000001), fmt(0.5999999999999999), fmt(float("inf"))
    ('1', '-0.5375000000000001', '0.5999999999999999', 'inf')
    """
    number = float(value)
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if number == 0.0:
        return "0"
    if number.is_integer() and abs(number) < 2.0**53:
        return str(int(number))
    return repr(number)


def _approximation(value: float) -> str | None:
    """A rounder nearby number (``0.6`` for ``0.5999999999999999``), or None if not needed."""
    number = float(value)
    if not math.isfinite(number):
        return None
    short = f"{number:.6g}"
    digits = len(re.sub(r"[^0-9]", "", short.split("e")[0]).lstrip("0"))
    if float(short) == number or digits > 5:
        return None
    return short


def fmt_html(value: float) -> str:
    """:func:`fmt` for HTML, followed by a grey ``≈ 0.6`` where the exact value is ragged."""
    exact = f'<span class="ppo-num">{html.escape(fmt(value))}</span>'
    approx = _approximation(value)
    if approx is None:
        return exact
    return f'{exact} <span style="color:#777">(≈&nbsp;{html.escape(approx)})</span>'


def fmt_short(value: float) -> str:
    """A rounder form for notes and tables: ``≈ 0.6`` for ``0.5999999999999999``, else exact."""
    approx = _approximation(value)
    return fmt(value) if approx is None else f"≈ {approx}"


def _equals(value: float) -> str:
    """``"= 1.4"`` or ``"≈ 0.6"``, for running text."""
    short = fmt_short(value)
    return short if short.startswith("≈") else f"= {short}"


def _about(value: float) -> str:
    """``"= 1.4"`` when short and exact, else ``"≈ 0.6556"``: for figure labels."""
    exact = fmt(value)
    if len(exact) <= 8 or not math.isfinite(float(value)):
        return f"= {exact}"
    return f"≈ {float(value):.4g}"


def _fmt_vector(values: Sequence[float], unseen: int = 0, limit: int = 12) -> str:
    """``[0, -0.55, ·, ·]``: exact entries, ``·`` for those not reached; long ones elided."""
    entries = [fmt(v) for v in values] + ["·"] * unseen
    if len(entries) > limit:
        half = limit // 2
        entries = [*entries[:half], f"… {len(entries) - 2 * half} more …", *entries[-half:]]
    return "[" + ", ".join(entries) + "]"


def _samples_phrase(indices: Sequence[int]) -> str:
    """``"sample 3 left"`` or ``"samples 1, 2 left"``."""
    plural = "s" if len(indices) > 1 else ""
    return f"sample{plural} {_sample_list(indices)} left"


def _sample_list(indices: Sequence[int]) -> str:
    if len(indices) == 0:
        return "none"
    if len(indices) > 12:
        return ", ".join(str(i) for i in indices[:12]) + f", … ({len(indices)} in all)"
    return ", ".join(str(i) for i in indices)


# --------------------------------------------------------------------------
# A batch and its presets
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Batch:
    """One batch the stepper walks through: inputs of :func:`ppo_clip.clip_breakdown`.

    ``prob_new``/``prob_old`` are the probabilities the batch was typed as,
    if it was typed as probabilities (shown next to the log-probabilities).
    """

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float
    name: str = "your batch"
    prob_new: FloatArray | None = None
    prob_old: FloatArray | None = None

    @property
    def n(self) -> int:
        return int(self.advantages.shape[0])

    @cached_property
    def breakdown(self) -> ppo_clip.ClipBreakdown:
        """The module's per-sample computation for this batch."""
        return ppo_clip.clip_breakdown(self.logp_new, self.logp_old, self.advantages, self.eps)

    @property
    def log_ratio(self) -> FloatArray:
        """``logp_new - logp_old``, the exponent of each ratio (from the module)."""
        return self.breakdown.log_ratio

    def arguments(self) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        """``(logp_new, logp_old, advantages, eps)`` for the contract's functions."""
        return self.logp_new, self.logp_old, self.advantages, self.eps


def _from_probabilities(
    prob_new: Sequence[float],
    prob_old: Sequence[float],
    advantages: Sequence[float],
    eps: float,
    name: str,
) -> Batch:
    new, old = np.array(prob_new, dtype=float), np.array(prob_old, dtype=float)
    return Batch(
        logp_new=np.log(new),
        logp_old=np.log(old),
        advantages=np.array(advantages, dtype=float),
        eps=float(eps),
        name=name,
        prob_new=new,
        prob_old=old,
    )


#: The presets: name -> (button label, probabilities new, old, advantages, eps).
PRESETS: dict[str, tuple[str, list[float], list[float], list[float], float]] = {
    "worked example": (
        "Worked example",
        [0.7, 0.55, 0.3, 0.45],
        [0.5, 0.5, 0.5, 0.5],
        [1.0, 2.0, -1.0, -0.5],
        0.2,
    ),
    "two clip fractions": (
        "Clip fractions disagree",
        [0.75, 0.75, 0.25, 0.25],
        [0.5, 0.5, 0.5, 0.5],
        [1.0, -1.0, 1.0, -1.0],
        0.2,
    ),
    "edge cases": (
        "Edge cases",
        [0.6, 0.4, 0.9, 0.2, 0.5],
        [0.5, 0.5, 0.5, 0.5, 0.5],
        [1.0, -1.0, -1.0, 1.0, 0.0],
        0.2,
    ),
}


def preset_batch(name: str) -> Batch:
    """One of :data:`PRESETS` as a batch.

    ``"worked example"`` is the contract's example (identical arrays to
    :func:`ppo_clip.worked_example`); ``"two clip fractions"`` has ratios
    [1.5, 1.5, 0.5, 0.5] with A = [+1, -1, +1, -1], where the two clip-fraction
    definitions give 0.5 and 1.0; ``"edge cases"`` has ratios exactly on both
    band edges, two moves in the unfavourable direction and an A = 0.
    """
    _, new, old, advantages, eps = PRESETS[name]
    return _from_probabilities(new, old, advantages, eps, name)


# --------------------------------------------------------------------------
# Reading the text fields
# --------------------------------------------------------------------------


class EntryError(ValueError):
    """A typed entry the stepper cannot use; ``str(error)`` is written for the reader."""


_SEPARATORS = re.compile(r"[,;\s]+")


def parse_numbers(text: str, label: str, *, empty: str | None = None) -> list[float]:
    """The numbers in ``text`` (separated by commas, semicolons or spaces).

    Accepts surrounding brackets and the Unicode minus sign.  Raises
    :class:`EntryError` naming ``label`` and the sample for an empty field
    (``empty`` replaces the message's advice after "is empty: "),
    something that is not a number, or NaN/infinity.
    """
    cleaned = text.strip().replace("\u2212", "-")
    if cleaned[:1] in ("[", "(") and cleaned[-1:] in ("]", ")"):
        cleaned = cleaned[1:-1]
    tokens = [token for token in _SEPARATORS.split(cleaned) if token]
    if not tokens:
        advice = empty or (
            "type one number per sample, separated by commas (for example 0.7, 0.55, 0.3)."
        )
        raise EntryError(f"{label} is empty: {advice}")
    numbers = []
    for index, token in enumerate(tokens):
        try:
            number = float(token)
        except ValueError:
            raise EntryError(
                f"{label}, sample {index}: “{token}” is not a number "
                "(use digits and a decimal point, for example 0.45 or -1)."
            ) from None
        if not math.isfinite(number):
            raise EntryError(
                f"{label}, sample {index}: “{token}” is not a finite number; "
                "every entry must be an ordinary number."
            )
        numbers.append(number)
    return numbers


def _check_probabilities(values: list[float], label: str) -> None:
    for index, p in enumerate(values):
        if p <= 0.0:
            raise EntryError(
                f"{label}, sample {index}: {fmt(p)} is not a probability in (0, 1]; "
                "it must be above 0 (the log of 0 is minus infinity)."
            )
        if p > 1.0:
            raise EntryError(
                f"{label}, sample {index}: {fmt(p)} is not a probability in (0, 1]; "
                "a probability is at most 1."
            )


def _check_log_probabilities(values: list[float], label: str) -> None:
    for index, logp in enumerate(values):
        if logp > 0.0:
            raise EntryError(
                f"{label}, sample {index}: {fmt(logp)} is above 0, but a log-probability is "
                "at most 0 (the log of a probability ≤ 1). Typing probabilities? "
                "Switch the toggle to “probabilities”."
            )
        if logp < LOGP_MIN:
            raise EntryError(
                f"{label}, sample {index}: {fmt(logp)} is below {fmt(LOGP_MIN)}, "
                "the lowest log-probability the module's contract covers."
            )


def _check_advantages(values: list[float], label: str) -> None:
    for index, advantage in enumerate(values):
        if abs(advantage) > MAX_ABS_ADVANTAGE:
            raise EntryError(
                f"{label}, sample {index}: {fmt(advantage)} is too large to plot; advantages "
                "are usually within ±100, and the stepper takes them up to ±1e6 "
                "(a million)."
            )


def parse_eps(text: str) -> float:
    """The clip size typed in ``text``: one number in [0, 1], or :class:`EntryError`."""
    values = parse_numbers(text, "ε", empty="type one number, for example 0.2.")
    if len(values) != 1:
        raise EntryError(f"ε takes a single number (the clip size), not {len(values)}.")
    eps = values[0]
    if not 0.0 <= eps <= 1.0:
        raise EntryError(f"ε = {fmt(eps)} is outside [0, 1]; try 0.1, 0.2 or 0.3.")
    return eps


def field_labels(log_mode: bool) -> tuple[str, str]:
    """The names of the new and old fields in the given mode."""
    return ("log π_new", "log π_old") if log_mode else ("π_new", "π_old")


def parse_batch(
    new_text: str, old_text: str, advantages_text: str, eps_text: str, *, log_mode: bool = False
) -> Batch:
    """Read the four text fields into a :class:`Batch`, or raise :class:`EntryError`.

    In probability mode the first two fields hold probabilities in (0, 1];
    in log mode log-probabilities in [-1000, 0].  Advantages are at most
    :data:`MAX_ABS_ADVANTAGE` in magnitude, so the figure can draw them.  The
    three lists must have the same length, from 1 to 4096; ``eps`` is one
    number in [0, 1].  Every problem found is reported, one per line.
    """
    new_label, old_label = field_labels(log_mode)
    check = _check_log_probabilities if log_mode else _check_probabilities
    problems: list[str] = []
    lists: dict[str, list[float]] = {}
    for label, text, checker in (
        (new_label, new_text, check),
        (old_label, old_text, check),
        ("A", advantages_text, _check_advantages),
    ):
        try:
            values = parse_numbers(text, label)
            if checker is not None:
                checker(values, label)
            lists[label] = values
        except EntryError as error:
            problems.append(str(error))
    try:
        eps = parse_eps(eps_text)
    except EntryError as error:
        problems.append(str(error))
    if len(lists) == 3:
        lengths = {label: len(values) for label, values in lists.items()}
        if len(set(lengths.values())) > 1:
            counts = [f"{label} has {n}" for label, n in lengths.items()]
            problems.append(
                "Each field needs one number per sample, but "
                + ", ".join(counts[:-1])
                + f" and {counts[-1]}."
            )
        elif next(iter(lengths.values())) > MAX_SAMPLES:
            problems.append(f"At most {MAX_SAMPLES} samples, please (the contract's largest N).")
    if problems:
        raise EntryError("\n".join(problems))
    new, old, advantages = (lists[new_label], lists[old_label], lists["A"])
    if log_mode:
        return Batch(np.array(new), np.array(old), np.array(advantages), eps, "your batch")
    return _from_probabilities(new, old, advantages, eps, "your batch")


# --------------------------------------------------------------------------
# One step of the walk: the rows of the readout
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadoutRow:
    """One line of the readout: ``key`` for tests, ``label`` and ``html`` for the reader.

    ``value`` is the number (or flag, or sentence) exactly as the module gave
    it; ``note`` explains where it comes from.
    """

    key: str
    label: str
    value: Any
    html: str
    note: str = ""


def clip_rule(advantage: float, ratio: float, lower: float, upper: float, clipped: bool) -> str:
    """The clipping rule written out with the actual numbers and the strict comparison.

    ``clipped`` is the module's verdict (``ClipBreakdown.is_clipped``); the
    sentence explains it.  For example ``"A = 1 > 0 and r = 1.4 > 1.2 = 1 + ε,
    so clipped: ..."``.
    """
    a, r, lo, hi = fmt(advantage), fmt(ratio), fmt(lower), fmt(upper)
    verdict = "so clipped" if clipped else "so not clipped"
    if advantage == 0:
        return (
            "A = 0, so not clipped: a sample with zero advantage is never clipped. Both "
            "candidate terms are exactly 0, so it adds nothing to the loss and its gradient is 0"
            + (" (even though r is infinite)." if math.isinf(ratio) else ".")
        )
    if advantage > 0:
        if ratio > upper:
            return (
                f"A = {a} > 0 and r = {r} > {hi} = 1 + ε, {verdict}: the policy already made this "
                "good action more likely than the band allows, so the min keeps the flat "
                "clip(r)·A and the gradient is switched off."
            )
        if ratio == upper:
            return (
                f"A = {a} > 0 and r = {r} is exactly 1 + ε = {hi}, not above it; the comparison "
                f"is strict (clipped only if r > {hi}), {verdict}: the gradient stays on."
            )
        if ratio >= lower:
            return (
                f"A = {a} > 0 and r = {r} < {hi} = 1 + ε, {verdict}: r is inside the band, "
                "where r·A and clip(r)·A agree, and the gradient stays on."
            )
        return (
            f"A = {a} > 0 and r = {r} < {hi} = 1 + ε, {verdict}: r fell below the band, the "
            "unfavourable way for a good action, so the min keeps r·A and the full gradient "
            "pulls r back up."
        )
    if ratio < lower:
        return (
            f"A = {a} < 0 and r = {r} < {lo} = 1 − ε, {verdict}: the policy already made this "
            "bad action less likely than the band allows, so the min keeps the flat "
            "clip(r)·A and the gradient is switched off."
        )
    if ratio == lower:
        return (
            f"A = {a} < 0 and r = {r} is exactly 1 − ε = {lo}, not below it; the comparison "
            f"is strict (clipped only if r < {lo}), {verdict}: the gradient stays on."
        )
    if ratio <= upper:
        return (
            f"A = {a} < 0 and r = {r} > {lo} = 1 − ε, {verdict}: r is inside the band, "
            "where r·A and clip(r)·A agree, and the gradient stays on."
        )
    overflow = (
        " Here r·A is −inf, so the loss is +inf: the true float64 value, not an error."
        if math.isinf(ratio)
        else ""
    )
    return (
        f"A = {a} < 0 and r = {r} > {lo} = 1 − ε, {verdict}: r rose above the band, the "
        "unfavourable way for a bad action, so the min keeps r·A and the full gradient "
        "pushes r back down." + overflow
    )


def _kept_which(unclipped: float, clipped: float, kept: float) -> str:
    """Which candidate the min kept, read off the module's three terms."""
    if unclipped == clipped:
        return "both"
    return "clip(r)·A" if kept == clipped else "r·A"


def sample_rows(batch: Batch, step: int) -> list[ReadoutRow]:
    """The readout of sample ``step``: every value read from the batch's breakdown."""
    b = batch.breakdown
    n = batch.n
    t = step
    a, r = float(b.advantages[t]), float(b.ratio[t])
    unclipped, clipped_term = float(b.unclipped_term[t]), float(b.clipped_term[t])
    kept, grad = float(b.objective_term[t]), float(b.grad[t])
    is_clipped = bool(b.is_clipped[t])
    contribution = float(b.loss_contribution[t])
    which = _kept_which(unclipped, clipped_term, kept)
    band = f"clip(r, {fmt(b.lower)}, {fmt(b.upper)})"
    new_note = old_note = "typed as a log-probability"
    if batch.prob_new is not None and batch.prob_old is not None:
        new_note = f"log of π_new = {fmt(batch.prob_new[t])}"
        old_note = f"log of π_old = {fmt(batch.prob_old[t])}"
    if which == "both":
        kept_note = (
            "both candidates are 0 (A = 0)"
            if a == 0
            else "both candidates are equal (r is in the band)"
        )
    else:
        kept_note = f"the smaller candidate, {which}"
    if is_clipped:
        grad_note = "∂L/∂log π_new: clipped, so switched off"
    elif a == 0:
        grad_note = "∂L/∂log π_new: A = 0, so none"
    else:
        grad_note = f"∂L/∂log π_new = −r·A/N, N = {n}"
    rows = [
        ReadoutRow("logp_old", "log π_old", float(batch.logp_old[t]), "", old_note),
        ReadoutRow("logp_new", "log π_new", float(batch.logp_new[t]), "", new_note),
        ReadoutRow(
            "log_ratio", "log-ratio", float(batch.log_ratio[t]), "", "log π_new − log π_old"
        ),
        ReadoutRow("ratio", "ratio r", r, "", "exp(log-ratio)"),
        ReadoutRow("advantage", "advantage A", a, "", "used as given"),
        ReadoutRow("unclipped_term", "r·A", unclipped, "", "candidate 1: unclipped"),
        ReadoutRow(
            "clipped_term",
            f"{band}·A",
            clipped_term,
            "",
            f"candidate 2, clip(r) {_equals(b.clipped_ratio[t])}",
        ),
        ReadoutRow("kept_term", "min keeps", kept, "", kept_note),
        ReadoutRow(
            "contribution",
            "contribution to the loss",
            contribution,
            "",
            f"−(1/N) × kept, N = {n}",
        ),
        ReadoutRow("grad", "gradient entry", grad, "", grad_note),
    ]
    rows = [
        ReadoutRow(row.key, row.label, row.value, fmt_html(row.value), row.note) for row in rows
    ]
    rows.insert(8, ReadoutRow("kept", "kept candidate", which, html.escape(which)))
    rule = clip_rule(a, r, b.lower, b.upper, is_clipped)
    rows.insert(9, ReadoutRow("is_clipped", "clipped?", is_clipped, "yes" if is_clipped else "no"))
    rows.insert(10, ReadoutRow("rule", "rule", rule, html.escape(rule)))
    return rows


@dataclass(frozen=True)
class RunningTotals:
    """The totals after samples ``0..step``.

    ``loss`` is ``-(1/N) * sum(kept terms so far)``, which at the last step is
    computed exactly as the module computes the loss; ``clip_fraction`` is
    ``clipped / N`` (None before the last step).
    """

    step: int
    n: int
    kept_sum: float
    loss: float
    clipped: int
    clipped_samples: tuple[int, ...]
    grad: FloatArray
    clip_fraction: float | None

    @property
    def seen(self) -> int:
        return self.step + 1

    @property
    def complete(self) -> bool:
        return self.seen == self.n


def running_totals(batch: Batch, step: int) -> RunningTotals:
    """Loss, clip count and gradient entries accumulated over samples ``0..step``."""
    b = batch.breakdown
    seen = step + 1
    kept_sum = np.sum(b.objective_term[:seen])
    clipped_samples = tuple(int(i) for i in np.flatnonzero(b.is_clipped[:seen]))
    complete = seen == batch.n
    return RunningTotals(
        step=step,
        n=batch.n,
        kept_sum=float(kept_sum),
        loss=b.partial_loss(seen),
        clipped=len(clipped_samples),
        clipped_samples=clipped_samples,
        grad=b.grad[:seen].copy(),
        clip_fraction=float(len(clipped_samples) / batch.n) if complete else None,
    )


# --------------------------------------------------------------------------
# The check at the last step
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleCheck:
    """The walk's final totals next to the contract's three functions on the same batch."""

    rows: tuple[tuple[str, str, str, bool], ...]

    @property
    def all_equal(self) -> bool:
        return all(equal for *_, equal in self.rows)

    def _repr_html_(self) -> str:
        head = (
            "<tr><th style='text-align:left'>quantity</th><th style='text-align:left'>"
            "stepper, after the last sample</th><th style='text-align:left'>ppo_clip</th>"
            "<th>equal?</th></tr>"
        )
        body = "".join(
            f"<tr><td>{html.escape(name)}</td><td><code>{html.escape(walked)}</code></td>"
            f"<td><code>{html.escape(module)}</code></td>"
            f"<td style='text-align:center'>{'✔ yes' if equal else '✘ NO'}</td></tr>"
            for name, walked, module, equal in self.rows
        )
        return f"<table>{head}{body}</table>"

    def __repr__(self) -> str:
        width = max(len(name) for name, *_ in self.rows)
        lines = [
            f"{name:<{width}}  stepper {walked}  ppo_clip {module}  {'equal' if eq else 'DIFFER'}"
            for name, walked, module, eq in self.rows
        ]
        return "\n".join(lines)


def compare_with_module(batch: Batch | ppo_clip.WorkedExample | None = None) -> ModuleCheck:
    """Walk ``batch`` to its last sample and compare the totals with the module's functions.

    Equality is exact (``==`` on floats, ``array_equal`` on the gradient).
    ``batch`` defaults to the worked example; a :class:`ppo_clip.WorkedExample`
    tuple is accepted too.
    """
    if batch is None:
        batch = preset_batch("worked example")
    elif not isinstance(batch, Batch):
        logp_new, logp_old, advantages, eps = batch
        batch = Batch(np.asarray(logp_new), np.asarray(logp_old), np.asarray(advantages), eps)
    totals = running_totals(batch, batch.n - 1)
    args = batch.arguments()
    loss = ppo_clip.ppo_clip_loss(*args)
    fraction = ppo_clip.clip_fraction(*args)
    grad = ppo_clip.ppo_clip_grad(*args)
    return ModuleCheck(
        rows=(
            ("loss", repr(totals.loss), repr(loss), totals.loss == loss),
            (
                "clip fraction",
                repr(totals.clip_fraction),
                repr(fraction),
                totals.clip_fraction == fraction,
            ),
            (
                "gradient",
                _fmt_vector(totals.grad),
                _fmt_vector(grad),
                bool(np.array_equal(totals.grad, grad)),
            ),
        )
    )


# --------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------


def _ratio_axis_end(batch: Batch) -> float:
    """Right end of the ratio axis: R_MAX, widened for larger ratios up to R_AXIS_CAP."""
    ratios = batch.breakdown.ratio
    finite = ratios[np.isfinite(ratios)]
    largest = float(finite.max()) if finite.size else 1.0
    return float(min(max(R_MAX, math.ceil(largest * 1.1 * 2) / 2), R_AXIS_CAP))


#: Above this many samples in a column, its limits fit 95 % of them (the rest are pinned).
ROBUST_LIMITS_FROM = 20


def _column_scale(batch: Batch, sign: int, r_end: float) -> float:
    """How far the column's values reach: ``|A| * max(r, 1 + eps)`` over its samples.

    The largest such value for a small batch; for a large one the 95th
    percentile, so one extreme sample does not flatten everyone else's curve.
    """
    b = batch.breakdown
    chosen = np.sign(b.advantages) == sign
    if not chosen.any():
        return b.upper
    with np.errstate(over="ignore"):  # an overflow gives inf, which figure_limits refuses
        reach = np.abs(b.advantages[chosen]) * np.maximum(
            np.minimum(b.ratio[chosen], r_end), b.upper
        )
    if reach.size > ROBUST_LIMITS_FROM:
        return float(np.quantile(reach, 0.95))
    return float(reach.max())


def _column_advantage(batch: Batch, sign: int, step: int) -> tuple[float, int | None]:
    """The advantage a column's curve is drawn for at ``step``, and whose it is.

    The current sample's if it has this sign; otherwise the latest earlier
    sample of this sign, else the first later one; ``(±1, None)`` if none.
    """
    signs = np.sign(batch.breakdown.advantages)
    chosen = np.flatnonzero(signs == sign)
    if chosen.size == 0:
        return float(sign), None
    earlier = chosen[chosen <= step]
    index = int(earlier[-1]) if earlier.size else int(chosen[0])
    return float(batch.breakdown.advantages[index]), index


@dataclass(frozen=True)
class FigureLimits:
    """The stepper figure's fixed axis limits for one batch (see :func:`figure_limits`)."""

    r_end: float
    #: Per advantage sign: ``(objective_ylim, gradient_ylim)``.
    ylims: dict[int, tuple[tuple[float, float], tuple[float, float]]]


def figure_limits(batch: Batch) -> FigureLimits:
    """The axis limits the figure uses for ``batch``, computed without touching any figure.

    Raises :class:`EntryError` (a message for the reader) if a limit is not a
    finite number, so a batch that cannot be drawn is refused before anything
    on screen changes.
    """
    r_end = _ratio_axis_end(batch)
    ylims = {}
    for sign in (+1, -1):
        reach = _column_scale(batch, sign, r_end)
        room, pad = 1.22 * reach, 0.14 * reach
        if not (math.isfinite(reach) and reach <= R_AXIS_CAP * MAX_ABS_ADVANTAGE):
            kind = "positive" if sign > 0 else "negative"
            raise EntryError(
                f"The {kind} advantages reach {fmt(reach)} on the plot, too large to draw; "
                "advantages are usually within ±100."
            )
        if sign > 0:
            ylims[sign] = ((-pad, room), (-room, pad))
        else:
            ylims[sign] = ((-room, pad), (-pad, room))
    return FigureLimits(r_end=r_end, ylims=ylims)


@dataclass
class _Highlight:
    """The artists marking the current sample in one column."""

    point: Line2D
    gradient_point: Line2D
    unclipped: Line2D
    clip_only: Line2D
    guides: tuple[Line2D, Line2D]
    label: Annotation
    point_labels: list[Annotation] = field(default_factory=list)

    def artists(self) -> list[Any]:
        return [
            *self.guides,
            self.unclipped,
            self.clip_only,
            self.point,
            self.gradient_point,
            self.label,
            *self.point_labels,
        ]


class StepperFigure:
    """Objective (top) and gradient (bottom) for A > 0 (left) and A < 0 (right).

    Each column is notebook 1's panel (:func:`ppo_viz.surrogate.draw_objective_panel`)
    drawn for one advantage of that sign; the batch's samples of that sign are
    faint points at their ratios, and the current sample is a large yellow
    point on its own curve.  :meth:`set_batch` fixes the limits for a batch;
    :meth:`show_step` only moves artists.
    """

    def __init__(self, batch: Batch) -> None:
        with figure_style():
            self.figure = Figure(figsize=(10.0, 6.4), layout="constrained")
            axes = self.figure.subplots(2, 2, sharex="col")
            self.columns: dict[int, PanelArtists] = {}
            self.highlights: dict[int, _Highlight] = {}
            for column, sign in enumerate((+1, -1)):
                panel = draw_objective_panel(
                    axes[0, column], axes[1, column], float(sign), batch.eps
                )
                self.columns[sign] = panel
                self.highlights[sign] = self._draw_highlight(panel, sign)
                for line in panel.samples:
                    line.set_alpha(0.55)
                panel.samples[0].set_label("other samples (at their ratios)")
            self.headline = self.figure.suptitle(" ", fontsize=11.5, fontweight="bold")
            self.curve_notes = {
                sign: self.columns[sign].objective_ax.text(
                    0.98 if sign > 0 else 0.02,
                    0.04,
                    "",
                    transform=self.columns[sign].objective_ax.transAxes,
                    ha="right" if sign > 0 else "left",
                    va="bottom",
                    fontsize=9.5,
                    bbox={
                        "boxstyle": "round,pad=0.3",
                        "fc": "white",
                        "ec": "#cccccc",
                        "alpha": 0.9,
                    },
                    zorder=9,
                )
                for sign in (+1, -1)
            }
            handles, labels = axes[0, 0].get_legend_handles_labels()
            # The three marks of the current sample share a legend column; other samples last.
            order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("other"))
            self.figure.legend(
                [handles[i] for i in order],
                [labels[i] for i in order],
                loc="outside lower center",
                ncols=4,
                frameon=False,
            )
        self.batch = batch
        self.r_end = R_MAX
        self.step = 0
        self.set_batch(batch)

    def _draw_highlight(self, panel: PanelArtists, sign: int) -> _Highlight:
        top, bottom = panel.objective_ax, panel.gradient_ax
        big = {"ms": 14, "mfc": YELLOW, "mec": BLACK, "mew": 1.8, "zorder": 8, "ls": "none"}
        small = {"ms": 7, "mfc": "white", "mew": 1.8, "zorder": 7, "ls": "none", "marker": "D"}
        guide = {"color": GREY, "lw": 1.0, "ls": (0, (2, 2)), "zorder": 1}
        point_labels = [
            top.annotate(
                "",
                (0, 0),
                xytext=(0, 9 * sign),
                textcoords="offset points",
                ha="center",
                va="bottom" if sign > 0 else "top",
                fontsize="small",
                color=COLORS["sample"],
                fontweight="bold",
            )
            for _ in range(LABELLED_POINTS)
        ]
        return _Highlight(
            point=top.plot([], [], marker="o", label="current sample: kept term", **big)[0],
            gradient_point=bottom.plot([], [], marker="o", **big)[0],
            unclipped=top.plot(
                [], [], mec=COLORS["unclipped"], label="current sample: r·A", **small
            )[0],
            clip_only=top.plot(
                [], [], mec=COLORS["clip_only"], label="current sample: clip(r)·A", **small
            )[0],
            guides=(top.plot([], [], **guide)[0], bottom.plot([], [], **guide)[0]),
            label=top.annotate(
                "",
                (0, 0),
                xytext=(12, -16 * sign),
                textcoords="offset points",
                fontsize="medium",
                fontweight="bold",
                color=BLACK,
                va="top" if sign > 0 else "bottom",
                bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "none", "alpha": 0.85},
                zorder=9,
            ),
            point_labels=point_labels,
        )

    def dynamic_artists(self) -> list[Any]:
        """What :meth:`show_step` changes, for :meth:`FigureView.animate`.

        The band shading and the column titles depend only on the batch's
        ``eps``; they stay in the cached background (redrawn after
        :meth:`set_batch`), which keeps a step's redraw short.
        """
        artists: list[Any] = []
        for sign in (+1, -1):
            panel = self.columns[sign]
            artists += [
                panel.unclipped,
                panel.clip_only,
                panel.objective,
                panel.gradient_unclipped,
                panel.gradient_clip_only,
                panel.gradient,
                *panel.samples,
                self.curve_notes[sign],
            ]
            artists += self.highlights[sign].artists()
        artists.append(self.headline)
        return sorted(artists, key=lambda artist: artist.get_zorder())

    def set_batch(self, batch: Batch, limits: FigureLimits | None = None) -> None:
        """Fix the limits for ``batch`` (they never move while stepping) and show sample 0.

        ``limits`` are :func:`figure_limits` of ``batch``, if already computed.
        """
        if limits is None:
            limits = figure_limits(batch)
        self.batch = batch
        self.r_end = limits.r_end
        for panel in self.columns.values():
            for line in panel.samples:
                line.set_markersize(7 if batch.n <= ROBUST_LIMITS_FROM else 4)
        for sign, panel in self.columns.items():
            objective_ylim, gradient_ylim = limits.ylims[sign]
            panel.objective_ax.set_ylim(*objective_ylim)
            panel.gradient_ax.set_ylim(*gradient_ylim)
            panel.objective_ax.set_xlim(0.0, self.r_end)
        self._set_titles()
        self.show_step(0)

    def _column_indices(self, sign: int) -> np.ndarray:
        return np.flatnonzero(np.sign(self.batch.breakdown.advantages) == sign)

    def show_step(self, step: int) -> None:
        """Move every artist to sample ``step`` of the current batch."""
        self.step = step
        b = self.batch.breakdown
        current_sign = int(np.sign(b.advantages[step]))
        for sign, panel in self.columns.items():
            advantage, owner = _column_advantage(self.batch, sign, step)
            indices = self._column_indices(sign)
            ratios = b.ratio[indices]
            finite = np.isfinite(ratios)
            update_objective_panel(
                panel, advantage, self.batch.eps, ratios[finite].tolist(), r_max=self.r_end
            )
            self._label_points(sign, indices[finite], step)
            self._set_curve_note(sign, advantage, owner, active=sign == current_sign)
            self._place_highlight(sign, step if sign == current_sign else None)
        self.headline.set_text(self._headline(step))

    def _label_points(self, sign: int, indices: np.ndarray, step: int) -> None:
        labels = self.highlights[sign].point_labels
        xs, ys = self.columns[sign].samples[0].get_data()
        show = len(indices) <= LABELLED_POINTS
        for position, label in enumerate(labels):
            if show and position < len(indices) and int(indices[position]) != step:
                label.set_text(str(int(indices[position])))
                label.xy = (float(xs[position]), float(ys[position]))
                label.set_visible(True)
            else:
                label.set_visible(False)

    def _set_titles(self) -> None:
        """Column titles: where each sign's objective is flat (fixed for a batch)."""
        b = self.batch.breakdown
        for sign, panel in self.columns.items():
            if sign > 0:
                text = f"A > 0: flat (clipped) where r > {fmt(b.upper)}"
            elif b.lower <= 0.0:
                text = "A < 0: never clipped, since 1 − ε = 0"
            else:
                text = f"A < 0: flat (clipped) where r < {fmt(b.lower)}"
            panel.objective_ax.set_title(text, fontsize=10.5)

    def _set_curve_note(self, sign: int, advantage: float, owner: int | None, active: bool) -> None:
        """Say whose advantage the column's curve is drawn for."""
        note = self.curve_notes[sign]
        if owner is None:
            note.set_text(f"no sample has A {'>' if sign > 0 else '<'} 0 (curve for A = {sign:+d})")
        elif active:
            note.set_text(f"curve for A {_about(advantage)} (this sample)")
        else:
            note.set_text(f"curve for A {_about(advantage)} (sample {owner})")
        note.set_color(BLACK if active else GREY)

    def _place_highlight(self, sign: int, step: int | None) -> None:
        marks = self.highlights[sign]
        if step is None:
            for artist in (
                marks.point,
                marks.gradient_point,
                marks.unclipped,
                marks.clip_only,
                *marks.guides,
            ):
                artist.set_data([], [])
            marks.label.set_visible(False)
            return
        b = self.batch.breakdown
        panel = self.columns[sign]
        r = float(b.ratio[step])
        if math.isfinite(r):
            gradient_n1 = float(
                ppo_clip.ratio_sweep([r], b.advantages[step], self.batch.eps).grad[0]
            )
        else:
            gradient_n1 = float(b.grad[step])
        x, off_right = (r, False) if r <= self.r_end else (self.r_end, True)
        top_y, top_marker = _clamp(float(b.objective_term[step]), panel.objective_ax.get_ylim())
        bottom_y, bottom_marker = _clamp(gradient_n1, panel.gradient_ax.get_ylim())
        marks.point.set_data([x], [top_y])
        marks.point.set_marker(">" if off_right else top_marker)
        marks.gradient_point.set_data([x], [bottom_y])
        marks.gradient_point.set_marker(">" if off_right else bottom_marker)
        for line, value in (
            (marks.unclipped, b.unclipped_term[step]),
            (marks.clip_only, b.clipped_term[step]),
        ):
            y, marker = _clamp(float(value), panel.objective_ax.get_ylim())
            line.set_data([x], [y])
            line.set_marker("D" if marker == "o" else marker)
        for guide, ax in zip(marks.guides, (panel.objective_ax, panel.gradient_ax), strict=True):
            guide.set_data([x, x], list(ax.get_ylim()))
        where = f" (r = {fmt(r)}, off the axis)" if off_right else ""
        marks.label.set_text(f"sample {step}{where}")
        marks.label.xy = (x, top_y)
        left = x > 0.62 * self.r_end
        marks.label.set_horizontalalignment("right" if left else "left")
        marks.label.set_position((-12 if left else 12, -16 * sign))
        marks.label.set_visible(True)

    def _headline(self, step: int) -> str:
        b = self.batch.breakdown
        a = float(b.advantages[step])
        zeros = np.flatnonzero(b.advantages == 0)
        if a == 0:
            return f"Sample {step}: A = 0, so it adds 0 to loss and gradient (on neither curve)"
        state = "clipped" if b.is_clipped[step] else "not clipped"
        text = f"Sample {step}: A {_about(a)}, r {_about(b.ratio[step])}, {state}"
        if zeros.size:
            text += f"   (A = 0, not drawn: {_sample_list(zeros.tolist())})"
        return text


def _clamp(value: float, limits: tuple[float, float]) -> tuple[float, str]:
    """``value`` pulled into ``limits``, with a marker that says whether it was (o, ^ or v)."""
    low, high = limits
    if value > high:
        return high, "^"
    if value < low:
        return low, "v"
    return value, "o"


# --------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------

_CARD = (
    "border:1px solid #d8d8d8;border-radius:6px;padding:8px 12px;background:#fff;"
    "box-sizing:border-box"
)
_FONT = (
    "font-family:-apple-system,Segoe UI,Roboto,Helvetica Neue,Arial,sans-serif;"
    "font-size:13px;color:#1a1a1a;line-height:1.45"
)
_MONO = "font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;font-size:12.5px"
_CLIPPED = COLORS["zero_grad"]
_COMPACT = '<div style="line-height:1.4">'


def _badge(clipped: bool) -> str:
    colour, text = (_CLIPPED, "clipped") if clipped else ("#0072B2", "not clipped")
    return (
        f'<span style="background:{colour};color:white;border-radius:10px;padding:1px 9px;'
        f'font-size:12px;font-weight:600;margin-left:8px">{text}</span>'
    )


def sample_card_html(batch: Batch, step: int, rows: list[ReadoutRow]) -> str:
    """The current sample's card, rendered from :func:`sample_rows`."""
    by_key = {row.key: row for row in rows}
    clipped = bool(by_key["is_clipped"].value)
    numeric = [row for row in rows if row.key not in ("kept", "is_clipped", "rule")]
    lines = []
    for row in numeric:
        emphasis = "font-weight:600;" if row.key in ("kept_term", "contribution", "grad") else ""
        lines.append(
            f'<tr><th style="text-align:left;font-weight:normal;color:#444;padding:2px 10px 2px 0;'
            f'white-space:nowrap">{html.escape(row.label)}</th>'
            f'<td style="{_MONO};{emphasis}padding:2px 10px 2px 0;white-space:nowrap">'
            f"{row.html}</td>"
            f'<td style="color:#666;font-size:12px;padding:2px 0;min-width:180px">'
            f"{html.escape(row.note)}</td></tr>"
        )
    border = _CLIPPED if clipped else "#0072B2"
    rule = by_key["rule"].html
    return (
        f'<div style="{_CARD};flex:1 1 560px;min-width:480px">'
        f'<div style="font-size:15px;font-weight:600;margin-bottom:4px">Sample {step}'
        f'<span style="color:#777;font-weight:normal;font-size:13px"> ({step + 1} of {batch.n})'
        f"</span>{_badge(clipped)}</div>"
        f'<table style="border-collapse:collapse;font-size:13px">{"".join(lines)}</table>'
        f'<div class="ppo-rule" style="margin-top:6px;padding:5px 9px;'
        f'border-left:4px solid {border};background:#f6f6f6">{rule}</div></div>'
    )


def totals_html(batch: Batch, totals: RunningTotals, final: ModuleCheck | None) -> str:
    """The running totals card; at the last step it also shows the module's three values."""
    n = batch.n
    seen = "sample 0" if totals.step == 0 else f"samples 0–{totals.step}"
    lines = [
        f"<div>Kept terms of {seen}, summed: <code style='{_MONO}'>"
        f"{fmt_html(totals.kept_sum)}</code></div>",
        f"<div>Loss so far = −(1/{n}) × sum = <code style='{_MONO};font-weight:600'>"
        f"{fmt_html(totals.loss)}</code></div>",
        f"<div>Clipped so far: <b>{totals.clipped}</b> of {totals.seen} seen "
        f"(samples: {_sample_list(totals.clipped_samples)})</div>",
        f"<div>Gradient so far: <code style='{_MONO}'>"
        f"{html.escape(_fmt_vector(totals.grad, n - totals.seen))}</code></div>",
    ]
    if final is not None:
        fraction = totals.clip_fraction
        lines.append(
            f"<div>Clip fraction = {totals.clipped}/{n} = <code style='{_MONO};font-weight:600'>"
            f"{fmt_html(fraction if fraction is not None else 0.0)}</code></div>"
        )
        verdict = (
            "✔ All three equal the module's ppo_clip_loss, clip_fraction and ppo_clip_grad exactly:"
            if final.all_equal
            else "✘ These totals differ from the module:"
        )
        colour = "#009E73" if final.all_equal else "#D55E00"
        lines.append(
            f'<div class="ppo-final-check" style="margin-top:6px;padding:5px 9px;'
            f'border-left:4px solid {colour};background:#f3faf7">{html.escape(verdict)}<br>'
            + "<br>".join(
                f"<code style='{_MONO}'>{html.escape(name)}: {html.escape(module)}</code>"
                for name, _, module, _ in final.rows
            )
            + "</div>"
        )
    else:
        lines.append(
            f"<div style='color:#666'>{n - totals.seen} more to go; at sample {n - 1} these "
            "totals become the module's loss, clip fraction and gradient.</div>"
        )
    title = "Running totals" if final is None else "Totals: the whole batch"
    return (
        f'<div style="{_CARD};flex:1 1 300px;min-width:280px;line-height:1.6">'
        f'<div style="font-size:15px;font-weight:600;margin-bottom:4px">{title}</div>'
        + "".join(lines)
        + "</div>"
    )


def _fraction_box(
    value: float, who: str, rule: str, counted: list[int], n: int, colour: str
) -> str:
    return (
        f'<div style="flex:1 1 300px;border-left:5px solid {colour};padding:4px 10px;'
        'background:#fafafa">'
        f'<div style="font-size:12px;color:#555">{html.escape(who)}</div>'
        f'<div class="ppo-num" style="{_MONO};font-size:24px;font-weight:700;color:{colour}">'
        f"{html.escape(repr(float(value)))}</div>"
        f"<div>{rule}</div>"
        f'<div style="color:#555">{len(counted)} of {n} samples: {_sample_list(counted)}</div>'
        "</div>"
    )


def clip_fractions_html(batch: Batch) -> str:
    """Both definitions of the clip fraction on ``batch``, side by side.

    Every sample the project counts is also outside the band, so the two can
    only differ by samples that left the band the unfavourable way.
    """
    b = batch.breakdown
    ours = np.flatnonzero(b.is_clipped).tolist()
    theirs = np.flatnonzero(b.outside_band).tolist()
    only_band = sorted(set(theirs) - set(ours))
    if not only_band:
        verdict = "On this batch the two agree."
    else:
        plural = len(only_band) > 1
        verdict = (
            f"They disagree: {_samples_phrase(only_band)} the band the unfavourable way for "
            f"{'their' if plural else 'its'} advantage's sign, so the min keeps r·A and the "
            f"gradient stays on, yet the sign-blind count calls {'them' if plural else 'it'} "
            "clipped."
        )
    ours_box = _fraction_box(
        b.clip_fraction,
        "this project, TRL, verl: clip_fraction",
        "<b>gradient switched off</b>: A &gt; 0 and r &gt; 1+ε, or A &lt; 0 and r &lt; 1−ε",
        ours,
        batch.n,
        COLORS["objective"],
    )
    theirs_box = _fraction_box(
        b.band_fraction,
        "Stable-Baselines3, CleanRL, OpenAI Baselines, Spinning Up: clipfrac",
        "<b>outside the band, sign ignored</b>: mean(|r − 1| &gt; ε)",
        theirs,
        batch.n,
        VERMILLION if only_band else COLORS["objective"],
    )
    return (
        f'<div class="ppo-clip-fractions" style="{_CARD};margin-top:8px">'
        '<div style="font-size:15px;font-weight:600;margin-bottom:6px">'
        "Two clip fractions on this batch</div>"
        f'<div style="display:flex;flex-wrap:wrap;gap:10px">{ours_box}{theirs_box}</div>'
        f'<div style="margin-top:6px">{html.escape(verdict)} A logged clip fraction can only be '
        "compared between two codes once you know which of the two they compute.</div></div>"
    )


def _table_cell(value: float) -> str:
    """A compact cell: exact when short, else ``≈ 0.6`` with the exact float as a tooltip."""
    exact, short = fmt(value), fmt_short(value)
    if short == exact:
        return html.escape(exact)
    return f'<span title="{html.escape(exact)}">{html.escape(short)}</span>'


def batch_table_html(batch: Batch, step: int | None = None, limit: int = 200) -> str:
    """Every sample of ``batch`` (up to ``limit``) in one table, from its breakdown.

    ``step`` highlights that row and greys the rows not reached yet.
    """
    b = batch.breakdown
    typed_as_probabilities = batch.prob_new is not None and batch.prob_old is not None
    head = [
        "t",
        "π_old" if typed_as_probabilities else "log π_old",
        "π_new" if typed_as_probabilities else "log π_new",
        "r",
        "A",
        "r·A",
        "clip(r)·A",
        "kept (min)",
        "clipped?",
        "−kept/N",
        "gradient",
    ]
    body = []
    for t in range(min(batch.n, limit)):
        if typed_as_probabilities:
            old, new = batch.prob_old[t], batch.prob_new[t]
        else:
            old, new = batch.logp_old[t], batch.logp_new[t]
        values = [
            old,
            new,
            b.ratio[t],
            b.advantages[t],
            b.unclipped_term[t],
            b.clipped_term[t],
            b.objective_term[t],
        ]
        cells = [str(t), *(_table_cell(v) for v in values)]
        cells.append("<b>yes</b>" if b.is_clipped[t] else "no")
        cells += [_table_cell(b.loss_contribution[t]), _table_cell(b.grad[t])]
        style = "background:#F7EAF2" if b.is_clipped[t] else ""
        if step is not None and t == step:
            style = "background:#FFF3A3;font-weight:600;outline:1.5px solid #222"
        elif step is not None and t > step:
            style = "color:#b0b0b0"
        body.append(
            f'<tr style="{style}">'
            + "".join(f'<td style="padding:2px 9px;text-align:right">{c}</td>' for c in cells)
            + "</tr>"
        )
    if batch.n > limit:
        body.append(
            f"<tr><td colspan='{len(head)}' style='padding:2px 9px;color:#666'>"
            f"… and {batch.n - limit} more samples</td></tr>"
        )
    header = "".join(
        '<th style="padding:2px 9px;text-align:right;border-bottom:1px solid #999;'
        f'font-weight:600">{html.escape(h)}</th>'
        for h in head
    )
    key = "Pink rows are clipped"
    if step is not None:
        key += "; the outlined row is the current sample, grey rows are still to come"
    return (
        f'<div style="{_CARD};{_FONT};overflow-x:auto">'
        f'<table class="ppo-batch-table" style="border-collapse:collapse;{_MONO}">'
        f"<tr>{header}</tr>{''.join(body)}</table>"
        f'<div style="color:#666;font-size:12px;margin-top:3px">{key}. “≈” marks a value '
        "rounded for this table (hover for the exact float; the sample card shows every "
        "digit).</div></div>"
    )


# --------------------------------------------------------------------------
# The app
# --------------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    """``"1 sample"``, ``"4 samples"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass(frozen=True)
class _Page:
    """What the stepper's widgets show at one step of a batch (HTML, computed up front)."""

    step: int
    sample_view: str
    table: str
    position: str


def _page(batch: Batch, step: int) -> _Page:
    rows = sample_rows(batch, step)
    totals = running_totals(batch, step)
    final = compare_with_module(batch) if totals.complete else None
    return _Page(
        step=step,
        sample_view=(
            f'<div style="{_FONT};display:flex;flex-wrap:wrap;gap:10px;align-items:stretch">'
            + sample_card_html(batch, step, rows)
            + totals_html(batch, totals, final)
            + "</div>"
        ),
        table=f'<div style="{_FONT};overflow-x:auto">' + batch_table_html(batch, step) + "</div>",
        position=(
            f'<span style="{_FONT};margin-left:10px;color:#444">{step + 1} of {batch.n}'
            f" · {html.escape(batch.name)}</span>"
        ),
    )


@dataclass(frozen=True)
class _Prepared:
    """Everything needed to show a batch, computed before anything on screen changes."""

    limits: FigureLimits
    clip_fractions: str
    page: _Page


def _prepare(batch: Batch, step: int = 0) -> _Prepared:
    """The module's breakdown, the figure limits and the HTML of ``batch`` at ``step``.

    Raises :class:`EntryError` (or the module's ``ValueError``) for a batch
    that cannot be shown; computes nothing on any widget or figure.
    """
    batch.breakdown  # noqa: B018  (let the module check the inputs now)
    return _Prepared(
        limits=figure_limits(batch),
        clip_fractions=f'<div style="{_FONT}">' + clip_fractions_html(batch) + "</div>",
        page=_page(batch, step),
    )


def _field(description: str, css: str, width: str = "640px") -> widgets.Text:
    text = widgets.Text(
        description=description,
        continuous_update=False,
        style={"description_width": "90px"},
        layout=widgets.Layout(width=width),
    )
    text.add_class(css)
    return text


class BatchStepper(App):
    """Step through a batch sample by sample; type your own batch.

    ``batch`` defaults to the worked example.  ``inputs=False`` hides the text
    fields and presets (the stepper alone).  :meth:`current_rows` is the
    structured readout of the current sample; :attr:`step` its index.
    """

    description = "PPO's clipped loss, one sample at a time"

    def __init__(self, batch: Batch | str | None = None, *, inputs: bool = True) -> None:
        if batch is None:
            batch = "worked example"
        if isinstance(batch, str):
            batch = preset_batch(batch)
        self.batch = batch
        self._busy = False
        self._converted: dict[str, tuple[str, str]] = {}
        self.plot = StepperFigure(batch)
        self.view = FigureView(self.plot.figure)
        self.view.animate(self.plot.dynamic_artists())
        self._build_stepper()
        self._build_inputs()
        self.sample_view = widgets.HTML()
        self.sample_view.add_class("ppo-sample-view")
        self.clip_fractions = widgets.HTML()
        self.clip_fractions.add_class("ppo-stepper-clip-fractions")
        self.table = widgets.HTML()
        self.table.add_class("ppo-stepper-table")
        table_box = widgets.Accordion(
            children=[self.table], titles=("The whole batch as a table",), selected_index=0
        )
        parts: list[widgets.Widget] = []
        if inputs:
            parts.append(self.inputs)
        parts += [self.controls, self.sample_view, self.view.output, self.clip_fractions, table_box]
        self.widget = widgets.VBox(parts, layout=widgets.Layout(width="100%", max_width="1100px"))
        self._write_fields(batch)
        self._show_batch(batch)

    # -- construction ----------------------------------------------------------

    def _build_stepper(self) -> None:
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
        self.slider.add_class("ppo-main-slider")
        self.slider.add_class("ppo-stepper-sample")
        self.position = widgets.HTML()
        self.prev_button.on_click(lambda _button: self.go(self.step - 1))
        self.next_button.on_click(lambda _button: self.go(self.step + 1))
        self.slider.observe(self._on_slider, names="value")
        self.controls = widgets.HBox(
            [self.prev_button, self.slider, self.next_button, self.position],
            layout=widgets.Layout(align_items="center", margin="6px 0"),
        )

    def _build_inputs(self) -> None:
        self.mode = widgets.ToggleButtons(
            options=["probabilities", "log-probabilities"],
            value="probabilities",
            style={"button_width": "140px"},
        )
        self.mode.add_class("ppo-stepper-mode")
        self.new_field = _field("π_new", "ppo-stepper-new")
        self.old_field = _field("π_old", "ppo-stepper-old")
        self.advantages_field = _field("A", "ppo-stepper-advantages")
        self.eps_field = _field("ε", "ppo-stepper-eps", width="200px")
        self.load_button = widgets.Button(
            description="Load batch",
            button_style="primary",
            icon="upload",
            layout=widgets.Layout(width="130px"),
        )
        self.load_button.add_class("ppo-stepper-load")
        self.load_button.on_click(lambda _button: self.load())
        self.preset_buttons: dict[str, widgets.Button] = {}
        for name, (label, *_rest) in PRESETS.items():
            width = f"{40 + 8 * len(label)}px"
            button = widgets.Button(
                description=label, layout=widgets.Layout(width=width, flex="0 0 auto")
            )
            button.add_class("ppo-stepper-preset-" + name.replace(" ", "-"))
            button.on_click(lambda _button, name=name: self.load_preset(name))
            self.preset_buttons[name] = button
        self.message = widgets.HTML()
        self.message.add_class("ppo-error")
        self.mode.observe(self._on_mode, names="value")
        self.message.observe(self._compact_message, names="value")
        intro = widgets.HTML(
            '<div style="font-size:14px;font-weight:600;margin-top:4px">Your own batch</div>'
            '<div style="font-size:12.5px;color:#555">One number per sample, separated by '
            "commas. Press <b>Load batch</b>; the stepper below then walks through it.</div>"
        )
        presets = widgets.HBox(
            [
                widgets.HTML('<span style="font-size:13px;margin-right:6px">Presets:</span>'),
                *self.preset_buttons.values(),
            ],
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
            [
                intro,
                widgets.HBox(
                    [fields, self.message], layout=widgets.Layout(align_items="flex-start")
                ),
            ],
            layout=widgets.Layout(border="1px solid #ddd", padding="6px 10px", margin="0 0 6px 0"),
        )
        self.message.layout = widgets.Layout(
            flex="1 1 260px", margin="30px 0 0 12px", min_width="240px"
        )

    # -- stepping ----------------------------------------------------------------

    @property
    def step(self) -> int:
        """The index of the current sample."""
        return int(self.slider.value)

    def go(self, step: int) -> None:
        """Show sample ``step`` (clamped to the batch)."""
        self.slider.value = max(0, min(int(step), self.batch.n - 1))

    def _on_slider(self, _change: Any) -> None:
        if not self._busy:
            self._redraw()

    def current_rows(self) -> list[ReadoutRow]:
        """The current sample's readout rows (what :attr:`sample_view` renders)."""
        return sample_rows(self.batch, self.step)

    def totals(self) -> RunningTotals:
        """The running totals after the current sample."""
        return running_totals(self.batch, self.step)

    def _redraw(self) -> None:
        self._show_page(_page(self.batch, self.step))

    def _show_page(self, page: _Page) -> None:
        """Put a computed page on screen and move the figure to its step."""
        self.sample_view.value = page.sample_view
        self.table.value = page.table
        self.prev_button.disabled = page.step == 0
        self.next_button.disabled = page.step == self.batch.n - 1
        self.position.value = page.position
        self.plot.show_step(page.step)
        self.view.refresh()

    # -- batches -----------------------------------------------------------------

    @property
    def log_mode(self) -> bool:
        return self.mode.value == "log-probabilities"

    def _show_batch(self, batch: Batch, prepared: _Prepared | None = None) -> None:
        """Swap ``batch`` in; ``prepared`` is its :func:`_prepare`, if already computed."""
        if prepared is None:
            prepared = _prepare(batch)
        step = prepared.page.step
        self.batch = batch
        self._busy = True
        try:
            self.slider.max = batch.n - 1
            self.slider.value = step
        finally:
            self._busy = False
        self.plot.set_batch(batch, prepared.limits)
        self.view.invalidate()
        self.clip_fractions.value = prepared.clip_fractions
        self._show_page(prepared.page)

    def _swap_in(self, batch: Batch, prepared: _Prepared) -> str | None:
        """Show ``batch``; if drawing it fails or warns, put the last batch back.

        Everything that can be checked is checked by :func:`_prepare` first;
        this guards against the rest (a figure that cannot be rendered).
        Returns None on success, else what went wrong.  Nothing is printed.
        """
        previous, previous_step = self.batch, self.step
        failure = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self._show_batch(batch, prepared)
            except Exception as error:  # a drawing failure must not leave a half-updated app
                failure = f"{type(error).__name__}: {error}"
            if failure is None and caught:
                failure = f"{caught[0].category.__name__}: {caught[0].message}"
        if failure is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._show_batch(previous, _prepare(previous, previous_step))
        return failure

    def _write_fields(self, batch: Batch) -> None:
        """Write ``batch`` into the fields, in the current mode, exactly (repr digits)."""
        self._converted.clear()
        if self.log_mode or batch.prob_new is None or batch.prob_old is None:
            if not self.log_mode:
                self._busy = True
                try:
                    self.mode.value = "log-probabilities"
                finally:
                    self._busy = False
                self._relabel()
            new, old = batch.logp_new, batch.logp_old
        else:
            new, old = batch.prob_new, batch.prob_old
        self.new_field.value = ", ".join(fmt(v) for v in new)
        self.old_field.value = ", ".join(fmt(v) for v in old)
        self.advantages_field.value = ", ".join(fmt(v) for v in batch.advantages)
        self.eps_field.value = fmt(batch.eps)

    def load(self) -> bool:
        """Read the fields; show the batch, or a message and keep the previous batch.

        Returns whether the batch was loaded.  Never raises for bad input.
        """
        try:
            batch = parse_batch(
                self.new_field.value,
                self.old_field.value,
                self.advantages_field.value,
                self.eps_field.value,
                log_mode=self.log_mode,
            )
            prepared = _prepare(batch)  # the module's checks, the limits, the page: all first
        except (EntryError, ValueError, TypeError, ArithmeticError) as error:
            self._refuse(str(error).splitlines())
            return False
        failure = self._swap_in(batch, prepared)
        if failure is not None:
            self._refuse([f"This batch could not be drawn ({failure})."])
            return False
        self.message.value = message_html(
            f"Loaded {batch.name}: N = {_count(batch.n, 'sample')}, ε = {fmt(batch.eps)}. "
            "Step through it with Next ▶.",
            "ok",
        )
        return True

    def _refuse(self, problems: list[str]) -> None:
        """Show why the typed batch was not loaded; the last good batch stays on screen."""
        self.message.value = "".join(message_html(p, "error") for p in problems) + message_html(
            f"Still showing the last batch that loaded ({self.batch.name}, N = {self.batch.n}).",
            "info",
        )

    def load_preset(self, name: str) -> None:
        """Write preset ``name`` into the fields and load it."""
        batch = preset_batch(name)
        self._write_fields(batch)
        self._show_batch(batch)
        self.message.value = message_html(
            f"Loaded the preset “{PRESETS[name][0]}”: N = {batch.n}, ε = {fmt(batch.eps)}.", "ok"
        )

    def _on_mode(self, change: dict[str, Any]) -> None:
        """Rewrite the probability fields in the other form (undone exactly by switching back)."""
        if self._busy:
            return
        to_log = change["new"] == "log-probabilities"
        self._relabel()
        left_as_typed = []
        for text_field, key in ((self.new_field, "π_new"), (self.old_field, "π_old")):
            previous = self._converted.get(key)
            if previous is not None and previous[0] == text_field.value:
                converted = previous[1]
            else:
                converted = self._convert(text_field.value, to_log)
            if converted is None:
                left_as_typed.append(text_field.description)
            else:
                self._converted[key] = (converted, text_field.value)
                text_field.value = converted
        note = ""
        if left_as_typed:
            verb = "was" if len(left_as_typed) == 1 else "were"
            note = (
                f" {' and '.join(left_as_typed)} could not be converted and {verb} left as typed."
            )
        self.message.value = message_html(
            "The first two fields now hold "
            + ("log-probabilities (each ≤ 0)." if to_log else "probabilities (each in (0, 1]).")
            + note
            + " Press Load batch to use them.",
            "info",
        )

    def _compact_message(self, change: dict[str, Any]) -> None:
        """Wrap messages in a normal line height (ipywidgets' HTML uses a tall one)."""
        text = change["new"]
        if text and not text.startswith(_COMPACT):
            self.message.value = f"{_COMPACT}{text}</div>"

    def _relabel(self) -> None:
        new_label, old_label = field_labels(self.log_mode)
        self.new_field.description = new_label
        self.old_field.description = old_label

    @staticmethod
    def _convert(text: str, to_log: bool) -> str | None:
        try:
            values = np.array(parse_numbers(text, "field"))
        except EntryError:
            return None
        if to_log:
            if (values <= 0).any() or (values > 1).any():
                return None
            return ", ".join(fmt(v) for v in np.log(values))
        if (values > 0).any():
            return None
        return ", ".join(fmt(v) for v in np.exp(values))

    # -- display ------------------------------------------------------------------

    def batch_html(self) -> str:
        """The static summary: figure, whole-batch table, totals and both clip fractions."""
        batch = self.batch
        last = running_totals(batch, batch.n - 1)
        png = base64.b64encode(self.view.last_png or figure_to_png(self.plot.figure)).decode()
        return (
            f'<div style="{_FONT}">'
            "<div style='font-size:15px;font-weight:600;margin:4px 0'>"
            f"{html.escape(batch.name.capitalize())}: "
            f"N = {batch.n}, ε = {fmt(batch.eps)}</div>"
            + batch_table_html(batch)
            + '<div style="display:flex;flex-wrap:wrap;gap:10px;margin-top:8px">'
            + totals_html(batch, last, compare_with_module(batch))
            + "</div>"
            + clip_fractions_html(batch)
            + f'<img style="max-width:100%;margin-top:8px" alt="the current sample on the clipped '
            f'objective" src="data:image/png;base64,{png}"></div>'
        )

    def static_fallback(self) -> dict[str, Any]:
        return {
            "png": self.view.last_png or figure_to_png(self.plot.figure),
            "html_fallback": self.batch_html(),
        }
