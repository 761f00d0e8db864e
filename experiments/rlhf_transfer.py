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
"""

from __future__ import annotations

import json
import sys
import tempfile
from argparse import Namespace
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from experiments import rlhf_study as study
from experiments import runner
from experiments.report import document, json_text, write_report
from experiments.rlhf_findings import FINDINGS, curve
from experiments.rlhf_report import RESULTS_JSON, RESULTS_MARKDOWN, TRANSFER_JSON, transfer_section
from experiments.rlhf_report import results_markdown as study_markdown
from experiments.rlhf_study import FRESH_FROM, HELD_OUT, PROMPT_SPLIT, Plan, plain_results
from tiny_lm import PROMPTS, reference_model, right_answer_probability

COMMAND = "python -m experiments.rlhf_transfer"
SCRATCH_DIR = Path(tempfile.gettempdir()) / "rlhf_transfer_partial"
FILES = (TRANSFER_JSON, RESULTS_MARKDOWN, TRANSFER_JSON.with_suffix(".cells.jsonl"))
READS = (RESULTS_JSON,)  # its report is the study's, with this check's section
REDERIVE = ("--restate", "derive the check's statistics again from its per-seed values")
SET = "transfer"
#: The methods of the stated findings, at mu 2 and 8 and the two smallest learning rates (most
#: are stated there) and lr 0.02 (the clip's and CISPO's, stated at large ones).
METHODS = ("grpo", "unclipped", "dr_grpo", "dr_grpo_agg", "dapo", "cispo", "gspo")
FULL_PLAN = Plan(
    (*METHODS, "grpo_tight", "gspo_wide"), (1e-3, 3e-3, 2e-2), (2, 8), seed_offset=FRESH_FROM
)
FULL_PLAN = replace(FULL_PLAN, sets=(SET,), transfer=True)
QUICK_PLAN = replace(study.QUICK_PLAN, seed_offset=FRESH_FROM, sets=(SET,), transfer=True)
add_options, run_cell = study.add_options, study.run_cell


def sliced(plan: Plan, args: Namespace) -> Plan:
    """:func:`experiments.rlhf_study.sliced`, on this plan's fresh seeds unless others are named."""
    return replace(study.sliced(plan, args), seed_offset=args.seed_offset or plan.seed_offset)


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
    return with_statistics(results)


def with_statistics(results: dict[str, Any], stated: Path = RESULTS_JSON) -> dict[str, Any]:
    """``results`` with ``transfer``: per side of a finding that the study (its results at
    ``stated``) states on all three sets, and per metric (the accuracy: on the held-out and on
    the trained prompts), its band over the stated settings in this grid, the settings where
    the band is on the stated side (``holds``) or the other (``reversed``), and the verdict."""
    findings = json.loads(stated.read_text(encoding="utf-8"))["findings"]
    grid = {(mu, lr) for mu in results["updates"] for lr in results["learning_rates"]}
    by_key, rows = {f.key: f for f in FINDINGS}, []
    for f in findings:
        finding = by_key[f["key"]]
        if not {finding.method, finding.versus} <= set(results["methods"]):
            continue
        for side, sign in (("supports", f["direction"]), ("against", -f["direction"])):
            at = [s for s in f[side]["held"] if tuple(s) in grid]
            for metric in PROMPT_SPLIT if finding.metric == "score" else (finding.metric,):
                if not at:
                    continue
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
    return results


def rederived(results: dict[str, Any]) -> dict[str, Any]:
    """Stored results with their statistics derived again (nothing is trained)."""
    return with_statistics(results)


def results_markdown(results: dict[str, Any]) -> str:
    """The check's section of the report (printed by ``--quick``)."""
    return document(*transfer_section(results))


def write_results(results: dict[str, Any], output: Path) -> None:
    """``rlhf_transfer.json``, and the study's report with this section when the study's
    results are in ``output`` too."""
    files = {TRANSFER_JSON: json_text(results)}
    if (output / RESULTS_JSON.name).exists():
        stated = json.loads((output / RESULTS_JSON.name).read_text(encoding="utf-8"))
        files[RESULTS_MARKDOWN] = study_markdown(stated, results)
    write_report(output, files)


def main(argv: list[str] | None = None) -> int:
    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
