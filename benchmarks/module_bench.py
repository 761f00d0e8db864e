"""The modules against the textbook form: each function beside the formula written plainly.

The textbook form is the formula as a paper or a trainer writes it, in numpy, without input
checks and without the care the contract asks at float64's limits (``exp`` overflowing, ``0 *
inf``): ``r = exp(logp_new - logp_old)``, ``-mean(min(r*A, clip(r, 1 - eps, 1 + eps)*A))``.
Each pair is timed interleaved (``timeit``, garbage collector off), on the same seeded arrays
of ordinary values, where both must agree; the ratio module / textbook is what the checks
and the edge cases cost.

Run as a script (``python benchmarks/module_bench.py [--quick]``) it prints JSON; the benchmark
(:mod:`benchmarks.run`) runs it so, with ``PYTHONPATH`` set to the tree whose ``ppo_clip`` and
``llm_clip`` it measures (this checkout, or a baseline revision's): it imports nothing else of
the repository, and the textbook forms are this file's on both sides.
"""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable

import numpy as np

import llm_clip
import ppo_clip

EPS = 0.2
DAPO_EPS_HIGH = 0.28
SEED = 1707


# -- the textbook forms -------------------------------------------------------------------------


def textbook_loss(new: np.ndarray, old: np.ndarray, adv: np.ndarray) -> float:
    r = np.exp(new - old)
    return float(-np.mean(np.minimum(r * adv, np.clip(r, 1 - EPS, 1 + EPS) * adv)))


def _clipped(r: np.ndarray, adv: np.ndarray, high: float = EPS) -> np.ndarray:
    return ((adv > 0) & (r > 1 + high)) | ((adv < 0) & (r < 1 - EPS))


def textbook_clip_fraction(new: np.ndarray, old: np.ndarray, adv: np.ndarray) -> float:
    return float(np.mean(_clipped(np.exp(new - old), adv)))


def textbook_grad(new: np.ndarray, old: np.ndarray, adv: np.ndarray) -> np.ndarray:
    r = np.exp(new - old)
    return np.where(_clipped(r, adv), 0.0, -r * adv / len(adv))


def _token_terms(new, old, adv, mask, high):
    r = np.exp(new - old)
    a = adv[:, None]
    return r, a, np.minimum(r * a, np.clip(r, 1 - EPS, 1 + high) * a) * mask


def textbook_grpo(new, old, adv, mask) -> float:
    """GRPO: each response's token mean, then the mean over responses."""
    _, _, terms = _token_terms(new, old, adv, mask, EPS)
    return float(-np.mean(terms.sum(axis=1) / mask.sum(axis=1)))


def textbook_dapo(new, old, adv, mask) -> float:
    """DAPO: the mean over every token of the batch, ``eps_high`` 0.28."""
    _, _, terms = _token_terms(new, old, adv, mask, DAPO_EPS_HIGH)
    return float(-terms.sum() / mask.sum())


def textbook_grpo_grad(new, old, adv, mask) -> np.ndarray:
    r, a, _ = _token_terms(new, old, adv, mask, EPS)
    weight = mask / (len(adv) * mask.sum(axis=1, keepdims=True))
    return np.where(_clipped(r, a), 0.0, -r * a * weight)


# -- the batches and the pairs ------------------------------------------------------------------


def samples(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N seeded samples: log-ratios ~ N(0, 0.2) (a fifth or so outside the band), A ~ N(0, 1)."""
    rng = np.random.default_rng([SEED, n])
    old = rng.uniform(-5.0, -0.1, n)
    return old + rng.normal(0.0, 0.2, n), old, rng.normal(0.0, 1.0, n)


def tokens(n: int) -> tuple[np.ndarray, ...]:
    """N tokens as 8 responses of N/8 tokens, each response 1/2 to all of them unmasked."""
    rng = np.random.default_rng([SEED, n, 8])
    shape = (8, max(1, n // 8))
    old = rng.uniform(-5.0, -0.1, shape)
    lengths = rng.integers(max(1, shape[1] // 2), shape[1] + 1, 8)
    mask = np.arange(shape[1]) < lengths[:, None]
    return old + rng.normal(0.0, 0.2, shape), old, rng.normal(0.0, 1.0, 8), mask


def pairs(n: int) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """``{name: (the module's call, the textbook's)}`` at N samples or tokens."""
    s, t = samples(n), tokens(n)
    return {
        "ppo_clip.ppo_clip_loss": (
            lambda: ppo_clip.ppo_clip_loss(*s, EPS),
            lambda: textbook_loss(*s),
        ),
        "ppo_clip.clip_fraction": (
            lambda: ppo_clip.clip_fraction(*s, EPS),
            lambda: textbook_clip_fraction(*s),
        ),
        "ppo_clip.ppo_clip_grad": (
            lambda: ppo_clip.ppo_clip_grad(*s, EPS),
            lambda: textbook_grad(*s),
        ),
        "llm_clip.policy_loss (grpo)": (
            lambda: llm_clip.policy_loss(*t, objective="grpo"),
            lambda: textbook_grpo(*t),
        ),
        "llm_clip.policy_loss (dapo)": (
            lambda: llm_clip.policy_loss(*t, objective="dapo"),
            lambda: textbook_dapo(*t),
        ),
        "llm_clip.policy_loss_grad (grpo)": (
            lambda: llm_clip.policy_loss_grad(*t, objective="grpo"),
            lambda: textbook_grpo_grad(*t),
        ),
    }


# -- timing -------------------------------------------------------------------------------------


def calls_per_repeat(timer: timeit.Timer, seconds: float) -> int:
    """How many calls make one repeat last at least ``seconds`` (doubling from 1)."""
    number = 1
    while timer.timeit(number) < seconds:
        number *= 2
    return number


def best_times(calls: list[Callable[[], object]], repeats: int, seconds: float) -> list[float]:
    """Seconds per call of each callable: the minimum over ``repeats``, taken round-robin so a
    burst of load slows each alike."""
    timers = [timeit.Timer(call) for call in calls]
    numbers = [calls_per_repeat(timer, seconds) for timer in timers]
    best = [float("inf")] * len(calls)
    for _ in range(repeats):
        for index, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            best[index] = min(best[index], timer.timeit(number) / number)
    return best


def measure(sizes: tuple[int, ...], repeats: int, seconds: float = 0.002) -> list[dict]:
    """One record per function and N: ``module`` and ``textbook`` seconds, ``agrees``."""
    records = []
    for n in sizes:
        for name, (module, textbook) in pairs(n).items():
            agrees = bool(np.allclose(module(), textbook(), rtol=1e-9, atol=1e-15))
            mine, plain = best_times([module, textbook], repeats, seconds)
            records.append(
                {"function": name, "n": n, "module": mine, "textbook": plain, "agrees": agrees}
            )
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 64 only, 3 repeats")
    quick = parser.parse_args(argv).quick
    print(json.dumps(measure((64,), 3) if quick else measure((64, 4096), 200)))


if __name__ == "__main__":
    main()
