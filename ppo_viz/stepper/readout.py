"""What the stepper says about a sample and about the walk so far, as data and sentences.

* :func:`sample_readout` lists every quantity of one sample, each read from
  the batch's :class:`ppo_clip.ClipBreakdown`, with a note on where it comes
  from, and the clipping rule written out with the sample's own numbers
  (:func:`clip_rule`).
* :func:`running_totals` is the walk after samples ``0..t``: the loss so
  far, the clipped samples and the gradient entries seen.  At the last
  sample these are the module's loss, clip fraction and gradient, bit for
  bit; :func:`compare_with_module` shows it.
* :func:`clip_fractions_verdict` says whether the two clip-fraction
  definitions agree on a batch, and why not.

:mod:`ppo_viz.stepper.cards` renders all of this as HTML.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import ppo_clip
from ppo_viz.html import Markup, page, table, tag
from ppo_viz.numbers import exact, exact_or_approx, listing, vector
from ppo_viz.stepper.batch import FloatArray, StepperBatch, checked_step

__all__ = [
    "ModuleCheck",
    "ReadoutRow",
    "RunningTotals",
    "SampleReadout",
    "clip_fractions_verdict",
    "clip_rule",
    "compare_with_module",
    "running_totals",
    "sample_readout",
]


# --------------------------------------------------------------------------
# One sample
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadoutRow:
    """One number of the readout: ``key`` for code, ``label`` and ``note`` for the reader.

    ``value`` is the number exactly as the module gave it.
    """

    key: str
    label: str
    value: float
    note: str


@dataclass(frozen=True)
class SampleReadout:
    """Everything the card says about sample ``step`` of ``n``.

    ``rows`` are the numbers in reading order; ``kept`` names the candidate
    the ``min`` kept (``"r·A"``, ``"clip(r)·A"`` or ``"both"``);
    ``is_clipped`` is the module's verdict and ``rule`` explains it.
    """

    step: int
    n: int
    rows: tuple[ReadoutRow, ...]
    kept: str
    is_clipped: bool
    rule: str

    def __getitem__(self, key: str) -> float:
        """The value of the row named ``key`` (``readout["ratio"]``)."""
        for row in self.rows:
            if row.key == key:
                return row.value
        raise KeyError(key)


def sample_readout(batch: StepperBatch, step: int) -> SampleReadout:
    """The readout of sample ``step``: every value read from the batch's breakdown."""
    t = checked_step(batch, step)
    b, n = batch.breakdown, batch.n
    advantage = float(b.advantages[t])
    kept = _kept_candidate(b, t)
    new_note = old_note = "typed as a log-probability"
    if batch.prob_new is not None and batch.prob_old is not None:
        new_note = f"log of π_new = {exact(batch.prob_new[t])}"
        old_note = f"log of π_old = {exact(batch.prob_old[t])}"
    if kept == "both":
        kept_note = "both candidates are " + (
            "0 (A = 0)" if advantage == 0 else "equal (r is in the band)"
        )
    else:
        kept_note = f"the smaller candidate, {kept}"
    if b.is_clipped[t]:
        grad_note = "∂L/∂log π_new: clipped, so switched off"
    elif advantage == 0:
        grad_note = "∂L/∂log π_new: A = 0, so none"
    else:
        grad_note = f"∂L/∂log π_new = −r·A/N, N = {n}"
    band = f"clip(r, {exact(b.lower)}, {exact(b.upper)})"
    rows = (
        ReadoutRow("logp_old", "log π_old", float(batch.logp_old[t]), old_note),
        ReadoutRow("logp_new", "log π_new", float(batch.logp_new[t]), new_note),
        ReadoutRow("log_ratio", "log-ratio", float(b.log_ratio[t]), "log π_new − log π_old"),
        ReadoutRow("ratio", "ratio r", float(b.ratio[t]), "exp(log-ratio)"),
        ReadoutRow("advantage", "advantage A", advantage, "used as given"),
        ReadoutRow("unclipped_term", "r·A", float(b.unclipped_term[t]), "candidate 1: unclipped"),
        ReadoutRow(
            "clipped_term",
            f"{band}·A",
            float(b.clipped_term[t]),
            f"candidate 2, clip(r) {exact_or_approx(b.clipped_ratio[t])}",
        ),
        ReadoutRow("kept_term", "min keeps", float(b.objective_term[t]), kept_note),
        ReadoutRow(
            "contribution",
            "contribution to the loss",
            float(b.loss_contribution[t]),
            f"−(1/N) × kept, N = {n}",
        ),
        ReadoutRow("grad", "gradient entry", float(b.grad[t]), grad_note),
    )
    is_clipped = bool(b.is_clipped[t])
    rule = clip_rule(advantage, float(b.ratio[t]), b.lower, b.upper, is_clipped)
    return SampleReadout(step, n, rows, kept, is_clipped, rule)


