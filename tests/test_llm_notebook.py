"""Notebook 7 (clipping in LLM training), Part A: its batch, its apps against llm_clip, its
tables and KL figure, and every number its prose states (Part B's: test_rlhf_notebook.py).

Every value an app draws is compared with llm_clip called here directly (not through the app's
own helpers); every number the prose states is computed here, in the same run, and looked for in
the markdown (``assert_states``).
"""

from __future__ import annotations

import inspect
import itertools
import math
import re

import nbformat
import numpy as np
import pytest
from helpers import assert_drawn_in_place, assert_states, markdown_of, plain
from notebook_runner import NOTEBOOK_DIR, run_committed

import llm_clip
from ppo_viz.llm import (
    ClipFractionExplorer,
    LengthBiasExplorer,
    Setting,
    TokenPushExplorer,
    batch_table,
    kl_gradient_bias,
    response_batch,
)
from ppo_viz.llm.batch import MAX_GROUP, MAX_LEN, MAX_MU, PROMPTS, VOCAB
from ppo_viz.llm.tokens import OBJECTIVES, band_of
from ppo_viz.numbers import rounded

NOTEBOOK = NOTEBOOK_DIR / "07_clipping_in_llm_training.ipynb"


def push_expected(s: Setting) -> tuple[llm_clip.TokenBreakdown, np.ndarray]:
    """llm_clip's breakdown for a setting, the advantages made here from the batch's rewards."""
    batch = response_batch(s.group_size)
    rewards = batch.rewards
    if s.kl_place == "reward":
        k1 = ((batch.logp_old - batch.logp_ref) * batch.mask).sum(axis=1)
        rewards = rewards - s.beta * k1
    a = llm_clip.group_advantages(rewards, s.group_size, scale_by_std=s.objective != "dr_grpo")
    kl = {"logp_ref": batch.logp_ref, "kl_coef": s.beta} if s.kl_place == "loss" else {}
    band = {"eps_low": s.eps_low, "eps_high": s.eps_high}
    args = (batch.logp_new[s.mu - 1], batch.logp_old, a, batch.mask)
    band = band if llm_clip.SPECS[s.objective].band else {}
    return llm_clip.token_breakdown(*args, objective=s.objective, max_len=MAX_LEN, **kl, **band), a


def set_controls(app, **values) -> None:
    for name, value in values.items():
        app.controls[name].value = value


# -- the batch -----------------------------------------------------------------------------------


def test_the_batch_is_seeded_grouped_and_shows_every_kind_of_reward():
    batch = response_batch(4)
    assert len(batch.rewards) == 4 * len(PROMPTS)
    assert [tuple(p) for p in batch.prompts] == [p for p in PROMPTS for _ in range(4)]
    assert set(batch.rewards) == {1.0, 0.0, -0.5}  # tiny_lm.rewards' rule: test_tiny_lm
    assert batch.lengths.min() < batch.lengths.max() <= MAX_LEN
    assert VOCAB[0] == "⏎"  # tiny_lm's <eos>, as the notebook shows it
    # the first update recomputes the sampling policy's log-probabilities: the same floats
    assert np.array_equal(batch.logp_new[0], batch.logp_old)
    for mu in range(1, MAX_MU):
        assert not np.array_equal(batch.logp_new[mu], batch.logp_old)
    # a smaller group is the first answers of each prompt's larger one
    big = response_batch(MAX_GROUP)
    assert np.array_equal(big.tokens[:4], batch.tokens[:4])
    assert not batch.tokens.flags.writeable


# -- the apps ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_app() -> TokenPushExplorer:
    return TokenPushExplorer()


def readout_states(s: Setting, expected: llm_clip.TokenBreakdown) -> list[str]:
    """What the map's readout must state at ``s``, worded by the objective's registry entry."""
    spec, off, tokens = llm_clip.SPECS[s.objective], expected.is_clipped.sum(), expected.mask.sum()
    band = {
        "ratio": f"band [{rounded(1 - s.eps_low, 3)}, {rounded(1 + s.eps_high, 3)}]",
        "log-ratio": f"band on log r [{rounded(-s.eps_low, 3)}, {rounded(s.eps_high, 3)}]",
        None: "no band but a soft gate",
    }[spec.band]
    switched = {
        "detached": f"{off} of {tokens} tokens' weights capped; none switched off",
        "sequence": f"{expected.is_clipped.any(axis=1).sum()} of {len(expected.mask)} answers",
        "soft": "no band but a soft gate · none switched off",
    }.get(spec.clip_kind, f"{off} of {tokens} tokens switched off")
    return [f"μ = {s.mu}", band, switched, f"loss {rounded(expected.loss, 4)}"]


