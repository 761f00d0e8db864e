"""Markdown tables for the benchmark report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Table:
    """A titled markdown table with optional notes printed under it."""

    title: str
    header: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"{self.title}: row has {len(cells)} cells, header {len(self.header)}")
        self.rows.append([str(cell) for cell in cells])

    def markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.header) + " |")
        lines.append("|" + "|".join("---" for _ in self.header) + "|")
        for row in self.rows:
            lines.append("| " + " | ".join(_escape(cell) for cell in row) + " |")
        if self.notes:
            lines.append("")
            lines.extend(self.notes)
        return "\n".join(lines)


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def three_figures(value: float) -> str:
    """About three significant figures, at least one decimal below 100: ``1,234``, ``12.3``."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def microseconds(seconds: float) -> str:
    """Seconds as microseconds, to about three significant figures."""
    return three_figures(seconds * 1e6)


def milliseconds(seconds: float) -> str:
    value = seconds * 1e3
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def ratio(value: float) -> str:
    """``2.35x``, to about three significant figures."""
    return three_figures(value) + "x"


def verdict(met: bool) -> str:
    return "**met**" if met else "**missed**"
