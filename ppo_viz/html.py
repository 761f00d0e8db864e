"""Small HTML fragments for readouts, messages and tables, styled by the one stylesheet.

Fragments are :class:`markupsafe.Markup` strings: plain ``str`` values put
into them are escaped, so text from a learner or a number never breaks the
page, and fragments nest without being escaped twice.  Every element carries
classes from ``style.css`` (see :func:`ppo_viz.style.stylesheet`), never an
inline ``style=``, except for a colour that comes with the data (notebook 3's summary names
each objective in its line's colour, which a teacher may choose for a new column).

>>> str(tag("b", "r < 1 & A > 0"))
'<b>r &lt; 1 &amp; A &gt; 0</b>'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from markupsafe import Markup, escape

from ppo_viz.style import stylesheet

__all__ = ["Markup", "escape", "join", "message", "page", "table", "tag"]

MessageKind = Literal["error", "info", "ok"]


def tag(name: str, *content: object, classes: str = "", **attributes: object) -> Markup:
    """``<name class="classes" ...>content</name>``; text content and attributes are escaped.

    Underscores in attribute names become dashes (``data_step=3`` gives
    ``data-step="3"``); an attribute whose value is None is left out.
    """
    if classes:
        attributes = {"class": classes, **attributes}
    rendered = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{escape(value)}"'
        for key, value in attributes.items()
        if value is not None
    )
    return Markup(f"<{name}{rendered}>") + join(content) + Markup(f"</{name}>")


def join(parts: Iterable[object], separator: str = "") -> Markup:
    """The ``parts`` one after another, each escaped unless it is already markup."""
    return Markup(escape(separator)).join(escape(part) for part in parts)


def message(text: object, kind: MessageKind = "error") -> Markup:
    """A short message for a widget: red for an error, blue for information, green for ok."""
    return tag("div", text, classes=f"ppo ppo-message ppo-message-{kind}")


def table(
    header: Sequence[object],
    rows: Iterable[Sequence[object]],
    *,
    caption: object = None,
    classes: str = "",
    row_classes: Iterable[str] | None = None,
) -> Markup:
    """A table: a header row, then one row per sequence of cells (text or markup).

    ``row_classes`` gives each body row a class (``ppo-row-clipped``; empty for none).
    """
    rows = list(rows)
    classes_of_rows = list(row_classes) if row_classes is not None else [""] * len(rows)
    head = tag("tr", *(tag("th", cell) for cell in header))
    body = [
        tag("tr", *(tag("td", cell) for cell in row), classes=row_class)
        for row, row_class in zip(rows, classes_of_rows, strict=True)
    ]
    parts = [tag("caption", caption)] if caption is not None else []
    return tag(
        "table",
        *parts,
        tag("thead", head),
        tag("tbody", *body),
        classes=f"ppo-table {classes}".strip(),
    )


def page(*content: object, classes: str = "") -> Markup:
    """A fragment that displays on its own: the stylesheet, then ``content`` in a ``.ppo`` div.

    Use it for a whole output (an app's HTML fallback, a ``_repr_html_``);
    fragments inside a widget app need no stylesheet of their own.
    """
    return style_tag() + tag("div", *content, classes=f"ppo {classes}".strip())


def style_tag() -> Markup:
    """``<style>`` with the bundle's stylesheet."""
    return Markup("<style>") + Markup(stylesheet()) + Markup("</style>")
