"""The course-site export (``python -m ppo_viz.export build/site``).

Fast tests (no kernel): a live figure's bundle becomes its picture on a page, an ``interact``
shows the figure its ``Output`` widget holds, a bare widget or figure repr is refused, pages
load MathJax from the site's own small copy and nothing from a CDN, and every up-front check
stops the command with one line before any notebook runs.  Notebook-marked tests run the
command on the fixture notebook (pages, figures, index, warnings), on a notebook that raises,
and stop a run with Ctrl-C.  The browser test opens notebook 1's page from disk with the network
blocked: it shows every figure, and formulas in every delimiter JupyterLab knows are typeset.
The other notebooks' pages are checked in test_notebooks.py.
"""

from __future__ import annotations

import copy
import io
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import nbformat
import psutil  # installed with ipykernel
import pytest
from browser_support import (
    FIXTURE_NOTEBOOK,
    OUTPUT_DIR,
    REPO_ROOT,
    chromium_context,
    page_problems,
    require_browser,
)
from bs4 import BeautifulSoup
from helpers import ANY_NOTEBOOK, file_behind
from matplotlib.figure import Figure
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from notebook_runner import NOTEBOOK_DIR, figure_count, run_committed
from PIL import Image

from ppo_viz import export
from ppo_viz.app import LiveFigure
from ppo_viz.controls import slider
from ppo_viz.export import (
    WIDGET_STATE_MIME,
    WIDGET_VIEW_MIME,
    ExportError,
    execute_notebook,
    make_static,
)
from ppo_viz.export.__main__ import MATHJAX_DIR, SITE_TITLE, copy_mathjax, main, write_page
from ppo_viz.style import stylesheet


def live_figure(readout: str | None) -> LiveFigure:
    """A small live figure: an eps slider, one line, and ``readout`` above the figure."""
    figure = Figure(figsize=(3, 2))
    (line,) = figure.subplots().plot([0, 1], [0, 1])

    def update(eps: float) -> str | None:
        line.set_ydata([0, eps])
        return readout

    return LiveFigure(figure, update, {"eps": slider("eps", 0.2, (0.0, 1.0), 0.1)}, moving=[line])


def displayed(thing: Any) -> Any:
    """The output a notebook stores when ``thing`` is a cell's last expression."""
    return new_output("execute_result", data=thing._repr_mimebundle_(), execution_count=1)


def page_of(tmp_path: Path, *outputs: Any, mathjax_url: str = "mathjax/MathJax.js") -> str:
    """The HTML of the page written for a notebook with one cell per output."""
    notebook = new_notebook(cells=[new_code_cell("x", outputs=[output]) for output in outputs])
    write_page(notebook, "page", tmp_path, mathjax_url)
    return (tmp_path / "page.html").read_text()


def sources(html: str, element: str = "img") -> list[str]:
    """The ``src`` of every ``element`` of a page that has one (a picture, a script), in order."""
    return [str(e["src"]) for e in BeautifulSoup(html, "html.parser").find_all(element, src=True)]


# -- fast: what a page shows instead of a widget -----------------------------------------------


@pytest.mark.parametrize("readout", [None, "the band is [0.8, 1.2]"])
def test_a_live_figure_shows_its_picture_a_png_file_and_its_readouts(
    tmp_path: Path, readout: str | None
) -> None:
    """The bundle holds the live widget (where widgets run) and the figure's picture as on
    screen; on the page, without readouts the picture is the PNG file; with them, their HTML
    holds it inline."""
    app = live_figure(readout)
    bundle = app._repr_mimebundle_()
    assert bundle[WIDGET_VIEW_MIME]["model_id"] == app.model_id
    assert bundle["text/plain"] == "Interactive figure (run the notebook to use it)"
    assert Image.open(io.BytesIO(app.png())).size == (300, 200)  # 3 x 2 inches at 100 dpi
    page = page_of(tmp_path, displayed(app))
    (source,) = sources(page)
    assert [path.read_bytes() for path in (tmp_path / "page_files").iterdir()] == [app.png()]
    if readout is None:  # the picture is the PNG file
        assert (tmp_path / source).read_bytes() == app.png()
        assert re.fullmatch(r"page_files/.+\.png", source), source
    else:
        assert readout in page
        assert stylesheet() in page  # the readouts keep the bundle's look
        assert source.startswith("data:image/png;base64,")
    assert "run the notebook to use it" not in page  # the text line is not what is shown
    assert WIDGET_VIEW_MIME not in page
    assert "widget-state" not in page


