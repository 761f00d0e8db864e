"""How a notebook feels in a real JupyterLab, in headless Chromium: one slider per notebook.

Each notebook is opened and run (Run All) in a JupyterLab of the code measured (this checkout,
or a baseline revision's tree: its kernels import that tree's ``ppo_viz``, ``ppo_clip``, ...),
with JupyterLab's default notebook settings.  Then its probed slider (:data:`PROBES`):

* **steps**: the handle focused, one arrow key pressed (right to the end of the track, then
  left); each step's latency runs from the key down to the first new picture the page painted
  on a figure of the slider's cell (``page_probe.js``);
* **drags**: the handle pressed, carried over half the track towards its farther end at 60
  moves a second, released; the frames painted meanwhile, the values the slider's readout
  showed meanwhile, and the time from the release to the last frame (the settle).  The median
  drag stands for them (a frame or two a second varies from one drag to the next).

Before each press and drag, the kernel's ``functools`` caches of the measured tree that
computed a value since the call before are emptied (:data:`FORGET_CACHES`), so a drag back
over the values the one before passed computes them again, as the first did, while what an
app computed when it was built stays.  Notebook by notebook, each side in turn, so the sides
share the machine's load.  JupyterLab and Chromium are started as the browser tests start
them (``tests/lab_server.py``, ``tests/browser_support.py``) and stopped after.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import browser_support  # noqa: E402
import lab_server  # noqa: E402

PAGE_PROBE = (Path(__file__).parent / "page_probe.js").read_text(encoding="utf-8")

#: The slider probed in each notebook (its name without the number); the first slider else.
PROBES = {
    "clipped_surrogate": "eps",
    "worked_example": "sample",
    "epochs_on_one_batch": "step-size",
    "why_clip": "iterations",
    "numerics_and_rlhf": "cap",
    "clipping_in_llm_training": "eps-high",
    "where_the_advantage_comes_from": "lam",
    "ratios_that_are_not_1": "stale",
}
#: Notebooks whose probed slider acts on release (``continuous_update=False``: each setting
#: trains, as in notebook 4's explorer): judged by the figure after the release, not a rate.
#: Notebook 9's sliders follow a drag over their 5 positions: judged as a drag.
ON_RELEASE = {"why_clip"}
#: The feel targets (issue 30): a step; a setting of a slider that trains; a drag.
STEP_TARGET_S = 0.150
SETTING_TARGET_S = 0.250
DRAG_FPS_TARGET = 12.0
#: A step or drag is over when no new frame came for this long (s).
QUIET_S, SETTLE_QUIET_S = 0.4, 1.0
TIMEOUT_S = 15.0

FORGET_CACHES = """
def _forget(root):
    import gc, sys
    seen = vars(sys).setdefault("_benchmark_cache_misses", {})
    for f in gc.get_objects():
        if not (callable(f) and hasattr(f, "cache_info") and hasattr(f, "cache_clear")):
            continue
        module = sys.modules.get(getattr(f, "__module__", None) or "")
        source = getattr(module, "__file__", None) or ""
        if source.startswith(root) and "-packages" not in source:
            misses = f.cache_info().misses
            if misses > seen.get(f, misses):
                f.cache_clear()
            seen[f] = f.cache_info().misses
