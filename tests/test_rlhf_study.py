"""The RLHF study (experiments/rlhf_study.py): command, committed results, findings, figures, app.

* The command: re-running the reference and a cell of the plan the results store gives the
  committed numbers (exactly on the machine that made them); unknown names are refused before
  any work; a partial run never writes over the committed results; an interrupted run
  resumes from its cache; ``--quick`` writes nothing.
* The findings (their files and tables: test_study_results.py): every number stated is
  recomputed from the stored per-seed values; each
  stated finding holds on both sets of seeds in its direction; the cells were chosen on the
  discovery seeds; with mu = 1 nothing is clipped and the clip-only variants are one run.
* The figures draw the committed means; the explorer trains what its controls say, keeps
  runs, and at the study's grid shows the committed runs of its seeds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from helpers import assert_states, plain, simulating_another_cpu

from experiments import evidence
from experiments import rlhf_findings as findings
from experiments import rlhf_study as command
from experiments import rlhf_transfer as transfer_check
from experiments.rlhf_report import TRANSFER_JSON
from ppo_viz.machine import fingerprint
from ppo_viz.numbers import rounded
from ppo_viz.rlhf import apps
from ppo_viz.rlhf.apps import TrainingExplorer, smoothed
from ppo_viz.rlhf.figures import CURVE_PANELS, curves_figure, effects_figure, score_figure
from ppo_viz.rlhf.results import RESULTS_MARKDOWN, cell_of, grid_text, load_results
from tiny_lm import reference_model, right_answer_probability
from tiny_rlhf import METHODS, TrainSettings


@cache
def committed():
    return load_results()


def same_machine() -> bool:
    """Whether this machine computes the committed runs' last bits (chaotic runs agree)."""
    return committed()["machine"] == fingerprint() and not simulating_another_cpu()


# --------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------


def test_rerunning_the_reference_and_a_cell_reproduces_the_committed_numbers():
    """The reference model, and the cell of GRPO at lr 0.01 and mu = 2 on the confirmation
    seeds of the plan the results store."""
    accuracy = right_answer_probability(reference_model()).mean()
    tolerance = 1e-12 if same_machine() else 0.02  # another CPU distils another reference
    assert committed()["reference_accuracy"] == pytest.approx(accuracy, abs=tolerance)
    cell = next(
        c
        for c in command.plan_of(committed()).cells
        if (c.seed_set, c.method, c.settings.learning_rate, c.settings.updates)
        == ("confirmation", "grpo", 0.01, 2)
    )
    fresh = command.run_cell(cell)["per_seed"]
    stored = cell_of(committed(), "confirmation", "grpo", 0.01, 2)["per_seed"]
    if same_machine():
        assert fresh == stored
    else:  # chaotic: other last bits, another draw of the same runs
        for name in ("score", "excess", "entropy"):
            low, high = evidence.bootstrap_interval(stored[name])
            assert abs(np.mean(fresh[name]) - np.mean(stored[name])) < 3 * (high - low), name


# --------------------------------------------------------------------------
# The findings, recomputed from the stored per-seed values
# --------------------------------------------------------------------------


def stored_differences(finding: dict, seed_set: str) -> np.ndarray:
    """(seeds, settings): the finding's paired differences, from the stored per-seed values."""
    columns = []
    for mu, lr in finding["settings"]:
        mine, theirs = (
            np.array(
                cell_of(committed(), seed_set, m, lr, mu)["per_seed"][finding["metric"]], float
            )
            for m in (finding["method"], finding["versus"])
        )
        columns.append(mine - theirs)
    d = np.array(columns).T
    return d[np.isfinite(d).all(axis=1)]


