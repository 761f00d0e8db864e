"""Notebook 2's model: the batch the stepper walks, read from typed fields, checked by the module.

A :class:`StepperBatch`'s ``breakdown`` (:func:`ppo_clip.clip_breakdown`) is the source of every
number the stepper shows.  :func:`parse_batch` reads the text fields (Python's ``float`` reads
each entry, numpy checks the ranges); :func:`compare_with_module` checks a walk's end.
"""

from __future__ import annotations

import contextlib
import re
import reprlib
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.app import InputError
from ppo_viz.html import page, table
from ppo_viz.numbers import exact, presented, rounded, vector

FloatArray = NDArray[np.float64]

#: The contract's largest batch and lowest log-probability.
MAX_SAMPLES = 4096
LOGP_MIN = -1000.0
#: The largest advantage (in magnitude) a typed batch may have, so that the figure draws every
#: term with readable axes.  Real advantages are usually within ±100.
MAX_ABS_ADVANTAGE = 1e6


class EntryError(InputError):
    """A typed entry or batch the stepper cannot use; ``str(error)`` is for the reader."""


@dataclass(frozen=True, eq=False)
class StepperBatch:
    """One batch: the contract functions' arguments, a name, and the probabilities if typed so.

    The module checks the arguments when the batch is made (a ``ValueError`` or ``TypeError``
    names the argument); use :meth:`from_probabilities` for a batch typed as probabilities.
    """

    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray
    eps: float
    name: str = "your batch"
    prob_new: FloatArray | None = None
    prob_old: FloatArray | None = None
    #: The module's per-sample computation: every number the stepper shows is read from it.
    breakdown: ppo_clip.ClipBreakdown = field(init=False, repr=False)

    def __post_init__(self) -> None:
        breakdown = ppo_clip.clip_breakdown(self.logp_new, self.logp_old, self.advantages, self.eps)
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__}")
        for name in ("logp_new", "logp_old", "advantages"):
            object.__setattr__(self, name, np.array(getattr(self, name), dtype=float))
        object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "breakdown", breakdown)

    @classmethod
    def from_probabilities(
        cls,
        prob_new: ArrayLike,
        prob_old: ArrayLike,
        advantages: ArrayLike,
        eps: float = ppo_clip.DEFAULT_EPS,
        *,
        name: str = "your batch",
    ) -> StepperBatch:
        """A batch typed as probabilities, each in (0, 1]; a ``ValueError`` names one outside."""
        new, old = np.asarray(prob_new, dtype=float), np.asarray(prob_old, dtype=float)
        for argument, values in (("prob_new", new), ("prob_old", old)):
            in_range, why = RANGES["probability"]
            refuse_where(~in_range(values), argument, [exact(v) for v in values.flat], why)
        logs = {"logp_new": np.log(new), "logp_old": np.log(old)}
        return cls(**logs, advantages=advantages, eps=eps, name=name, prob_new=new, prob_old=old)

    @property
    def n(self) -> int:
        """The number of samples N."""
        return self.breakdown.n

    def arguments(self) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        """``(logp_new, logp_old, advantages, eps)``: the contract functions' arguments."""
        return self.logp_new, self.logp_old, self.advantages, self.eps


class Preset(NamedTuple):
    """A preset batch as typed: its button's label, probabilities, advantages and ``eps``."""

    label: str
    prob_new: tuple[float, ...]
    prob_old: tuple[float, ...]
    advantages: tuple[float, ...]
    eps: float


#: The presets, by name.  "two clip fractions": ratios [1.5, 1.5, 0.5, 0.5] with
#: A = [+1, -1, +1, -1], where the two clip-fraction definitions give 0.5 and 1.  "edge cases":
#: ratios on both band edges (0.6 / 0.5 and 0.4 / 0.5, through log and exp), two moves in the
#: unfavourable direction, and an A = 0.
PRESETS: dict[str, Preset] = {
    "worked example": Preset(
        "Worked example", (0.7, 0.55, 0.3, 0.45), (0.5,) * 4, (1.0, 2.0, -1.0, -0.5), 0.2
    ),
    "two clip fractions": Preset(
        "Clip fractions disagree", (0.75, 0.75, 0.25, 0.25), (0.5,) * 4, (1, -1, 1, -1), 0.2
    ),
    "edge cases": Preset(
        "Edge cases", (0.6, 0.4, 0.9, 0.2, 0.5), (0.5,) * 5, (1.0, -1.0, -1.0, 1.0, 0.0), 0.2
    ),
}


