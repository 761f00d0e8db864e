"""Numbers as text: the one formatter every readout, table, message and label uses.

Two forms cover every need:

* :func:`exact` prints a float so that ``float(exact(x)) == x``: Python's
  shortest round-trip ``repr``, whole numbers without ``.0``.  The readouts
  that must agree with :mod:`ppo_clip` "to the last float" use it.
* :func:`rounded` prints a few significant digits for prose, tables and
  figure labels, switching to e-notation for huge or tiny values.
* :func:`presented` is :func:`exact`, rounded to four digits on a projector.

Both spell ``inf``, ``-inf`` and ``nan`` out and print ``-0.0`` as ``0``.
:func:`approx` says whether a ragged exact value has a rounder neighbour
(``0.6`` for ``0.5999999999999999``), and :func:`vector` prints an array.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable


def exact(value: float) -> str:
    """A float as exact, short text: ``float(exact(x)) == x`` for every finite ``x``.

    >>> exact(1.0), exact(-0.5375000000000001), exact(0.5999999999999999), exact(float("inf"))
    ('1', '-0.5375000000000001', '0.5999999999999999', 'inf')
    """
    number = float(value)
    if number.is_integer() and abs(number) < 2.0**53:  # -0.0 too
        return str(int(number))
    return repr(number)  # "inf", "-inf", "nan" as they are


def presented(value: float) -> str:
    """:func:`exact` in a notebook; in presentation mode (``PPO_PRESENT=1``) four significant
    digits, so that a projector shows ``0.9``, not ``0.8999999999999999``.

    >>> presented(0.8999999999999999) in ("0.8999999999999999", "0.9")
    True
    """
    from ppo_viz.style import presenting  # matplotlib's, loaded only when asked

    return rounded(value) if presenting() else exact(value)


def rounded(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits; e-notation below 1e-3 or from 1e5 on.

    >>> rounded(0.5999999999999999), rounded(2.0), rounded(1.23456e-7), rounded(-float("inf"))
    ('0.6', '2', '1.235e-07', '-inf')
    """
    number = float(value)
    if number == 0.0:  # -0.0 too
        return "0"
    if abs(number) < 1e-3 or abs(number) >= 1e5:  # "inf", "-inf", "nan" as they are
        return f"{number:.{digits - 1}e}"
    return f"{number:.{digits}g}"


def signed(value: float, digits: int = 3) -> str:
    """:func:`rounded` with a ``+`` before a positive value (an advantage, a change).

    >>> signed(1.0712), signed(-0.34, 2), signed(0.0)
    ('+1.07', '-0.34', '0')
    """
    text = rounded(value, digits)
    return f"+{text}" if float(value) > 0 else text


def approx(value: float) -> str | None:
    """A rounder form of a ragged value (``"0.6"`` for ``0.5999999999999999``), else None.

    None when :func:`exact` is already short (five significant digits or
    fewer), or when no nearby value with at most five digits exists.

    >>> approx(0.5999999999999999), approx(0.6), approx(2 / 3)
    ('0.6', None, None)
    """
    number = float(value)
    if not math.isfinite(number) or number == 0.0:
        return None
    short = f"{number:.6g}"
    if float(short) == number or _significant_digits(short) > 5:
        return None
    return short


def exact_or_approx(value: float) -> str:
    """``"= 1.4"`` when the exact value is short, else ``"≈ 0.6"``: for running text.

    >>> exact_or_approx(1.4), exact_or_approx(0.5999999999999999)
    ('= 1.4', '≈ 0.6')
    """
    short = approx(value)
    return f"= {exact(value)}" if short is None else f"≈ {short}"


def vector(
    values: Iterable[float],
    *,
    unseen: int = 0,
    limit: int = 12,
    each: Callable[[float], str] = exact,
) -> str:
    """``[0, -0.55, ·, ·]``: each entry by ``each``, ``unseen`` dots, long ones elided.

    >>> vector([0.0, -0.55], unseen=2)
    '[0, -0.55, ·, ·]'
    >>> vector(range(20), limit=4)
    '[0, 1, … 16 more …, 18, 19]'
    """
    entries = [each(v) for v in values] + ["·"] * unseen
    if len(entries) > limit:
        half = limit // 2
        entries = [*entries[:half], f"… {len(entries) - 2 * half} more …", *entries[-half:]]
    return "[" + ", ".join(entries) + "]"


def count(n: int, noun: str) -> str:
    """``"1 sample"``, ``"4 samples"``.

    >>> count(1, "sample"), count(4, "sample")
    ('1 sample', '4 samples')
    """
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def listing(indices: Iterable[int], limit: int = 12) -> str:
    """``"0, 2, 5"``, ``"none"``, or the first ``limit`` and how many in all.

    >>> listing([]), listing([0, 2]), listing(range(20), limit=3)
    ('none', '0, 2', '0, 1, 2, … (20 in all)')
    """
    items = [str(int(i)) for i in indices]
    if not items:
        return "none"
    if len(items) > limit:
        return ", ".join(items[:limit]) + f", … ({len(items)} in all)"
    return ", ".join(items)


def _significant_digits(text: str) -> int:
    mantissa = text.split("e")[0]
    return len("".join(c for c in mantissa if c.isdigit()).lstrip("0"))
