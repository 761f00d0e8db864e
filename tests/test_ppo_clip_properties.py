"""Property tests: ppo_clip against the project's plain-Python reference of the contract.

The reference is :mod:`reference` (``tests/``): the ``math`` module only (no numpy), written
from the contract in docs/contract.md ("ppo_clip") sentence by sentence (ratio, clipped
ratio, the two candidate terms, the kept term, whether the sample is clipped, its gradient),
plus an exactly rounded sum for the loss.

numpy's ``exp`` and ``math.exp`` may differ in the last bit, so each batch is checked twice:
the module's ratios must be within 2 units in the last place of ``math.exp``, and then every
per-sample quantity must equal, bit for bit, what the reference gives *for the module's
ratios*.  The loss is compared with the reference's own ratios, to a tolerance that covers
summation order only.

Batches are drawn from a mix of sample kinds over the whole contract range: independent
log-probabilities in [-1000, 0] (ratios that overflow or underflow), nearby pairs (ratios
near the band), equal pairs (r == 1), pairs built to land on ``1 +- eps``, and pairs whose
ratio is huge but finite, times advantages that include 0.  N is biased to small sizes but
reaches 4096; one test goes beyond it with positive log-densities.  Half the batches also take
clip_breakdown's variant (asymmetric bounds, a dual-clip cap), checked against the reference's
variant.  ``ratio_sweep`` builds the same breakdown for a batch of one at each ratio: its
textbook curves are test_ppo_clip.py's ``SWEEPS``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pytest
import reference
from helpers import assert_loss_as_promised, log_landing_on
from hypothesis import currently_in_test_context, event, given, settings
from hypothesis import strategies as st

import ppo_clip

pytestmark = pytest.mark.filterwarnings("error")

#: Example counts sized so that the module's three test files run in about 10 s (25 s budget).
EXAMPLES = settings(max_examples=150, deadline=None)
FEW_EXAMPLES = settings(max_examples=30, deadline=None)

LOGP_LOW, LOGP_HIGH = -1000.0, 0.0
MAX_EXP_ARGUMENT = math.log(sys.float_info.max)  # about 709.78: exp overflows above it
#: The per-sample quantities the breakdown and the reference share (the ratio is an input).
PER_SAMPLE = reference.Sample._fields[1:]


def reference_samples(
    ratios: Sequence[float], advantages: Sequence[float], eps: float, n: int, **variant
) -> list[reference.Sample]:
    """The reference's samples for these ratios (the module's own, so the rest is exact)."""
    return [
        reference.sample(r, a, n, eps, **variant) for r, a in zip(ratios, advantages, strict=True)
    ]


def per_sample(samples: list[reference.Sample]) -> dict[str, list]:
    """The reference's per-sample quantities, one list per quantity."""
    return {name: [getattr(sample, name) for sample in samples] for name in PER_SAMPLE}


# --------------------------------------------------------------------------
# Drawing batches
# --------------------------------------------------------------------------

Uniform = Callable[[float, float], float]

WIDE_KINDS = (
    "independent",
    "near",
    "equal",
    "upper_edge",
    "lower_edge",
    "overflow",
    "huge_finite",
    "underflow",
)
NARROW_KINDS = ("independent", "near", "equal", "upper_edge", "lower_edge")
ADVANTAGE_KINDS = ("zero", "unit", "small", "large")