_forget(%r)
del _forget
"""


@dataclass(frozen=True)
class Settings:
    """Key presses counted (after one warm-up), drags, and how long each drag lasts (s)."""

    steps: int = 5
    drags: int = 3
    drag_seconds: float = 2.0


@dataclass(frozen=True)
class Drag:
    seconds: float
    frames: int  # painted while the handle moved
    after: int  # painted after the release
    values: int  # distinct values the readout showed while the handle moved
    settle: float  # from the release to the last frame (s)

    @property
    def fps(self) -> float:
        return self.frames / self.seconds

    @property
    def every_value_shown(self) -> bool:
        return self.frames + self.after >= self.values


@dataclass
class Feel:
    """One notebook's probed slider on one side."""

    notebook: str
    control: str = ""
    steps: list[float] = field(default_factory=list)
    drags: list[Drag] = field(default_factory=list)
    problem: str = ""

    @property
    def on_release(self) -> bool:
        return re.sub(r"^\d+_", "", Path(self.notebook).stem) in ON_RELEASE

    @property
    def step(self) -> float:
        """The median step (s)."""
        return statistics.median(self.steps)

    @property
    def drag(self) -> Drag:
        """The median drag by frame rate (by settle for a slider that acts on release); of two,
        the worse."""
        key = (lambda d: -d.settle) if self.on_release else (lambda d: d.fps)
        return sorted(self.drags, key=key)[(len(self.drags) - 1) // 2]

    def verdicts(self) -> dict[str, bool]:
        """``{target: met}`` for this slider's targets."""
        if self.problem or not self.steps or not self.drags:
            return {}
        if self.on_release:
            return {
                f"a setting's figure <= {SETTING_TARGET_S * 1e3:.0f} ms, by key or on release": (
                    max(self.step, self.drag.settle) <= SETTING_TARGET_S and self.drag.after > 0
                )
            }
        return {
            f"a step <= {STEP_TARGET_S * 1e3:.0f} ms": self.step <= STEP_TARGET_S,
            f"a drag >= {DRAG_FPS_TARGET:.0f} frames/s or every value passed shown": (
                self.drag.fps >= DRAG_FPS_TARGET or self.drag.every_value_shown
            ),
        }


def problem() -> str:
    """Why the browser part cannot run here (empty when it can)."""
    return str(browser_support.browser_problem())


def measure(
    notebooks: list[Path], sides: dict[str, Path], settings: Settings, say: Any = print
) -> dict[str, list[Feel]]:
    """``{side: [Feel per notebook]}``; ``sides`` maps a label to the tree measured, whose
    notebooks are found at the same place as ``notebooks`` in this checkout."""
    feels: dict[str, list[Feel]] = {label: [] for label in sides}
    say("browser: starting JupyterLab and Chromium ...")
    with browser_support.chromium_context() as browser, ExitStack() as stack:
        labs = {label: stack.enter_context(_lab(root)) for label, root in sides.items()}
        for path in notebooks:
            for label, root in sides.items():
                say(f"browser: {path.name} ({label}) ...")
                notebook = root / path.relative_to(REPO)
                feel = Feel(path.name)
                if not notebook.exists():
                    feel.problem = "no such notebook"
                else:
                    page = browser.new_page()
                    try:
                        _measure_notebook(page, labs[label], notebook, feel, settings)
                    except Exception as error:  # one notebook's failure must not lose the rest
                        feel.problem = f"{type(error).__name__}: {str(error)[:200]}"
                    finally:
                        page.close()
                        labs[label].shutdown_kernels()
                feels[label].append(feel)
    return feels


def _lab(root: Path) -> lab_server.JupyterServer:
    """A JupyterLab rooted at ``root``, its kernels importing ``root``'s code, with JupyterLab's
    default notebook settings; kernels start in a scratch folder (what a notebook writes
    never lands beside it), the notebooks' folder on their path."""
    return lab_server.JupyterServer(
        root,
        environment={"PYTHONPATH": os.pathsep.join([str(root), str(root / "notebooks")])},
        settings={lab_server.NOTEBOOK_SETTINGS: {}},
    )


def _measure_notebook(page: Any, lab: Any, path: Path, feel: Feel, settings: Settings) -> None:
    relative = path.relative_to(lab.root_dir).as_posix()
    notebook = browser_support.NotebookPage(page, lab, relative, f"bench-{path.stem}")
    notebook.open(60)
    notebook.run_all_from_menu()
    _wait_for_run_all(notebook)
    if problems := notebook.problems():
        feel.problem = f"after Run All: {problems[0][:200]}"
        return
    name = PROBES.get(re.sub(r"^\d+_", "", path.stem))
    sliders = page.locator(".ppo-main-control").filter(has=page.locator(".noUi-handle"))
    if name:
        sliders = sliders.and_(page.locator(f".ppo-control-{name}"))
    if not sliders.count():
        feel.problem = f"no slider {name or ''} found".replace("  ", " ")
        return
    control = sliders.first
    feel.control = name or browser_support.control_name(control, 0)
    control.evaluate("(element) => element.scrollIntoView({block: 'start'})")
    cell = notebook.cell_of(control).first.element_handle()
    page.evaluate(PAGE_PROBE, {"cell": cell, "control": control.element_handle()})
    handle = control.locator(".noUi-handle").first
    forget_caches(page, lab.root_dir)  # the first call only notes what the caches hold
    direction = ["ArrowRight"]
    for step in range(1 + settings.steps):
        forget_caches(page, lab.root_dir)
        latency = _step(page, handle, direction)
        if step:  # the first is a warm-up
            feel.steps.append(latency)
    for _ in range(settings.drags):
        forget_caches(page, lab.root_dir)
        feel.drags.append(_drag(page, control, settings.drag_seconds))


def _wait_for_run_all(notebook: Any, timeout_s: float = 120) -> None:
    """Until every prompt shown has its number and the kernel is idle, twice 0.5 s apart.

    (With JupyterLab's default windowing, cells out of view show no prompt at all.)
    """
    done, deadline = 0, time.monotonic() + timeout_s
    while done < 2 and time.monotonic() < deadline and not notebook.problems():
        prompts = [prompt for prompt in notebook.prompts() if prompt]
        numbered = prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
        done = done + 1 if numbered and notebook.kernel_state() == "idle" else 0
        notebook.page.wait_for_timeout(500)


def forget_caches(page: Any, root: Path) -> None:
    """Run :data:`FORGET_CACHES` in the notebook's kernel, through the page's JupyterLab."""
    status = page.evaluate(
        """async (code) => {
          const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
          return (await kernel.requestExecute({code, silent: true, store_history: false}).done)
            .content.status;
        }""",
        FORGET_CACHES % str(root),
    )
    if status != "ok":
        raise RuntimeError(f"emptying the kernel's caches failed: {status}")
    page.wait_for_timeout(QUIET_S * 1000)


def _records(page: Any) -> dict[str, list[dict]]:
    return page.evaluate(
        "() => ({inputs: __feel.inputs, frames: __feel.frames, values: __feel.values})"
    )


def _wait_until_quiet(page: Any, quiet_s: float) -> dict[str, list[dict]]:
    """The records once a frame was painted (or :data:`TIMEOUT_S` passed) and none came for
    ``quiet_s``."""
    with contextlib.suppress(Exception):  # Playwright's TimeoutError: the caller sees no frame
        page.wait_for_function(
            "() => __feel.frames.some((f) => f.shown)", polling=50, timeout=TIMEOUT_S * 1000
        )
    count, deadline = -1, time.monotonic() + 2 * TIMEOUT_S
    while time.monotonic() < deadline:
        records = _records(page)
        if len(records["frames"]) == count:
            return records
        count = len(records["frames"])
        page.wait_for_timeout(quiet_s * 1000)
    return records


def _step(page: Any, handle: Any, direction: list[str]) -> float:
    """One key press moving the slider: seconds to its first new frame on the page."""
    now, low, high = (float(handle.get_attribute(f"aria-value{p}")) for p in ("now", "min", "max"))
    if now >= high or now <= low:
        direction[0] = "ArrowLeft" if now >= high else "ArrowRight"
    page.evaluate("() => window.__feel.reset()")
    handle.focus()
    page.keyboard.press(direction[0])
    records = _wait_until_quiet(page, QUIET_S)
    shown = [f["t"] for f in records["frames"] if f["shown"]]
    if not shown:
        raise RuntimeError(f"no new frame within {TIMEOUT_S:.0f} s of a key press")
    pressed = min(e["t"] for e in records["inputs"] if e["type"] == "keydown")
    return (min(shown) - pressed) / 1000


def _drag(page: Any, control: Any, seconds: float) -> Drag:
    """Carry the handle over half the track at 60 moves a second, towards its farther end."""
    handle = control.locator(".noUi-handle").first.bounding_box()
    track = control.locator(".noUi-target").first.bounding_box()
    x0, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    distance = track["width"] / 2 * (1 if x0 < track["x"] + track["width"] / 2 else -1)
    page.evaluate("() => window.__feel.reset()")
    page.mouse.move(x0, y)
    page.mouse.down()
    started, moves = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - started) < seconds:
        page.mouse.move(x0 + distance * elapsed / seconds, y)
        moves += 1
        time.sleep(max(0.0, moves / 60 - (time.perf_counter() - started)))
    page.mouse.move(x0 + distance, y)
    page.mouse.up()
    records = _wait_until_quiet(page, SETTLE_QUIET_S)
    down = min(e["t"] for e in records["inputs"] if e["type"] == "mousedown")
    up = max(e["t"] for e in records["inputs"] if e["type"] == "mouseup")
    shown = [f["t"] for f in records["frames"] if f["shown"]]
    return Drag(
        seconds=(up - down) / 1000,
        frames=sum(down < t <= up for t in shown),
        after=sum(t > up for t in shown),
        values=len({v["value"] for v in records["values"] if down <= v["t"] <= up}),
        settle=max(0.0, max(shown, default=up) - up) / 1000,
    )
