"""The static export (``python -m ppo_viz.export build/site``) for course sites.

Fast tests (no kernel) check how live outputs become static ones, on the
bundles the apps really display, and that nbconvert's HTML exporter shows an
app's fallback, not its widget, when no widget state is saved; that a bad
output folder, a missing notebooks folder or a missing MathJax package stops
the command with one line, before any notebook runs; and that the site's copy
of MathJax is the small part of the package the pages need.  The
notebook-marked tests run the export on the fixture notebook and the command
line, and stop a run with Ctrl-C.  The browser-marked tests open exported
pages from disk in Chromium with the network blocked: a page of formulas in
every delimiter JupyterLab knows is typeset by the site's own MathJax, and
every notebook in ``notebooks/`` shows every figure cell's image, its
formulas typeset, and no widget repr.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import (
    FIXTURE_NOTEBOOK,
    OUTPUT_DIR,
    PROBLEM_PATTERNS,
    REPO_ROOT,
    chromium_context,
    expectation_for,
    require_browser,
)
from bs4 import BeautifulSoup
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from ppo_viz.app import WIDGET_VIEW_MIME, image_tag
from ppo_viz.export import (
    FIGURE_REPR,
    MATHJAX_DIR,
    WIDGET_REPR,
    WIDGET_STATE_MIME,
    ExportError,
    copy_mathjax,
    execute_notebook,
    export_notebook,
    main,
    make_static,
    notebook_paths,
    static_outputs,
    write_page,
)
from ppo_viz.html import page, tag
from ppo_viz.style import stylesheet

PNG_BYTES = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201a5f6e5d40000000049454e44ae426082"
)
PNG_1PX = base64.b64encode(PNG_BYTES).decode("ascii")
WIDGET_VIEW = {"version_major": 2, "version_minor": 0, "model_id": "abc123"}
#: An app's HTML fallback: its readouts, then the figure inline (as App.static_fallback).
APP_HTML = str(page(tag("b", "eps = 0.2"), image_tag(PNG_BYTES, "the figure")))


def app_output(**data: Any) -> Any:
    """An execute_result like ppo_viz.app.App's bundle: widget view plus fallbacks."""
    bundle = {WIDGET_VIEW_MIME: WIDGET_VIEW, "text/plain": "Interactive figure (open ...)"}
    bundle.update(data)
    return new_output("execute_result", data=bundle, execution_count=1)


# -- fast: live outputs to static ones ---------------------------------------------------------


def test_app_bundle_keeps_its_png_and_loses_the_widget_view() -> None:
    (output,) = static_outputs([app_output(**{"image/png": PNG_1PX})], "nb")
    assert WIDGET_VIEW_MIME not in output["data"]
    assert output["data"]["image/png"] == PNG_1PX


def test_an_apps_readouts_are_shown_above_its_png_and_the_inline_copy_goes() -> None:
    outputs = static_outputs([app_output(**{"image/png": PNG_1PX, "text/html": APP_HTML})], "nb")
    assert [sorted(o["data"]) for o in outputs] == [["text/html"], ["image/png", "text/plain"]]
    html = outputs[0]["data"]["text/html"]
    assert "<b>eps = 0.2</b>" in html
    assert "<img" not in html  # the figure is shown once, from the PNG file
    assert "<style>" not in html  # the page carries the stylesheet once, in its head
    assert outputs[1]["data"]["image/png"] == PNG_1PX


def test_a_widget_without_fallback_shows_what_its_output_widget_holds() -> None:
    """``ipywidgets.interact``: a VBox of sliders and an Output holding the figure."""
    figure = new_output("display_data", data={"image/png": PNG_1PX, "text/plain": "<Figure>"})
    state = {
        "abc123": {
            "model_name": "VBoxModel",
            "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_o"]},
        },
        "s": {"model_name": "FloatSliderModel", "state": {"value": 0.2}},
        "o": {"model_name": "OutputModel", "state": {"outputs": [figure]}},
    }
    interact = new_output(
        "display_data",
        data={WIDGET_VIEW_MIME: WIDGET_VIEW, "text/plain": "interactive(children=(FloatSlider("},
    )
    (output,) = static_outputs([interact], "nb", state)
    assert output["data"]["image/png"] == PNG_1PX
    notebook = new_notebook(cells=[new_code_cell("interact(f)", outputs=[interact])])
    notebook.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": state}}
    (cell,) = make_static(notebook, "nb").cells
    assert cell.outputs[0]["data"]["image/png"] == PNG_1PX


