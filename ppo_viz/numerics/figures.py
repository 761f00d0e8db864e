"""Notebook 5's figure and apps, every value drawn from :mod:`.model` (so from ppo_clip).

:func:`response_figure` shows where -1000 comes from; :class:`TokenRatioExplorer` compares
per-token and sequence ratios; :class:`VariantsExplorer` shows asymmetric bounds ("clip-higher",
DAPO, arXiv 2503.14476) and the dual-clip cap (Ye et al. 2020, arXiv 1912.09729).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

import ppo_clip
from ppo_viz.app import InputError, LiveFigure
from ppo_viz.controls import checkbox, checked_number, slider
from ppo_viz.html import Markup
from ppo_viz.numbers import rounded
from ppo_viz.numerics import model, text
from ppo_viz.panels import legend_entries, objective_figure
from ppo_viz.style import COLORS, figure_style

#: The token-position axis of every figure of a response.
TOKEN_AXIS = (-10.0, model.MAX_TOKENS + 10.0)


def response_figure(response: model.SyntheticResponse | None = None) -> Figure:
    """Per-token log-probabilities of a response (left) and their running sum (right).

    A plain matplotlib ``Figure``: a notebook shows it once, as a picture.
    """
    response = model.synthetic_response() if response is None else response
    if not isinstance(response, model.SyntheticResponse):
        raise TypeError(f"response must be a SyntheticResponse, got {type(response).__name__}")
    n, running, colour = len(response.logp_old), np.cumsum(response.logp_old), COLORS["clipped"]
    with figure_style():
        figure = Figure(figsize=(9.0, 3.4), layout="constrained")
        left, right = figure.subplots(1, 2, width_ratios=(1.0, 1.25))
        left.plot(np.arange(1, n + 1), response.logp_old, ".", ms=2.5, color=colour, alpha=0.7)
        left.set(xlim=(-10, n + 10), ylim=(-4.0, 0.2), xlabel="token position t")
        left.set(ylabel="log π_old(token t | earlier tokens)", title="Each token's log-probability")
        right.plot(np.arange(1, n + 1), running, color=colour, lw=2.2, label="sum of the first t")
        end = f"{rounded(running[-1])} after {n} tokens"
        right.plot([n], [running[-1]], "o", color=colour, label=end)
        right.axhline(-1000.0, color=COLORS["threshold"], ls="--", lw=1.3, label="contract floor")
        right.set(xlim=(0, n * 1.02), ylim=(min(-1080.0, running[-1] - 80), 30.0))
        right.set(xlabel="response length (tokens)", ylabel="log π_old(response)")
        right.set_title("The response: the sum of its tokens' log-probabilities")
        right.legend(loc="lower left")
    return figure


#: Fixed ranges: a token's ratio is at most 1 / 0.03 whatever the shift, and above 0.7.
TOKEN_RATIO_LIMITS = (0.6, 36.0)
LOG_RATIO_LIMITS = (-40.0, 1500.0)
#: The token panel's ratio axis is ``asinh(log(r) / TOKEN_STRETCH)``: logarithmic for large
#: ratios and stretched near r = 1, so the band is as easy to read as the large ratios.
TOKEN_STRETCH = 0.5
#: The objectives' blue (inside the band) and vermillion (outside), the samples' green for
#: the mean; the overflow levels are black and grey, told apart by line style.
FLOAT32_STYLE = {"color": COLORS["threshold_alt"], "ls": "--", "lw": 1.6}
FLOAT64_STYLE = {"color": COLORS["threshold"], "ls": ":", "lw": 1.6}
BELOW_AXES = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.22)}


def stretch_ratio(ratio: ArrayLike) -> np.ndarray:
    """The token panel's axis transform, ``asinh(log(r) / TOKEN_STRETCH)`` (monotonic)."""
    r = np.maximum(np.asarray(ratio, dtype=np.float64), np.finfo(np.float64).tiny)
    return np.arcsinh(np.log(r) / TOKEN_STRETCH)


