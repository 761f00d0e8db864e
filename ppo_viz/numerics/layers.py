"""Keeping titles and outside legends out of every redraw of a :class:`FigureView`."""

from __future__ import annotations

from matplotlib.artist import Artist

#: Below every artist that moves in these figures (bands are at z-order 1, lines at 2)
#: and above the ticks (0.5), which a moving artist below them would redraw.
BACKGROUND_ZORDER = 0.9


def drawn_below_the_data(*artists: Artist) -> None:
    """Draw ``artists`` (titles, a legend outside the axes) before the data, not above it.

    They sit outside the axes, where no data passes, so the order changes no
    pixel; but a :class:`~ppo_viz.figure_view.FigureView` redraws everything
    drawn above a moving artist, and this keeps them out of every redraw.
    """
    for artist in artists:
        artist.set_zorder(BACKGROUND_ZORDER)
