"""The site's own copy of MathJax, so that formulas are typeset with no network at all.

Where the copy comes from: the PyPI package ``jupyter-server-mathjax`` (0.2.6,
from the Jupyter project), which ships the files of MathJax 2.7.9 in its
``static/`` folder; installing it downloads nothing more, and neither does the
export.  Why this one:

- nbconvert ships no MathJax: its pages load MathJax 2.7.7 from a CDN.
- JupyterLab 4 bundles MathJax 3, but as webpack chunks of its own application,
  not as a script that a page can load.
- ``jupyter-server-mathjax`` is MathJax 2, as nbconvert's page template
  expects: the template's own configuration (``MathJax.Hub.Config``) stays as
  it is, with JupyterLab's delimiters (``$...$`` and ``\\(...\\)`` inline,
  ``$$...$$`` and ``\\[...\\]`` displayed, ``\\$`` for a dollar sign), and only
  the script's address changes.  ``--mathjax-url`` keeps meaning what it
  means to nbconvert (a MathJax 2 script, such as nbconvert's CDN default).

Of the package's 9.6 MB the site gets about 2.4 MB (187 files), those that TeX input
and the HTML-CSS output can load (see :data:`MATHJAX_FILES`): ``MathJax.js``;
the combined configuration ``config/TeX-AMS-MML_HTMLorMML-full.js`` and
``config/Safe.js``; ``extensions/*.js``, ``extensions/TeX/`` (macros loaded on
demand, such as ``\\boldsymbol``) and ``extensions/HTML-CSS/``; ``jax/input/TeX``,
``jax/element/mml`` and ``jax/output/HTML-CSS``; the STIX-Web fonts
(``fonts/HTML-CSS/STIX-Web/woff``, the only web fonts the package ships); and
MathJax's ``LICENSE`` (Apache 2.0).  Left out: the SVG output and its fonts
(2.9 MB), translations of MathJax's menu (2.1 MB; English is built in), the
accessibility explorer (3.7 MB, loaded only from MathJax's menu) and MathML
input extensions.  A small configuration file of the site's own,
``config/local/site.js`` (:data:`SITE_CONFIG`), makes MathJax use those fonts
and hides the menu entries that would need a left-out file.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from ppo_viz.export.errors import SetupError

#: The package the copy comes from, and the folder of the site the copy goes into.
MATHJAX_PACKAGE = "jupyter-server-mathjax"
MATHJAX_DIR = "mathjax"
#: The files copied, as patterns relative to the package's ``static/`` folder.
MATHJAX_FILES = (
    "LICENSE",
    "MathJax.js",
    "config/TeX-AMS-MML_HTMLorMML-full.js",
    "config/Safe.js",
    "extensions/*.js",
    "extensions/TeX/**/*.js",
    "extensions/HTML-CSS/*.js",
    "jax/input/TeX/*.js",
    "jax/element/mml/**/*.js",
    "jax/output/HTML-CSS/**/*.js",
    "fonts/HTML-CSS/STIX-Web/woff/*.woff",
)
#: MathJax's configurations, as its script's ``config`` parameter: the package's combined
#: configuration (as nbconvert's CDN default, which uses another output), the ``Safe``
#: extension (as nbconvert's default) and the site's own settings.
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe,local/site"
#: ``config/local/site.js``: the site's own settings, read by MathJax before it starts.
SITE_CONFIG = """\
/* Written by `python -m ppo_viz.export`: this copy of MathJax has the STIX-Web web fonts
   and the HTML-CSS output only, so use those fonts and offer no other renderer or language. */
MathJax.Hub.Config({
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null},
  MathMenu: {showRenderer: false, showLocale: false}
});
MathJax.Ajax.loadComplete("[MathJax]/config/local/site.js");
"""


def mathjax_source() -> Path:
    """The installed ``jupyter-server-mathjax``'s ``static/`` folder (MathJax's files).

    Raises :class:`SetupError` if the package is not installed.
    """
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    folders = list(spec.submodule_search_locations or []) if spec else []
    static = [Path(folder) / "static" for folder in folders]
    if not static or not (static[0] / "MathJax.js").is_file():
        raise SetupError(
            f"the site's own copy of MathJax comes from the package {MATHJAX_PACKAGE}, which "
            f"is not installed: run `pip install {MATHJAX_PACKAGE}`, or pass --mathjax-url URL "
            "to load MathJax from elsewhere"
        )
    return static[0]


def mathjax_files(source: Path) -> list[Path]:
    """The files of ``source`` that the site needs (:data:`MATHJAX_FILES`), relative to it."""
    found = {path for pattern in MATHJAX_FILES for path in source.glob(pattern) if path.is_file()}
    return sorted(path.relative_to(source) for path in found)


def copy_mathjax(out_dir: Path) -> str:
    """Copy MathJax into ``out_dir/mathjax/``; return the pages' address of its script.

    The address is relative (``mathjax/MathJax.js?config=...``), so the site
    works from any folder or server, and from disk.  Files already there with
    the same size and time are left alone, so exporting again is quick.
    """
    source = mathjax_source()
    target = out_dir / MATHJAX_DIR
    for relative in mathjax_files(source):
        _copy_if_changed(source / relative, target / relative)
    config = target / "config" / "local" / "site.js"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(SITE_CONFIG, encoding="utf-8")
    return f"{MATHJAX_DIR}/MathJax.js?config={MATHJAX_CONFIG}"


def _copy_if_changed(source: Path, target: Path) -> None:
    if target.is_file():
        have, want = target.stat(), source.stat()
        if (have.st_size, have.st_mtime_ns) == (want.st_size, want.st_mtime_ns):
            return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
