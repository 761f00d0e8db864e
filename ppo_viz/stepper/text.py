"""What the stepper says: the clip rule in a sample's own numbers, the card, the clip fractions.

Every number comes from the batch's :class:`ppo_clip.ClipBreakdown`, printed exactly by
:mod:`ppo_viz.numbers` (a ragged value gets a rounder form beside it): the card says what *this*
machine computed; on a projector (presentation mode) to four significant digits.  The sample
view is one template, :data:`SAMPLE_VIEW`, filled by markupsafe.
"""

from __future__ import annotations

import math

import numpy as np

from ppo_viz.html import Markup, table, tag
from ppo_viz.numbers import approx, exact_or_approx, listing, presented, vector
from ppo_viz.stepper.batch import StepperBatch, compare_with_module
from ppo_viz.style import presenting

#: The card's rows in bold: what the sample adds to the loss and the gradient.
BOLD = ("min keeps", "contribution to the loss", "gradient entry")

#: The sample view: the current sample's card next to the running totals.
SAMPLE_VIEW = Markup("""<div class="ppo ppo-row">
  <div class="ppo-card ppo-wide">
    <div class="ppo-title">Sample {t} <span class="ppo-muted">({seen} of {n} · {name})</span>
      <span class="ppo-badge {clipped_badge}">{badge}</span></div>
    {rows}
    <div class="ppo-note ppo-rule {clipped_note}">{rule}</div>
  </div>
  <div class="ppo-card">
    <div class="ppo-title">{totals_title}</div>
    <div>Kept terms of {samples}, summed: {kept_sum}</div>
    <div>Loss so far = −(1/{n}) × sum = {loss}</div>
    <div>Clipped so far: <b>{clipped}</b> of {seen} seen (samples: {clipped_samples})</div>
    <div>Gradient so far: <span class="ppo-num">{grad}</span></div>
    {ending}
  </div>
</div>""")


def clip_rule(advantage: float, ratio: float, lower: float, upper: float, clipped: bool) -> str:
    """The clipping rule written out with a sample's numbers, explaining the module's verdict.

    ``clipped`` is the module's verdict (``ClipBreakdown.is_clipped``).  A ratio a few units in
    the last place from an edge gets a note: rounding decided the verdict on this machine.

    >>> clip_rule(1.0, 1.4, 0.8, 1.2, True)[:47]
    'A = 1 > 0 and r = 1.4 > 1.2 = 1 + ε, so clipped'
    """
    if advantage == 0:
        infinite = " (even though r is infinite)" if math.isinf(ratio) else ""
        return (
            "A = 0, so not clipped: a sample with zero advantage is never clipped. Both candidate "
            f"terms are exactly 0, so it adds nothing to the loss and its gradient is 0{infinite}."
        )
    good = advantage > 0
    edge, name, past = (upper, "1 + ε", ">") if good else (lower, "1 − ε", "<")
    at = presented(edge)
    start = f"A = {presented(advantage)} {'>' if good else '<'} 0 and r = {presented(ratio)}"
    verdict = "so clipped" if clipped else "so not clipped"
    if ratio == edge:
        text = (
            f"{start} is exactly {name} = {at}, not {'above' if good else 'below'} it; "
            f"the comparison is strict (clipped only if r {past} {at}), {verdict}: "
            "the gradient stays on."
        )
    elif clipped:
        text = (
            f"{start} {past} {at} = {name}, {verdict}: the policy already made this "
            f"{'good action more' if good else 'bad action less'} likely than the band allows, "
            "so the min keeps the flat clip(r)·A and the gradient is switched off."
        )
    else:
        why = "r is inside the band, where r·A and clip(r)·A agree, and the gradient stays on."
        if not lower <= ratio <= upper:
            way, back = (
                ("fell below", "pulls r back up") if good else ("rose above", "pushes r back down")
            )
            why = (
                f"r {way} the band, the unfavourable way for a {'good' if good else 'bad'} "
                f"action, so the min keeps r·A and the full gradient {back}."
            )
        text = f"{start} {'<' if good else '>'} {at} = {name}, {verdict}: {why}"
        if math.isinf(ratio):
            text += " Here r·A is −inf, so the loss is +inf: the true float64 value, not an error."
    ulps = abs(float(ratio) - edge) / math.ulp(edge)  # inf for an edge at 0
    if 0 < ulps <= 4:
        text += (
            f" This r is {ulps:g} unit{'s' if ulps > 1 else ''} in the last place from the edge: "
            "rounding in exp and log decided the verdict here, and may land elsewhere on another "
            "machine."
        )
    return text


def sample_rows(batch: StepperBatch, t: int) -> list[tuple[str, float, str]]:
    """The card's rows for sample ``t``: ``(label, value, note)``, every value the module's."""
    b, a = batch.breakdown, float(batch.advantages[t])
    typed_new = typed_old = "typed as a log-probability"
    if batch.prob_new is not None and batch.prob_old is not None:
        typed_new = f"log of π_new = {presented(batch.prob_new[t])}"
        typed_old = f"log of π_old = {presented(batch.prob_old[t])}"
    smaller = "clip(r)·A" if b.objective_term[t] == b.clipped_term[t] else "r·A"
    kept = f"the smaller candidate, {smaller}"
    if b.unclipped_term[t] == b.clipped_term[t]:
        kept = "both candidates are " + ("0 (A = 0)" if a == 0 else "equal (r is in the band)")
    grad = f"∂L/∂log π_new = −r·A/N, N = {b.n}"
    if b.is_clipped[t] or a == 0:
        grad = "∂L/∂log π_new: " + ("clipped, so 0" if b.is_clipped[t] else "A = 0, so 0")
    candidate_2 = f"candidate 2, clip(r) {exact_or_approx(b.clipped_ratio[t])}"
    return [
        ("log π_old", batch.logp_old[t], typed_old),
        ("log π_new", batch.logp_new[t], typed_new),
        ("log-ratio", b.log_ratio[t], "log π_new − log π_old"),
        ("ratio r", b.ratio[t], "exp(log-ratio)"),
        ("advantage A", a, "used as given"),
        ("r·A", b.unclipped_term[t], "candidate 1: unclipped"),
        (f"clip(r, {presented(b.lower)}, {presented(b.upper)})·A", b.clipped_term[t], candidate_2),
        ("min keeps", b.objective_term[t], kept),
        ("contribution to the loss", b.loss_contribution[t], f"−(1/N) × kept, N = {b.n}"),
        ("gradient entry", b.grad[t], grad),
    ]