def make_log_probs(kind: str, eps: float, uniform: Uniform, low: float, high: float) -> tuple:
    """(logp_new, logp_old) in [low, high] of one kind.

    ``uniform(a, b)`` draws one float (hypothesis) or an array of them (seeded batches);
    this only generates data, so numpy is fine here.
    """
    if kind == "independent":
        return uniform(low, high), uniform(low, high)
    if kind == "near":
        logp_old = uniform(low, high)
        return np.clip(logp_old + uniform(-1.0, 1.0), low, high), logp_old
    if kind == "equal":
        logp = uniform(low, high)
        return logp, logp
    if kind == "upper_edge":  # ratio 1 + eps, up to rounding (exactly, when logp_new == 0)
        logp_new = uniform(low + 1.0, high)
        return logp_new, logp_new - math.log(1.0 + eps)
    if kind == "lower_edge":  # ratio 1 - eps, up to rounding; 0 == 1 - eps when eps == 1
        logp_old = uniform(low + 40.0, high)
        if eps == 1.0:
            return low, logp_old
        return logp_old + math.log(1.0 - eps), logp_old
    if kind == "overflow":  # log-ratio above 709.78: exp gives inf
        return uniform(high - 10.0, high), uniform(low, low + 280.0)
    if kind == "huge_finite":  # log-ratio 700..709.7: r up to 1.7e308, r * A may overflow
        logp_old = uniform(low, low + 280.0)
        return logp_old + uniform(700.0, 709.7), logp_old
    if kind == "underflow":  # log-ratio below -745: exp gives 0
        return uniform(low, low + 100.0), uniform(high - 100.0, high)
    raise AssertionError(kind)


def make_advantage(kind: str, uniform: Uniform):
    if kind == "zero":
        return np.copysign(0.0, uniform(-1.0, 1.0))
    if kind == "unit":
        return np.copysign(1.0, uniform(-1.0, 1.0))
    if kind == "small":
        return uniform(-10.0, 10.0)
    return uniform(-1e4, 1e4)


class DrawnBatch(NamedTuple):
    logp_new: list[float]
    logp_old: list[float]
    advantages: list[float]
    eps: float

    @property
    def n(self) -> int:
        return len(self.advantages)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.array(values, dtype=np.float64) for values in self[:3])


EPS = st.one_of(st.sampled_from([0.0, 1.0, 0.2, 0.1, 0.3]), st.floats(0.0, 1.0))
CAPS = st.one_of(st.none(), st.floats(1.0, 10.0, exclude_min=True))
#: None (the contract's symmetric band) or clip_breakdown's variant: bounds and a cap.
VARIANTS = st.one_of(
    st.just({}), st.fixed_dictionaries({"eps_low": EPS, "eps_high": EPS, "dual_clip": CAPS})
)


@st.composite
def samples(draw, eps: float, kinds=WIDE_KINDS, low=LOGP_LOW, high=LOGP_HIGH):
    """One (logp_new, logp_old, advantage), every number drawn (and shrunk) by hypothesis."""

    def uniform(a: float, b: float) -> float:
        return draw(st.floats(a, b))

    kind = draw(st.sampled_from(kinds))
    logp_new, logp_old = make_log_probs(kind, eps, uniform, low, high)
    advantage = make_advantage(draw(st.sampled_from(ADVANTAGE_KINDS)), uniform)
    return float(logp_new), float(logp_old), float(advantage)


def seeded_samples(seed: int, n: int, eps: float, kinds, low: float, high: float) -> list:
    """[logp_new, logp_old, advantages] of n samples of the given kinds, from a seed."""
    rng = np.random.default_rng(seed)
    columns = np.empty((3, n))
    kind_of_sample = rng.integers(len(kinds), size=n)
    advantage_kind_of_sample = rng.integers(len(ADVANTAGE_KINDS), size=n)
    for number, kind in enumerate(kinds):
        rows = np.flatnonzero(kind_of_sample == number)
        columns[0, rows], columns[1, rows] = make_log_probs(
            kind, eps, lambda a, b, m=rows.size: rng.uniform(a, b, m), low, high
        )
    for number, kind in enumerate(ADVANTAGE_KINDS):
        rows = np.flatnonzero(advantage_kind_of_sample == number)
        columns[2, rows] = make_advantage(kind, lambda a, b, m=rows.size: rng.uniform(a, b, m))
    return columns.tolist()


