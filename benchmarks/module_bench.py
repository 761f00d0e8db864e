"""ppo_clip's functions against the floor, a plain Python loop and PyTorch, on the same arrays.

The batch (:func:`make_batch`) imitates sequence-level log-probabilities in an
RLHF batch, over the contract's whole range [-1000, 0], seeded per N:

* 85 % near the old policy: ``logp_old ~ U(-995, -5)``, log-ratio ``~ N(0, 0.15)``
  (clipped at +-4.5), so most ratios sit in or just outside the band [0.8, 1.2];
* 10 % drifted: log-ratio ``~ N(0, 1.5)`` (clipped at +-4.5): ratios from 0.01 to 90;
* 2 % overflow: ``logp_new ~ U(-40, 0)``, ``logp_old ~ U(-1000, -760)``, so the
  log-ratio exceeds 709.78 and ``exp`` gives ``inf``;
* 2 % underflow: the reverse, so the ratio is 0 or subnormal;
* advantages ``~ N(0, 1)``; 2 % of them exactly 0, among them the first overflow
  sample (the ``inf * 0`` case); the other overflow samples get ``|A|`` (> 0), so they
  are clipped and the loss stays finite and comparable across implementations.

Every rare group has at least one sample, so N = 4 holds one sample of each of the
four groups.  The composition each N actually gets is printed with the results.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

import ppo_clip
from benchmarks import reference
from benchmarks.tables import Table, microseconds, ratio
from benchmarks.timing import Timing, time_interleaved

EPS = ppo_clip.DEFAULT_EPS
SEED = 20170720  # arXiv 1707.06347's month, for the record
FLOOR = "floor: np.exp(logp_new - logp_old)"
ALL_THREE = "ppo_clip: loss + clip_fraction + grad (3 calls)"
VIA_BREAKDOWN = "ppo_clip: clip_breakdown, then .loss .clip_fraction .grad"
#: The breakdown's lazily computed results, each on a fresh breakdown.
THEN = {
    attribute: f"clip_breakdown, then .{attribute}"
    for attribute in ("loss", "clip_fraction", "grad")
}
LOOP = "Python loop (the reference): loss + clip fraction + grad"
TORCH = "PyTorch form: loss + clip fraction + backward(), every core"
TORCH_1 = "PyTorch form, 1 thread"

#: Targets from issue 9 (at N = 4096).
FLOOR_TARGET = 4.0
TORCH_TARGET = 3.0
LOOP_TARGET = 50.0
TARGET_N = 4096


BatchArrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def _group_sizes(n: int) -> dict[str, int]:
    rare = {
        "drifted": max(1, round(0.10 * n)),
        "overflow": max(1, round(0.02 * n)),
        "underflow": max(1, round(0.02 * n)),
    }
    return {"near": n - sum(rare.values()), **rare}


def make_batch(n: int, seed: int = SEED) -> BatchArrays:
    """``(logp_new, logp_old, advantages)`` for N samples, as described in the module doc."""
    if n < 4:
        raise ValueError("the benchmark batch needs N >= 4 (one sample per group)")
    rng = np.random.default_rng([seed, n])
    sizes = _group_sizes(n)
    near_and_drifted = sizes["near"] + sizes["drifted"]
    old_mid = rng.uniform(-995.0, -5.0, near_and_drifted)
    log_ratio = np.concatenate(
        [rng.normal(0.0, 0.15, sizes["near"]), rng.normal(0.0, 1.5, sizes["drifted"])]
    )
    new_mid = old_mid + np.clip(log_ratio, -4.5, 4.5)
    new_over = rng.uniform(-40.0, 0.0, sizes["overflow"])
    old_over = rng.uniform(-1000.0, -760.0, sizes["overflow"])
    new_under = rng.uniform(-1000.0, -760.0, sizes["underflow"])
    old_under = rng.uniform(-40.0, 0.0, sizes["underflow"])
    logp_new = np.concatenate([new_mid, new_over, new_under])
    logp_old = np.concatenate([old_mid, old_over, old_under])
    advantages = rng.normal(0.0, 1.0, n)
    overflow = slice(near_and_drifted, near_and_drifted + sizes["overflow"])
    advantages[overflow] = np.abs(advantages[overflow])
    zero = rng.choice(np.arange(n), size=max(1, round(0.02 * n)), replace=False)
    advantages[zero] = 0.0
    advantages[near_and_drifted] = 0.0  # an overflowing ratio with A == 0
    order = rng.permutation(n)
    return logp_new[order].copy(), logp_old[order].copy(), advantages[order].copy()


# --------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------


def floor(logp_new: np.ndarray, logp_old: np.ndarray) -> np.ndarray:
    """The least any implementation must do: one subtraction and one exp per sample."""
    return np.exp(logp_new - logp_old)


def python_loop(
    logp_new: np.ndarray, logp_old: np.ndarray, advantages: np.ndarray, eps: float = EPS
) -> tuple[float, float, np.ndarray]:
    """Loss, clip fraction and gradient in plain Python, one sample at a time.

    This is the project's plain-Python reference of the contract
    (:func:`benchmarks.reference.contract`), given the arrays as lists.
    """
    loss, fraction, grad = reference.contract(
        logp_new.tolist(), logp_old.tolist(), advantages.tolist(), eps
    )
    return loss, fraction, np.array(grad)


def torch_threads() -> int:
    """The CPU threads PyTorch is given: every core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def torch_form() -> Callable[..., tuple[float, float, np.ndarray]] | None:
    """The usual PyTorch PPO loss on CPU (float64), or ``None`` when torch is not installed.

    ``max(-A*r, -A*clamp(r, 1-eps, 1+eps)).mean()``, the clip fraction counted
    as TRL does (``pg_losses2 > pg_losses``, the same samples as the contract's
    definition), and ``backward()`` for the gradient.  Tensors share memory
    with the numpy inputs (``torch.from_numpy``), results come back as a float,
    a float and a numpy array, as ppo_clip's do.
    """
    try:
        import torch
    except ImportError:
        return None

    def loss_clipfrac_grad(
        logp_new: np.ndarray, logp_old: np.ndarray, advantages: np.ndarray, eps: float = EPS
    ) -> tuple[float, float, np.ndarray]:
        new = torch.from_numpy(logp_new).requires_grad_()
        old = torch.from_numpy(logp_old)
        adv = torch.from_numpy(advantages)
        ratio = torch.exp(new - old)
        pg_losses = -adv * ratio
        pg_losses2 = -adv * torch.clamp(ratio, 1.0 - eps, 1.0 + eps)
        loss = torch.max(pg_losses, pg_losses2).mean()
        clipfrac = torch.gt(pg_losses2, pg_losses).double().mean()
        loss.backward()
        return loss.item(), clipfrac.item(), new.grad.numpy()

    return loss_clipfrac_grad


