"""The reproduced table: parts A and B at many seeds, next to the PPO paper's Table 1.

:data:`FULL_PLAN` says what the results command (``python -m experiments.why_clip``)
runs; :func:`run_comparison` runs it and returns plain data (numbers, lists),
which the command writes to ``experiments/why_clip.json`` and, as a table, to
``experiments/RESULTS.md``.  The notebook reads them back with
:func:`load_results` and shows :func:`comparison_table` and :func:`ordering_lines`.

The PPO paper's Table 1 (Schulman et al. 2017, arXiv 1707.06347) averages a
normalized score over seven MuJoCo tasks, three seeds each, after one million
steps: per task, the mean return of the last 100 episodes, scaled so that a
random policy scores 0 and the best setting 1.  Here each score is scaled so
that the uniform (random) policy scores 0 and the best possible policy 1: the
bandit's best arm, CartPole's 500 steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ppo_viz.html import page, table
from ppo_viz.machine import fingerprint
from ppo_viz.numbers import count
from ppo_viz.why_clip.bandit_loop import (
    BANDIT_METHODS,
    BanditLoopHistory,
    BanditLoopSettings,
    run_bandit_loop,
)
from ppo_viz.why_clip.cartpole_ppo import (
    CARTPOLE_METHODS,
    CartPoleRuns,
    CartPoleSettings,
    run_cartpole,
)
from ppo_viz.why_clip.methods import METHODS

REPOSITORY = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPOSITORY / "experiments"
RESULTS_JSON = RESULTS_DIR / "why_clip.json"
RESULTS_MARKDOWN = RESULTS_DIR / "RESULTS.md"
RESULTS_FIGURE = RESULTS_DIR / "why_clip.png"
COMMAND = "python -m experiments.why_clip"

#: Table 1 of the PPO paper: average normalized score over seven MuJoCo tasks.
PAPER_TABLE_1 = {"unclipped": -0.39, "ppo_eps_0.1": 0.76, "ppo": 0.82, "ppo_eps_0.3": 0.70}
PAPER_CITATION = (
    "Schulman, Wolski, Dhariwal, Radford, Klimov (2017), Proximal Policy Optimization "
    "Algorithms, arXiv 1707.06347, Table 1"
)
#: The table's rows, in order.
TABLE_METHODS = ("unclipped", "ppo_eps_0.1", "ppo", "ppo_eps_0.3", "clip_only", "plain_pg")


@dataclass(frozen=True)
class ComparisonPlan:
    """What to run: part A's settings (by name) and seeds, part B's settings and seeds.

    Seeds are ``0 .. n - 1``; ``methods`` (default: all) limits both parts to some
    methods, e.g. to re-run a slice of the full plan.
    """

    bandit_seeds: int
    bandit_settings: Mapping[str, BanditLoopSettings]
    cartpole_seeds: int
    cartpole_settings: Mapping[str, CartPoleSettings]
    methods: tuple[str, ...] = tuple(METHODS)

    @property
    def bandit_methods(self) -> tuple[str, ...]:
        return tuple(key for key in BANDIT_METHODS if key in self.methods)

    @property
    def cartpole_methods(self) -> tuple[str, ...]:
        return tuple(key for key in CARTPOLE_METHODS if key in self.methods)

    def sliced(
        self, settings: Sequence[str] = (), methods: Sequence[str] = (), **seeds: int
    ) -> ComparisonPlan:
        """This plan limited to the named ``settings`` and ``methods`` (empty: all), and
        ``bandit_seeds``/``cartpole_seeds`` if given."""
        for name in settings:
            if name not in self.bandit_settings and name not in self.cartpole_settings:
                raise ValueError(f"no setting is named {name!r}")
        keep = set(settings) or set(self.bandit_settings) | set(self.cartpole_settings)
        return replace(
            self,
            bandit_settings={k: v for k, v in self.bandit_settings.items() if k in keep},
            cartpole_settings={k: v for k, v in self.cartpole_settings.items() if k in keep},
            methods=tuple(methods) or self.methods,
            **seeds,
        )


#: Part A at the notebook's defaults (where the trust region matters) and three settings
#: where it does not; part B at CleanRL's settings and with ten times the step size and
#: 10 epochs.  Same number of steps for both CartPole settings.
BANDIT_SETTINGS = {
    "defaults": BanditLoopSettings(),
    "one epoch (K = 1)": BanditLoopSettings(epochs=1),
    "small steps (step size 0.2)": BanditLoopSettings(step_size=0.2),
    "large batches (64 pulls)": BanditLoopSettings(batch_size=64),
}
CLEANRL, BIGGER_STEPS = "CleanRL", "bigger steps"
CARTPOLE_SETTINGS = {
    CLEANRL: CartPoleSettings(),
    BIGGER_STEPS: CartPoleSettings(epochs=10, learning_rate=2.5e-3),
}
FULL_PLAN = ComparisonPlan(200, BANDIT_SETTINGS, 10, CARTPOLE_SETTINGS)
#: A smoke test of the command: a few seconds.
QUICK_PLAN = ComparisonPlan(
    4,
    {"defaults": BanditLoopSettings(iterations=10)},
    1,
    {CLEANRL: CartPoleSettings(total_steps=2048)},
)

Progress = Callable[[str, int, int], None]


def bandit_summary(history: BanditLoopHistory) -> dict[str, float]:
    """The numbers a table shows for one method of part A (all over seeds)."""
    score = history.score
    return {
        "score": float(score.mean()),
        "score_se": float(score.std(ddof=1) / np.sqrt(score.size)) if score.size > 1 else 0.0,
        "collapsed": float(history.collapsed[:, -1].mean()),
        "approx_kl": float(history.approx_kl.mean()),
        "clip_fraction": float(history.clip_fraction.mean()),
    }


def cartpole_record(runs: CartPoleRuns) -> dict[str, Any]:
    """One method's runs of part B as plain data (curves to four significant digits)."""
    return {
        "final_return": runs.final_return.tolist(),
        "return_curve": _four_digits(runs.return_curve),
        "clip_fraction": _four_digits(runs.clip_fraction),
        "approx_kl": _four_digits(runs.approx_kl),
    }