def test_a_bare_widget_is_refused_with_a_useful_message() -> None:
    bare = new_output(
        "execute_result",
        data={WIDGET_VIEW_MIME: WIDGET_VIEW, "text/plain": "FloatSlider(value=0.2)"},
        execution_count=1,
    )
    with pytest.raises(ExportError, match=r"cell 3: displays a widget with no static fallback"):
        static_outputs([bare], "cell 3")


@pytest.mark.parametrize(
    "text",
    [
        "FloatSlider(value=0.2, description='eps', max=1.0)",
        "VBox(children=(FloatSlider(value=0.2),))",
        "<Figure size 640x480 with 1 Axes>",
    ],
)
def test_a_repr_instead_of_a_figure_is_refused(text: str) -> None:
    output = new_output("execute_result", data={"text/plain": text}, execution_count=1)
    with pytest.raises(ExportError, match="bare repr"):
        static_outputs([output], "nb, cell 1")


def test_ordinary_text_results_pass_through() -> None:
    output = new_output("execute_result", data={"text/plain": "(-0.5375, 0.5)"}, execution_count=1)
    assert static_outputs([output], "nb") == [output]


def test_nbconvert_shows_the_fallback_when_no_widget_state_is_saved() -> None:
    """What the export relies on twice over: nbconvert itself skips stateless widget views."""
    from nbconvert import HTMLExporter

    notebook = new_notebook(
        cells=[new_code_cell("app", outputs=[app_output(**{"image/png": PNG_1PX})])]
    )
    page, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    assert f"data:image/png;base64,{PNG_1PX}" in page
    assert "abc123" not in page  # no widget view rendered
    assert "Interactive figure" not in page  # the text fallback is not what is shown


def test_static_page_has_no_widget_state_and_the_stylesheet_once(tmp_path: Path) -> None:
    bundle = {"image/png": PNG_1PX, "text/html": APP_HTML}
    notebook = new_notebook(
        cells=[new_code_cell("app", outputs=[app_output(**bundle)]) for _ in range(2)]
    )
    notebook.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": {}}}
    static = make_static(notebook, "nb")
    assert "widgets" not in static.metadata
    assert "widgets" in notebook.metadata  # the executed notebook itself is left alone
    html_name, figures = write_page(static, "page", tmp_path, "mathjax/MathJax.js")
    page = (tmp_path / html_name).read_text()
    assert "widget-state" not in page
    assert "abc123" not in page
    assert page.count(stylesheet()) == 1
    assert PNG_1PX not in page  # each figure is linked as a file, not inlined
    assert figures == [
        {
            "index": index,
            "id": static.cells[index].id,
            "files": [f"page_files/page_{index}_1.png"],
            "alt": "Interactive figure (open ...)",
        }
        for index in range(2)
    ]
    for figure in figures:
        assert (tmp_path / figure["files"][0]).read_bytes() == PNG_BYTES
        assert f'src="{figure["files"][0]}"' in page


# -- fast: the site's own MathJax -------------------------------------------------------------


def script_sources(html: str) -> list[str]:
    """The ``src`` of every ``<script>`` of a page, in order."""
    soup = BeautifulSoup(html, features="html.parser")
    return [str(script["src"]) for script in soup.find_all("script", src=True)]


def test_a_page_loads_only_the_sites_own_mathjax(tmp_path: Path) -> None:
    """No script from a CDN: MathJax from ``mathjax/`` next to the page, require.js dropped."""
    url = copy_mathjax(tmp_path)
    notebook = new_notebook(cells=[new_markdown_cell("# Title\n\nThe ratio $r$.")])
    html_name, _ = write_page(notebook, "page", tmp_path, url)
    (source,) = script_sources((tmp_path / html_name).read_text())
    assert source == url
    assert source.startswith(f"{MATHJAX_DIR}/MathJax.js?config=")  # relative: any host, or disk
    assert (tmp_path / source.split("?")[0]).is_file()
    config = source.split("config=")[1].split(",")
    assert all((tmp_path / MATHJAX_DIR / "config" / f"{name}.js").is_file() for name in config)