@pytest.mark.parametrize("index", range(len(findings.FINDINGS)))
def test_each_finding_is_its_stored_seeds_curves_and_stated_where_the_sets_agree(index):
    """Each finding: tested at every learning rate and its mu; on each set its curve is the
    simultaneous band of the stored per-seed differences, and its sides are
    ``evidence.stated_side`` of the three sets' signs (the rule: that function's doctest; the
    stored JSON re-derived byte for byte: test_study_results' test of ``--restate``)."""
    results, claim = committed(), findings.FINDINGS[index]
    finding = results["findings"][index]
    assert finding["key"] == claim.key
    mus = [mu for mu in claim.updates if mu in results["updates"]]
    assert finding["settings"] == [[mu, lr] for mu in mus for lr in results["learning_rates"]]
    signs = {}
    for seed_set, stored in finding["curves"].items():
        band = evidence.simultaneous_band(stored_differences(finding, seed_set))
        for key in ("mean", "low", "high"):
            assert stored[key] == pytest.approx(band[key], rel=1e-12, abs=1e-15), seed_set
        low, high = np.array(band["low"]), np.array(band["high"])
        signs[seed_set] = np.where(low > 0, 1, np.where(high < 0, -1, 0)).tolist()
        assert stored["sign"] == signs[seed_set]
    assert list(signs) == ["discovery", "confirmation", "replication"]
    for side, sign in (("supports", claim.direction), ("against", -claim.direction)):
        at = evidence.stated_side(signs, sign)
        assert finding[side] == {k: [finding["settings"][i] for i in v] for k, v in at.items()}


def test_the_third_set_count_is_the_stated_sides_that_hold_on_it():
    results = committed()
    sides = [f[s] for f in results["findings"] for s in ("supports", "against") if f[s]["stated"]]
    assert results["third_set"] == {
        "stated": len(sides),
        "held_everywhere": sum(s["held"] == s["stated"] for s in sides),
        "held_somewhere": sum(bool(s["held"]) for s in sides),
        "contradicted": sum(bool(s["contradicted"]) for s in sides),
    }


def test_the_report_names_where_the_third_set_holds_0_and_the_bands_critical_values():
    """Where discovery and confirmation agree but the third set's band holds 0, the report
    names the settings; and it gives the curves' largest and median critical value (c)."""
    results = committed()
    text = " ".join(RESULTS_MARKDOWN.read_text(encoding="utf-8").split())
    c = [curve["c"] for f in results["findings"] for curve in f["curves"].values()]
    said = [f"up to {max(c):.2f} here, against a median of {np.median(c):.2f}"]
    for side in (f[s] for f in results["findings"] for s in ("supports", "against")):
        left = [s for s in side["stated"] if s not in side["held"] + side["contradicted"]]
        lrs = results["learning_rates"]
        said += [f"; the third set's band holds 0 at {grid_text(left, lrs)})"] if left else []
    assert len(said) == 3  # gspo_efficiency at mu 8, lr 0.02; clipping_needed at mu 8, lr 0.01
    assert_states(text, *said)


def test_with_one_update_nothing_is_clipped_and_the_clip_variants_are_one_run():
    facts = committed()["facts_at_one_update"]
    assert facts["largest_clip_fraction"] == 0
    assert facts["identical"] == {
        "grpo = gspo = unclipped = grpo_tight = gspo_wide": True,
        "dapo = dapo_sym = cispo": True,
    }


def test_each_control_changes_one_thing_of_the_method_it_controls():
    """GRPO at ε 0.02 and GSPO at ε 0.2 change only the band; Dr. GRPO's aggregation alone and
    GRPO's mean-only advantages each one of Dr. GRPO's two changes."""
    ran = committed()["methods"]

    def changed(a: str, b: str) -> set:
        return {k for k in ran[a] if k not in ("key", "label") and ran[a][k] != ran[b][k]}

    assert changed("grpo_tight", "grpo") == {"eps_low", "eps_high"}
    assert changed("gspo_wide", "gspo") == {"eps_low", "eps_high"}
    assert changed("dr_grpo_agg", "grpo") == {"objective"}
    assert changed("dr_grpo_agg", "dr_grpo") == {"advantages"}
    assert changed("grpo_mean", "grpo") == {"advantages"}
    assert changed("grpo_mean", "dr_grpo") == {"objective"}


