"""Property tests: llm_clip against the independent reference, on random masked batches.

The reference is :mod:`llm_reference`: ``docs/contract.md`` ("llm_clip") written one response
and one token at a time in plain Python, exact from the float64 log-ratios on.  Batches mix nearby
log-probability pairs (ratios around the band), equal pairs (r = 1) and independent draws over
[-1000, 0] (ratios that overflow or vanish), zero advantages, and now and then advantages so
large that float64 overflows on the way, or -H and +H in one response, whose log-ratios cancel
past float64's digits; every objective, aggregation and KL setting; padding filled with NaN,
infinities or garbage.

The module's ratios come from numpy's ``exp``, the reference's from ``math.exp``: they may
differ in the last bit, so values are compared within a tolerance scaled by the log-ratios'
size, and a token whose ratio lies within 1e-9 of a clip edge (where a last bit decides the
clip) is left out of the gradient comparison.
"""

from __future__ import annotations

import math
import re
import sys

import llm_reference
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import llm_clip
from llm_clip import AGGREGATIONS, OBJECTIVES, SPECS

pytestmark = pytest.mark.filterwarnings("error")

EXAMPLES = settings(max_examples=200, deadline=None)
MAX_EXP_ARGUMENT = math.log(sys.float_info.max)  # about 709.78: exp overflows above it

LOGP = st.floats(-1000.0, 0.0)
NEARBY = st.floats(-1.0, 1.0)
ADVANTAGE = st.one_of(
    st.just(0.0), st.floats(1e-3, 10.0).flatmap(lambda a: st.sampled_from([a, -a]))
)
HUGE_ADVANTAGE = st.sampled_from([1e300, -1e300, 1.7e308, -1.7e308])  # r*A or the sum overflows
#: -H and +H as two log-probabilities of one response: its log-ratios' sum cancels past float64's
#: digits (-H - old_1 and H - old_2 round to -H and H, the exact sum keeps -old_1 - old_2).
CANCELLING = st.sampled_from([None, None, 2.0**60, 1e20, 1e308])


@st.composite
def batches(draw: st.DrawFn, objectives=OBJECTIVES, huge=True, max_eps_low=1.0) -> dict:
    """Keyword arguments of :func:`llm_clip.token_breakdown`: a random masked batch."""
    objective = draw(st.sampled_from(objectives))
    size, length = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    mask = np.array(draw(st.lists(st.booleans(), min_size=size * length, max_size=size * length)))
    mask = mask.reshape(size, length)
    token = st.integers(0, length - 1)
    mask[np.arange(size), draw(st.lists(token, min_size=size, max_size=size))] = True  # one each

    def log_probabilities(base: np.ndarray | None = None) -> np.ndarray:
        values = np.empty((size, length))
        kinds = st.sampled_from(
            ["independent"] if base is None else ["independent", "nearby", "equal"]
        )
        for index in np.ndindex(size, length):
            kind = draw(kinds)
            if kind == "independent":
                values[index] = draw(LOGP)
            else:
                values[index] = base[index] + (draw(NEARBY) if kind == "nearby" else 0.0)
        return values

    logp_old = log_probabilities()
    logp_new = log_probabilities(logp_old)
    huge_logp, row = draw(CANCELLING), draw(st.integers(0, size - 1))
    if huge_logp and mask[row].sum() >= 2:
        pair = st.sampled_from(np.flatnonzero(mask[row]).tolist())
        low, high = draw(st.lists(pair, min_size=2, max_size=2, unique=True))
        logp_new[row, low], logp_new[row, high] = -huge_logp, huge_logp
    spec = SPECS[objective]
    per_token = not spec.per_response and draw(st.booleans())
    count = size * length if per_token else size
    advantage = st.one_of(ADVANTAGE, HUGE_ADVANTAGE) if huge else ADVANTAGE
    advantages = np.array(draw(st.lists(advantage, min_size=count, max_size=count)))
    kl_coef = draw(st.sampled_from([0.0, 0.1, 1.0]))
    widest_low = 2.0 if spec.band == "log-ratio" else max_eps_low  # GMPO's floor e^-eps_low > 0
    band = {"eps_low": draw(st.floats(0.0, widest_low)), "eps_high": draw(st.floats(0.0, 2.0))}
    tau = st.one_of(st.floats(0.05, 5.0), st.just(1e-306))  # tau * r finite where r is not
    weight = st.one_of(st.just(0.0), st.floats(0.0, 5.0), st.just(1e200 if huge else 3.0))
    shape = draw(st.sampled_from([None, (size, 1), (size, length)]))
    weights = None
    if shape is not None:
        weights = np.array(
            draw(st.lists(weight, min_size=math.prod(shape), max_size=math.prod(shape)))
        )
    keep = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=size, max_size=size)))
    return {
        "rollout_weights": None if weights is None else weights.reshape(shape),
        "keep": keep,
        **({"tau_pos": draw(tau), "tau_neg": draw(tau)} if spec.tau else {}),
        **(band if spec.band else {"eps_low": None, "eps_high": None}),
        "logp_new": logp_new,
        "logp_old": logp_old,
        "advantages": advantages.reshape(size, length) if per_token else advantages,
        "mask": mask,
        "objective": objective,
        "aggregation": draw(st.sampled_from(AGGREGATIONS)),
        "max_len": draw(st.integers(int(mask.sum(axis=1).max()), 10)),  # no response longer
        "logp_ref": log_probabilities(logp_new) if kl_coef else None,
        "kl_coef": kl_coef,
    }


