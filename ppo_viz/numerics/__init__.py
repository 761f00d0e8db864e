"""Numerics and the RLHF setting (notebook 5): large log-ratios, the band's edge, variants.

In RLHF the "action" is a response of hundreds of tokens and its log-probability is the sum
of the tokens' log-probabilities, so it easily reaches -1000.  Three modules:

* :mod:`.model`: the numbers.  A seeded synthetic response (no model involved), its per-token
  and sequence ratios, an overflowing batch computed naively and by :mod:`ppo_clip`, a ratio
  on the band's edge in float64 and float32, a response outside the band, a rare token.
* :mod:`.text`: those numbers as tables with notes (``overflow_demo``, ``boundary_demo``,
  ``float32_boundary_demo``, ``outside_band_demo``, ``rare_token_demo``) and the apps'
  readouts.
* :mod:`.figures`: ``response_figure``, ``TokenRatioExplorer`` and ``VariantsExplorer``
  (asymmetric bounds and dual clip on notebook 1's panels).

Every ratio, clip decision, loss and gradient shown comes from :mod:`ppo_clip`; the only
exceptions are the functions named ``naive_*``, which show how a careless implementation fails.
"""
