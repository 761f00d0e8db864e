"""Unit tests of llm_clip: gradients, the reduction to ppo_clip, each library's clip fraction.

What a user of the module would notice if it broke: a gradient that is not the derivative of
the loss (finite differences, every objective and aggregation, with and without the KL term,
asymmetric bounds); one token per response that is not PPO; a clip fraction that does not give
the number its library logs; an overflow that turns into NaN; a bad argument that is not named.
The comparison with an independent implementation on random batches, and padding that is never
read, are in ``test_llm_clip_properties.py``.

No test pins a last bit of ``exp`` or ``log``: expectations are computed in the same run (from
:mod:`ppo_clip`, from the module's own ratios, or exactly with ``Fraction``), or compared within
a tolerance, so they hold on any CPU.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from helpers import log_landing_on

import llm_clip
import ppo_clip
from llm_clip import AGGREGATIONS, OBJECTIVES, policy_loss, policy_loss_grad, token_breakdown

pytestmark = pytest.mark.filterwarnings("error")

EPS_LOW, EPS_HIGH = 0.1, 0.3  # asymmetric, so a swapped bound shows
MAX_LEN = 8
#: The objectives that switch a gradient off outside a band on r (a token's or a response's).
HARD_CLIPS = [o for o, spec in llm_clip.SPECS.items() if spec.clip_kind in ("token", "sequence")]


def kink_free_batch(seed: int = 0, batch: int = 4, length: int = 6) -> dict[str, np.ndarray]:
    """A masked batch, padding NaN, whose token and sequence ratios are at least 1e-3 (relative)
    from the band's edges ``1 - EPS_LOW`` and ``1 + EPS_HIGH`` (GMPO's: ``exp(-EPS_LOW)`` and
    ``exp(EPS_HIGH)``): a finite-difference step of 1e-6 never crosses a kink.  Some tokens are
    clipped, some not, one advantage is 0."""
    for attempt in range(seed, seed + 1000):
        rng = np.random.default_rng(attempt)
        mask = rng.random((batch, length)) < 0.7
        mask[:, 0] = True
        logp_new = rng.uniform(-2.0, -0.1, (batch, length))
        logp_old = logp_new + rng.normal(0.0, 0.25, (batch, length))
        advantages = rng.normal(0.0, 1.0, batch)
        advantages[-1] = 0.0
        log_ratio = np.where(mask, logp_new - logp_old, 0.0)
        sequence = np.exp(log_ratio.sum(axis=1) / mask.sum(axis=1))
        ratios = np.concatenate([np.exp(log_ratio[mask]), sequence])
        edges = [1 - EPS_LOW, 1 + EPS_HIGH, np.exp(-EPS_LOW), np.exp(EPS_HIGH)]
        gaps = np.abs(ratios[:, None] / edges - 1)
        if gaps.min() > 1e-3:
            break
    logp_ref = logp_new + rng.normal(0.0, 0.3, (batch, length))
    for array in (logp_new, logp_old, logp_ref):
        array[~mask] = np.nan
    return {"logp_new": logp_new, "logp_old": logp_old, "advantages": advantages, "mask": mask,
            "logp_ref": logp_ref}  # fmt: skip


# --------------------------------------------------------------------------
# Gradients: finite differences for every objective, aggregation, with and without KL
# --------------------------------------------------------------------------


def test_booleans_in_an_object_array_are_flags():
    """``mask`` and ``keep`` given as object arrays of Python and numpy booleans (as a list with
    ``None`` cleaned out, or pandas, hands them over) are the same flags as boolean arrays,
    not "must contain only numbers"."""
    batch = {**kink_free_batch(), "keep": np.array([True, False, True, True])}
    as_objects = {name: batch[name].astype(object) for name in ("mask", "keep")}
    as_objects["keep"][0] = np.True_
    loss = policy_loss(**batch, objective="grpo")
    assert policy_loss(**{**batch, **as_objects}, objective="grpo") == loss


ROLLOUT = {
    "none": {},
    "token": {"rollout_weights": np.array([[0.5, 2.0, 0.0, 1.0, 3.0, 1.5]] * 4)},
    "sequence+keep": {"rollout_weights": np.array([[0.5], [2.0], [1.0], [0.0]]),
                      "keep": [True, False, True, True]},
}  # fmt: skip


@pytest.mark.parametrize("rollout", ROLLOUT)
@pytest.mark.parametrize("kl_coef", [0.0, 0.5])
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_gradient_is_the_derivative_of_the_loss(objective, aggregation, kl_coef, rollout):
    """Central differences of policy_loss match policy_loss_grad at every unmasked token, with
    and without rollout weights and OPSM's keep (the weights are constants, as in TRL).

    CISPO's weight ``clip(r)`` is a stop-gradient constant, so its gradient is the derivative
    with the ratio held fixed: ``logp_old`` moves with ``logp_new`` there.
    """
    batch = {**kink_free_batch(), **ROLLOUT[rollout]}
    band = {"eps_low": EPS_LOW, "eps_high": EPS_HIGH} if llm_clip.SPECS[objective].band else {}
    options = dict(objective=objective, aggregation=aggregation, max_len=MAX_LEN, kl_coef=kl_coef,
                   **band)  # fmt: skip
    grad = policy_loss_grad(**batch, **options)
    step, old_moves = 1e-6, llm_clip.SPECS[objective].detached_weight
    mask, logp_new, logp_old = batch["mask"], batch["logp_new"], batch["logp_old"]
    for i, t in zip(*np.nonzero(mask), strict=True):
        moved = np.zeros_like(logp_new)
        moved[i, t] = step
        up = policy_loss(**{**batch, "logp_new": logp_new + moved,
                            "logp_old": logp_old + old_moves * moved}, **options)  # fmt: skip
        down = policy_loss(**{**batch, "logp_new": logp_new - moved,
                              "logp_old": logp_old - old_moves * moved}, **options)  # fmt: skip
        assert (up - down) / (2 * step) == pytest.approx(grad[i, t], abs=1e-8), (i, t)
    assert (grad[~mask] == 0).all()
    assert np.count_nonzero(grad) >= mask.sum() // 3  # the test is not vacuous
    if not llm_clip.SPECS[objective].detached_weight and not kl_coef:
        assert (grad[token_breakdown(**batch, **options).is_clipped] == 0).all()


# --------------------------------------------------------------------------
# Rollout correction (that the weights multiply the policy terms, not the KL, that a weight of 0
# silences even an overflowed term, and that a dropped response's tokens keep counting are the
# reference comparison's, test_llm_clip_properties.py)
# --------------------------------------------------------------------------


def test_trl_default_masks_a_response_whose_engine_ratio_passes_three():
    """TRL 1.16's default (``sequence_mask``, clip_max 3): a response whose tokens the engine
    found 4 times less likely gets weight 0; a token mode truncates it to 3 instead."""
    old, engine = np.log([[0.5, 0.5], [0.4, 0.5]]), np.log([[0.125, 0.5], [0.5, 0.5]])
    mask = [[True, True], [True, True]]
    sequence = llm_clip.rollout_weights(old, engine, mask, mode="sequence_mask")
    assert sequence[:, 0].tolist() == [0.0, pytest.approx(0.8)]
    token = llm_clip.rollout_weights(old, engine, mask, mode="token_truncate")
    assert token.tolist() == [[3.0, 1.0], [pytest.approx(0.8), 1.0]]


# --------------------------------------------------------------------------
# One token per response is ppo_clip
# --------------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("objective", HARD_CLIPS)
def test_one_token_per_response_is_ppo_clip_bit_for_bit(objective, aggregation):
    """With one token per response every aggregation weighs each token 1/B (for
    seq-mean-token-sum-norm, when ``max_len=1``): the loss and gradient are ppo_clip's, bit for
    bit, wherever the token sits in its row (GSPO's sequence ratio is then the token's ratio).
    With a larger ``max_len`` Dr. GRPO's loss is ppo_clip's divided by it."""
    rng = np.random.default_rng(3)
    size, length = 9, 5
    position = rng.integers(0, length, size)
    mask = np.zeros((size, length), dtype=bool)
    mask[np.arange(size), position] = True
    logp_new, logp_old = (np.full((size, length), np.nan) for _ in range(2))
    logp_new[mask] = np.log(rng.uniform(0.05, 1.0, size))
    logp_old[mask] = np.log(rng.uniform(0.05, 1.0, size))
    advantages = rng.normal(0.0, 2.0, size)
    advantages[2] = 0.0
    eps_low, eps_high = llm_clip.SPECS[objective].default_band
    expected = ppo_clip.clip_breakdown(
        logp_new[mask], logp_old[mask], advantages, eps_low=eps_low, eps_high=eps_high
    )
    options = dict(objective=objective, aggregation=aggregation)
    b = token_breakdown(logp_new, logp_old, advantages, mask, max_len=1, **options)
    assert b.loss == expected.loss
    np.testing.assert_array_equal(b.grad[mask], expected.grad)
    np.testing.assert_array_equal(b.is_clipped[mask], expected.is_clipped)
    if aggregation == "seq-mean-token-sum-norm":
        longer = policy_loss(logp_new, logp_old, advantages, mask, max_len=4, **options)
        assert longer == pytest.approx(expected.loss / 4, rel=1e-15)


# --------------------------------------------------------------------------
# What each objective and aggregation is
# --------------------------------------------------------------------------


def test_default_aggregations_and_bands():
    """Each objective's weights are its own aggregation's (contract table); r = 1.25 is clipped
    by the default band [0.8, 1.2], not by DAPO's clip-higher 1.28, GMPO's exp(0.4) (its eps
    bounds log r) nor SAPO, which has no band."""
    mask = np.array([[True, True, True], [True, False, False]])
    logp_old = np.zeros((2, 3))
    logp_new = np.where(mask, np.log(1.25), 0.0)  # r = 1.25: above 1.2, below 1.28
    weights = {
        "token-mean": [[1 / 4] * 3, [1 / 4, 0, 0]],
        "seq-mean-token-mean": [[1 / 6] * 3, [1 / 2, 0, 0]],
        "seq-mean-token-sum-norm": [[1 / 10] * 3, [1 / 10, 0, 0]],  # B * max_len = 2 * 5
    }
    for objective in OBJECTIVES:
        b = token_breakdown(logp_new, logp_old, [1.0, 1.0], mask, objective=objective, max_len=5)
        np.testing.assert_allclose(b.weight, weights[llm_clip.SPECS[objective].aggregation])
        spec = llm_clip.SPECS[objective]  # CISPO: its weight clipped, its gradient kept
        high = spec.default_band[1] if spec.band else math.inf
        edge = {"ratio": 1 + high, "log-ratio": math.exp(high)}.get(spec.band, math.inf)
        clips = edge < 1.25
        assert (b.is_clipped == (mask & clips)).all(), objective


@pytest.mark.parametrize("objective", HARD_CLIPS)
def test_a_ratio_exactly_on_the_edge_is_not_clipped(objective):
    """Strict comparisons, as in ppo_clip: r == 1 + eps_high with A > 0 and r == 1 - eps_low
    with A < 0 keep their gradient -w * r * A, and no library's fraction counts them."""
    log_ratios = [[log_landing_on(1.3)], [log_landing_on(0.9)]]  # np.exp gives them exactly
    args = (log_ratios, [[0.0], [0.0]], [2.0, -1.0], [[True], [True]])
    b = token_breakdown(*args, objective=objective, eps_low=0.1, eps_high=0.3, max_len=1)
    assert b.ratio.tolist() == [[1.3], [0.9]]
    assert not b.is_clipped.any()
    assert b.grad.tolist() == [[-(1.3 * 2.0) / 2], [-(0.9 * -1.0) / 2]]
    options = {"objective": objective, "eps_low": 0.1, "eps_high": 0.3}
    assert llm_clip.clip_fraction_verl(*args, **options)["actor/pg_clipfrac"] == 0.0
    assert llm_clip.clip_ratio_trl(*args, **options)["clip_ratio/region_mean"] == 0.0