def assert_map_shows(app: TokenPushExplorer) -> llm_clip.TokenBreakdown:
    """The map, its frames, its two bar panels and its readout show llm_clip's numbers."""
    s = app.setting()
    expected, advantages = push_expected(s)
    shown = app.image.get_array()
    assert np.array_equal(np.ma.getmaskarray(shown), ~expected.mask)
    assert np.array_equal(shown.data[expected.mask], -expected.grad[expected.mask])
    ((_, dashes),) = app.frames.get_linestyle()  # dashed where the weight is detached (CISPO)
    assert (dashes is not None) == llm_clip.SPECS[s.objective].detached_weight
    frames = app.frames.get_paths()
    centres = {tuple(np.round(p.vertices[:4].mean(0)).astype(int)[::-1]) for p in frames}
    assert centres == {tuple(x) for x in np.argwhere(expected.is_clipped)}
    for bars, drawn in ((app.bars_a, advantages), (app.bars_sum, -expected.grad.sum(axis=1))):
        ends = np.array([segment[1] for segment in bars.get_segments()])
        assert np.array_equal(ends, np.stack([drawn, np.arange(len(drawn))], 1))
    assert_states(plain(app.readout.value), *readout_states(s, expected))
    return expected


SETTINGS = [
    {},
    {"mu": 1},
    {"objective": "ppo", "mu": 4},
    {"objective": "dr_grpo", "group_size": 8},
    {"objective": "gspo", "eps_low": 0.05, "eps_high": 0.05},
    {"objective": "cispo", "mu": 4},
    {"objective": "sapo", "mu": 4},
    {"beta": 0.3, "mu": 2},
    {"beta": 0.3, "kl_place": "reward", "group_size": 3},
]


@pytest.mark.parametrize(
    "values", SETTINGS, ids=lambda v: ",".join(map(str, v.values())) or "start"
)
def test_the_map_draws_llm_clips_push_frames_and_advantages(token_app, values):
    start = token_app.values()
    try:
        set_controls(token_app, **values)
        assert token_app.message.value == ""
        assert_map_shows(token_app)
    finally:
        set_controls(token_app, **start)


def test_an_objective_brings_its_own_band_to_the_sliders_and_the_map(token_app):
    """Choosing an objective moves the ε sliders to its registry band (DAPO 0.2/0.28, GMPO 0.4 on
    log r, contract "llm_clip") and the map and readout show that band; sliders of an objective
    without a band are greyed out and keep their values; a value set after the choice stays;
    Reset restores all."""
    start = token_app.values()
    sliders = [token_app.controls[name] for name in ("eps_low", "eps_high")]
    try:
        for objective, spec in llm_clip.SPECS.items():
            before = tuple(slider.value for slider in sliders)
            token_app.controls["objective"].value = objective
            assert tuple(slider.value for slider in sliders) == (spec.default_band or before)
            assert all(slider.disabled == (spec.band is None) for slider in sliders)
            assert_map_shows(token_app)
        token_app.controls["eps_high"].value = 0.5  # the user's own band, after the choice
        assert token_app.setting().eps_high == 0.5
        assert_map_shows(token_app)
    finally:
        token_app.reset()
    assert token_app.values() == start
    assert not any(slider.disabled for slider in sliders)


def test_the_maps_legend_names_the_objectives_with_a_detached_weight(token_app):
    detached = [s.label for s in llm_clip.SPECS.values() if s.detached_weight]
    legend = [t.get_text() for t in token_app.figure.legends[0].get_texts()]
    assert f"weight capped, gradient kept ({', '.join(detached)})" in legend


def test_a_new_group_size_shows_what_a_whole_redraw_shows_without_one(token_app):
    assert_drawn_in_place(token_app, "group_size", (8, 2, 5))
    labels = [t.get_text() for t in token_app.ax.get_yticklabels()]
    assert labels[0].startswith(response_batch(Setting().group_size).prompt_text(0))


