"""Per-token ratios against the sequence ratio: :class:`TokenRatioExplorer`.

A response's ratio is the product of its tokens' ratios.  Each token's ratio
may be close to 1 while their product is far outside the clip band, or
overflows.  :class:`TokenRatioFigure` shows, for the first ``length`` tokens
of a synthetic response at a given policy shift:

* top: each token's ratio (dots, stretched axis) and their geometric mean;
* bottom left: the log of the sequence ratio as the response grows, with the
  float32 and float64 overflow levels;
* bottom right: over 64 responses, how often the sequence ratio and a
  single token's ratio leave the band, by length.

:class:`TokenRatioExplorer` adds sliders for the length and the shift and a
readout of the exact numbers.  Every value comes from :mod:`ppo_clip`
through :func:`~ppo_viz.numerics.response.token_view` and
:func:`~ppo_viz.numerics.response.length_survey`.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import ArrayLike, NDArray

import ppo_clip
from ppo_viz.app import App, InputError, slider
from ppo_viz.html import Markup, table, tag
from ppo_viz.numbers import rounded
from ppo_viz.numerics.layers import drawn_below_the_data
from ppo_viz.numerics.response import (
    EPS,
    FLOAT32_EXP_LIMIT,
    FLOAT64_EXP_LIMIT,
    MAX_SHIFT,
    MAX_TOKENS,
    SURVEY_RESPONSES,
    TOKEN_AXIS,
    LengthSurvey,
    SyntheticResponse,
    TokenView,
    length_survey,
    synthetic_response,
    token_view,
)
from ppo_viz.style import COLORS, SLIDE_SIZE, figure_style

FloatArray = NDArray[np.float64]

#: Fixed axis ranges (they never move with the sliders).  A token's ratio is
#: at most 1 / (its old probability) <= 1 / 0.03 whatever the shift, and the
#: smallest ratios (shift 0) stay above 0.7.
TOKEN_RATIO_LIMITS = (0.6, 36.0)
LOG_RATIO_LIMITS = (-40.0, 1500.0)
#: The token panel's ratio axis is ``asinh(log(r) / TOKEN_STRETCH)``: logarithmic
#: for large ratios, stretched near r = 1, so the band and the ratios around it
#: are as easy to read at shift 0 as the large ratios are at the largest shift.
TOKEN_STRETCH = 0.5
#: The figure's size on screen (it has three panels, so it is taller than most).
SCREEN_FIGURE_SIZE = (10.0, 7.0)
#: Colours, from the palette: no objective is drawn here, so the ratios borrow
#: the objectives' blue (inside the band) and vermillion (outside it), the mean
#: the samples' green; thresholds are black and grey, told apart by line style.
RATIO_COLOR = COLORS["clipped"]
OUTSIDE_COLOR = COLORS["unclipped"]
MEAN_COLOR = COLORS["sample"]
FLOAT32_STYLE = {"color": COLORS["threshold_alt"], "ls": "--"}
FLOAT64_STYLE = {"color": COLORS["threshold"], "ls": ":"}


def stretch_ratio(ratio: ArrayLike) -> FloatArray:
    """The token panel's axis transform: ``asinh(log(r) / TOKEN_STRETCH)`` (monotonic)."""
    r = np.maximum(np.asarray(ratio, dtype=np.float64), np.finfo(np.float64).tiny)
    return np.arcsinh(np.log(r) / TOKEN_STRETCH)


def unstretch_ratio(position: ArrayLike) -> FloatArray:
    """The inverse of :func:`stretch_ratio`."""
    with np.errstate(over="ignore"):
        return np.exp(TOKEN_STRETCH * np.sinh(np.asarray(position, dtype=np.float64)))


