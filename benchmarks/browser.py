"""How the apps feel in a real JupyterLab: step latency, frames during a drag, settle time.

Each notebook is opened in JupyterLab in headless Chromium and run (Run All from the menu),
started the way the browser tests start them (``tests/lab_server.py``,
``tests/browser_support.py``) but with JupyterLab's own windowing mode, as a reader has it:
``contentVisibility`` in JupyterLab 4.6.6 (the default in its
``schemas/@jupyterlab/notebook-extension/tracker.json``), where the page skips laying out and
painting the cells out of view.  The tests lay every cell out (``none``) so that their
selectors see them all; on every frame of a drag that costs the page work a reader's
JupyterLab does not do.  Then every main control (class ``ppo-main-control``; per notebook,
the first visible, enabled one of each ``ppo-control-<name>``) is used the way a
reader uses it:

* **steps**: focus the control and press a key (a slider's handle: ArrowRight, ArrowLeft once
  it reached the end; a number field: ArrowUp then Enter; a checkbox: Space).  The latency runs
  from the key press to the moment that cell's figure shows a new frame: today the picture
  ipympl's front end draws on the figure's ``<canvas>``, at earlier revisions a new
  ``.ppo-figure img`` decoded.  Both ends are taken inside the page
  (``benchmarks/page_probe.js``: ``performance.now()``, hooks on ``drawImage`` and
  ``img.decode()``), so the harness' own round trips do not count.  One warm-up step first,
  and the kernel is left idle between steps (a checkbox warms up once each way).
* **drag** (sliders): mouse down on the handle, a move every 1/60 s carrying it over half its
  track in :attr:`Settings.drag_seconds`, release.  Frames are the distinct pictures painted
  between press and release; settle is the time from the release to the last one.  The same
  drag's frame rate varies by a frame or two a second from one drag to the next on a busy
  2-core machine, so a slider that draws while dragged is dragged :attr:`Settings.drags`
  times, back and forth, and judged by its median drag
  (:attr:`benchmarks.feel.ControlFeel.drag`); before each drag the kernel's caches that
  computed a value since the call before are emptied (:func:`forget_new_caches`), so that a
  drag back computes the values of the one before again.  A slider that acts on release is
  dragged once.

A probe in each kernel (:mod:`benchmarks.kernel_probe`) logs each widget message and each
redraw, so a step's latency splits into: the key press to the kernel starting on the message,
the app's own work, drawing, encoding the PNG, from the PNG to the picture arriving in the page,
and decoding and drawing it there.  During a drag Chromium's own counters (DevTools
``Performance.getMetrics``) tell how busy the page's main thread was.

The same notebooks can be measured as they were at an earlier revision in the same run
(:class:`Side`: the revision's tree with its own JupyterLab rooted there, its kernels importing
that tree's ``ppo_viz``), one notebook at a time, now then before, so a change of load hits
both alike.  The tables are in :mod:`benchmarks.browser_tables`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.feel import (
    BrowserRun,
    ControlFeel,
    drag_from_records,
    kernel_records,
    step_from_records,
)

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
PAGE_PROBE = Path(__file__).with_name("page_probe.js")

#: Mouse moves per second while dragging, like a mouse read at a display's 60 Hz.
MOVES_PER_SECOND = 60
#: A step is over when no new frame has come for this long; a drag, for SETTLE_QUIET_S.
QUIET_S = 0.4
SETTLE_QUIET_S = 1.0
STEP_TIMEOUT_S = 15.0
RUN_ALL_TIMEOUT_S = 120.0
OPEN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Settings:
    """How much to measure: key presses per control, how long each drag lasts, and how many
    drags per slider (see :attr:`benchmarks.feel.ControlFeel.drag`)."""

    steps: int
    drag_seconds: float
    drags: int

    @classmethod
    def full(cls) -> Settings:
        return cls(steps=9, drag_seconds=2.0, drags=3)

    @classmethod
    def quick(cls) -> Settings:
        return cls(steps=2, drag_seconds=0.5, drags=2)


@dataclass(frozen=True)
class Side:
    """Code to measure: a JupyterLab rooted at ``root`` whose kernels import ``ppo_viz`` there.

    ``label``: "now", or "at <revision>" for a revision's tree (``tree`` set: the notebooks
    are found at the same place inside it).
    """

    label: str = "now"
    tree: Path | None = None

    def notebook(self, path: Path) -> Path:
        """Where ``path`` (a notebook of this checkout) is on this side."""
        if self.tree is None:
            return path
        return self.tree / path.resolve().relative_to(REPO)

    def root(self, notebooks: list[Path]) -> Path:
        return self.tree if self.tree is not None else server_root(notebooks)

    def environment(self) -> dict[str, str]:
        """A revision's kernels import its ``ppo_viz`` and ``ppo_clip``, not this checkout's."""
        return {"PYTHONPATH": str(self.tree)} if self.tree is not None else {}


# -- JupyterLab and Chromium, started as the browser tests start them ---------------------------


def _test_helpers() -> tuple[Any, Any]:
    """``(browser_support, lab_server)`` from ``tests/``."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import browser_support
    import lab_server

    return browser_support, lab_server


