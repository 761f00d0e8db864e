"""Notebook 5 (numerics and the RLHF setting): demos, the figure, and the prose's numbers (its two
apps: test_numerics_apps.py).

Every drawn value is checked against :mod:`ppo_clip` (whose variants, asymmetric bounds and
dual clip, test_ppo_clip_properties.py checks against the plain-Python reference); every
number the notebook's prose states is computed here, in the same run, and looked for in the
markdown.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal
from pathlib import Path

import nbformat
import numpy as np
import pytest
from helpers import (
    CONTRACT_LOSS,
    assert_contract_loss,
    assert_states,
    markdown_of,
    plain,
)

import ppo_clip
from ppo_viz.numbers import exact, rounded
from ppo_viz.numerics import model, text
from ppo_viz.numerics.figures import (
    CAP_RANGE,
    DEFAULT_CAP,
    DEFAULT_EPS_HIGH,
    DEFAULT_EPS_LOW,
    VARIANT_R_AXIS,
    TokenRatioExplorer,
    VariantsExplorer,
    response_figure,
)
from tiny_lm import log_softmax

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_numerics_and_rlhf.ipynb"
#: The widest figure that fits JupyterLab's output area, in inches.
MAX_FIGURE_WIDTH = 9.0


# -- the synthetic response ------------------------------------------------------------------


def test_overflow_thresholds_are_where_exp_overflows():
    with np.errstate(over="ignore"):
        assert np.isfinite(np.exp(model.FLOAT64_EXP_LIMIT - 1e-9))
        assert np.isinf(np.exp(model.FLOAT64_EXP_LIMIT + 1e-9))
        assert np.isfinite(np.exp(np.float32(88.72)))
        assert np.isinf(np.exp(np.float32(88.73)))


def test_synthetic_response_is_seeded_and_reaches_about_minus_1000():
    first, second = model.synthetic_response(), model.synthetic_response()
    np.testing.assert_array_equal(first.logp_old, second.logp_old)
    assert not np.array_equal(first.logp_old, model.synthetic_response(seed=1).logp_old)
    assert first.logp_old.shape == (model.MAX_TOKENS,)
    assert (first.logp_old < 0).all()
    assert -1000.0 <= float(np.sum(first.logp_old)) <= -950.0


@pytest.mark.parametrize(
    ("call", "error", "names"),
    [
        (lambda: model.synthetic_response(tokens=0), ValueError, "tokens"),
        (lambda: model.synthetic_response(seed=-1), ValueError, "seed"),
        (lambda: model.synthetic_response(seed="0"), TypeError, "seed"),
        (lambda: model.token_view(model.synthetic_response(), 0, 0.0), ValueError, "length"),
        (lambda: model.token_view(model.synthetic_response(), 10, math.nan), ValueError, "shift"),
        (lambda: model.token_view(None, 10, 0.0), TypeError, "response"),
        (lambda: model.length_survey(10**400), ValueError, "shift"),
        (lambda: text.outside_band_demo(5), TypeError, "log_ratios"),
        (lambda: text.outside_band_demo(()), ValueError, "log_ratios"),
        (lambda: text.outside_band_demo((0.0, 700.0)), ValueError, r"log_ratios\[1\]"),
        (lambda: text.outside_band_demo((0.0, "1")), TypeError, r"log_ratios\[1\]"),
        (lambda: text.outside_band_demo(eps=1.5), ValueError, "eps"),
        (lambda: text.rare_token_demo(eps=math.nan), ValueError, "eps"),
        (lambda: response_figure("response"), TypeError, "response"),
        (lambda: TokenRatioExplorer(length=model.MAX_TOKENS + 1), ValueError, "length"),
        (lambda: TokenRatioExplorer(shift=-1.0), ValueError, "shift"),
        (lambda: TokenRatioExplorer(shift="1"), TypeError, "shift"),
        (lambda: VariantsExplorer(eps_high=1.5), ValueError, "eps_high"),
        (lambda: VariantsExplorer(dual_clip=0.9), ValueError, "dual_clip"),
        (lambda: VariantsExplorer(eps_low=None), TypeError, "eps_low"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(call, error, names):
    with pytest.raises(error, match=names):
        call()


@pytest.mark.parametrize("shift", [0.0, 1.0, model.MAX_SHIFT])
def test_every_log_probability_shown_is_within_the_contract_range(shift):
    old, noise = model.survey_responses()
    new = model.shifted_logprobs(old, shift, noise)
    assert (new <= 0).all()
    assert np.cumsum(old, axis=1).min() >= -1000.0
    assert np.cumsum(new, axis=1).min() >= -1000.0
    for seed in (model.RESPONSE_SEED, *(seed for seed, *_ in model.OVERFLOW_BATCH)):
        response = model.synthetic_response(seed)
        assert (response.logp_new(shift) <= 0).all()
        assert np.sum(response.logp_new(shift)) >= -1000.0


def test_response_figure_is_one_picture_that_fits_the_output_area():
    figure = response_figure()
    assert figure.get_figwidth() <= MAX_FIGURE_WIDTH
    (end,) = [line for line in figure.axes[1].get_lines() if "after" in line.get_label()]
    total = float(np.cumsum(model.synthetic_response().logp_old)[-1])
    assert end.get_label() == f"{rounded(total)} after {model.MAX_TOKENS} tokens"


# -- overflow, and the band's edge -----------------------------------------------------------


def test_naive_formula_gives_nan_and_ppo_clip_the_right_loss():
    demo = text.overflow_demo()
    result, module = demo.result, demo.result.module
    zero = int(np.flatnonzero(module.advantages == 0)[0])
    assert module.log_ratio[zero] > model.FLOAT64_EXP_LIMIT
    assert math.isinf(module.ratio[zero])
    assert math.isnan(result.naive_loss)
    assert any("overflow" in warning for warning in result.naive_warnings)
    assert any("invalid value" in warning for warning in result.naive_warnings)
    # That ppo_clip adds exactly 0 for A = 0 after an overflow, and its loss is the exact one,
    # is the contract's, tested in test_ppo_clip.py; here: the demo shows ppo_clip's numbers.
    assert (module.objective_term[zero], module.grad[zero]) == (0.0, 0.0)
    assert module.loss == ppo_clip.ppo_clip_loss(
        result.logp_new, result.logp_old, module.advantages
    )
    shown = plain(demo._repr_html_())
    for number in ("nan", "inf", exact(module.loss), "'overflow encountered in exp'"):
        assert number in shown


def _ratio_here(log_ratio: float) -> float:
    """numpy's exp of one log-ratio, as ppo_clip computes a ratio."""
    return float(np.exp(np.array([log_ratio]))[0])


