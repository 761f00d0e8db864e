"""Driving a notebook in JupyterLab or Notebook 7 through headless Chromium.

Used by ``tests/test_browser.py``, ``tests/test_browser_exercises.py``, ``tests/test_export.py``
and the browser benchmark (``benchmarks/browser.py``).  Selectors are JupyterLab 4's public DOM
classes (``.jp-Notebook``, ``.jp-CodeCell``, ``.jp-InputArea-prompt``, ``.jp-OutputArea-output``),
Lumino's menu bar (``.lm-MenuBar-item``, ``.lm-Menu-item[data-command="runmenu:run-all"]``) and
the project's own stable classes (``ppo-app``, ``ppo-figure``, ``ppo-main-control`` with
``ppo-control-<name>``, ``ppo-next``, ...), never ipywidgets' internal class names except the
slider handle the keyboard drives (noUiSlider's ``.noUi-handle``) and the slider's readout.

A figure is ipympl's canvas widget (``.ppo-figure``): its picture is the first ``<canvas>`` in
it, which :data:`CANVAS_PIXELS` reads back, so a test sees what a reader sees.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ppo_viz.app import MAIN_CONTROL
from ppo_viz.export import FIGURE_REPR, WIDGET_REPR, notebook_paths  # noqa: F401 -- re-exported

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
FIXTURE_NOTEBOOK = REPO_ROOT / "tests" / "fixtures" / "smoke.ipynb"
OUTPUT_DIR = REPO_ROOT / "test-output" / "browser"
#: The prefix of each main control's own class: ``ppo-control-eps``, ...
CONTROL_PREFIX = "ppo-control-"

CHROMIUM = Path(os.environ.get("PPO_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
#: XPath from an element to the notebook cell holding it (JupyterLab and Notebook 7).
CELL_ANCESTOR = (
    "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' jp-Cell ')][1]"
)
#: Per kind of main control: what takes the keyboard's focus, and the keys tried in turn to
#: change its value (a slider's handle: noUiSlider's keys; its first two only, unless told).
CONTROL_KINDS = {
    "slider": (".noUi-handle", (("ArrowRight",), ("ArrowLeft",), ("End",), ("Home",))),
    "number": ("input[type=number]", (("ArrowUp", "Enter"), ("ArrowDown", "Enter"))),
    "checkbox": ("input[type=checkbox]", (("Space",),)),
}
#: What a control shows as its value: a slider's readout (its handle's value is rounded),
#: a field's value, a checkbox's state.
CONTROL_VALUE = """(control) => {
  const readout = control.querySelector('.widget-readout'), input = control.querySelector('input');
  if (readout) return readout.textContent.trim();
  if (!input) return control.querySelector('.noUi-handle').getAttribute('aria-valuenow');
  return input.type === 'checkbox' ? String(input.checked) : input.value;
}"""
VIEWPORT = {"width": 1400, "height": 1500}
INSTALL_HINT = (
    "install it with `apt-get install chromium` (Debian/Ubuntu) and "
    "`pip install -r requirements-test.txt`; set PPO_REQUIRE_BROWSER=1 to make this a failure"
)

#: Outputs that must never appear after Run All: a traceback, a widget that failed to render,
#: a widget or a figure shown as its text repr (``FloatSlider(value=...``, ``<Figure size ...>``).
PROBLEM_PATTERNS = [
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"Error displaying widget"),
    WIDGET_REPR,
    FIGURE_REPR,
]

#: Reads each ``.ppo-figure`` canvas under an element: its size, how many pixels differ from
#: the top-left one (the background), and a hash of every pixel (FNV-1a over RGBA words).
CANVAS_PIXELS = """(root) => Array.from(root.querySelectorAll('.ppo-figure')).map((figure) => {
  const canvas = figure.querySelector('canvas');
  if (!canvas || !canvas.width || !canvas.height) return {width: 0, height: 0, inked: 0, hash: 0};
  const {width, height} = canvas;
  const rgba = canvas.getContext('2d').getImageData(0, 0, width, height).data;
  const words = new Uint32Array(rgba.buffer);
  let hash = 2166136261, inked = 0;
  for (let i = 0; i < words.length; i++) {
    if (words[i] !== words[0]) inked++;
    hash = Math.imul(hash ^ words[i], 16777619);
  }
  return {width, height, inked, hash: hash >>> 0};
})"""
#: A figure counts as drawn when at least this share of its canvas differs from the background
#: (axes, ticks and labels alone cover more than that).
MIN_INKED_SHARE = 0.005


def browser_problem() -> str:
    """Why Chromium cannot be driven here (empty when it can): no browser (nothing runnable at
    :data:`CHROMIUM`), or no Playwright."""
    if not CHROMIUM.exists():
        return f"Chromium not found at {CHROMIUM}"
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"Chromium not runnable at {CHROMIUM}: not an executable file"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed"
    return ""


def require_browser() -> None:
    """Skip (or fail, under PPO_REQUIRE_BROWSER=1 as in CI) when Chromium or Playwright is
    missing."""
    if problem := browser_problem():
        required = os.environ.get("PPO_REQUIRE_BROWSER", "") == "1"
        (pytest.fail if required else pytest.skip)(f"{problem}: {INSTALL_HINT}")


@functools.cache
def _chromium() -> Any:
    """This process's Playwright and its headless :data:`CHROMIUM`, started on first use and
    stopped at exit: a second ``sync_playwright()`` in one thread is refused, so every user
    (browser tests, the export's test, the benchmark) takes its contexts from the one browser."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    atexit.register(playwright.stop)  # after the browser's close (registered later)
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )
    atexit.register(browser.close)
    return browser


