"""Notebook 7's Part B (RLHF in miniature): every finding, number and source its prose states,
from the study's committed results (experiments/rlhf_study.json and rlhf_transfer.json).

Each number is computed here from the committed results and looked for in the markdown
(``assert_states``); the results themselves are checked in test_rlhf_study.py.
"""

from __future__ import annotations

import json
import re
from functools import cache

import nbformat
import numpy as np
from helpers import assert_states, markdown_of
from notebook_runner import NOTEBOOK_DIR

import llm_clip
from experiments.rlhf_findings import FINDINGS
from experiments.rlhf_report import TRANSFER_JSON
from experiments.rlhf_study import TRAINED
from ppo_viz.llm import Setting
from ppo_viz.rlhf import apps
from ppo_viz.rlhf.results import cell_of, grid_text, load_results

NOTEBOOK = NOTEBOOK_DIR / "07_clipping_in_llm_training.ipynb"


def _prose() -> str:
    return markdown_of(NOTEBOOK)


@cache
def committed() -> dict:
    return load_results()


def finding(key: str) -> dict:
    return next(f for f in committed()["findings"] if f["key"] == key)


def held(key: str, side: str = "supports") -> str:
    """Where a finding's side holds on all three sets, as Part B writes it."""
    return grid_text(finding(key)[side]["held"], committed()["learning_rates"])


def at(key: str, mu: int, lr: float) -> str:
    """The confirmation seeds' mean difference of a finding at one setting (as the report)."""
    f = finding(key)
    i = [tuple(s) for s in f["settings"]].index((mu, lr))
    return f"{f['curves']['confirmation']['mean'][i]:+.3f}"


def reach(key: str, lrs, half: bool = False) -> float:
    """How far from 0 (``half``: the largest half-width) the confirmation seeds' band of a
    finding reaches over the settings at learning rates ``lrs``."""
    f = finding(key)
    at_lrs = [i for i, (_, lr) in enumerate(f["settings"]) if lr in lrs]
    low, high = (np.array(f["curves"]["confirmation"][k])[at_lrs] for k in ("low", "high"))
    return float(((high - low) / 2).max() if half else np.abs([low, high]).max())


def confirmation(method: str, lr: float, mu: int) -> dict:
    return cell_of(committed(), "confirmation", method, lr, mu)


def _part_b() -> str:
    return _prose().partition("## 8. Part B")[2].partition("## Summary")[0]


def _summary() -> str:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    return " ".join(notebook.cells[-1].source.partition("## Things to try")[0].split())


def test_part_b_states_each_finding_where_all_three_sets_agree():
    """Each side of a finding that holds on all three sets: its range, as Part B writes it; each
    side that holds nowhere: "nowhere on all three sets", "not detectable" or "at none"."""
    prose = _part_b()
    for f in committed()["findings"]:
        for side in ("supports", "against"):
            if f[side]["held"]:
                assert held(f["key"], side) in prose, (f["key"], side)
    for key in ("clip_higher_entropy", "clip_higher_accuracy", "length_bias_std"):
        # "not detectable at any of the N settings": no setting where two sets agree
        assert finding(key)["supports"]["stated"] == finding(key)["against"]["stated"] == [], key
    for key in ("gspo_stability", "gspo_efficiency", "gspo_ratio_at_tight_band", "cispo_speed"):
        assert not finding(key)["supports"]["held"], key  # "higher nowhere on all three sets"
    assert not finding("dr_grpo_accuracy")["against"]["stated"]  # "at none of the 24 settings"
    assert not finding("clipping_needed")["against"]["stated"]
    for word in ("tie", "tied", "ties", "equal", "equally", "same score", "reproduces"):
        assert not re.search(rf"\b{word}\b", prose, re.IGNORECASE), word


