"""Exercises with checks that teach (notebook 5).

A learner writes their own ``ppo_clip_loss``, ``clip_fraction`` and
``ppo_clip_grad`` and hands each to :func:`check_loss`,
:func:`check_clip_fraction` or :func:`check_grad`.  The checker runs the
function on a battery of batches (:func:`battery`: the worked example, ratios
exactly on the band's edges, ``N = 1`` up to ``N = 257``, ``eps = 0`` and
``eps = 1``, read-only inputs, an overflowing ratio with ``A = 0``, ...) and
compares every answer with :mod:`ppo_clip`, the reference solution.

When an answer is wrong, the checker does not stop at "wrong": it names the
mistake by its symptom.  Each common mistake is a *variant* of the reference
computed from :func:`ppo_clip.clip_breakdown` (the loss with its sign flipped,
without the ``1/N``, with sign-blind clipping, with ``>=`` instead of ``>``,
...); the learner's answers are matched against those variants, single
mistakes first, then pairs and triples, so an answer with two mistakes gets
both named.  Problems that show in other ways (an exception, a wrong return
type, changed inputs, NaN where an overflowing ratio meets ``A = 0``) are
recognised directly.

:class:`ConceptQuestion` is a short multiple-choice question whose right
answer :mod:`ppo_clip` decides and which explains it after a choice;
:func:`exercise_summary` runs every check and gives a text a learner can
paste to a teacher.

The modules, in the order a check uses them: :mod:`.battery` (the batches),
:mod:`.calling` (running the learner's function), :mod:`.mistakes` (the named
mistakes and their variants), :mod:`.diagnosis` (findings with evidence),
:mod:`.checker` (the checks and their cards); then :mod:`.questions` and
:mod:`.summary`.

>>> import ppo_clip
>>> check_loss(ppo_clip.ppo_clip_loss).passed
True
>>> def loss_without_minus(logp_new, logp_old, advantages, eps=0.2):
...     return -ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
>>> check_loss(loss_without_minus).mistakes
('sign',)
"""

from ppo_viz.exercises.battery import CheckBatch, battery
from ppo_viz.exercises.checker import (
    CheckResult,
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
)
from ppo_viz.exercises.diagnosis import Finding
from ppo_viz.exercises.mistakes import MISTAKES, VALUE_MISTAKES, Mistake, explanation, predict
from ppo_viz.exercises.questions import ConceptQuestion, Option, concept_questions
from ppo_viz.exercises.summary import ExerciseSummary, exercise_summary

__all__ = [
    "MISTAKES",
    "VALUE_MISTAKES",
    "CheckBatch",
    "CheckResult",
    "ConceptQuestion",
    "ExerciseSummary",
    "Finding",
    "Mistake",
    "Option",
    "battery",
    "check",
    "check_clip_fraction",
    "check_grad",
    "check_loss",
    "concept_questions",
    "exercise_summary",
    "explanation",
    "predict",
]