@contextmanager
def chromium_context() -> Iterator[Any]:
    """A fresh browser context (its own storage and pages; a Playwright BrowserContext) of
    this process's one headless Chromium."""
    context = _chromium().new_context(viewport=VIEWPORT)
    try:
        yield context
    finally:
        context.close()


def output_dir(name: str) -> Path:
    """``test-output/browser/<name>/``, emptied first (screenshots of one test)."""
    folder = OUTPUT_DIR / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# -- expectations ------------------------------------------------------------------------------


class NotebookExpectation(NamedTuple):
    """What a notebook must show after Run All, names space-separated: its main controls
    (classes ``ppo-main-control`` and ``ppo-control-<name>``), how many ``ppo-figure``
    canvases at least, and other classes that must be on screen (a stepper's ``ppo-next``)."""

    controls: str = ""
    min_figures: int = 0
    extra_classes: str = ""


expect = NotebookExpectation

#: A stepper's buttons and readout.
STEPPER = "ppo-next ppo-prev ppo-sample-view"
#: Per notebook, keyed by its name without the number (so renumbering keeps them): its
#: main controls, how many ppo-figure canvases it shows at least, other classes (a stepper's).
#: A new or changed notebook needs only its line here.
EXPECTATIONS: dict[str, NotebookExpectation] = {
    "clipped_surrogate": expect("eps advantage worked-example", 1),
    "worked_example": expect("sample", 1, STEPPER),
    "epochs_on_one_batch": expect("eps step-size epochs seed early-stop target-kl figure2-eps", 2),
    "why_clip": expect(
        "range-show-ppo range-show-unclipped range-show-early-stop epochs batch-size iterations "
        "step-size show-ppo show-unclipped show-kl-adaptive-001 cartpole-cell cartpole-show-ppo "
        "cartpole-show-unclipped",
        3,
        "ppo-more-seeds",
    ),
    "numerics_and_rlhf": expect("length shift eps-low eps-high cap cap-on", 2),
    "exercises": expect(extra_classes="ppo-quiz"),
    "clipping_in_llm_training": expect(
        "objective mu eps-low eps-high beta kl-place group-size short long advantage eps "
        "learning-rate updates kl-coef",
        4,
        "ppo-check",
    ),
    "where_the_advantage_comes_from": expect("gamma lam", 1),
    "smoke": expect("eps", 1),
}