@st.composite
def batches(draw, sizes=None, kinds=WIDE_KINDS, low=LOGP_LOW, high=LOGP_HIGH):
    """A batch; small ones sample by sample, large ones seeded plus drawn special samples."""
    if sizes is None:
        sizes = st.one_of(st.integers(1, 8), st.integers(1, 64), st.integers(1, 4096))
    eps = draw(EPS)
    n = draw(sizes)
    # each batch mixes a few kinds, so some batches have no overflow and a finite loss
    kinds = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=4, unique=True))
    if n <= 64:
        drawn = draw(st.lists(samples(eps, kinds, low, high), min_size=n, max_size=n))
        columns = [list(column) for column in zip(*drawn, strict=True)]
    else:
        columns = seeded_samples(draw(st.integers(0, 2**32 - 1)), n, eps, kinds, low, high)
        specials = st.tuples(st.integers(0, n - 1), samples(eps, kinds, low, high))
        for index, sample in draw(st.lists(specials, max_size=8)):
            for column, value in zip(columns, sample, strict=True):
                column[index] = value
    logp_new, logp_old, advantages = columns
    return DrawnBatch(logp_new, logp_old, advantages, eps)


# --------------------------------------------------------------------------
# Checks shared by the tests
# --------------------------------------------------------------------------


def assert_ratio_close_to_math_exp(got: float, expected: float, log_ratio: float) -> None:
    """numpy's exp may differ from math.exp in the last bit, never by more."""
    if math.isinf(expected) or math.isinf(got):
        if expected != got:  # only right at the overflow threshold may the two disagree
            assert abs(log_ratio - MAX_EXP_ARGUMENT) < 1e-12, (got, expected)
        return
    assert abs(got - expected) <= 2 * math.ulp(expected), (got, expected)


def note(text: str) -> None:
    """hypothesis's ``event``; a named case (no hypothesis test) has none to record."""
    if currently_in_test_context():
        event(text)


def check_batch_against_reference(batch: DrawnBatch, variant: dict | None = None) -> None:
    """Per sample the reference's, on the module's ratios; the loss as promised; with a
    variant (bounds and a cap), the breakdown; without, the contract functions too."""
    arrays = batch.arrays()
    eps, n = batch.eps, batch.n
    if variant:
        breakdown = ppo_clip.clip_breakdown(*arrays, eps, **variant)
        samples = reference_samples(breakdown.ratio.tolist(), batch.advantages, eps, n, **variant)
        for name, column in per_sample(samples).items():
            assert getattr(breakdown, name).tolist() == column, name
        assert breakdown.clip_fraction == sum(sample.is_clipped for sample in samples) / n
        note(f"variant: {assert_loss_as_promised(breakdown.loss, batch, samples, **variant)}")
        return

    breakdown = ppo_clip.clip_breakdown(*arrays, eps)
    loss = ppo_clip.ppo_clip_loss(*arrays, eps)
    fraction = ppo_clip.clip_fraction(*arrays, eps)
    grad = ppo_clip.ppo_clip_grad(*arrays, eps)

    assert type(loss) is float
    assert type(fraction) is float
    assert grad.dtype == np.float64
    assert grad.shape == (n,)

    ratios = breakdown.ratio.tolist()
    own_samples = reference.batch(*batch)  # the reference's own ratios, from math.exp
    for ratio, own, new, old in zip(ratios, own_samples, *batch[:2], strict=True):
        if ratio != own.ratio:
            assert_ratio_close_to_math_exp(ratio, own.ratio, new - old)

    # every per-sample quantity, bit for bit, for the module's ratios (NaN never equals)
    samples = reference_samples(ratios, batch.advantages, eps, n)
    expected = per_sample(samples)
    for name, column in expected.items():
        assert getattr(breakdown, name).tolist() == column, name
    assert grad.tolist() == expected["grad"]
    assert fraction == sum(expected["is_clipped"]) / n
    assert breakdown.clip_fraction == fraction

    # the loss, on the module's ratios; the textbook functions equal the breakdown's and the
    # variants' general form (symmetric bounds, no cap) bit for bit
    note(assert_loss_as_promised(loss, batch, samples))
    general = ppo_clip.clip_breakdown(*arrays, 0.5, eps_low=eps, eps_high=eps, dual_clip=None)
    for result in (breakdown, general):
        assert result.loss == loss
        assert result.clip_fraction == fraction
        assert result.grad.tobytes() == grad.tobytes()
    assert ppo_clip.surrogate_loss(*arrays, eps) == loss
    assert ppo_clip.surrogate_grad(*arrays, eps).tobytes() == grad.tobytes()

    note(f"N {'1' if n == 1 else '<= 64' if n <= 64 else '> 64'}")
    if math.isinf(loss):
        note("loss is +inf")
    on_edge = any(
        (advantage > 0 and ratio == 1.0 + eps) or (advantage < 0 and ratio == 1.0 - eps)
        for ratio, advantage in zip(ratios, batch.advantages, strict=True)
    )
    if on_edge:
        note("a ratio exactly on the edge it would clip past")
    if any(expected["is_clipped"]) and not all(expected["is_clipped"]):
        note("some but not all samples clipped")


