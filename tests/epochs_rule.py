"""The rules that chose notebook 3's two batches, once, for the tests and for a search.

:data:`~ppo_viz.epochs.training.MISLEADING_SEED` and
:data:`~ppo_viz.epochs.foundations.DRIFTING_SEED` are batch seeds whose batches meet the rules
their comments state, point by point.  :func:`misleading_problems` and
:func:`drifting_problems` return the points a seed's batch fails, by number and in words (empty:
it meets the rule); they check the cheap points first and stop at the first failure, unless
``every=True``.  After a change to ``bandit.ARM_MEANS``, run from the repository root::

    python tests/epochs_rule.py

It prints the first seed meeting each rule (put them in the two constants, then update the
numbers notebook 3's prose states) and how long the search took: 1 s for 4 arms, 1 min for 5.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

import numpy as np

from bandit import ARM_MEANS, Batch
from ppo_viz.epochs.foundations import DRIFTING_SEED, ppo_update_line
from ppo_viz.epochs.foundations import small_step_study as study
from ppo_viz.epochs.training import (
    BIG_STEP,
    DEFAULT_BAND,
    DEFAULT_EPS,
    DEFAULT_TARGET_KL,
    FAR,
    HALVING_FROM,
    HARD_MARGIN,
    MISLEADING_SEED,
    SETTING_RANGES,
    STEP_SIZES,
    Settings,
    arm_sums,
    batch_of,
    outside_band,
    run_all,
    start_reward,
)

#: How far outside the band "Things to try" 2 asks when PPO's ratios first leave it.
TRY_2_OUTSIDE = 0.2
#: A rule's points for one seed, cheapest first: (number and words, whether the batch meets it).
Points = Iterator[tuple[str, bool]]


def every_arm_drawn_twice(batch: Batch) -> bool:
    """Whether the batch draws each arm at least twice (point (1) of both rules)."""
    return bool(np.bincount(batch.actions, minlength=len(ARM_MEANS)).min() >= 2)


def one_signed_arms(batch: Batch) -> list[int]:
    """The arms the batch drew whose samples' advantages all have the same sign."""
    a, of_arm = batch.advantages, batch.actions[:, None] == np.arange(len(ARM_MEANS))
    up, down = ((of_arm & (a[:, None] * sign > 0)).any(axis=0) for sign in (1, -1))
    return np.flatnonzero(up ^ down).tolist()


def _misleading(seed: int) -> Points:
    batch, start = batch_of(seed), start_reward()
    ok = every_arm_drawn_twice(batch) and not one_signed_arms(batch)  # no advantage is exactly 0
    yield "(1) every arm drawn twice or more, with samples of both signs", ok
    favoured = int(np.argmax(arm_sums(batch)))
    yield "(2) it favours an arm worse than the old policy", ARM_MEANS[favoured] < start
    runs = run_all(Settings(seed=seed))
    end = {o: run.true_reward[-1] for o, run in runs.items()}
    out = outside_band(runs["clip_only"].arm_ratios()[:, favoured]) > 0
    ok = end["unclipped"] < start < end["clipped"] > end["clip_only"] and out[out.argmax() :].all()
    yield "(3) the default runs end as told, clip-only's arm out for good", ok
    unclipped, ppo, clip_only = runs["unclipped"], runs["clipped"], runs["clip_only"]
    r = unclipped.arm_ratios()
    rising = np.c_[r[:, favoured], unclipped.exact_kl, r @ arm_sums(batch)]  # objective: r @ sums
    yield "(8) unclipped: ratio, KL, objective rise each epoch", (np.diff(rising, axis=0) > 0).all()
    ok = ppo.exact_kl.max() < min(0.05, unclipped.exact_kl.max() / 4)
    ok &= outside_band(ppo.ratios).max() < outside_band(unclipped.ratios).max() / 5
    r, upper = ppo.arm_ratios()[:, favoured], 1 + DEFAULT_EPS
    back = (r[:-1] <= upper) & (np.diff(r) > 0) & (np.cumsum(r > upper)[:-1] > 0)
    yield (
        "(9) PPO stays close; its favoured arm passes the edge, dips back, rises again",
        ok and (r >= 1 - DEFAULT_EPS).all() and back.any(),
    )
    moving = clip_only.arms_without_gradient()[:-1] & (np.diff(clip_only.arm_ratios(), axis=0) != 0)
    yield (
        "(10) clip-only has hollow circles on a favoured ratio that moves",
        moving[:, favoured].any(),
    )
    stop = run_all(Settings(seed=seed, target_kl=DEFAULT_TARGET_KL))
    ok = stop["unclipped"].stopped_early and stop["clipped"].stopped_early
    ok &= stop["unclipped"].true_reward[-1] > end["unclipped"] + 0.05
    yield (
        "(7) both stop early, unclipped far higher, PPO lower",
        (ok and stop["clipped"].true_reward[-1] < end["clipped"]),
    )
    largest = run_all(Settings(seed=seed, step_size=SETTING_RANGES["step_size"][1]))["clipped"]
    far = [outside_band(r.ratios).max() for r in (ppo, largest)]
    yield "(11) only big steps leave the band by 0.2", far[0] < TRY_2_OUTSIDE < far[1]
    big = run_all(Settings(seed=seed, step_size=BIG_STEP))["clipped"]
    out = outside_band(big.arm_ratios()).max(axis=1)
    moves, ok = np.diff(out[1:]), out[1] > FAR
    step_2 = study(("clipped",), (2.0,), batch=batch)["clipped"][0].arm_ratios[1:]
    ok &= (moves < 0).any() and (moves > FAR).any()
    yield (
        "(4) big steps overshoot, come back, overshoot",
        (ok and (outside_band(step_2).max(axis=1) > FAR).sum() >= 2),
    )
    line, eps = ppo_update_line(Settings(seed=seed)), DEFAULT_EPS
    factor, _, kl = line.peak(eps)
    ok = abs(factor - 1) <= 0.2 and kl < 0.05
    ok &= (np.diff(line.objective("clipped", eps)[line.factors >= factor]) <= 0).all()
    ok &= (np.diff(line.objective("unclipped", eps)[line.factors >= 0]) > 0).all()
    peaks = [line.peak(e) for e in np.linspace(0, 0.5, 11)]
    yield (
        "(6) Figure 2 as told",
        (ok and all(p[0] < q[0] and p[2] < q[2] for p, q in itertools.pairwise(peaks))),
    )
    zero = int(np.flatnonzero(line.factors == 0.0)[0])
    objectives = ("clipped", "clip_only", "unclipped")
    near = np.array([line.objective(o, eps)[zero - 1 : zero + 2] for o in objectives])
    ok = (near == near[0]).all()
    ratios, a = np.exp(line.sample_logps - batch.logp_old), batch.advantages
    wrong_way = ((a > 0) & (ratios < 1 - eps)) | ((a < 0) & (ratios > 1 + eps))
    yield "(12) the line: one objective near t = 0, a sample the wrong way", ok and wrong_way.any()
    runs = study(batch=batch)
    ppo, clip_only = (np.array([run.largest_excursion for run in runs[o]]) for o in runs)
    halvings = (ppo[1:] / ppo[:-1])[STEP_SIZES.index(HALVING_FROM) :]
    ok = ((halvings > 0.35) & (halvings < 0.75)).all() and ppo[-1] <= HARD_MARGIN
    yield (
        "(5) tiny steps make PPO's band hard, not clip-only's",
        (ok and clip_only.min() > 5 * HARD_MARGIN),
    )
    unclipped = study(("unclipped",), STEP_SIZES[::3], batch=batch)["unclipped"]
    far = [run.largest_excursion for run in unclipped]
    yield "(13) the unclipped run's excursion does not shrink", min(far) > max(far) / 2


