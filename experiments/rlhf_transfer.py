"""Does the RLHF study transfer? Its stated findings, tested off its miniature (issue 44).

From the repository root::

    python -m experiments.rlhf_transfer            # the check (about 4 minutes of CPU); writes
                                                   # experiments/rlhf_transfer.json and the
                                                   # section "Does it transfer?" of RESULTS_LLM.md
    python -m experiments.rlhf_transfer --restate  # its statistics derived again
    python -m experiments.rlhf_transfer --quick    # a smoke run in seconds

The study (:mod:`experiments.rlhf_study`) starts every run from one reference and scores it on
the prompts it trains on.  Here both change together, on one fresh set of 20 seeds (from
:data:`~experiments.rlhf_study.FRESH_FROM`): each run starts from, and keeps its KL to, a
reference distilled from the same teacher with the run's own seed
(:func:`tiny_lm.reference_model`, cached per process), and training draws from
:data:`~experiments.rlhf_study.TRAINED` only; the accuracy is measured on the held-out prompts
and, beside it, on the trained ones.  Every side of a finding that the study states (its three
sets agree) is tested at those of its stated settings in :data:`FULL_PLAN`'s grid, by the same
simultaneous band (:func:`experiments.rlhf_findings.curve`): it *holds*, is *not detectable
here* or is *reversed*, setting by setting.  It runs as every study does
(:mod:`experiments.runner`; ``--seed-offset`` 0 means this plan's own).

Two controls run on the same seeds (issue 44, item 3; :func:`control_tests`): GRPO at token
bands tight enough to clip about as many tokens as GSPO's band (is GSPO's lower accuracy its
many clipped tokens?), and GRPO, GSPO and the unclipped surrogate at mu 1 with each batch split
into minibatches (does the clip matter when the ratio leaves 1 by minibatches, not epochs?).
"""

from __future__ import annotations

import sys
import tempfile
from argparse import Namespace
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from experiments import rlhf_study as study
from experiments import runner
from experiments.report import document, json_text, write_report
from experiments.rlhf_findings import FINDINGS, Finding, curve
from experiments.rlhf_report import RESULTS_JSON, RESULTS_MARKDOWN, TRANSFER_JSON, transfer_section
from experiments.rlhf_report import results_markdown as study_markdown
from experiments.rlhf_study import FRESH_FROM, HELD_OUT, PROMPT_SPLIT, Cell, Plan, plain_results
from ppo_viz.rlhf.results import cell_of, load_results
from tiny_lm import PROMPTS, reference_model, right_answer_probability
from tiny_rlhf import METHODS as TRAINERS
from tiny_rlhf import Method

COMMAND = "python -m experiments.rlhf_transfer"
SCRATCH_DIR = Path(tempfile.gettempdir()) / "rlhf_transfer_partial"
FILES = (TRANSFER_JSON, RESULTS_MARKDOWN, TRANSFER_JSON.with_suffix(".cells.jsonl"))
READS = (RESULTS_JSON,)  # its report is the study's, with this check's section
REDERIVE = ("--restate", "derive the check's statistics again from its per-seed values")
SET = "transfer"
#: The methods of the stated findings, at mu 2 and 8 and the two smallest learning rates (most
#: are stated there) and lr 0.02 (the clip's and CISPO's, stated at large ones).
METHODS = ("grpo", "unclipped", "dr_grpo", "dr_grpo_agg", "dapo", "cispo", "gspo")
#: The controls' GRPO token bands (both sides), nearer GSPO's clip fraction than 0.2, and the
#: minibatches a batch is split into at mu 1 (issue 44, item 3).
TIGHTER, MINIBATCHES, SPLIT = (0.01, 0.005, 0.002, 0.001, 3e-4), 4, ("grpo", "unclipped", "gspo")
Control = tuple[str, Method, int, tuple[tuple[int, float], ...]]  # name, method, minibatches, at


def controls(tight_at: tuple, minibatch_at: tuple) -> tuple[Control, ...]:
    """GRPO at each band of :data:`TIGHTER` at the settings ``tight_at``; GRPO, GSPO and the
    unclipped surrogate split into :data:`MINIBATCHES` at ``minibatch_at`` (``(mu, lr)`` pairs)."""
    tight = [Method(f"grpo_eps{e:g}", f"GRPO, ε {e:g}", "grpo", e, e) for e in TIGHTER]
    split = [(f"{k}_steps{MINIBATCHES}", TRAINERS[k], MINIBATCHES) for k in SPLIT]
    return (*((m.key, m, 1, tight_at) for m in tight), *((*c, minibatch_at) for c in split))