# --------------------------------------------------------------------------
# Figures and the explorer
# --------------------------------------------------------------------------


def test_the_score_figure_draws_each_methods_committed_means():
    results = committed()
    figure = score_figure(results)
    assert len(figure.axes) == len(results["updates"])
    for ax, mu in zip(figure.axes, results["updates"], strict=True):
        for line in ax.get_lines():
            if line.get_gid() in METHODS:
                expected = [
                    cell_of(results, "confirmation", line.get_gid(), lr, mu)["mean"]["score"][
                        "mean"
                    ]
                    for lr in results["learning_rates"]
                ]
                assert line.get_ydata().tolist() == expected


def test_the_effects_figure_draws_each_findings_confirmation_curve():
    results = committed()
    figure = effects_figure(results)
    assert len(figure.axes) == len(results["findings"])
    for ax, finding in zip(figure.axes, results["findings"], strict=True):
        settings = [tuple(s) for s in finding["settings"]]
        for line in (line for line in ax.get_lines() if line.get_gid()):
            mu = int(line.get_gid())
            at = [settings.index((mu, lr)) for lr in results["learning_rates"]]
            expected = [finding["curves"]["confirmation"]["mean"][i] for i in at]
            assert line.get_ydata().tolist() == expected


def test_the_curves_figure_draws_the_committed_curves():
    results = committed()
    figure = curves_figure(results, 0.01, 4)
    for ax, (name, _, _) in zip(figure.axes, CURVE_PANELS, strict=True):
        for line in ax.get_lines():
            if line.get_gid() in METHODS:
                stored = cell_of(results, "confirmation", line.get_gid(), 0.01, 4)["curves"][name]
                assert line.get_ydata().tolist() == stored


def drawn(app: TrainingExplorer, key: str, panel: int) -> np.ndarray:
    return np.asarray(app.lines[key][panel].get_ydata())


def test_the_explorer_draws_the_runs_of_its_settings():
    app = TrainingExplorer(shown=("grpo", "unclipped"))
    app.controls["learning_rate"].value = 0.03
    app.controls["updates"].value = 8
    settings = TrainSettings(learning_rate=0.03, updates=8)
    for key in ("grpo", "unclipped"):
        run = app.runs[(settings, key)]
        for panel, (name, _, _) in enumerate(CURVE_PANELS):
            assert np.allclose(drawn(app, key, panel), smoothed(run.curve(name)), equal_nan=True)
        assert app.lines[key][0].get_visible()
    assert not app.lines["gspo"][0].get_visible()
    shown = plain(app.readout.value)
    assert "Means over 3 seeds" in shown
    grpo = app.runs[(settings, "grpo")]
    late = slice(-10, None)  # the last quarter of 40 iterations
    excess = grpo.wrong_excess[:, late].sum() / grpo.wrong[:, late].sum()
    assert_states(
        shown,
        f"GRPO {rounded(grpo.score.mean(), 3)} {rounded(grpo.reward.mean(), 3)} "
        f"{rounded(excess, 2)} {rounded(grpo.entropy[:, late].mean(), 3)} "
        f"{rounded(grpo.clip_fraction.mean(), 2)}",
        f"Last training {app.seconds:.2f} s",
    )
    assert app.message.value == ""


def test_ticking_a_method_trains_only_that_one(monkeypatch):
    app = TrainingExplorer(shown=("grpo",))
    trained = []
    real = apps.train

    def watched(methods, settings, seeds):
        trained.append([m.key for m in methods])
        return real(methods, settings, seeds)

    monkeypatch.setattr(apps, "train", watched)
    app.controls["show_gspo"].value = True
    assert trained == [["gspo"]]
    app.controls["show_gspo"].value = False
    app.controls["show_gspo"].value = True  # kept: nothing trains
    app.controls["updates"].value = 1
    app.controls["updates"].value = apps.START_UPDATES  # back to the first setting: kept too
    assert trained == [["gspo"], ["grpo", "gspo"]]
    assert not app.lines["dapo"][1].get_visible()