def _drifting(seed: int) -> Points:
    batch = batch_of(seed)
    yield "(1) every arm drawn twice or more", every_arm_drawn_twice(batch)
    one_signed = one_signed_arms(batch)
    yield "(3) an arm whose samples all have one sign", bool(one_signed)
    step_1, tiny = study(("clipped",), (1.0, STEP_SIZES[-1]), batch=batch)["clipped"]
    far = tiny.largest_excursion
    yield (
        "(2) PPO's band stays soft with tiny steps",
        (far >= step_1.largest_excursion / 2 and far > 5 * HARD_MARGIN),
    )
    arm, (lower, upper) = int(tiny.farthest_arm), DEFAULT_BAND
    end, sign = tiny.arm_ratios[-1, arm], np.sign(batch.advantages[batch.actions == arm].sum())
    ok = arm in one_signed and outside_band(end) >= 0.95 * far
    yield (
        "(3) the farthest arm is of one sign, clipped, still far out",
        (ok and (end > upper if sign > 0 else end < lower)),
    )
    half, last = tiny.arm_ratios[tiny.n_epochs // 2], tiny.arm_ratios[-1]
    moving = (outside_band(last) < 0) & (np.abs(last - half) > HARD_MARGIN)
    yield "(4) another arm ends inside the band, still moving", bool(moving.any())


def _problems(points: Points, every: bool) -> list[str]:
    failed = (words for words, holds in points if not holds)
    return list(failed if every else itertools.islice(failed, 1))


def misleading_problems(seed: int, *, every: bool = False) -> list[str]:
    """The points of MISLEADING_SEED's rule (its comment) that ``seed``'s batch fails."""
    return _problems(_misleading(seed), every)


def drifting_problems(seed: int, *, every: bool = False) -> list[str]:
    """The points of DRIFTING_SEED's rule (its comment) that ``seed``'s batch fails."""
    return _problems(_drifting(seed), every)


def first_seed(problems: Callable[[int], list[str]], stop: int = 2**32) -> int | None:
    """The first seed below ``stop`` whose batch has no ``problems``, or None."""
    return next((seed for seed in range(stop) if not problems(seed)), None)


if __name__ == "__main__":
    print(f"ARM_MEANS = {ARM_MEANS}")
    for name, now, problems in (
        ("MISLEADING_SEED", MISLEADING_SEED, misleading_problems),
        ("DRIFTING_SEED", DRIFTING_SEED, drifting_problems),
    ):
        print(f"{name} = {now} fails {problems(now, every=True) or 'no point'} of its rule")
        start = time.perf_counter()
        seed = first_seed(problems)
        print(f"  the first seed meeting it: {seed} ({time.perf_counter() - start:.1f} s)")
