"""Exercises with checks that teach (notebook 6).

A learner writes ``ppo_clip_loss``, ``clip_fraction`` and ``ppo_clip_grad`` and hands each to
:func:`check_loss`, :func:`check_clip_fraction` or :func:`check_grad`: the checker runs it on
the battery's batches in a copy of the process with a time limit, compares every answer with
:mod:`ppo_clip` and names each mistake by its symptom.  :func:`concept_questions` gives questions
that :mod:`ppo_clip` decides; :func:`exercise_summary` gives a text for a teacher.

>>> import ppo_clip
>>> check_loss(ppo_clip.ppo_clip_loss).passed
True
>>> def loss_without_minus(logp_new, logp_old, advantages, eps=0.2):
...     return -ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
>>> check_loss(loss_without_minus).mistakes
('sign',)
"""

from ppo_viz.exercises.battery import battery
from ppo_viz.exercises.checker import (
    CheckResult,
    ExerciseSummary,
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
    exercise_summary,
)
from ppo_viz.exercises.questions import ConceptQuestion, concept_questions
from ppo_viz.exercises.sandbox import TIME_LIMIT_S

__all__ = [
    "TIME_LIMIT_S",
    "CheckResult",
    "ConceptQuestion",
    "ExerciseSummary",
    "battery",
    "check",
    "check_clip_fraction",
    "check_grad",
    "check_loss",
    "concept_questions",
    "exercise_summary",
]