def _kept_candidate(b: ppo_clip.ClipBreakdown, t: int) -> str:
    """Which candidate the min kept, read off the module's three terms."""
    if b.unclipped_term[t] == b.clipped_term[t]:
        return "both"
    return "clip(r)·A" if b.objective_term[t] == b.clipped_term[t] else "r·A"


def clip_rule(advantage: float, ratio: float, lower: float, upper: float, clipped: bool) -> str:
    """The clipping rule written out with the actual numbers and the strict comparison.

    ``clipped`` is the module's verdict (``ClipBreakdown.is_clipped``); the
    sentence explains it, for example ``"A = 1 > 0 and r = 1.4 > 1.2 = 1 + ε,
    so clipped: ..."``.
    """
    if advantage == 0:
        return (
            "A = 0, so not clipped: a sample with zero advantage is never clipped. Both "
            "candidate terms are exactly 0, so it adds nothing to the loss and its gradient is 0"
            + (" (even though r is infinite)." if math.isinf(ratio) else ".")
        )
    verdict = "so clipped" if clipped else "so not clipped"
    positive = advantage > 0
    # The band's edge on the favourable side, and the comparisons that go past it or not.
    if positive:
        edge, edge_name, past, short_of, side = upper, "1 + ε", ">", "<", "above"
    else:
        edge, edge_name, past, short_of, side = lower, "1 − ε", "<", ">", "below"
    start = f"A = {exact(advantage)} {'>' if positive else '<'} 0 and r = {exact(ratio)}"
    if ratio > upper if positive else ratio < lower:
        action = "good action more likely" if positive else "bad action less likely"
        return (
            f"{start} {past} {exact(edge)} = {edge_name}, {verdict}: the policy already made "
            f"this {action} than the band allows, so the min keeps the flat clip(r)·A and the "
            "gradient is switched off."
        )
    if ratio == edge:
        return (
            f"{start} is exactly {edge_name} = {exact(edge)}, not {side} it; the comparison is "
            f"strict (clipped only if r {past} {exact(edge)}), {verdict}: the gradient stays on."
        )
    comparison = f"{start} {short_of} {exact(edge)} = {edge_name}, {verdict}"
    if lower <= ratio <= upper:
        return (
            f"{comparison}: r is inside the band, where r·A and clip(r)·A agree, and the "
            "gradient stays on."
        )
    if positive:
        return (
            f"{comparison}: r fell below the band, the unfavourable way for a good action, so "
            "the min keeps r·A and the full gradient pulls r back up."
        )
    overflow = (
        " Here r·A is −inf, so the loss is +inf: the true float64 value, not an error."
        if math.isinf(ratio)
        else ""
    )
    return (
        f"{comparison}: r rose above the band, the unfavourable way for a bad action, so the "
        "min keeps r·A and the full gradient pushes r back down." + overflow
    )


# --------------------------------------------------------------------------
# The walk so far
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningTotals:
    """The walk after samples ``0..step`` of ``n``.

    ``loss`` is ``-(1/N) * kept_sum``, computed as the module computes its
    loss, so at the last step it is :func:`ppo_clip.ppo_clip_loss` bit for
    bit; ``clip_fraction`` is the module's, once every sample is seen (None
    before).
    """

    step: int
    n: int
    kept_sum: float
    loss: float
    clipped_samples: tuple[int, ...]
    grad: FloatArray
    clip_fraction: float | None

    @property
    def seen(self) -> int:
        """How many samples the walk has seen."""
        return self.step + 1

    @property
    def complete(self) -> bool:
        """Whether every sample has been seen."""
        return self.seen == self.n