def unstretch_ratio(position: ArrayLike) -> np.ndarray:
    """The inverse of :func:`stretch_ratio`."""
    with np.errstate(over="ignore"):
        return np.exp(TOKEN_STRETCH * np.sinh(np.asarray(position, dtype=np.float64)))


def tokens_panel(ax: Axes, band: tuple[float, float]) -> dict[str, Artist]:
    """Each token's ratio on an axis stretched around 1, and their geometric mean."""
    ax.set_yscale("function", functions=(stretch_ratio, unstretch_ratio))
    label = f"clip band [{rounded(band[0])}, {rounded(band[1])}]"
    ax.axhspan(*band, color=COLORS["band"], alpha=0.3, lw=0, label=label)
    ax.axhline(1.0, color=COLORS["start"], ls=":", lw=1.0)
    blue, vermillion, green = COLORS["clipped"], COLORS["unclipped"], COLORS["sample"]
    artists = {
        "ratios_inside": ax.plot([], [], ".", ms=4, color=blue, label="per-token ratio")[0],
        "ratios_outside": ax.plot([], [], ".", ms=5, color=vermillion, label="outside the band")[0],
        "geometric_mean": ax.plot([], [], color=green, lw=2.4, label="geometric mean")[0],
    }
    ticks = sorted({0.6, *band, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0})
    ax.set_yticks(ticks, [rounded(tick) for tick in ticks])
    ax.minorticks_off()
    ax.set(xlim=TOKEN_AXIS, ylim=TOKEN_RATIO_LIMITS, xlabel="token position t")
    ax.set_ylabel("π_new / π_old of token t\n(axis stretched around 1)")
    # Above the axes: the legend says what the panel shows, and hides no dot.
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=4, frameon=False)
    return artists


def running_panel(ax: Axes, band: tuple[float, float]) -> dict[str, Artist]:
    """The log of the sequence ratio as the response grows, with the overflow levels."""
    ax.set_yscale("symlog", linthresh=1.0)
    log_band = (math.log(band[0]), math.log(band[1]))
    ax.axhspan(*log_band, color=COLORS["band"], alpha=0.45, lw=0, label="clip band (log-ratio)")
    for limit, name, style in (
        (model.FLOAT32_EXP_LIMIT, "float32", FLOAT32_STYLE),
        (model.FLOAT64_EXP_LIMIT, "float64", FLOAT64_STYLE),
    ):
        ax.axhline(limit, label=f"{name} overflow ({limit:.2f})", **style)
    blue = COLORS["clipped"]
    artists = {
        "running": ax.plot([], [], color=blue, lw=2.0, label="log of the sequence ratio")[0],
        "running_end": ax.plot([], [], "o", color=blue, ms=7)[0],
    }
    ax.set_yticks([-10, -1, 0, 1, 10, 100, 1000], ["−10", "−1", "0", "1", "10", "100", "1000"])
    ax.set(xlim=TOKEN_AXIS, ylim=LOG_RATIO_LIMITS, xlabel="tokens so far")
    ax.set(ylabel="Σ log π_new − Σ log π_old", title="The sequence's log-ratio, token by token")
    ax.legend(**BELOW_AXES)
    return artists


def survey_panel(ax: Axes) -> dict[str, Artist]:
    """Over the survey's responses: how often a sequence's ratio, or a token's, leaves the band."""
    blue, green = COLORS["clipped"], COLORS["sample"]
    artists = {
        "sequence_outside": ax.plot([], [], color=blue, lw=2.4, label="sequences outside")[0],
        "token_outside": ax.plot([], [], color=green, lw=2.0, label="tokens outside")[0],
        "float32_overflow": ax.plot([], [], label="sequences past float32", **FLOAT32_STYLE)[0],
        "float64_overflow": ax.plot([], [], label="sequences past float64", **FLOAT64_STYLE)[0],
        "length_marker": ax.axvline(0.0, color=COLORS["guide"], lw=1.0, alpha=0.6),
    }
    ax.set(xlim=TOKEN_AXIS, ylim=(-3, 103), ylabel="% of responses (or of tokens)")
    ax.set(xlabel="response length", title=f"{model.SURVEY_RESPONSES} responses, same shift")
    ax.legend(**BELOW_AXES)
    return artists