def test_gspo_one_ratio_and_one_decision_per_response():
    """GSPO's ratio is the geometric mean of the response's token ratios; every token of an
    unclipped response gets -w * s_i * A_i (verl's GSPO-token gradient), a clipped one 0.  An
    explicit aggregation applies to the per-token loss, as in TRL: with token-mean each
    response weighs n_i / N."""
    mask = np.array([[True, True, False], [True, True, True]])
    token_ratios = np.array([[1.5, 1.0, 1.0], [1.1, 0.9, 1.0]])
    logp_new = np.log(token_ratios)
    advantages = np.array([1.0, -1.0])
    b = token_breakdown(logp_new, np.zeros((2, 3)), advantages, mask, objective="gspo")
    s = np.exp([np.log(1.5) / 2, (np.log(1.1) + np.log(0.9)) / 3])
    np.testing.assert_allclose(b.ratio, s[:, None] * mask, rtol=1e-15)
    assert b.is_clipped.tolist() == [[True, True, False], [False, False, False]]  # s_0 > 1.2
    np.testing.assert_allclose(b.grad[1], s[1] * 1.0 / (2 * 3), rtol=1e-15)
    assert (b.grad[0] == 0).all()
    token_mean = policy_loss(logp_new, np.zeros((2, 3)), advantages, mask, objective="gspo",
                             aggregation="token-mean")  # fmt: skip
    terms = np.minimum(s * advantages, np.clip(s, 0.8, 1.2) * advantages)
    assert token_mean == pytest.approx(-(2 * terms[0] + 3 * terms[1]) / 5, rel=1e-15)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_kl_term_is_k3_aggregated_like_the_objective(objective):
    """With a reference, the loss grows by sum(w * beta * k3), k3 = exp(d) - d - 1, for every
    objective (TRL adds beta * k3 per token before aggregating, GSPO and CISPO included)."""
    batch = kink_free_batch(seed=7)
    options = dict(objective=objective, max_len=MAX_LEN)
    without = token_breakdown(**{**batch, "logp_ref": None}, **options)
    b = token_breakdown(**batch, kl_coef=0.25, **options)
    d = np.where(batch["mask"], batch["logp_ref"] - batch["logp_new"], 0.0)
    np.testing.assert_allclose(b.kl, np.exp(d) - d - 1, atol=1e-15)
    assert b.loss - without.loss == pytest.approx((b.weight * 0.25 * b.kl).sum(), rel=1e-10)


