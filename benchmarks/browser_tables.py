"""The browser benchmark's tables, its rows in the Targets table, and why a target was missed.

Every verdict that says **missed** comes with a reason computed from the
measured split (:func:`why_slow_step`, :func:`why_few_frames`, :func:`why_slow_settle`):
which part of the time is largest, and what it is.
"""

from __future__ import annotations

from benchmarks.browser import (
    DRAG_FPS_TARGET,
    SETTLE_TARGET_S,
    STEP_TARGET_S,
    BrowserRun,
    ControlFeel,
    Drag,
)
from benchmarks.tables import Table, verdict


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


def why_few_frames(drag: Drag) -> str:
    if drag.kernel_messages == 0 and drag.values > 0:
        return "the slider sends its value only on release (continuous_update=False)"
    kernel = f"the kernel is busy {_share(drag.kernel_busy)} ({_ms(drag.render)} ms a render)"
    if drag.page_busy is not None and drag.page_busy > drag.kernel_busy:
        return f"the page's main thread is busy {_share(drag.page_busy)} of the drag; {kernel}"
    return kernel


def why_slow_settle(drag: Drag) -> str:
    if drag.kernel_messages == 0 and drag.values > 0:
        return "the value goes to the kernel on release, and the app recomputes then"
    return (
        f"the last value waits for the frame being drawn at the release, then is drawn "
        f"itself ({_ms(drag.render)} ms a render)"
    )


def steps_table(run: BrowserRun) -> Table:
    out = Table(
        "Feel in the browser: key press to the new image, in JupyterLab (ms)",
        [
            "notebook",
            "control",
            "presses",
            "median ms",
            "min-max ms",
            "median split: to kernel / app / draw / PNG / to page / decode ms",
            "kernel CPU ms",
            "PNG kB",
            f"median <= {STEP_TARGET_S * 1e3:.0f} ms",
        ],
    )
    if run.skipped:
        out.add("—", "—", 0, "n/a", "n/a", "n/a", "n/a", "n/a", run.skipped)
    elif not run.controls:
        out.add("—", "—", 0, "n/a", "n/a", "n/a", "n/a", "n/a", "no main control found")
    for result in run.controls:
        if result.problem or not result.steps:
            problem = result.problem or "no step measured"
            out.add(result.notebook, result.control, len(result.steps), *["n/a"] * 5, problem)
            continue
        latencies = [step.latency for step in result.steps]
        split = " / ".join(
            _ms(result.median_of(part))
            for part in ("to_kernel", "app", "draw", "encode", "to_page", "decode")
        )
        size = result.median_of("png_bytes")
        met = result.median <= STEP_TARGET_S
        out.add(
            result.notebook,
            f"{result.control} ({result.kind})",
            len(latencies),
            _ms(result.median),
            f"{_ms(min(latencies))}-{_ms(max(latencies))}",
            split,
            _ms(result.median_of("kernel_cpu")),
            f"{size / 1000:.0f}" if size else "n/a",
            verdict(met) + ("" if met else f": {why_slow_step(result)}"),
        )
    out.notes.append(
        "Each main control (the first visible, enabled one of each name per notebook) after "
        "Run All: one warm-up key press, then the presses counted, each after the kernel went "
        "idle. From the key down (a number field: ArrowUp, then Enter) to the new image of the "
        "control's cell decoded in the page, timed inside the page. The split comes from a "
        "probe in the kernel: the key press to the kernel starting on the message / the app's "
        "own work (its computation, artists, readouts) / drawing / encoding the PNG / the PNG "
        "to the image in the page / decoding it; medians of each part. Kernel CPU: CPU time "
        "the kernel spent per step (less than its wall time when other processes had the cores)."
    )
    out.notes += run.notes
    return out


def drags_table(run: BrowserRun) -> Table:
    out = Table(
        "Feel in the browser: dragging a slider's handle over half its track",
        [
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
            f"settle <= {SETTLE_TARGET_S * 1e3:.0f} ms",
        ],
    )
    if not any(result.drag for result in run.controls):
        reason = run.skipped or "no slider measured"
        out.add("—", "—", *["n/a"] * 9, reason)
    for result in run.controls:
        drag = result.drag
        if drag is None:
            continue
        settled = drag.settle <= SETTLE_TARGET_S
        out.add(
            result.notebook,
            result.control,
            f"{drag.seconds:.1f}",
            drag.frames,
            f"{drag.fps:.1f}",
            drag.values,
            drag.frames_after,
            f"{drag.kernel_messages} / {drag.kernel_renders} / {_share(drag.kernel_busy)}",
            _share(drag.page_busy),
            _ms(drag.settle),
            _drag_verdict(drag),
            verdict(settled) + ("" if settled else f": {why_slow_settle(drag)}"),
        )
    out.notes.append(
        "Mouse down on the handle, a move every 1/60 s carrying it over half its track towards "
        "the farther end, mouse up. Frames: distinct images decoded while still the one on "
        "screen, between press and release; values passed: distinct values the slider's readout "
        "showed meanwhile (a slider with few values cannot show more frames than that: the "
        "target then is an image for every value). Kernel: the new values it received and the "
        "figures it rendered during the drag, and the share of the drag it was busy; page busy: "
        "the share the page's main thread worked (Chromium's TaskDuration). Settle: from the "
        "release to the last image."
    )
    return out


def _drag_verdict(drag: Drag) -> str:
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
                f"{notebook}: median key press to new image <= {STEP_TARGET_S * 1e3:.0f} ms, "
                "every control",
                f"worst {worst.control} {_ms(worst.median)} ms"
                + ("" if met else f"; {why_slow_step(worst)}"),
                met,
            )
        )
    drags = [r for r in timed if r.drag is not None]
    if drags:
        slowest = min(drags, key=lambda r: (r.drag.met, r.drag.fps))
        drag = slowest.drag
        met = all(r.drag.met for r in drags)
        measured = (
            f"slowest {slowest.control} {drag.fps:.1f} frames/s, "
            f"{drag.frames + drag.frames_after} images for {drag.values} values"
        )
        rows.append(
            (
                f"{notebook}: dragging >= {DRAG_FPS_TARGET:.0f} frames/s (or every value "
                "passed shown), every slider",
                measured + ("" if met else f"; {why_few_frames(drag)}"),
                met,
            )
        )
        latest = max(drags, key=lambda r: r.drag.settle)
        met = latest.drag.settle <= SETTLE_TARGET_S
        rows.append(
            (
                f"{notebook}: last image <= {SETTLE_TARGET_S * 1e3:.0f} ms after release, "
                "every slider",
                f"slowest {latest.control} {_ms(latest.drag.settle)} ms"
                + ("" if met else f"; {why_slow_settle(latest.drag)}"),
                met,
            )
        )
    return rows
