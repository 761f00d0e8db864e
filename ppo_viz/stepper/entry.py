"""Reading the stepper's text fields into a batch, with messages written for the reader.

:func:`parse_batch` reads the four fields (new and old probabilities or
log-probabilities, advantages, ``eps``) into a
:class:`~ppo_viz.stepper.batch.StepperBatch`, or raises :class:`EntryError`
listing every problem, one per line, each naming the field and the sample.
:func:`converted_field` rewrites a field between probabilities and
log-probabilities when the reader flips the toggle.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import numpy as np

from ppo_viz.app import InputError
from ppo_viz.numbers import exact
from ppo_viz.stepper.batch import LOGP_MIN, MAX_ABS_ADVANTAGE, MAX_SAMPLES, StepperBatch

__all__ = [
    "EntryError",
    "converted_field",
    "field_labels",
    "numbers_text",
    "parse_batch",
    "parse_eps",
    "parse_numbers",
]


class EntryError(InputError):
    """A typed entry (or a batch) the stepper cannot use; ``str(error)`` is for the reader."""


_SEPARATORS = re.compile(r"[,;\s]+")


def parse_numbers(text: str, label: str, *, empty: str | None = None) -> list[float]:
    """The numbers in ``text``, separated by commas, semicolons or spaces.

    Accepts surrounding brackets and the Unicode minus sign.  Raises
    :class:`EntryError` naming ``label`` (and the sample) for an empty field
    (``empty`` replaces the advice after "is empty: "), something that is
    not a number, or NaN/infinity.
    """
    cleaned = text.strip().replace("\u2212", "-")
    if cleaned[:1] in ("[", "(") and cleaned[-1:] in ("]", ")"):
        cleaned = cleaned[1:-1]
    tokens = [token for token in _SEPARATORS.split(cleaned) if token]
    if not tokens:
        advice = empty or (
            "type one number per sample, separated by commas (for example 0.7, 0.55, 0.3)."
        )
        raise EntryError(f"{label} is empty: {advice}")
    return [_number(token, f"{label}, sample {index}") for index, token in enumerate(tokens)]


def _number(token: str, where: str) -> float:
    try:
        number = float(token)
    except ValueError:
        raise EntryError(
            f"{where}: “{token}” is not a number (use digits and a decimal point, "
            "for example 0.45 or -1)."
        ) from None
    if not math.isfinite(number):
        raise EntryError(
            f"{where}: “{token}” is not a finite number; every entry must be an ordinary number."
        )
    return number


def _probability_problem(p: float) -> str | None:
    if p <= 0.0:
        return (
            "is not a probability in (0, 1]; it must be above 0 (the log of 0 is minus infinity)."
        )
    if p > 1.0:
        return "is not a probability in (0, 1]; a probability is at most 1."
    return None


def _log_probability_problem(logp: float) -> str | None:
    if logp > 0.0:
        return (
            "is above 0, but a log-probability is at most 0 (the log of a probability ≤ 1). "
            "Typing probabilities? Switch the toggle to “probabilities”."
        )
    if logp < LOGP_MIN:
        return (
            f"is below {exact(LOGP_MIN)}, the lowest log-probability the module's contract covers."
        )
    return None


def _advantage_problem(advantage: float) -> str | None:
    if abs(advantage) > MAX_ABS_ADVANTAGE:
        return (
            "is too large to plot; advantages are usually within ±100, and the stepper takes "
            "them up to ±1e6 (a million)."
        )
    return None


def _check_each(values: Iterable[float], label: str, problem: Callable[[float], str | None]):
    """Raise :class:`EntryError` for the first value ``problem`` has something to say about."""
    for index, value in enumerate(values):
        said = problem(value)
        if said is not None:
            raise EntryError(f"{label}, sample {index}: {exact(value)} {said}")


def parse_eps(text: str) -> float:
    """The clip size typed in ``text``: one number in [0, 1], or :class:`EntryError`."""
    values = parse_numbers(text, "ε", empty="type one number, for example 0.2.")
    if len(values) != 1:
        raise EntryError(f"ε takes a single number (the clip size), not {len(values)}.")
    eps = values[0]
    if not 0.0 <= eps <= 1.0:
        raise EntryError(f"ε = {exact(eps)} is outside [0, 1]; try 0.1, 0.2 or 0.3.")
    return eps


def field_labels(log_mode: bool) -> tuple[str, str]:
    """The names of the new and old fields: ``π_new``/``π_old`` or their logs."""
    return ("log π_new", "log π_old") if log_mode else ("π_new", "π_old")


def parse_batch(
    new_text: str, old_text: str, advantages_text: str, eps_text: str, *, log_mode: bool = False
) -> StepperBatch:
    """Read the four text fields into a batch, or raise :class:`EntryError`.

    In probability mode the first two fields hold probabilities in (0, 1];
    in log mode log-probabilities in [-1000, 0].  Advantages are at most
    1e6 in magnitude, so the figure can draw them.  The three lists must
    have the same length, from 1 to 4096; ``eps`` is one number in [0, 1].
    Every problem found is reported, one per line.
    """
    new_label, old_label = field_labels(log_mode)
    probability = _log_probability_problem if log_mode else _probability_problem
    problems: list[str] = []
    lists: dict[str, list[float]] = {}
    for label, text, problem in (
        (new_label, new_text, probability),
        (old_label, old_text, probability),
        ("A", advantages_text, _advantage_problem),
    ):
        try:
            lists[label] = parse_numbers(text, label)
            _check_each(lists[label], label, problem)
        except EntryError as error:
            lists.pop(label, None)
            problems.append(str(error))
    try:
        eps = parse_eps(eps_text)
    except EntryError as error:
        problems.append(str(error))
    if len(lists) == 3:
        problems += _length_problems({label: len(values) for label, values in lists.items()})
    if problems:
        raise EntryError("\n".join(problems))
    new, old, advantages = lists[new_label], lists[old_label], lists["A"]
    if log_mode:
        return StepperBatch(np.array(new), np.array(old), np.array(advantages), eps)
    return StepperBatch.from_probabilities(new, old, advantages, eps)


def _length_problems(lengths: dict[str, int]) -> list[str]:
    """What is wrong with the fields' lengths: unequal, or more than the contract allows."""
    if len(set(lengths.values())) > 1:
        counts = [f"{label} has {n}" for label, n in lengths.items()]
        return [
            f"Each field needs one number per sample, but {', '.join(counts[:-1])} "
            f"and {counts[-1]}."
        ]
    if next(iter(lengths.values())) > MAX_SAMPLES:
        return [f"At most {MAX_SAMPLES} samples, please (the contract's largest N)."]
    return []


def numbers_text(values: Iterable[float]) -> str:
    """Numbers as a field shows them: exact, separated by commas (read back bit for bit)."""
    return ", ".join(exact(v) for v in values)


def converted_field(text: str, to_log: bool) -> str | None:
    """A probability field rewritten as log-probabilities (``to_log``) or back.

    None when ``text`` cannot be read, or holds values that are not
    probabilities (``to_log``) or not log-probabilities: the field is then
    left as typed.
    """
    try:
        values = np.array(parse_numbers(text, "field"))
    except EntryError:
        return None
    if to_log:
        if ((values <= 0) | (values > 1)).any():
            return None
        return numbers_text(np.log(values))
    if (values > 0).any():
        return None
    return numbers_text(np.exp(values))
