"""Exercises with checks that teach (notebooks 6, 7 and 8).

A learner writes ``ppo_clip_loss``, ``clip_fraction`` and ``ppo_clip_grad`` and hands each to
:func:`check_loss`, :func:`check_clip_fraction` or :func:`check_grad`: the checker runs it on
the battery's batches in a copy of the process with a time limit, compares every answer with
:mod:`ppo_clip` and names each mistake by its symptom.  :func:`concept_questions` gives questions
that :mod:`ppo_clip` decides; :func:`exercise_summary` gives a text for a teacher.

The checker API.  Every check takes the learner's function (and ``time_limit_s``, the seconds
one call may take) and returns a :class:`CheckResult`: ``passed``, ``mistakes`` (the keys of the
findings, e.g. ``('sign',)``), ``findings`` and ``notes`` (each a title, the explanation and
the evidence, "On batch ...: expected .., got .."), shown as a card in a notebook and as text
by ``str``.  Whatever the function does (raise, loop, print, exit, rebind numpy) is a finding,
never an exception; only Ctrl-C stops a check.  The checks: :func:`check_loss`,
:func:`check_clip_fraction`, :func:`check_grad` (notebook 6); ``llm.check_grpo_loss`` and
``llm.check_gspo_loss`` (notebook 7); :func:`check_gae` (notebook 8), for a
``gae(rewards, values, dones, last_value, last_done, *, gamma, lam)`` returning
``(advantages, returns)`` as :func:`llm_clip.gae` does.  An exercise is one table: its named
mistakes (title, explanation), their groups, and a function that says what an implementation
with some of them answers on a batch, registered in :data:`.mistakes.EXERCISES` (:mod:`.gae`
is the shortest example); the search for the fewest mistakes that explain every answer is the
same for all.

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
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
    exercise_summary,
)
from ppo_viz.exercises.gae import check_gae
from ppo_viz.exercises.questions import ConceptQuestion, concept_questions
from ppo_viz.exercises.rollout import check_corrected_loss
from ppo_viz.exercises.sandbox import TIME_LIMIT_S

__all__ = [
    "TIME_LIMIT_S",
    "CheckResult",
    "ConceptQuestion",
    "battery",
    "check",
    "check_clip_fraction",
    "check_corrected_loss",
    "check_gae",
    "check_grad",
    "check_loss",
    "concept_questions",
    "exercise_summary",
]
