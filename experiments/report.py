"""Writing a study's results: its JSON, its markdown report and its figures, together.

Both studies (``python -m experiments.why_clip`` and ``python -m experiments.rlhf_study``)
write through :func:`write_report`, and every file whole or not at all (:func:`write_whole`):
an interruption or a full disk leaves the old files as they were, never half of a new one nor
a new figure beside old results.  The markdown's tables are the
notebooks' (:data:`ppo_viz.results.Table`, written by :func:`ppo_viz.results.markdown`), so
the files and the notebooks show the same numbers; what both reports say of the machine and
of the intervals is written here once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

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
    """Into ``output``, all together (:func:`write_whole`): each figure (by the name of its
    path: ``(figure, dpi)``), ``results`` as JSON and ``text`` as markdown (``files``: the
    JSON's and the markdown's paths, of which the names are used)."""
    writers = {
        output / path.name: lambda file, f=figure, dpi=dpi: f.savefig(file, dpi=dpi, format="png")
        for path, (figure, dpi) in figures.items()
    }
    for path, content in zip(files, (json_text(results), text), strict=True):
        writers[output / path.name] = lambda file, c=content: file.write(c.encode("utf-8"))
    write_whole(writers)


def write_whole(writers: Mapping[Path, Callable[[IO[bytes]], object]]) -> None:
    """Each path written by its writer, whole or not at all: every file goes to a temporary
    file beside it (``.name.<pid>.tmp``), and only once all are written are they renamed into
    place (:func:`os.replace`); on any failure the temporary files are removed and the
    error raised, the old files untouched."""
    temporary: dict[Path, Path] = {}
    try:
        for path, write in writers.items():
            temporary[path] = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with temporary[path].open("wb") as file:
                write(file)
        for path, written in temporary.items():
            os.replace(written, path)
    finally:
        for written in temporary.values():
            written.unlink(missing_ok=True)