def test_an_interact_shows_the_figure_its_output_widget_holds_and_other_outputs_pass() -> None:
    figure = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<F>"})
    state = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_o"]}},
        "s": {"model_name": "FloatSliderModel", "state": {"value": 0.2}},
        "o": {"model_name": "OutputModel", "state": {"outputs": [figure]}},
    }
    view = {"version_major": 2, "version_minor": 0, "model_id": "box"}
    repr_ = "interactive(children=(FloatSlider(value=0.2, description='eps'), Output()))"
    interact = new_output("display_data", data={WIDGET_VIEW_MIME: view, "text/plain": repr_})
    numbers = "(-0.5375, 0.5, array([0., -0.55, 0., 0.1125]))"
    result = new_output("execute_result", data={"text/plain": numbers}, execution_count=1)
    printed = new_output("stream", name="stdout", text="eps = 0.2\n")
    notebook = new_notebook(cells=[new_code_cell("x", outputs=[result, interact, printed])])
    notebook.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": state}}
    (cell,) = make_static(notebook, "nb").cells
    assert cell.outputs == [result, figure, printed]
    assert "widgets" in notebook.metadata  # the executed notebook itself is left alone


@pytest.mark.parametrize(
    "shown",
    [
        widgets.FloatSlider(value=0.2, description="eps")._repr_mimebundle_(),
        {"text/plain": "VBox(children=(FloatSlider(value=0.2),))"},
        {"text/plain": repr(widgets.IntSlider(value=3))},
        {"text/plain": repr(Figure(figsize=(6.4, 4.8)))},
    ],
    ids=["a widget without a picture", "a widget repr", "a slider's repr", "a figure repr"],
)
def test_a_page_that_would_show_a_repr_is_refused_naming_the_cell(shown: dict) -> None:
    output = new_output("execute_result", data=shown, execution_count=1)
    notebook = new_notebook(cells=[new_markdown_cell("# Hi"), new_code_cell("x", outputs=[output])])
    with pytest.raises(ExportError, match=r"^nb, cell 1 shows .*, not a picture"):
        make_static(notebook, "nb")


# -- fast: nothing from the network, MathJax from the site's own copy --------------------------


def test_pages_load_scripts_only_from_the_sites_own_small_mathjax(tmp_path: Path) -> None:
    """The copy is only what TeX input and the HTML-CSS output load: 2.4 MB of the package's
    9.6 MB, with its licence and the page's web font."""
    url = copy_mathjax(tmp_path)
    page = page_of(tmp_path, displayed(live_figure(readout="r")), mathjax_url=url)
    assert sources(page, "script") == [url]  # no require.js, which only a CDN serves
    assert url.startswith(f"{MATHJAX_DIR}/MathJax.js?config=")  # relative: any host, or disk
    assert (tmp_path / url.split("?")[0]).is_file()
    for name in url.split("config=")[1].split(","):
        assert (tmp_path / MATHJAX_DIR / "config" / f"{name}.js").is_file()
    assert not re.search(r"""(src|href)=["']https?:""", page)
    files = [path for path in (tmp_path / MATHJAX_DIR).rglob("*") if path.is_file()]
    megabytes = sum(path.stat().st_size for path in files) / 1e6
    assert megabytes < 3, f"the site's MathJax takes {megabytes:.1f} MB in {len(files)} files"
    assert "Apache License" in (tmp_path / MATHJAX_DIR / "LICENSE").read_text()
    assert list((tmp_path / MATHJAX_DIR).rglob("STIX-Web/woff/*.woff"))  # the page's web font