def test_at_the_studys_grid_the_explorer_shows_the_committed_runs_of_its_seeds():
    app = TrainingExplorer(shown=("dr_grpo",))
    lr, mu = apps.START_LEARNING_RATE, apps.START_UPDATES
    run = app.runs[(TrainSettings(learning_rate=lr, updates=mu), "dr_grpo")]
    stored = cell_of(committed(), "discovery", "dr_grpo", lr, mu)["per_seed"]["score"][:3]
    if same_machine():
        assert [float(f"{v:.4g}") for v in run.score] == stored
    else:
        assert np.mean(run.score) == pytest.approx(np.mean(stored), abs=0.1)


def test_the_explorer_refuses_an_unknown_method_and_bad_seeds():
    with pytest.raises(ValueError, match="no method is named 'GRPO'"):
        TrainingExplorer(shown=("GRPO",))
    with pytest.raises(ValueError, match="seeds must be between 1 and 20"):
        TrainingExplorer(seeds=0)
    png = TrainingExplorer(shown=("grpo",)).png()
    assert png.startswith(b"\x89PNG")


def test_smoothing_is_a_trailing_mean():
    assert smoothed(np.array([1.0, 3.0, 5.0, 7.0]), window=2).tolist() == [1.0, 2.0, 4.0, 6.0]


FRESH_OFFSET = 5000


@pytest.mark.slow
def test_a_fresh_seed_rerun_keeps_every_stated_finding():
    """Each side held on all three sets, re-run at its first held setting on 20 seeds from
    5000: the paired interval excludes 0 on that side."""
    checked = 0
    for finding in committed()["findings"]:
        for side, sign in (("supports", finding["direction"]), ("against", -finding["direction"])):
            if not finding[side]["held"]:
                continue
            mu, lr = finding[side]["held"][0]
            settings = TrainSettings(learning_rate=lr, updates=mu)
            per_seed = [
                command.run_cell(command.Cell("fresh", m, settings, FRESH_OFFSET, 20))["per_seed"][
                    finding["metric"]
                ]
                for m in (finding["method"], finding["versus"])
            ]
            comparison = evidence.paired(*per_seed)
            assert evidence.sign_of(comparison["ci"]) == sign, (finding["key"], side, comparison)
            checked += 1
    assert checked >= 3


# --------------------------------------------------------------------------
# Does it transfer? (experiments/rlhf_transfer.py: per-seed references, held-out prompts)
# --------------------------------------------------------------------------


@cache
def transfer() -> dict:
    return json.loads(TRANSFER_JSON.read_text(encoding="utf-8"))


def test_the_transfer_check_tests_each_stated_side_at_its_stated_settings_on_fresh_seeds():
    """One fresh set of seeds; the held-out prompts by their rule, every length among them; per
    side that all three sets state, one row per metric (the accuracy: held-out and trained
    prompts) at exactly its stated settings in the check's grid; no method it does not compare."""
    t = transfer()
    assert t["sets"] == {"transfer": {"first_seed": command.FRESH_FROM, "seeds": 20}}
    assert [list(command.tiny_lm.PROMPTS[i]) for i in command.HELD_OUT] == t["held_out"]
    assert {(a + b) % 5 for a, b in t["held_out"]} == {0}
    assert {b - a for a, b in t["held_out"]} == {1, 2, 3, 4, 5}
    assert len(command.TRAINED) == 28
    grid = [[mu, lr] for mu in t["updates"] for lr in t["learning_rates"]]
    expected, compared = [], set()
    for f in committed()["findings"]:
        for side in ("supports", "against"):
            at = [s for s in f[side]["held"] if s in grid]
            metrics = ["held_out", "trained"] if f["metric"] == "score" else [f["metric"]]
            expected += [(f["key"], side, metric, at) for metric in metrics if at]
            compared |= {f["method"], f["versus"]} if at else set()
    assert [(r["key"], r["side"], r["metric"], r["settings"]) for r in t["transfer"]] == expected
    assert set(t["methods"]) == compared