# --------------------------------------------------------------------------
# The properties
# --------------------------------------------------------------------------


@EXAMPLES
@given(batch=batches(), variant=VARIANTS)
def test_matches_the_plain_python_reference(batch, variant):
    with np.errstate(all="raise"):  # the module never depends on the caller's error state
        check_batch_against_reference(batch, variant)


# Every sample is checked in plain Python, so the sizes stay just above 4096 but for one
# batch in ten.
LARGE_SIZES = st.integers(0, 9).flatmap(
    lambda tenth: st.integers(4601, 8192) if tenth == 0 else st.integers(4097, 4600)
)


@FEW_EXAMPLES
@given(
    batch=batches(
        sizes=LARGE_SIZES,
        kinds=NARROW_KINDS,
        low=-60.0,
        high=60.0,
    )
)
def test_more_than_4096_samples_and_positive_log_densities_match_the_reference(batch):
    check_batch_against_reference(batch)


# --------------------------------------------------------------------------
# The contract's named edges: each a batch checked as a drawn one is, and which samples clip
# --------------------------------------------------------------------------

#: Log-ratios whose exp lands exactly on the band's edges at eps = 0.2, on this machine.
LOG_1_2, LOG_0_8 = log_landing_on(1.2), log_landing_on(0.8)
SIX = (np.log([1.25, 1.25, 0.75, 0.75, 1.3, 0.85]).tolist(), [0.0] * 6, [1, -1, -1, 1, 1, -1])
FOUR = (np.log([5.0, 2.0, 5.0, 0.5]).tolist(), [0.0] * 4, [-1.0, -1.0, 1.0, -1.0])
A_ZERO = ([-1000.0, math.log(0.5), 0.0, math.log(2.0), 0.0], [0.0] * 4 + [-1000.0],
          [0.0, 0.0, -0.0, 0.0, 0.0])  # fmt: skip
