"""Writing a study's results: its JSON, its markdown report and its figures, together.

Every study (``python -m experiments.why_clip``, ``rlhf_study``, ``mismatch_study``) writes
through :func:`write_report`, every file whole or not at all, and its report as a list of
blocks (:func:`document`).  The markdown's tables are the notebooks'
(:data:`ppo_viz.results.Table`, written by :func:`ppo_viz.results.markdown`), so the files and
the notebooks show the same numbers; what the reports say of the machine and of the intervals
is written here once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from experiments.evidence import LEVEL, RESAMPLES
from ppo_viz.results import Table, markdown

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


def third_set_line(count: Mapping[str, int], third: Mapping[str, int] | None) -> str:
    """How many stated sides the third set confirms (``count``,
    :func:`experiments.evidence.third_set_count`); ``third``: its ``seeds`` and ``first_seed``."""
    third = third or {"seeds": 0, "first_seed": 0}
    return (
        f"**The third set** ({third['seeds']} seeds from {third['first_seed']}, run by the same "
        f"command) tests the statements: of the {count['stated']} sides that discovery and "
        f"confirmation state somewhere, it confirms {count['held_everywhere']} at every stated "
        f"setting and {count['held_somewhere']} at some, and contradicts "
        f"{count['contradicted']} anywhere. The findings give only the settings where all three "
        "sets agree."
    )


def document(*blocks: str | Sequence[str] | Table) -> str:
    """A markdown document: its blocks one blank line apart, each a paragraph or a heading, a
    list of lines, or a table (:func:`ppo_viz.results.markdown`); empty blocks are left out."""
    texts = [markdown(b) if isinstance(b, tuple) else b for b in blocks]
    return "\n\n".join(t if isinstance(t, str) else "\n".join(t) for t in texts if t) + "\n"


def json_text(results: Mapping[str, Any]) -> str:
    """``results`` as JSON, one line per list of numbers (so a diff shows which cell moved)."""
    text = json.dumps(results, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", _one_line, text) + "\n"


def _one_line(match: re.Match[str]) -> str:
    return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"


def write_report(output: Path, files: Mapping[Path, str | tuple[Figure, int]]) -> None:
    """Into ``output``, each of ``files`` by the name of its path: a text, or a figure at a
    dpi.  All are written to temporary files beside them, then renamed into place
    (:func:`os.replace`): a full disk or Ctrl-C leaves the old files as they were, never half a
    new one nor a new figure beside old results; a failure is one line (status 1)."""
    temporary = {output / path.name: output / f".{path.name}.{os.getpid()}.tmp" for path in files}
    try:
        for written, content in zip(temporary.values(), files.values(), strict=True):
            if isinstance(content, str):
                written.write_text(content, encoding="utf-8")
            else:
                content[0].savefig(written, dpi=content[1], format="png")
        for path, written in temporary.items():
            os.replace(written, path)
    except OSError as error:  # a run's cells stay in its cache
        raise SystemExit(f"could not write into {output}: {error.strerror}") from None
    finally:
        for written in temporary.values():
            written.unlink(missing_ok=True)
