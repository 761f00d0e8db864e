"""Presentation mode: the notebooks served as a lecture, readable on a 1280 x 800 projector.

The figure tests draw every live figure as presentation mode does.  The lecture tests check
that the cells tagged ``lecture``, the ``--lecture`` view and the README's route agree, and
what the present command serves.  ``test_present_browser.py`` runs it in Chromium.
"""

from __future__ import annotations

import ast
import os
import re
import socket
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from bs4 import BeautifulSoup
from helpers import ANY_NOTEBOOK, file_behind, live_figure_classes
from matplotlib.text import Text
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from notebook_runner import execute_notebook, output_problems

import ppo_clip
from ppo_viz import present
from ppo_viz.present import (
    IDLE_KERNEL_S,
    LECTURE_TAG,
    lecture_view,
    navigation_cell,
    outline,
)
from ppo_viz.stepper import BatchStepper
from ppo_viz.style import PRESENT_VARIABLE
from ppo_viz.why_clip.apps import LOOK_AHEAD

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
README = REPO / "README.md"
#: 14 pt on a screen that shows CSS pixels at 96 per inch.
SMALLEST_TEXT_PX = 14 * 96 / 72
PROJECTOR = {"width": 1280, "height": 800}
#: The tallest a figure may be: with its controls above it, it fits a 1280 x 800 screen.
TALLEST_FIGURE_PX = 680
#: The narrowest slider track a mouse can drag with some precision.
NARROWEST_TRACK_PX = 100
LECTURE_WORDS, LECTURE_MINUTES = 2500, 45
LECTURE_NOTEBOOKS = ["01_clipped_surrogate", "02_worked_example", "03_epochs_on_one_batch"]
#: The 20-minute RLHF add-on that follows the lecture: its cells tagged ``lecture`` too.
ADD_ON = "07_clipping_in_llm_training"
#: After it, notebook 8's one-screen recap of PPO's loop (one cell tagged ``lecture``).
RECAP = "08_where_the_advantage_comes_from"


def readme_part(name: str) -> str:
    """The README's text between ``<!-- name -->`` and ``<!-- /name -->``."""
    readme = README.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {name} -->(.*?)<!-- /{name} -->", readme, re.DOTALL)
    assert found, f"README.md has no {name} part"
    return found.group(1)


def opening(stem: str) -> str:
    """A notebook's first cell, with runs of whitespace made single spaces."""
    (path,) = NOTEBOOKS.glob(f"{stem}*.ipynb")
    return " ".join(nbformat.read(path, as_version=4).cells[0].source.split())


# -- figures at presentation size -------------------------------------------------------------


def slider_ends(app) -> list[tuple[str, float]]:
    """Each numeric slider of ``app`` at each end of its range: (name, value)."""
    ends = []
    for name, control in app.controls.items():
        if hasattr(control, "min") and hasattr(control, "max") and not control.disabled:
            ends += [(name, control.min), (name, control.max)]
    return ends


def text_outside(figure) -> str:
    """Where the figure's drawing (axes with their ticks, labels and titles, legends, texts)
    reaches past its frame, or "" where it does not."""
    figure.canvas.draw()
    drawn = figure.get_tightbbox(figure.canvas.get_renderer())  # in inches
    width, height = figure.get_size_inches()
    slack = 1 / figure.dpi  # a pixel
    if (
        drawn.x0 < -slack
        or drawn.y0 < -slack
        or drawn.x1 > width + slack
        or drawn.y1 > height + slack
    ):
        return f"drawn over {[round(v * figure.dpi) for v in drawn.extents]} pixels"
    return ""


def fits_under_its_controls(app_class: type) -> bool:
    """Whether a live figure is held to fit under its controls: those of notebooks 1 to 3 and
    5 (notebook 4's are left out: each end of their sliders takes seconds to minutes of
    training; notebook 5's token figure is still 875 pixels tall)."""
    return app_class.__qualname__ != "TokenRatioExplorer" and not app_class.__module__.startswith(
        "ppo_viz.why_clip"
    )


