"""Several epochs on one batch, for each objective of :data:`COLUMNS`, on :mod:`bandit`.

The old policy is uniform over the K arms and draws one batch of :func:`n_samples` pulls
(:func:`batch_of`).  :func:`train` runs objectives' full-batch gradient steps on it side by
side (:func:`bandit.epochs_on_batch`, every ratio and gradient from :mod:`ppo_clip`) and
keeps every epoch of each in a :class:`Run`; :func:`run_all` trains every objective of
:data:`COLUMNS` (PPO's, the unclipped and the clip-only, unless a teacher adds one) with the
same :class:`Settings`.  The batch the notebook starts from is :data:`MISLEADING_SEED`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import ArrayLike

import ppo_clip
from bandit import (
    ARM_MEANS,
    Batch,
    BoolArray,
    FloatArray,
    IntArray,
    Method,
    checked_fields,
    epochs_on_batch,
    exact_kl,
    pull,
    random_numbers,
    softmax,
)
from ppo_viz.style import FORMULAS, LINES, NAMES


@dataclass(frozen=True)
class Column:
    """An objective the explorer trains on the batch, one column of its figure.

    ``objective`` is ppo_clip's; the band's upper edge is ``1 + eps + higher`` (DAPO's
    clip-higher: 0.08 above ε = 0.2); ``name``, ``formula`` and ``line`` (matplotlib keywords;
    its colour colours the column) are how the figure and the tables show it.
    """

    objective: ppo_clip.Objective
    name: str
    formula: str
    line: dict = field(compare=False)
    higher: float = 0.0


#: The objectives trained side by side, in the order of the figure's columns.  One entry adds
#: a column, e.g. DAPO's clip-higher: ``COLUMNS["clip_higher"] = Column("clipped",
#: "clip-higher", "ε_high = ε + 0.08", {"color": PALETTE["purple"], "ls": "-."}, 0.08)``.
COLUMNS: dict[str, Column] = {
    o: Column(o, NAMES[o], FORMULAS[o], LINES[o]) for o in ppo_clip.OBJECTIVES
}
DEFAULT_EPS = ppo_clip.DEFAULT_EPS
DEFAULT_BAND = ppo_clip.clip_band(DEFAULT_EPS)
DEFAULT_STEP_SIZE = 0.5
DEFAULT_EPOCHS = 30
#: The early stop's threshold when it is switched on without a value.
DEFAULT_TARGET_KL = 0.02
#: Pulls per arm in a batch, on average: the batch has ``PULLS_PER_ARM * K`` samples.
PULLS_PER_ARM = 3
#: The batch seed notebook 3 starts from: the first whose batch shows what the notebook says, by
#: this rule (tests/epochs_rule.py's ``misleading_problems``; ``python tests/epochs_rule.py`` finds
#: the seed for new ``ARM_MEANS``).  The batch (1) draws every arm twice or more, with samples of
#: both signs for every arm; (2) puts its largest advantage sum on an arm worse than the old policy;
#: (3) at the default settings leaves the unclipped run with less true reward than the old policy,
#: PPO with more and clip-only with less than PPO, whose favoured arm's ratio leaves the band for
#: good; (4) at step size :data:`BIG_STEP` PPO's first step carries a ratio over :data:`FAR` outside
#: the band, a later step brings the farthest back and another moves it over ``FAR`` farther out,
#: and at step size 2 (the small-step study) a ratio is over ``FAR`` outside in two epochs or more;
#: (5) there PPO's largest excursion shrinks by a factor 0.35 to 0.75 with each halving of the step
#: size from :data:`HALVING_FROM` on, to at most :data:`HARD_MARGIN`, while clip-only's stays over
#: five times that; (6) along the line through PPO's update (Figure 2) its objective peaks within
#: 0.2 of t = 1 at a KL below 0.05 and never rises past it, the unclipped one rises from t = 0 on,
#: and on 11 ε from 0 to 0.5 the peak's t and KL grow with ε; (7) with early stopping both runs stop
#: early, the unclipped with over 0.05 more true reward than in full, PPO with less; at the default
#: settings (8) the unclipped run's favoured ratio, KL and objective rise every epoch; (9) PPO's KL
#: stays below 0.05 and a quarter of the unclipped's largest, its ratios less than a fifth as far
#: outside the band, its favoured arm's never below it but past ``1 + eps``, back inside (or on the
#: edge) in some epoch and higher after the next step; (10) clip-only's favoured arm, without
#: gradient, still moves; (11) PPO's ratios stay within 0.2 of the band, and leave it by more at
#: the largest step size ("Things to try" 2); (12) along the line the three objectives agree at
#: t = 0 and its neighbours, and some sample moves the wrong way past the band; (13) the unclipped
#: run's largest excursion at step sizes 4, 1/2 and 1/16 stays over half the largest ("Things to
#: try" 5).
MISLEADING_SEED = 1747
#: The big step of the section "A soft trust region", and how far outside the band the
#: notebook calls "far" (at the big step, and at the small-step study's step size 2).
BIG_STEP = 3.0
FAR = 0.1
#: The small-step limit: ``step size * epochs`` of each run, the step sizes (4, 2, 1, ...,
#: 1/32, each half the one before), and how close to the band the smallest keeps PPO's ratios.
TOTAL_MOVEMENT = 16.0
STEP_SIZES: tuple[float, ...] = tuple(4.0 / 2.0**k for k in range(8))
HARD_MARGIN = 0.01
#: The step size from which on PPO's largest excursion roughly halves with the step size.
HALVING_FROM = 1.0
#: The range of each setting: (low, high, whole number?).
SETTING_RANGES = {
    "eps": (0.0, 0.5, False),
    "step_size": (0.05, 4.0, False),
    "n_epochs": (1, DEFAULT_EPOCHS, True),
    "seed": (0, 2**32 - 1, True),
    "target_kl": (0.001, 0.2, False),
}


def n_samples() -> int:
    """The batch size N: :data:`PULLS_PER_ARM` pulls per arm."""
    return PULLS_PER_ARM * len(ARM_MEANS)


def start_reward() -> float:
    """The old (uniform) policy's true expected reward."""
    return float(np.mean(ARM_MEANS))