F32 = np.float32
#: The ratio 0.6 / 0.5 of each row of the boundary table, computed here as its label says.
BOUNDARY_ROWS = {
    "float64 throughout": lambda: _ratio_here(math.log(0.6) - math.log(0.5)),
    "float32 throughout": lambda: np.exp(np.log(F32(0.6)) - np.log(F32(0.5))),
    "float32 log 1.2": lambda: np.exp(F32(np.log(1.2))),
    "float32 log-probs, then float64": lambda: _ratio_here(
        float(np.log(F32(0.6))) - float(np.log(F32(0.5)))
    ),
}


@pytest.mark.parametrize(
    ("row", "computed"), list(enumerate(BOUNDARY_ROWS.values())), ids=BOUNDARY_ROWS
)
def test_each_boundary_row_reports_where_its_own_computation_landed(row, computed):
    """A float32 ratio (the naive rows) is compared with 1 + eps in float32, the others in
    float64 (float64 maths cannot undo the rounding of float32 log-probabilities)."""
    ratio, demo = computed(), text.float32_boundary_demo()
    case, cells = demo.result[row], demo.rows[row]
    edge = type(ratio)(1.0) + type(ratio)(0.2)
    clipped = bool(ratio > edge)
    assert (case.ratio, case.is_clipped) == (float(ratio), clipped)
    assert case.grad == (0.0 if clipped else -float(ratio))
    said = ["yes" if flag else "no" for flag in (float(ratio) > 1.2, clipped)]
    assert (cells[1].split()[0], *cells[2:]) == (str(ratio), *said, exact(case.grad))
    if isinstance(ratio, F32):
        side = "above" if ratio > edge else "below" if ratio < edge else "on"
        verdict = "clipped" if clipped else "kept"
        assert_states(demo.notes[row - 1], f"Row {row + 1}", side, str(ratio), verdict)


