"""The static export (``python -m ppo_viz.export build/site``) for course sites.

Fast tests (no kernel) check how live outputs become static ones, on the
bundles the apps really display, and that nbconvert's HTML exporter shows an
app's fallback, not its widget, when no widget state is saved.  The
notebook-marked tests run the export on the fixture notebook and the command
line; the browser-marked tests export every notebook in ``notebooks/`` and
open each page from disk in Chromium, asserting that every figure cell shows a
loaded image and no cell shows a widget repr.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import (
    FIXTURE_NOTEBOOK,
    OUTPUT_DIR,
    PROBLEM_PATTERNS,
    chromium_context,
    expectation_for,
    require_browser,
)
from nbformat.v4 import new_code_cell, new_notebook, new_output

from ppo_viz.app import WIDGET_VIEW_MIME, image_tag
from ppo_viz.export import (
    FIGURE_REPR,
    WIDGET_REPR,
    WIDGET_STATE_MIME,
    ExportError,
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
    html_name, figures = write_page(static, "page", tmp_path)
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


# -- with a kernel: the fixture notebook and the command line ----------------------------------


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_command_line_exports_a_folder_of_notebooks(tmp_path: Path) -> None:
    """``python -m ppo_viz.export OUT --notebooks DIR`` writes pages, PNGs, index, manifest."""
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


@pytest.mark.notebook
def test_a_kernel_draws_inline_whatever_backend_this_process_has(monkeypatch: Any) -> None:
    """``MPLBACKEND=Agg`` here (as some tools set) must not blank ``plt.show()`` there."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cell = new_code_cell("import matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()")
    (cell,) = execute_notebook(new_notebook(cells=[cell])).cells
    assert any("image/png" in output.get("data", {}) for output in cell.outputs)


@pytest.mark.notebook
def test_command_line_fails_readably_without_notebooks(tmp_path: Path, capsys: Any) -> None:
    assert main([str(tmp_path / "site"), "--notebooks", str(tmp_path)]) == 1
    assert "no notebooks" in capsys.readouterr().err


# -- in the browser: every course notebook's page, opened from disk ----------------------------


@pytest.fixture(scope="module")
def site() -> Path:
    """The folder the pages are exported to (kept under test-output/ for a look)."""
    folder = OUTPUT_DIR.parent / "export-site"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    with chromium_context() as context:
        yield context


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
def test_exported_page_shows_every_figure(browser: Any, site: Path, notebook: Path) -> None:
    """Export one notebook, open its page from disk: every figure cell shows an image."""
    report = export_notebook(notebook, site)
    assert report.warnings == [], f"{notebook.name} prints to stderr: {report.warnings}"
    minimum = expectation_for(notebook).min_figures
    assert len(report.figure_cells) >= minimum, (
        f"{notebook.name}: {len(report.figure_cells)} figure cell(s) in the export, "
        f"expected at least {minimum}"
    )
    page = browser.new_page()
    try:
        page.goto((site / report.html).as_uri(), wait_until="load")
        failures = page_problems(page)
        for cell in report.figure_cells:
            images = figure_cell_images(page, cell["id"])
            if not images or not all(i["loaded"] and i["width"] > 50 for i in images):
                failures.append(f"cell {cell['index']}: figure not shown ({images})")
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
