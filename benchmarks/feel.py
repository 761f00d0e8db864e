"""What the browser benchmark measured, and how the page's and the kernel's records become it.

The page probe (``benchmarks/page_probe.js``) records inputs, frames and slider values in
epoch milliseconds; the kernel probe (:mod:`benchmarks.kernel_probe`) records messages and
redraws in epoch seconds.  :func:`step_from_records` and :func:`drag_from_records` turn one
key press's or one drag's records into a :class:`Step` or a :class:`Drag`.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: Targets from issue 16, on a quiet 2-core machine.
STEP_TARGET_S = 0.100
DRAG_FPS_TARGET = 12.0
SETTLE_TARGET_S = 0.150
#: A slider that sends its value only on release (``continuous_update=False``: each value
#: trains, as in notebook 4's explorer) draws nothing while dragged; its figure must come
#: within this of the release (issue 30's bar for one setting of that explorer).
RELEASE_TARGET_S = 0.250


@dataclass(frozen=True)
class Step:
    """One key press: its latency and where the time went (seconds; None where unknown).

    ``to_kernel``: from the key press to the kernel starting on the message;
    ``app``: from there to the start of the render (the app's own work: its
    computation, the artists' data, the readouts); ``draw`` and ``encode``: the
    render, drawing and encoding the PNG; ``to_page``: from the PNG to the new
    picture arriving in the page; ``decode``: from there to the picture decoded
    and (ipympl) drawn on the figure's canvas.  They add up to the latency.
    ``kernel_cpu``: the CPU time the kernel spent on it all (less than ``app +
    draw + encode`` when other processes had the cores); ``moving``: how many
    artists the render redrew; ``full_draws``: how many times it drew the whole
    figure rather than only what moved.
    """

    latency: float
    to_kernel: float | None = None
    app: float | None = None
    draw: float | None = None
    encode: float | None = None
    to_page: float | None = None
    decode: float | None = None
    kernel_cpu: float | None = None
    png_bytes: int = 0
    moving: int = 0
    full_draws: int = 0


@dataclass(frozen=True)
class Drag:
    """One drag over half the track: what was shown while the mouse moved, and after.

    ``values``: the distinct values the slider's readout showed meanwhile;
    ``kernel_messages`` / ``kernel_renders``: the new values the kernel received
    and the figures it rendered meanwhile, ``render`` the median seconds of one;
    ``kernel_busy`` / ``page_busy``: the share of the drag the kernel, and the
    page's main thread, were busy (None where unknown).
    """

    seconds: float
    frames: int
    frames_after: int
    values: int
    kernel_messages: int
    kernel_renders: int
    kernel_busy: float
    settle: float
    render: float | None = None
    page_busy: float | None = None

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def every_value_shown(self) -> bool:
        return self.frames + self.frames_after >= self.values

    @property
    def reached(self) -> float:
        """How much of the target the drag reached: its frame rate over the target, or the
        share of the values passed it showed, whichever is more (1 or more: met)."""
        shown = (self.frames + self.frames_after) / self.values if self.values else 0.0
        return max(self.fps / DRAG_FPS_TARGET, shown)

    @property
    def frame_time(self) -> float:
        """Seconds per frame while dragging; a drag that showed every value, one value's."""
        if self.every_value_shown and self.values:
            return self.seconds / max(self.values, self.frames, 1)
        return self.seconds / self.frames if self.frames else float("inf")

    @property
    def on_release(self) -> bool:
        """The slider sent nothing while dragged: it acts on release."""
        return self.kernel_messages == 0 and self.values > 0

    @property
    def settled(self) -> bool:
        """The last frame came soon enough after the release (for its kind of slider; one
        that acts on release must show a frame after it)."""
        if self.on_release:
            return self.frames_after > 0 and self.settle <= RELEASE_TARGET_S
        return self.settle <= SETTLE_TARGET_S

    @property
    def met(self) -> bool:
        """At least the target rate, or a frame for every value the handle passed; for a
        slider that acts on release, its one frame soon enough after it."""
        if self.on_release:
            return self.settled
        return self.fps >= DRAG_FPS_TARGET or self.every_value_shown


@dataclass
class ControlFeel:
    """One main control of one notebook, as measured in the browser."""

    notebook: str
    control: str
    kind: str
    steps: list[Step] = field(default_factory=list)
    drags: list[Drag] = field(default_factory=list)
    problem: str = ""

    @property
    def drag(self) -> Drag | None:
        """The drag that stands for them all: the median by how much of the target each
        reached, with the median settle (of two: the one that reached less, the later settle).

        One drag's frame rate varies by a frame or two a second from one to the next on a
        busy 2-core machine, so a slider is dragged a few times (:mod:`benchmarks.browser`).
        """
        if not self.drags:
            return None
        middle = (len(self.drags) - 1) // 2
        typical = sorted(self.drags, key=lambda drag: drag.reached)[middle]
        settles = sorted(drag.settle for drag in self.drags)
        return replace(typical, settle=settles[len(settles) // 2])

    @property
    def median(self) -> float:
        return statistics.median(step.latency for step in self.steps)

    def median_of(self, part: str) -> float | None:
        """The median of one part of the steps' split (None if never known)."""
        known = [getattr(step, part) for step in self.steps if getattr(step, part) is not None]
        return statistics.median(known) if known else None


@dataclass
class BrowserRun:
    """What the browser benchmark measured on one side (this checkout, or a revision)."""

    controls: list[ControlFeel] = field(default_factory=list)
    skipped: str = ""
    notebooks: list[str] = field(default_factory=list)
    #: Lines for the report (e.g. the load average around the measurement).
    notes: list[str] = field(default_factory=list)
    #: Which code was measured: "now" (this checkout) or "at <revision>".
    label: str = "now"


# -- from the page's records and the kernel's to numbers ---------------------------------------


def kernel_records(log: Path, feel: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel probe's records that started within the page's records (epoch seconds)."""
    times = [event["t"] for event in feel["inputs"]]
    times += [frame["decoded"] or frame["t"] for frame in feel["frames"]]
    if not times or not log.exists():
        return []
    start, end = min(times) / 1000, max(times) / 1000
    records = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written right now
        if start <= record["start"] <= end:
            records.append(record)
    return records


def step_from_records(feel: dict[str, Any], records: list[dict[str, Any]]) -> Step:
    """One step's latency and its split, from the page's records and the kernel probe's.

    The press is the step's first key down (a number field's ArrowUp, before
    its Enter); the kernel's part runs from the first message it handled after
    the press to the render that made the frame shown first.
    """
    first = min((frame for frame in feel["frames"] if frame["shown"]), key=lambda f: f["decoded"])
    pressed = min(event["t"] for event in feel["inputs"] if event["type"] == "keydown") / 1000
    appeared, decoded = first["t"] / 1000, first["decoded"] / 1000
    latency = decoded - pressed
    messages = [r for r in records if r["kind"] == "message" and r["start"] >= pressed]
    renders = [r for r in records if r["kind"] == "render" and r["end"] <= appeared]
    if not messages or not renders:
        return Step(latency)
    message, render = messages[0], renders[-1]
    within = render["start"] < message["end"]  # rendered while handling the message
    encode = render.get("encode", 0.0)
    return Step(
        latency=latency,
        to_kernel=message["start"] - pressed,
        app=render["start"] - message["start"],
        draw=render["end"] - render["start"] - encode,
        encode=encode,
        to_page=appeared - render["end"],
        decode=decoded - appeared,
        kernel_cpu=message["cpu"] + (0.0 if within else render["cpu"]),
        png_bytes=int(render.get("png_bytes", 0)),
        moving=int(render.get("moving", 0)),
        full_draws=int(render.get("full_draws", 0)),
    )


def drag_from_records(
    feel: dict[str, Any], records: list[dict[str, Any]], page_busy: float | None = None
) -> Drag:
    """A drag's frames, values and settle (the page's records) and its kernel side (the probe's)."""
    down = min(e["t"] for e in feel["inputs"] if e["type"] == "mousedown") / 1000
    up = max(e["t"] for e in feel["inputs"] if e["type"] == "mouseup") / 1000
    shown = [frame["decoded"] / 1000 for frame in feel["frames"] if frame["shown"]]
    during = [r for r in records if down <= r["start"] <= up]
    renders = [r["end"] - r["start"] for r in during if r["kind"] == "render"]
    return Drag(
        seconds=up - down,
        frames=sum(down < t <= up for t in shown),
        frames_after=sum(t > up for t in shown),
        values=len({v["value"] for v in feel["values"] if down <= v["t"] / 1000 <= up}),
        kernel_messages=sum(r["kind"] == "message" and bool(r["state"]) for r in during),
        kernel_renders=sum(r["kind"] == "render" for r in during),
        kernel_busy=covered([(r["start"], min(r["end"], up)) for r in during]) / (up - down),
        settle=max(0.0, max(shown, default=up) - up),
        render=statistics.median(renders) if renders else None,
        page_busy=page_busy,
    )


def covered(intervals: list[tuple[float, float]]) -> float:
    """The total length of the union of ``intervals``."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