class TokenRatioFigure:
    """Per-token ratios (top), the sequence log-ratio (bottom left), the survey (bottom right).

    :meth:`show` moves the artists to a :class:`TokenView` and a
    :class:`LengthSurvey`; the axes never move.  With ``slides=True`` the
    figure is 16:9 with larger type.
    """

    def __init__(
        self, response: SyntheticResponse | None = None, eps: float = EPS, *, slides: bool = False
    ) -> None:
        self.response = response or synthetic_response()
        self.eps = eps
        self.lower, self.upper = ppo_clip.clip_band(eps)
        with figure_style(slides):
            self.figure = Figure(
                figsize=SLIDE_SIZE if slides else SCREEN_FIGURE_SIZE, layout="constrained"
            )
            grid = self.figure.add_gridspec(2, 2, height_ratios=(1.0, 1.1))
            self.tokens_ax = self.figure.add_subplot(grid[0, :])
            self.running_ax = self.figure.add_subplot(grid[1, 0])
            self.survey_ax = self.figure.add_subplot(grid[1, 1])
            self._draw_tokens_axes(self.tokens_ax)
            self._draw_running_axes(self.running_ax)
            self._draw_survey_axes(self.survey_ax, slides)
        #: The values on show (set by :meth:`show`).
        self.view: TokenView | None = None
        self.survey: LengthSurvey | None = None

    def _draw_tokens_axes(self, ax: Axes) -> None:
        ax.set_yscale("function", functions=(stretch_ratio, unstretch_ratio))
        band = ax.axhspan(
            self.lower,
            self.upper,
            color=COLORS["band"],
            alpha=0.3,
            lw=0,
            label=f"clip band [{rounded(self.lower)}, {rounded(self.upper)}]",
        )
        ax.axhline(1.0, color=COLORS["start"], ls=":", lw=1.0)
        (self.token_points,) = ax.plot(
            [], [], ".", ms=4, color=RATIO_COLOR, label="per-token ratio"
        )
        (self.token_outside,) = ax.plot(
            [], [], ".", ms=5, color=OUTSIDE_COLOR, label="per-token ratio outside the band"
        )
        (self.geometric_line,) = ax.plot(
            [], [], color=MEAN_COLOR, lw=2.4, label="geometric mean of the per-token ratios"
        )
        ticks = sorted({0.6, self.lower, 1.0, self.upper, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0})
        ax.set_yticks(ticks, [rounded(tick) for tick in ticks])
        ax.minorticks_off()
        ax.set(
            xlim=TOKEN_AXIS,
            ylim=TOKEN_RATIO_LIMITS,
            xlabel="token position t",
            ylabel="π_new / π_old of token t",
        )
        # Above the axes, so no dot is ever hidden behind it.
        legend = ax.legend(
            handles=[self.token_points, self.token_outside, self.geometric_line, band],
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncols=4,
            fontsize="small",
            frameon=False,
        )
        ax.set_title(
            "Each token's ratio (dots) and their geometric mean (green line); "
            "axis stretched around 1",
            pad=2.95 * legend.get_texts()[0].get_fontsize(),  # room for the legend, in points
        )
        drawn_below_the_data(legend, ax.title)

    def _draw_running_axes(self, ax: Axes) -> None:
        ax.set_yscale("symlog", linthresh=1.0)
        ax.axhspan(
            math.log(self.lower),
            math.log(self.upper),
            color=COLORS["band"],
            alpha=0.45,
            lw=0,
            label="clip band (as a log-ratio)",
        )
        for limit, name, style, lw in (
            (FLOAT32_EXP_LIMIT, "float32", FLOAT32_STYLE, 1.4),
            (FLOAT64_EXP_LIMIT, "float64", FLOAT64_STYLE, 1.8),
        ):
            ax.axhline(limit, lw=lw, label=f"{name} overflow ({limit:.2f})", **style)
        (self.running_line,) = ax.plot(
            [], [], color=RATIO_COLOR, lw=2.0, label="log of the sequence ratio"
        )
        (self.running_end,) = ax.plot([], [], "o", color=RATIO_COLOR, ms=7)
        ax.set_yticks([-10, -1, 0, 1, 10, 100, 1000], ["−10", "−1", "0", "1", "10", "100", "1000"])
        ax.set(
            xlim=TOKEN_AXIS,
            ylim=LOG_RATIO_LIMITS,
            xlabel="tokens so far",
            ylabel="Σ log π_new − Σ log π_old",
            title="The log of the sequence ratio, token by token",
        )
        ax.legend(loc="lower right", fontsize="small")
        drawn_below_the_data(ax.title)

    def _draw_survey_axes(self, ax: Axes, slides: bool) -> None:
        separator = "\n" if slides else " "  # on a slide, the larger type needs two lines
        (self.survey_sequence,) = ax.plot(
            [], [], color=RATIO_COLOR, lw=2.4, label="sequence ratio outside the band"
        )
        (self.survey_tokens,) = ax.plot(
            [], [], color=MEAN_COLOR, lw=2.0, label="per-token ratios outside the band"
        )
        (self.survey_f32,) = ax.plot(
            [], [], lw=1.6, label="sequence ratio overflows float32", **FLOAT32_STYLE
        )
        (self.survey_f64,) = ax.plot(
            [], [], lw=1.8, label="sequence ratio overflows float64", **FLOAT64_STYLE
        )
        # Above the curves (z-order 2) and below the legend (5): moving it with the
        # length leaves the curves, which change only with the shift, out of the redraw.
        self.survey_marker = ax.axvline(0.0, color=COLORS["guide"], lw=1.0, alpha=0.6, zorder=2.5)
        ax.set(
            xlim=TOKEN_AXIS,
            ylim=(-3, 103),
            xlabel="response length (tokens)",
            ylabel=f"% of {SURVEY_RESPONSES} responses{separator}(or of their tokens)",
            title=f"{SURVEY_RESPONSES} responses, same policy change",
        )
        ax.legend(loc="center right", fontsize="small")
        drawn_below_the_data(ax.title)

    def show(self, view: TokenView, survey: LengthSurvey) -> None:
        """Draw ``view`` (one response's first tokens) and ``survey`` (the 64 responses)."""
        positions = np.arange(1, view.length + 1)
        ratios, outside = view.tokens.ratio, view.tokens.outside_band
        self.token_points.set_data(positions[~outside], ratios[~outside])
        self.token_outside.set_data(positions[outside], ratios[outside])
        self.geometric_line.set_data([0.5, view.length + 0.5], [view.geometric_mean] * 2)
        shown = np.clip(view.running_log_ratio, *LOG_RATIO_LIMITS)
        self.running_line.set_data(positions, shown)
        self.running_end.set_data([view.length], [shown[-1]])
        if survey is not self.survey:
            self.survey_sequence.set_data(survey.lengths, 100 * survey.sequence_outside)
            self.survey_tokens.set_data(survey.lengths, 100 * survey.token_outside)
            self.survey_f32.set_data(survey.lengths, 100 * survey.float32_overflow)
            self.survey_f64.set_data(survey.lengths, 100 * survey.float64_overflow)
        self.survey_marker.set_xdata([view.length, view.length])
        self.view, self.survey = view, survey