# --------------------------------------------------------------------------
# Group advantages
# --------------------------------------------------------------------------


def test_a_group_of_equal_rewards_has_advantages_of_exactly_0():
    """A group whose rewards are all equal has no signal: exactly 0, with and without the std
    (random rewards against the reference are test_llm_clip_properties.py's)."""
    rewards = [1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5, 2.0, -1.0, 0.0, 3.0]
    for scale_by_std in (True, False):
        assert (llm_clip.group_advantages(rewards, 4, scale_by_std=scale_by_std)[4:8] == 0).all()


# --------------------------------------------------------------------------
# The clip fraction as CleanRL, verl and TRL log it
# --------------------------------------------------------------------------

ONE_ROW = np.ones((1, 4), dtype=bool)


def test_clip_fractions_on_specs_batch_where_the_definitions_differ():
    """The contract's batch (docs/contract.md, "ppo_clip"), r = [1.5, 1.5, 0.5, 0.5],
    A = [+1, -1, +1, -1], eps = 0.2: CleanRL's sign-blind |r - 1| > eps counts all four, verl's
    pg_losses2 > pg_losses1 and TRL's region count the two whose gradient is zeroed (TRL: one
    low, one high)."""
    logp_new = np.log([[1.5, 1.5, 0.5, 0.5]])
    advantages = np.array([[1.0, -1.0, 1.0, -1.0]])
    args = (logp_new, np.zeros((1, 4)), advantages, ONE_ROW)
    assert llm_clip.clip_fraction_cleanrl(logp_new, np.zeros((1, 4)), ONE_ROW) == {
        "losses/clipfrac": 1.0
    }
    assert llm_clip.clip_fraction_verl(*args) == {
        "actor/pg_clipfrac": 0.5,
        "actor/pg_clipfrac_lower": 0.0,
    }
    assert llm_clip.clip_ratio_trl(*args) == {
        "clip_ratio/low_mean": 0.25,
        "clip_ratio/high_mean": 0.25,
        "clip_ratio/region_mean": 0.5,
        "clip_ratio/low_min": 0.25,
        "clip_ratio/high_max": 0.25,
    }
    # CISPO: verl counts r != clip(r) whatever A (all four); TRL only r > 1 + eps_high, A > 0
    assert llm_clip.clip_fraction_verl(*args, objective="cispo")["actor/pg_clipfrac"] == 1.0
    assert llm_clip.clip_ratio_trl(*args, objective="cispo") == {"cispo_clip_ratio": 0.25}
    # GMPO (one token per response), |log r| = 0.41 and 0.69 above its eps 0.4: verl counts
    # all four, split by A's sign, though the pessimistic clip switches off two; TRL has no GMPO
    one_each = (logp_new.T, np.zeros((4, 1)), advantages[0], ONE_ROW.T)
    assert llm_clip.clip_fraction_verl(*one_each, objective="gmpo") == {
        "actor/pg_clipfrac": 0.5,
        "actor/pg_clipfrac_lower": 0.5,
    }
    assert token_breakdown(*one_each, objective="gmpo").is_clipped.sum() == 2
    assert llm_clip.clip_ratio_trl(*one_each, objective="gmpo") == {}