class TokenRatioExplorer(LiveFigure):
    """Per-token ratios against the sequence ratio, with sliders for the length and the shift.

    Top: each token's ratio of the first ``length`` tokens of a synthetic response, and their
    geometric mean.  Bottom left: the log of the sequence ratio, token by token.  Bottom right:
    over 64 responses with the same shift, how often the sequence ratio and a token's ratio
    leave the band, by length.  :attr:`artists` holds every artist the sliders move, and
    :attr:`view` the :class:`~ppo_viz.numerics.model.TokenView` on show.
    """

    description = "Per-token ratios versus the sequence ratio of a synthetic response"

    def __init__(self, length: int = model.MAX_TOKENS, shift: float = 0.0) -> None:
        n = model.MAX_TOKENS
        checked_number("length", length, (1, n), whole=True)
        checked_number("shift", shift, (0.0, model.MAX_SHIFT))
        self.response = model.synthetic_response()
        band = ppo_clip.clip_band(model.EPS)
        with figure_style():
            figure = Figure(figsize=(9.0, 7.0), layout="constrained")
            grid = figure.add_gridspec(2, 2, height_ratios=(1.0, 1.1))
            self.artists = {
                **tokens_panel(figure.add_subplot(grid[0, :]), band),
                **running_panel(figure.add_subplot(grid[1, 0]), band),
                **survey_panel(figure.add_subplot(grid[1, 1])),
            }
        controls = {
            "length": slider("response length", int(length), (1, n), 1, integer=True),
            "shift": slider("policy shift (log-odds)", shift, (0.0, model.MAX_SHIFT), 0.05),
        }
        moving = self.artists.values()
        rows = [["length", "shift"]]
        super().__init__(figure, self.show_tokens, controls, moving=moving, rows=rows)

    def show_tokens(self, length: int, shift: float) -> Markup:
        """Draw the first ``length`` tokens and the survey at ``shift``; return the readout."""
        try:  # the axes are fixed for the sliders' ranges
            checked_number("the policy shift (log-odds per token)", shift, (0, model.MAX_SHIFT))
            view = model.token_view(self.response, length, shift)
        except (TypeError, ValueError) as error:
            raise InputError(f"Cannot show this setting: {error}.") from None
        survey = model.length_survey(shift)
        art, positions = self.artists, np.arange(1, length + 1)
        ratios, outside = view.tokens.ratio, view.tokens.outside_band
        art["ratios_inside"].set_data(positions[~outside], ratios[~outside])
        art["ratios_outside"].set_data(positions[outside], ratios[outside])
        art["geometric_mean"].set_data([0.5, length + 0.5], [view.geometric_mean] * 2)
        running = np.clip(view.running_log_ratio, *LOG_RATIO_LIMITS)
        art["running"].set_data(positions, running)
        art["running_end"].set_data([length], [running[-1]])
        for name in ("sequence_outside", "token_outside", "float32_overflow", "float64_overflow"):
            art[name].set_data(survey["lengths"], 100 * survey[name])
        art["length_marker"].set_xdata([length, length])
        self.view = view
        return text.token_readout_html(view)


#: The ratio axis: wider than notebook 1's, so that verl's default dual-clip cap c = 3 shows
#: (``clip_ratio_c`` in ``verl/trainer/ppo/core_algos.py`` at commit b178a3c).
VARIANT_R_AXIS = (0.0, 4.0)
#: Fixed y reach of the panels for A = +1 and A = -1.
VARIANT_REACH = 4.2
#: DAPO's "clip-higher" bounds (verl's ``recipe/dapo/run_dapo_qwen2.5_32b.sh``, commit
#: e2e729f) and verl's default cap.
DEFAULT_EPS_LOW, DEFAULT_EPS_HIGH, DEFAULT_CAP = 0.2, 0.28, 3.0
#: The cap slider stops short of the axis' end, so that the flat part always shows.
CAP_RANGE = (1.05, VARIANT_R_AXIS[1] - 0.1)