def test_a_page_with_javascript_outputs_keeps_require_js(tmp_path: Path) -> None:
    script = new_output("display_data", data={"application/javascript": "console.log(1)"})
    notebook = new_notebook(cells=[new_code_cell("js", outputs=[script])])
    html_name, _ = write_page(notebook, "page", tmp_path, "mathjax/MathJax.js")
    sources = script_sources((tmp_path / html_name).read_text())
    assert any(source.endswith("require.min.js") for source in sources)


def test_the_sites_copy_of_mathjax_is_small_and_keeps_its_licence(tmp_path: Path) -> None:
    """Only what TeX and the HTML-CSS output load: 2.4 MB, of the package's 9.6 MB."""
    copy_mathjax(tmp_path)
    files = [path for path in (tmp_path / MATHJAX_DIR).rglob("*") if path.is_file()]
    megabytes = sum(path.stat().st_size for path in files) / 1e6
    assert megabytes < 3, f"the site's MathJax takes {megabytes:.1f} MB in {len(files)} files"
    assert "Apache License" in (tmp_path / MATHJAX_DIR / "LICENSE").read_text()


# -- fast: what is wrong is said in one line, before any notebook runs -------------------------


@dataclass
class ExportRun:
    """The command run on a folder holding one notebook that leaves a mark when it runs."""

    tmp_path: Path
    notebooks: Path = field(init=False)
    mark: Path = field(init=False)

    def __post_init__(self) -> None:
        self.notebooks = self.tmp_path / "notebooks"
        self.notebooks.mkdir()
        self.mark = self.tmp_path / "the notebook ran"
        cell = new_code_cell(f"open({str(self.mark)!r}, 'w').close()")
        nbformat.write(new_notebook(cells=[cell]), self.notebooks / "01_marks.ipynb")

    def error_line(self, capsys: Any, *argv: str) -> str:
        """Run ``python -m ppo_viz.export *argv``; check it stopped at once; its one line."""
        status = main([*argv, "--notebooks", str(self.notebooks)])
        printed = capsys.readouterr()
        lines = printed.err.splitlines()
        assert status == 2
        assert printed.out == ""  # not even "exporting 01_marks.ipynb ..."
        assert not self.mark.exists()
        assert len(lines) == 1, printed.err
        assert lines[0].startswith("error: ")
        return lines[0]


@pytest.fixture
def export_run(tmp_path: Path) -> ExportRun:
    return ExportRun(tmp_path)


def test_an_output_path_that_is_a_file(export_run: ExportRun, capsys: Any) -> None:
    out = export_run.tmp_path / "site.html"
    out.write_text("an old page")
    line = export_run.error_line(capsys, str(out))
    assert line == f"error: {out} is a file, not a folder: give a folder for the site"
    assert out.read_text() == "an old page"


def test_an_output_path_under_a_file(export_run: ExportRun, capsys: Any) -> None:
    blocker = export_run.tmp_path / "build"
    blocker.write_text("")
    line = export_run.error_line(capsys, str(blocker / "site" / "week1"))
    assert line == f"error: cannot create {blocker}/site/week1: {blocker} is a file, not a folder"


def test_an_output_folder_no_file_can_be_created_in(export_run: ExportRun, capsys: Any) -> None:
    """``/proc`` takes no new file, even from root, whatever its permission bits say."""
    line = export_run.error_line(capsys, f"/proc/ppo-export-{uuid.uuid4().hex}/site")
    assert line.startswith("error: cannot write into /proc: a file cannot be created there (")


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root writes into a folder of mode 0o555 anyway; the /proc test covers root",
)
def test_a_read_only_output_folder(export_run: ExportRun, capsys: Any) -> None:
    locked = export_run.tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        line = export_run.error_line(capsys, str(locked / "site"))
    finally:
        locked.chmod(0o755)
    assert line == f"error: cannot write into {locked}: permission denied"