@dataclass(frozen=True)
class Check(Plan):
    """The check's grid (:class:`~experiments.rlhf_study.Plan`) and its ``controls``, each
    method at its own settings on the same seeds (:func:`controls`)."""

    controls: tuple[Control, ...] = ()

    @property
    def cells(self) -> list[Cell]:
        at = [(n, m, k, mu, lr) for n, m, k, where in self.controls for mu, lr in where]
        return super().cells + [self.cell(SET, n, mu, lr, m, k) for n, m, k, mu, lr in at]


TIGHT_AT, SPLIT_AT = ((2, 1e-3), (2, 3e-3), (8, 1e-3), (8, 3e-3)), ((1, 3e-3), (1, 2e-2))
CHECK = {"seed_offset": FRESH_FROM, "sets": (SET,), "transfer": True}
FULL_PLAN = Check(
    (*METHODS, "grpo_tight", "gspo_wide"), (1e-3, 3e-3, 2e-2), (2, 8), **CHECK,
    controls=controls(TIGHT_AT, SPLIT_AT),
)  # fmt: skip
QUICK_PLAN = Check(
    **vars(study.QUICK_PLAN) | CHECK | {"methods": ("grpo", "unclipped", "gspo")},
    controls=controls(((4, 1e-2),), ((1, 1e-2),)),
)
add_options, run_cell = study.add_options, study.run_cell


def sliced(plan: Plan, args: Namespace) -> Plan:
    """:func:`experiments.rlhf_study.sliced`; the controls only when no method, learning rate
    or mu is named (they compare across them)."""
    whole = not (args.method or args.learning_rate or args.updates)
    return replace(study.sliced(plan, args), controls=plan.controls if whole else ())


def results_of(plan: Plan, raw: dict[str, Any]) -> dict[str, Any]:
    """The check's results: the cells, the held-out prompts, the per-seed references' accuracy
    on each split (distilled again in this process, about 40 s of CPU not in ``cpu_seconds``;
    and the shared reference's), and the statistics (:func:`with_statistics`)."""
    results = plain_results(plan, raw)
    first = plan.first_seed(SET)
    own = [reference_model(s) for s in range(first, first + plan.seeds)]
    accuracy = np.array([right_answer_probability(m)[0] for m in own])
    shared = right_answer_probability(reference_model())
    results["reference_accuracy"] = {
        name: {
            "per_seed": float(accuracy[:, list(at)].mean()),
            "shared": float(shared[0, at].mean()),
        }
        for name, at in PROMPT_SPLIT.items()
    }
    results["held_out"] = [list(PROMPTS[i]) for i in HELD_OUT]
    results["controls"] = {
        name: asdict(method) | {"minibatches": k, "settings": [list(s) for s in at]}
        for name, method, k, at in plan.controls
    }
    return with_statistics(results)


def with_statistics(results: dict[str, Any], stated: Path = RESULTS_JSON) -> dict[str, Any]:
    """``results`` with ``transfer``: per side of a finding that the study (its results at
    ``stated``) states on all three sets, and per metric (the accuracy: on the held-out and on
    the trained prompts), its band over the stated settings in this grid, the settings where
    the band is on the stated side (``holds``) or the other (``reversed``), and the verdict."""
    findings = load_results(stated)["findings"]
    grid = {(mu, lr) for mu in results["updates"] for lr in results["learning_rates"]}
    by_key, rows = {f.key: f for f in FINDINGS}, []
    for f in findings:
        finding = by_key[f["key"]]
        if not {finding.method, finding.versus} <= set(results["methods"]):
            continue
        for side, sign in (("supports", f["direction"]), ("against", -f["direction"])):
            at = [s for s in f[side]["held"] if tuple(s) in grid]
            if not at:
                continue
            for metric in PROMPT_SPLIT if finding.metric == "score" else (finding.metric,):
                band = curve(replace(finding, metric=metric), results, SET, at)
                holds = [s for s, g in zip(at, band["sign"], strict=True) if g == sign]
                turned = [s for s, g in zip(at, band["sign"], strict=True) if g == -sign]
                verdict = (
                    "holds" if len(holds) == len(at) else f"holds at {len(holds)} of {len(at)}"
                )
                verdict = "reversed" if turned else verdict if holds else "not detectable here"
                rows.append(
                    {"key": f["key"], "side": side, "sign": sign, "metric": metric}
                    | {"settings": at, "band": band, "holds": holds, "reversed": turned}
                    | {"verdict": verdict}
                )
    results["transfer"] = rows
    results["control_tests"] = control_tests(results)
    return results


