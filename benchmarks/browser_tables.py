"""The browser benchmark's tables, its rows in the Targets table, and why a target was missed.

Every verdict that says **missed** comes with a reason computed from the measured split
(:func:`why_slow_step`, :func:`why_few_frames`, :func:`why_slow_settle`): which part of the time
is largest, and what it is.  With a baseline revision measured in the same run,
:func:`comparison_table` and :func:`comparison_rows` set each control now against it.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.feel import (
    DRAG_FPS_TARGET,
    RELEASE_TARGET_S,
    SETTLE_TARGET_S,
    STEP_TARGET_S,
    BrowserRun,
    ControlFeel,
    Drag,
)
from benchmarks.tables import Table, verdict

#: How much the browser numbers of one setting differ between runs on a quiet 2-core machine
#: (about 20 %), plus one display frame at 60 Hz for times too short for a share to mean much.
NOISE_SHARE = 0.20
NOISE_S = 1 / 60


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.0f}"


def _share(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.0%}"


def why_slow_step(result: ControlFeel) -> str:
    """The largest parts of a control's median step, in words."""
    browser = [result.median_of(part) for part in ("to_kernel", "to_page", "decode")]
    moving = result.median_of("moving")
    parts = {
        "the app's own work": result.median_of("app"),
        f"drawing ({moving:.0f} artists move)" if moving else "drawing": result.median_of("draw"),
        "encoding the PNG": result.median_of("encode"),
        "the messages and the browser": sum(browser) if None not in browser else None,
    }
    known = sorted(((s, name) for name, s in parts.items() if s is not None), reverse=True)
    if not known:
        return "no split measured"
    return "most of it: " + ", ".join(f"{name} {_ms(s)} ms" for s, name in known[:2])


def after_release(drag: Drag) -> str:
    """When a slider that acts on release showed its figure, against its target."""
    return f"its figure {_ms(drag.settle)} ms after it (target <= {RELEASE_TARGET_S * 1e3:.0f} ms)"


def drag_summary(drag: Drag) -> str:
    """A drag's rate (or, on release, its one frame), and why it missed its target."""
    if drag.on_release:
        return on_release(drag)
    shown = f"{drag.fps:.1f} frames/s, {drag.frames} frames (and {drag.frames_after} after release)"
    return f"{shown} for {drag.values} values" + ("" if drag.met else f"; {why_few_frames(drag)}")


def on_release(drag: Drag) -> str:
    shown = after_release(drag) if drag.frames_after else "and showed no new figure after it"
    return f"the slider acts on release (continuous_update=False), {shown}"


def why_few_frames(drag: Drag) -> str:
    if drag.on_release:
        return on_release(drag)
    kernel = f"the kernel is busy {_share(drag.kernel_busy)} ({_ms(drag.render)} ms a render)"
    if drag.page_busy is not None and drag.page_busy > drag.kernel_busy:
        return f"the page's main thread is busy {_share(drag.page_busy)} of the drag; {kernel}"
    return kernel


def why_slow_settle(drag: Drag) -> str:
    if drag.on_release:
        return "the value goes to the kernel on release, and the app recomputes then"
    return (
        f"the last value waits for the frame being drawn at the release, then is drawn "
        f"itself ({_ms(drag.render)} ms a render)"
    )


