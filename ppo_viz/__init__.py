"""Figures, widgets and checks for the PPO clipping notebooks.

All the math comes from :mod:`ppo_clip`; this package only draws it and wires
it to controls.  A map for a teacher adapting the material:

Shared by every notebook
    :mod:`.style` (+ ``style.css``)
        The one palette (``COLORS`` by meaning), the names in legends
        (``NAMES``), figure defaults, slide sizes and the stylesheet.  Change
        a colour or a name here and every figure and table follows.
    :mod:`.app`
        :class:`~ppo_viz.app.App`, the one way to build an interactive figure:
        controls, a figure redrawn in place, messages, a static fallback for
        front ends without widgets, and ``save()`` for slides.
    :mod:`.figure_view`
        Shows a figure as an ``Image`` widget's PNG and redraws only what changed.
    :mod:`.panels`
        One sample's objective term and gradient against the ratio (notebooks
        1, 2 and 5 build on it).
    :mod:`.html`, :mod:`.numbers`
        The one HTML helper and the one number formatter.
    :mod:`.export`
        Runs the notebooks and writes static pages for a course site.

One module or package per notebook
    :mod:`.surrogate` (1), :mod:`.stepper` (2), :mod:`.epochs` (3),
    :mod:`.why_clip` (4), :mod:`.numerics` (5), :mod:`.exercises` (6).
    Packages keep the model (computed from :mod:`ppo_clip`), the figure, the
    app and the text in separate files.

Adding a control to an app: create the widget with :func:`ppo_viz.app.slider`
(or any ipywidget) in the app's ``__init__``, pass it in ``controls``, and read
its value in the app's ``draw``; :class:`~ppo_viz.app.App` redraws on every
change.
"""