@pytest.mark.parametrize("app_class", live_figure_classes(), ids=lambda cls: cls.__qualname__)
def test_in_presentation_mode_every_figure_text_is_at_least_14_pt_and_fits(monkeypatch, app_class):
    """As wide as a projector, every text at least 14 pt, a Reset button (notebook 2's stepper
    had none); where it must fit under its controls, at most 680 pixels tall, and no title,
    legend or label cut off by the figure's edge, at the starting settings and with each
    slider at each end of its range."""
    monkeypatch.setenv(PRESENT_VARIABLE, "1")
    app = app_class()
    LOOK_AHEAD.cancel_all()  # notebook 4's explorer ran ahead: the tests after it need the CPU
    shown, boxes = [], [app]
    while boxes:  # every widget on screen: the app's children, theirs, ...
        shown += boxes
        boxes = [child for box in boxes for child in getattr(box, "children", ())]
    assert app.reset_button in shown
    figure = app.figure
    width_px = figure.get_figwidth() * figure.dpi
    assert width_px <= PROJECTOR["width"] - 48, "wider than a 1280-pixel screen"
    for text in figure.findobj(Text):
        if text.get_visible() and text.get_text().strip():
            assert text.get_fontsize() * figure.dpi / 72 >= SMALLEST_TEXT_PX, text.get_text()
    if not fits_under_its_controls(app_class):
        return
    assert figure.get_figheight() * figure.dpi <= TALLEST_FIGURE_PX
    for artist in app.moving:  # drawn in full, as savefig draws them
        artist.set_animated(False)
    assert not text_outside(figure), "at the starting settings"
    for name, value in slider_ends(app):
        app.reset()
        app.controls[name].value = value
        assert not text_outside(figure), f"with {name} = {value}"


# -- the lecture: the cells tagged "lecture" --------------------------------------------------


def test_the_readmes_route_is_the_lecture_tags_in_2500_words_and_45_minutes():
    """Notebooks 1 to 3, then the RLHF add-on and the recap; the README's words and table."""
    route = outline(NOTEBOOKS)
    names = [*LECTURE_NOTEBOOKS, ADD_ON, RECAP]
    assert [name.removesuffix(".ipynb") for name, _, _ in route] == names
    add_on_words = route[3][2]
    route = route[:3]  # the add-on, notebook 7, follows it
    words = sum(words for _, _, words in route)
    assert words <= LECTURE_WORDS
    for count in (words, add_on_words):
        assert f"{count:,} words of prose" in README.read_text(encoding="utf-8")
    expected = "\n".join(
        f"| {{minutes}} | {int(name[:2])} | {'; '.join(headings)} |" for name, headings, _ in route
    )
    rows = re.findall(r"^\| (\d+) \| (\d) \| (.+) \|$", readme_part("lecture-route"), re.M)
    shown = [(number, sections) for _, number, sections in rows]
    assert shown == [(str(int(name[:2])), "; ".join(h)) for name, h, _ in route], (
        f"the README's lecture route should read (minutes are yours):\n{expected}"
    )
    minutes = [int(m) for m, _, _ in rows]
    assert sum(minutes) == LECTURE_MINUTES
    assert f"**A {LECTURE_MINUTES}-minute lecture**" in README.read_text(encoding="utf-8")
    for stem, each in zip(LECTURE_NOTEBOOKS, minutes, strict=True):
        assert f"about {each} minutes in the {LECTURE_MINUTES}-minute lecture" in opening(stem)


def test_each_opening_states_the_readmes_minutes_for_self_study():
    ranges = re.split(r",\s+|\s+and\s+", readme_part("self-study").strip())
    stems = [path.name[:2] for path in present.notebook_paths(NOTEBOOKS)]  # every notebook's
    assert len(ranges) == len(stems)
    for stem in stems:
        assert f"About {ranges[int(stem) - 1]} minutes alone" in opening(stem), stem


def test_each_page_links_the_previous_and_next_notebook():
    first, second, third = (NOTEBOOKS / f"{stem}.ipynb" for stem in LECTURE_NOTEBOOKS)
    assert 'href="02_worked_example.ipynb"' in navigation_cell(first, lecture=True).source
    middle = navigation_cell(second, lecture=True).source
    assert 'href="01_clipped_surrogate.ipynb"' in middle
    assert 'href="03_epochs_on_one_batch.ipynb"' in middle
    after = navigation_cell(third, lecture=True).source
    assert 'href="04_' not in after  # the lecture goes on to the RLHF add-on, notebook 7
    assert f'href="{ADD_ON}.ipynb"' in after
    assert 'href="04_why_clip.ipynb"' in navigation_cell(third, lecture=False).source


def write_talk(folder: Path, name: str, title: str | None = "A talk") -> Path:
    """A notebook ``name`` in ``folder`` whose one cell, tagged lecture, is its ``# title``
    (no cell at all for None)."""
    folder.mkdir(parents=True, exist_ok=True)
    cells = [nbformat.v4.new_markdown_cell(f"# {title}", metadata={"tags": [LECTURE_TAG]})]
    nbformat.write(
        nbformat.v4.new_notebook(cells=cells if title is not None else []), folder / name
    )
    return folder / name