def steps_table(runs: list[BrowserRun]) -> Table:
    out = Table(
        "Feel in the browser: key press to the new frame, in JupyterLab (ms)",
        [
            "code",
            "notebook",
            "control",
            "presses",
            "median ms",
            "min-max ms",
            "median split: to kernel / app / draw / PNG / to page / decode ms",
            "full draws",
            "kernel CPU ms",
            "PNG kB",
            f"median <= {STEP_TARGET_S * 1e3:.0f} ms",
        ],
    )
    for run in runs:
        if run.skipped or not run.controls:
            reason = run.skipped or "no main control found"
            out.add(run.label, "—", "—", 0, *["n/a"] * 6, reason)
        for result in run.controls:
            out.add(run.label, *_step_cells(result))
    out.notes.append(
        "Each main control (the first visible, enabled one of each name per notebook) after "
        "Run All: one warm-up key press, then the presses counted, each after the kernel went "
        "idle. From the key down (a number field: ArrowUp, then Enter) to the new frame of the "
        "control's cell, timed inside the page: today the picture ipympl draws on the figure's "
        "canvas, at earlier revisions a new image of the figure decoded. The split comes from a "
        "probe in the kernel: the key press to the kernel starting on the message / the app's "
        "own work (its computation, artists, readouts) / drawing / encoding the PNG / the PNG "
        "to the picture arriving in the page / decoding it (and drawing it on the canvas); "
        "medians of each part. Full draws: presses that drew the whole figure rather than only "
        "what moved. Kernel CPU: CPU time the kernel spent per step (less than its wall time "
        "when other processes had the cores)."
    )
    for run in runs:
        out.notes += run.notes
    return out


def _step_cells(result: ControlFeel) -> list[object]:
    if result.problem or not result.steps:
        problem = result.problem or "no step measured"
        return [result.notebook, result.control, len(result.steps), *["n/a"] * 6, problem]
    latencies = [step.latency for step in result.steps]
    split = " / ".join(
        _ms(result.median_of(part))
        for part in ("to_kernel", "app", "draw", "encode", "to_page", "decode")
    )
    size = result.median_of("png_bytes")
    met = result.median <= STEP_TARGET_S
    return [
        result.notebook,
        f"{result.control} ({result.kind})",
        len(latencies),
        _ms(result.median),
        f"{_ms(min(latencies))}-{_ms(max(latencies))}",
        split,
        sum(step.full_draws > 0 for step in result.steps),
        _ms(result.median_of("kernel_cpu")),
        f"{size / 1000:.0f}" if size else "n/a",
        verdict(met) + ("" if met else f": {why_slow_step(result)}"),
    ]


def drags_table(runs: list[BrowserRun]) -> Table:
    out = Table(
        "Feel in the browser: dragging a slider's handle over half its track",
        [
            "code",
            "notebook",
            "control",
            "drag s",
            "frames",
            "frames/s",
            "values passed",
            "frames after release",
            "kernel: values / renders / busy",
            "page busy",
            "settle ms",
            f">= {DRAG_FPS_TARGET:.0f} frames/s",
            f"settle <= {SETTLE_TARGET_S * 1e3:.0f} ms (on release: {RELEASE_TARGET_S * 1e3:.0f})",
        ],
    )
    for run in runs:
        if not any(result.drag for result in run.controls):
            out.add(run.label, "—", "—", *["n/a"] * 9, run.skipped or "no slider measured")
        for result in run.controls:
            if result.drag is not None:
                out.add(run.label, result.notebook, result.control, *_drag_cells(result))
    out.notes.append(
        "Mouse down on the handle, a move every 1/60 s carrying it over half its track towards "
        "the farther end, mouse up. Frames: distinct pictures the page painted between press "
        "and release; values passed: distinct values the slider's readout showed meanwhile (a "
        "slider with few values cannot show more frames than that: the target then is a frame "
        "for every value). Kernel: the new values it received and the figures it rendered "
        "during the drag, and the share of the drag it was busy; page busy: the share the "
        "page's main thread worked (Chromium's TaskDuration). Settle: from the release to the "
        "last frame. A slider that draws while dragged is dragged three times in a full run, "
        "back and forth, the kernel's caches that computed a value since the call before "
        "emptied before each (the kernel probe's forget_new_caches): its row is the drag that "
        "reached the median share of the target (frame rate over the target, or values passed "
        "shown, whichever is more), with the median settle; each drag's frames/s and settle "
        "follow in brackets."
    )
    return out