def test_mathjax_url_loads_mathjax_from_elsewhere(tmp_path: Path) -> None:
    cdn = "https://cdn.example.org/mathjax/2.7.9/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    assert sources(page_of(tmp_path, mathjax_url=cdn), "script") == [cdn]


# -- fast: what is wrong is said in one line, before any notebook runs -------------------------
# Each setup gets a scratch folder (and pytest's monkeypatch) and returns the command's
# arguments and the one line it must print: a str exactly, a compiled pattern in full.


def output_is_a_file(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    (out := tmp / "site.html").write_text("an old page")  # left as it was, as every file
    return [str(out)], f"error: cannot write the site into {out}: {out} is a file, not a folder"


def output_under_a_file(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    (blocker := tmp / "build").write_text("")
    out = blocker / "site" / "week1"
    return [str(out)], f"error: cannot write the site into {out}: {blocker} is a file, not a folder"


def output_where_nothing_can_be_made(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list, Any]:
    """``/proc`` takes no new folder or file, even from root, whatever its permission bits say."""
    out = f"/proc/ppo-export-{uuid.uuid4().hex}/site"
    return [out], re.compile(re.escape(f"error: cannot write the site into {out}") + ".*")


def read_only_output(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    (locked := tmp / "locked").mkdir(mode=0o555)
    return [str(locked)], f"error: cannot write the site into {locked}: permission denied"


def time_limit(seconds: str) -> Any:
    """nbclient reads a timeout of 0 or less as "no limit": a hung cell would hang the export."""

    def setup(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], str]:
        message = f"error: --timeout must be a positive number of seconds, not {seconds}"
        return [str(tmp / "site"), "--timeout", seconds], message

    return pytest.param(setup, id=f"time-limit-{seconds}")


def notebooks_folder(kind: str) -> Any:
    """A --notebooks folder that is missing, holds no NN_*.ipynb, or is a file."""

    def setup(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], str]:
        notebooks = tmp / kind
        if kind == "empty":
            notebooks.mkdir()
            (notebooks / "notes.ipynb").write_text("{}")
        elif kind == "a file":
            notebooks.write_text("{}")
        message = f"error: no notebooks (NN_*.ipynb) in {notebooks}; pass --notebooks DIR"
        return [str(tmp / "site"), "--notebooks", str(notebooks)], message

    return pytest.param(setup, id=f"notebooks-folder-{kind}")


def a_notebook_that_is_not_one(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    """nbformat's NotJSONError ended the export in a traceback."""
    (corrupt := tmp / "notebooks" / "02_corrupt.ipynb").write_text("not json")
    return [str(tmp / "site")], f"error: {corrupt.resolve()} is not a readable notebook"


def without_mathjax(tmp: Path, patch: pytest.MonkeyPatch) -> tuple[list[str], Any]:
    patch.setitem(sys.modules, "jupyter_server_mathjax", None)  # as if not installed
    (tmp / "site").mkdir()  # an output folder there already (the command makes it first)
    return [str(tmp / "site")], re.compile("error: .*no jupyter-server-mathjax.*--mathjax-url.*")


def files_in(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``folder``."""
    return {str(p): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


@pytest.mark.parametrize(
    "setup",
    [
        output_is_a_file,
        output_under_a_file,
        output_where_nothing_can_be_made,
        pytest.param(
            read_only_output,
            marks=pytest.mark.skipif(
                hasattr(os, "geteuid") and os.geteuid() == 0,
                reason="root writes into a folder of mode 0o555 anyway; /proc's row covers root",
            ),
        ),
        *map(time_limit, ["0", "-5"]),
        *map(notebooks_folder, ["missing", "empty", "a file"]),
        without_mathjax,
        a_notebook_that_is_not_one,
    ],
    ids=lambda setup: setup.__name__,
)
def test_a_bad_call_stops_with_one_line_before_any_notebook_runs(
    setup: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Status 2; one line on stderr, nothing on stdout (not even "exporting 01_marks.ipynb
    ..."); the notebook (which leaves a mark when it runs) not run; no file written or changed."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    mark = tmp_path / "the notebook ran"
    cell = new_code_cell(f"open({str(mark)!r}, 'w').close()")
    nbformat.write(new_notebook(cells=[cell]), notebooks / "01_marks.ipynb")
    argv, expected = setup(tmp_path, monkeypatch)
    before = files_in(tmp_path)
    status = main(["--notebooks", str(notebooks), *argv])
    printed = capsys.readouterr()
    assert (status, printed.out) == (2, "")
    line = printed.err.removesuffix("\n")
    assert "\n" not in line
    assert expected.fullmatch(line) if isinstance(expected, re.Pattern) else line == expected
    assert files_in(tmp_path) == before
    assert not mark.exists()


@pytest.mark.parametrize(
    ("notebook", "timeout_s", "error", "said"),
    [
        *[(new_notebook(), t, ValueError, "timeout_s must be") for t in (0, math.nan, math.inf)],
        *[(new_notebook(), t, TypeError, "timeout_s must be") for t in ("60", True)],
        ({"cells": []}, 60, TypeError, "notebook must be a path or a notebook, got dict"),
    ],
)
def test_the_runner_refuses_no_notebook_or_a_time_limit_that_is_no_limit(
    notebook: Any, timeout_s: Any, error: type, said: str
) -> None:
    with pytest.raises(error, match=said):
        execute_notebook(notebook, timeout_s=timeout_s)


# -- with a kernel: the command line -----------------------------------------------------------


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_command_line_exports_pages_figures_and_an_index(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m ppo_viz.export OUT --notebooks DIR`` on the fixture notebook and a plot, with
    ``MPLBACKEND=Agg`` in this process (as some tools set): the export still draws
    ``plt.show()`` inline."""
    source, out = tmp_path / "notebooks", tmp_path / "site"
    source.mkdir()
    shutil.copy(FIXTURE_NOTEBOOK, source / "01_smoke.ipynb")
    shutil.copy(FIXTURE_NOTEBOOK.parent / "smoke_app.py", source / "smoke_app.py")
    plot = "import sys\nimport matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()\n"
    cells = [new_markdown_cell("# A plot"), new_code_cell(plot + "print('hm', file=sys.stderr)")]
    nbformat.write(new_notebook(cells=cells), source / "02_plot.ipynb")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    status = main([str(out), "--notebooks", str(source)])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert "  -> 01_smoke.html with 1 figure(s)" in printed.out.splitlines()
    assert "warning: 02_plot.ipynb, cell 1 shows a warning or error: hm" in printed.err
    for page in ("01_smoke.html", "02_plot.html"):
        (figure,) = sources((out / page).read_text())  # drawn inline although MPLBACKEND=Agg
        assert (out / figure).read_bytes().startswith(b"\x89PNG")


#: A 1x1 PNG, a figure on every page of the ANY_NOTEBOOK test.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
    "DwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def with_a_figure(path: Path, **_: Any) -> nbformat.NotebookNode:
    """The notebook at ``path`` "executed": a cell that shows a PNG added."""
    notebook = nbformat.read(path, as_version=4)
    figure = new_output("display_data", data={"image/png": PNG})
    notebook.cells.append(new_code_cell("figure", outputs=[figure]))
    return notebook


@pytest.mark.parametrize(("name", "title"), ANY_NOTEBOOK)
def test_the_index_and_the_pages_link_any_notebook_by_its_title_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, title: str | None
) -> None:
    """The index's ``[title](file)`` lost the link for a space, ``]`` or ``"``, sent ``#``,
    ``?`` and ``%25`` elsewhere and showed ``<i>`` as markup; a page's ``href="..."`` broke at
    a ``"``; a notebook without cells stopped the export with an IndexError; a figure's ``src``
    was the stem unencoded (``#``, ``?``, ``%25``: no picture)."""
    source, out = tmp_path / "notebooks", tmp_path / "site"
    source.mkdir()
    cells = [new_markdown_cell(f"# {title}")] if title else []
    nbformat.write(new_notebook(cells=cells), source / name)
    nbformat.write(new_notebook(cells=[new_markdown_cell("# Next")]), source / "02_next.ipynb")
    monkeypatch.setattr(export, "execute_notebook", with_a_figure)
    assert main([str(out), "--notebooks", str(source), "--mathjax-url", "mathjax.js"]) == 0
    page, shown = f"{Path(name).stem}.html", title or Path(name).stem
    soup = {p: BeautifulSoup((out / p).read_text(), "html.parser") for p in (page, "02_next.html")}
    index = BeautifulSoup((out / "index.html").read_text(), "html.parser")
    assert index.title.get_text() == SITE_TITLE
    links = [(a.get_text(), file_behind(a["href"])) for a in index.select("li a")]
    assert links == [(shown, page), ("Next", "02_next.html")]
    assert not index.select("ol")  # the titles carry their numbers: no "1. 1 · ..."
    everything = (None, "All notebooks", "index.html")
    pages = {  # each page's title and its links to the previous page, the index and the next
        page: (shown, [everything, (["next"], "Next →", "02_next.html")]),
        "02_next.html": ("Next", [(["prev"], f"← {shown}", page), everything]),
    }
    for at, (page_title, navigation) in pages.items():
        assert soup[at].title.get_text() == page_title
        navs = soup[at].select("nav.ppo-site-nav a")
        shown_links = [(a.get("rel"), a.get_text(), file_behind(a["href"])) for a in navs]
        assert shown_links == navigation * 2  # above and below the page
        (figure,) = sources(str(soup[at]))
        assert (out / file_behind(figure)).is_file(), figure


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_a_notebook_that_raises_stops_the_export_with_its_traceback(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``--mathjax-url`` the site needs no MathJax package, and copies none; the site
    already there is left whole (the new one is built aside and moved in only when done)."""
    monkeypatch.setitem(sys.modules, "jupyter_server_mathjax", None)  # as if not installed
    (tmp_path / "site").mkdir()
    (old := tmp_path / "site" / "index.html").write_text("last week's site")
    source = tmp_path / "notebooks"
    source.mkdir()
    cell = new_code_cell("import ppo_clip\nppo_clip.ppo_clip_loss([0.0], [0.0], [1.0], eps=2.0)")
    nbformat.write(new_notebook(cells=[cell]), source / "01_raises.ipynb")
    cdn = "https://cdn.example.org/mathjax/2.7.9/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    argv = [str(tmp_path / "site"), "--notebooks", str(source), "--mathjax-url", cdn]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("export failed: 01_raises.ipynb did not run to the end:")
    assert "ppo_clip.ppo_clip_loss([0.0], [0.0], [1.0], eps=2.0)" in err  # the cell
    assert "ValueError" in err  # and its error
    assert "\x1b[" not in err  # plain text, as in a log file: no colour codes
    assert not (tmp_path / "site" / MATHJAX_DIR).exists()
    assert old.read_text() == "last week's site"
    assert [p.name for p in (tmp_path / "site").iterdir()] == ["index.html"]  # no page, no temp


def processes_with(variable: str) -> list[int]:
    """The ids of the running processes whose environment holds ``variable``."""
    return [
        p.pid for p in psutil.process_iter(["environ"]) if variable in (p.info["environ"] or {})
    ]


@pytest.mark.notebook
@pytest.mark.timeout(120)
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to the command")
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
    assert err.splitlines()[-1] == f"interrupted: {tmp_path / 'site'} is as it was"
    assert list((tmp_path / "site").iterdir()) == []  # the half-built site is gone
    assert out.splitlines() == ["exporting 01_slow.ipynb ..."]
    deadline = time.monotonic() + 10
    while processes_with(tag_variable) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(tag_variable) == [], "the notebook's kernel is still running"


# -- in the browser, offline: pages opened from disk with the network blocked ------------------


#: Resolves when MathJax 2 has started and typeset the page, or at once without MathJax.
#: (A hook that returned the queued callback would make MathJax's start wait for it.)
MATHJAX_FINISHED = """() => new Promise(resolve => {
    if (!window.MathJax || !window.MathJax.Hub) { resolve(false); return; }
    MathJax.Hub.Register.StartupHook("End", () => { MathJax.Hub.Queue(() => resolve(true)); });
})"""


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


def offline_page_problems(html: Path, figures: int) -> list[str]:
    """What a reader of ``html`` (opened from disk in a narrow window, by a Chromium that may
    read files only: every http(s) request is aborted) sees wrong.

    Errors and bare reprs, formulas not typeset, not ``figures`` pictures each loaded and
    within the page's width, any request to the network; and in the page's last cell
    (:data:`FORMULAS_MARKDOWN`), not its three inline and three displayed formulas, or its
    escaped dollar sign not shown as text.
    """
    blocked: list[str] = []
    with chromium_context() as context:
        context.route(re.compile(r"^https?:"), lambda r: (blocked.append(r.request.url), r.abort()))
        page = context.new_page()
        page.set_viewport_size({"width": 640, "height": 900})  # narrower than a 9-inch figure
        page.goto(html.as_uri(), wait_until="load")
        page.evaluate(MATHJAX_FINISHED)
        page.screenshot(path=str(OUTPUT_DIR / f"export-{html.stem}.png"), full_page=True)
        shown = page.locator(".jp-OutputArea-output img").evaluate_all(
            """images => images.map(img => ({
                loaded: img.complete && img.naturalWidth > 0,
                fits: img.getBoundingClientRect().right <= document.body.clientWidth,
            }))"""
        )
        failures = page_problems(page) + formula_problems(page)
        if len(shown) != figures:
            failures.append(f"{len(shown)} pictures for {figures} figures")
        failures += [
            f"picture {i}: {seen}" for i, seen in enumerate(shown) if not all(seen.values())
        ]
        last = page.locator(".jp-MarkdownCell").last
        typeset = [last.locator(f".{kind}").count() for kind in ("MathJax", "MathJax_Display")]
        if typeset != [6, 3]:
            failures.append(f"{typeset} formulas and displayed ones in the last cell, not [6, 3]")
        if last.get_by_text("A price of $5 is not a formula.").count() != 1:
            failures.append("the escaped dollar sign is not shown as text")
    return failures + [f"asked the network for {url}" for url in blocked]


@pytest.mark.browser
@pytest.mark.notebook
@pytest.mark.timeout(240)
def test_notebook_1s_page_shows_every_figure_and_formula_offline() -> None:
    """Notebook 1 runs once per test session (``run_committed``, shared with test_notebooks);
    its page ends with a cell of formulas in every delimiter JupyterLab knows, typeset by the
    site's own MathJax."""
    require_browser()
    path = NOTEBOOK_DIR / "01_clipped_surrogate.ipynb"
    executed = copy.deepcopy(run_committed(path)[0])
    executed.cells.append(new_markdown_cell(FORMULAS_MARKDOWN))
    site = OUTPUT_DIR.parent / "export-site"  # kept for a look
    site.mkdir(parents=True, exist_ok=True)
    write_page(executed, path.stem, site, copy_mathjax(site))
    figures = figure_count(make_static(executed, path.stem))
    assert figures > 0
    assert stylesheet() in (site / f"{path.stem}.html").read_text()  # the readouts' look
    assert offline_page_problems(site / f"{path.stem}.html", figures) == []