@pytest.mark.parametrize(("name", "title"), ANY_NOTEBOOK)
def test_the_links_between_pages_reach_any_notebook_and_show_its_title_as_text(
    monkeypatch, tmp_path, name, title
):
    """``[title](file)`` lost the link for a space, ``]``, ``"``; sent ``#``, ``?``, ``%25``
    elsewhere; showed ``<i>`` as markup; a notebook without cells raised IndexError; and a page
    whose address is percent-encoded (Voilà's request path) had no links at all."""
    write_talk(tmp_path, name, title)
    page = present.page_of(write_talk(tmp_path, "02_next page.ipynb", "Next"), lecture=False)
    markdown = ast.literal_eval(page.cells[-1].source.split("Markdown(", 1)[1][:-1])
    shown = BeautifulSoup(markdown2html_mistune(markdown), "html.parser")
    assert [(a.get_text(), file_behind(a["href"])) for a in shown.select("a")] == [
        (f"← {title or Path(name).stem}", name)
    ]


@pytest.fixture
def voila_stub(monkeypatch) -> list[SimpleNamespace]:
    """Voilà replaced by a record of what it would serve: the folder, the pages there, the
    announcement, the pages run ahead and the environment ``serve()`` set (set back after)."""
    served = []

    def voila(port, said, ahead):
        pages = {p.name: nbformat.read(p, as_version=4) for p in Path.cwd().glob("*.ipynb")}
        environ = {name: os.environ[name] for name in (PRESENT_VARIABLE, "PYTHONPATH")}
        record = {"folder": Path.cwd(), "pages": pages, "said": said, "ahead": ahead}
        served.append(SimpleNamespace(**record, environ=environ))

    for name in (PRESENT_VARIABLE, "JUPYTER_PATH", "PYTHONPATH"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setattr(present, "run_voila", voila)
    return served


@pytest.mark.parametrize("lecture", [[], ["--lecture"]], ids=["whole", "lecture"])
@pytest.mark.parametrize(
    "name", [*sorted({name for name, _ in ANY_NOTEBOOK}), "my talk.ipynb", "-talk.ipynb"]
)
def test_a_notebook_of_any_name_is_served_at_a_percent_encoded_address(
    voila_stub, monkeypatch, tmp_path, name, lecture
):
    """``my talk.ipynb`` was not copied (only ``NN_*.ipynb`` were: the address answered 404),
    ``--lecture`` refused it ("has no cell tagged 'lecture'"), and the address had a space;
    ``-talk.ipynb``, given as it is in its folder, was taken for an unknown option."""
    monkeypatch.chdir(write_talk(tmp_path / "my notes", name).parent)  # a folder with a space
    assert present.main([name, "--port", "1", *lecture]) == 0
    (served,) = voila_stub
    address = served.said.split(" at ")[1].split(" ")[0]
    encoded = urllib.parse.quote(name, errors="surrogateescape")  # a byte not UTF-8: %FF
    assert address == f"http://127.0.0.1:1/voila/render/{encoded}"
    assert file_behind(address) == f"/voila/render/{name}"
    assert name in served.pages


@pytest.mark.parametrize("name", ["01_talk.ipynb", "my talk.ipynb", "-talk.ipynb"])
def test_the_outline_of_any_notebook_lists_its_sections_and_words(
    monkeypatch, capsys, tmp_path, name
):
    """``my talk.ipynb`` was left out of its own outline ("in all: 0 words of prose")."""
    monkeypatch.chdir(write_talk(tmp_path, name, "A talk\n\n## The one part").parent)
    assert present.main(["--outline", name]) == 0
    said = f"{name} (7 words): The one part\nin all: 7 words of prose\n"
    assert capsys.readouterr().out == said


@pytest.mark.parametrize(("first_cell", "title"), [("# A talk", "A talk"), ("# ", "my talk")])
def test_a_lecture_page_opens_with_the_notebooks_title_or_else_its_file_name(
    monkeypatch, tmp_path, first_cell, title
):
    """The title, then the cells tagged ``lecture`` in order, then the links to the others; the
    title names the browser's tab too.  A notebook whose heading was empty opened its lecture
    page with an empty heading; every tab was titled with the notebook's file name."""
    new_cell, tags = nbformat.v4.new_markdown_cell, {"tags": [LECTURE_TAG]}
    cells = [new_cell(first_cell, metadata=tags), new_cell("skipped"), new_cell("2", metadata=tags)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "my talk.ipynb")
    page = present.page_of(tmp_path / "my talk.ipynb", lecture=True)
    assert [cell.source for cell in page.cells[:-1]] == [f"# {title}", first_cell, "2"]
    assert page.metadata["title"] == title


NOT_A_NOTEBOOK = "{tmp}/02_corrupt.ipynb is not a readable notebook"


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (["--outline", "{tmp}/01_x.ipynb"], NOT_A_NOTEBOOK),
        (["--lecture", "{tmp}/02_corrupt.ipynb"], NOT_A_NOTEBOOK),
        (["{tmp}/01_x.ipynb"], NOT_A_NOTEBOOK),
        (
            ["--lecture", "--port", "{busy}"],
            "port {busy} is in use; choose another or leave --port out",
        ),
        (["--lecture", "--port", "70000"], "--port must be from 1 to 65535, got 70000"),
    ],
)
def test_what_cannot_be_served_is_refused_in_one_line_before_voila_starts(
    monkeypatch, capsys, tmp_path, call, said
):
    """nbformat's NotJSONError ended the outline, the lecture or (at a page) the server; a port
    out of range printed an address nobody answered."""
    monkeypatch.setattr(present, "run_voila", None)  # Voilà must not start
    write_talk(tmp_path, "01_x.ipynb")
    (tmp_path / "02_corrupt.ipynb").write_text("not json")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        where = {"tmp": tmp_path, "busy": busy.getsockname()[1]}
        assert present.main([argument.format(**where) for argument in call]) == 2
    printed = capsys.readouterr()
    assert (printed.out, printed.err) == ("", f"error: {said.format(**where)}\n")


