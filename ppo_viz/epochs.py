"""Several epochs of PPO on one batch, on a bandit with a known answer (notebook 3).

The toy problem
---------------
A softmax policy over :data:`ARM_MEANS` (four arms, true mean rewards known).
The *old* policy (uniform) draws one batch of :data:`N_SAMPLES` arms; each
reward is the arm's true mean plus Gaussian noise, and each advantage is the
reward minus the batch's mean reward.  Advantages are noisy, as in practice,
and never normalized.  The batch is then reused for several epochs; each epoch
is one full-batch gradient step on the policy's logits.

Where the math lives
--------------------
Every ratio, clip decision, loss and ``d loss / d logp_new`` comes from
:mod:`ppo_clip` (``clip_breakdown``, ``surrogate_loss``, ``surrogate_grad``).
This module adds only what is specific to the toy: the softmax, the chain
rule from the samples' log-probabilities to the logits
(:func:`chain_through_softmax`), the KL estimates and the true expected
reward.

What is drawn
-------------
:class:`EpochsFigure`: per objective (PPO's clipped ``min``, the unclipped
``r*A``, the clip-only ``clip(r)*A``) a column with every sample's ratio
against the epoch (the clip band shaded) and a map of which samples still
have a gradient; below, three panels that overlay the three runs: the
fraction of samples with zero gradient (for PPO, its clip fraction), the
approximate KL and the true expected reward.  :class:`EpochsExplorer` wires it
to controls for ``eps``, the step size, the number of epochs, the batch seed
and an optional early stop at a target KL.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator, NullLocator
from matplotlib.transforms import Bbox
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.display import App, FigureView, figure_to_png, message_html
from ppo_viz.style import (
    BLACK,
    COLORS,
    GREEN,
    GREY,
    OBJECTIVE_COLORS,
    PURPLE,
    SKY_BLUE,
    YELLOW,
    figure_style,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: The three objectives, in the order of the figure's columns.
OBJECTIVES: tuple[ppo_clip.Objective, ...] = ("clipped", "unclipped", "clip_only")
OBJECTIVE_TITLES = {
    "clipped": "PPO: min(rA, clip(r)A)",
    "unclipped": "unclipped: rA",
    "clip_only": "clip only: clip(r)A",
}
OBJECTIVE_NAMES = {"clipped": "PPO (clipped)", "unclipped": "unclipped", "clip_only": "clip only"}

#: The bandit: true mean reward of each arm (the learner never sees these).
ARM_MEANS: tuple[float, ...] = (1.0, 0.5, 0.0, -0.5)
#: Standard deviation of the Gaussian noise on every reward.
REWARD_NOISE = 1.0
#: Samples in the one batch.
N_SAMPLES = 12

DEFAULT_EPS = ppo_clip.DEFAULT_EPS
DEFAULT_STEP_SIZE = 0.5
DEFAULT_EPOCHS = 30
DEFAULT_SEED = 2115
#: The early stop's threshold when it is switched on without a value.
DEFAULT_TARGET_KL = 0.02

#: Control ranges (the widgets enforce them; the constructor checks them).
EPS_RANGE = (0.0, 0.5)
STEP_SIZE_RANGE = (0.05, 4.0)
EPOCHS_RANGE = (1, DEFAULT_EPOCHS)
SEED_RANGE = (0, 2**32 - 1)
TARGET_KL_RANGE = (0.001, 0.2)

ARM_COLORS = (GREEN, PURPLE, BLACK, GREY)


# --------------------------------------------------------------------------
# The toy problem
# --------------------------------------------------------------------------


def log_softmax(logits: ArrayLike) -> FloatArray:
    """``log softmax(logits)``, computed stably (subtracting the max first)."""
    z = np.asarray(logits, dtype=np.float64)
    shifted = z - z.max()
    return shifted - np.log(np.exp(shifted).sum())


def softmax(logits: ArrayLike) -> FloatArray:
    """The categorical probabilities ``exp(logits) / sum(exp(logits))``."""
    return np.exp(log_softmax(logits))


@dataclass(frozen=True)
class Bandit:
    """A K-armed bandit with known mean rewards and the old policy's logits."""

    true_means: FloatArray
    old_logits: FloatArray
    reward_noise: float = REWARD_NOISE

    @property
    def k(self) -> int:
        """The number of arms."""
        return int(self.true_means.shape[0])

    @property
    def old_probs(self) -> FloatArray:
        """The old policy's probabilities (the one that drew the batch)."""
        return softmax(self.old_logits)

    def expected_reward(self, probs: ArrayLike) -> float:
        """The true expected reward ``sum_k pi_k * mu_k`` of a policy."""
        return float(np.dot(np.asarray(probs, dtype=np.float64), self.true_means))


def default_bandit() -> Bandit:
    """Four arms with means :data:`ARM_MEANS`, uniform old policy, noise :data:`REWARD_NOISE`."""
    return Bandit(np.array(ARM_MEANS), np.zeros(len(ARM_MEANS)), REWARD_NOISE)


@dataclass(frozen=True)
class Batch:
    """One batch drawn from the old policy, sorted by arm then by advantage (descending).

    Sorting only renumbers the samples (sample 0 is arm 0's best), which
    makes the figures readable; no quantity depends on the order.
    """

    actions: IntArray
    rewards: FloatArray
    advantages: FloatArray
    logp_old: FloatArray
    seed: int

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.actions.shape[0])

    def arm_counts(self, k: int) -> IntArray:
        """How many samples drew each of the ``k`` arms."""
        return np.bincount(self.actions, minlength=k)