def preset_batch(name: str) -> StepperBatch:
    """The preset ``name`` (a key of :data:`PRESETS`) as a batch."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"a preset's name is one of {list(PRESETS)}, got {reprlib.repr(name)}")
    return StepperBatch.from_probabilities(*PRESETS[name][1:], name=name)


def as_batch(batch: StepperBatch | ppo_clip.WorkedExample | str | None) -> StepperBatch:
    """A batch, a worked example, a preset's name, or None for the worked example, as a batch."""
    if batch is None or isinstance(batch, str):
        return preset_batch("worked example" if batch is None else batch)
    if isinstance(batch, ppo_clip.WorkedExample):
        return StepperBatch(*batch, name="worked example")
    if not isinstance(batch, StepperBatch):
        kind = type(batch).__name__
        raise TypeError(
            f"batch must be a StepperBatch, a WorkedExample, a name or None, got {kind}"
        )
    return batch


# -- reading the fields ---------------------------------------------------------------------

#: What each kind of field takes: which values are in range, and what a message says otherwise.
RANGES = {
    "probability": (lambda v: (v > 0) & (v <= 1), "is not a probability in (0, 1] (0 has no log)."),
    "log-probability": (
        lambda v: (v >= LOGP_MIN) & (v <= 0),
        "is not a log-probability in [-1000, 0] (typing probabilities? flip the toggle).",
    ),
    "advantage": (
        lambda v: abs(v) <= MAX_ABS_ADVANTAGE,
        "is too large to plot: the stepper takes advantages up to ±1e6 (a million).",
    ),
    "eps": (lambda v: (v >= 0) & (v <= 1), "is outside [0, 1]; try 0.1, 0.2 or 0.3."),
}


def refuse_where(bad: ArrayLike, label: str, tokens: list[str], why: str) -> None:
    """:class:`EntryError` quoting the first entry where ``bad`` (a long one cut short) and
    counting, not listing, the others."""
    found = np.flatnonzero(bad)
    if found.size == 0:
        return
    token = tokens[found[0]]
    quoted = f"“{token}”" if len(token) <= 24 else f"“{token[:20]}…” ({len(token)} characters)"
    text = f"{label}, sample {found[0]}: {quoted} {why}"
    if found.size == 2:
        text += f" 1 more entry of {label} has a problem too."
    elif found.size > 2:
        text += f" {found.size - 1} more entries of {label} have a problem too."
    raise EntryError(text)