def test_what_the_float32_rows_prose_says_holds_whatever_exp_computes_them():
    """Exact decimal arithmetic, so the same on every CPU: rows 2 and 3's exact exponentials
    (row 2 from correctly rounded float32 logs) lie within half a float32 step of the edge,
    above and below, so a correctly rounded exp lands on it; row 4's float32 log-probabilities
    (in [-1, -0.5), multiples of 2**-24) never differ by within 8e-9 of log 1.2."""
    edge, log_edge = F32(1.0) + F32(0.2), math.log(1.2)
    with decimal.localcontext(prec=40):
        logs = [F32(float(Decimal(float(F32(p))).ln())) for p in (0.6, 0.5)]
        steps = [
            (Decimal(float(x)).exp() - Decimal(float(edge))) / Decimal(float(np.spacing(edge)))
            for x in (logs[0] - logs[1], F32(np.log(1.2)))
        ]
    assert -0.5 < steps[1] < 0 < steps[0] < 0.5  # row 3 below the edge, row 2 above
    near = round(log_edge * 2**24)
    assert min(abs(k * 2.0**-24 - log_edge) for k in (near - 1, near, near + 1)) > 8e-9
    assert_states(_prose(), "within half a float32 step", "no closer than 8e-9 to log 1.2")


def test_the_boundary_table_says_where_this_machines_ratio_landed():
    demo = text.boundary_demo()
    case, inside, outside = demo.result
    assert abs(case.ratio - 1.2) <= 2 * math.ulp(1.2)  # 1.2 or a neighbour, whatever the CPU
    assert demo.rows == text.float32_boundary_demo().rows[:1]  # checked row by row above
    if case.ratio == 1.2:
        assert_states(demo.notes[0], "exactly 1.2 = 1 + ε", "not clipped")
    else:
        side = "above" if case.ratio > 1.2 else "below"
        assert_states(demo.notes[0], exact(case.ratio), f"1 ulp {side}")
    assert inside == pytest.approx(-1.2, abs=1e-6)
    assert outside == 0.0
    assert_states(demo.notes[1], rounded(inside, 7), rounded(outside))
    assert "float32" not in demo._repr_html_()  # the float32 rows are in the collapsed part
    collapsed = text.float32_boundary_demo()
    assert collapsed._repr_html_().startswith("<details>")  # collapsed, for implementers
    spacing = 2.0 ** (1 - model.BFLOAT16_SIGNIFICANT_BITS)  # the bfloat16 note
    assert_states(collapsed.notes[-1], exact(spacing), f"±{rounded(100 * spacing / 2, 2)} %")


# -- outside the band is not clipped; the upper bound is not a cap ---------------------------


@pytest.mark.parametrize("log_ratios", [model.OUTSIDE_LOG_RATIOS, (-0.3, -0.2, 0.15, 0.2)])
def test_outside_the_band_the_sign_of_a_decides_and_the_gradient_is_scaled_by_r(log_ratios):
    demo = text.outside_band_demo(log_ratios)
    for (x, plus, minus), row in zip(demo.result, demo.rows, strict=True):
        r = math.exp(x)
        assert plus.ratio[0] == pytest.approx(r, rel=1e-12)
        below, above = bool(plus.ratio[0] < plus.lower), bool(plus.ratio[0] > plus.upper)
        assert bool(plus.is_clipped[0]) is above  # the favourable side is clipped ...
        assert bool(minus.is_clipped[0]) is below
        assert plus.grad[0] == (0.0 if above else pytest.approx(-r, rel=1e-12))  # ... the other
        assert minus.grad[0] == (0.0 if below else pytest.approx(r, rel=1e-12))  # keeps -r*A
        verdict = row[-1]
        assert verdict.startswith("outside" if below or above else "inside")
        assert ("scaled down" in verdict) is below
        assert ("scaled up" in verdict) is above
    if log_ratios == model.OUTSIDE_LOG_RATIOS:  # a gradient nearly gone, and a huge one
        assert demo.rows[0][2] == rounded(-math.exp(-20.0))
        assert demo.rows[-1][3] == rounded(math.exp(20.0))