def test_gspo_clip_fraction_counts_tokens_in_verl_and_responses_in_trl():
    """A clipped response of one token and an unclipped one of three: verl's token mean is 1/4,
    TRL's mean over responses 1/2."""
    mask = np.array([[True, False, False], [True, True, True]])
    logp_new = np.log([[1.5, 1.0, 1.0], [1.0, 1.0, 1.0]])
    args = (logp_new, np.zeros((2, 3)), [1.0, 1.0], mask)
    assert llm_clip.clip_fraction_verl(*args, objective="gspo")["actor/pg_clipfrac"] == 0.25
    trl = llm_clip.clip_ratio_trl(*args, objective="gspo")
    assert (trl["clip_ratio/region_mean"], trl["clip_ratio/high_max"]) == (0.5, 1.0)


def test_verl_lower_fraction_counts_the_dual_clip():
    """verl's pg_clipfrac_lower: A < 0 with the ratio above clip_ratio_c = 3 (r = 4, not 2)."""
    args = (np.log([[4.0, 2.0, 1.0, 1.0]]), np.zeros((1, 4)), -np.ones(1), ONE_ROW)
    assert llm_clip.clip_fraction_verl(*args) == {
        "actor/pg_clipfrac": 0.0,
        "actor/pg_clipfrac_lower": 0.25,
    }


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_library_without_the_objective_logs_nothing(monkeypatch, objective):
    """An entry marked as missing from verl or TRL (``in_verl``/``in_trl`` False, as a new
    objective neither library has would be) gets ``{}`` from that library's clip fraction, not
    the numbers another objective's rule would give."""
    args = (np.log([[1.5, 1.5, 0.5, 0.5]]), np.zeros((1, 4)), [1.0], ONE_ROW)
    present = llm_clip.clip_fraction_verl(*args, objective=objective) != {}
    assert present == llm_clip.SPECS[objective].in_verl
    absent = dataclasses.replace(llm_clip.SPECS[objective], in_verl=False, in_trl=False)
    monkeypatch.setitem(llm_clip.SPECS, objective, absent)
    assert llm_clip.clip_fraction_verl(*args, objective=objective) == {}
    assert llm_clip.clip_ratio_trl(*args, objective=objective) == {}


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_at_the_first_update_nothing_is_clipped(objective):
    """Why TRL's clip_ratio is always 0 with one update per batch (TRL #3120): the policy is
    still the old one, r = 1 exactly, so no definition counts a token, and the gradient is the
    plain policy gradient -w * A.  For SAPO, whatever its temperatures, that is f'(1) = 1, and
    each term is f(1) * A = 2 / tau * A."""
    batch = kink_free_batch(seed=11)
    logp, a = batch["logp_new"], batch["advantages"][:, None]
    args = (logp, logp, batch["advantages"], batch["mask"])
    fractions = {**llm_clip.clip_fraction_cleanrl(logp, logp, batch["mask"]),
                 **llm_clip.clip_fraction_verl(*args, objective=objective),
                 **llm_clip.clip_ratio_trl(*args, objective=objective)}  # fmt: skip
    assert set(fractions.values()) == {0.0}
    taus = {"tau_pos": 0.5, "tau_neg": 3.0} if objective == "sapo" else {}
    b = token_breakdown(*args, objective=objective, max_len=MAX_LEN, **taus)
    np.testing.assert_allclose(b.grad, -b.weight * a, rtol=1e-14)
    if objective == "sapo":
        np.testing.assert_allclose(b.term, 2 / np.where(a > 0, 0.5, 3.0) * a * b.mask, rtol=1e-15)