def _drag_cells(result: ControlFeel) -> list[object]:
    drag = result.drag
    assert drag is not None
    settled = drag.settled

    def each(value: Callable[[Drag], str]) -> str:
        return f" ({', '.join(map(value, result.drags))})" if len(result.drags) > 1 else ""

    return [
        f"{drag.seconds:.1f}",
        drag.frames,
        f"{drag.fps:.1f}" + each(lambda d: f"{d.fps:.1f}"),
        drag.values,
        drag.frames_after,
        f"{drag.kernel_messages} / {drag.kernel_renders} / {_share(drag.kernel_busy)}",
        _share(drag.page_busy),
        _ms(drag.settle) + each(lambda d: _ms(d.settle)),
        _drag_verdict(drag),
        verdict(settled) + ("" if settled else f": {why_slow_settle(drag)}"),
    ]


def _drag_verdict(drag: Drag) -> str:
    if drag.on_release:
        return verdict(drag.met) + f": {on_release(drag)}"
    if drag.fps >= DRAG_FPS_TARGET:
        return verdict(True)
    if drag.every_value_shown:
        return verdict(True) + f": every value passed was shown ({drag.values})"
    return verdict(False) + f": {why_few_frames(drag)}"


def target_rows(run: BrowserRun) -> list[tuple[str, str, bool]]:
    """Per notebook and target: the worst control, with the reason when it misses."""
    if run.skipped:
        return []
    rows = []
    for notebook in dict.fromkeys(result.notebook for result in run.controls):
        results = [r for r in run.controls if r.notebook == notebook]
        rows += _notebook_rows(notebook, results)
    return rows


def _notebook_rows(notebook: str, results: list[ControlFeel]) -> list[tuple[str, str, bool]]:
    rows = []
    broken = [r for r in results if r.problem or not r.steps]
    if broken:
        described = "; ".join(f"{r.control}: {r.problem or 'no step measured'}" for r in broken)
        rows.append((f"{notebook}: every main control measured in the browser", described, False))
    timed = [r for r in results if r.steps]
    if timed:
        worst = max(timed, key=lambda r: r.median)
        met = worst.median <= STEP_TARGET_S
        rows.append(
            (
                f"{notebook}: median key press to new frame <= {STEP_TARGET_S * 1e3:.0f} ms, "
                "every control",
                f"worst {worst.control} {worst.median * 1e3:.1f} ms"
                + ("" if met else f"; {why_slow_step(worst)}"),
                met,
            )
        )
    drags = [r for r in timed if r.drag is not None]
    if drags:
        # the first that misses; else the slowest of those that draw while dragged
        slowest = min(
            drags, key=lambda r: (r.drag.met, r.drag.on_release, r.drag.fps, -r.drag.settle)
        )
        met = all(r.drag.met for r in drags)
        measured = f"slowest {slowest.control}: {drag_summary(slowest.drag)}"
        released = [r.control for r in drags if r.drag.on_release]
        if released:
            measured += f"; acting on release: {', '.join(released)}"
        rows.append(
            (
                f"{notebook}: dragging >= {DRAG_FPS_TARGET:.0f} frames/s (or every value "
                "passed shown; a slider that acts on release: its figure "
                f"<= {RELEASE_TARGET_S * 1e3:.0f} ms after it), every slider",
                measured,
                met,
            )
        )
        latest = max(drags, key=lambda r: (not r.drag.settled, r.drag.settle))
        met = latest.drag.settled
        rows.append(
            (
                f"{notebook}: last frame <= {SETTLE_TARGET_S * 1e3:.0f} ms after release "
                f"({RELEASE_TARGET_S * 1e3:.0f} ms for one that acts on release), every slider",
                f"slowest {latest.control} {_ms(latest.drag.settle)} ms"
                + ("" if met else f"; {why_slow_settle(latest.drag)}"),
                met,
            )
        )
    return rows


# -- now against a baseline revision, measured in the same run ------------------------------


def no_worse(now: float, before: float, phase: float = 0.0) -> bool:
    """A time ``now`` is no worse than ``before``, beyond the noise of repeated runs (and
    ``phase`` seconds that one measurement cannot resolve, see :func:`settle_phase`)."""
    return now <= before * (1 + NOISE_SHARE) + NOISE_S + phase