def test_one_colour_scale_and_one_push_axis_hold_every_group_size(token_app):
    scale, reach = token_app.image.norm.vmax, token_app.ax_sum.get_xlim()[1]
    assert token_app.image.norm.vmin == -scale
    for group_size in range(2, MAX_GROUP + 1):
        for objective, mu in itertools.product(OBJECTIVES.values(), range(1, MAX_MU + 1)):
            setting = Setting(objective, mu, group_size=group_size, **band_of(objective))
            push = -push_expected(setting)[0].grad
            assert np.abs(push).max() <= scale
            assert np.abs(push.sum(axis=1)).max() < reach


@pytest.mark.parametrize(
    ("make", "error", "names"),
    [
        (lambda: TokenPushExplorer(Setting(group_size=1)), ValueError, "group_size"),
        (lambda: TokenPushExplorer(Setting(eps_high=1.5)), ValueError, "eps_high"),
        (lambda: TokenPushExplorer(Setting(mu=0)), ValueError, "mu"),
        (lambda: TokenPushExplorer(Setting(objective="trpo")), ValueError, "objective"),
        (lambda: TokenPushExplorer(Setting(kl_place="advantage")), ValueError, "kl_place"),
        (lambda: TokenPushExplorer({"mu": 2}), TypeError, "setting"),
        (lambda: LengthBiasExplorer(short=0), ValueError, "short"),
        (lambda: ClipFractionExplorer(mu=MAX_MU + 1), ValueError, "mu"),
    ],
)
def test_an_app_refuses_a_start_it_cannot_show_by_name(make, error, names):
    with pytest.raises(error, match=names):
        make()


@pytest.mark.parametrize(("short", "long", "advantage"), [(2, 8, 1.0), (3, 10, -1.0), (5, 5, 0.5)])
def test_the_length_app_stacks_llm_clips_pushes(short, long, advantage):
    app = LengthBiasExplorer()
    set_controls(app, short=short, long=long, advantage=advantage)
    mask = np.arange(MAX_LEN) < np.array([short, long])[:, None]
    logp = np.zeros((2, MAX_LEN))
    for ax, name in zip(app.figure.axes, llm_clip.AGGREGATIONS, strict=True):
        push = -llm_clip.policy_loss_grad(
            logp, logp, [advantage] * 2, mask, objective="grpo", aggregation=name, max_len=MAX_LEN
        )
        heights = [p.vertices[2, 1] - p.vertices[1, 1] for p in app.blocks[name].get_paths()]
        expected = np.concatenate([push[0, :short], push[1, :long]])
        assert np.allclose(heights, expected, rtol=0, atol=1e-15)
        totals = [label.get_text().split("= ")[-1] for label in app.labels[name]]
        assert totals == [rounded(push[row].sum(), 3) for row in range(2)]
        # the panel names its aggregation, not the objectives that default to it
        assert ax.get_title().startswith(name)
        assert not any(spec.label in ax.get_title() for spec in llm_clip.SPECS.values())
    if short != long:
        assert_states(plain(app.readout.value), f"{rounded(long / short, 3)} times")


@pytest.mark.parametrize(("mu", "eps"), [(1, 0.2), (2, 0.2), (3, 0.2), (4, 0.05)])
def test_the_clip_fraction_app_draws_each_librarys_fraction(mu, eps):
    app = ClipFractionExplorer()
    set_controls(app, mu=mu, eps=eps)
    batch = response_batch(4)
    args = (batch.logp_new[mu - 1], batch.logp_old, batch.advantages(), batch.mask)
    expected = [
        llm_clip.clip_fraction_cleanrl(args[0], args[1], batch.mask, eps=eps)["losses/clipfrac"],
        llm_clip.clip_fraction_verl(*args, objective="grpo", eps_low=eps)["actor/pg_clipfrac"],
        llm_clip.clip_ratio_trl(*args, objective="grpo", eps_low=eps)["clip_ratio/region_mean"],
    ]
    assert [bar.get_height() for bar in app.bars] == expected
    ratio = np.exp(args[0] - args[1])[batch.mask]
    drawn = np.sort(np.concatenate([p.get_xdata() for p in app.points.values()]))
    assert np.array_equal(drawn, np.sort(ratio))
    clipped = llm_clip.token_breakdown(*args, objective="grpo", eps_low=eps).is_clipped
    assert len(app.points["clipped"].get_xdata()) == clipped.sum()
    if mu == 1:
        assert expected == [0.0, 0.0, 0.0]
        assert_states(plain(app.readout.value), "every ratio is exactly 1")