#: name: (logp_new, logp_old, advantages, eps, clip_breakdown's variant, which samples clip)
NAMED_EDGES = {
    # one ratio beyond float64: inf (or 0); r = e^709 is finite but r * A overflows
    "overflowed ratio, A = 0: adds exactly 0": ([0.0], [-1000.0], [0.0], 0.2, {}, [False]),
    "overflowed ratio, A > 0: clipped": ([0.0], [-1000.0], [3.0], 0.2, {}, [True]),
    "overflowed ratio, A < 0: the loss +inf": ([0.0], [-1000.0], [-0.5], 0.2, {}, [False]),
    "r * A overflows, A < 0: the loss +inf": ([0.0], [-709.0], [-10.0], 0.2, {}, [False]),
    "r * A overflows, A > 0: clipped": ([0.0], [-709.0], [10.0], 0.2, {}, [True]),
    "underflowed ratio, A < 0: clipped": ([-1000.0], [0.0], [-2.0], 0.2, {}, [True]),
    "underflowed ratio, A > 0": ([-1000.0], [0.0], [2.0], 0.2, {}, [False]),
    "an overflowed ratio with A = 0 beside another sample": (
        [0.0, math.log(1.1)], [-1000.0, 0.0], [0.0, 2.0], 0.2, {}, [False, False]),
    "log-probabilities too far apart for float64": (
        [1e308, -1e308], [-1e308, 1e308], [-1.0, 1.0], 0.2, {}, [False, False]),
    # the boundary: 1.2 from a positive log-probability and from one in range, 0.8 with A < 0
    "a ratio exactly on an edge is not clipped": (
        [LOG_1_2, 0.0, LOG_0_8, 0.0], [0.0, -LOG_1_2, 0.0, 0.0], [2.0, 2.0, -3.0, 0.5], 0.2, {},
        [False] * 4),
    "one step past the edge is clipped": ([LOG_1_2 + 1e-15], [0.0], [1.0], 0.2, {}, [True]),
    # A > 0 with r < 1 - eps and A < 0 with r > 1 + eps keep their full gradient
    "moves that make the objective worse are never clipped": (
        [math.log(0.3), math.log(3.0)], [0.0, 0.0], [1.0, -1.0], 0.2, {}, [False, False]),
    **{f"A == 0 is never clipped, eps = {eps}": (*A_ZERO, eps, {}, [False] * 5)
       for eps in (0.0, 0.2, 1.0)},
    "eps = 0 clips every favourable move but not r == 1": (
        [-3.0, -3.0 + 1e-9, -3.0 - 1e-9, -3.0 - 1e-9, -3.0 + 1e-9, -3.0], [-3.0] * 6,
        [1.0, 1.0, -1.0, 1.0, -1.0, -1.0], 0.0, {}, [False, True, True, False, False, False]),
    # 1 - eps = 0: even a ratio that underflowed to exactly 0 is not below it (strict)
    "eps = 1 never clips a negative advantage": (
        [-1000.0, -50.0, math.log(0.01), math.log(3.0)], [0.0] * 4, [-1.0, -2.0, -0.5, 1.0], 1.0,
        {}, [False, False, False, True]),
    # asymmetric bounds move each edge alone; a dual-clip cap c clips A < 0 above c
    "symmetric": (*SIX, 0.2, {}, [True, False, True, False, True, False]),
    "eps_high": (*SIX, 0.2, {"eps_high": 0.28}, [False, False, True, False, True, False]),
    "eps_low": (*SIX, 0.2, {"eps_low": 0.1}, [True, False, True, False, True, True]),
    "eps_low and eps_high override eps": (
        *SIX, 0.5, {"eps_low": 0.2, "eps_high": 0.2}, [True, False, True, False, True, False]),
    "without a cap": (*FOUR, 0.2, {}, [False, False, True, True]),
    "a dual-clip cap": (*FOUR, 0.2, {"dual_clip": 3.0}, [True, False, True, True]),
    "a dual-clip cap tames an overflowed ratio": (
        [0.0, 0.0], [-1000.0, -1000.0], [-2.0, 0.0], 0.2, {"dual_clip": 3.0}, [True, False]),
    # where float64 overflows on the way to a finite loss: the exact loss rounded once
    "the issue's case: four terms of +-1.7e308 cancel exactly, the loss is -1/5": (
        [0.0] * 5, [0.0] * 5, [1.7e308, 1.0, 1.7e308, -1.7e308, -1.7e308], 0.2, {}, [False] * 5),
    "issue 16's case: 1.2 * 1.7e308 and r * -1.7e308 are +-inf, their mean is finite": (
        [0.0, 0.0], [-0.5, -0.5], [1.7e308, -1.7e308], 0.2, {}, [True, False]),
    "two terms of about -1.35e308: their float64 sum overflows, the mean does not": (
        [0.0, 0.0], [-709.5, -709.5], [-1.0, -1.0], 0.2, {}, [False, False]),
    # found in CI
    "an overflowed ratio times the tiniest negative advantage is +inf": (
        [0.0], [-710.0], [-5e-324], 0.0, {}, [False]),
    "the test's own mean of subnormal terms underflows (under the caller's raise)": (
        [0.0, -1.0], [0.0, 0.0], [0.0, 1.1125369292536007e-308], 0.0, {}, [False, False]),
    "ulp-down: r = e^709 times A = -3 overflows as a float product, r * 3 / 2 does not": (
        [0.0, -145.0], [0.0, -854.0], [0.0, -3.0], 0.2,
        {"eps_low": 0.0, "eps_high": 0.0, "dual_clip": None}, [False, False]),
    "test_numerics: r = e^709.5 with A = -2 and a band of width 0": (
        [0.0, 0.0], [0.0, -709.5], [0.0, -2.0], 0.2,
        {"eps_low": 0.0, "eps_high": 0.0, "dual_clip": None}, [False, False]),
}  # fmt: skip