# --------------------------------------------------------------------------
# Float64's limits: ppo_clip's rules
# --------------------------------------------------------------------------


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_overflowed_ratios_never_make_nan(objective):
    """A log-ratio of 800 overflows exp.  With A < 0 (not clipped) the loss and the token's
    gradient are +inf; with A == 0 the token adds exactly 0; with A > 0 it is clipped.  CISPO's
    weight is capped, so its loss stays finite.  (GSPO: the response's mean log-ratio is 800,
    400 and 400, so only the first sequence ratio overflows; the third response is clipped.)"""
    mask = np.array([[True, False], [True, False], [True, True]])
    logp_new = np.array([[-100.0, np.nan], [-100.0, -np.inf], [-100.0, -1.0]])
    logp_old = np.array([[-900.0, np.nan], [-900.0, np.nan], [-900.0, -1.0]])
    b = token_breakdown(logp_new, logp_old, [-1.0, 0.0, 1.0], mask, objective=objective, max_len=2)
    assert not np.isnan(b.grad).any()
    if llm_clip.SPECS[objective].clip_kind in ("detached", "soft"):  # a capped weight or gate
        assert np.isfinite(b.grad).all()
        assert math.isfinite(b.loss)
        if objective == "sapo":  # a bounded gate, whose slope vanished where r overflowed
            assert b.grad[0, 0] == b.grad[2, 0] == 0.0
            # r = 1: f'(1) = 1, up to the last bits of exp on this CPU (not pinned)
            assert b.grad[2, 1] == pytest.approx(-b.weight[2, 1], rel=1e-14)
        return
    assert b.loss == math.inf
    assert b.grad[0, 0] == math.inf
    assert (b.grad[1] == 0).all()  # A == 0
    assert b.grad[2, 0] == 0.0  # A > 0, clipped
    # r = 1, A = 1; GSPO: clipped with its response; GMPO: its response's ratio exp(0.4 / 2)
    expected = 0.0 if objective == "gspo" else -b.weight[2, 1] * b.ratio[2, 1]
    assert b.grad[2, 1] == pytest.approx(expected, rel=1e-15)
    if objective == "gmpo":  # eps_high beyond log(float max): A > 0's ratio overflows, -inf
        args, wide = (logp_new, logp_old), {"objective": "gmpo", "eps_high": 800.0}
        assert policy_loss(*args, [1.0, 0.0, 1.0], mask, **wide) == -math.inf
        with pytest.raises(ValueError, match="undefined"):  # and A < 0's +inf beside it
            policy_loss(*args, [-1.0, 1.0, 1.0], mask, **wide)