def test_rare_token_steps_follow_the_gradient_of_ppo_clip_loss_on_the_logits():
    """One small step of ppo_steps moves the logits against a finite-difference gradient."""
    logp_old = np.log(model.RARE_P_OLD)
    tokens, advantages = np.array([0, 1]), np.array([1.0, -1.0])

    def loss(logits: np.ndarray) -> float:
        return ppo_clip.ppo_clip_loss(log_softmax(logits)[tokens], logp_old[tokens], advantages)

    h, step = 1e-6, 1e-3
    numeric = np.array(
        [(loss(logp_old + h * e) - loss(logp_old - h * e)) / (2 * h) for e in np.eye(3)]
    )
    stepped = model.ppo_steps(model.RARE_P_OLD, ((0, 1.0), (1, -1.0)), step, 1, model.EPS)
    np.testing.assert_allclose(stepped, np.exp(log_softmax(logp_old - step * numeric)), rtol=1e-8)


@pytest.mark.parametrize("eps", [model.EPS, 0.28])
def test_the_upper_bound_stops_the_push_but_does_not_cap_the_probability(eps):
    demo = text.rare_token_demo(eps)
    (alone_small, _), (alone_large, _), (shared, _) = runs = demo.result[0]
    edge = (1 + eps) * model.RARE_P_OLD[0]
    assert demo.result[1] == pytest.approx(edge)
    assert all(own.is_clipped[0] for _, own in runs)  # every run ends with its push gone ...
    assert edge < alone_small[0] < 1.05 * edge  # ... alone with small steps, just past it ...
    assert alone_large[0] > 1.5 * edge  # ... but a large step, or another sample, carries it past
    assert shared[0] > 1.5 * edge
    for p_new, _ in runs:
        assert p_new.sum() == pytest.approx(1.0)
    assert_states(plain(demo._repr_html_()), rounded(edge, 3))


# -- the notebook's prose --------------------------------------------------------------------


def _prose() -> str:
    return markdown_of(NOTEBOOK)


def _power_of_ten(value: float) -> str:
    """``1.8\\times10^{308}``, as the prose writes a number in scientific notation."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}\\times10^{{{int(exponent)}}}"


def test_numbers_stated_by_sections_1_to_3_are_the_computed_ones():
    response = model.synthetic_response()
    overflow = text.overflow_demo().result
    module = overflow.module
    zero = int(np.flatnonzero(module.advantages == 0)[0])
    huge = int(np.flatnonzero(np.isfinite(module.ratio) & (module.ratio > 1e9))[0])
    assert module.is_clipped[huge]
    pair = ppo_clip.clip_breakdown([-150.0, -3.0], [-900.0, -3.5], [0.0, 1.0])
    assert model.FLOAT64_EXP_LIMIT < -150.0 - -900.0  # e^750 does not fit in float64
    assert (response.logp_old >= math.log(0.03)).all()  # "no token costs more than 3.5 nats"
    assert round(float(np.mean(response.logp_old))) == -1  # "average about −1 each"
    _, inside, outside = text.boundary_demo().result
    example = ppo_clip.worked_example()
    assert_contract_loss(ppo_clip.ppo_clip_loss(*example))
    assert ppo_clip.clip_fraction(*example) == 0.5
    assert_states(
        _prose(),
        f"-\\log 0.03 = {rounded(-math.log(0.03), 2)}",
        _power_of_ten(np.finfo(np.float64).max),
        f"e^{{{rounded(model.FLOAT64_EXP_LIMIT, 5)}}}",
        _power_of_ten(np.finfo(np.float32).max),
        f"e^{{{rounded(model.FLOAT32_EXP_LIMIT, 4)}}}",
        f"{min(overflow.lengths)} to {max(overflow.lengths)}",
        f"Sample {zero}",
        f"sample {huge}",
        f"$10^{{{math.floor(math.log10(module.ratio[huge]))}}}$",
        f"e^{{0.5}} \\approx {rounded(pair.ratio[1])}",
        f"-\\min({rounded(pair.ratio[1])}, 1.2)/2 = {exact(pair.loss)}",
        f"${rounded(inside, 7)}$",
        rounded(outside),
        _power_of_ten(np.spacing(1.0)),
        f"`{CONTRACT_LOSS!r}` and `{ppo_clip.clip_fraction(*example)!r}`",
        rounded(float(np.float32(1.2)), 9),
        f"{model.BFLOAT16_SIGNIFICANT_BITS} significant bits",
    )


def _first_shift_past(limit: float) -> float:
    """The smallest shift on the slider's grid whose 1000-token log-ratio is above ``limit``."""
    response = model.synthetic_response()
    for shift in np.round(np.arange(0.0, model.MAX_SHIFT + 1e-9, 0.05), 2):
        if model.token_view(response, model.MAX_TOKENS, float(shift)).sequence.log_ratio[0] > limit:
            return float(shift)
    raise AssertionError(f"no shift takes the log-ratio past {limit}")