def part_b_numbers() -> list[str]:
    """Every number Part B states of the study's design, its cells, its explorer, each finding's
    curve and the third set, computed from the committed results; and the facts behind them."""
    results, s, m = committed(), committed()["settings"], committed()["model"]
    lrs, mus, sets, ran = (results[k] for k in ("learning_rates", "updates", "sets", "methods"))
    seeds = sets["confirmation"]["seeds"]
    assert ran["cispo"]["eps_low"] == 1.0  # its band [0, 1.2]: no positive ratio is capped below
    assert Setting().eps_high == ran["cispo"]["eps_high"]
    assert s["kl_coef"] == 0.0
    assert ran["ppo"]["advantages"] == "gae"
    assert ran["dapo_sym"]["eps_high"] == 0.2
    assert (ran["gspo"]["eps_low"], ran["gspo"]["eps_high"]) == (3e-4, 4e-4)
    assert (ran["grpo_tight"]["eps_low"], ran["gspo_wide"]["eps_high"]) == (0.02, 0.2)
    assert ran["dapo"]["eps_high"] is None
    assert llm_clip.DAPO_EPS_HIGH == 0.28
    assert apps.SHOWN_AT_START == ("grpo", "unclipped")  # "GRPO against the unclipped surrogate"
    # "the entropy per token falls over training in every cell of the study"
    assert all(
        c["curves"]["entropy"][-1] < c["curves"]["entropy"][0]
        for c in results["cells"]
        if c["set"] == "confirmation"
    )
    # "at lr 0.001 and 0.003 the difference is not detectable at any mu"
    assert not [lr for _, lr in finding("clipping_needed")["supports"]["held"] if lr in lrs[:2]]
    assert [8, 0.02] in finding("clipping_needed")["supports"]["held"]  # the curves' cell
    gspo = [
        np.mean(confirmation("gspo", lr, mu)["per_seed"]["clip_fraction"])
        for lr in lrs
        for mu in mus
        if mu > 1
    ]
    entropy = {
        (lr, mu): confirmation("dapo", lr, mu)["curves"]["entropy"]
        for lr, mu in ((0.001, 2), (0.02, 8))
    }
    third, iterations = results["third_set"], results["curve_iterations"]
    assert iterations[-1] == s["iterations"]
    small, large = [lr for lr in lrs if lr <= 0.003], [lr for lr in lrs if lr >= 0.02]
    dr = finding("dr_grpo_accuracy")  # its lowest band point, at a large learning rate
    lowest = int(np.argmin(dr["curves"]["confirmation"]["low"]))
    (mu_low, lr_low), dr_low = dr["settings"][lowest], dr["curves"]["confirmation"]["low"][lowest]
    assert lr_low in large
    efficiency = finding("gspo_efficiency")["supports"]  # stated by two sets, not by the third
    unconfirmed = [s for s in efficiency["stated"] if s not in efficiency["held"]]
    assert unconfirmed
    replication = finding("gspo_efficiency")["curves"]["replication"]["sign"]
    assert replication[finding("gspo_efficiency")["settings"].index(unconfirmed[0])] == 0
    assert not efficiency["contradicted"]
    cispo = finding("cispo_speed")
    c, sign = ({k: v[f] for k, v in cispo["curves"].items()} for f in ("c", "sign"))
    assert c["discovery"] == max(c.values())
    more = [d == 0 and -1 == k == r for d, k, r in zip(*sign.values(), strict=True)]
    mine, theirs = (
        cell_of(results, "discovery", m, 0.003, 2)["per_seed"]["reward_mean"]
        for m in ("cispo", "dapo")
    )
    zeros = sum(a == b for a, b in zip(mine, theirs, strict=True))
    gspo_band = (f"{ran['gspo'][k] * 1e4:g}" for k in ("eps_low", "eps_high"))
    return [
        # the design
        f"{m['prompts']} prompts and answers of up to {m['max_len']} tokens",
        f"one tanh layer of {m['hidden']} units",
        f"which answers {results['reference_accuracy']:.1%} of the prompts right",
        f"{s['iterations']} iterations; each samples {s['group_size']} answers to each of "
        f"{s['prompts_per_batch']} prompts",
        f"{len(ran)} methods",
        f"{len(lrs)} learning rates from {min(lrs):g} to {max(lrs):g}",
        "$\\mu$ = " + ", ".join(map(str, mus[:-1])) + f" and {mus[-1]}",
        f"on {sets['discovery']['seeds']} *discovery*, {seeds} *confirmation* and "
        f"{sets['replication']['seeds']} *replication* seeds",
        f"only for {s['iterations']} iterations of this tiny task",
        f"averaged over the {m['prompts']} prompts and the {seeds} confirmation seeds",
        "$\\epsilon_\\text{high} = 0.2$",
        f"CISPO capping its weight above only, at {1 + ran['cispo']['eps_high']:g}, where section "
        f"2's also caps it below, at {1 - Setting().eps_low:g}",
        f"GRPO with a token-level $\\epsilon = {ran['grpo_tight']['eps_high']:g}$, GSPO with "
        f"$\\epsilon = {ran['gspo_wide']['eps_high']:g}$",
        # the cell of the curves, and the explorer
        "at lr 0.02 and $\\mu = 8$, where the clip matters on all three sets",
        f"over the {seeds} confirmation seeds",
        f"on {apps.DEFAULT_SEEDS} seeds (0 to {apps.DEFAULT_SEEDS - 1}, the study's first "
        "discovery seeds)",
        f"over {apps.SMOOTHING} iterations",
        f"at lr {apps.START_LEARNING_RATE:g}, $\\mu = {apps.START_UPDATES}$",
        f"the {seeds} seeds of the figures above",
        # the findings' numbers
        f"(at lr 0.02, $\\mu = 8$, by {at('clipping_needed', 8, 0.02)})",
        f"between {min(gspo):.0%} and {max(gspo):.0%} of GSPO's tokens",
        f"({np.mean(confirmation('gspo', 0.001, 8)['per_seed']['clip_fraction']):.0%} at lr "
        "0.001, $\\mu = 8$, where GRPO's clip switches off "
        f"{np.mean(confirmation('grpo', 0.001, 8)['per_seed']['clip_fraction']):.1%})",
        f"(by {at('length_bias', 2, 0.001)} tokens at lr 0.001, $\\mu = 2$",
        f"at none of the {len(finding('dr_grpo_accuracy')['settings'])} settings",
        f"not detectable at any of the {len(finding('length_bias_std')['settings'])} settings",
        f"the confirmation seeds' mean is {at('gspo_stability', 8, 0.02)}, but the band holds 0",
        f"higher at μ 8 at lr 0.03 ({at('gspo_band_on_tokens', 8, 0.03)})",
        f"only at μ 8 at lr 0.003 ({at('gspo_ratio_at_grpo_band', 8, 0.003)})",
        f"(by {at('cispo_speed', 8, 0.02)} at lr 0.02, $\\mu = 8$)",
        # the bands' width where a finding is not detectable or reads "not below"
        f"bands reach {dr_low:+.3f} (at lr {lr_low:g}, $\\mu = {mu_low}$)",
        f"({at('length_bias_aggregation', 2, 0.001)} tokens at lr 0.001, $\\mu = 2$)",
        f"within ±{reach('length_bias_std', small):.2f} tokens at lr ≤ {small[-1]:g} but only "
        f"within ±{reach('length_bias_std', large):.2f} at lr ≥ {large[0]:g}",
        f"at lr ≥ {large[0]:g} its confirmation seeds' bands are as wide as "
        f"±{reach('gspo_ratio_at_grpo_band', large, half=True):.2f}",
        "(${}\\times10^{{-4}}$ below and ${}\\times10^{{-4}}$ above on the geometric mean of an "
        "answer's token ratios, against {:g} on each token's)".format(
            *gspo_band, ran["grpo_tight"]["eps_high"]
        ),
        f"put it higher at {grid_text(unconfirmed, lrs)} "
        f"({at('gspo_efficiency', *unconfirmed[0])}), where the replication seeds' band holds 0",
        f"({zeros} of {len(mine)} discovery seeds' at lr 0.003, $\\mu = 2$)",
        f"The discovery seeds' c is {c['discovery']:.2f}, against {c['confirmation']:.2f} and "
        f"{c['replication']:.2f} on the confirmation and replication seeds, which both put CISPO "
        f"lower at {sum(more)} more settings",
        f"at any of the {len(finding('clip_higher_entropy')['settings'])} settings",
        f"falls from {entropy[0.001, 2][0]:g} nats at iteration {iterations[0]} (the first the "
        f"study stores) to {entropy[0.001, 2][-1]:g} at iteration {iterations[-1]} at lr 0.001, "
        f"$\\mu = 2$, and from {entropy[0.02, 8][0]:g} to {entropy[0.02, 8][-1]:g} at lr 0.02, "
        "$\\mu = 8$",
        f"Of the {third['stated']} sides that the discovery and the confirmation seeds state "
        f"somewhere, the replication seeds confirm {third['held_everywhere']} at every stated "
        f"setting and {third['held_somewhere']} at some, and contradict none",
    ]