def ppo_clip_all_three(
    logp_new: np.ndarray, logp_old: np.ndarray, advantages: np.ndarray, eps: float = EPS
) -> tuple[float, float, np.ndarray]:
    """What a user of the contract calls: the three functions, one after another."""
    return (
        ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps),
        ppo_clip.clip_fraction(logp_new, logp_old, advantages, eps),
        ppo_clip.ppo_clip_grad(logp_new, logp_old, advantages, eps),
    )


def _breakdown_then(batch: BatchArrays, attribute: str) -> object:
    return getattr(ppo_clip.clip_breakdown(*batch, EPS), attribute)


def ppo_clip_via_breakdown(
    logp_new: np.ndarray, logp_old: np.ndarray, advantages: np.ndarray, eps: float = EPS
) -> tuple[float, float, np.ndarray]:
    """The same three values from one shared computation."""
    breakdown = ppo_clip.clip_breakdown(logp_new, logp_old, advantages, eps)
    return breakdown.loss, breakdown.clip_fraction, breakdown.grad


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------


@dataclass
class SizeResult:
    n: int
    timings: dict[str, Timing]
    composition: dict[str, int]
    agreement: dict[str, str]


def composition(batch: BatchArrays) -> dict[str, int]:
    """How many samples of a batch fall in each case, according to ppo_clip."""
    logp_new, logp_old, advantages = batch
    b = ppo_clip.clip_breakdown(logp_new, logp_old, advantages, EPS)
    inside = (b.ratio >= b.lower) & (b.ratio <= b.upper)
    return {
        "in band": int(inside.sum()),
        "clipped (zero grad)": int(b.is_clipped.sum()),
        "outside band, kept": int((~inside & ~b.is_clipped).sum()),
        "r = inf": int(np.isinf(b.ratio).sum()),
        "r = 0 or subnormal": int((b.ratio < np.finfo(np.float64).tiny).sum()),
        "A = 0": int((advantages == 0).sum()),
    }