def number_html(value: float, *, strong: bool = False) -> Markup:
    """``value`` exactly, followed by a grey ``(≈ 0.6)`` where the exact value is ragged."""
    shown = tag("span", presented(value), classes="ppo-num ppo-strong" if strong else "ppo-num")
    short = None if presenting() else approx(value)
    if short is None:
        return shown
    return shown + "\u00a0" + tag("span", f"(≈\u00a0{short})", classes="ppo-num ppo-muted")


def sample_view_html(batch: StepperBatch, step: int) -> Markup:
    """The sample view at ``step``: its card, and the totals after samples ``0..step``.

    After the last sample the totals are the module's three numbers, and the view says whether
    they equal what :func:`compare_with_module` gets from the contract's functions.
    """
    b, seen = batch.breakdown, step + 1
    rows = [
        (label, number_html(value, strong=label in BOLD), tag("span", note, classes="ppo-muted"))
        for label, value, note in sample_rows(batch, step)
    ]
    clipped = np.flatnonzero(b.is_clipped[:seen])
    more = f"{b.n - seen} more to go; at sample {b.n - 1} these totals become the module's "
    ending = tag("div", more, "loss, clip fraction and gradient.", classes="ppo-muted")
    if seen == b.n:
        check = compare_with_module(batch)
        said = "✔ All three equal the module's ppo_clip_loss, clip_fraction and ppo_clip_grad "
        said = said + "exactly:" if check.all_equal else "✘ These totals differ from the module:"
        modules = [tag("div", f"{row[0]}: {row[2]}", classes="ppo-num") for row in check.rows]
        kind = "ppo-ok-note" if check.all_equal else "ppo-error-note"
        fraction = number_html(b.clip_fraction, strong=True)
        ending = tag("div", f"Clip fraction = {clipped.size}/{b.n} = ", fraction)
        ending += tag("div", tag("div", said), *modules, classes=f"ppo-note {kind}")
    is_clipped = bool(b.is_clipped[step])
    return SAMPLE_VIEW.format(
        t=step,
        seen=seen,
        name=batch.name,
        n=b.n,
        badge="clipped" if is_clipped else "not clipped",
        clipped_badge="ppo-clipped-badge" if is_clipped else "",
        rows=table([], rows, classes="ppo-key-value"),
        rule=clip_rule(b.advantages[step], b.ratio[step], b.lower, b.upper, is_clipped),
        clipped_note="ppo-clipped-note" if is_clipped else "",
        totals_title="Running totals" if seen < b.n else "Totals: the whole batch",
        samples="sample 0" if step == 0 else f"samples 0–{step}",
        kept_sum=number_html(float(np.sum(b.objective_term[:seen]))),
        loss=number_html(b.partial_loss(seen), strong=True),
        clipped=clipped.size,
        clipped_samples=listing(clipped),
        grad=vector(b.grad[:seen], unseen=b.n - seen, each=presented),
        ending=ending,
    )


def clip_fractions_html(batch: StepperBatch) -> Markup:
    """The two clip-fraction definitions on ``batch`` side by side, and whether they agree."""
    b = batch.breakdown
    only_band = np.flatnonzero(b.outside_band & ~b.is_clipped)
    verdict = "On this batch the two agree."
    if only_band.size:
        s = only_band.size > 1
        verdict = (
            f"They disagree: sample{'s' * s} {listing(only_band)} left the band the unfavourable "
            f"way for {'their' if s else 'its'} advantage's sign, so the min keeps r·A and the "
            f"gradient stays on, yet the sign-blind count calls {'them' if s else 'it'} clipped."
        )
    odd = "ppo-text-error" if only_band.size else "ppo-text-info"
    header = ["", "this project, TRL, verl", "SB3, CleanRL, OpenAI Baselines, Spinning Up"]
    shown = ((b.clip_fraction, "ppo-text-info"), (b.band_fraction, odd))
    values = [tag("span", presented(value), classes=f"ppo-big {colour}") for value, colour in shown]
    counted = (b.is_clipped, b.outside_band)
    samples = [f"{np.count_nonzero(m)} of {b.n}: {listing(np.flatnonzero(m))}" for m in counted]
    rows = [
        [
            "counts",
            "clip_fraction: switched-off gradients, A > 0 and r > 1+ε or A < 0 and r < 1−ε",
            "clipfrac: ratios outside the band, whatever A's sign: mean(|r − 1| > ε)",
        ],
        ["value", *values],
        ["samples", *samples],
    ]
    caption = tag("span", "Two clip fractions on this batch", classes="ppo-title")
    advice = " Compare logged clip fractions of two codes only once you know which they compute."
    return tag("div", table(header, rows, caption=caption), verdict, advice, classes="ppo ppo-card")