def running_totals(batch: StepperBatch, step: int) -> RunningTotals:
    """Loss, clipped samples and gradient entries after samples ``0..step``."""
    seen = checked_step(batch, step) + 1
    b = batch.breakdown
    return RunningTotals(
        step=step,
        n=batch.n,
        kept_sum=float(np.sum(b.objective_term[:seen])),
        loss=b.partial_loss(seen),
        clipped_samples=tuple(int(i) for i in np.flatnonzero(b.is_clipped[:seen])),
        grad=b.grad[:seen].copy(),
        clip_fraction=b.clip_fraction if seen == batch.n else None,
    )


@dataclass(frozen=True)
class ModuleCheck:
    """The walk's final totals next to the contract's three functions on the same batch.

    Each row is ``(quantity, the walk's value, the module's value, equal?)``,
    the values as exact text.
    """

    rows: tuple[tuple[str, str, str, bool], ...]

    @property
    def all_equal(self) -> bool:
        """Whether all three agree exactly."""
        return all(equal for *_, equal in self.rows)

    def _repr_html_(self) -> str:
        return str(page(self.html()))

    def html(self) -> Markup:
        """The comparison as a table."""
        return table(
            ["quantity", "stepper, after the last sample", "ppo_clip", "equal?"],
            [
                (name, tag("code", walked), tag("code", module), "✔ yes" if equal else "✘ NO")
                for name, walked, module, equal in self.rows
            ],
        )

    def __repr__(self) -> str:
        width = max(len(name) for name, *_ in self.rows)
        return "\n".join(
            f"{name:<{width}}  stepper {walked}  ppo_clip {module}  {'equal' if eq else 'DIFFER'}"
            for name, walked, module, eq in self.rows
        )


def compare_with_module(
    batch: StepperBatch | ppo_clip.WorkedExample | None = None,
) -> ModuleCheck:
    """Walk ``batch`` to its last sample and compare the totals with the module's functions.

    Equality is exact (``==`` on floats, ``array_equal`` on the gradient).
    ``batch`` defaults to the worked example; a :class:`ppo_clip.WorkedExample`
    is accepted too.
    """
    if batch is None:
        batch = ppo_clip.worked_example()
    if isinstance(batch, ppo_clip.WorkedExample):
        batch = StepperBatch(*batch)
    if not isinstance(batch, StepperBatch):
        raise TypeError(
            f"batch must be a StepperBatch, a WorkedExample or None, got {type(batch).__name__}"
        )
    totals = running_totals(batch, batch.n - 1)
    args = batch.arguments()
    loss = ppo_clip.ppo_clip_loss(*args)
    fraction = ppo_clip.clip_fraction(*args)
    grad = ppo_clip.ppo_clip_grad(*args)
    walked_fraction = totals.clip_fraction
    return ModuleCheck(
        rows=(
            ("loss", exact(totals.loss), exact(loss), totals.loss == loss),
            (
                "clip fraction",
                exact(walked_fraction) if walked_fraction is not None else "none",
                exact(fraction),
                walked_fraction == fraction,
            ),
            (
                "gradient",
                vector(totals.grad),
                vector(grad),
                bool(np.array_equal(totals.grad, grad)),
            ),
        )
    )


def clip_fractions_verdict(batch: StepperBatch) -> str:
    """Whether the two clip-fraction definitions agree on ``batch``, and if not, why.

    Every sample the project counts is also outside the band, so the two can
    only differ by samples that left the band the unfavourable way.
    """
    b = batch.breakdown
    only_band = np.flatnonzero(b.outside_band & ~b.is_clipped)
    if only_band.size == 0:
        return "On this batch the two agree."
    several = only_band.size > 1
    return (
        f"They disagree: sample{'s' if several else ''} {listing(only_band)} left the band "
        f"the unfavourable way for {'their' if several else 'its'} advantage's sign, so the "
        "min keeps r·A and the gradient stays on, yet the sign-blind count calls "
        f"{'them' if several else 'it'} clipped."
    )
