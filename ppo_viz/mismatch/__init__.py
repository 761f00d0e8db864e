"""Notebook 9: ratios that are not 1, when an inference engine samples the batch (issue 45).

* :mod:`.measures`: one batch's gaps, ratios, weights and kept responses, and the gradient's
  bias under each correction (the study ``experiments/mismatch_study.py`` uses them too);
* :mod:`.apps`: :class:`MismatchExplorer`, the engine's sliders and everything they move, and
  the committed study's curves with their bands.

The engine is :class:`tiny_lm.Engine`, the trainer's settings :class:`tiny_rlhf.Rollout`; every
ratio, weight and gradient comes from :mod:`llm_clip`.
"""
