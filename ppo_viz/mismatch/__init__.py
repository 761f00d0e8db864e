"""Notebook 9: ratios that are not 1, when an inference engine samples the batch (issue 45).

:mod:`.measures` measures one batch's gaps, ratios, weights and kept responses and the gradient's
bias under each correction (the study ``experiments/mismatch_study.py`` uses them too);
:mod:`.apps` draws them (:class:`MismatchExplorer`) and the committed study's curves.
"""