def _four_digits(values: np.ndarray) -> list[list[float]]:
    return [[float(f"{v:.4g}") for v in row] for row in values]


def run_comparison(
    plan: ComparisonPlan = FULL_PLAN, progress: Progress | None = None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Run ``plan``; return the results as plain data, and the runs (for the figure)."""
    report = progress or (lambda _label, _done, _total: None)
    results: dict[str, Any] = {
        "command": COMMAND,
        "machine": fingerprint(),
        "paper": PAPER_TABLE_1,
        "bandit": {},
    }
    live: dict[str, dict[str, Any]] = {"bandit": {}, "cartpole": {}}
    seeds = tuple(range(plan.bandit_seeds))
    for name, settings in plan.bandit_settings.items():
        runs = {}
        for index, key in enumerate(plan.bandit_methods):
            report(f"part A, {name}: {METHODS[key].label}", index, len(plan.bandit_methods))
            runs[key] = run_bandit_loop(METHODS[key], settings, seeds)
        live["bandit"][name] = runs
        results["bandit"][name] = {
            "settings": asdict(settings),
            "seeds": plan.bandit_seeds,
            "methods": {key: bandit_summary(run) for key, run in runs.items()},
        }
    results["cartpole"] = {}
    seeds = tuple(range(plan.cartpole_seeds))
    for name, settings in plan.cartpole_settings.items():
        runs = {}
        for key in plan.cartpole_methods:
            label = f"part B, {name}: {METHODS[key].label}"
            runs[key] = run_cartpole(
                METHODS[key],
                settings,
                seeds,
                lambda done, total, label=label: report(label, done, total),
            )
        live["cartpole"][name] = runs
        results["cartpole"][name] = {
            "settings": asdict(settings),
            "seeds": list(seeds),
            "methods": {key: cartpole_record(run) for key, run in runs.items()},
        }
    return results, live


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The committed results (written by the results command)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def stored_cartpole_runs(results: Mapping[str, Any], setting: str) -> dict[str, CartPoleRuns]:
    """Part B's committed runs of one setting, by method key, as :class:`CartPoleRuns`."""
    stored = results["cartpole"][setting]
    settings = CartPoleSettings(**stored["settings"])
    runs = {}
    for key, record in stored["methods"].items():
        arrays = {name: np.array(values, dtype=float) for name, values in record.items()}
        runs[key] = CartPoleRuns(METHODS[key], settings, tuple(stored["seeds"]), **arrays)
    return runs


# --------------------------------------------------------------------------
# The table, in markdown (RESULTS.md) and HTML (the notebook)
# --------------------------------------------------------------------------


def method_scores(results: Mapping[str, Any]) -> dict[str, dict[str, tuple[float, float]]]:
    """Per column (paper, each bandit and CartPole setting): method -> (mean score, s.e.)."""
    columns: dict[str, dict[str, tuple[float, float]]] = {
        "PPO paper, Table 1": {key: (value, 0.0) for key, value in results["paper"].items()}
    }
    for name, part in results["bandit"].items():
        columns[f"bandit, {name}"] = {
            key: (row["score"], row["score_se"]) for key, row in part["methods"].items()
        }
    for name, part in results["cartpole"].items():
        columns[f"CartPole, {name}"] = {}
        for key, record in part["methods"].items():
            score = CartPoleRuns.score_of(np.array(record["final_return"]))
            se = score.std(ddof=1) / np.sqrt(score.size) if score.size > 1 else 0.0
            columns[f"CartPole, {name}"][key] = (float(score.mean()), float(se))
    return columns


def _cell(score: tuple[float, float] | None, paper: bool) -> str:
    if score is None:
        return "–"
    mean, se = score
    return f"{mean:.2f}" if paper else f"{mean:.3f} ± {se:.3f}"


def comparison_rows(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows: one row per method, one column per experiment."""
    columns = method_scores(results)
    header = ["method", *columns]
    rows = [
        [METHODS[key].label]
        + [_cell(scores.get(key), name.startswith("PPO paper")) for name, scores in columns.items()]
        for key in TABLE_METHODS
    ]
    return header, rows


@dataclass(frozen=True)
class ComparisonTable:
    """The table: HTML in a notebook, markdown (as in RESULTS.md) elsewhere."""

    results: Mapping[str, Any]

    def _repr_html_(self) -> str:
        header, rows = comparison_rows(self.results)
        return str(page(table(header, rows, caption=table_caption(self.results))))

    def __repr__(self) -> str:
        return "\n".join(markdown_table(self.results))


def comparison_table(results: Mapping[str, Any]) -> ComparisonTable:
    """The comparison of ``results`` with Table 1, ready to display."""
    return ComparisonTable(results)


def markdown_table(results: Mapping[str, Any]) -> list[str]:
    """The table's lines in markdown."""
    header, rows = comparison_rows(results)
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def table_caption(results: Mapping[str, Any]) -> str:
    """What the table's numbers are: the scale, the seeds, the steps, the paper."""
    parts = []
    if results["bandit"]:
        seeds = next(iter(results["bandit"].values()))["seeds"]
        parts.append(f"bandit {count(seeds, 'seed')} (final policy's true reward)")
    if results["cartpole"]:
        cartpole = next(iter(results["cartpole"].values()))
        parts.append(
            f"CartPole {count(len(cartpole['seeds']), 'seed')} × "
            f"{cartpole['settings']['total_steps']:,} "
            "steps (mean return of the last 20 episodes)"
        )
    return (
        "Normalized score (0: uniform random policy, 1: best possible), mean ± standard error "
        f"over seeds: {', '.join(parts)}. Paper: {PAPER_CITATION}."
    )


def ordering(scores: Mapping[str, tuple[float, float]], keys: tuple[str, ...]) -> str:
    """``"PPO, ε = 0.2 (0.820) > PPO, ε = 0.1 (0.760) > ..."``: ``keys`` from best to worst.

    Scores equal to three decimals are joined by ``=``.
    """
    ranked = sorted((key for key in keys if key in scores), key=lambda key: -scores[key][0])
    text = ""
    for position, key in enumerate(ranked):
        shown = f"{scores[key][0]:.3f}"
        if position:
            text += " = " if shown == f"{scores[ranked[position - 1]][0]:.3f}" else " > "
        text += f"{METHODS[key].label} ({shown})"
    return text


def ordering_lines(results: Mapping[str, Any]) -> list[str]:
    """Per column, the paper's four settings ranked by score (what Table 1 compares)."""
    keys = tuple(PAPER_TABLE_1)
    return [f"{name}: {ordering(scores, keys)}" for name, scores in method_scores(results).items()]


def machine_line(machine: Mapping[str, str] | None) -> str:
    """Which machine made the runs, and what that means for reproducing them."""
    if not machine:
        return "Machine: not recorded."
    return (
        f"Machine: {machine['cpu']} ({machine['machine']}), numpy {machine['numpy']} with SIMD "
        f"{machine['simd']}. numpy's exp, log and tanh can differ in the last bit on another CPU "
        "or SIMD level, and a CartPole run is chaotic: one such bit changes its returns from "
        "then on. The bandit's numbers reproduce anywhere to 1e-12; CartPole's exactly only on "
        "a machine with this fingerprint, and elsewhere as aggregates over seeds."
    )


def results_markdown(results: Mapping[str, Any], seconds: float) -> str:
    """RESULTS.md: how it was made, the table, the orderings, the figure."""
    lines = [
        "# Why PPO clips: the reproduced table",
        "",
        f"Written by `{COMMAND}` in {seconds:.0f} s. {table_caption(results)}",
        "",
        machine_line(results.get("machine")),
        "",
        *markdown_table(results),
        "",
        "Ranked like Table 1 (no clipping and the three clip sizes):",
        "",
        *(f"- {line}" for line in ordering_lines(results)),
        "",
        "Settings:",
        "",
    ]
    for part in ("bandit", "cartpole"):
        for name, entry in results[part].items():
            settings = ", ".join(f"{k} = {v}" for k, v in entry["settings"].items())
            lines.append(f"- {part}, {name}: {settings}")
    lines += ["", f"![The runs behind the table]({RESULTS_FIGURE.name})", ""]
    return "\n".join(lines)