# -- the tables, the KL figure and the numbers of Part A's prose ------------------------------


def test_the_batch_table_lists_each_answer_with_llm_clips_advantages():
    table, batch = batch_table(), response_batch(4)
    assert table.columns["answer"] == [batch.text(i) for i in range(len(batch.rewards))]
    assert table.columns["A (GRPO: ÷ std)"][1] == "+" + rounded(batch.advantages()[1], 3)


@pytest.mark.parametrize("t_max", [2.5, 5.0])
def test_the_kl_figure_shows_k3s_expected_gradient_is_the_reversed_kls(t_max):
    """E[grad k3] = grad KL(pi_ref || pi); k1's error is 1 (E[grad log pi] = 0); k3 * r and k2
    give the true gradient.  Things to try 6: with t_max=5.0 k3's error passes k1's, and the
    figure shows it all."""
    bias = kl_gradient_bias(t_max)
    assert bias.forward_gap < 1e-15
    assert np.allclose(bias.errors["k1"], 1.0, rtol=0, atol=1e-12)
    assert np.abs(bias.errors["exact"]).max() < 1e-12
    k3 = bias.errors["k3"]
    assert k3[0] < 0.05
    assert np.all(np.diff(k3) > 0)
    assert len(bias.figure.axes[0].lines) == 4
    assert bias.figure.axes[0].get_ylim()[1] > k3.max()
    assert (k3.max() > bias.errors["k1"].max() + 0.2) == (t_max == 5.0)


@pytest.mark.notebook
def test_the_libraries_table_shows_llm_clips_numbers_and_every_print_is_formatted():
    notebook, _ = run_committed(NOTEBOOK)
    (cell,) = [c for c in notebook.cells if c.source.startswith("at = (batch")]
    assert cell.metadata["jupyter"]["source_hidden"] is True
    shown = plain(cell.outputs[0]["data"]["text/html"])
    batch = response_batch(4)
    args = (batch.logp_new[2], batch.logp_old, batch.advantages(), batch.mask)
    dr = llm_clip.policy_loss(*args, objective="dr_grpo", max_len=MAX_LEN)
    cleanrl = llm_clip.clip_fraction_cleanrl(args[0], args[1], batch.mask)["losses/clipfrac"]
    capped = llm_clip.token_breakdown(*args, objective="cispo").is_clipped.sum()
    assert_states(
        shown,
        f"TRL grpo_trainer.py L3135 sum / (B · max_completion_length) loss {rounded(dr, 4)}",
        f"no 1/B loss {rounded(12 * dr, 4)}",
        f"any A {rounded(cleanrl, 3)}",
        f"{capped} weights capped",
        "0 weights capped",  # TRL's cap 5: no ratio of this batch reaches it
    )
    cispo = llm_clip.token_breakdown(*args, objective="cispo", eps_low=1.0, eps_high=4.0)
    assert (cispo.ratio[batch.mask] < 5).all()
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert printed
    assert not re.search(r"\.\d{7,}|\{'", printed)  # the shared formatter: no raw float, no dict


def _prose() -> str:
    return markdown_of(NOTEBOOK)


