"""Several epochs of full-batch gradient steps on one batch, for each of the three objectives.

Every ratio, clip decision, loss and ``d loss / d logp_new`` comes from
:mod:`ppo_clip` (``clip_breakdown``, ``objective_terms``, ``surrogate_loss``,
``surrogate_grad``).  This module adds only what is specific to the toy: the
chain rule from the samples' log-probabilities to the logits
(:func:`chain_through_softmax`), the true expected reward, and the loop
(:func:`train`, :func:`run_all`, :func:`descend`) with an optional early stop
at a target KL (estimated by :mod:`.kl`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.app import InputError
from ppo_viz.epochs.bandit import (
    Bandit,
    BanditBatch,
    FloatArray,
    IntArray,
    cached_batch,
    default_bandit,
    read_only,
    softmax,
)
from ppo_viz.epochs.kl import approx_kl_k3, exact_kl
from ppo_viz.numbers import exact

#: The three objectives, in the order of the figure's columns.
OBJECTIVES: tuple[ppo_clip.Objective, ...] = ppo_clip.OBJECTIVES

DEFAULT_EPS = ppo_clip.DEFAULT_EPS
DEFAULT_STEP_SIZE = 0.5
DEFAULT_EPOCHS = 30
#: A batch picked because it misleads (see notebook 3).
DEFAULT_SEED = 2115
#: The early stop's threshold when it is switched on without a value.
DEFAULT_TARGET_KL = 0.02

#: The range of each setting (the widgets enforce them; :class:`Settings` checks them).
EPS_RANGE = (0.0, 0.5)
STEP_SIZE_RANGE = (0.05, 4.0)
EPOCHS_RANGE = (1, DEFAULT_EPOCHS)
SEED_RANGE = (0, 2**32 - 1)
TARGET_KL_RANGE = (0.001, 0.2)


# --------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------


class SettingError(InputError):
    """A setting out of range or not a number.

    ``str(error)`` names the argument (``"step_size must be between 0.05
    and 4, got -1"``); :attr:`setting` is its name on the controls (``"step
    size"``) and :attr:`problem` the rest of the sentence, so the app can
    write the same message in the controls' words.
    """

    def __init__(self, argument: str, setting: str, problem: str) -> None:
        super().__init__(f"{argument} {problem}")
        self.argument = argument
        self.setting = setting
        self.problem = problem


#: Each setting's name on the controls, its range, and whether it must be a whole number.
_SETTING_RULES: dict[str, tuple[str, tuple[float, float], bool]] = {
    "eps": ("clip size ε", EPS_RANGE, False),
    "step_size": ("step size", STEP_SIZE_RANGE, False),
    "n_epochs": ("number of epochs", EPOCHS_RANGE, True),
    "seed": ("batch seed", SEED_RANGE, True),
    "target_kl": ("target KL", TARGET_KL_RANGE, False),
}


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on, checked on creation (hashable, so runs can be cached).

    ``target_kl=None`` trains for all ``n_epochs``; a number stops early once
    the k3 KL estimate exceeds it.  A value out of range or not a number
    raises :class:`SettingError` naming the argument and its range.
    """

    eps: float = DEFAULT_EPS
    step_size: float = DEFAULT_STEP_SIZE
    n_epochs: int = DEFAULT_EPOCHS
    seed: int = DEFAULT_SEED
    target_kl: float | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name == "target_kl" and value is None:
                continue
            object.__setattr__(self, field.name, _checked_setting(field.name, value))


def _checked_setting(argument: str, value: object) -> float | int:
    """``value`` as the number setting ``argument`` needs; :class:`SettingError` if unusable."""
    setting, (low, high), whole = _SETTING_RULES[argument]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SettingError(argument, setting, f"must be a number, got {type(value).__name__}")
    # A whole number stays an int: compared exactly, however large (float(10**400) overflows).
    number = int(value) if isinstance(value, (int, np.integer)) else float(value)
    if not low <= number <= high:  # also refuses NaN and infinities
        raise SettingError(
            argument,
            setting,
            f"must be between {exact(low)} and {exact(high)}, got {_shown(number)}",
        )
    if whole and number != int(number):
        raise SettingError(argument, setting, f"must be a whole number, got {_shown(number)}")
    return int(number) if whole else number


def _shown(number: int | float) -> str:
    """``number`` for a message; a whole number of more than 15 digits by its size."""
    if isinstance(number, int) and abs(number) >= 10**15:
        power = int(abs(number).bit_length() * math.log10(2))
        return f"about {'-' if number < 0 else ''}10^{power}"
    return repr(number)


# --------------------------------------------------------------------------
# Loss and gradient with respect to the logits
# --------------------------------------------------------------------------


def chain_through_softmax(
    dloss_dlogp: ArrayLike, actions: IntArray, probs: ArrayLike
) -> FloatArray:
    """Chain ``d loss / d logp_t`` to ``d loss / d logits`` through the softmax.

    With ``logp_t = logits[a_t] - logsumexp(logits)``,
    ``d logp_t / d logits_k = [a_t == k] - pi_k``, so
    ``d loss / d logits_k = sum_{t: a_t = k} g_t - pi_k * sum_t g_t``.
    """
    g = np.asarray(dloss_dlogp, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    return np.bincount(actions, weights=g, minlength=p.shape[0]) - p * g.sum()


def loss_wrt_logits(
    logits: ArrayLike, batch: BanditBatch, eps: float, objective: ppo_clip.Objective
) -> float:
    """The objective's loss on the batch for a policy with these logits (from ppo_clip)."""
    return ppo_clip.surrogate_loss(
        batch.sample_logp(logits), batch.logp_old, batch.advantages, eps, objective=objective
    )


def grad_wrt_logits(
    logits: ArrayLike, batch: BanditBatch, eps: float, objective: ppo_clip.Objective
) -> FloatArray:
    """``d loss / d logits``: ppo_clip's ``d loss / d logp_new`` chained through the softmax."""
    dlogp = ppo_clip.surrogate_grad(
        batch.sample_logp(logits), batch.logp_old, batch.advantages, eps, objective=objective
    )
    return chain_through_softmax(dlogp, batch.actions, softmax(logits))


# --------------------------------------------------------------------------
# Training on one batch
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """The per-epoch history of training one objective on one batch.

    Row ``e`` of every array is the policy after ``e`` epochs (row 0 is the
    old policy).  ``sample_grads[e]`` is ``d loss / d logp_new`` there, the
    gradient the next step uses (from ppo_clip).  ``clip_fraction`` is
    ppo_clip's clip fraction of the ratios (PPO's rule, whatever the
    objective); :attr:`zero_grad_fraction` is where this run's own gradients
    vanish.  With an early stop the arrays end at the epoch where it
    triggered.
    """

    objective: ppo_clip.Objective
    settings: Settings
    batch: BanditBatch
    logits: FloatArray
    probs: FloatArray
    ratios: FloatArray
    sample_grads: FloatArray
    logit_grads: FloatArray
    clip_fraction: FloatArray
    approx_kl: FloatArray
    exact_kl: FloatArray
    true_reward: FloatArray
    stopped_early: bool

    @property
    def epochs(self) -> IntArray:
        """``0, 1, ..., epochs_run``."""
        return np.arange(self.ratios.shape[0])

    @property
    def epochs_run(self) -> int:
        """How many gradient steps were taken."""
        return int(self.ratios.shape[0] - 1)

    @property
    def zero_grad(self) -> NDArray[np.bool_]:
        """``(epochs + 1, N)``: where a sample (with ``A != 0``) has no gradient of its own."""
        return (self.sample_grads == 0.0) & (self.batch.advantages != 0.0)

    @property
    def zero_grad_fraction(self) -> FloatArray:
        """Per epoch, the fraction of the batch with no gradient of its own (this run's).

        For PPO this is its clip fraction; for the other objectives
        ``clip_fraction`` (PPO's rule on their ratios) is not where their
        gradients vanish.
        """
        return self.zero_grad.mean(axis=1)

    def arm_ratios(self) -> FloatArray:
        """``(epochs + 1, K)``: the ratio ``pi_new / pi_old`` of each arm per epoch."""
        return self.probs / self.probs[0]

    def push_directions(self) -> NDArray[np.int8]:
        """``(N, epochs + 1)``: +1 where a sample pushes its arm up, -1 down, 0 no gradient.

        "Up" means the loss's gradient would raise the sample's
        log-probability (``d loss / d logp_new < 0``).
        """
        return (-np.sign(self.sample_grads)).T.astype(np.int8)

    def arms_without_gradient(self) -> NDArray[np.bool_]:
        """``(epochs + 1, K)``: True where no sample of the arm has a gradient of its own.

        Such an arm's ratio still moves, because the other arms' logits move
        the softmax's normalizer: the samples share parameters.
        """
        counts = self.batch.arm_counts()
        silent = np.stack(
            [
                np.bincount(self.batch.actions, weights=row, minlength=self.batch.n_arms)
                for row in self.zero_grad
            ]
        )
        return (silent == counts) & (counts > 0)


def train(
    batch: BanditBatch,
    objective: ppo_clip.Objective,
    settings: Settings,
    bandit: Bandit | None = None,
) -> Run:
    """Run ``settings.n_epochs`` full-batch gradient steps of ``objective`` on ``batch``.

    Each epoch: ``logits <- logits - step_size * d loss / d logits``.  With
    ``settings.target_kl`` set, training stops before an epoch's step once
    the k3 estimate of KL(old || new) on the batch exceeds it (so the last
    recorded KL can overshoot the target, as in practice).
    """
    history, stopped = descend(
        batch,
        objective,
        eps=settings.eps,
        step_size=settings.step_size,
        n_epochs=settings.n_epochs,
        target_kl=settings.target_kl,
        bandit=bandit,
    )
    return Run(objective, settings, batch, stopped_early=stopped, **history)


def descend(
    batch: BanditBatch,
    objective: ppo_clip.Objective,
    *,
    eps: float,
    step_size: float,
    n_epochs: int,
    target_kl: float | None = None,
    bandit: Bandit | None = None,
) -> tuple[dict[str, FloatArray], bool]:
    """The loop of :func:`train` for any step size and number of epochs.

    :class:`Settings` holds the explorer's controls to their ranges; the
    small-step study (:mod:`.small_steps`) needs step sizes and epoch counts
    beyond them.  Returns the per-epoch arrays of a :class:`Run` by name, and
    whether the early stop triggered.
    """
    bandit = bandit or default_bandit()
    logits = bandit.old_logits.astype(np.float64).copy()
    rows: dict[str, list[Any]] = {name: [] for name in _RUN_ARRAYS}
    stopped = False
    for epoch in range(n_epochs + 1):
        state = _measure(logits, batch, objective, eps, bandit)
        for name in _RUN_ARRAYS:
            rows[name].append(state[name])
        if epoch == n_epochs:
            break
        if target_kl is not None and state["approx_kl"] > target_kl:
            stopped = True
            break
        logits = logits - step_size * state["logit_grads"]
    history = {name: read_only(np.array(values, dtype=np.float64)) for name, values in rows.items()}
    return history, stopped


_RUN_ARRAYS = (
    "logits",
    "probs",
    "ratios",
    "sample_grads",
    "logit_grads",
    "clip_fraction",
    "approx_kl",
    "exact_kl",
    "true_reward",
)


def _measure(
    logits: FloatArray,
    batch: BanditBatch,
    objective: ppo_clip.Objective,
    eps: float,
    bandit: Bandit,
) -> dict[str, Any]:
    """Everything recorded about one policy (one row of a :class:`Run`)."""
    probs = softmax(logits)
    logp_new = batch.sample_logp(logits)
    breakdown = ppo_clip.clip_breakdown(logp_new, batch.logp_old, batch.advantages, eps)
    _, sample_grads = ppo_clip.objective_terms(breakdown, objective)
    return {
        "logits": logits,
        "probs": probs,
        "ratios": breakdown.ratio,
        "sample_grads": sample_grads,
        "logit_grads": chain_through_softmax(sample_grads, batch.actions, probs),
        "clip_fraction": breakdown.clip_fraction,
        "approx_kl": approx_kl_k3(breakdown.log_ratio),
        "exact_kl": exact_kl(bandit.old_probs, probs),
        "true_reward": bandit.expected_reward(probs),
    }


@functools.lru_cache(maxsize=256)
def run_all(settings: Settings) -> dict[ppo_clip.Objective, Run]:
    """The three objectives trained on the same batch with the same settings (cached)."""
    batch = cached_batch(settings.seed)
    return {objective: train(batch, objective, settings) for objective in OBJECTIVES}