def settle_phase(result: ControlFeel, earlier: ControlFeel) -> float:
    """How much one drag's settle time depends on when the release falls.

    While the kernel renders during a drag, the release lands somewhere in a render: the
    last frame then comes between 0 (the release's value was drawn already) and two renders
    later (the render under way, then the release's value).  The median of a few drags per
    side is not trusted to tell apart less than two renders of the slower side.  A slider that sends
    its value only on release has no such phase: 0.
    """
    renders = [
        drag.render
        for drag in (result.drag, earlier.drag)
        if drag is not None and drag.kernel_messages and drag.render
    ]
    return 2 * max(renders) if renders else 0.0


def _pairs(now: BrowserRun, before: BrowserRun) -> list[tuple[ControlFeel, ControlFeel]]:
    """The controls measured on both sides (same notebook, same control name)."""
    earlier = {(r.notebook, r.control): r for r in before.controls if r.steps}
    return [
        (result, earlier[(result.notebook, result.control)])
        for result in now.controls
        if result.steps and (result.notebook, result.control) in earlier
    ]


#: The three feels compared: their names, and each control's value in seconds (lower is better).
FEELS: list[tuple[str, Callable[[ControlFeel], float | None]]] = [
    ("key press", lambda r: r.median),
    ("time per frame while dragging", lambda r: r.drag.frame_time if r.drag else None),
    ("settle", lambda r: r.drag.settle if r.drag else None),
]


def comparison_table(now: BrowserRun, before: BrowserRun) -> Table:
    out = Table(
        f"Feel in the browser: now against the code {before.label}, same run",
        [
            "notebook",
            "control",
            "key press ms: now / before",
            "drag frames/s: now / before",
            "settle ms: now / before",
            "no worse beyond noise",
        ],
    )
    pairs = _pairs(now, before)
    if not pairs:
        reason = now.skipped or before.skipped or "no control measured on both sides"
        out.add("—", "—", "n/a", "n/a", "n/a", reason)
    for result, earlier in pairs:
        worse = _worse(result, earlier)
        out.add(
            result.notebook,
            result.control,
            f"{_ms(result.median)} / {_ms(earlier.median)}",
            _both(result.drag, earlier.drag, lambda d: f"{d.fps:.1f}"),
            _both(result.drag, earlier.drag, lambda d: _ms(d.settle)),
            verdict(not worse) + (f": worse {', '.join(worse)}" if worse else ""),
        )
    out.notes.append(
        f"Both measured in this run, notebook by notebook (now, then {before.label}), each in "
        "its own JupyterLab. Worse beyond noise: more than "
        f"{NOISE_SHARE:.0%} + {NOISE_S * 1e3:.0f} ms (one display frame) slower, for the key "
        "press, the time per frame while dragging (a drag that showed every value passed "
        "counts as fast as the values came) and the settle time. A drag's settle "
        "depends on where in a render the release falls (from 0 to two renders), so settle "
        "times within two of the slower side's renders of each other are not told apart."
    )
    return out


def _both(now: Drag | None, before: Drag | None, cell: Callable[[Drag], str]) -> str:
    return " / ".join(cell(drag) if drag else "n/a" for drag in (now, before))


def _worse(result: ControlFeel, earlier: ControlFeel) -> list[str]:
    """The feels in which ``result`` is worse than ``earlier`` beyond the noise."""
    worse = []
    for name, value in FEELS:
        now, before = value(result), value(earlier)
        phase = settle_phase(result, earlier) if name == "settle" else 0.0
        if now is not None and before is not None and not no_worse(now, before, phase):
            worse.append(name)
    return worse


def comparison_rows(now: BrowserRun, before: BrowserRun) -> list[tuple[str, str, bool]]:
    """Per notebook: every control's feel no worse than at the baseline, beyond the noise."""
    rows = []
    pairs = _pairs(now, before)
    for notebook in dict.fromkeys(result.notebook for result, _ in pairs):
        worse = [
            f"{result.control}: {', '.join(found)}"
            for result, earlier in pairs
            if result.notebook == notebook and (found := _worse(result, earlier))
        ]
        rows.append(
            (
                f"{notebook}: the feel in the browser no worse than {before.label}, beyond noise",
                "; ".join(worse) if worse else "no control slower beyond noise",
                not worse,
            )
        )
    return rows