def part_a_numbers() -> list[str]:
    """Every number sections 1 to 6 and things to try 3 state, computed here (from llm_clip's
    registry where it is a default), and the facts behind the sentences that give no number."""
    batch, four, two = response_batch(4), response_batch(4).advantages(), response_batch(2)
    tokens, first = int(batch.mask.sum()), (batch.logp_new[0], batch.logp_old, four, batch.mask)
    at = {mu: push_expected(Setting(mu=mu))[0] for mu in range(1, MAX_MU + 1)}
    dapo = {e: push_expected(Setting(objective="dapo", eps_high=e))[0] for e in (0.2, 0.28)}
    above = {e: int((b.is_clipped & (four[:, None] > 0)).sum()) for e, b in dapo.items()}
    at_3, paper = (batch.logp_new[2], *first[1:]), {"eps_low": 3e-4, "eps_high": 4e-4}
    gspo = llm_clip.token_breakdown(*at_3, objective="gspo", **paper)
    cispo = push_expected(Setting(objective="cispo"))[0]
    two_sided = Setting(objective="cispo")  # verl's cap, the map's; the paper's: above only
    upper_only = push_expected(two_sided._replace(eps_low=1.0))[0].is_clipped.sum()
    below = int((cispo.is_clipped & (cispo.ratio < 1)).sum())
    assert int(cispo.is_clipped.sum()) == below + upper_only  # the same tokens above the cap
    silent = cispo.is_clipped & (cispo.grad == 0)  # "the one with no push has A = 0"
    assert silent.sum() == 1
    assert four[np.argwhere(silent)[0][0]] == 0.0
    assert abs(llm_clip.policy_loss(*first, objective="grpo")) < 1e-15  # "GRPO's loss is 0"
    assert push_expected(Setting(mu=1, beta=0.2))[0].loss > 0.01  # "with no KL term in the loss"
    fractions = {}
    for mu in (2, 3):
        args = (batch.logp_new[mu - 1], *first[1:])
        fractions[mu] = [
            llm_clip.clip_fraction_cleanrl(*args[:2], batch.mask)["losses/clipfrac"],
            llm_clip.clip_fraction_verl(*args)["actor/pg_clipfrac"],
            llm_clip.clip_ratio_trl(*args)["clip_ratio/region_mean"],
        ]
    assert len(set(fractions[2])) == 1
    assert fractions[3][1] == fractions[3][2]
    outside = batch.mask & (np.abs(at[3].ratio - 1) > 0.2) & ~at[3].is_clipped
    assert outside.sum() == 1
    assert four[np.argwhere(outside)[0][0]] == 0.0
    assert not at[1].is_clipped.any()
    spec = (np.log([[1.5], [1.5], [0.5], [0.5]]), np.zeros((4, 1)), [1.0, -1.0, 1.0, -1.0])
    spec += (np.ones((4, 1), bool),)
    trl = llm_clip.clip_ratio_trl(*spec)
    assert trl["clip_ratio/low_mean"] == trl["clip_ratio/high_mean"]
    # things to try 3: of the answers with A = 0, one stays (now A != 0) and one leaves; two
    # different rewards over their std (n - 1) give -1/sqrt(2) and +1/sqrt(2), less std_eps's bit
    zero = np.flatnonzero(four == 0)
    assert sum(row % 4 < 2 for row in zero) == 1  # the slider keeps each group's first two
    assert (two.rewards[0::2] != two.rewards[1::2]).all()
    (size,) = {rounded(a, 3) for a in np.abs(two.advantages())}
    assert size == rounded(1 / np.sqrt(2), 3)
    bias = kl_gradient_bias()
    (kl_at,) = np.flatnonzero(bias.t == 1.0)
    verl = llm_clip.clip_fraction_verl(*at_3, objective="gspo", **paper)["actor/pg_clipfrac"]
    region = llm_clip.clip_ratio_trl(*at_3, objective="gspo", **paper)["clip_ratio/region_mean"]
    capped = llm_clip.token_breakdown(*at_3, objective="cispo").is_clipped.sum()
    # section 2's SAPO and GMPO, from the registry and the loss: f(1) = 2/τ and f'(1) = 1 (a
    # one-token answer at r = 1, A = 1, w = 1); GMPO's band on log r, e^±0.4 on r
    tau_pos, tau_neg = llm_clip.SPECS["sapo"].tau
    at_one = llm_clip.token_breakdown([[0.0]], [[0.0]], [1.0], [[True]], objective="sapo")
    assert at_one.term[0, 0] == pytest.approx(2 / tau_pos, rel=1e-15)  # f(1) = 2 / tau
    assert at_one.grad[0, 0] == pytest.approx(-1.0, rel=1e-15)  # -w r f'(r) A: f'(1) = 1
    low, high = llm_clip.SPECS["gmpo"].default_band
    assert low == high
    far = llm_clip.token_breakdown([[1.0]], [[0.0]], [1.0], [[True]], objective="gmpo")
    assert far.ratio[0, 0] == pytest.approx(math.exp(high), rel=1e-15)  # log r clipped at 0.4
    dapo = llm_clip.SPECS["dapo"].default_band
    start = inspect.signature(LengthBiasExplorer).parameters  # the length app's two answers
    short, long = start["short"].default, start["long"].default
    times = rounded(long / short)
    (kl,) = [name for name in llm_clip.Options.__annotations__ if "kl" in name]  # policy_loss
    return [
        f"$\\beta$, TRL's name, is `llm_clip`'s `{kl}`",  # section 7's exercise calls it beta
        f"$\\tau = {rounded(tau_pos)}$ for $A > 0$, {rounded(tau_neg)} otherwise",
        "Since $f(1) = 2/\\tau$ and $f'(1) = 1$",
        f"Its paper's $\\epsilon = {rounded(high)}$ bounds $\\log r$",
        f"$[e^{{-{rounded(low)}}}, e^{{{rounded(high)}}}] \\approx "
        f"[{math.exp(-low):.2f}, {math.exp(high):.2f}]$",
        f"its paper's {rounded(high)}, which bounds $\\log r$",
        f"$\\epsilon_\\text{{high}}$ moves from {rounded(dapo[0])} to {rounded(dapo[1])}",
        f"no ⏎ within {MAX_LEN} tokens",
        f"$G = {batch.group_size}$ answers to each of {len(PROMPTS)} prompts",
        f"{len(batch.rewards)} answers",
        f"from {batch.lengths.min()} to {batch.lengths.max()} tokens long, {tokens} tokens in all",
        f"{int((batch.rewards == 1).sum())} answers are right",
        f"{len(zero)} answers have $A = 0$ exactly",
        f"switches off {int(at[3].is_clipped.sum())} of the {tokens} tokens",
        f"of the {above[0.2]} tokens switched off above the band, {above[0.2] - above[0.28]} gets",
        f"only {int(push_expected(Setting(objective='gspo'))[0].is_clipped.any(1).sum())} answer",
        f"two-sided cap $[{rounded(1 - two_sided.eps_low)}, {rounded(1 + two_sided.eps_high)}]$",
        f"{int(cispo.is_clipped.sum())} tokens have their weight capped",
        f"({below} of them below {rounded(1 - two_sided.eps_low)})",
        f"capped above only, at {rounded(1 + two_sided.eps_high)} (as Part B trains it), "
        f"{upper_only} tokens are",
        f"{int(gspo.is_clipped.any(1).sum())} of the {len(batch.rewards)} answers are switched",
        f"the {len(zero)} answers with",
        f"with {short} and {long} tokens, each token of the short answer gets {times} times",
        f"moves {times} times as much",
        "For PPO the aggregation is an implementation choice",
        f"starts at a loss of {rounded(llm_clip.policy_loss(*first, objective='dapo'), 4)}",
        f"{int(at[2].is_clipped.sum())} of the {tokens} tokens are switched off "
        f"({rounded(fractions[2][0], 2)} by all three)",
        f"CleanRL logs {rounded(fractions[3][0], 3)} and verl and TRL "
        f"{rounded(fractions[3][1], 3)}",
        f"all 4 samples ({llm_clip.clip_fraction_cleanrl(*spec[:2], spec[3])['losses/clipfrac']})",
        f"samples 0 and 3 ({llm_clip.clip_fraction_verl(*spec)['actor/pg_clipfrac']})",
        f"({rounded(trl['clip_ratio/low_mean'])} each here)",
        f"What became of the {len(zero)} answers that had $A = 0$",
        f"about $\\pm{size}$, whatever its reward",
        f"{rounded(bias.kl[kl_at], 4)} nats",
        f"off by {round(100 * bias.errors['k3'][kl_at])} %",
        f"({capped} of {tokens} weights capped here)",
        f"$B = {len(batch.rewards)}$ times TRL's",
        f"({rounded(verl, 3)} here",
        f"each answer once ({rounded(region, 3)})",
    ]