def test_overflowed_k3_makes_the_loss_inf_and_its_gradient_minus_inf():
    """d = logp_ref - logp_new = 800: k3 overflows, the loss is +inf, that token's gradient
    -inf; with kl_coef = 0 the reference is not used and nothing overflows."""
    logp_new = np.array([[-900.0, -1.0]])
    logp_ref = np.array([[-100.0, -1.0]])
    args = (logp_new, logp_new, [1.0], np.ones((1, 2), bool))
    b = token_breakdown(*args, objective="grpo", logp_ref=logp_ref, kl_coef=0.1)
    assert b.loss == math.inf
    assert b.grad[0, 0] == -math.inf
    assert math.isfinite(b.grad[0, 1])
    assert math.isfinite(policy_loss(*args, objective="grpo", logp_ref=logp_ref, kl_coef=0.0))


def test_huge_advantages_give_the_exact_value_where_float64_holds_it():
    """r*A and the sum overflow float64 on the way although the loss and the gradient fit: they
    are the exact values (from the module's own ratios), rounded once."""
    mask = np.ones((1, 4), dtype=bool)
    logp_new = np.log([[1.1, 1.15, 0.95, 2.0]])
    advantages = np.array([[1.7e308, 1.7e308, 1.7e308, -1.7e308]])
    b = token_breakdown(logp_new, np.zeros((1, 4)), advantages, mask, objective="ppo")
    pairs = list(zip(b.ratio[0], advantages[0], strict=True))
    kept = [min(r, 1.2) if a > 0 else max(r, 0.8) for r, a in pairs]
    exact_loss = -sum(Fraction(k) * Fraction(a) for k, (_, a) in zip(kept, pairs, strict=True)) / 4
    assert b.loss == float(exact_loss)
    exact_grad = [-Fraction(r) * Fraction(a) / 4 for r, a in pairs]
    assert b.grad[0].tolist() == [float(g) for g in exact_grad]
    assert np.isfinite(b.grad).all()


def test_inf_minus_inf_in_a_gradient_is_refused():
    """An overflowed ratio with A < 0 (+inf) and an overflowed exp(d) (-inf) on one token: the
    gradient is undefined (only reachable with log-probabilities outside [-1000, 0])."""
    with pytest.raises(ValueError, match=r"logp_new\[0, 0\] is undefined"):
        policy_loss_grad([[-200.0]], [[-1000.0]], [-1.0], [[True]], objective="ppo",
                         logp_ref=[[600.0]], kl_coef=1.0)  # fmt: skip


# --------------------------------------------------------------------------
# Bad input: each check once, each public function's use of one once (the checks of single
# arrays llm_clip shares with ppo_clip, every kind, are test_ppo_clip_inputs.py's table)
# --------------------------------------------------------------------------

GOOD = dict(logp_new=[[-1.0, -2.0]], logp_old=[[-1.5, -2.0]], advantages=[1.0],
            mask=[[True, True]], objective="grpo")  # fmt: skip