def agreement(
    expected: tuple[float, float, np.ndarray], other: tuple[float, float, np.ndarray]
) -> str:
    """Does ``other`` reproduce ``expected`` (loss, clip fraction, grad)?  Says how if not."""
    loss, fraction, grad = other
    problems = []
    if math.isnan(loss):
        problems.append("loss is NaN")
    elif not math.isclose(loss, expected[0], rel_tol=1e-12, abs_tol=1e-300):
        problems.append(f"loss {loss!r} vs {expected[0]!r}")
    if fraction != expected[1]:
        problems.append(f"clip fraction {fraction!r} vs {expected[1]!r}")
    nan = np.isnan(grad)
    if nan.any():
        problems.append(f"{int(nan.sum())} NaN gradient(s)")
    close = np.isclose(grad, expected[2], rtol=1e-12, atol=0.0) | nan
    if not close.all():
        problems.append(f"{int((~close).sum())} gradient(s) differ")
    return "agrees" if not problems else "; ".join(problems)


def measure_size(n: int, *, repeats: int, target_seconds: float) -> SizeResult:
    """Time every candidate on one seeded batch of N samples."""
    batch = make_batch(n)
    logp_new, logp_old, advantages = batch
    torch_impl = torch_form()
    expected = ppo_clip_via_breakdown(*batch)
    agreements = {
        ALL_THREE: agreement(expected, ppo_clip_all_three(*batch)),
        LOOP: agreement(expected, python_loop(*batch)),
    }
    candidates: dict[str, Callable[[], object]] = {
        FLOOR: lambda: floor(logp_new, logp_old),
        "ppo_clip_loss": lambda: ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, EPS),
        "clip_fraction": lambda: ppo_clip.clip_fraction(logp_new, logp_old, advantages, EPS),
        "ppo_clip_grad": lambda: ppo_clip.ppo_clip_grad(logp_new, logp_old, advantages, EPS),
        "clip_breakdown": lambda: ppo_clip.clip_breakdown(logp_new, logp_old, advantages, EPS),
        ALL_THREE: lambda: ppo_clip_all_three(logp_new, logp_old, advantages),
        VIA_BREAKDOWN: lambda: ppo_clip_via_breakdown(logp_new, logp_old, advantages),
        **{label: partial(_breakdown_then, batch, attribute) for attribute, label in THEN.items()},
        LOOP: lambda: python_loop(logp_new, logp_old, advantages),
    }
    setup: dict[str, Callable[[], object]] = {}
    if torch_impl is not None:
        import torch

        agreements[TORCH] = agreement(expected, torch_impl(*batch))
        candidates[TORCH] = candidates[TORCH_1] = lambda: torch_impl(logp_new, logp_old, advantages)
        setup[TORCH] = lambda: torch.set_num_threads(torch_threads())
        setup[TORCH_1] = lambda: torch.set_num_threads(1)
    # The floor overflows on purpose; numpy's warning machinery is not part of it.
    with np.errstate(over="ignore"):
        timings = time_interleaved(
            candidates, repeats=repeats, target_seconds=target_seconds, setup=setup
        )
    if torch_impl is not None:
        torch.set_num_threads(torch_threads())
    return SizeResult(n, timings, composition(batch), agreements)