@pytest.mark.notebook
@pytest.mark.parametrize("stem", [*LECTURE_NOTEBOOKS, ADD_ON])
def test_the_lecture_cells_run_on_their_own(stem):
    """Only the tagged cells run in the lecture: they must need no other cell."""
    view = lecture_view(nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4))
    assert not output_problems(execute_notebook(view))


def test_the_readme_command_presents_the_lecture():
    """The README's present command, as CI and a teacher copy it."""
    block = readme_part("present-command").strip()
    assert block.startswith("```bash\npython3 -m venv .venv"), block
    assert "-m ppo_viz.present --lecture\n```" in block
    assert f"stopped after {IDLE_KERNEL_S} seconds idle" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("lecture", [False, True], ids=["whole", "lecture"])
def test_the_server_runs_on_a_copy_of_the_notebooks_removed_after(voila_stub, lecture):
    """Voilà ran notebook 1 in notebooks/, so its save cell wrote notebooks/build/.  The pages
    a teacher goes on to are run ahead: with --lecture every one, else the next one."""
    first = NOTEBOOKS / "01_clipped_surrogate.ipynb"
    assert present.main([str(first), "--port", "1", *["--lecture"] * lecture]) == 0
    (served,) = voila_stub
    assert not served.folder.is_relative_to(NOTEBOOKS)
    notebooks = present.sibling_notebooks(NOTEBOOKS, False)
    sources = {name: [cell.source for cell in page.cells] for name, page in served.pages.items()}
    expected = {
        p.name: [cell.source for cell in present.page_of(p, lecture).cells] for p in notebooks
    }
    assert sources == expected
    route = [p.name for p in present.sibling_notebooks(NOTEBOOKS, lecture)]
    assert served.ahead == (route if lecture else route[:2])
    assert served.environ["PYTHONPATH"].split(os.pathsep)[0] == str(NOTEBOOKS)
    assert served.environ[PRESENT_VARIABLE] == "1"
    assert not served.folder.exists()


def test_on_a_projector_the_stepper_shows_no_sixteen_digit_float(monkeypatch):
    """Notebook 2's slides showed ``0.8999999999999999`` and the loss ``-0.5375000000000001``;
    in a notebook the stepper still prints every value exactly."""
    stepper = BatchStepper(inputs=False)
    stepper.go(stepper.batch.n - 1)
    loss = ppo_clip.ppo_clip_loss(*ppo_clip.worked_example()[:3])  # this machine's last digit
    assert repr(loss) in stepper.sample_view.value  # every digit, in a notebook
    monkeypatch.setenv(PRESENT_VARIABLE, "1")
    for step in range(stepper.batch.n):
        stepper.go(step)
        stepper.refresh()
        shown = stepper.sample_view.value + stepper.clip_fractions.value
        assert not re.findall(r"\d\.\d{7,}", shown), f"sample {step}"
