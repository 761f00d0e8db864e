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
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from ppo_viz.app import InputError
from ppo_viz.numbers import exact, rounded
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
T = TypeVar("T")


def parse_numbers(text: str, label: str, *, empty: str | None = None) -> list[float]:
    """The numbers in ``text``, separated by commas, semicolons or spaces.

    Accepts surrounding brackets and the Unicode minus sign.  Raises
    ``TypeError`` when ``text`` is not a ``str``, and :class:`EntryError`
    naming ``label`` (and the sample) for an empty field (``empty`` replaces
    the advice after "is empty: "), or for the first entry that is not a
    number or is NaN/infinity, with how many more there are.  A long entry
    is shortened in the message.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__} (reading {label})")
    cleaned = text.strip().replace("\u2212", "-")
    if cleaned[:1] in ("[", "(") and cleaned[-1:] in ("]", ")"):
        cleaned = cleaned[1:-1]
    tokens = [token for token in _SEPARATORS.split(cleaned) if token]
    if not tokens:
        advice = empty or (
            "type one number per sample, separated by commas (for example 0.7, 0.55, 0.3)."
        )
        raise EntryError(f"{label} is empty: {advice}")
    _check_each(tokens, label, _token_problem, shown=_quoted)
    return [float(token) for token in tokens]


#: Entries longer than this are shortened in messages (a message stays a line or two).
_LONGEST_QUOTED = 24


def _quoted(token: str) -> str:
    """``token`` in quotes; a long one cut to its start, with its length."""
    if len(token) <= _LONGEST_QUOTED:
        return f"“{token}”"
    return f"“{token[:20]}…” ({len(token)} characters)"


def _token_problem(token: str) -> str | None:
    try:
        number = float(token)
    except ValueError:
        return "is not a number (use digits and a decimal point, for example 0.45 or -1)."
    if not math.isfinite(number):
        return "is not a finite number; every entry must be an ordinary number."
    return None


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


def _check_each(
    values: Sequence[T],
    label: str,
    problem: Callable[[T], str | None],
    shown: Callable[[T], str] = exact,
) -> None:
    """Raise :class:`EntryError` for the first value ``problem`` has something to say about.

    The message names ``label`` and the sample, shows the value by ``shown``
    and says how many more values have a problem, without listing them.
    """
    found = [index for index, value in enumerate(values) if problem(value) is not None]
    if not found:
        return
    first = found[0]
    text = f"{label}, sample {first}: {shown(values[first])} {problem(values[first])}"
    if len(found) > 1:
        more = len(found) - 1
        text += f" {more} more {'entry' if more == 1 else 'entries'} of {label} "
        text += f"{'has' if more == 1 else 'have'} a problem too."
    raise EntryError(text)


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
    Every problem found is reported, one per line; a text that is not a
    ``str`` raises ``TypeError`` naming its argument.
    """
    texts = {"new_text": new_text, "old_text": old_text}
    texts |= {"advantages_text": advantages_text, "eps_text": eps_text}
    for name, text in texts.items():
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str (a field's text), got {type(text).__name__}")
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


def converted_field(text: str, to_log: bool, label: str = "field") -> str | None:
    """A probability field rewritten as log-probabilities (``to_log``) or back.

    None when ``text`` cannot be read, or holds values that are not
    probabilities (``to_log``) or not log-probabilities: the field is then
    left as typed.  Probabilities always have faithful logs.  The other way,
    below about ``e^-708`` float64 holds a probability with fewer digits, and
    below about ``e^-745`` not at all: when a probability would read back as
    another log-probability (``e^-1000`` rounds to 0), :class:`EntryError`
    names ``label``, the sample and what would be lost.
    """
    try:
        values = parse_numbers(text, label)
    except EntryError:
        return None
    array = np.array(values)
    if to_log:
        if ((array <= 0) | (array > 1)).any():
            return None
        return numbers_text(np.log(array))
    if (array > 0).any():
        return None
    _check_each(values, label, _probability_loss)
    return numbers_text(np.exp(array))


def _probability_loss(logp: float) -> str | None:
    """What writing ``e^logp`` as a float64 probability would lose, or None.

    A normal float64 holds ``e^logp`` to full precision (its log may read
    back one rounding away, like any float computation); a subnormal one
    (below about ``e^-708``) keeps fewer digits, so its log must read back
    exactly.
    """
    probability = math.exp(logp)
    if probability == 0.0:
        return f"is e^{exact(logp)}, which float64 cannot hold as a probability (it rounds to 0)."
    if probability < sys.float_info.min and math.log(probability) != logp:
        return (
            f"is e^{exact(logp)} ≈ {rounded(probability, 2)}, too small for float64 to hold "
            f"in full (its log would read back as {exact(math.log(probability))})."
        )
    return None