ONE = {"mask": [[True]], "logp_rollout": [[0.0]]}
#: Good arguments of each public function; a row of BAD_INPUTS changes some of them.
CALLS = {
    token_breakdown: GOOD,
    policy_loss: GOOD,
    policy_loss_grad: GOOD,
    llm_clip.clip_fraction_verl: GOOD,
    llm_clip.clip_ratio_trl: GOOD,
    llm_clip.clip_fraction_cleanrl: {"logp_new": [[0.0]], "logp_old": [[0.0]], "mask": [[True]]},
    llm_clip.group_advantages: {"rewards": [1.0, 2.0], "group_size": 2},
    llm_clip.rollout_weights: {**ONE, "logp_old": [[0.0]], "mode": "token_mask"},
    llm_clip.off_policy_keep: {**ONE, "logp_new": [[0.0]], "advantages": [1.0], "threshold": 0.5},
}
BAD_INPUTS = [
    (token_breakdown, {"logp_new": None}, TypeError, r"logp_new must be a \(B, T\) array of"),
    (token_breakdown, {"logp_old": [[1.0], [1.0, 2.0]]}, TypeError, "logp_old .* differ in length"),
    (token_breakdown, {"logp_new": [["a", "b"]]}, TypeError, "logp_new must contain real numbers"),
    (token_breakdown, {"logp_new": [[-1.0, None]]}, TypeError, r"logp_new\[0, 1\] is None"),
    (token_breakdown, {"logp_new": [-1.0, -2.0]}, ValueError, r"logp_new must be \(B, T\), got"),
    (token_breakdown, {"logp_old": [[-1.0, -2.0, -3.0]]}, ValueError, "logp_old has shape"),
    (token_breakdown, {"mask": [[True]]}, ValueError, "mask has shape"),
    (token_breakdown, {"mask": [[2, 1]]}, ValueError, "mask must hold booleans"),
    (token_breakdown, {"mask": [[False, False]]}, ValueError, r"mask\[0\] has no token"),
    (token_breakdown, {"logp_new": [[-1.0, math.nan]]}, ValueError, r"logp_new\[0, 1\] is nan"),
    (token_breakdown, {"advantages": [1.0, 2.0]}, ValueError, "advantages has 2 entries for 1"),
    (token_breakdown, {"advantages": [True]}, TypeError, "advantages"),
    (token_breakdown, {"advantages": [[1.0, 2.0]], "objective": "gspo"}, ValueError,
     "gspo needs one advantage per"),
    (token_breakdown, {"advantages": [[1.0, 2.0]], "objective": "gmpo"}, ValueError, "gmpo needs"),
    (token_breakdown, {"objective": "sapo", "eps_low": 0.1}, ValueError, "eps_low does not apply"),
    (token_breakdown, {"tau_pos": 1.0}, ValueError, "tau_pos does not apply to grpo"),
    (token_breakdown, {"objective": "sapo", "tau_neg": 0.0}, ValueError, "tau_neg must be posi"),
    (token_breakdown, {"objective": "ppo2"}, ValueError, "objective must be one of"),
    (token_breakdown, {"aggregation": "mean"}, ValueError, "aggregation must be one of"),
    (token_breakdown, {"eps_low": 1.5}, ValueError, "eps_low must be between 0 and 1"),
    (token_breakdown, {"eps_high": -0.1}, ValueError, "eps_high must be at least 0"),
    (token_breakdown, {"kl_coef": -1.0}, ValueError, "kl_coef must be at least 0"),
    (token_breakdown, {"kl_coef": 0.1}, ValueError, "logp_ref is None"),
    (token_breakdown, {"logp_ref": [[-1.0]], "kl_coef": 0.1}, ValueError, "logp_ref has shape"),
    (token_breakdown, {"objective": "dr_grpo"}, ValueError, "max_len is required"),
    (token_breakdown, {"objective": "dr_grpo", "max_len": 0}, ValueError, "max_len must be bet"),
    (policy_loss, {"mask": None}, TypeError, r"mask must be a \(B, T\) array"),
    (policy_loss, {"mask": np.ones(2, bool)}, ValueError, r"mask must be \(B, T\), got shape"),
    (policy_loss, {"advantages": None}, TypeError, "advantages must be .* got None"),
    (policy_loss, {"rollout_weights": [[1.0, -0.5]]}, ValueError,
     r"rollout_weights\[0, 1\] is -0.5; weights must be >= 0"),
    (policy_loss, {"rollout_weights": [[1.0, 2.0, 3.0]]}, ValueError,
     r"rollout_weights has shape \(1, 3\); it must be \(1, 1\) or \(1, 2\)"),
    (policy_loss, {"rollout_weights": [[math.nan, 1.0]]}, ValueError, r"weights\[0, 0\] is nan"),
    (policy_loss, {"rollout_weights": [[True, 1.0]]}, TypeError, "rollout_weights must contain"),
    (policy_loss, {"rollout_weights": [[10**400, 1]]}, ValueError, r"\[0, 0\] is an integer too"),
    (policy_loss, {"rollout_weights": [[math.inf, 1.0]]}, ValueError, "bound them with clip_max"),
    (policy_loss, {"keep": True}, ValueError, r"keep must be \(B,\), got a scalar"),
    (policy_loss_grad, {"eps_low": "0.2"}, TypeError, "eps_low must be a real number"),
    (policy_loss, {"eps_low": 1.5}, ValueError, "eps_low must be between 0 and 1"),
    (policy_loss, {"objective": "gmpo", "eps_low": -0.1}, ValueError, "eps_low must be at least"),
    (policy_loss_grad, {"keep": [True, False]}, ValueError, r"keep has shape \(2,\)"),
    (policy_loss_grad, {"keep": [0.5]}, ValueError, "keep must hold booleans"),
    (llm_clip.clip_fraction_cleanrl, {"eps": 2.0}, ValueError, "eps must be between"),
    (llm_clip.clip_fraction_verl, {"dual_clip": 1.0}, ValueError, "dual_clip must be greater"),
    (llm_clip.clip_ratio_trl, {"advantages": [math.inf]}, ValueError, r"advantages\[0\] is inf"),
    (llm_clip.group_advantages, {"rewards": [1.0, 2.0, 3.0]}, ValueError,
     "group_size must be at least 2 and divide the 3 rewards"),
    (llm_clip.group_advantages, {"rewards": [1.0, 2e200]}, ValueError, "rewards must be at most"),
    (llm_clip.group_advantages, {"std_eps": 0}, ValueError, "std_eps must be positive"),
    (llm_clip.rollout_weights, {"mode": "token"}, ValueError, "mode must be one of"),
    (llm_clip.rollout_weights, {"logp_rollout": [[math.inf]]}, ValueError,
     r"logp_rollout\[0, 0\] is inf"),
    (llm_clip.rollout_weights, {"clip_min": 2.0, "clip_max": 1.0}, ValueError,
     "clip_min .* must not exceed clip_max"),
    (llm_clip.rollout_weights, {"clip_max": -1.0}, ValueError, "clip_max must be at least 0"),
    (llm_clip.off_policy_keep, {"logp_rollout": [[0.0, 1.0]]}, ValueError, "logp_rollout has sh"),
    (llm_clip.off_policy_keep, {"logp_new": [[0.0, 0.0]], "logp_rollout": [[0.0, 1.0]],
                                "advantages": [[1.0, -1.0]], "mask": [[True, True]]}, ValueError,
     "off_policy_keep needs one advantage per response"),
    (llm_clip.off_policy_keep, {"threshold": None}, TypeError, "threshold must be a real number"),
    (llm_clip.off_policy_keep, {"advantages": None}, TypeError, "advantages must be a .*"),
]  # fmt: skip


@pytest.mark.parametrize(("function", "change", "error", "message"), BAD_INPUTS)
def test_each_bad_input_is_refused_naming_the_argument(function, change, error, message):
    with pytest.raises(error, match=message):
        function(**{**CALLS[function], **change})


def test_advantages_one_per_response_as_a_column_as_trl_passes_them():
    """(B, 1) advantages, TRL's ``advantages[:, None]``, are one per response."""
    batch = kink_free_batch()
    for objective in ("grpo", "gspo"):
        column = policy_loss(**{**batch, "advantages": batch["advantages"][:, None]},
                             objective=objective)  # fmt: skip
        assert column == policy_loss(**batch, objective=objective)


def test_gae_and_group_advantages_ignore_the_callers_numpy_error_settings():
    """A product that underflows to 0 is no error, whatever np.seterr says."""
    with np.errstate(all="raise"):
        advantages, _ = llm_clip.gae([1.0, 1.0], [0.5, 0.5], [0, 0], 1e-170, 0,
                                     gamma=1e-170, lam=0.5)  # fmt: skip
        assert np.isfinite(advantages).all()
        assert np.isfinite(llm_clip.group_advantages([1e-300, 0.0, 0.0, 0.0], 4)).all()