def log_ratios(batch: dict) -> np.ndarray:
    """Every exponent the module and the reference take ``exp`` of (token, sequence, k3's d),
    a response's mean exact (:func:`llm_reference.mean_gap`)."""
    mask = batch["mask"]
    token = np.where(mask, batch["logp_new"] - batch["logp_old"], 0.0)
    rows = zip(batch["logp_new"].tolist(), batch["logp_old"].tolist(), mask, strict=True)
    exponents = [token[mask], [llm_reference.mean_gap(*r, np.flatnonzero(m)) for *r, m in rows]]
    if batch["logp_ref"] is not None:
        exponents.append((batch["logp_ref"] - batch["logp_new"])[mask])
    return np.concatenate(exponents)


def relative_tolerance(exponents: np.ndarray, length: int) -> float:
    """The module's rounding relative to a value made from these exponents: float64's sum of a
    response's ``length`` log-ratios, each at most the largest exponent of an ordinary size (the
    drawn ``CANCELLING`` ones make ``exp`` 0 or inf on any machine, and their sums are exact)."""
    return 1e-12 * (1 + length * np.abs(exponents[np.abs(exponents) < 1e4]).max(initial=0.0))


def as_lists(batch: dict) -> dict:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in batch.items()}


#: CISPO's term sg[clip(r)] * A * logp_new underflows to a subnormal before its rollout weight
#: multiplies it (found by CI's hypothesis run): float64's, 2% from the exact value here.
SUBNORMAL_TERM = dict(
    logp_new=np.array([[-5e-324]]),
    logp_old=np.array([[0.0]]),
    advantages=np.array([4.9]),
    mask=np.ones((1, 1), bool),
    rollout_weights=np.array([[1e200]]),
    keep=None,
    objective="cispo",
    eps_low=0.2,
    eps_high=0.2,
    aggregation="token-mean",
    max_len=1,
    logp_ref=None,
    kl_coef=0.0,
)


@EXAMPLES
@given(batches())
@example(SUBNORMAL_TERM)
def test_loss_and_gradient_match_the_reference(batch):
    exponents = log_ratios(batch)
    # exp overflows at a threshold where numpy's and math's last bits may disagree
    assume(np.abs(np.abs(exponents) - MAX_EXP_ARGUMENT).min() > 1e-6)
    expected = llm_reference.loss_and_grad(**as_lists(batch))
    try:
        b = llm_clip.token_breakdown(**batch)
    except ValueError as error:  # an overflowed term and exp(logp_ref - logp_new) at one token
        assume("is undefined" not in str(error))  # inf - inf: refused, no value to compare
        raise
    assert not math.isnan(b.loss)
    assert not np.isnan(b.grad).any()
    rtol = relative_tolerance(exponents, batch["mask"].shape[1])
    # a ratio (CISPO: a log-probability) below 2.2e-308 is subnormal: a last-bit difference is
    # then 5e-324, not relative, and a rollout weight multiplies it after (docs/contract.md)
    weights = batch["rollout_weights"]
    largest_weight = 1.0 if weights is None else max(float(np.max(weights)), 1.0)
    atol = 1e-322 * np.abs(batch["advantages"]).max() * largest_weight
    if math.isinf(expected.loss):
        assert b.loss == expected.loss
    else:
        tolerance = rtol * expected.scale + atol * batch["mask"].sum()
        assert abs(b.loss - expected.loss) <= tolerance, (b.loss, expected.loss)
    grad, scale = np.array(expected.grad), np.array(expected.grad_scale)
    compared = batch["mask"] & ~np.array(expected.near_edge)
    infinite = np.isinf(grad) & compared
    np.testing.assert_array_equal(b.grad[infinite], grad[infinite])
    finite = compared & ~infinite
    assert (np.abs(b.grad[finite] - grad[finite]) <= rtol * scale[finite] + atol).all()
    assert (b.grad[~batch["mask"]] == 0).all()