def draw_batch(seed: int, bandit: Bandit | None = None, n_samples: int = N_SAMPLES) -> Batch:
    """Draw ``n_samples`` arms from the old policy and their noisy rewards (seeded).

    Advantage of sample t: ``A_t = R_t - mean(R)``, the reward minus the
    batch's mean reward.  It is an estimate from the batch (noisy) and is used
    as is: never normalized.
    """
    bandit = bandit or default_bandit()
    rng = np.random.default_rng(seed)
    actions = rng.choice(bandit.k, size=n_samples, p=bandit.old_probs)
    rewards = bandit.true_means[actions] + bandit.reward_noise * rng.standard_normal(n_samples)
    advantages = rewards - rewards.mean()
    order = np.lexsort((-advantages, actions))
    actions, rewards, advantages = actions[order], rewards[order], advantages[order]
    logp_old = log_softmax(bandit.old_logits)[actions]
    return Batch(
        _read_only(actions.astype(np.int64)),
        _read_only(rewards),
        _read_only(advantages),
        _read_only(logp_old),
        int(seed),
    )


def _read_only(array: NDArray[Any]) -> NDArray[Any]:
    """Freeze ``array`` in place: batches and runs are cached and shared."""
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class BatchTable:
    """Per arm: true mean, the samples that drew it, their mean reward and advantage sum.

    Displays as an HTML table in a notebook and as aligned text elsewhere.
    """

    batch: Batch
    bandit: Bandit

    def rows(self) -> list[dict[str, Any]]:
        """One dict per arm (arms the batch never drew have ``None`` averages)."""
        rows = []
        for arm in range(self.bandit.k):
            members = np.flatnonzero(self.batch.actions == arm)
            rows.append(
                {
                    "arm": arm,
                    "true_mean": float(self.bandit.true_means[arm]),
                    "samples": [int(t) for t in members],
                    "advantages": [float(self.batch.advantages[t]) for t in members],
                    "mean_reward": float(self.batch.rewards[members].mean())
                    if members.size
                    else None,
                    "advantage_sum": float(self.batch.advantages[members].sum()),
                }
            )
        return rows

    def _cells(self, row: dict[str, Any]) -> list[str]:
        samples = ", ".join(
            f"#{t} ({a:+.2f})" for t, a in zip(row["samples"], row["advantages"], strict=True)
        )
        mean = "–" if row["mean_reward"] is None else f"{row['mean_reward']:.2f}"
        return [
            f"arm {row['arm']}",
            f"{row['true_mean']:+.1f}",
            samples or "none",
            mean,
            f"{row['advantage_sum']:+.2f}",
        ]

    _HEADER = ("arm", "true mean μ", "samples (advantage A)", "batch mean reward", "sum of A")

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self._HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in self._cells(row)) + "</tr>"
            for row in self.rows()
        )
        caption = (
            f"Batch seed {self.batch.seed}: N = {self.batch.n}, mean reward "
            f"{self.batch.rewards.mean():.3f}, advantage A = R − mean reward"
        )
        return (
            '<table class="ppo-epochs-batch" style="font-family:sans-serif;font-size:13px">'
            f"<caption>{html.escape(caption)}</caption><tr>{head}</tr>{body}</table>"
        )

    def __repr__(self) -> str:
        lines = [" | ".join(self._HEADER)]
        lines += [" | ".join(self._cells(row)) for row in self.rows()]
        return "\n".join(lines)


def describe_batch(seed: int = DEFAULT_SEED) -> BatchTable:
    """The batch drawn with ``seed``, summarized per arm (for the notebook)."""
    return BatchTable(cached_batch(seed), default_bandit())


# --------------------------------------------------------------------------
# Loss and gradient with respect to the logits
# --------------------------------------------------------------------------


def sample_logp(logits: ArrayLike, actions: IntArray) -> FloatArray:
    """``log pi(a_t)`` of every sample under the policy with these logits."""
    return log_softmax(logits)[actions]


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
    logits: ArrayLike, batch: Batch, eps: float, objective: ppo_clip.Objective
) -> float:
    """The objective's loss on the batch for a policy with these logits (from ppo_clip)."""
    return ppo_clip.surrogate_loss(
        sample_logp(logits, batch.actions),
        batch.logp_old,
        batch.advantages,
        eps,
        objective=objective,
    )


def grad_wrt_logits(
    logits: ArrayLike, batch: Batch, eps: float, objective: ppo_clip.Objective
) -> FloatArray:
    """``d loss / d logits``: ppo_clip's ``d loss / d logp_new`` chained through the softmax."""
    logp_new = sample_logp(logits, batch.actions)
    dlogp = ppo_clip.surrogate_grad(
        logp_new, batch.logp_old, batch.advantages, eps, objective=objective
    )
    return chain_through_softmax(dlogp, batch.actions, softmax(logits))


def approx_kl_k3(ratio: ArrayLike, log_ratio: ArrayLike) -> float:
    """The "k3" estimate of KL(old || new) on the batch: ``mean((r - 1) - log r)``.

    The samples come from the old policy, so ``E_old[r] = 1`` and the mean
    is an unbiased estimate of ``KL(old || new) = -E_old[log r]``; every
    term is >= 0.  This is the ``approx_kl`` that Stable-Baselines3 and
    CleanRL log.
    """
    r = np.asarray(ratio, dtype=np.float64)
    return float(np.mean((r - 1.0) - np.asarray(log_ratio, dtype=np.float64)))


def exact_kl(old_probs: ArrayLike, new_probs: ArrayLike) -> float:
    """``KL(old || new) = sum_k old_k * log(old_k / new_k)`` for two categorical policies."""
    p, q = np.asarray(old_probs, dtype=np.float64), np.asarray(new_probs, dtype=np.float64)
    return float(np.sum(p * (np.log(p) - np.log(q))))


