"""What notebook 4 writes about its runs: the apps' summary tables and the findings.

Every number here is computed from the runs it is given; the notebook's prose
quotes none that is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ppo_viz.html import Markup, page, table, tag
from ppo_viz.numbers import rounded
from ppo_viz.why_clip.bandit_loop import BanditLoopHistory
from ppo_viz.why_clip.cartpole_ppo import RANDOM_RETURN, CartPoleRuns
from ppo_viz.why_clip.methods import METHODS

#: CartPole-v1's reward threshold: a mean return of 475 counts as solved.
SOLVED_RETURN = 475.0


def bandit_summary_html(runs: dict[str, BanditLoopHistory]) -> Markup:
    """Per method: final score, seeds on a wrong arm, mean KL and mean clip fraction."""
    seeds = len(next(iter(runs.values())).seeds)
    rows = []
    for key, run in runs.items():
        low, high = np.percentile(run.score, [25, 75])
        rows.append(
            [
                tag("span", METHODS[key].label, classes="ppo-strong"),
                f"{rounded(run.score.mean(), 3)} [{rounded(low, 3)}, {rounded(high, 3)}]",
                f"{int(run.collapsed[:, -1].sum())} of {seeds}",
                rounded(run.approx_kl.mean(), 3),
                rounded(run.clip_fraction.mean(), 3),
            ]
        )
    header = [
        "method",
        "final score: mean [25th, 75th percentile]",
        "seeds on a wrong arm",
        "mean KL per iteration",
        "mean clip fraction",
    ]
    caption = f"{seeds} seeds; score 0 = uniform policy, 1 = always the best arm"
    return tag("div", table(header, rows, caption=caption), classes="ppo")


def cartpole_summary_html(setting: str, runs: dict[str, CartPoleRuns]) -> Markup:
    """Per method: final return and score, the largest KL and the mean clip fraction."""
    first = next(iter(runs.values()))
    rows = [
        [
            tag("span", METHODS[key].label, classes="ppo-strong"),
            rounded(run.final_return.mean(), 3),
            rounded(run.score.mean(), 2),
            f"{int((run.final_return >= SOLVED_RETURN).sum())} of {len(run.seeds)}",
            rounded(np.nanmax(run.approx_kl), 3),
            rounded(run.clip_fraction.mean(), 3),
        ]
        for key, run in runs.items()
    ]
    header = [
        "method",
        "final return (last 20 episodes)",
        "score",
        f"seeds solving it (≥ {SOLVED_RETURN:g})",
        "largest KL per iteration",
        "mean clip fraction",
    ]
    caption = (
        f"{setting}: {len(first.seeds)} seeds × {first.settings.total_steps:,} steps "
        f"(seeds {first.seeds[0]}–{first.seeds[-1]})"
    )
    return tag("div", table(header, rows, caption=caption), classes="ppo")


def bandit_findings(runs: Mapping[str, BanditLoopHistory], early: int = 3) -> list[str]:
    """Sentences about part A's runs (all methods, same seeds), every number computed here."""
    ppo, unclipped, pg = runs["ppo"], runs["unclipped"], runs["plain_pg"]
    seeds = len(ppo.seeds)
    ppo_variants = [key for key in runs if METHODS[key].objective == "clipped"]
    stuck_ppo = sum(int(runs[key].collapsed.any(axis=1).sum()) for key in ppo_variants)
    kl_ratio = unclipped.approx_kl.mean() / ppo.approx_kl.mean()
    ranked = sorted(runs, key=lambda key: -runs[key].score.mean())
    return [
        f"After {early} iterations the {METHODS['unclipped'].label} objective is ahead: mean "
        f"true reward {rounded(unclipped.true_reward[:, early].mean(), 3)} against "
        f"{rounded(ppo.true_reward[:, early].mean(), 3)} for {METHODS['ppo'].label}.",
        f"{int(unclipped.collapsed.any(axis=1).sum())} of its {seeds} seeds sat on a wrong "
        f"arm at some iteration and {int(unclipped.collapsed[:, -1].sum())} are still there "
        f"at the end; across the three PPO variants, {stuck_ppo} seeds ever did.",
        f"Its mean approximate KL between successive policies is "
        f"{rounded(unclipped.approx_kl.mean(), 3)}, {kl_ratio:.0f} times PPO's "
        f"{rounded(ppo.approx_kl.mean(), 3)}.",
        f"With one step per batch, {METHODS['plain_pg'].label} ends at a score of "
        f"{rounded(pg.score.mean(), 3)}; PPO takes K = {ppo.settings.epochs} steps per batch "
        f"and ends at {rounded(ppo.score.mean(), 3)}.",
        "Final scores, best first: "
        + ", ".join(f"{METHODS[key].label} {rounded(runs[key].score.mean(), 3)}" for key in ranked)
        + ".",
    ]


@dataclass(frozen=True)
class Findings:
    """Sentences that display as a bulleted list in a notebook and as lines of text elsewhere."""

    sentences: tuple[str, ...]

    def _repr_html_(self) -> str:
        return str(page(tag("ul", *(tag("li", sentence) for sentence in self.sentences))))

    def __repr__(self) -> str:
        return "\n".join(f"- {sentence}" for sentence in self.sentences)


def findings(sentences: list[str]) -> Findings:
    """``sentences`` ready to display (see :class:`Findings`)."""
    return Findings(tuple(sentences))


def cartpole_findings(stored: Mapping[str, Mapping[str, CartPoleRuns]]) -> list[str]:
    """One sentence per CartPole setting about its runs, every number computed here."""
    sentences = []
    for setting, runs in stored.items():
        ppo, unclipped = runs["ppo"], runs["unclipped"]
        seeds = len(ppo.seeds)
        returns = ", ".join(
            f"{METHODS[key].label} {rounded(run.final_return.mean(), 3)} "
            f"({int((run.final_return >= SOLVED_RETURN).sum())} of {seeds} solved)"
            for key, run in runs.items()
        )
        below_random = int((unclipped.final_return < RANDOM_RETURN).sum())
        sentences.append(
            f"{setting}: PPO's mean clip fraction {rounded(ppo.clip_fraction.mean(), 2)}; "
            f"final returns (mean of {seeds} seeds; solved: at least {SOLVED_RETURN:g}): "
            f"{returns}. Largest KL in one iteration: {rounded(np.nanmax(ppo.approx_kl), 3)} "
            f"for PPO, {rounded(np.nanmax(unclipped.approx_kl), 3)} unclipped; "
            f"{below_random} unclipped seeds end below a random policy's {RANDOM_RETURN:g}."
        )
    return sentences