@EXAMPLES
@given(batches(), st.sampled_from([np.nan, -np.inf, np.inf, 1e308, -3.0]))
def test_padding_is_never_read_and_inputs_are_never_changed(batch, filler):
    """Whatever the padding holds, every output is the same, bit for bit; the (read-only)
    inputs are unchanged."""
    assume(not (batch["mask"]).all())
    padded = dict(batch)
    for name in ("logp_new", "logp_old", "logp_ref", "advantages", "rollout_weights"):
        value = batch[name]
        if isinstance(value, np.ndarray) and value.shape == batch["mask"].shape:
            value = np.where(batch["mask"], value, filler)
            value.setflags(write=False)
            padded[name] = value
    copies = {k: v.copy() for k, v in padded.items() if isinstance(v, np.ndarray)}
    try:
        clean = llm_clip.token_breakdown(**batch)
    except ValueError as undefined:  # inf - inf at a token: refused whatever the padding holds
        with pytest.raises(ValueError, match=re.escape(str(undefined))):
            llm_clip.token_breakdown(**padded)
        return
    dirty = llm_clip.token_breakdown(**padded)
    for field in ("ratio", "is_clipped", "term", "kl", "weight", "grad", "rollout_weight"):
        np.testing.assert_array_equal(getattr(dirty, field), getattr(clean, field))
    assert dirty.loss == clean.loss
    arrays = (padded["logp_new"], padded["logp_old"], padded["advantages"], padded["mask"])
    options = {"objective": batch["objective"], "eps_low": batch["eps_low"]}
    assert llm_clip.clip_ratio_trl(*arrays, **options) == llm_clip.clip_ratio_trl(
        batch["logp_new"], batch["logp_old"], batch["advantages"], batch["mask"], **options
    )
    for name, copy in copies.items():
        np.testing.assert_array_equal(padded[name], copy)


@EXAMPLES
@given(batches([k for k, s in SPECS.items() if s.parts is SPECS["ppo"].parts], False, 0.99))
def test_verl_and_trl_count_the_same_tokens_where_the_ratio_is_per_token(batch):
    """For the objectives of PPO's per-token clip verl's ``pg_losses2 > pg_losses1`` is TRL's
    region (a sign-aware count; verl's [-20, 20] clamp does not reach a band with eps_low <=
    0.99), and CleanRL's sign-blind count is at least as large.  Not where ``A * r`` overflows:
    both of verl's products are then ``-inf`` and it counts no token, though the gradient is
    zeroed."""
    assume(not np.array(as_reference_edges(batch)).any())
    arrays = (batch["logp_new"], batch["logp_old"], batch["advantages"], batch["mask"])
    options = {k: batch[k] for k in ("objective", "eps_low", "eps_high")}
    verl = llm_clip.clip_fraction_verl(*arrays, **options)["actor/pg_clipfrac"]
    trl = llm_clip.clip_ratio_trl(*arrays, **options)
    assert verl == trl["clip_ratio/region_mean"]
    assert trl["clip_ratio/region_mean"] == pytest.approx(
        trl["clip_ratio/low_mean"] + trl["clip_ratio/high_mean"], abs=1e-15
    )
    if batch["eps_low"] == batch["eps_high"]:
        cleanrl = llm_clip.clip_fraction_cleanrl(*arrays[:2], batch["mask"], eps=batch["eps_low"])
        assert cleanrl["losses/clipfrac"] >= verl