def test_numbers_stated_by_the_token_section_are_the_computed_ones():
    survey = model.length_survey(0.0)
    at = {int(length): i for i, length in enumerate(survey["lengths"])}
    view = model.token_view(model.synthetic_response(), model.MAX_TOKENS, 0.0)
    share = 100 * np.count_nonzero(view.tokens.outside_band) / view.length
    # the shortest length from which more than half of the responses are outside the band
    majority = survey["lengths"][np.flatnonzero(survey["sequence_outside"] <= 0.5).max() + 1]
    assert 12 <= majority <= 60, "the prose says 'longer than a few dozen tokens'"
    assert not survey["float32_overflow"].any(), "the prose: none overflows float32 at shift 0"
    f32, f64 = model.FLOAT32_EXP_LIMIT, model.FLOAT64_EXP_LIMIT
    lower, upper = ppo_clip.clip_band(model.EPS)
    assert_states(
        _prose(),
        f"\\log {rounded(lower)} = {rounded(math.log(lower), 2)}",
        f"\\log {rounded(upper)} = {rounded(math.log(upper), 2)}",
        f"{round(100 * survey['sequence_outside'][at[100]])} %",
        f"{round(100 * survey['sequence_outside'][at[model.MAX_TOKENS]])} %",
        str(model.SURVEY_RESPONSES),
        rounded(f64, 5),
        rounded(f32, 4),
        f"{rounded(f32 / 1000, 2)} nats",
        rounded(_first_shift_past(f32)),
        rounded(_first_shift_past(f64)),
        str(model.TOKEN_NOISE),
        f"e^{{-{rounded(f32, 4)}}} \\approx {_power_of_ten(math.exp(-f32))}",
        f"{math.floor(share)} to {math.floor(share) + 1} %",
    )


def test_the_running_log_ratio_wanders_at_shift_0_and_climbs_with_a_shift():
    """The prose: "At shift 0 it wanders like a random walk, in and out of the band; with a
    positive shift it climbs with the length"."""
    response = model.synthetic_response()
    wandering = model.token_view(response, model.MAX_TOKENS, 0.0).running_log_ratio
    lower, upper = ppo_clip.clip_band(model.EPS)
    inside = (math.log(lower) <= wandering) & (wandering <= math.log(upper))
    assert np.count_nonzero(np.diff(inside.astype(int)) != 0) >= 4  # in and out, repeatedly
    assert np.argmax(wandering) < len(wandering) - 1, "it does not grow to its end at shift 0"
    climbing = model.token_view(response, model.MAX_TOKENS, 1.0).running_log_ratio
    assert np.all(np.diff(climbing[[9, 99, 499, 999]]) > 0)
    assert climbing[-1] > 100 * climbing[0]