def control_names(control: Any) -> list[str]:
    """The names in a control's ``ppo-control-<name>`` classes (a main control has one)."""
    classes = (control.get_attribute("class") or "").split()
    return [c.removeprefix(CONTROL_PREFIX) for c in classes if c.startswith(CONTROL_PREFIX)]


def control_name(control: Any, index: int) -> str:
    """A main control's name for messages and screenshots (else its position)."""
    names = control_names(control)
    return names[0] if names else f"main-control-{index}"


def expectation_for(path: Path) -> NotebookExpectation:
    """The entry for ``NN_<name>.ipynb`` (or ``<name>.ipynb``); a default one for new notebooks."""
    name = re.sub(r"^\d+_", "", path.stem)
    return EXPECTATIONS.get(name, NotebookExpectation())


def blank_figures(pixels: list[dict[str, int]]) -> list[int]:
    """The positions of the figures in ``pixels`` (:data:`CANVAS_PIXELS`) that show nothing."""
    return [
        index
        for index, figure in enumerate(pixels)
        if figure["inked"] < MIN_INKED_SHARE * figure["width"] * figure["height"]
        or not figure["inked"]
    ]


def page_problems(page: Any) -> list[str]:
    """Stderr and error outputs, outputs matching :data:`PROBLEM_PATTERNS` and open dialogs on
    ``page`` (a notebook, or a page exported from one), described short."""
    stderr = page.locator('[data-mime-type="application/vnd.jupyter.stderr"]')
    found = [f"stderr/error output: {text.strip()[:800]}" for text in stderr.all_inner_texts()]
    for text in page.locator(".jp-OutputArea-output").all_inner_texts():
        for pattern in PROBLEM_PATTERNS:
            if pattern.search(text):
                found.append(f"output matching {pattern.pattern!r}: {text.strip()[:400]}")
                break
    for text in page.locator(".jp-Dialog").all_inner_texts():
        found.append(f"dialog open: {text.strip()[:300]}")
    return found


# -- a notebook in the browser -----------------------------------------------------------------

#: The kernel shutdowns :meth:`NotebookPage.close` started, by (server, notebook path).
_stopping: dict[tuple[int, str], threading.Thread] = {}