def measure(sizes: tuple[int, ...], *, repeats: int, target_seconds: float) -> list[SizeResult]:
    return [measure_size(n, repeats=repeats, target_seconds=target_seconds) for n in sizes]


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------


def torch_description() -> str:
    try:
        import torch
    except ImportError:
        return "not installed: PyTorch column skipped (pip install torch==2.13.0 to add it)"
    return (
        f"torch {torch.__version__}, CPU, float64 tensors, "
        f"torch.set_num_threads({torch_threads()}) (every core), and again with 1 thread"
    )


def timing_table(results: list[SizeResult]) -> Table:
    table = Table(
        "ppo_clip against its baselines (µs per call; ratios use the min of repeats)",
        ["N", "what", "min µs", "median µs", "min / floor", "calls x repeats"],
    )
    for result in results:
        floor_time = result.timings[FLOOR].best
        for name, timing in result.timings.items():
            table.add(
                result.n,
                name,
                microseconds(timing.best),
                microseconds(timing.median),
                ratio(timing.best / floor_time),
                f"{timing.number} x {timing.repeats}",
            )
    table.notes.append(
        "Each candidate runs on the same seeded arrays, interleaved round-robin with the "
        "others (timeit, garbage collector off), eps = 0.2. Repeats are short (a few ms) "
        "and many, so on a shared machine the minimum catches slices no other process "
        "disturbed; the median shows the load. "
        f"PyTorch: {torch_description()}; its time includes wrapping the numpy arrays "
        "(torch.from_numpy, no copy) and .item()/.numpy() on the results."
    )
    return table


def speedup_table(results: list[SizeResult]) -> Table:
    table = Table(
        "Loss + clip fraction + gradient: how much faster ppo_clip is (min of repeats)",
        [
            "N",
            "ppo_clip 3 calls µs",
            "via one clip_breakdown µs",
            "Python loop µs",
            "loop / ppo_clip",
            "PyTorch µs",
            "PyTorch / ppo_clip",
        ],
    )
    for result in results:
        t = result.timings
        mine = t[ALL_THREE].best
        torch_time = _best_torch(t)
        table.add(
            result.n,
            microseconds(mine),
            microseconds(t[VIA_BREAKDOWN].best),
            microseconds(t[LOOP].best),
            ratio(t[LOOP].best / mine),
            microseconds(torch_time) if torch_time else "n/a",
            ratio(torch_time / mine) if torch_time else "n/a",
        )
    table.notes.append(
        'A ratio above 1x means ppo_clip is faster. "3 calls" is what the contract\'s user '
        "writes; each call checks its inputs and computes the log-ratio and its exp again. "
        "PyTorch: the faster of its two thread settings in this run."
    )
    return table


def composition_table(results: list[SizeResult]) -> Table:
    keys = list(results[0].composition)
    table = Table(
        "The benchmark batches: what each N contains, and whether the baselines agree",
        ["N", *keys, "Python loop vs ppo_clip", "PyTorch form vs ppo_clip"],
    )
    for result in results:
        table.add(
            result.n,
            *(result.composition[key] for key in keys),
            result.agreement[LOOP],
            result.agreement.get(TORCH, "n/a"),
        )
    table.notes.append(
        "Seeded; log-probabilities over the contract's range [-1000, 0]: 85 % near the old "
        "policy (log-ratio ~ N(0, 0.15)), 10 % drifted (~ N(0, 1.5)), 2 % with a log-ratio "
        "above 709.78 (the ratio overflows to inf), 2 % below -720 (ratio 0 or subnormal); "
        "advantages ~ N(0, 1), 2 % exactly 0, including one overflowing sample. The PyTorch "
        "form computes -A*r = -0*inf = NaN for that sample, where the contract requires 0."
    )
    return table


