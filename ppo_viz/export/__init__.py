"""Run the notebooks headless, and publish them as static pages for a course site or an LMS.

Usage (from the repository root)::

    python -m ppo_viz.export build/site

executes every ``notebooks/NN_*.ipynb`` (kernel ``python3``, working directory
``notebooks/``) and writes, into the given folder:

- ``<name>.html``: the notebook as a static page (JupyterLab look), no kernel needed;
- ``<name>_files/*.png``: every figure of that page as a PNG file (the page links them);
- ``mathjax/``: the site's own copy of MathJax, which typesets the formulas with no
  network (``--mathjax-url URL`` loads MathJax from a CDN or another copy instead);
- ``index.html``: a list of the pages, in order;
- ``manifest.json``: for each page, the cells that show a figure and their PNG files.

A page loads nothing from the network (unless a notebook displays JavaScript, which
needs nbconvert's require.js from a CDN).  Before any notebook runs, the command
checks the notebooks folder, the output folder (a file, a parent that is a
file, a folder it cannot write into) and the copy of MathJax, and says what is
wrong in one line.

The modules, in the order of the work:

- :mod:`~ppo_viz.export.running`: running a notebook, :func:`execute_notebook`, shared
  with the tests and the benchmarks, and what a reader would see go wrong in its
  outputs, :func:`output_problems`;
- :mod:`~ppo_viz.export.static`: an executed notebook made fit for a page without a
  kernel (apps show their fallback; bare widget reprs are refused);
- :mod:`~ppo_viz.export.mathjax`: the site's copy of MathJax, and why that one;
- :mod:`~ppo_viz.export.pages`: the HTML pages, their PNG files and the index;
- :mod:`~ppo_viz.export.site`: the checks, the export of a folder, the command line.
"""

from ppo_viz.export.errors import ExportError, SetupError
from ppo_viz.export.mathjax import MATHJAX_DIR, copy_mathjax, mathjax_files, mathjax_source
from ppo_viz.export.pages import index_page, page_title, write_page
from ppo_viz.export.running import (
    DEFAULT_TIMEOUT_S,
    NOTEBOOK_DIR,
    execute_notebook,
    kernel_environment,
    notebook_paths,
    output_problems,
)
from ppo_viz.export.site import (
    PageReport,
    export_all,
    export_notebook,
    main,
    notebooks_to_export,
    prepare_output_dir,
)
from ppo_viz.export.static import (
    FIGURE_REPR,
    WIDGET_REPR,
    WIDGET_STATE_MIME,
    make_static,
    static_html,
    static_outputs,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "FIGURE_REPR",
    "MATHJAX_DIR",
    "NOTEBOOK_DIR",
    "WIDGET_REPR",
    "WIDGET_STATE_MIME",
    "ExportError",
    "PageReport",
    "SetupError",
    "copy_mathjax",
    "execute_notebook",
    "export_all",
    "export_notebook",
    "index_page",
    "kernel_environment",
    "main",
    "make_static",
    "mathjax_files",
    "mathjax_source",
    "notebook_paths",
    "notebooks_to_export",
    "output_problems",
    "page_title",
    "prepare_output_dir",
    "static_html",
    "static_outputs",
    "write_page",
]
