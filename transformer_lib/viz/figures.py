"""Figures drawn once and then updated in place: what keeps a live redraw fast.

A :class:`LiveFigure` builds all its artists once, on the figure it is given, and
:meth:`~LiveFigure.update` changes the few that the controls change (an image's values,
a line's points, a title). An :class:`~transformer_lib.viz.interactive.Explorer` given
a LiveFigure class saves a picture of everything that does not change and, on every
redraw, paints only the registered artists over it. Drawing tick labels and axes again
is most of the cost of a matplotlib redraw, so this is several times faster than
clearing the figure and drawing it from scratch.

:class:`MapFigure` is the one-attention-map figure several chapters use: a single
heatmap filling the figure, each row's largest weight printed, a light colour bar.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from .heatmap import Heatmap, HoverGrid


class LiveFigure:
    """A figure drawn once in ``__init__(fig)`` and changed by ``update(**values)``.

    ``update`` receives the control values (as a drawing function would) and returns
    what a drawing function returns: HoverGrids for hover read-outs, or None. Register
    every artist that ``update`` changes with :meth:`live`; a redraw repaints exactly
    those, over a saved picture of the rest, and lays the artists registered with
    :meth:`over` on top. When ``update`` changes anything else (tick labels, axis
    limits, a legend), :meth:`layout` must return a different key for those values:
    each key gets its own saved picture.

    Outside an Explorer it is an ordinary matplotlib figure:
    ``f = MyFigure(plt.figure()); f.update(x=1); plt.show()``.
    """

    def __init__(self, fig) -> None:
        self.fig = fig
        self.dynamic: list = []  # the artists update() changes, in no special order
        self.overlays: list = []  # unchanging artists that lie over changing ones

    def live(self, *artists):
        """Register artists that ``update`` changes; returns them (one, or a tuple)."""
        self.dynamic.extend(artists)
        return artists[0] if len(artists) == 1 else artists

    def over(self, *artists):
        """Register artists that do not change within a layout but lie over changing
        ones, as a legend lies over the lines: they are painted once per layout and
        laid over every redraw (much cheaper than drawing a legend again)."""
        self.overlays.extend(artists)
        return artists[0] if len(artists) == 1 else artists

    def update(self, **values: Any) -> HoverGrid | list | None:
        raise NotImplementedError

    def layout(self, **values: Any) -> Hashable:
        """What the unchanging part of the figure depends on (None: nothing)."""
        return None


class MapFigure(LiveFigure):
    """One attention map filling the figure: rows are queries, columns keys, each
    row's largest weight printed, a light colour bar at the right.

    ``margins`` (left, right, bottom, top) place the map; :meth:`show` draws new
    weights and a title. ``maskable``: some of the maps will have masked cells.
    """

    def __init__(
        self,
        fig,
        row_labels: Sequence[str],
        col_labels: Sequence[str],
        margins: tuple[float, float, float, float] = (0.13, 0.86, 0.17, 0.9),
        maskable: bool = False,
        title_size: float | None = None,
    ) -> None:
        super().__init__(fig)
        ax = fig.add_subplot()
        left, right, bottom, top = margins
        fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top)
        shape = (len(row_labels), len(col_labels))
        self.map = Heatmap(
            ax,
            [[0.0] * shape[1]] * shape[0],
            row_labels,
            col_labels,
            colorbar="light",
            annotate="rowmax",
            maskable=maskable,
        )
        if title_size is not None:
            ax.title.set_fontsize(title_size)
        self.live(*self.map.artists)

    def show(self, weights, title: str, masked=None) -> HoverGrid:
        """Draw ``weights`` (T_q, T_k) under ``title``, ``masked`` cells shaded."""
        return self.map.set(weights, masked=masked, title=title)
