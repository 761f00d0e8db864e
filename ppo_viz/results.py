"""Both studies' committed results (JSON in :data:`RESULTS_DIR`), read back, and the text
their numbers are written in.  Results record what the study ran (:func:`ran_with` states it,
not today's defaults); a :data:`Table` is data a notebook shows and a command writes as
:func:`markdown`; a mean carries its 95% interval to two significant figures of its width
(:func:`estimate`); a paired difference whose interval holds 0 is *not distinguishable* with
those seeds (:func:`difference`), never "equal".
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

RESULTS_DIR = Path(__file__).resolve().parents[1] / "experiments"
#: Every study's two sets of seeds, in order: claims chosen on the first, checked on the second.
SEED_SETS = ("discovery", "confirmation")
#: The LLM studies' third set, which tests the protocol: how many stated findings hold on it.
THIRD_SET = "replication"

Table = tuple[list[str], list[list[str]]]
#: How a cell of a column of numbers starts.
NUMBER = re.compile(r"[-+−]?\d|–$")
#: A cell's integer part, up to its decimal point.
INTEGER = re.compile(r"[-+−]?\d*")


def load_results(path: Path) -> Any:
    """The results a study's command wrote to ``path``; NaN and infinities, which JSON has
    not, are refused (``ValueError``): a study writes None for a number it has not."""
    return json.loads(Path(path).read_text(encoding="utf-8"), parse_constant=not_json)


def not_json(name: str) -> NoReturn:
    """``json.loads``' ``parse_constant`` for results: NaN and infinities are refused."""
    raise ValueError(f"{name} is not JSON")


def ran_with(settings: Mapping[str, Any]) -> str:
    """What a study ran with, as one line.

    >>> ran_with({"epochs": 20, "arm_means": [1.0, 0.5]})
    'epochs = 20, arm_means = [1.0, 0.5]'
    """
    return ", ".join(f"{k} = {v}" for k, v in settings.items())


def markdown(table: Table) -> list[str]:
    """A table's lines in markdown, each column padded to its widest cell, so that the text
    reads as a table too.  A column of numbers (each cell starting with a digit or a sign, or
    "–") is right-aligned, and in the text its cells' first numbers line up at the decimal
    point.

    >>> for line in markdown((["step", "b"], [["1", "x"], ["-0.25 [-1, 1]", "yz"]])):
    ...     print(line)
    |          step | b   |
    | ------------: | --- |
    |  1            | x   |
    | -0.25 [-1, 1] | yz  |
    """
    header, rows = table
    columns = [list(column) for column in zip(header, *rows, strict=True)]
    right = [bool(rows) and all(NUMBER.match(c) for c in column[1:]) for column in columns]
    for column in (column for column, numbers in zip(columns, right, strict=True) if numbers):
        ends = [INTEGER.match(cell).end() for cell in column[1:]]  # each first number's point
        column[1:] = (" " * (max(ends) - end) + c for c, end in zip(column[1:], ends, strict=True))
    widths = [max(3, *map(len, column)) for column in columns]
    head, *body = zip(*columns, strict=True)
    head = [h.rjust(w) if r else h for h, w, r in zip(head, widths, right, strict=True)]
    rule = ["-" * (w - 1) + ":" if r else "-" * w for w, r in zip(widths, right, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(cells) for cells in (head, rule, *body)]


def decimals(width: float) -> int:
    """Decimals that show ``width`` to two significant figures (3 for a width of 0).

    >>> decimals(0.0022), decimals(0.08), decimals(0.0)
    (4, 3, 3)
    """
    return 3 if not width > 0 else max(0, 1 - math.floor(math.log10(width)))


def estimate(mean: float, ci: Sequence[float], sign: str = "") -> str:
    """``mean [low, high]`` to two significant figures of the interval's width (``sign="+"``:
    each number with its sign, as a difference is written).

    >>> estimate(0.98781, [0.98711, 0.98849]), estimate(0.001, [-0.002, 0.004], "+")
    ('0.9878 [0.9871, 0.9885]', '+0.0010 [-0.0020, +0.0040]')
    """
    d = decimals(ci[1] - ci[0])
    return f"{mean:{sign}.{d}f} [{ci[0]:{sign}.{d}f}, {ci[1]:{sign}.{d}f}]"


def difference(paired: Mapping[str, Any], seeds: int | None = None) -> str:
    """A paired difference (``diff`` and ``ci``) as a table writes it (``+0.0010 [-0.0020,
    +0.0040] n.d.``, its note saying what n.d. means) or, given the number of ``seeds``, as a
    sentence does (``not distinguishable with 20 seeds (...)``); where every seed's
    difference is 0, the two are one run (tests/test_study_results.py has every form)."""
    low, high = paired["ci"]
    if low == high == paired["diff"] == 0.0:
        return "identical on every seed" if seeds is None else f"the same run on all {seeds} seeds"
    text = estimate(paired["diff"], paired["ci"], sign="+")
    if not low <= 0.0 <= high:
        return text
    return f"{text} n.d." if seeds is None else f"not distinguishable with {seeds} seeds ({text})"