def test_every_number_part_a_states_is_the_computed_one():
    prose = _prose()
    assert_states(prose, *part_a_numbers())
    assert "(PPO, DAPO, CISPO" not in prose  # token-mean is not PPO's by definition (section 3)


def test_things_to_try_8_and_9_sapo_keeps_most_of_a_push_and_gmpo_at_0_2():
    """Things to try 8: at mu = 4, SAPO leaves every token GRPO switches off most of its unclipped
    push w*r*A (over 90 %, never 0).  9: GMPO at GRPO's 0.2 bounds r to [e^-0.2, e^0.2], and
    switches off at least as many tokens as at its own 0.4."""
    grpo = push_expected(Setting(objective="grpo", mu=4))[0]
    sapo, advantages = push_expected(Setting(objective="sapo", mu=4))
    off = grpo.is_clipped
    unclipped = -(grpo.weight * grpo.ratio * advantages[:, None])
    assert off.sum() > 0
    share = sapo.grad[off] / unclipped[off]
    assert (share > 0.9).all()
    assert (share < 1).all()
    gmpo = push_expected(Setting(objective="gmpo", mu=3, eps_low=0.2, eps_high=0.2))[0]
    own = push_expected(Setting(objective="gmpo", mu=3, **band_of("gmpo")))[0]
    assert own.is_clipped.sum() < gmpo.is_clipped.sum()
    kept = gmpo.mask & ~gmpo.is_clipped & (advantages[:, None] != 0)
    assert kept.any()