def test_each_transfer_verdict_reads_its_band():
    """Each row's verdict: holds where the band excludes 0 on the stated side, reversed where on
    the other (each band re-derived from the stored per-seed values byte for byte:
    test_study_results' test of ``--restate``)."""
    for old in transfer()["transfer"]:
        low, high = np.array(old["band"]["low"]), np.array(old["band"]["high"])
        way = low > 0 if old["sign"] > 0 else high < 0
        other = high < 0 if old["sign"] > 0 else low > 0
        assert old["holds"] == [s for s, w in zip(old["settings"], way, strict=True) if w]
        assert old["reversed"] == [s for s, o in zip(old["settings"], other, strict=True) if o]
        done = "holds" if way.all() else "not detectable here" if not way.any() else "holds at"
        assert old["verdict"].startswith("reversed" if other.any() else done), old


@pytest.mark.parametrize("method", ["dr_grpo", "grpo_steps4"])  # a grid cell; a control's
def test_a_transfer_cell_reruns_to_its_stored_numbers(method):
    """The first two seeds of one stored cell (each from its own reference, trained on the 28
    prompts; the control: at mu 1 in 4 minibatches), re-run: the stored values on the machine
    that made them."""
    cell = next(c for c in transfer_check.FULL_PLAN.cells if c.method == method)
    fresh = command.run_cell(replace(cell, seeds=2))["per_seed"]
    s = cell.settings
    stored = cell_of(transfer(), "transfer", method, s.learning_rate, s.updates)["per_seed"]
    for name in ("held_out", "trained", "score", "clip_fraction"):
        if transfer()["machine"] == fingerprint() and not simulating_another_cpu():
            assert fresh[name] == stored[name][:2], name
        else:  # chaotic elsewhere: accuracies near the stored ones
            assert np.allclose(fresh[name], stored[name][:2], atol=0.3), name


def test_the_controls_match_gspo_by_clip_fraction_and_clip_at_mu_1_with_minibatches():
    """Issue 44, item 3, on the check's seeds: at each setting of the tighter GRPO bands, the
    GRPO compared with GSPO is the one whose clip fraction (the stored cells' mean) is nearest
    GSPO's, whatever the accuracy; split into minibatches, GRPO and GSPO clip at mu 1 and the
    unclipped surrogate never, each shown beside the check's epochs at the same learning rates."""
    t = transfer()
    tests = t["control_tests"]

    def clipped(method: str, mu: int, lr: float) -> list:
        return cell_of(t, "transfer", method, lr, mu)["per_seed"]["clip_fraction"]

    assert [tuple(r["setting"]) for r in tests["clip_match"]] == list(transfer_check.TIGHT_AT)
    for row in tests["clip_match"]:
        fraction = row["clip_fraction"]
        assert fraction == {
            m: pytest.approx(np.mean(clipped(m, *row["setting"]))) for m in fraction
        }
        grpos = [m for m in fraction if m != "gspo"]
        assert grpos == ["grpo", "grpo_tight", *(f"grpo_eps{e:g}" for e in transfer_check.TIGHTER)]
        assert row["matched"] == min(grpos, key=lambda m: abs(fraction[m] - fraction["gspo"]))
    split = [r for r in tests["minibatch"] if r["minibatches"] == transfer_check.MINIBATCHES]
    epochs = [r["setting"] for r in tests["minibatch"] if r["minibatches"] == 1]
    assert [tuple(r["setting"]) for r in split] == list(transfer_check.SPLIT_AT)
    assert epochs == [[mu, lr] for mu in (2, 8) for _, lr in transfer_check.SPLIT_AT]
    for row in split:
        assert min(row["clip_fraction"].values()) > 0
        assert max(clipped("unclipped_steps4", *row["setting"])) == 0
