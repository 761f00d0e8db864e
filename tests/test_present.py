"""Presentation mode: a notebook served as a lecture, readable on a 1280 x 800 projector.

The browser test runs the README's present command as a teacher would, opens the page in
headless Chromium at 1280 x 800 and checks what the room sees: no code, the figure drawn, a
slider that redraws it from the keyboard, and nothing fetched from outside the machine.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from browser_support import OUTPUT_DIR, chromium_context, require_browser
from helpers import live_figure_classes
from lab_server import free_port
from matplotlib.text import Text
from notebook_runner import folder_state

from ppo_viz import present
from ppo_viz.style import PRESENT_VARIABLE

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_1 = REPO / present.DEFAULT_NOTEBOOK
#: 14 pt on a screen that shows CSS pixels at 96 per inch.
SMALLEST_TEXT_PX = 14 * 96 / 72
PROJECTOR = {"width": 1280, "height": 800}


def present_command() -> str:
    """The README's present command, as CI and a teacher copy it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- present-command -->\s*```bash\n(.*?)\n```", readme, re.DOTALL)
    assert block, "README.md has no present-command block"
    return block.group(1).strip()


@pytest.mark.parametrize("app_class", live_figure_classes(), ids=lambda cls: cls.__qualname__)
def test_in_presentation_mode_every_figure_text_is_at_least_14_pt_and_fits(monkeypatch, app_class):
    monkeypatch.setenv(PRESENT_VARIABLE, "1")
    app = app_class()
    figure = app.figure
    width_px = figure.get_figwidth() * figure.dpi
    assert width_px <= PROJECTOR["width"] - 48, "wider than a 1280-pixel screen"
    for text in figure.findobj(Text):
        if text.get_visible() and text.get_text().strip():
            assert text.get_fontsize() * figure.dpi / 72 >= SMALLEST_TEXT_PX, text.get_text()


def test_the_readme_command_runs_the_module_on_notebook_1():
    command = present_command()
    assert "-m ppo_viz.present" in command
    assert command.startswith("python3 -m venv .venv")


def test_the_lecture_serves_a_copy_of_the_notebook_from_a_folder_removed_after(monkeypatch):
    """Voilà ran notebook 1 in notebooks/, so its save cell wrote notebooks/build/."""
    served = []

    class Voila:
        def __init__(self, command, env):
            notebook = Path(command[3])
            served.append((notebook, notebook.read_bytes(), env["PYTHONPATH"]))

        def wait(self):
            return 0

    monkeypatch.setattr(present.subprocess, "Popen", Voila)
    monkeypatch.setattr(present.signal, "signal", lambda *_: None)
    assert present.main([str(NOTEBOOK_1), "--port", "1"]) == 0
    ((notebook, content, import_path),) = served
    assert notebook.name == NOTEBOOK_1.name
    assert not notebook.is_relative_to(NOTEBOOK_1.parent)
    assert content == NOTEBOOK_1.read_bytes()
    assert import_path.split(os.pathsep)[0] == str(NOTEBOOK_1.parent)
    assert not notebook.parent.exists()


def test_a_port_voila_cannot_listen_on_is_refused_before_it_starts(monkeypatch, capsys):
    """--port 70000 printed an address nothing answered; a port in use made Voilà move to
    another one while the address printed stayed."""
    monkeypatch.setattr(present.subprocess, "Popen", None)  # Voilà must not start
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        in_use = taken.getsockname()[1]
        for port, said in ((70000, "must be from 1 to 65535"), (in_use, "is in use")):
            assert present.main([str(NOTEBOOK_1), "--port", str(port)]) == 2
            printed = capsys.readouterr()
            assert printed.out == ""
            assert printed.err.startswith("error: ")
            assert said in printed.err
    assert "--Voila.port_retries=0" in present.voila_command(NOTEBOOK_1, 1)


@pytest.mark.browser
def test_notebook_1_as_a_lecture_in_chromium():
    require_browser()
    beside = folder_state(NOTEBOOK_1.parent)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ppo_viz.present", "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    said = [server.stdout.readline()]  # the URL line, then whatever Voilà logs, kept
    threading.Thread(target=lambda: said.extend(server.stdout), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{port}/"
        assert url in said[0], said[0]
        outside: list[str] = []
        with chromium_context() as context:
            page = context.new_page()
            page.set_viewport_size(PROJECTOR)
            page.on(
                "request",
                lambda request: (
                    outside.append(request.url)
                    if not request.url.startswith(("http://127.0.0.1", "data:", "blob:"))
                    else None
                ),
            )
            try:
                _open(page, url)
            except Exception as error:
                log = "".join(said[-40:])
                raise AssertionError(
                    f"the lecture did not show its figure; Voilà said:\n{log}"
                ) from error
            assert page.locator(".jp-InputArea-editor").count() == 0, "code is shown"
            assert page.locator(".ppo-figure canvas").count() >= 1
            page.evaluate(FRAME_HOOK)
            handle = page.locator(".ppo-control-eps .noUi-handle").first
            handle.click()
            page.evaluate("() => { window.__ppoFrames = 0; }")
            page.keyboard.press("ArrowRight")
            page.wait_for_function("() => window.__ppoFrames > 0", timeout=15_000)
            OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUTPUT_DIR / "present-01_clipped_surrogate.png"))
        assert not outside, f"the lecture fetched from outside the machine: {outside}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert folder_state(NOTEBOOK_1.parent) == beside, "the lecture wrote beside the notebooks"


FRAME_HOOK = """() => {
  window.__ppoFrames = 0;
  const draw = CanvasRenderingContext2D.prototype.drawImage;
  CanvasRenderingContext2D.prototype.drawImage = function (...args) {
    if (this.canvas.closest && this.canvas.closest('.ppo-figure')) window.__ppoFrames += 1;
    return draw.apply(this, args);
  };
}"""


def _open(page, url: str, timeout_s: float = 180) -> None:
    """Load the lecture; Voilà runs the cells as the page comes, so the figure takes a while.

    The wait is for the figure, not for the page's load event, which a stalled request for
    an asset the figure does not need would hold back.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            page.goto(url, timeout=timeout_s * 1000, wait_until="commit")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    page.wait_for_selector(".ppo-figure canvas", timeout=timeout_s * 1000)
    page.wait_for_timeout(1000)