def draw_batches(seeds: Sequence[int]) -> Batch:
    """One batch per seed from the uniform old policy, shape ``(seeds, N)``, sorted by arm and
    best advantage first (sorting only renumbers the samples: sample 0 is arm 0's best)."""
    drawn = [random_numbers(seed, (n_samples(),)) for seed in seeds]
    uniforms, noise = np.stack([u for u, _ in drawn]), np.stack([z for _, z in drawn])
    batch = pull(np.zeros((len(drawn), len(ARM_MEANS))), uniforms, noise)
    order = np.lexsort((-batch.advantages, batch.actions), axis=-1)
    return Batch(*(np.take_along_axis(getattr(batch, f.name), order, -1) for f in fields(Batch)))


@functools.lru_cache(maxsize=256)
def batch_of(seed: int) -> Batch:
    """The batch the uniform old policy draws with ``seed`` (read-only: batches are shared)."""
    arrays = [getattr(draw_batches([seed]), f.name)[0] for f in fields(Batch)]
    for array in arrays:
        array.flags.writeable = False
    return Batch(*arrays)


def arm_sums(batch: Batch) -> FloatArray:
    """``(..., K)``: each arm's sum of advantages in the batch, or in each of many batches (the
    unclipped loss is linear in them)."""
    of_arm = batch.actions[..., None] == np.arange(len(ARM_MEANS))
    return (batch.advantages[..., None] * of_arm).sum(axis=-2)