# --------------------------------------------------------------------------
# Training on one batch
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on (hashable, so runs can be cached)."""

    eps: float = DEFAULT_EPS
    step_size: float = DEFAULT_STEP_SIZE
    n_epochs: int = DEFAULT_EPOCHS
    seed: int = DEFAULT_SEED
    target_kl: float | None = None


@dataclass(frozen=True)
class Run:
    """The per-epoch history of training one objective on one batch.

    Row ``e`` of every array is the policy after ``e`` epochs (row 0 is the
    old policy).  ``sample_grads[e]`` is ``d loss / d logp_new`` there, the
    gradient the next step uses (from ``ppo_clip.surrogate_grad``).
    ``clip_fraction`` is ``ppo_clip``'s clip fraction of the ratios (PPO's
    rule, whatever the objective); :attr:`zero_grad_fraction` is where this
    run's own gradients vanish.  With an early stop the arrays end at the
    epoch where it triggered.
    """

    objective: str
    settings: Settings
    batch: Batch
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
        """Where a sample (with a nonzero advantage) has no gradient of its own."""
        return (self.sample_grads == 0.0) & (self.batch.advantages != 0.0)

    @property
    def zero_grad_fraction(self) -> FloatArray:
        """Per epoch, the fraction of the batch with no gradient of its own (this run's).

        For PPO this is its clip fraction; ``clip_fraction`` is PPO's rule
        applied to this run's ratios, which for the other objectives is not
        where their gradients vanish.
        """
        return self.zero_grad.mean(axis=1)

    def arm_ratios(self, k: int) -> FloatArray:
        """Ratio of each arm per epoch, shape ``(epochs + 1, k)`` (``pi_new / pi_old``)."""
        old = self.probs[0]
        return self.probs[:, :k] / old[:k]


def train(
    batch: Batch,
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
    bandit = bandit or default_bandit()
    logits = bandit.old_logits.astype(np.float64).copy()
    rows: dict[str, list[Any]] = {name: [] for name in _RUN_ARRAYS}
    stopped = False
    for epoch in range(settings.n_epochs + 1):
        state = _measure(logits, batch, objective, settings.eps, bandit)
        for name in _RUN_ARRAYS:
            rows[name].append(state[name])
        if epoch == settings.n_epochs:
            break
        if settings.target_kl is not None and state["approx_kl"] > settings.target_kl:
            stopped = True
            break
        logits = logits - settings.step_size * state["logit_grads"]
    arrays = {name: _read_only(np.array(values, dtype=np.float64)) for name, values in rows.items()}
    return Run(objective, settings, batch, stopped_early=stopped, **arrays)


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
    logits: FloatArray, batch: Batch, objective: ppo_clip.Objective, eps: float, bandit: Bandit
) -> dict[str, Any]:
    """Everything recorded about one policy (one row of a :class:`Run`)."""
    probs = softmax(logits)
    logp_new = sample_logp(logits, batch.actions)
    breakdown = ppo_clip.clip_breakdown(logp_new, batch.logp_old, batch.advantages, eps)
    sample_grads = ppo_clip.surrogate_grad(
        logp_new, batch.logp_old, batch.advantages, eps, objective=objective
    )
    return {
        "logits": logits,
        "probs": probs,
        "ratios": breakdown.ratio,
        "sample_grads": sample_grads,
        "logit_grads": chain_through_softmax(sample_grads, batch.actions, probs),
        "clip_fraction": breakdown.clip_fraction,
        "approx_kl": approx_kl_k3(breakdown.ratio, logp_new - batch.logp_old),
        "exact_kl": exact_kl(bandit.old_probs, probs),
        "true_reward": bandit.expected_reward(probs),
    }


@functools.lru_cache(maxsize=64)
def cached_batch(seed: int) -> Batch:
    """:func:`draw_batch` for the default bandit, cached per seed."""
    return draw_batch(seed)


@functools.lru_cache(maxsize=256)
def run_all(settings: Settings) -> dict[str, Run]:
    """The three objectives trained on the same batch with the same settings (cached)."""
    batch = cached_batch(settings.seed)
    return {objective: train(batch, objective, settings) for objective in OBJECTIVES}


# --------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------

#: Largest ratio any arm can reach: 1 / (smallest old probability).
RATIO_MAX = 1.0 / float(default_bandit().old_probs.min())
KL_LIMITS = (1e-4, 5.0)
#: The gradient map's colours: none of them is an objective's colour (blue, vermillion,
#: orange), an arm's, or the pink that means "clipped: zero gradient" in notebooks 1 and 2.
#: Sky blue against yellow stays distinct under the common colour-vision deficiencies.
GRAD_COLORS = {
    "down": YELLOW,  # the sample pushes its log-probability down (A < 0)
    "zero": "#FFFFFF",  # no gradient of its own
    "up": SKY_BLUE,  # the sample pushes its log-probability up (A > 0)
}
#: Line widths of the bottom row: the wider line underneath, so coinciding runs stay visible.
METRIC_WIDTHS = {"clipped": 2.9, "unclipped": 1.9, "clip_only": 1.1}
GRAD_CMAP = ListedColormap([GRAD_COLORS["down"], GRAD_COLORS["zero"], GRAD_COLORS["up"]])
#: Every panel's x-axis spans the epochs slider's whole range, so changing the number of
#: epochs never moves an axis; the epochs past the requested number are veiled in grey.
EPOCH_AXIS_MAX = EPOCHS_RANGE[1]
#: The veil lies over everything in its panel (legends included), in a full draw and in a
#: blitted one alike, so both stack the same artists in the same order.
NOT_RUN_SHADE = {"facecolor": "#6F6F6F", "alpha": 0.13, "lw": 0, "zorder": 6}


def gradient_codes(run: Run) -> NDArray[np.int8]:
    """Per sample (rows) and epoch (columns): +1 pushes up, -1 pushes down, 0 no gradient.

    "Up" means the loss's gradient would raise the sample's log-probability
    (``d loss / d logp_new < 0``).
    """
    return (-np.sign(run.sample_grads)).T.astype(np.int8)


def coasting(run: Run, k: int) -> NDArray[np.bool_]:
    """``(epochs + 1, k)``: True where no sample of the arm has a gradient of its own.

    Such an arm's ratio still moves, because the other arms' logits move
    the softmax's normalizer: the samples share parameters.
    """
    counts = run.batch.arm_counts(k)
    silent = np.stack(
        [np.bincount(run.batch.actions, weights=row, minlength=k) for row in run.zero_grad]
    )
    return (silent == counts) & (counts > 0)


def _nan_where_not(values: FloatArray, keep: NDArray[np.bool_]) -> FloatArray:
    return np.where(keep, values, np.nan)


class CachedTexts(Artist):
    """Texts drawn once, then redrawn as the pixels they made (for a blitted redraw).

    Drawing text is most of a redraw's cost, and the sample labels change
    only with the batch.  The texts must lie inside ``area()`` (display
    coordinates), where nothing else animated is drawn.  :meth:`draw` keeps
    the area's pixels from before and after drawing the texts; while the
    texts are unchanged and the pixels before are the same, it writes back
    the stored result instead of drawing, which gives the same pixels.  The
    texts stay children of their axes (animated), so ``savefig`` draws them
    itself; this artist is for ``FigureView.animate`` only.
    """

    def __init__(self, texts: list[Text], area: Callable[[], Bbox]) -> None:
        super().__init__()
        self.texts = texts
        self.area = area
        self.axes = texts[0].axes
        self.set_zorder(max(t.get_zorder() for t in texts))
        for text in texts:
            text.set_animated(True)
        self._key: tuple[Any, ...] | None = None
        self._region: tuple[slice, slice] = (slice(0), slice(0))
        self._before: NDArray[np.uint8] | None = None
        self._after: NDArray[np.uint8] | None = None

    def _state(self, renderer: Any) -> tuple[Any, ...]:
        texts = tuple((t.get_text(), t.get_color(), t.get_position()) for t in self.texts)
        return (texts, renderer.width, renderer.height, renderer.dpi, tuple(self.area().bounds))

    def _region_of(self, box: Bbox, height: int, width: int) -> tuple[slice, slice]:
        """Rows and columns of the pixel buffer (top row first) inside ``box``."""
        x0, x1 = max(0, math.floor(box.x0)), min(width, math.ceil(box.x1))
        top, bottom = max(0, height - math.ceil(box.y1)), min(height, height - math.floor(box.y0))
        return (slice(top, bottom), slice(x0, x1))

    def _inside_area(self, renderer: Any) -> bool:
        area = self.area()
        return all(
            area.x0 <= e.x0 and e.x1 <= area.x1 and area.y0 <= e.y0 and e.y1 <= area.y1
            for e in (t.get_window_extent(renderer) for t in self.texts if t.get_text())
        )

    def draw(self, renderer: Any) -> None:
        if not self.get_visible():
            return
        if not hasattr(renderer, "buffer_rgba"):  # not Agg: nothing to reuse
            for text in self.texts:
                text.draw(renderer)
            return
        pixels = np.asarray(renderer.buffer_rgba())
        key = self._state(renderer)
        if key == self._key and np.array_equal(pixels[self._region], self._before):
            pixels[self._region] = self._after
            return
        self._region = self._region_of(self.area(), *pixels.shape[:2])
        self._before = pixels[self._region].copy()
        for text in self.texts:
            text.draw(renderer)
        self._after = pixels[self._region].copy()
        # Extents are cheap once drawn; a text outside the area is never cached.
        self._key = key if self._inside_area(renderer) else None


def _left_margin_of(ax: Axes, pad: float = 12.0) -> Bbox:
    """The figure's strip left of ``ax``, ``pad`` pixels taller at each end (display units)."""
    box = ax.get_window_extent()
    return Bbox.from_extents(0.0, box.y0 - pad, box.x0, box.y1 + pad)


def _add_not_run_shade(ax: Axes) -> Rectangle:
    """A shade over epochs past the requested number (placed by ``EpochsFigure.set_epochs``)."""
    shade = Rectangle(
        (EPOCH_AXIS_MAX + 0.5, 0.0), 0.0, 1.0, transform=ax.get_xaxis_transform(), **NOT_RUN_SHADE
    )
    ax.add_patch(shade)
    return shade


def _veil_after(shade: Rectangle, last_epoch: int) -> None:
    """Place ``shade`` over epochs ``last_epoch + 1 .. EPOCH_AXIS_MAX`` (hidden if none)."""
    shade.set_visible(last_epoch < EPOCH_AXIS_MAX)
    shade.set_x(last_epoch + 0.5)
    shade.set_width(EPOCH_AXIS_MAX - last_epoch)


@dataclass
class ObjectiveColumn:
    """The animated artists of one objective's ratio panel and gradient map."""

    ratio_ax: Axes
    map_ax: Axes
    band: Rectangle
    arm_lines: list[Line2D]
    coast_markers: list[Line2D]
    stop_line: Line2D
    stop_text: Text
    image: AxesImage
    separators: list[Line2D]
    not_run: list[Rectangle]

    def artists(self) -> list[Artist]:
        return [
            self.band,
            self.image,
            *self.separators,
            *self.not_run,
            *self.arm_lines,
            *self.coast_markers,
            self.stop_line,
            self.stop_text,
        ]


class EpochsFigure:
    """Per objective a column (ratios, gradient map); below, zero-gradient fraction, KL, reward.

    Build once, then :meth:`update` with the three runs: only artist data,
    the band and labels change.  Every limit is fixed: the x-axis spans the
    epochs slider's whole range (:data:`EPOCH_AXIS_MAX`) and the epochs past
    the requested number are shaded (:meth:`set_epochs`), so no axis moves;
    the three columns share their axes so the objectives compare at a glance.
    Everything that depends on the settings or the batch (including the
    sample labels) is in :meth:`animated_artists`, so a redraw never needs
    the static background redrawn.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.bandit = default_bandit()
        with figure_style():
            self.figure = Figure(figsize=(12.0, 10.0), dpi=100)
            top = self.figure.add_gridspec(
                2,
                3,
                height_ratios=[3.0, 2.0],
                left=0.16,
                right=0.985,
                top=0.885,
                bottom=0.375,
                hspace=0.06,
                wspace=0.1,
            )
            bottom = self.figure.add_gridspec(
                1, 3, left=0.16, right=0.985, top=0.285, bottom=0.055, wspace=0.22
            )
            self.columns: dict[str, ObjectiveColumn] = {}
            for index, objective in enumerate(OBJECTIVES):
                self.columns[objective] = self._build_column(top, index, objective)
            self._build_metrics(bottom)
            self._build_legends()
            self._fix_epoch_axis()
        self.runs: dict[str, Run] = {}
        self.batch: Batch | None = None
        self.n_epochs = -1
        self.set_epochs(settings.n_epochs)
        self.update(run_all(settings))

    # -- construction ------------------------------------------------------

    def _build_column(self, grid: Any, index: int, objective: str) -> ObjectiveColumn:
        first = self.columns.get(OBJECTIVES[0])
        ratio_ax = self.figure.add_subplot(
            grid[0, index],
            sharex=first.ratio_ax if first else None,
            sharey=first.ratio_ax if first else None,
        )
        map_ax = self.figure.add_subplot(
            grid[1, index], sharex=ratio_ax, sharey=first.map_ax if first else None
        )
        ratio_ax.set_title(
            OBJECTIVE_TITLES[objective], color=OBJECTIVE_COLORS[objective], fontweight="bold", y=1.0
        )
        ratio_ax.set_ylim(0.0, RATIO_MAX * 1.04)
        ratio_ax.set_yticks(np.arange(0.0, RATIO_MAX + 0.5, 0.5))
        ratio_ax.axhline(1.0, color=COLORS["start"], lw=0.8, ls=":", zorder=1)
        band = Rectangle(
            (0.0, 0.8),
            1.0,
            0.4,
            transform=ratio_ax.get_yaxis_transform(),
            facecolor=COLORS["band"],
            alpha=0.3,
            lw=0,
            zorder=0,
        )
        ratio_ax.add_patch(band)
        arm_lines, coast_markers = [], []
        for arm in range(self.bandit.k):
            color = ARM_COLORS[arm]
            arm_lines.append(
                ratio_ax.plot([], [], color=color, lw=1.8, marker="o", ms=2.6, zorder=3)[0]
            )
            coast_markers.append(
                ratio_ax.plot(
                    [],
                    [],
                    ls="none",
                    marker="o",
                    ms=5.5,
                    mfc="white",
                    mec=color,
                    mew=1.3,
                    zorder=4,
                )[0]
            )
        stop_line = ratio_ax.axvline(0.0, color=BLACK, lw=1.2, ls="--", visible=False)
        stop_text = ratio_ax.text(
            0.0,
            0.97,
            "",
            transform=ratio_ax.get_xaxis_transform(),
            ha="right",
            va="top",
            fontsize=8.5,
            visible=False,
        )
        ratio_ax.tick_params(labelbottom=False)
        image = map_ax.imshow(
            np.zeros((N_SAMPLES, 2)),
            cmap=GRAD_CMAP,
            vmin=-1.5,
            vmax=1.5,
            aspect="auto",
            interpolation="nearest",
            extent=(-0.5, 1.5, N_SAMPLES - 0.5, -0.5),
        )
        map_ax.grid(False)
        map_ax.set_yticks([])
        map_ax.set_xlabel("epoch")
        separators = [
            map_ax.axhline(0.0, color="#444444", lw=1.0) for _ in range(self.bandit.k - 1)
        ]
        not_run = [_add_not_run_shade(ratio_ax), _add_not_run_shade(map_ax)]
        if first is None:
            ratio_ax.set_ylabel("ratio r = π_new / π_old of each arm\n(its samples all share it)")
            map_ax.set_ylabel("each sample's own gradient", labelpad=122)
            self._sample_labels = [
                map_ax.text(
                    -0.02,
                    t,
                    "",
                    transform=map_ax.get_yaxis_transform(),
                    ha="right",
                    va="center",
                    fontsize=8,
                    family="monospace",
                )
                for t in range(N_SAMPLES)
            ]
            self._cached_labels = CachedTexts(
                self._sample_labels, functools.partial(_left_margin_of, map_ax)
            )
        else:
            ratio_ax.tick_params(labelleft=False)
        return ObjectiveColumn(
            ratio_ax,
            map_ax,
            band,
            arm_lines,
            coast_markers,
            stop_line,
            stop_text,
            image,
            separators,
            not_run,
        )

    def _build_metrics(self, grid: Any) -> None:
        self.clip_ax = self.figure.add_subplot(grid[0, 0])
        self.kl_ax = self.figure.add_subplot(grid[0, 1], sharex=self.clip_ax)
        self.reward_ax = self.figure.add_subplot(grid[0, 2], sharex=self.clip_ax)
        self.clip_ax.set_ylim(-0.02, 1.02)
        self.clip_ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        self.clip_ax.set_title(
            "samples with zero gradient\n(PPO: its clip fraction)", fontsize=10, y=1.0
        )
        self.kl_ax.set_yscale("log", nonpositive="mask")
        self.kl_ax.set_ylim(*KL_LIMITS)
        self.kl_ax.set_yticks([1e-4, 1e-3, 1e-2, 1e-1, 1.0])
        self.kl_ax.yaxis.set_minor_locator(NullLocator())
        self.kl_ax.set_title("KL(old ‖ new), log scale", fontsize=10, y=1.0)
        means = self.bandit.true_means
        self.reward_ax.set_ylim(means.min() - 0.1, means.max() + 0.1)
        self.reward_ax.set_yticks([-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0])
        self.reward_ax.set_title(
            "true expected reward Σ π_k μ_k (dotted: start)", fontsize=10, y=1.0
        )
        start = self.bandit.expected_reward(self.bandit.old_probs)
        self.reward_ax.axhline(start, color=COLORS["start"], lw=0.8, ls=":")
        self.reward_ax.axhline(means.max(), color=GREY, lw=0.8, ls="--")
        self.reward_ax.text(
            0.01,
            means.max(),
            "best arm",
            transform=self.reward_ax.get_yaxis_transform(),
            va="top",
            fontsize=8,
            color=GREY,
        )
        for ax in (self.clip_ax, self.kl_ax, self.reward_ax):
            ax.set_xlabel("epoch")
        self.metric_lines: dict[str, dict[str, Line2D]] = {}
        self.end_labels: dict[str, Text] = {}
        for objective in OBJECTIVES:
            color = OBJECTIVE_COLORS[objective]
            width = METRIC_WIDTHS[objective]
            self.metric_lines[objective] = {
                "zero_grad_fraction": self.clip_ax.plot([], [], color=color, lw=width)[0],
                "approx_kl": self.kl_ax.plot([], [], color=color, lw=width)[0],
                "exact_kl": self.kl_ax.plot([], [], color=color, lw=1.0, ls="--")[0],
                "true_reward": self.reward_ax.plot([], [], color=color, lw=width)[0],
            }
            slot = OBJECTIVES.index(objective)
            self.end_labels[objective] = self.reward_ax.text(
                0.98,
                0.80 - 0.085 * slot,
                "",
                transform=self.reward_ax.transAxes,
                color=color,
                fontsize=8.5,
                ha="right",
                va="top",
                fontweight="bold",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0, "alpha": 0.85},
            )
        self.reward_ax.text(
            0.98,
            0.88,
            "final",
            transform=self.reward_ax.transAxes,
            fontsize=8.5,
            ha="right",
            va="top",
        )
        self.metric_not_run = [
            _add_not_run_shade(ax) for ax in (self.clip_ax, self.kl_ax, self.reward_ax)
        ]
        self.target_line = self.kl_ax.axhline(
            DEFAULT_TARGET_KL, color=BLACK, lw=1.0, ls=(0, (4, 2)), visible=False
        )
        self.target_text = self.kl_ax.text(
            0.98,
            DEFAULT_TARGET_KL,
            "target KL",
            transform=self.kl_ax.get_yaxis_transform(),
            ha="right",
            va="bottom",
            fontsize=8,
            visible=False,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8},
        )

    def _build_legends(self) -> None:
        arms = [
            Line2D(
                [],
                [],
                color=ARM_COLORS[arm],
                lw=1.8,
                marker="o",
                ms=3,
                label=f"arm {arm} (true mean {self.bandit.true_means[arm]:+.1f})",
            )
            for arm in range(self.bandit.k)
        ]
        band = Patch(facecolor=COLORS["band"], alpha=0.45, label="clip band [1−ε, 1+ε]")
        coast = Line2D(
            [],
            [],
            ls="none",
            marker="o",
            ms=5.5,
            mfc="white",
            mec=GREY,
            mew=1.3,
            label="no sample of the arm has a gradient",
        )
        self.figure.legend(
            handles=[*arms, band],
            loc="upper center",
            ncol=5,
            bbox_to_anchor=(0.57, 0.995),
            frameon=False,
            fontsize=9,
            handlelength=1.8,
            columnspacing=1.2,
        )
        not_run = Patch(**{**NOT_RUN_SHADE, "label": "epochs not run"})
        pushes = [
            Patch(facecolor=GRAD_COLORS["up"], label="sample pushes its arm up (A > 0)"),
            Patch(facecolor=GRAD_COLORS["down"], label="pushes it down (A < 0)"),
            Patch(facecolor=GRAD_COLORS["zero"], edgecolor="#999999", label="no gradient"),
            coast,
            not_run,
        ]
        self.figure.legend(
            handles=pushes,
            loc="upper center",
            ncol=5,
            bbox_to_anchor=(0.57, 0.962),
            frameon=False,
            fontsize=9,
            handlelength=1.8,
            columnspacing=1.2,
        )
        objectives = [
            Line2D([], [], color=OBJECTIVE_COLORS[o], lw=METRIC_WIDTHS[o], label=OBJECTIVE_NAMES[o])
            for o in OBJECTIVES
        ]
        self.clip_ax.legend(handles=objectives, loc="upper left", fontsize=8.5)
        estimators = [
            Line2D([], [], color=GREY, lw=1.8, label="k3 estimate on the batch"),
            Line2D([], [], color=GREY, lw=1.1, ls="--", label="exact"),
        ]
        self.kl_ax.legend(handles=estimators, loc="lower right", fontsize=8.5)

    def _fix_epoch_axis(self) -> None:
        """Every panel spans epochs ``0..EPOCH_AXIS_MAX``, whatever the number of epochs run."""
        ticks = MaxNLocator(nbins=7, integer=True).tick_values(0, EPOCH_AXIS_MAX)
        ticks = ticks[(ticks >= 0) & (ticks <= EPOCH_AXIS_MAX)]
        for ax in (self.columns[OBJECTIVES[0]].ratio_ax, self.clip_ax):
            ax.set_xlim(-0.5, EPOCH_AXIS_MAX + 0.5)
            ax.set_xticks(ticks)

    # -- updates -----------------------------------------------------------

    def animated_artists(self) -> list[Artist]:
        """Every artist that changes between redraws (for ``FigureView.animate``).

        Listed in drawing order (by axes, then by z-order, as ``savefig``
        draws them), so the not-run veil comes last in its panel.
        """
        artists: list[Artist] = []
        for column in self.columns.values():
            artists.extend(column.artists())
        artists.append(self._cached_labels)
        for lines in self.metric_lines.values():
            artists.extend(lines.values())
        artists.extend(self.metric_not_run)
        artists.extend([self.target_line, self.target_text])
        artists.extend(self.end_labels.values())
        axes = self.figure.axes
        return sorted(artists, key=lambda a: (axes.index(a.axes), a.get_zorder()))

    def set_epochs(self, n_epochs: int) -> None:
        """Shade epochs ``n_epochs + 1 .. EPOCH_AXIS_MAX`` of the bottom row as not run.

        No axis changes.  Each column's own panels are shaded from where its
        run ended (:meth:`update`), so an early stop's blank epochs never
        read as white "no gradient" cells.
        """
        if n_epochs == self.n_epochs:
            return
        self.n_epochs = n_epochs
        for shade in self.metric_not_run:
            _veil_after(shade, n_epochs)

    def update(self, runs: dict[str, Run]) -> None:
        """Show ``runs`` (from :func:`run_all`): lines, band, gradient maps, labels.

        Everything it changes is animated, so the static background stays
        valid (a new batch only relabels the animated sample labels).
        """
        new_batch = not self.runs or runs[OBJECTIVES[0]].batch is not self.batch
        self.runs = runs
        for objective, run in runs.items():
            self._update_column(self.columns[objective], run)
            self._update_metrics(objective, run)
        if new_batch:
            self.batch = runs[OBJECTIVES[0]].batch
            self._update_sample_labels(self.batch)
        target = runs[OBJECTIVES[0]].settings.target_kl
        self.target_line.set_visible(target is not None)
        self.target_text.set_visible(target is not None)
        if target is not None:
            self.target_line.set_ydata([target, target])
            self.target_text.set_y(target)
        self._place_end_labels()

    def _update_column(self, column: ObjectiveColumn, run: Run) -> None:
        band = ppo_clip.ratio_sweep([1.0], 1.0, run.settings.eps)
        column.band.set_y(band.lower)
        column.band.set_height(band.upper - band.lower)
        epochs = run.epochs
        arm_ratios = run.arm_ratios(self.bandit.k)
        silent = coasting(run, self.bandit.k)
        for arm, (line, markers) in enumerate(
            zip(column.arm_lines, column.coast_markers, strict=True)
        ):
            line.set_data(epochs, arm_ratios[:, arm])
            markers.set_data(epochs, _nan_where_not(arm_ratios[:, arm], silent[:, arm]))
        column.stop_line.set_visible(run.stopped_early)
        column.stop_text.set_visible(run.stopped_early)
        if run.stopped_early:
            column.stop_line.set_xdata([run.epochs_run, run.epochs_run])
            on_left = run.epochs_run < 0.4 * EPOCH_AXIS_MAX
            column.stop_text.set_horizontalalignment("left" if on_left else "right")
            column.stop_text.set_x(run.epochs_run + (0.4 if on_left else -0.4))
            column.stop_text.set_text(f"early stop:\nk3 KL {run.approx_kl[-1]:.3g}")
        for shade in column.not_run:
            _veil_after(shade, run.epochs_run)
        column.image.set_data(gradient_codes(run))
        extent = (-0.5, run.epochs_run + 0.5, run.batch.n - 0.5, -0.5)
        if column.image.get_extent() != list(extent):
            column.image.set_extent(extent)
        boundaries = np.cumsum(run.batch.arm_counts(self.bandit.k))[:-1] - 0.5
        for line, y in zip(column.separators, boundaries, strict=True):
            line.set_ydata([y, y])

    def _update_metrics(self, objective: str, run: Run) -> None:
        lines = self.metric_lines[objective]
        for name in ("zero_grad_fraction", "approx_kl", "exact_kl", "true_reward"):
            lines[name].set_data(run.epochs, getattr(run, name))

    def _update_sample_labels(self, batch: Batch) -> None:
        for t, label in enumerate(self._sample_labels):
            arm = int(batch.actions[t])
            label.set_text(f"#{t:<2d} arm {arm}  A {batch.advantages[t]:+.2f}")
            label.set_color(ARM_COLORS[arm])

    def _place_end_labels(self) -> None:
        """Each objective's final true reward, in its colour, in a fixed slot at the upper right."""
        for objective, run in self.runs.items():
            self.end_labels[objective].set_text(f"{run.true_reward[-1]:.3f}")


# --------------------------------------------------------------------------
# The app
# --------------------------------------------------------------------------


class SettingError(ValueError):
    """A setting out of range or not a number; ``setting`` names it as the controls do."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


def _readable_bound(bound: float) -> str:
    """``0.05``, ``4``, ``4,294,967,295``: never ``4.29497e+09``."""
    return f"{bound:,.0f}" if bound == int(bound) else f"{bound:g}"


def _check_setting(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SettingError(name, f"{name} must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise SettingError(
            name,
            f"{name} must be between {_readable_bound(low)} and {_readable_bound(high)}, "
            f"got {value!r}",
        )
    return number


def make_settings(
    eps: float = DEFAULT_EPS,
    step_size: float = DEFAULT_STEP_SIZE,
    n_epochs: int = DEFAULT_EPOCHS,
    seed: int = DEFAULT_SEED,
    target_kl: float | None = None,
) -> Settings:
    """Checked :class:`Settings`; raises :class:`SettingError` with a readable message."""
    eps = _check_setting("eps", eps, *EPS_RANGE)
    step_size = _check_setting("step size", step_size, *STEP_SIZE_RANGE)
    epochs = _check_setting("number of epochs", n_epochs, *EPOCHS_RANGE)
    if epochs != int(epochs):
        raise SettingError(
            "number of epochs", f"number of epochs must be a whole number, got {n_epochs!r}"
        )
    seed_number = _check_setting("batch seed", seed, *SEED_RANGE)
    if seed_number != int(seed_number):
        raise SettingError("batch seed", f"batch seed must be a whole number, got {seed!r}")
    target = None if target_kl is None else _check_setting("target KL", target_kl, *TARGET_KL_RANGE)
    return Settings(eps, step_size, int(epochs), int(seed_number), target)


def summary_rows(runs: dict[str, Run]) -> list[dict[str, Any]]:
    """One row of final numbers per objective (what the app's table shows)."""
    rows = []
    for objective, run in runs.items():
        rows.append(
            {
                "objective": OBJECTIVE_NAMES[objective],
                "epochs": run.epochs_run,
                "stopped_early": run.stopped_early,
                "largest_ratio": float(run.ratios.max()),
                "smallest_ratio": float(run.ratios.min()),
                "zero_grad_fraction": float(run.zero_grad_fraction[-1]),
                "approx_kl": float(run.approx_kl[-1]),
                "exact_kl": float(run.exact_kl[-1]),
                "true_reward": float(run.true_reward[-1]),
                "zero_grad": int(run.zero_grad[-1].sum()),
            }
        )
    return rows


#: Inline cell padding, so the summary table's columns never run together.
_CELL_STYLE = 'style="padding:3px 12px;border-bottom:1px solid #ddd"'


def summary_html(runs: dict[str, Run]) -> str:
    """An HTML table of :func:`summary_rows` (final values after the last epoch run)."""
    start = runs[OBJECTIVES[0]].true_reward[0]
    titles = (
        "objective",
        "epochs run",
        "ratios seen (min – max)",
        "samples with zero gradient (PPO: its clip fraction)",
        "KL: k3 / exact",
        f"true reward (start {start:.3f})",
    )
    head = "<tr>" + "".join(f"<th {_CELL_STYLE}>{html.escape(t)}</th>" for t in titles) + "</tr>"
    body = []
    for objective, row in zip(OBJECTIVES, summary_rows(runs), strict=True):
        stopped = " (early stop)" if row["stopped_early"] else ""
        color = OBJECTIVE_COLORS[objective]
        label = html.escape(row["objective"])
        name = f'<span style="color:{color};font-weight:bold">{label}</span>'
        cells = (
            name,
            f"{row['epochs']}{stopped}",
            f"{row['smallest_ratio']:.3f} – {row['largest_ratio']:.3f}",
            f"{row['zero_grad']} of {runs[objective].batch.n} ({row['zero_grad_fraction']:.3f})",
            f"{row['approx_kl']:.4f} / {row['exact_kl']:.4f}",
            f"{row['true_reward']:.3f}",
        )
        body.append("<tr>" + "".join(f"<td {_CELL_STYLE}>{c}</td>" for c in cells) + "</tr>")
    return (
        '<table class="ppo-epochs-table" style="font-family:sans-serif;font-size:13px;'
        'border-collapse:collapse;text-align:right">'
        f"{head}{''.join(body)}</table>"
    )


class EpochsExplorer(App):
    """Controls for eps, step size, epochs, batch seed and early stop over :class:`EpochsFigure`.

    Every change re-trains the three objectives (cached per settings) and
    updates the figure and the summary table in place.  A bad entry shows a
    message and keeps the last good run on screen.
    """

    description = "Several epochs of PPO on one batch: three objectives side by side"

    def __init__(
        self,
        eps: float = DEFAULT_EPS,
        step_size: float = DEFAULT_STEP_SIZE,
        n_epochs: int = DEFAULT_EPOCHS,
        seed: int = DEFAULT_SEED,
        target_kl: float | None = None,
    ) -> None:
        self.settings = make_settings(eps, step_size, n_epochs, seed, target_kl)
        self.plot = EpochsFigure(self.settings)
        self.view = FigureView(self.plot.figure)
        self.view.animate(self.plot.animated_artists())
        self._build_controls()
        self.message = widgets.HTML()
        self.message.add_class("ppo-error")
        self.summary = widgets.HTML()
        self.summary.add_class("ppo-epochs-summary")
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.eps, self.step_size]),
                widgets.HBox([self.epochs, self.seed]),
                widgets.HBox([self.early_stop, self.target_kl]),
                self.message,
                self.summary,
                self.view.output,
            ]
        )
        for control in self._controls():
            control.observe(self._on_change, names="value")
        self._show(self.settings)

    @property
    def runs(self) -> dict[str, Run]:
        """The three runs on screen."""
        return self.plot.runs

    def _build_controls(self) -> None:
        s = self.settings
        style = {"description_width": "120px"}
        layout = widgets.Layout(width="420px")
        self.eps = widgets.FloatSlider(
            value=s.eps,
            min=EPS_RANGE[0],
            max=EPS_RANGE[1],
            step=0.01,
            description="ε (clip size)",
            readout_format=".2f",
            style=style,
            layout=layout,
        )
        self.step_size = widgets.FloatSlider(
            value=s.step_size,
            min=STEP_SIZE_RANGE[0],
            max=STEP_SIZE_RANGE[1],
            step=0.05,
            description="step size",
            readout_format=".2f",
            style=style,
            layout=layout,
        )
        self.epochs = widgets.IntSlider(
            value=s.n_epochs,
            min=EPOCHS_RANGE[0],
            max=EPOCHS_RANGE[1],
            step=1,
            description="epochs",
            style=style,
            layout=layout,
            continuous_update=True,  # the axis is fixed: a new value redraws in ~35 ms
        )
        self.seed = widgets.IntText(
            value=s.seed,
            description="batch seed",
            style=style,
            layout=layout,
            continuous_update=False,  # one redraw on Enter, not one per digit typed
        )
        self.early_stop = widgets.Checkbox(
            value=s.target_kl is not None,
            description="stop early when k3 KL > target",
            indent=False,
            layout=widgets.Layout(width="420px", margin="0 0 0 8px"),
        )
        self.target_kl = widgets.FloatLogSlider(
            value=s.target_kl or DEFAULT_TARGET_KL,
            base=10,
            min=math.log10(TARGET_KL_RANGE[0]),
            max=math.log10(TARGET_KL_RANGE[1]),
            step=0.05,
            description="target KL",
            readout_format=".3f",
            style=style,
            layout=layout,
            disabled=s.target_kl is None,
        )
        for control, name in (
            (self.eps, "eps"),
            (self.step_size, "step-size"),
            (self.epochs, "epochs"),
            (self.seed, "seed"),
            (self.early_stop, "early-stop"),
            (self.target_kl, "target-kl"),
        ):
            control.add_class("ppo-main-slider")
            control.add_class(f"ppo-epochs-{name}")

    def _controls(self) -> list[widgets.Widget]:
        return [self.eps, self.step_size, self.epochs, self.seed, self.early_stop, self.target_kl]

    def _on_change(self, _change: Any = None) -> None:
        self.target_kl.disabled = not self.early_stop.value
        try:
            settings = make_settings(
                self.eps.value,
                self.step_size.value,
                self.epochs.value,
                self.seed.value,
                self.target_kl.value if self.early_stop.value else None,
            )
        except SettingError as error:
            self.message.value = message_html(
                f"{error}. The figure still shows the last valid settings. "
                f"Fix the {error.setting} to apply other changes."
            )
            return
        self._show(settings)

    def _show(self, settings: Settings) -> None:
        self.message.value = ""
        runs = run_all(settings)
        self.plot.set_epochs(settings.n_epochs)
        self.plot.update(runs)
        self.settings = settings
        self.summary.value = summary_html(runs)
        self.view.refresh()

    def static_fallback(self) -> dict[str, Any]:
        return {"png": self.view.last_png or figure_to_png(self.plot.figure)}
