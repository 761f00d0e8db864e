"""Exercises with checks that teach (notebook 6).

A learner writes their own ``ppo_clip_loss``, ``clip_fraction`` and
``ppo_clip_grad`` and hands each to :func:`check_loss`,
:func:`check_clip_fraction` or :func:`check_grad`.  The checker runs the
function on a battery of batches (:func:`battery`) and compares every answer
with :mod:`ppo_clip`, the reference solution:

* the **core** batches are the contract on realistic inputs (the worked
  example, ratios exactly on the band's edges, ``eps = 0`` and ``eps = 1``,
  advantages of both signs or exactly 0, ``N = 1`` up to ``N = 257``,
  read-only inputs, ...).  Passing them is passing the exercise;
* the **robustness** batches are float64's edges (an overflowing ratio with
  ``A = 0`` or ``A < 0``, log-probabilities near -1000) and ``N = 4096``.
  What goes wrong there is shown under "going further", with the lesson of
  notebook 5 it relates to.

When an answer is wrong, the checker does not stop at "wrong": it names the
mistake by its symptom.  Each common mistake is a *variant* of the reference
(:mod:`.variants`: the loss with its sign flipped, the ratio inverted, max
instead of min, ...); the learner's answers are matched against those
variants, single mistakes first, then pairs and triples, so an answer with
two mistakes gets both named.  Problems that show in other ways (an
exception, a call that does not return within the time limit, a wrong return
type, changed inputs, NaN where an overflowing ratio meets ``A = 0``) are
recognised directly.  A check never raises because of the learner's code,
captures what it prints, and stops a call after
:data:`TIME_LIMIT_S` seconds (:mod:`.time_limit`).

:class:`ConceptQuestion` is a short multiple-choice question whose right
answer :mod:`ppo_clip` decides and which explains it after a choice;
:func:`concept_questions` gives eight, three of which ask why.
:func:`exercise_summary` runs every check and gives a text a learner can
paste to a teacher.

The modules, in the order a check uses them: :mod:`.reference` (the
checker's own copy of ``ppo_clip``), :mod:`.battery` (the batches),
:mod:`.time_limit` and :mod:`.calling` (running the learner's function),
:mod:`.answers` (reading what it returned), :mod:`.mistakes` and
:mod:`.variants` (the named mistakes and what they return),
:mod:`.diagnosis` (findings with evidence), :mod:`.checker` (the checks and
their cards); then :mod:`.questions`, :mod:`.question_bank`,
:mod:`.why_questions` and :mod:`.summary`.

>>> import ppo_clip
>>> check_loss(ppo_clip.ppo_clip_loss).passed
True
>>> def loss_without_minus(logp_new, logp_old, advantages, eps=0.2):
...     return -ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
>>> check_loss(loss_without_minus).mistakes
('sign',)
"""

from ppo_viz.exercises.battery import BATTERY, CheckBatch, battery
from ppo_viz.exercises.checker import (
    CheckResult,
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
)
from ppo_viz.exercises.diagnosis import Finding
from ppo_viz.exercises.mistakes import MISTAKES, VALUE_MISTAKES, Mistake, explanation
from ppo_viz.exercises.question_bank import concept_questions
from ppo_viz.exercises.questions import ConceptQuestion, Option
from ppo_viz.exercises.summary import ExerciseSummary, exercise_summary
from ppo_viz.exercises.time_limit import TIME_LIMIT_S
from ppo_viz.exercises.variants import predict

__all__ = [
    "BATTERY",
    "MISTAKES",
    "TIME_LIMIT_S",
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