#: Each library fact the prose states, and what the Sources list must name for it.
SOURCED = {
    "`num_iterations`": ("grpo_config.py", "f2cd577"),
    '"why GRPO Train loss clip_ratio always zero?"': ("github.com/huggingface/trl/issues/3120",),
    "which means no clipping will occur": ("github.com/huggingface/trl/issues/3757",),
    '"Why does loss start at 0': ("github.com/huggingface/trl/issues/2703",),
    "tends to prefer shorter completions": ("grpo_config.py` lines", "234–249"),
    "biased KL estimator and how to fix it": ("github.com/verl-project/verl/pull/2953",),
    "a later verl pull request (April 2026)": ("github.com/verl-project/verl/pull/6058",),
    "`use_bias_correction_kl`": ("grpo_trainer.py` lines", "3071–3076"),
    "on by default in TRL 1.16.0, off at commit f2cd577": (
        "`use_bias_correction_kl=True` (line 973",
    ),
    "newer engine workers": ("`verl/workers/utils/losses.py` lines 102–106",),
    "`use_kl_in_reward`": ("ppo_trainer.yaml` lines 87–102", "ray_trainer.py` lines"),
    "`masked_sum`": ("torch_functional.py` lines", "281–284"),
    "`kl_penalty_forward`": ("1841–1902", "b178a3c"),
    "gradient-accumulation steps": ("dp_actor.py` lines 575–578",),
    "`clipfrac`": ("cleanrl/ppo.py` lines 257–258", "fe8d8a0"),
    "Dr. GRPO": ("arXiv 2503.20783",),
    "GSPO": ("arXiv 2507.18071",),
    "CISPO": ("arXiv 2506.13585",),
    "DAPO": ("arXiv 2503.14476",),
    "SAPO": ("arXiv 2511.20347", "TRL 1.16.0"),
    "GMPO": ("arXiv 2507.20673", "verl 0.9.1"),
}


def test_library_statements_name_their_sources_in_the_list_at_the_end():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    last = " ".join(notebook.cells[-1].source.split())
    sources = last.partition("## Sources")[2]
    body = _prose().partition("## Sources")[0]
    for claim, names in SOURCED.items():
        assert claim in body, claim
        for name in names:
            assert name in sources, (claim, name)
    assert not re.search(r"#\d{3,}", body), "tracker numbers go in the Sources list"
    # every line the library table cites lies inside a range the Sources list gives its file
    chunks = re.split(r"`[\w/]*?(\w+\.(?:py|yaml))`", sources)  # file, what follows it, ...
    ranges = {
        file: [tuple(map(int, r)) for r in re.findall(r"(\d+)–(\d+)", text)]
        for file, text in zip(chunks[1::2], chunks[2::2], strict=True)
    }
    files = {"TRL": "grpo_trainer.py", "verl": "core_algos.py", "CleanRL": "ppo.py"}
    current = ""
    notebook_code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    for where in re.findall(r'"((?:TRL|verl|CleanRL) [^"]*L\d+[^"]*)"', notebook_code):
        current = next((f for key, f in files.items() if where.startswith(key)), current)
        for file, line in re.findall(r"(\w+\.(?:py|yaml))|L(\d+)", where):
            if file:
                current = file
            elif current == "actor.yaml":
                assert f"{line}," in chunks[chunks.index("actor.yaml") + 1], where
            else:
                assert any(lo <= int(line) <= hi for lo, hi in ranges[current]), (where, line)


def test_the_opening_names_the_lecture_cells_and_they_form_sections_1_to_4():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    opening = " ".join(notebook.cells[0].source.split())
    assert "tagged `lecture`" in opening
    assert "20-minute add-on" in opening
    lecture = [c for c in notebook.cells if "lecture" in c.metadata.get("tags", [])]
    headings = [c.source.splitlines()[0] for c in lecture if c.source.startswith("## ")]
    assert [h[:5] for h in headings] == ["## 1.", "## 2.", "## 3.", "## 4."]