def _best_torch(timings: dict[str, Timing]) -> float | None:
    """The faster of PyTorch's two thread settings, or None without torch."""
    times = [timings[name].best for name in (TORCH, TORCH_1) if name in timings]
    return min(times) if times else None


def target_rows(results: list[SizeResult]) -> list[tuple[str, str, bool]]:
    """``(target, measured, met)`` for each of issue 9's module targets."""
    by_n = {result.n: result for result in results}
    result = by_n.get(TARGET_N, results[-1])
    t = result.timings
    floor_time = t[FLOOR].best
    rows = []
    for name in ("ppo_clip_loss", "clip_fraction", "ppo_clip_grad", "clip_breakdown"):
        multiple = t[name].best / floor_time
        rows.append(
            (
                f"N = {result.n}: {name} <= {FLOOR_TARGET:g}x the floor",
                f"{ratio(multiple)} ({microseconds(t[name].best)} vs "
                f"{microseconds(floor_time)} µs)",
                multiple <= FLOOR_TARGET,
            )
        )
    mine = t[ALL_THREE].best
    torch_time = _best_torch(t)
    if torch_time is not None:
        speedup = torch_time / mine
        rows.append(
            (
                f"N = {result.n}: loss + clip fraction + grad >= {TORCH_TARGET:g}x faster "
                "than the PyTorch form",
                f"{ratio(speedup)} ({microseconds(mine)} vs {microseconds(torch_time)} µs, "
                "the faster PyTorch thread setting); via one clip_breakdown: "
                f"{ratio(torch_time / t[VIA_BREAKDOWN].best)}",
                speedup >= TORCH_TARGET,
            )
        )
    speedup = t[LOOP].best / mine
    rows.append(
        (
            f"N = {result.n}: loss + clip fraction + grad >= {LOOP_TARGET:g}x faster "
            "than the Python loop",
            f"{ratio(speedup)} ({microseconds(mine)} vs {microseconds(t[LOOP].best)} µs); "
            f"via one clip_breakdown: {ratio(t[LOOP].best / t[VIA_BREAKDOWN].best)}",
            speedup >= LOOP_TARGET,
        )
    )
    return rows


def where_the_time_goes(result: SizeResult) -> Table:
    """Split ppo_clip's time at one N into the shared breakdown and each derived result."""
    t = result.timings
    floor_time = t[FLOOR].best
    build = t["clip_breakdown"].best
    table = Table(
        f"Where ppo_clip's time goes at N = {result.n} (min of repeats, public API only)",
        ["part", "µs", "x floor"],
    )
    table.add("floor: np.exp(logp_new - logp_old)", microseconds(floor_time), ratio(1.0))
    table.add(
        "clip_breakdown: input checks, log-ratio, exp, a copy of the advantages",
        microseconds(build),
        ratio(build / floor_time),
    )
    table.add(
        "of which beyond the floor",
        microseconds(build - floor_time),
        ratio((build - floor_time) / floor_time),
    )
    for attribute, label in THEN.items():
        extra = t[label].best - build
        table.add(
            f"+ .{attribute} on that breakdown", microseconds(extra), ratio(extra / floor_time)
        )
    table.notes.append(
        "The contract functions do not use clip_breakdown: each checks its inputs and takes "
        "the exp itself, so these rows split a breakdown's cost, not theirs. Differences of "
        "minima, so approximate."
    )
    return table


def tables(results: list[SizeResult]) -> list[Table]:
    return [
        composition_table(results),
        timing_table(results),
        speedup_table(results),
        where_the_time_goes(results[-1]),
    ]
