"""Numerics and the RLHF setting (notebook 5).

In RLHF the "action" is a response of hundreds of tokens and its
log-probability is the sum of the tokens' log-probabilities, so it easily
reaches -1000.  This package builds notebook 5's figures, demos and apps:

* :mod:`.response`: a seeded, synthetic response (no model involved) whose
  per-token log-probabilities add up to about -1000, its figure
  (:func:`response_figure`), and the per-token and sequence ratios the token
  app shows (:func:`token_view`, :func:`length_survey`);
* :mod:`.demos`: a batch whose ratio overflows to ``inf``, where the naive
  formula returns NaN and :mod:`ppo_clip` the right loss
  (:func:`overflow_demo`), and a ratio exactly on ``1 + eps`` in float64
  (:func:`boundary_demo`) and in float32 (:func:`float32_boundary_demo`);
* :mod:`.clip_effects`: what the clip does to a response's ratio outside the
  band, for either sign of the advantage (:func:`outside_band_demo`), and why
  the upper bound does not cap a rare token's probability
  (:func:`rare_token_demo`);
* :mod:`.tokens`: :class:`TokenRatioExplorer`, per-token ratios, their
  product (the sequence ratio) and their geometric mean, with sliders for the
  response length and a policy shift;
* :mod:`.variants`: :class:`VariantsExplorer`, asymmetric bounds and the
  dual-clip cap on notebook 1's panels.

Every ratio, clip decision, loss and gradient shown comes from
:mod:`ppo_clip`; the only exceptions are the functions named ``naive_*``,
which exist to show how a careless implementation fails.
"""

from ppo_viz.numerics.clip_effects import (
    OutsideBandDemo,
    RareTokenDemo,
    outside_band_demo,
    rare_token_demo,
)
from ppo_viz.numerics.demos import (
    BoundaryDemo,
    Float32BoundaryDemo,
    OverflowDemo,
    boundary_demo,
    float32_boundary_demo,
    overflow_demo,
)
from ppo_viz.numerics.response import (
    FLOAT32_EXP_LIMIT,
    FLOAT64_EXP_LIMIT,
    SyntheticResponse,
    TokenView,
    length_survey,
    response_figure,
    synthetic_response,
    token_view,
)
from ppo_viz.numerics.tokens import TokenRatioExplorer, TokenRatioFigure
from ppo_viz.numerics.variants import VariantsExplorer, VariantsFigure

__all__ = [
    "FLOAT32_EXP_LIMIT",
    "FLOAT64_EXP_LIMIT",
    "BoundaryDemo",
    "Float32BoundaryDemo",
    "OutsideBandDemo",
    "OverflowDemo",
    "RareTokenDemo",
    "SyntheticResponse",
    "TokenRatioExplorer",
    "TokenRatioFigure",
    "TokenView",
    "VariantsExplorer",
    "VariantsFigure",
    "boundary_demo",
    "float32_boundary_demo",
    "length_survey",
    "outside_band_demo",
    "overflow_demo",
    "rare_token_demo",
    "response_figure",
    "synthetic_response",
    "token_view",
]
