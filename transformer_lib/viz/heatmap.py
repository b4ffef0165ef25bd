"""The book's one heatmap helper, and the colour bar it can paint.

``heatmap(ax, values, ...)`` draws a labelled map (an attention map: rows are queries,
columns keys) and returns a :class:`HoverGrid`, the values that the static twin of an
:class:`~transformer_lib.viz.explorer.Explorer` shows under the mouse pointer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class HoverGrid:
    """Values of one heatmap, which the static twin shows under the mouse pointer."""

    ax: Any
    values: np.ndarray
    row_labels: Sequence[str]
    col_labels: Sequence[str]
    row_name: str = "row"
    col_name: str = "col"


def light_colorbar(
    ax,
    vmin: float = 0.0,
    vmax: float = 1.0,
    cmap: str = "viridis",
    width: float = 0.02,
    pad: float = 0.02,
    ticks: int = 3,
) -> None:
    """A colour bar beside ``ax``, painted straight onto the figure (no extra axes).

    It looks like ``fig.colorbar`` at a fraction of the drawing cost, which keeps a live
    redraw under 100 ms. Call it after the layout is fixed. The bar is placed in pixels,
    so the figure must be saved at its own dpi, as ``Explorer`` does.
    """
    from matplotlib.patches import Rectangle

    fig, box = ax.figure, ax.get_position()
    W, H = fig.bbox.width, fig.bbox.height
    x0, y0 = int(round((box.x1 + pad) * W)), int(round(box.y0 * H))
    h, w = max(int(round(box.height * H)), 2), max(int(round(width * W)), 1)
    gradient = np.linspace(vmax, vmin, h)[:, None].repeat(w, axis=1)  # top row = vmax
    fig.figimage(
        gradient, xo=x0, yo=y0, cmap=cmap, vmin=vmin, vmax=vmax, origin="upper"
    )
    frame = Rectangle(
        (x0 / W, y0 / H), w / W, h / H, transform=fig.transFigure, fill=False, lw=0.8
    )
    fig.add_artist(frame)
    for v in np.linspace(vmin, vmax, ticks):
        y = (y0 + (v - vmin) / (vmax - vmin) * h) / H
        fig.text((x0 + w) / W + 0.008, y, f"{v:.1f}", va="center", fontsize=8)


def heatmap(
    ax,
    values,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    row_name: str = "query",
    col_name: str = "key",
    cmap: str = "viridis",
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    colorbar: bool | str = True,
    annotate: bool | str = False,
    fmt: str = "{:.2f}",
    masked: np.ndarray | None = None,
) -> HoverGrid:
    """Draw a labelled heatmap (rows ``row_name``, columns ``col_name``), colour bar.


    ``masked`` (bool, same shape, True = masked out) hatches those cells in grey.
    ``annotate``: True prints every value, ``"rowmax"`` only each row's largest (an
    attention row's winner), which is far cheaper to draw. ``colorbar="light"`` paints
    the bar straight onto the figure (see :func:`light_colorbar`): set the axes' layout
    first. Returns a :class:`HoverGrid` that :class:`Explorer` turns into hover
    read-outs on the site.
    """
    values = np.asarray(values, dtype=float)
    n_rows, n_cols = values.shape
    row_labels = [
        str(r) for r in (row_labels if row_labels is not None else range(n_rows))
    ]
    col_labels = [
        str(c) for c in (col_labels if col_labels is not None else range(n_cols))
    ]
    im = ax.imshow(
        values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest"
    )
    if masked is not None:
        shade = np.ma.masked_where(
            ~np.asarray(masked, dtype=bool), np.ones_like(values)
        )
        ax.imshow(
            shade,
            cmap="Greys",
            vmin=0,
            vmax=2.5,
            aspect="auto",
            interpolation="nearest",
            alpha=0.9,
        )
    long_labels = max(map(len, col_labels), default=0) > 2
    ax.set_xticks(
        range(n_cols),
        col_labels,
        rotation=45 if long_labels else 0,
        ha="right" if long_labels else "center",
    )
    ax.set_yticks(range(n_rows), row_labels)
    ax.set_xlabel(col_name)
    ax.set_ylabel(row_name)
    if title:
        ax.set_title(title)
    if annotate == "rowmax":
        cells = [
            (i, int(np.nanargmax(row)))
            for i, row in enumerate(values)
            if np.isfinite(row).any()
        ]
    elif annotate:
        cells = [(i, j) for (i, j), _ in np.ndenumerate(values)]
    else:
        cells = []
    for i, j in cells:
        val = values[i, j]
        if (masked is not None and masked[i, j]) or not np.isfinite(val):
            continue
        colour = "white" if (vmax is not None and val < 0.6 * vmax) else "black"
        size = 8 if annotate == "rowmax" else 7
        ax.text(
            j, i, fmt.format(val), ha="center", va="center", fontsize=size, color=colour
        )
    if colorbar == "light":
        light_colorbar(
            ax, 0.0 if vmin is None else vmin, 1.0 if vmax is None else vmax, cmap
        )
    elif colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return HoverGrid(ax, values, row_labels, col_labels, row_name, col_name)
