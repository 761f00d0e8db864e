"""Writing a study's results: its JSON, its markdown report and its figures, together.

Both studies (``python -m experiments.why_clip`` and ``python -m experiments.rlhf_study``)
write through :func:`write_report`: the figures first, the JSON next, the markdown last, so a
report never describes results that are not beside it.  The markdown's tables are the
notebooks' (:data:`ppo_viz.results.Table`, written by :func:`ppo_viz.results.markdown`), so
the files and the notebooks show the same numbers; what both reports say of the machine and
of the intervals is written here once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from experiments.evidence import LEVEL, RESAMPLES

#: How both reports name their intervals.
INTERVALS = (
    f"percentile bootstrap {LEVEL:.0%} intervals ({RESAMPLES:,} resamples from a fixed seed)"
)


def machine_line(machine: Mapping[str, str], reproduces: str) -> str:
    """Where the results were made, and ``reproduces``: where they reproduce."""
    return (
        f"Machine: {machine['cpu']} ({machine['machine']}), numpy {machine['numpy']} with SIMD "
        f"{machine['simd']}. {reproduces}"
    )


def json_text(results: Mapping[str, Any]) -> str:
    """``results`` as JSON, one line per list of numbers (so a diff shows which cell moved)."""
    text = json.dumps(results, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", _one_line, text) + "\n"


def _one_line(match: re.Match[str]) -> str:
    return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"


def write_report(
    output: Path,
    results: Mapping[str, Any],
    files: tuple[Path, Path],
    text: str,
    figures: Mapping[Path, tuple[Figure, int]],
) -> None:
    """Into ``output``: each figure (by the name of its path: ``(figure, dpi)``), then
    ``results`` as JSON and ``text`` as markdown (``files``: the JSON's and the markdown's
    paths, of which the names are used)."""
    for path, (figure, dpi) in figures.items():
        figure.savefig(output / path.name, dpi=dpi)
    json_file, markdown_file = files
    (output / json_file.name).write_text(json_text(results), encoding="utf-8")
    (output / markdown_file.name).write_text(text, encoding="utf-8")
