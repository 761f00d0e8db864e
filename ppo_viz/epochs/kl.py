"""How far the new policy is from the old one: the exact KL of the bandit and three estimates.

PPO codes cannot compute ``KL(old || new)`` for a neural network, so they
estimate it from the batch, which the old policy drew, with the ratios
``r = pi_new / pi_old`` of its samples, from their log-ratios
``log r = logp_new - logp_old``.
Three estimators are in use, each the mean over the batch of one term:

* ``k1 = -log r``: unbiased, spreads widely, and a batch's mean can be negative;
* ``k2 = (log r)^2 / 2``: biased, spreads little;
* ``k3 = (r - 1) - log r``: unbiased (because ``E_old[r] = 1``) and never negative.

"Unbiased" is about a new policy that did not learn from the batch: averaged
over fresh batches from the old policy, the estimate is the exact KL.
:func:`estimator_studies` measures that on the bandit, whose exact KL is known
(:func:`exact_kl`).  Every ratio comes from :func:`ppo_clip.clip_breakdown`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

import ppo_clip
from ppo_viz.epochs.bandit import (
    Bandit,
    BanditBatch,
    FloatArray,
    default_bandit,
    draw_batch,
    softmax,
)

#: Each estimator's per-sample term, from the log-ratio ``log r`` (ppo_clip's
#: ``logp_new - logp_old``).  k3's ``r - 1`` is computed as ``expm1(log r)``: written
#: ``(r - 1) - log r``, a term comes out slightly negative in float64 whenever ``r`` rounds
#: closer to 1 than ``log r`` does (for ``log r = 1e-20``, ``r`` is exactly 1.0 and the term
#: is ``-1e-20``); ``expm1`` keeps every term >= 0, and accurate near ``r = 1``.
KL_TERMS: dict[str, Callable[[FloatArray], FloatArray]] = {
    "k1": lambda log_ratio: -log_ratio,
    "k2": lambda log_ratio: 0.5 * log_ratio**2,
    "k3": lambda log_ratio: np.expm1(log_ratio) - log_ratio,
}
#: Each estimator's term as a formula, for tables and legends.
KL_FORMULAS = {"k1": "−log r", "k2": "(log r)² / 2", "k3": "(r − 1) − log r"}
#: How many fresh batches :func:`estimator_study` draws by default.
STUDY_BATCHES = 1000


def exact_kl(old_probs: ArrayLike, new_probs: ArrayLike) -> float:
    """``KL(old || new) = sum_k old_k * log(old_k / new_k)`` for two categorical policies."""
    p, q = np.asarray(old_probs, dtype=np.float64), np.asarray(new_probs, dtype=np.float64)
    return float(np.sum(p * (np.log(p) - np.log(q))))


def approx_kl_k3(log_ratio: ArrayLike) -> float:
    """The "k3" estimate of KL(old || new) on the batch: ``mean((r - 1) - log r)``.

    ``log_ratio`` is ``logp_new - logp_old`` of each sample (from ppo_clip);
    ``r - 1`` is computed from it (see :data:`KL_TERMS`).

    The samples come from the old policy, so ``E_old[r] = 1`` and the mean
    is an unbiased estimate of ``KL(old || new) = -E_old[log r]`` (for a new
    policy that did not learn from these samples); every term is >= 0.
    This is the ``approx_kl`` that Stable-Baselines3 and CleanRL log.

    >>> round(approx_kl_k3(np.log([0.5, 2.0])), 4)
    0.25
    """
    return float(np.mean(KL_TERMS["k3"](np.asarray(log_ratio, dtype=np.float64))))


def kl_estimates(batch: BanditBatch, new_logits: ArrayLike) -> dict[str, float]:
    """``{"k1": ..., "k2": ..., "k3": ...}``: each estimate of KL(old || new) on ``batch``.

    The log-ratios of the batch's samples under the policy with
    ``new_logits`` come from :func:`ppo_clip.clip_breakdown`.
    """
    breakdown = ppo_clip.clip_breakdown(
        batch.sample_logp(new_logits), batch.logp_old, batch.advantages
    )
    return {name: float(np.mean(term(breakdown.log_ratio))) for name, term in KL_TERMS.items()}


@dataclass(frozen=True)
class EstimatorSpread:
    """One estimator's estimates on many fresh batches, against the exact KL."""

    name: str
    estimates: FloatArray
    exact: float

    @property
    def mean(self) -> float:
        """The mean of the estimates over the batches."""
        return float(self.estimates.mean())

    @property
    def bias(self) -> float:
        """``mean - exact``: what is left of the estimator's error after averaging."""
        return self.mean - self.exact

    @property
    def spread(self) -> float:
        """The standard deviation of one batch's estimate."""
        return float(self.estimates.std(ddof=1))

    @property
    def standard_error(self) -> float:
        """The standard error of :attr:`mean` (``spread / sqrt(number of batches)``)."""
        return self.spread / float(np.sqrt(self.estimates.size))

    @property
    def negative(self) -> int:
        """On how many batches the estimate is below 0 (the exact KL never is)."""
        return int(np.count_nonzero(self.estimates < 0))


@dataclass(frozen=True)
class EstimatorStudy:
    """The three estimators of KL(old || new) for one new policy, over many fresh batches."""

    label: str
    new_probs: FloatArray
    exact: float
    spreads: dict[str, EstimatorSpread]
    n_batches: int


def estimator_studies(
    policies: Mapping[str, ArrayLike],
    seeds: Sequence[int] = range(STUDY_BATCHES),
    bandit: Bandit | None = None,
) -> list[EstimatorStudy]:
    """For each new policy (label: logits), k1, k2 and k3 on one fresh batch per seed.

    Each batch is :func:`draw_batch` with that seed (N = 12 samples from the
    old policy), exactly as the explorers' batch seed draws it, and every
    policy is estimated on the same batches.  The policies are fixed, so
    none of them learned from these batches.
    """
    bandit = bandit or default_bandit()
    batches = [draw_batch(seed, bandit) for seed in seeds]
    studies = []
    for label, logits in policies.items():
        estimates = [kl_estimates(batch, logits) for batch in batches]
        new_probs = softmax(logits)
        exact = exact_kl(bandit.old_probs, new_probs)
        spreads = {
            name: EstimatorSpread(name, np.array([e[name] for e in estimates]), exact)
            for name in KL_TERMS
        }
        studies.append(EstimatorStudy(label, new_probs, exact, spreads, len(batches)))
    return studies
