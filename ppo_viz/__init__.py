"""Figures, widgets and checks for the PPO clipping notebooks.

All the math comes from :mod:`ppo_clip`; this package only draws it and wires it to controls.
A map for a teacher adapting the material:

Shared by every notebook
    :mod:`.style` (+ ``style.css``)
        The one palette (``COLORS`` by meaning), how each objective's curve is drawn
        (``LINES``), the names in legends (``NAMES``), figure defaults and the stylesheet.
        Change a colour here and every figure, table and notebook cell follows.
    :mod:`.app`
        :class:`~ppo_viz.app.LiveFigure`, the one way to build an interactive figure: a
        matplotlib figure, a function that moves its artists, and a dict of controls.
    :mod:`.controls`
        The controls (sliders, selections, checkboxes), laid out alike, and the checks of an
        app's start values.
    :mod:`.panels`
        One sample's objective term and gradient against the ratio (notebooks 1, 2 and 5).
    :mod:`.html`, :mod:`.numbers`
        The one HTML helper and the one number formatter.
    :mod:`.machine`
        Which CPU and SIMD level computed a number (notebook 5, the results files).
    :mod:`.results`
        Reads a committed study's results (notebooks 4, 7, 8 and 9).
    :mod:`.export`, :mod:`.present` (+ ``lecture/``)
        Static pages of the notebooks for a course site; the notebooks as slides (Voilà).

One module or package per notebook
    :mod:`.surrogate` (1), :mod:`.stepper` (2), :mod:`.epochs` (3), :mod:`.why_clip` (4),
    :mod:`.numerics` (5), :mod:`.exercises` (6, and every notebook's checks), :mod:`.llm` and
    :mod:`.rlhf` (7), :mod:`.advantage` (8), :mod:`.mismatch` (9).

The house pattern for a new interactive figure (notebook 1's :mod:`.surrogate` is one):

1. build a plain matplotlib ``Figure`` (never through pyplot) under
   :func:`~ppo_viz.style.figure_style`, with empty artists for what will move;
2. write ``update(**values)``: read every number from :mod:`ppo_clip`, raise
   :class:`~ppo_viz.app.InputError` for a value it cannot use, then ``set_data`` on the
   artists, and return a readout (HTML or text) or ``None``;
3. ``LiveFigure(figure, update, {"name": slider(...), ...}, moving=[the artists update
   changes])``.
"""