def outside_band(ratios: ArrayLike, band: tuple[float, float] = DEFAULT_BAND) -> FloatArray:
    """How far each ratio lies outside ``band`` (negative inside)."""
    lower, upper = band
    return np.maximum(np.subtract(ratios, upper), np.subtract(lower, ratios))


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on, checked on creation (hashable, so runs are cached).

    ``seed`` defaults to :data:`MISLEADING_SEED`; ``target_kl=None`` trains for all
    ``n_epochs``, a number stops early once the k3 estimate exceeds it.  A value out of range
    raises a ``ValueError`` naming it (a ``TypeError``: not a number).
    """

    eps: float = DEFAULT_EPS
    step_size: float = DEFAULT_STEP_SIZE
    n_epochs: int = DEFAULT_EPOCHS
    seed: int = MISLEADING_SEED
    target_kl: float | None = None

    def __post_init__(self) -> None:
        given = {k: v for k, v in SETTING_RANGES.items() if getattr(self, k) is not None}
        checked_fields(self, given)

    def method(self, key: str) -> Method:
        """Column ``key``'s objective with these settings' clip size and early stop."""
        column = COLUMNS[key]
        high = self.eps + column.higher if column.higher else None
        return Method(
            key, column.name, column.objective, self.eps, target_kl=self.target_kl, eps_high=high
        )


@dataclass(frozen=True)
class Run:
    """One objective trained on one batch: row ``e`` of every array is the policy after
    ``e`` epochs (row 0 is the old policy), up to the last epoch the run took.

    ``sample_grads[e]`` is ppo_clip's ``d loss / d logp_new`` there, the gradient of the next
    step; ``clip_fraction`` is PPO's rule on the ratios, whatever the objective, while
    :attr:`zero_grad_fraction` is where this run's own gradients vanish.
    """

    objective: str
    settings: Settings
    batch: Batch
    logits: FloatArray
    sample_grads: FloatArray
    clip_fraction: FloatArray
    approx_kl: FloatArray
    stopped_early: bool

    @property
    def band(self) -> tuple[float, float]:
        """The clip band ``(1 - eps, 1 + eps_high)`` of this run's objective."""
        method = self.settings.method(self.objective)
        return ppo_clip.clip_band(method.eps, eps_high=method.eps_high)

    @property
    def epochs(self) -> IntArray:
        """``0, 1, ..., epochs_run``."""
        return np.arange(len(self.logits))

    @property
    def epochs_run(self) -> int:
        """How many gradient steps were taken."""
        return len(self.logits) - 1

    @functools.cached_property
    def probs(self) -> FloatArray:
        """``(epochs + 1, K)``: the policy after each epoch (computed once per run)."""
        return softmax(self.logits)

    @functools.cached_property
    def ratios(self) -> FloatArray:
        """``(epochs + 1, N)``: each sample's ratio ``pi_new(a_t) / pi_old(a_t)``, ppo_clip's."""
        new, b = self.batch.logp(self.logits), self.batch
        old, advantages = np.tile(b.logp_old, len(new)), np.tile(b.advantages, len(new))
        return ppo_clip.clip_breakdown(new.ravel(), old, advantages).ratio.reshape(new.shape)

    @property
    def exact_kl(self) -> FloatArray:
        """Per epoch, the exact KL(old || new)."""
        return exact_kl(self.probs[0], self.probs)

    @property
    def true_reward(self) -> FloatArray:
        """Per epoch, the policy's true expected reward ``sum_k pi_k * mu_k``."""
        return self.probs @ np.array(ARM_MEANS)

    @property
    def zero_grad(self) -> BoolArray:
        """``(epochs + 1, N)``: where a sample (with ``A != 0``) has no gradient of its own."""
        return (self.sample_grads == 0.0) & (self.batch.advantages != 0.0)

    @property
    def zero_grad_fraction(self) -> FloatArray:
        """Per epoch, the share of samples with no gradient of its own (PPO: the clip
        fraction)."""
        return self.zero_grad.mean(axis=1)

    def arm_ratios(self) -> FloatArray:
        """``(epochs + 1, K)``: each arm's ratio ``pi_new / pi_old`` per epoch."""
        return self.probs / self.probs[0]

    def push_directions(self) -> IntArray:
        """``(N, epochs + 1)``: +1 where a sample pushes its arm's probability up
        (``d loss / d logp_new < 0``), -1 down, 0 where it has no gradient."""
        return (-np.sign(self.sample_grads)).T.astype(np.int8)

    def arms_without_gradient(self) -> BoolArray:
        """``(epochs + 1, K)``: where no sample of a drawn arm has a gradient of its own.

        Such an arm's ratio still moves when other logits move the softmax's normalizer.
        """
        of_arm = self.batch.actions[:, None] == np.arange(len(ARM_MEANS))
        silent = (self.zero_grad[..., None] | ~of_arm).all(axis=1)
        return silent & of_arm.any(axis=0)