def test_every_number_part_b_states_is_the_committed_one():
    assert_states(_part_b(), *part_b_numbers())
    assert committed()["third_set"]["contradicted"] == 0
    assert finding("gspo_ratio_at_grpo_band")["supports"]["held"] == [[8, 0.003]]
    assert finding("gspo_ratio_at_grpo_band")["against"]["held"] == []  # "differs only at"
    stability = finding("gspo_stability")  # "but the band holds 0" at lr 0.02, mu 8
    assert stability["curves"]["confirmation"]["sign"][stability["settings"].index([8, 0.02])] == 0
    assert finding("gspo_band_on_tokens")["supports"]["held"] == [[8, 0.03]]
    code = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    assert "curves_figure(results, lr=0.02, mu=8)" in code
    assert "effects_figure(results)" in code
    # the opening lists the objectives Part A shows and says Part B trains "the first six"
    results = committed()
    objectives = {method["objective"] for method in results["methods"].values()}
    opening = " ".join(nbformat.read(NOTEBOOK, as_version=4).cells[0].source.split())
    listed = re.search(r"implement \(([^)]*)\)", opening).group(1).replace(" and ", ", ")
    assert "the first six of them" in opening
    assert len(objectives) == 6  # "the six objectives of section 2"
    assert {llm_clip.SPECS[o].label for o in objectives} == {
        label.strip() for label in listed.split(",")[:6]
    }
    n = [results["sets"][s]["seeds"] for s in ("discovery", "confirmation", "replication")]
    assert_states(opening, " + ".join(map(str, n)) + " seeds")