def as_reference_edges(batch: dict) -> list[list[bool]]:
    return llm_reference.loss_and_grad(**{**as_lists(batch), "kl_coef": 0.0}).near_edge


@EXAMPLES
@given(
    st.integers(2, 5).flatmap(
        lambda size: st.tuples(
            st.just(size),
            st.lists(st.floats(-1e6, 1e6), min_size=size, max_size=4 * size).map(
                lambda rewards: rewards[: len(rewards) - len(rewards) % size]
            ),
        )
    ),
    st.booleans(),
)
def test_group_advantages_match_the_reference(group, scale_by_std):
    size, rewards = group
    assume(rewards)
    ours = llm_clip.group_advantages(rewards, size, scale_by_std=scale_by_std)
    expected = llm_reference.group_advantages(rewards, size, scale_by_std)
    spread = max(1.0, max(abs(r) for r in rewards))
    np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-9 * spread)


@EXAMPLES
@given(batches(huge=False), st.sampled_from(llm_clip.ROLLOUT_MODES), st.data())
def test_rollout_weights_and_off_policy_keep_match_the_reference(batch, mode, data):
    """TRL's importance weights and OPSM's keep on random masked batches whose padding holds
    NaN or infinities (the engine's log-probabilities are the batch's logp_new, nearby ones
    or independent ones)."""
    mask, old, engine = batch["mask"], batch["logp_old"], batch["logp_new"]
    bound = st.one_of(st.none(), st.floats(0.0, 4.0))
    clip_min, clip_max = sorted(data.draw(st.tuples(bound, bound)), key=lambda b: b is not None)
    if clip_min is not None and clip_max is not None and clip_min > clip_max:
        clip_min, clip_max = clip_max, clip_min
    filler = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    padded = [np.where(mask, x, filler) for x in (old, engine)]
    gaps, rows = np.where(mask, old - engine, 0.0), [np.flatnonzero(m) for m in mask]
    pairs = list(zip(old.tolist(), engine.tolist(), rows, strict=True))
    sums = np.array([[llm_reference.mean_gap(o, e, ts, mean=False)] for o, e, ts in pairs])
    exponents = np.concatenate([gaps.ravel(), sums[:, 0]])  # the sums exact, as the contract's
    assume(np.abs(np.abs(exponents) - MAX_EXP_ARGUMENT).min() > 1e-6)
    got = llm_clip.rollout_weights(*padded, mask, mode=mode, clip_min=clip_min, clip_max=clip_max)
    expected = np.array(
        llm_reference.rollout_weights(old.tolist(), engine.tolist(), mask.tolist(), mode,
                                      clip_min, clip_max)
    )  # fmt: skip
    assert got.shape == ((len(mask), 1) if mode.startswith("sequence") else mask.shape)
    rtol = relative_tolerance(exponents, mask.shape[1])
    edges = [b for b in (clip_min, clip_max) if b is not None]
    unsure = np.zeros(got.shape, dtype=bool)  # a raw weight within rounding of a bound
    with np.errstate(over="ignore"):
        raw = np.exp(sums if mode.startswith("sequence") else gaps)
    for edge in edges:
        unsure |= np.abs(raw - edge) <= 2 * rtol * max(edge, 1e-300)
    # a weight below 2.2e-308 is subnormal: a last-bit difference there is absolute, not relative
    np.testing.assert_allclose(got[~unsure], expected[~unsure], rtol=rtol, atol=1e-300)
    advantages = batch["advantages"] if batch["advantages"].ndim == 1 else batch["advantages"][:, 0]
    threshold = data.draw(st.floats(-2.0, 2.0))
    means = np.array([llm_reference.mean_gap(e, o, ts) for o, e, ts in pairs])
    assume(np.abs(means - threshold).min() > 1e-9 * (1 + np.abs(means).max()))
    keep = llm_clip.off_policy_keep(padded[1], padded[0], advantages, mask, threshold=threshold)
    assert keep.dtype == bool
    assert keep.tolist() == llm_reference.off_policy_keep(
        engine.tolist(), old.tolist(), advantages.tolist(), mask.tolist(), threshold
    )