def test_a_missing_notebooks_folder(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "notebooks"
    assert main([str(tmp_path / "site"), "--notebooks", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"error: no folder {missing} (the notebooks to export); pass --notebooks DIR\n"
    )
    assert not (tmp_path / "site").exists()


def test_a_notebooks_folder_without_notebooks(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "notes.ipynb").write_text("{}")  # not NN_*.ipynb
    assert main([str(tmp_path / "site"), "--notebooks", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: no notebooks (NN_*.ipynb) in {tmp_path}\n"


def test_without_the_mathjax_package(
    export_run: ExportRun, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "jupyter_server_mathjax", None)  # as if not installed
    line = export_run.error_line(capsys, str(export_run.tmp_path / "site"))
    assert "jupyter-server-mathjax, which is not installed" in line
    assert "--mathjax-url" in line


# -- with a kernel: the fixture notebook and the command line ----------------------------------


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_command_line_exports_a_folder_of_notebooks(tmp_path: Path) -> None:
    """``python -m ppo_viz.export OUT --notebooks DIR`` writes pages, PNGs, MathJax, index."""
    source = tmp_path / "notebooks"
    source.mkdir()
    shutil.copy(FIXTURE_NOTEBOOK, source / "01_smoke.ipynb")
    shutil.copy(FIXTURE_NOTEBOOK.parent / "smoke_app.py", source / "smoke_app.py")
    out = tmp_path / "site"
    assert main([str(out), "--notebooks", str(source)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    (page,) = manifest["pages"]
    assert page["html"] == "01_smoke.html"
    assert page["title"] == "Smoke test for the browser harness"
    assert page["warnings"] == []
    (figure,) = page["figure_cells"]
    assert (out / figure["files"][0]).read_bytes().startswith(b"\x89PNG")
    index = (out / "index.html").read_text()
    assert 'href="01_smoke.html"' in index
    assert stylesheet() in index
    html = (out / "01_smoke.html").read_text()
    assert f'src="{figure["files"][0]}"' in html
    assert WIDGET_VIEW_MIME not in html
    assert "sample 0" in html  # the app's readout, above its figure
    (mathjax,) = script_sources(html)
    assert (out / mathjax.split("?")[0]).is_file()


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_mathjax_url_loads_mathjax_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``--mathjax-url`` the site has no copy, and needs no package for one."""
    monkeypatch.setitem(sys.modules, "jupyter_server_mathjax", None)  # as if not installed
    source = tmp_path / "notebooks"
    source.mkdir()
    notebook = new_notebook(cells=[new_markdown_cell("# Formulas\n\n$r = 1$")])
    nbformat.write(notebook, source / "01_formulas.ipynb")
    cdn = "https://cdn.example.org/mathjax/2.7.9/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    out = tmp_path / "site"
    assert main([str(out), "--notebooks", str(source), "--mathjax-url", cdn]) == 0
    assert script_sources((out / "01_formulas.html").read_text()) == [cdn]
    assert not (out / MATHJAX_DIR).exists()


@pytest.mark.notebook
def test_a_kernel_draws_inline_whatever_backend_this_process_has(monkeypatch: Any) -> None:
    """``MPLBACKEND=Agg`` here (as some tools set) must not blank ``plt.show()`` there."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cell = new_code_cell("import matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()")
    (cell,) = execute_notebook(new_notebook(cells=[cell])).cells
    assert any("image/png" in output.get("data", {}) for output in cell.outputs)


def processes_with(variable: str) -> list[int]:
    """The ids of the running processes whose environment holds ``variable`` (Linux)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if variable.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.notebook
@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_ctrl_c_during_a_notebook_stops_with_one_line(tmp_path: Path) -> None:
    """Ctrl-C while a cell runs: one line, status 130, no traceback, no kernel left running."""
    source = tmp_path / "notebooks"
    source.mkdir()
    started = tmp_path / "the cell started"
    cell = new_code_cell(f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(100)")
    nbformat.write(new_notebook(cells=[cell]), source / "01_slow.ipynb")
    tag_variable = f"PPO_EXPORT_TEST_{uuid.uuid4().hex}"
    command = [sys.executable, "-m", "ppo_viz.export", str(tmp_path / "site")]
    run = subprocess.Popen(
        [*command, "--notebooks", str(source)],
        cwd=REPO_ROOT,
        env={**os.environ, tag_variable: "1"},  # the kernel inherits it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "the notebook's cell never started"
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == f"interrupted: {tmp_path / 'site'} holds only part of the site"
    assert out.splitlines() == ["exporting 01_slow.ipynb ..."]
    deadline = time.monotonic() + 10
    while processes_with(tag_variable) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(tag_variable) == [], "the notebook's kernel is still running"


# -- in the browser, offline: pages opened from disk with the network blocked ------------------


@dataclass
class OfflineBrowser:
    """A headless Chromium that may read files only: every http(s) request is aborted."""

    context: Any
    blocked: list[str] = field(default_factory=list)

    def route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("http:", "https:")):
            self.blocked.append(url)
            route.abort()
        else:
            route.continue_()

    def open(self, html: Path) -> Any:
        """A new tab showing ``html``, with MathJax done typesetting (if it loaded)."""
        page = self.context.new_page()
        self.blocked.clear()
        page.goto(html.as_uri(), wait_until="load")
        page.evaluate(MATHJAX_FINISHED)
        return page


#: Resolves when MathJax 2 has started and typeset the page, or at once without MathJax.
#: (A hook that returned the queued callback would make MathJax's start wait for it.)
MATHJAX_FINISHED = """() => new Promise(resolve => {
    if (!window.MathJax || !window.MathJax.Hub) { resolve(false); return; }
    MathJax.Hub.Register.StartupHook("End", () => { MathJax.Hub.Queue(() => resolve(true)); });
})"""


@pytest.fixture(scope="module")
def offline_browser() -> Iterator[OfflineBrowser]:
    require_browser()
    with chromium_context() as context:
        browser = OfflineBrowser(context)
        context.route("**/*", browser.route)
        yield browser


#: TeX left on screen: text between dollar signs, a command such as ``\frac``, or ``\(``.
RAW_TEX = re.compile(r"\$[^$]+\$|\\[A-Za-z]+|\\[(\[]")


def formula_problems(page: Any) -> list[str]:
    """What a reader would see wrong with the formulas: MathJax missing, raw TeX, bad fonts."""
    if not page.evaluate("() => Boolean(window.MathJax && window.MathJax.Hub)"):
        return ["MathJax did not load: formulas show as TeX source"]
    found = []
    for text in page.locator(".jp-MarkdownOutput").all_inner_texts():
        for line in text.splitlines():
            if RAW_TEX.search(line):
                found.append(f"raw TeX on screen: {line.strip()[:200]}")
    fonts = page.evaluate(
        "() => Array.from(document.fonts).filter(f => f.family.startsWith('STIXMathJax'))"
        ".map(f => f.family + ': ' + f.status)"
    )
    if page.locator(".MathJax").count() and not any(f.endswith("loaded") for f in fonts):
        found.append(f"MathJax's web fonts did not load: {fonts}")
    found += [f"font failed: {font}" for font in fonts if font.endswith("error")]
    return found


#: Every delimiter JupyterLab typesets in Markdown, a macro MathJax loads on demand
#: (``\boldsymbol``), an environment its output loads code for (``cases``), and an escaped
#: dollar sign.
FORMULAS_MARKDOWN = r"""# Formulas offline

Inline: $r_t(\theta) = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\theta_\text{old}}(a_t \mid s_t)}$,
the other way \\(\epsilon = 0.2\\), and in bold $\boldsymbol{\theta}$.

$$L^{\text{CLIP}}(\theta) = \mathbb{E}_t\Big[\min\big(r_t A_t,\
\operatorname{clip}(r_t, 1-\epsilon, 1+\epsilon) A_t\big)\Big]$$

\\[ \nabla_\theta L = \sum_t g_t \\]

$$\operatorname{clip}(r) = \begin{cases} 1-\epsilon & r < 1-\epsilon \\ r & \text{otherwise}
\end{cases}$$

A price of \$5 is not a formula.
"""


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_formulas_are_typeset_offline_by_the_sites_own_mathjax(
    offline_browser: OfflineBrowser, tmp_path: Path
) -> None:
    notebook = new_notebook(cells=[new_markdown_cell(FORMULAS_MARKDOWN)])
    html_name, _ = write_page(notebook, "formulas", tmp_path, copy_mathjax(tmp_path))
    page = offline_browser.open(tmp_path / html_name)
    try:
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "export-formulas-offline.png"), full_page=True)
        assert formula_problems(page) == []
        assert page.locator(".MathJax").count() == 6  # three inline, three displayed
        assert page.locator(".MathJax_Display").count() == 3
        assert page.get_by_text("A price of $5 is not a formula.").count() == 1
        assert offline_browser.blocked == []
    finally:
        page.close()


# -- in the browser: every course notebook's page, opened from disk ----------------------------


@pytest.fixture(scope="module")
def site() -> Path:
    """The folder the pages are exported to (kept under test-output/ for a look)."""
    folder = OUTPUT_DIR.parent / "export-site"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    return folder


def page_problems(page: Any) -> list[str]:
    """Errors, stderr blocks and bare reprs visible in an exported page."""
    found = []
    stderr = page.locator('[data-mime-type="application/vnd.jupyter.stderr"]')
    found += [f"stderr/error output: {t.strip()[:300]}" for t in stderr.all_inner_texts()]
    for text in page.locator(".jp-OutputArea-output").all_inner_texts():
        for pattern in (*PROBLEM_PATTERNS, WIDGET_REPR, FIGURE_REPR):
            if pattern.search(text):
                found.append(f"output matching {pattern.pattern!r}: {text.strip()[:300]}")
    return found


def figure_cell_images(page: Any, cell_id: str) -> list[dict[str, Any]]:
    """Each <img> in the exported cell: its src, whether it loaded, and its size on screen."""
    cell = page.locator(f'[id="cell-id={cell_id}"]')
    assert cell.count() == 1, f"no cell with id {cell_id} in the page"
    return cell.locator(".jp-OutputArea-output img").evaluate_all(
        """images => images.map(img => ({
            src: img.getAttribute('src'),
            loaded: img.complete && img.naturalWidth > 0,
            width: img.getBoundingClientRect().width,
        }))"""
    )


def export_targets() -> list[Any]:
    paths = notebook_paths()
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no notebooks/NN_*.ipynb yet"))]
    return [pytest.param(path, id=path.stem) for path in paths]


@pytest.mark.browser
@pytest.mark.notebook
@pytest.mark.timeout(240)
@pytest.mark.parametrize("notebook", export_targets())
def test_exported_page_shows_every_figure_and_formula_offline(
    offline_browser: OfflineBrowser, site: Path, notebook: Path
) -> None:
    """Export one notebook, open its page from disk offline: every figure and formula shows."""
    report = export_notebook(notebook, site)
    assert report.warnings == [], f"{notebook.name} prints to stderr: {report.warnings}"
    minimum = expectation_for(notebook).min_figures
    assert len(report.figure_cells) >= minimum, (
        f"{notebook.name}: {len(report.figure_cells)} figure cell(s) in the export, "
        f"expected at least {minimum}"
    )
    page = offline_browser.open(site / report.html)
    try:
        failures = page_problems(page) + formula_problems(page)
        for cell in report.figure_cells:
            images = figure_cell_images(page, cell["id"])
            if not images or not all(i["loaded"] and i["width"] > 50 for i in images):
                failures.append(f"cell {cell['index']}: figure not shown ({images})")
        failures += [f"asked the network for {url}" for url in offline_browser.blocked]
        page.screenshot(path=str(OUTPUT_DIR / f"export-{notebook.stem}.png"), full_page=True)
        assert not failures, f"{report.html}:\n" + "\n".join(failures)
    finally:
        page.close()


def test_fixture_notebook_is_valid() -> None:
    """The harness's own notebook stays a clean, output-free nbformat 4 document."""
    notebook = nbformat.read(FIXTURE_NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    assert "widgets" not in notebook.metadata