def test_part_b_states_the_transfer_checks_outcome():
    """ "Does it transfer?": each number from the check's results (experiments/rlhf_transfer.json):
    the seeds, the prompts, the sides that hold, and the one that does not, on both splits."""
    t = json.loads(TRANSFER_JSON.read_text(encoding="utf-8"))
    judged = [r for r in t["transfer"] if r["metric"] != "trained"]
    (odd,) = [r for r in judged if r["verdict"] != "holds"]
    beside = next(r for r in t["transfer"] if r["key"] == odd["key"] and r["metric"] == "trained")
    assert not [r for r in t["transfer"] if r["reversed"]]  # "none is reversed"
    assert (odd["key"], odd["verdict"], beside["verdict"]) == (
        "gspo_ratio_at_grpo_band", "not detectable here", "holds"
    )  # fmt: skip
    ((mu, lr),) = odd["settings"]
    lrs = [f"{v:g}" for v in t["learning_rates"]]
    assert_states(
        _part_b(),
        f"On {t['sets']['transfer']['seeds']} fresh seeds",
        f"training on {len(TRAINED)} of the {t['model']['prompts']} prompts, "
        f"{len(judged) - 1} of the {len(judged)} sides",
        f"(at $\\mu$ {' and '.join(map(str, t['updates']))}, lr {', '.join(lrs[:-1])} and "
        f"{lrs[-1]})",
        f"the {len(t['held_out'])} held-out prompts",
        f"at lr {lr:g}, $\\mu = {mu}$: {odd['band']['mean'][0]:+.3f} on the held-out prompts",
        f"({beside['band']['mean'][0]:+.3f} on the trained ones, above 0)",
    )
    # the controls: GSPO against the GRPO clipping nearest its share; minibatches at mu 1
    match = t["control_tests"]["clip_match"]
    shares = [r["clip_fraction"][r["matched"]] / r["clip_fraction"]["gspo"] for r in match]
    gaps = [r["gspo_minus_matched"]["held_out"] for r in match]
    assert len({r["matched"] for r in match}) == 1  # "GRPO at a token band of ..."
    assert min(low for _, low, _ in gaps) > 0  # "falls below GSPO at ..."
    split = next(r for r in t["control_tests"]["minibatch"] if r["setting"] == [1, 0.02])
    epochs = next(r for r in t["control_tests"]["minibatch"] if r["setting"] == [2, 0.02])
    mean, low, high = split["grpo_minus_unclipped"]["held_out"]
    assert low < 0 < high  # "not detectably above"
    assert epochs["grpo_minus_unclipped"]["held_out"][1] > 0
    assert_states(
        _part_b(),
        f"GRPO at a token band of {t['controls'][match[0]['matched']]['eps_high']:g}",
        f"clipping {100 * min(shares):.0f}–{max(shares):.0%} as many tokens as GSPO",
        f"(by {min(g[0] for g in gaps):.3f} to {max(g[0] for g in gaps):.3f} on the held-out",
        f"split into {split['minibatches']} minibatches at $\\mu = 1$, GRPO clips "
        f"{split['clip_fraction']['grpo']:.1%} of tokens at lr 0.02",
        f"unclipped surrogate ({mean:+.3f}, its band holding 0; "
        f"{epochs['grpo_minus_unclipped']['held_out'][0]:+.3f} with $\\mu = 2$ epochs)",
    )
    # GSPO above GRPO at lr 0.02, mu 8 in that table, where the study's three sets hold 0
    rows = [r for r in t["control_tests"]["minibatch"] if r["minibatches"] == 1]
    gspo = next(r for r in rows if r["setting"] == [8, 0.02])["gspo_minus_grpo"]
    stability = finding("gspo_stability")
    i = stability["settings"].index([8, 0.02])
    assert [v["sign"][i] for v in stability["curves"].values()] == [0, 0, 0]
    assert min(gspo["held_out"][1], gspo["trained"][1]) > 0  # "each band above 0"
    assert_states(
        _part_b(),
        f"by {gspo['held_out'][0]:+.3f} on the held-out prompts and {gspo['trained'][0]:+.3f} on "
        f"the trained ones, each band above 0 (a band over {len(rows)} settings, narrower than "
        f"the study's over {len(stability['settings'])})",
    )
    assert t["sets"]["transfer"]["seeds"] == 20  # "the transfer check's one set of 20 seeds"
    assert_states(
        _summary(), "at lr 0.02, $\\mu = 8$ the transfer check's one set of 20 seeds puts GSPO"
    )