class VariantsExplorer(LiveFigure):
    """Notebook 1's panels for A = +1 and A = -1 with asymmetric bounds and a dual-clip cap.

    Each column is :func:`ppo_viz.panels.draw_objective_panel`, drawn from
    :func:`ppo_clip.ratio_sweep` with ``eps_low``, ``eps_high`` and ``dual_clip``; the panels
    shade the dual-clip region (A < 0, r > c), and a dash-dot line marks r = c.  Sliders set
    the bounds and the cap, a checkbox switches the cap off.
    """

    description = "PPO's clipped objective with asymmetric bounds and a dual-clip cap"

    def __init__(
        self,
        eps_low: float = DEFAULT_EPS_LOW,
        eps_high: float = DEFAULT_EPS_HIGH,
        dual_clip: float | None = DEFAULT_CAP,
    ) -> None:
        checked_number("eps_low", eps_low, (0.0, 1.0))
        checked_number("eps_high", eps_high, (0.0, 1.0))
        if dual_clip is not None:
            checked_number("dual_clip", dual_clip, CAP_RANGE)
        self.cap_lines: dict[int, list[Artist]] = {}
        self.sweeps: dict[int, ppo_clip.ClipBreakdown] = {}
        with figure_style():
            figure, self.columns = objective_figure((9.0, 6.6), VARIANT_R_AXIS, reach=VARIANT_REACH)
            cap = {"color": COLORS["threshold"], "ls": "-.", "lw": 1.5}
            titles = {+1: "A = +1: better than expected", -1: "A = −1: worse than expected"}
            for sign, panel in self.columns.items():
                panel.objective_ax.set_title(titles[sign])
                axes = (panel.objective_ax, panel.gradient_ax)
                self.cap_lines[sign] = [ax.axvline(np.nan, **cap) for ax in axes]
            entries = dict(zip(*legend_entries(self.columns[-1]), strict=True))
            del entries[self.columns[-1].samples[0]]  # no worked-example points here
            entries[self.columns[-1].objective] = "PPO with the variant, and its gradient"
            entries[self.columns[-1].bands[0]] = "clip band [1 − ε_low, 1 + ε_high]"
            entries[self.cap_lines[-1][0]] = "dual-clip cap r = c"
            figure.legend(*zip(*entries.items(), strict=True), loc="outside lower center", ncols=2)
        cap = DEFAULT_CAP if dual_clip is None else dual_clip
        controls = {
            "eps_low": slider("ε_low (lower bound)", eps_low, (0.0, 1.0), 0.01),
            "eps_high": slider("ε_high (upper bound)", eps_high, (0.0, 1.0), 0.01),
            "cap": slider("dual-clip cap c", cap, CAP_RANGE, 0.05),
            "cap_on": checkbox("dual clip on", dual_clip is not None),
        }
        moving = [a for s, p in self.columns.items() for a in (*p.moving, *self.cap_lines[s])]
        rows = [["eps_low", "eps_high"], ["cap", "cap_on"]]
        super().__init__(figure, self.show_variant, controls, moving=moving, rows=rows)

    def show_variant(self, eps_low: float, eps_high: float, cap: float, cap_on: bool) -> Markup:
        """Redraw both columns for the bounds and the cap (off unless ``cap_on``); the readout."""
        try:
            ppo_clip.clip_band(model.EPS, eps_low, eps_high)
            if cap_on:
                checked_number("the dual-clip cap", cap, CAP_RANGE)
        except (TypeError, ValueError) as error:
            raise InputError(f"Could not use these settings: {error}.") from None
        self.controls["cap"].disabled = not cap_on
        variant = {"eps_low": eps_low, "eps_high": eps_high, "dual_clip": cap if cap_on else None}
        for sign, panel in self.columns.items():
            self.sweeps[sign] = panel.update(float(sign), model.EPS, **variant)
            cap_x = cap if (cap_on and sign < 0) else np.nan
            for line in self.cap_lines[sign]:
                line.set_xdata([cap_x, cap_x])
        return text.variants_readout_html(self.sweeps)