def control_tests(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The controls' comparisons (none without them), each difference's band over the settings
    of its kind (:func:`experiments.rlhf_findings.curve`), per accuracy metric.

    ``clip_match``: per setting of the tighter GRPO bands, each GRPO's and GSPO's clip fraction
    (mean over seeds), the GRPO nearest GSPO's by clip fraction alone (``matched``), and GSPO
    minus it.  ``minibatch``: at mu 1 split into minibatches, then at mu 2 and 8 over the whole
    batch at the same learning rates, GRPO's and GSPO's clip fraction, GRPO minus the unclipped
    surrogate and GSPO minus GRPO."""
    controls = results.get("controls", {})
    tight = [k for k, c in controls.items() if c["minibatches"] == 1]
    split = {k.rpartition("_")[0]: k for k, c in controls.items() if c["minibatches"] > 1}
    if not tight or not split:
        return {}

    def clip(method: str, mu: int, lr: float) -> float:
        return float(np.mean(cell_of(results, SET, method, lr, mu)["per_seed"]["clip_fraction"]))

    def bands(method: str, versus: str, at: list) -> dict[str, dict[str, Any]]:
        f = Finding("control", "control", "", "", "", "", method, versus)
        return {m: curve(replace(f, metric=m), results, SET, at) for m in PROMPT_SPLIT}

    def point(band: dict[str, dict[str, Any]], i: int) -> dict[str, list[float]]:
        return {m: [b[k][i] for k in ("mean", "low", "high")] for m, b in band.items()}

    at, found, matched = controls[tight[0]]["settings"], {}, []
    grpos = [m for m in ("grpo", "grpo_tight") if m in results["methods"]] + tight
    for i, (mu, lr) in enumerate(at):
        fractions = {m: clip(m, mu, lr) for m in ("gspo", *grpos)}
        match = min(grpos, key=lambda m: abs(fractions[m] - fractions["gspo"]))
        found[match] = found.get(match) or bands("gspo", match, at)
        row = {"setting": [mu, lr], "clip_fraction": fractions, "matched": match}
        matched.append(row | {"gspo_minus_matched": point(found[match], i)})
    split_at = controls[split["grpo"]]["settings"]
    lrs = [lr for _, lr in split_at]
    grid = [[mu, lr] for mu in results["updates"] for lr in results["learning_rates"]]
    epochs = [[mu, lr] for mu, lr in grid if mu > 1 and lr in lrs]
    minibatch, parts = [], controls[split["grpo"]]["minibatches"]
    for names, where, k in ((split, split_at, parts), ({m: m for m in split}, epochs, 1)):
        differences = {
            "grpo_minus_unclipped": bands(names["grpo"], names["unclipped"], where),
            "gspo_minus_grpo": bands(names["gspo"], names["grpo"], where),
        }
        for i, (mu, lr) in enumerate(where):
            row = {"setting": [mu, lr], "minibatches": k}
            row["clip_fraction"] = {m: clip(names[m], mu, lr) for m in ("grpo", "gspo")}
            minibatch.append(row | {d: point(band, i) for d, band in differences.items()})
    return {"clip_match": matched, "minibatch": minibatch}


#: Stored results with their statistics derived again (nothing is trained).
rederived = with_statistics


def results_markdown(results: dict[str, Any]) -> str:
    """The check's section of the report (printed by ``--quick``)."""
    return document(*transfer_section(results))


def write_results(results: dict[str, Any], output: Path) -> None:
    """``rlhf_transfer.json``, and the study's report with this section when the study's
    results are in ``output`` too."""
    files = {TRANSFER_JSON: json_text(results)}
    if (output / RESULTS_JSON.name).exists():
        stated = load_results(output / RESULTS_JSON.name)
        files[RESULTS_MARKDOWN] = study_markdown(stated, results)
    write_report(output, files)


def main(argv: list[str] | None = None) -> int:
    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