def missing_browser(chromium: Path | None = None) -> str:
    """Why the browser benchmark cannot run here (empty when it can)."""
    support, _ = _test_helpers()
    return str(support.browser_problem(chromium))


@contextmanager
def probed_lab(
    root: Path, log: Path, environment: dict[str, str], folders: list[Path]
) -> Iterator[Any]:
    """A JupyterLab server rooted at ``root`` whose kernels log to ``log`` (the kernel probe).

    Its kernels start in a scratch folder of the server's, so that what a notebook writes
    (notebook 1's slide) never lands beside it; the notebooks' ``folders`` are on their path.
    The notebook plugin keeps JupyterLab's default settings (the tests' ``windowingMode`` is
    ``none``).
    """
    _, lab_server = _test_helpers()
    paths = [environment.get("PYTHONPATH", ""), *map(str, folders)]
    environment = {**environment, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    with lab_server.JupyterServer(
        "lab",
        root,
        environment=environment,
        kernels_beside_notebooks=False,
        settings={lab_server.NOTEBOOK_SETTINGS: {}},  # JupyterLab's default windowing
    ) as server:
        startup = server.ipython_dir / "profile_default" / "startup"
        startup.mkdir(parents=True, exist_ok=True)
        (startup / "00-ppo-kernel-probe.py").write_text(
            "import sys\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from benchmarks.kernel_probe import install\n"
            f"install({str(log)!r})\n"
            f"sys.path.remove({str(REPO)!r})\n",
            encoding="utf-8",
        )
        yield server


def server_root(notebooks: list[Path]) -> Path:
    """The repository if every notebook is inside it, else the notebooks' common folder."""
    folders = {path.resolve().parent for path in notebooks}
    if all(folder.is_relative_to(REPO) for folder in folders):
        return REPO
    if len(folders) != 1:
        raise ValueError("notebooks outside the repository must share one folder")
    return folders.pop()


# -- measuring ----------------------------------------------------------------------------------


def measure(
    notebooks: list[Path],
    settings: Settings,
    *,
    sides: tuple[Side, ...] = (Side(),),
    chromium: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> list[BrowserRun]:
    """Open each notebook in JupyterLab on each side, run it, and measure its main controls.

    One :class:`BrowserRun` per side, in the order given.  Notebook by notebook, each side in
    turn, so the sides share whatever load the machine had meanwhile.
    """
    runs = [BrowserRun(label=side.label) for side in sides]
    problem = missing_browser(chromium)
    if problem or not notebooks:
        for run in runs:
            run.skipped = f"not run: {problem or 'no notebook'}"
        return runs
    support, _ = _test_helpers()
    logs = Path(tempfile.mkdtemp(prefix="ppo-browser-bench-"))
    try:
        with support.chromium_context(chromium) as browser, ExitStack() as labs:
            servers = []
            for index, side in enumerate(sides):
                log = logs / f"kernel-{index}.jsonl"
                folders = sorted({side.notebook(path).parent for path in notebooks})
                lab = labs.enter_context(
                    probed_lab(side.root(notebooks), log, side.environment(), folders)
                )
                servers.append((lab, log))
            for path in notebooks:
                for side, run, (lab, log) in zip(sides, runs, servers, strict=True):
                    if say is not None:
                        say(f"browser: {path.name} ({side.label}) ...")
                    run.notebooks.append(path.name)
                    run.controls += measure_side(browser, lab, side.notebook(path), settings, log)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    return runs


def measure_side(browser: Any, lab: Any, path: Path, settings: Settings, log: Path) -> list:
    """One notebook in one side's JupyterLab, in a page of its own."""
    support, _ = _test_helpers()
    if not path.exists():
        return [ControlFeel(path.name, "—", "—", problem="no such notebook on this side")]
    page = browser.new_page()
    try:
        relative = path.resolve().relative_to(lab.root_dir).as_posix()
        notebook = support.NotebookPage(page, lab, relative, f"bench-{path.stem}")
        return measure_notebook(notebook, path.name, settings, log)
    except Exception as error:  # a notebook that cannot be run: say so, go on
        return [ControlFeel(path.name, "—", "—", problem=_short(error))]
    finally:
        page.close()
        lab.shutdown_all_kernels()


def measure_notebook(notebook: Any, name: str, settings: Settings, log: Path) -> list[ControlFeel]:
    """Open and run one notebook (a ``NotebookPage``), then measure each main control."""
    support, _ = _test_helpers()
    notebook.open(OPEN_TIMEOUT_S)
    notebook.run_all_from_menu()
    notebook.wait_until_all_executed(RUN_ALL_TIMEOUT_S)
    problems = notebook.problems()
    if problems:
        return [ControlFeel(name, "—", "—", problem=f"after Run All: {problems[0][:200]}")]
    results = []
    for control_name, control in controls_to_measure(notebook, support):
        result = ControlFeel(name, control_name, notebook.control_kind(control))
        try:
            measure_control(notebook, control, result, settings, log)
        except Exception as error:  # one control's failure must not lose the others
            result.problem = _short(error)
        results.append(result)
    return results


def _short(error: Exception) -> str:
    lines = str(error).splitlines() or [""]
    return f"{type(error).__name__}: {lines[0][:200]}"


def controls_to_measure(notebook: Any, support: Any) -> list[tuple[str, Any]]:
    """The first visible, enabled main control of each name, in page order."""
    controls = notebook.main_controls()
    chosen: dict[str, Any] = {}
    for index in range(controls.count()):
        control = controls.nth(index)
        name = support.control_name(control, index)
        if name in chosen or not control.is_visible() or control.locator("[disabled]").count():
            continue
        chosen[name] = control
    return list(chosen.items())


def measure_control(
    notebook: Any, control: Any, result: ControlFeel, settings: Settings, log: Path
) -> None:
    """Warm up, then the steps, then (a slider) the drag, into ``result``."""
    if result.kind == "other":
        result.problem = "neither a slider, a number field nor a checkbox"
        return
    page = notebook.page
    control.evaluate("(element) => element.scrollIntoView({block: 'start'})")
    notebook.cell_of(control).first.evaluate(PAGE_PROBE.read_text(encoding="utf-8"))
    sweep: dict[str, str] = {}
    warm_up = 2 if result.kind == "checkbox" else 1  # a checkbox: once each way
    for step in range(warm_up + settings.steps):
        page.evaluate("() => window.__ppoFeel.forget()")
        press(notebook, control, result.kind, sweep)
        if not wait_for_frame(page):
            result.problem = f"no new frame of the figure within {STEP_TIMEOUT_S:.0f} s of a key"
            return
        wait_until_quiet(page, QUIET_S)
        if step >= warm_up:
            feel = page.evaluate("() => window.__ppoFeel")
            result.steps.append(step_from_records(feel, kernel_records(log, feel)))
    for _ in range(settings.drags if result.kind == "slider" else 0):
        forget_new_caches(page)  # a drag back over the last one's values computes them again
        page.evaluate("() => window.__ppoFeel.forget()")
        page_busy = drag(page, control, settings.drag_seconds)
        wait_for_frame(page)  # a slider that acts on release may compute for a while first
        wait_until_quiet(page, SETTLE_QUIET_S)
        feel = page.evaluate("() => window.__ppoFeel")
        result.drags.append(drag_from_records(feel, kernel_records(log, feel), page_busy))
        if result.drags[-1].on_release:
            break  # its one frame comes after the release: no frame rate to vary between drags


def forget_new_caches(page: Any) -> None:
    """Empty the caches the code measured filled since the last call, in the notebook's kernel
    (the kernel probe's :func:`~benchmarks.kernel_probe.forget_new_caches`), through the
    page's JupyterLab."""
    status = page.evaluate(
        """async (code) => {
          const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
          const done = kernel.requestExecute({code, silent: true, store_history: false}).done;
          return (await done).content.status;
        }""",
        "import sys; sys.modules['benchmarks.kernel_probe'].forget_new_caches()",
    )
    if status != "ok":  # else a drag back would pass the values the one before cached
        raise RuntimeError(f"emptying the kernel's caches before a drag failed: {status}")
    page.wait_for_timeout(QUIET_S * 1000)


def press(notebook: Any, control: Any, kind: str, sweep: dict[str, str]) -> None:
    """One key press that changes the control's value.

    A slider goes right until the end of its track, then left until the start
    (``sweep`` remembers the direction); a number field goes up; a checkbox toggles.
    """
    keys: tuple[str, ...]
    if kind == "slider":
        handle = control.locator(".noUi-handle").first
        now, low, high = (float(handle.get_attribute(f"aria-value{p}") or 0) for p in PARTS)
        if now >= high:
            sweep["key"] = "ArrowLeft"
        elif now <= low:
            sweep["key"] = "ArrowRight"
        keys = (sweep.setdefault("key", "ArrowRight"),)
    elif kind == "number":
        keys = ("ArrowUp", "Enter")
    else:
        keys = ("Space",)
    notebook.press_on_control(control, keys)


#: The slider handle's ``aria-value*`` attributes: where it is, and its ends.
PARTS = ("now", "min", "max")


def wait_for_frame(page: Any) -> bool:
    """Whether a new frame was shown within :data:`STEP_TIMEOUT_S`."""
    try:
        page.wait_for_function(
            "() => window.__ppoFeel.shown() > 0", polling=50, timeout=STEP_TIMEOUT_S * 1000
        )
    except Exception:  # Playwright's TimeoutError
        return False
    return True


def wait_until_quiet(page: Any, seconds: float, limit_s: float = 20.0) -> None:
    """Wait until no new frame has come for ``seconds`` and every frame is settled."""
    deadline = time.monotonic() + limit_s
    count = -1
    while time.monotonic() < deadline:
        frames, settled = page.evaluate(
            "() => [window.__ppoFeel.frames.length, window.__ppoFeel.settled()]"
        )
        if frames == count and settled:
            return
        count = frames
        page.wait_for_timeout(seconds * 1000)


def drag(page: Any, control: Any, seconds: float) -> float | None:
    """Press the handle, carry it over half the track at 60 moves a second, release.

    It goes towards the farther end.  Returns the share of the drag the page's
    main thread was busy (Chromium's ``TaskDuration``), or None if unknown.
    """
    handle = control.locator(".noUi-handle").first.bounding_box()
    track = control.locator(".noUi-target").first.bounding_box()
    x0 = handle["x"] + handle["width"] / 2
    y = handle["y"] + handle["height"] / 2
    towards_right = x0 < track["x"] + track["width"] / 2
    distance = (1 if towards_right else -1) * track["width"] / 2
    busy = _MainThreadClock(page)
    page.mouse.move(x0, y)
    page.mouse.down()
    busy.start()
    started = time.perf_counter()
    moves = 0
    while (elapsed := time.perf_counter() - started) < seconds:
        page.mouse.move(x0 + distance * elapsed / seconds, y)
        moves += 1
        pause = moves / MOVES_PER_SECOND - (time.perf_counter() - started)
        if pause > 0:
            time.sleep(pause)
    page.mouse.move(x0 + distance, y)
    page.mouse.up()
    return busy.share(time.perf_counter() - started)


class _MainThreadClock:
    """How long the page's main thread worked, from Chromium's DevTools counters."""

    def __init__(self, page: Any) -> None:
        try:
            self.session = page.context.new_cdp_session(page)
            self.session.send("Performance.enable")
        except Exception:  # not Chromium, or no DevTools protocol: unknown
            self.session = None
        self.began = 0.0

    def _task_seconds(self) -> float:
        metrics = self.session.send("Performance.getMetrics")["metrics"]
        return next(m["value"] for m in metrics if m["name"] == "TaskDuration")

    def start(self) -> None:
        if self.session is not None:
            self.began = self._task_seconds()

    def share(self, seconds: float) -> float | None:
        if self.session is None:
            return None
        worked = self._task_seconds() - self.began
        self.session.detach()
        return worked / seconds