def test_the_summary_scopes_part_bs_findings_to_their_settings():
    results = committed()
    lrs = results["learning_rates"]
    assert all(lr >= 0.02 for _, lr in finding("cispo_speed")["against"]["held"])  # "large"
    assert all(lr <= 0.01 for _, lr in finding("length_bias")["supports"]["held"])  # "small"
    assert not finding("gspo_ratio_at_tight_band")["supports"]["held"]
    assert_states(
        _summary(),
        f"Trained for {results['settings']['iterations']} iterations of a tiny task on three "
        f"sets of {results['sets']['confirmation']['seeds']} seeds",
        f"over {len(lrs)} learning rates and $\\mu$",
        f"not detectable at lr {lrs[0]:g} and {lrs[1]:g}",
    )


def test_the_sources_give_where_each_paper_makes_part_bs_claims():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    sources = " ".join(notebook.cells[-1].source.partition("## Sources")[2].split())
    papers = sources.partition("Papers")[2]
    for claim in (f for f in FINDINGS if f.kind == "claim"):
        arxiv = re.search(r"arXiv \d{4}\.\d{5}", claim.source).group(0)
        where = papers.partition(arxiv)[2].partition(";")[0]
        for place in claim.source.partition("), ")[2].split(" and "):
            assert place in where, (claim.key, place)