def train(batch: Batch, objectives: Sequence[str], settings: Settings) -> dict[str, Run]:
    """Train the columns ``objectives`` side by side on ``batch`` from the uniform policy,
    keeping every epoch of each (each run is, bit for bit, what it would be alone)."""
    methods = [settings.method(key) for key in objectives]
    start = np.zeros((len(methods), len(ARM_MEANS)))
    steps = epochs_on_batch(start, batch, methods, settings.step_size, settings.n_epochs)
    logits, grads, clipped, kl, moving = (np.array(field) for field in zip(*steps, strict=True))
    runs = {}
    for i, key in enumerate(objectives):
        n = 1 + int(np.argmin(moving[:, i]))  # up to the first policy that takes no step
        arrays = logits[:n, i], grads[:n, i], clipped[:n, i].mean(axis=-1), kl[:n, i]
        runs[key] = Run(key, settings, batch, *arrays, stopped_early=n <= settings.n_epochs)
    return runs


def run_all(settings: Settings) -> dict[str, Run]:
    """Every column's objective trained on the same batch with the same settings (cached)."""
    return _run_all(settings, tuple(COLUMNS.items()))


@functools.lru_cache(maxsize=256)
def _run_all(settings: Settings, columns: tuple[tuple[str, Column], ...]) -> dict[str, Run]:
    return train(batch_of(settings.seed), [key for key, _ in columns], settings)


def policies_per_epoch(
    batch: Batch,
    objective: str,
    step_size: float = DEFAULT_STEP_SIZE,
    n_epochs: int = DEFAULT_EPOCHS,
    eps: float = DEFAULT_EPS,
) -> FloatArray:
    """Each epoch's policy ``(epochs + 1, ..., K)`` when column ``objective`` trains from the
    uniform policy on ``batch``, or on many batches side by side (no early stop)."""
    method = Settings(eps=eps, seed=0).method(objective)
    start = np.zeros((*batch.actions.shape[:-1], len(ARM_MEANS)))
    return softmax([s.logits for s in epochs_on_batch(start, batch, method, step_size, n_epochs)])


def survey(seeds: Sequence[int]) -> dict[str, int]:
    """Over the batches of ``seeds``, with the default settings, how many: ``good_arm`` favour an
    arm better than the old policy; ``unclipped_wins``: the unclipped run ends with more true
    reward than PPO; ``wrong_way`` favour a worse arm, and of those, how many end as
    :data:`MISLEADING_SEED`'s was chosen to: ``unclipped_below`` the old policy's true reward,
    ``ppo_above`` it, ``clip_only_below`` PPO, and ``as_chosen`` all three."""
    batches, start = draw_batches(seeds), start_reward()
    good = np.array(ARM_MEANS)[np.argmax(arm_sums(batches), axis=-1)] > start
    end = {o: policies_per_epoch(batches, o)[-1] @ ARM_MEANS for o in ppo_clip.OBJECTIVES}
    wrong, ppo = ~good, end["clipped"]
    chosen = {
        "unclipped_below": wrong & (end["unclipped"] < start),
        "ppo_above": wrong & (ppo > start),
        "clip_only_below": wrong & (end["clip_only"] < ppo),
    }
    counts = {"good_arm": good, "unclipped_wins": end["unclipped"] > ppo, "wrong_way": wrong}
    counts |= chosen | {"as_chosen": np.logical_and.reduce(list(chosen.values()))}
    return {name: int(count.sum()) for name, count in counts.items()}


def hard_constraint_optimum(batch: Batch, eps: float = DEFAULT_EPS) -> FloatArray:
    """The arm ratios that maximise the unclipped surrogate with every ratio in the band.

    The surrogate is ``sum_k r_k * S_k / N`` (``S_k`` the sum of arm k's advantages); the
    ratios must lie in ``[1 - eps, 1 + eps]`` and keep the probabilities summing to one,
    ``sum_k pi_old(k) * r_k = 1``.  A linear program of this shape is solved greedily: start
    every arm at ``1 - eps``, then raise the arms in order of ``S_k / pi_old(k)``, best
    first, each as far as ``1 + eps``, until the probabilities sum to one.
    """
    lower, upper = ppo_clip.clip_band(eps)
    old = softmax(np.zeros(len(ARM_MEANS)))
    ratios = np.full(len(old), lower)
    room = 1.0 - float(old @ ratios)  # probability still to hand out
    for arm in np.argsort(-arm_sums(batch) / old, kind="stable"):
        raise_by = min(upper - lower, max(room, 0.0) / old[arm])
        ratios[arm] += raise_by
        room -= raise_by * old[arm]
    return ratios