def test_numbers_stated_by_the_variants_section_and_things_to_try_are_the_computed_ones():
    runs, edge = text.rare_token_demo().result
    (alone_small, _), (alone_large, _), (shared, _) = runs
    upper = ppo_clip.clip_band(model.EPS)[1]
    capped = ppo_clip.clip_breakdown([-150.0], [-900.0], [-1.0], dual_clip=DEFAULT_CAP).loss
    below = model.token_view(model.synthetic_response(), 760, 0.0).sequence.ratio[0]
    assert below < 1 - model.EPS, "things to try: around 760 tokens the ratio is below the band"
    p_old = model.RARE_P_OLD
    assert_states(
        _prose(),
        f"\\epsilon_\\text{{low}} = {DEFAULT_EPS_LOW}$",
        str(DEFAULT_EPS_HIGH),
        rounded(upper * 0.01),
        rounded(upper * 0.5),
        f"{p_old[0]}, {p_old[1]} and {p_old[2]}",
        rounded(alone_small[0], 3),
        rounded(edge),
        rounded(alone_large[0], 3),
        rounded(shared[0], 3),
        f"$c = {rounded(DEFAULT_CAP)}$",
        rounded(VARIANT_R_AXIS[1]),
        f"$-cA = {rounded(capped)}$",
        "760",
        rounded(CAP_RANGE[0]),
        rounded(model.MAX_SHIFT),
    )


#: Each library or paper claim of the notebook, and the source it was read from; both must
#: sit in the same markdown cell.  (verl: volcengine/verl; TRL: huggingface/trl.)
SOURCED_CLAIMS = {
    "each answer's advantage $(R - \\text{mean})/(\\text{std} + \\varepsilon)$ is exactly 0": (
        "`compute_grpo_outcome_advantage` in verl's `verl/trainer/ppo/core_algos.py`, "
        "commit b178a3c"
    ),
    "PyTorch's `clamp` passes the gradient on its whole closed interval": (
        "`clamp_backward` in `torch/csrc/autograd/FunctionsManual.cpp`"
    ),
    "`torch.maximum` gives each argument of a tie half the gradient": (
        "the `maximum` and `minimum` entries of `tools/autograd/derivatives.yaml`"
    ),
    "`torch.minimum` splits a tie too": "PyTorch 2.13.0 (CPU)",
    "**bfloat16** has 8 significant bits": "cloud.google.com/tpu/docs/bfloat16",
    "GSPO (Zheng et al., 2025, arXiv 2507.18071) clips that instead": (
        "`compute_policy_loss_gspo` in `verl/trainer/ppo/core_algos.py` (commit b178a3c)"
    ),
    "verl, for one, does exactly this": "`verl/trainer/ppo/core_algos.py`, commit b178a3c",
    "verl also clamps each token's log-ratio to $[-20, 20]$": "core_algos.py` line 1212",
    "TRL's `GRPOConfig` has `epsilon` and `epsilon_high`": (
        "`trl/trainer/grpo_config.py`, commit f4ff4c6"
    ),
    "DAPO (Yu et al., 2025) keeps": "arXiv 2503.14476",
    "the same values are in verl's DAPO recipe": (
        "`recipe/dapo/run_dapo_qwen2.5_32b.sh` at commit e2e729f"
    ),
    "Dual-clip PPO (Ye et al., 2020,": "arXiv 1912.09729",
    "verl applies it to every token with $A < 0$, with $c = 3$": (
        "(`compute_policy_loss_vanilla`, commit b178a3c)"
    ),
}


def test_library_claims_name_their_sources():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cells = [" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown"]
    sources = cells[-1].partition("## Sources")[2]  # the list at the end
    for claim, source in SOURCED_CLAIMS.items():
        holding = [cell for cell in cells if claim in cell]
        assert holding, f"claim not found: {claim}"
        assert all(source in cell or source in sources for cell in holding), (claim, source)


def test_float_details_are_only_in_collapsed_parts_and_no_helper_is_named():
    """A first-time reader meets no float32 digits: they sit in "For implementers" parts."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    main_line = re.sub(r"<details>.*?</details>", "", markdown, flags=re.DOTALL)
    for digits in (rounded(float(np.float32(1.2)), 9), "bfloat16"):
        assert digits not in main_line, digits
        assert digits in markdown, digits
    (cell,) = [c for c in notebook.cells if c.source.strip() == "float32_boundary_demo()"]
    assert cell.metadata["jupyter"]["source_hidden"] is True
    # the mechanism is described in words: the module's private helpers may be renamed
    for private in ("times_advantage", "loss_gradient"):
        assert private not in markdown
