"""The book's one heatmap helper, and the colour bar it can paint.

``heatmap(ax, values, ...)`` draws a labelled map (an attention map: rows are queries,
columns keys) and returns a :class:`HoverGrid`, the values that the static twin of an
:class:`~transformer_lib.viz.interactive.Explorer` shows under the mouse pointer. It
is a :class:`Heatmap` drawn once; live figures keep the Heatmap and change its values.
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


class Heatmap:
    """A labelled heatmap drawn once; :meth:`set` changes its values, mask and title.

    Rows are ``row_name`` (an attention map's queries), columns ``col_name`` (its
    keys). ``masked`` (bool, the values' shape, True = masked out) shades those cells
    grey; pass ``maskable=True`` to be able to mask cells later without masking any now.
    ``annotate``: True prints every value, ``"rowmax"`` only each row's largest (an
    attention row's winner), which is far cheaper to draw. ``colorbar="light"`` paints
    the bar straight onto the figure (see :func:`light_colorbar`): set the axes' layout
    first. A live figure keeps the Heatmap and calls :meth:`set` on every redraw;
    ``artists`` lists what ``set`` changes. Give it fixed ``vmin`` and ``vmax`` then:
    with None, the colours are scaled to the first values only.
    """

    def __init__(
        self,
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
        maskable: bool = False,
    ) -> None:
        values = np.asarray(values, dtype=float)
        n_rows, n_cols = values.shape
        self.ax, self.vmax, self.fmt = ax, vmax, fmt
        self.row_name, self.col_name = row_name, col_name
        self.image = ax.imshow(
            values,
            cmap=cmap,
            vmin=vmin,
            vmax=vmax,
            aspect="auto",
            interpolation="nearest",
        )
        self.shade = None
        if masked is not None or maskable:
            self.shade = ax.imshow(
                np.ma.masked_all(values.shape),
                cmap="Greys",
                vmin=0,
                vmax=2.5,
                aspect="auto",
                interpolation="nearest",
                alpha=0.9,
            )
        self.set_labels(row_labels, col_labels, values.shape)
        ax.set_xlabel(col_name)
        ax.set_ylabel(row_name)
        self.annotate = annotate
        n_texts = n_rows if annotate == "rowmax" else n_rows * n_cols if annotate else 0
        size = 8 if annotate == "rowmax" else 7
        self.texts = [
            ax.text(0, 0, "", ha="center", va="center", fontsize=size)
            for _ in range(n_texts)
        ]
        self.artists = [self.image, *[self.shade] * (self.shade is not None)]
        self.artists += [*self.texts, ax.title]
        self.grid = self.set(values, masked=masked, title=title)
        if colorbar == "light":
            light_colorbar(
                ax, 0.0 if vmin is None else vmin, 1.0 if vmax is None else vmax, cmap
            )
        elif colorbar:
            ax.figure.colorbar(self.image, ax=ax, fraction=0.046, pad=0.04)

    def set_labels(
        self,
        row_labels: Sequence[str] | None,
        col_labels: Sequence[str] | None,
        shape: tuple[int, int],
    ) -> None:
        """New tick labels, and the shape (n_rows, n_cols) of the values to come."""
        n_rows, n_cols = shape
        rows = range(n_rows) if row_labels is None else row_labels
        cols = range(n_cols) if col_labels is None else col_labels
        self.row_labels, self.col_labels = (
            [str(r) for r in rows],
            [str(c) for c in cols],
        )
        extent = (-0.5, n_cols - 0.5, n_rows - 0.5, -0.5)
        for image in (self.image, self.shade):
            if image is not None:
                image.set_extent(extent)
        self.ax.set_xlim(extent[:2])
        self.ax.set_ylim(extent[2:])
        long_labels = max(map(len, self.col_labels), default=0) > 2
        self.ax.set_xticks(
            range(n_cols),
            self.col_labels,
            rotation=45 if long_labels else 0,
            ha="right" if long_labels else "center",
        )
        self.ax.set_yticks(range(n_rows), self.row_labels)

    def set(
        self,
        values,
        *,
        masked: np.ndarray | None = None,
        title: str | None = None,
    ) -> HoverGrid:
        """Show ``values`` (and ``masked``, and ``title`` when given); returns the
        :class:`HoverGrid` that an Explorer turns into hover read-outs on the site."""
        values = np.asarray(values, dtype=float)
        self.image.set_data(values)
        if self.shade is not None:  # drawn only when some cell is masked
            self.shade.set_visible(masked is not None)
            if masked is not None:
                shade = np.ma.masked_where(~masked, np.ones_like(values))
                self.shade.set_data(shade)
        if title is not None:
            self.ax.title.set_text(title)
        if self.annotate == "rowmax":
            cells = [
                (i, int(np.nanargmax(row)) if np.isfinite(row).any() else -1)
                for i, row in enumerate(values)
            ]
        else:
            cells = [(i, j) for (i, j), _ in np.ndenumerate(values)] * bool(self.texts)
        if len(cells) != len(self.texts):
            raise ValueError(
                f"this heatmap prints {len(self.texts)} values; values of shape"
                f" {values.shape} need {len(cells)}: keep an annotated map's shape"
            )
        for text, (i, j) in zip(self.texts, cells, strict=True):
            val = values[i, j] if j >= 0 else np.nan
            shown = np.isfinite(val) and (masked is None or not masked[i, j])
            text.set_visible(bool(shown))
            if shown:
                dark = self.vmax is not None and val < 0.6 * self.vmax
                text.set_position((j, i))
                text.set_text(self.fmt.format(val))
                text.set_color("white" if dark else "black")
        return HoverGrid(
            self.ax,
            values,
            self.row_labels,
            self.col_labels,
            self.row_name,
            self.col_name,
        )


def heatmap(
    ax,
    values,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    **options,
) -> HoverGrid:
    """Draw a labelled heatmap, colour bar included; see :class:`Heatmap` for the
    options. Returns a :class:`HoverGrid` that :class:`Explorer` turns into hover
    read-outs on the site."""
    return Heatmap(ax, values, row_labels, col_labels, **options).grid