def read_field(text: str, label: str, kind: str) -> FloatArray:
    """The numbers typed in a field, each a finite number in the range of ``kind``.

    Entries are separated by commas, semicolons or spaces; surrounding brackets and the
    Unicode minus sign are accepted.  Raises :class:`EntryError` naming ``label`` and the
    sample, and ``TypeError`` if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"the text of {label} must be a str, got {type(text).__name__}")
    cleaned = text.replace("\u2212", "-").strip().strip("[]()")
    tokens = [token for token in re.split(r"[,;\s]+", cleaned) if token]
    if not tokens:
        raise EntryError(f"{label} is empty: type one number per sample, separated by commas.")
    values = np.full(len(tokens), np.nan)  # NaN for an entry that is no number
    for index, token in enumerate(tokens):
        with contextlib.suppress(ValueError):
            values[index] = float(token)
    refuse_where(~np.isfinite(values), label, tokens, "is no finite number (such as -0.45).")
    in_range, why = RANGES[kind]
    refuse_where(~in_range(values), label, tokens, why)
    return values


def parse_batch(
    new_text: str, old_text: str, advantages_text: str, eps_text: str, *, log_mode: bool = False
) -> StepperBatch:
    """The four fields as a batch, or :class:`EntryError` with every problem, one per line.

    The first two fields hold probabilities in (0, 1] or, with ``log_mode``, log-probabilities
    in [-1000, 0]; advantages are at most 1e6 in magnitude; the three lists have one length
    from 1 to 4096; ``eps`` is one number in [0, 1].
    """
    kind = "log-probability" if log_mode else "probability"
    new, old = ("log π_new", "log π_old") if log_mode else ("π_new", "π_old")
    fields = {new: (new_text, kind), old: (old_text, kind), "A": (advantages_text, "advantage")}
    fields["ε"] = (eps_text, "eps")
    problems, lists = [], {}
    for label, (text, field_kind) in fields.items():
        try:
            lists[label] = read_field(text, label, field_kind)
        except EntryError as error:
            problems.append(str(error))
    if len(lists.get("ε", [0])) != 1:
        problems.append(f"ε takes a single number (the clip size), not {len(lists['ε'])}.")
    lengths = {label: len(lists[label]) for label in (new, old, "A") if label in lists}
    if len(lengths) == 3 and len(set(lengths.values())) > 1:
        said = ", ".join(f"{label} has {n}" for label, n in lengths.items())
        problems.append(f"Each field needs one number per sample, but {said}.")
    elif len(lengths) == 3 and lengths["A"] > MAX_SAMPLES:
        problems.append(f"At most {MAX_SAMPLES} samples, please (the contract's largest N).")
    if problems:
        raise EntryError("\n".join(problems))
    arguments = lists[new], lists[old], lists["A"], float(lists["ε"][0])
    return StepperBatch(*arguments) if log_mode else StepperBatch.from_probabilities(*arguments)


def numbers_text(values: ArrayLike) -> str:
    """Numbers as a field shows them: each exact (it reads back bit for bit), comma-separated."""
    return ", ".join(exact(v) for v in np.asarray(values, dtype=float))


def converted_field(text: str, to_log: bool, label: str = "field") -> str | None:
    """A field of probabilities rewritten as log-probabilities (``to_log``), or back.

    None when ``text`` does not hold what the conversion takes: the field is then left as
    typed.  Probabilities always have faithful logs.  The other way, float64 holds ``e^x``
    below about ``e^-708`` with fewer digits and below about ``e^-745`` not at all:
    :class:`EntryError` names a log-probability whose probability would read back as another.
    """
    kind = "probability" if to_log else "log-probability"
    try:
        values = read_field(text, label, kind)
    except EntryError:
        return None
    if to_log:
        return numbers_text(np.log(values))
    tokens = [exact(v) for v in values]
    probabilities = np.exp(values)
    refuse_where(probabilities == 0, label, tokens, "has no float64 probability: e^x is 0.")
    # A subnormal e^x keeps fewer digits than a normal float64: lost when their spacing, relative
    # to e^x, is wider than the spacing of the log-probabilities themselves.
    lost = np.spacing(probabilities) / probabilities > np.spacing(np.abs(values))
    lost &= probabilities < np.finfo(float).tiny
    if lost.any():
        p = rounded(probabilities[np.argmax(lost)], 2)
        why = f"is too low: float64 holds e^x ≈ {p} with fewer digits than the log has."
        refuse_where(lost, label, tokens, why)
    return numbers_text(probabilities)


# -- the check against the module -----------------------------------------------------------


class ModuleCheck(NamedTuple):
    """The walk's totals next to the contract's functions: ``(quantity, walk, module, equal)``."""

    rows: tuple[tuple[str, str, str, bool], ...]

    @property
    def all_equal(self) -> bool:
        """Whether all three agree exactly."""
        return all(row[3] for row in self.rows)

    def _repr_html_(self) -> str:
        """The comparison as a table, for a notebook cell."""
        header = ["quantity", "stepper, after the last sample", "ppo_clip", "equal?"]
        rows = [(*row[:3], "✔ yes" if row[3] else "✘ NO") for row in self.rows]
        return str(page(table(header, rows)))


def compare_with_module(
    batch: StepperBatch | ppo_clip.WorkedExample | str | None = None,
) -> ModuleCheck:
    """Walk ``batch`` (default: the worked example) to its end and compare, exactly, with the
    module's ``ppo_clip_loss``, ``clip_fraction`` and ``ppo_clip_grad`` on its arguments."""
    batch = as_batch(batch)
    b, args = batch.breakdown, batch.arguments()
    rows = []
    for name, walked, function in (
        ("loss", b.partial_loss(b.n), ppo_clip.ppo_clip_loss),
        ("clip fraction", b.clip_fraction, ppo_clip.clip_fraction),
        ("gradient", b.grad, ppo_clip.ppo_clip_grad),
    ):
        shown = partial(vector, each=presented) if name == "gradient" else presented
        module = function(*args)
        rows.append((name, shown(walked), shown(module), bool(np.array_equal(walked, module))))
    return ModuleCheck(tuple(rows))