class NotebookPage:
    """One notebook opened in JupyterLab (``ui="lab"``) or Notebook 7 (``ui="notebook"``).

    The JupyterLab server (:class:`lab_server.JupyterServer`) serves Notebook 7's pages too.
    :meth:`open` loads the notebook's URL; on a page already showing a JupyterLab whose server
    exposes the app (:class:`lab_server.JupyterServer` does), it opens the notebook in that
    page instead, which saves loading JupyterLab again.  :meth:`close` closes it unsaved.
    """

    def __init__(
        self, page: Any, server: Any, relative_path: str, workspace: str, ui: str = "lab"
    ) -> None:
        self.page = page
        self.server = server
        self.path = relative_path
        self.workspace = workspace
        self.ui = ui
        self.console: list[str] = []
        self.timings: dict[str, float] = {}  # seconds per phase, saved with the screenshots
        page.on("console", self._log_console)
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    def _log_console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.console.append(f"{message.type}: {message.text}")

    @property
    def url(self) -> str:
        if self.ui == "lab":
            return f"{self.server.url}lab/workspaces/{self.workspace}/tree/{self.path}"
        return f"{self.server.url}notebooks/{self.path}"

    def open(self, timeout_s: float = 60) -> None:
        """Show the notebook and wait until it is rendered and its kernel is idle."""
        stopping = _stopping.pop((id(self.server), self.path), None)
        if stopping is not None:
            stopping.join()  # its last kernel, stopped by close(), must not be reused
        if self.page.evaluate("() => Boolean(window.jupyterapp)"):
            self.page.evaluate(
                """(path) => {
                  const app = window.jupyterapp;  // one notebook at a time: close the others
                  for (const widget of Array.from(app.shell.widgets('main'))) {
                    if (widget.context) widget.dispose();
                  }
                  app.commands.execute('docmanager:open', {path});
                }""",
                self.path,
            )
        else:
            self.page.goto(self.url)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_s * 1000)
        self.wait_for_kernel_idle(timeout_s)

    def close(self) -> None:
        """Close the notebook without saving (where the app is exposed); stop its kernel.

        The kernel stops in the background: the next notebook need not wait for it.
        """
        self.page.evaluate(
            """(path) => {
              const app = window.jupyterapp;
              if (!app) return;
              for (const widget of Array.from(app.shell.widgets('main'))) {
                if (widget.context && widget.context.path === path) widget.dispose();
              }
            }""",
            self.path,
        )
        stopping = threading.Thread(target=self.server.shutdown_kernels, args=(self.path,))
        stopping.start()
        _stopping[id(self.server), self.path] = stopping

    def kernel_state(self) -> str | None:
        """The execution state the server reports for this notebook's kernel."""
        for session in self.server.sessions():
            if session.get("path") == self.path and session.get("kernel"):
                return str(session["kernel"].get("execution_state"))
        return None

    def ui_status(self) -> str | None:
        """The notebook toolbar's kernel status (``data-status`` of the execution indicator)."""
        indicator = self.page.locator(".jp-Notebook-ExecutionIndicator").first
        if indicator.count() == 0:
            return None
        return indicator.get_attribute("data-status")

    def poll(self, read: Any, done: Any, timeout_s: float, every_s: float = 0.1) -> Any:
        """Call ``read()`` until ``done`` holds for its value or ``timeout_s`` passed; the last."""
        deadline = time.monotonic() + timeout_s
        value = read()
        while not done(value) and time.monotonic() < deadline:
            self.page.wait_for_timeout(every_s * 1000)
            value = read()
        return value

    def kernel_idle(self) -> bool:
        """Both the server and (where shown) the toolbar say the kernel is idle."""
        return self.kernel_state() == "idle" and self.ui_status() in (None, "idle")

    def wait_for_kernel_idle(self, timeout_s: float) -> None:
        if not self.poll(self.kernel_idle, bool, timeout_s):
            raise AssertionError(
                f"{self.path}: kernel not idle after {timeout_s} s "
                f"(server: {self.kernel_state()}, toolbar: {self.ui_status()})"
            )

    def run_all_from_menu(self) -> None:
        """Run > Run All Cells, clicked in the menu bar as a person would."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^\s*Run\s*$")).click()
        by_command = self.page.locator('.lm-Menu-item[data-command="runmenu:run-all"]')
        by_label = self.page.locator(".lm-Menu-item").filter(
            has=self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
        )
        by_command.or_(by_label).first.click()

    def prompts(self) -> list[str]:
        """The input prompt of every code cell, e.g. ``[3]:``, ``[*]:`` or ``[ ]:``."""
        return [
            text.strip()
            for text in self.page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        ]

    def wait_until_all_executed(self, timeout_s: float, settle_s: float = 0.5) -> list[str]:
        """Wait until every code cell shows an execution count and the kernel is idle, or an
        error stopped Run All (reported, not waited for).

        Then ``settle_s`` more: widgets render asynchronously after the kernel replies.
        """

        def finished(prompts: list[str]) -> bool:
            executed = prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
            return bool(executed and self.kernel_idle()) or bool(self.problems())

        prompts = self.poll(self.prompts, finished, timeout_s, every_s=0.2)
        self.page.wait_for_timeout(settle_s * 1000)
        return prompts

    def problems(self) -> list[str]:
        """Error, traceback, stderr and broken-widget outputs, as short descriptions."""
        return page_problems(self.page)

    # -- figures ------------------------------------------------------------------------------

    def figure_pixels(self, scope: Any | None = None) -> list[dict[str, int]]:
        """Each ``.ppo-figure`` canvas in ``scope`` (default: the notebook): CANVAS_PIXELS."""
        root = scope if scope is not None else self.page.locator(".jp-Notebook").first
        return list(root.evaluate(CANVAS_PIXELS))

    def wait_until_figures_drawn(self, timeout_s: float = 10) -> list[dict[str, int]]:
        """Poll until no figure on the page is blank (ipympl draws a moment after Run All)."""
        return self.poll(self.figure_pixels, lambda pixels: not blank_figures(pixels), timeout_s)

    # -- widgets ------------------------------------------------------------------------------

    def main_controls(self, scope: Any | None = None) -> Any:
        """Every main control (class ``ppo-main-control``) in ``scope`` or the page, in order."""
        return (scope if scope is not None else self.page).locator(f".{MAIN_CONTROL}")

    def cell_of(self, locator: Any) -> Any:
        """The notebook cell (``.jp-Cell``) that contains ``locator``."""
        return locator.locator(CELL_ANCESTOR)

    def wait_for_change(self, read: Any, before: Any, timeout_s: float = 10) -> Any:
        """Poll ``read()`` until it differs from ``before``; return it (or ``before``)."""
        return self.poll(read, lambda now: now != before, timeout_s, every_s=0.05)

    def control_kind(self, control: Any) -> str:
        """``slider`` (noUiSlider), ``number`` (IntText/FloatText), ``checkbox`` or ``other``."""
        kinds = (
            kind for kind, (focus, _) in CONTROL_KINDS.items() if control.locator(focus).count()
        )
        return next(kinds, "other")

    def move_control_changes_figure(
        self, control: Any, scope: Any, shots: Path, name: str, arrows_only: bool = True
    ) -> list[str]:
        """Move a main control with the keyboard; return what went wrong (empty = fine).

        A slider: focus its handle, press ArrowRight (ArrowLeft if already at the maximum;
        with ``arrows_only=False`` then End and Home too); a number field: ArrowUp and Enter
        (or ArrowDown); a checkbox: Space.  The value must change, and so must the pixels of a
        ``.ppo-figure`` canvas in ``scope`` (the control's app), which must stay drawn.  A
        screenshot of ``scope`` goes to ``shots`` when it did not.
        """
        kind = self.control_kind(control)
        if kind == "other":
            return [f"{name}: a {MAIN_CONTROL} that is no slider, number field or checkbox"]
        pixels_before = self.figure_pixels(scope)
        if not pixels_before:
            return [f"{name}: no ppo-figure canvas next to the control"]
        focus, moves = CONTROL_KINDS[kind]
        target = control.locator(focus).first
        moves = moves[: 2 if arrows_only and kind == "slider" else None]
        read = functools.partial(control.evaluate, CONTROL_VALUE)
        value_before = value_after = read()
        for keys in moves:  # the first that changes the value
            target.scroll_into_view_if_needed()
            target.focus()
            for key in keys:
                self.page.keyboard.press(key)
            if (value_after := self.wait_for_change(read, value_before, 3)) != value_before:
                break
        else:
            tried = ", ".join("+".join(keys) for keys in moves)
            return [
                f"{name}: pressing {tried} on the focused {kind} did not change its value "
                f"(stays {value_before!r})"
            ]
        move = "+".join(keys)
        pixels_after = self.wait_for_change(lambda: self.figure_pixels(scope), pixels_before)
        failures = []
        if [p["hash"] for p in pixels_after] == [p["hash"] for p in pixels_before]:
            failures.append(
                f"{name}: moving the {kind} {value_before} -> {value_after} ({move}) "
                "drew no new frame on its figure"
            )
        if blank_figures(pixels_after):
            failures.append(f"{name}: the figure is blank after moving the control")
        if failures:  # a picture of what went wrong (the page shows the rest at the end)
            scope.screenshot(path=str(shots / f"control_{name}_{move}.png"))
        return failures

    def screenshot(self, path: Path) -> None:
        self.page.screenshot(path=str(path))

    def save_console(self, path: Path) -> None:
        path.write_text("\n".join(self.console) + "\n")

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Record how long ``phase`` takes in :attr:`timings`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] = round(time.perf_counter() - start, 2)

    def save_timings(self, path: Path) -> None:
        path.write_text("".join(f"{phase}: {s} s\n" for phase, s in self.timings.items()))