class TokenRatioExplorer(App):
    """Sliders for the response length and the policy shift over :class:`TokenRatioFigure`."""

    description = "Per-token ratios versus the sequence ratio of a synthetic response"
    slide_name = "ppo_token_ratios"

    def __init__(self, length: int = MAX_TOKENS, shift: float = 0.0) -> None:
        checked_settings(length, shift)
        self.response = synthetic_response()
        self.length = slider(
            "response length", length, (1, MAX_TOKENS), 1, name="length", integer=True
        )
        self.shift = slider("policy shift (log-odds)", shift, (0.0, MAX_SHIFT), 0.05, name="shift")
        self.readout = widgets.HTML()
        super().__init__(controls=[[self.length, self.shift]], readouts=[self.readout])

    def make_plot(self, slides: bool) -> TokenRatioFigure:
        return TokenRatioFigure(self.response, slides=slides)

    def draw(self, plot: TokenRatioFigure) -> None:
        length, shift = checked_settings(self.length.value, self.shift.value)
        view = token_view(plot.response, length, shift, plot.eps)
        plot.show(view, length_survey(shift, plot.eps))

    def update_readouts(self) -> None:
        if self.plot.view is not None:
            self.readout.value = token_readout_html(self.plot.view)


def checked_settings(length: object, shift: object) -> tuple[int, float]:
    """``(length, shift)`` if the token app can show them, else an :class:`InputError`."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
        raise InputError(f"The response length must be a whole number of tokens, not {length!r}.")
    if not 1 <= length <= MAX_TOKENS:
        raise InputError(
            f"The response length must be from 1 to {MAX_TOKENS} tokens, not {length}."
        )
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or math.isnan(shift):
        raise InputError(f"The policy shift must be a number, not {shift!r}.")
    if not 0.0 <= shift <= MAX_SHIFT:
        raise InputError(
            f"The policy shift must be from 0 to {rounded(MAX_SHIFT)} log-odds per token "
            f"(the axes are fixed for that range), not {rounded(shift)}."
        )
    return int(length), float(shift)


# --------------------------------------------------------------------------
# The readout
# --------------------------------------------------------------------------


def sequence_verdict(view: TokenView) -> str:
    """What clipping does with the sequence ratio, for A > 0 and for A < 0 (from ppo_clip).

    Outside the band the sign of A decides: on the favourable side the sample
    is clipped (zero gradient); on the other side it keeps ``-r*A/N``, scaled
    down by ``r`` below the band and up by ``r`` above it (``+inf`` loss once
    ``r`` overflows with A < 0).
    """
    band = f"[{rounded(view.sequence.lower)}, {rounded(view.sequence.upper)}]"
    if not view.sequence.outside_band[0]:
        return f"inside {band}: not clipped for either sign of A"
    ratio = view.sequence_ratio
    verdicts = []
    for sign, breakdown in (("A > 0", view.sequence), ("A < 0", view.sequence_negative)):
        if breakdown.is_clipped[0]:
            verdicts.append(f"with {sign} clipped (zero gradient)")
        elif math.isinf(breakdown.loss):
            verdicts.append(f"with {sign} not clipped: the loss is {rounded(breakdown.loss)}")
        else:
            scaled = "down" if ratio < 1.0 else "up"
            verdicts.append(
                f"with {sign} not clipped (an unfavourable move): its gradient −r·A/N is "
                f"scaled {scaled} by r = {rounded(ratio)}"
            )
    return f"outside {band}: " + "; ".join(verdicts)


def log_ratio_verdict(log_ratio: float) -> str:
    """The sequence log-ratio and whether ``exp`` of it overflows float32 or float64."""
    if log_ratio > FLOAT64_EXP_LIMIT:
        verdict = f"above {FLOAT64_EXP_LIMIT:.2f}: exp overflows in float64 and float32"
    elif log_ratio > FLOAT32_EXP_LIMIT:
        verdict = f"above {FLOAT32_EXP_LIMIT:.2f}: exp would overflow in float32"
    else:
        verdict = f"below {FLOAT32_EXP_LIMIT:.2f}: no overflow"
    return f"{rounded(log_ratio, 5)} ({verdict})"


def token_readout_html(view: TokenView) -> Markup:
    """The token app's numbers as a two-column table (all from :mod:`ppo_clip`)."""
    share = rounded(100 * view.tokens_outside / view.length, 3)
    rows = [
        ("sequence log-probability, old policy", f"Σ log π_old = {rounded(view.logp_old_sum, 5)}"),
        ("sequence log-probability, new policy", f"Σ log π_new = {rounded(view.logp_new_sum, 5)}"),
        ("log of the sequence ratio", log_ratio_verdict(view.log_ratio)),
        (
            "sequence ratio exp(Σ log π_new − Σ log π_old)",
            f"{rounded(view.sequence_ratio)}: {sequence_verdict(view)}",
        ),
        ("product of the per-token ratios", rounded(view.product)),
        ("geometric mean of the per-token ratios", rounded(view.geometric_mean, 5)),
        (
            "per-token ratios outside the band",
            f"{view.tokens_outside} of {view.length} ({share} %)",
        ),
    ]
    return tag(
        "div",
        table(
            (f"the first {view.length} tokens of the response", ""),
            [(name, tag("b", value)) for name, value in rows],
            classes="ppo-key-value",
        ),
        classes="ppo",
    )
