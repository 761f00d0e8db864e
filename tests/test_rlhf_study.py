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

from functools import cache

import numpy as np
import pytest
from helpers import assert_states, plain, simulating_another_cpu

from experiments import rlhf_findings as findings
from experiments import rlhf_study as command
from experiments.evidence import bootstrap_interval, paired, sign_of
from ppo_viz.machine import fingerprint
from ppo_viz.numbers import rounded
from ppo_viz.rlhf import apps
from ppo_viz.rlhf.apps import TrainingExplorer, smoothed
from ppo_viz.rlhf.figures import CURVE_PANELS, curves_figure, score_figure
from ppo_viz.rlhf.results import (
    cell_of,
    load_results,
)
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
            low, high = bootstrap_interval(stored[name])
            assert abs(np.mean(fresh[name]) - np.mean(stored[name])) < 3 * (high - low), name


# --------------------------------------------------------------------------
# The findings, recomputed from the stored per-seed values
# --------------------------------------------------------------------------


def recomputed(finding, where, seed_set):
    """A finding's paired difference at ``where``, from the stored per-seed values."""
    cells = [
        cell_of(committed(), seed_set, finding[m], where[lr], where["updates"])["per_seed"]
        for m, lr in (("method", "learning_rate"), ("versus", "versus_learning_rate"))
    ]
    d = np.subtract(*(np.array(c[finding["metric"]], dtype=float) for c in cells))
    d = d[np.isfinite(d)]
    return d.mean(), bootstrap_interval(d)


#: A verdict from whether each side (supports, against) was confirmed.
VERDICTS = {
    (True, False): "reproduces",
    (True, True): "depends on the setting",
    (False, True): "reversed",
    (False, False): "not reproduced",
}


@pytest.mark.parametrize("index", range(len(findings.FINDINGS)))
def test_each_finding_is_its_stored_seeds_chosen_on_discovery_and_worded_by_its_intervals(index):
    """Each side of a finding: its cell the strongest on the discovery seeds in that
    direction; its numbers the paired differences of the stored per-seed values; confirmed
    where both sets' intervals exclude 0 on that side; the verdict from the two sides."""
    results, claim = committed(), findings.FINDINGS[index]
    finding = results["findings"][index]
    assert finding["key"] == claim.key
    places = findings.candidates(claim, results)
    strengths = [
        findings.strength(findings.compare(claim, results, p, "discovery")) for p in places
    ]
    for side, sign in (("supports", claim.direction), ("against", -claim.direction)):
        entry = finding[side]
        assert entry["where"] == places[int(np.argmax(np.array(strengths) * sign))]
        for seed_set in ("discovery", "confirmation"):
            diff, ci = recomputed(finding, entry["where"], seed_set)
            assert entry[seed_set]["diff"] == pytest.approx(diff, rel=1e-12, abs=1e-15)
            assert entry[seed_set]["ci"] == pytest.approx(list(ci), rel=1e-12, abs=1e-15)
        excluded = [sign_of(entry[s]["ci"]) == sign for s in ("discovery", "confirmation")]
        assert entry["confirmed"] == all(excluded), side
    confirmed = (finding["supports"]["confirmed"], finding["against"]["confirmed"])
    if confirmed == (True, False) and finding["against"]["discovered"]:
        assert finding["verdict"] == findings.UNSETTLED
    else:
        assert finding["verdict"] == VERDICTS[confirmed]


def test_with_one_update_nothing_is_clipped_and_the_clip_variants_are_one_run():
    facts = committed()["facts_at_one_update"]
    assert facts["largest_clip_fraction"] == 0
    assert facts["identical"] == {"grpo = gspo = unclipped": True, "dapo = dapo_sym = cispo": True}


def test_the_best_learning_rates_are_chosen_on_the_discovery_seeds():
    results = committed()
    for method, per_mu in results["best"].items():
        for mu, entry in per_mu.items():
            means = {
                lr: np.mean(cell_of(results, "discovery", method, lr, int(mu))["per_seed"]["score"])
                for lr in results["learning_rates"]
            }
            assert entry["learning_rate"] == max(means, key=means.get)


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
def test_a_fresh_seed_rerun_keeps_every_firmly_confirmed_finding():
    """Each confirmed side that a fresh set of seeds would confirm nearly always (its
    ``replication_chance`` at least 0.95), re-run at its cell on 20 seeds from 5000: the
    interval still excludes 0 on that side."""
    results = committed()
    checked = 0
    for finding in results["findings"]:
        for side, sign in (("supports", finding["direction"]), ("against", -finding["direction"])):
            entry = finding[side]
            if not entry["confirmed"] or entry["replication_chance"] < 0.95:
                continue
            where, per_seed = entry["where"], []
            for method, lr in (
                (finding["method"], where["learning_rate"]),
                (finding["versus"], where["versus_learning_rate"]),
            ):
                settings = TrainSettings(learning_rate=lr, updates=where["updates"])
                cell = command.Cell("fresh", method, settings, FRESH_OFFSET, 20)
                per_seed.append(command.run_cell(cell)["per_seed"][finding["metric"]])
            comparison = paired(*per_seed)
            assert sign_of(comparison["ci"]) == sign, (finding["key"], side, comparison)
            checked += 1
    assert checked >= 3