@pytest.mark.parametrize(
    ("logp_new", "logp_old", "advantages", "eps", "variant", "clipped"),
    NAMED_EDGES.values(),
    ids=NAMED_EDGES,
)
def test_the_contracts_named_edges_match_the_reference(
    logp_new, logp_old, advantages, eps, variant, clipped
):
    """Every quantity the reference's, never NaN, no warning, whatever the caller's numpy error
    state; the samples named clip."""
    with np.errstate(all="raise"):
        check_batch_against_reference(DrawnBatch(logp_new, logp_old, advantages, eps), variant)
    breakdown = ppo_clip.clip_breakdown(logp_new, logp_old, advantages, eps, **variant)
    assert breakdown.is_clipped.tolist() == clipped


# --------------------------------------------------------------------------
# Float64's limits: exact where float64 can represent the answer
# --------------------------------------------------------------------------

#: Advantages from the whole float64 range, zero and the tiniest subnormals included.
HUGE_ADVANTAGES = st.one_of(
    st.floats(-1.79e308, 1.79e308, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1.7e308, -1.7e308, 1.0, -1.0]),
)
#: (log-ratio, advantage) pairs whose products r*A and sums come near float64's limit
#: from both sides: a ratio near 1 times a huge advantage, a huge finite ratio (up to
#: 1.8e308) times a modest one; and ratios that overflow exp (log-ratios above about 709.78).
NEAR_THE_LIMIT = st.one_of(
    st.tuples(st.floats(-1.0, 1.0), HUGE_ADVANTAGES),
    st.tuples(st.floats(700.0, MAX_EXP_ARGUMENT), st.floats(-10.0, 10.0)),
    st.tuples(st.sampled_from([0.0, 709.0, 709.5, 709.7, 709.78]), HUGE_ADVANTAGES),
)
OVERFLOWED = st.tuples(st.floats(MAX_EXP_ARGUMENT, 1000.0), HUGE_ADVANTAGES)


@st.composite
def overflowing_batches(draw) -> tuple[DrawnBatch, dict]:
    """Up to 12 samples whose products and sums often overflow float64, and a variant."""
    rows = draw(st.lists(NEAR_THE_LIMIT, min_size=1, max_size=12))
    rows = draw(st.permutations(rows + draw(st.lists(OVERFLOWED, max_size=2))))
    log_ratios, advantages = (list(column) for column in zip(*rows, strict=True))
    # logp_old in [-1000, 0] such that logp_new = logp_old + log-ratio stays in [-1000, 0]
    logp_old = [draw(st.floats(max(-1000.0, -1000.0 - x), min(0.0, -x))) for x in log_ratios]
    logp_new = [old + x for old, x in zip(logp_old, log_ratios, strict=True)]
    eps = draw(EPS)
    variant = draw(VARIANTS)
    return DrawnBatch(logp_new, logp_old, advantages, eps), variant


@settings(max_examples=200, deadline=None)
@given(case=overflowing_batches())
def test_the_loss_is_the_exact_loss_rounded_once_where_float64_overflows(case):
    batch, variant = case
    breakdown = ppo_clip.clip_breakdown(*batch, **variant)
    ratios = breakdown.ratio.tolist()
    loss = breakdown.loss
    assert not math.isnan(loss)
    samples = reference_samples(ratios, batch.advantages, batch.eps, batch.n, **variant)
    held = assert_loss_as_promised(loss, batch, samples, **variant)
    event(f"{held}, {'+-inf' if math.isinf(loss) else 'finite'}")
    assert breakdown.partial_loss(batch.n) == loss
    # each gradient entry is -r*A/N as float64 computes it, exact where r*A overflowed
    assert breakdown.grad.tolist() == [sample.grad for sample in samples]
    if not variant:
        assert ppo_clip.ppo_clip_loss(*batch) == loss
        assert ppo_clip.ppo_clip_grad(*batch).tolist() == breakdown.grad.tolist()
