"""One interactive figure, two lives: live in Jupyter, kernel-free on the site.


``Explorer(draw, controls)`` takes a drawing function ``draw(fig, **values)`` and, for
each control, the list of values it can take. Jupyter shows the live widget
(:mod:`.live`) when a kernel is there; the static site, which has none, shows the
``text/html`` twin (:mod:`.static`), every combination of control values rendered in
advance. This module holds what both share: the controls, the figure, and the redraw.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# Explorer draws on its own Agg canvas, so importing this module leaves matplotlib's
# backend alone: in Jupyter, plt.show() keeps drawing inline after an import from viz.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from . import image_words, live, static
from .figures import LiveFigure
from .static import MAX_FRAMES


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(tag + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)


def _fast_png(rgba: np.ndarray) -> bytes:
    """A PNG of the (H, W, 4) picture, quickly (about 2 ms here, a third of Pillow's):
    each row stored as its difference from the row above (PNG filter "up", which
    leaves mostly zeros, the opaque alpha channel entirely), then zlib's fastest
    level."""
    h, w = rgba.shape[:2]
    rows = np.ascontiguousarray(rgba).reshape(h, 4 * w)
    raw = np.empty((h, 1 + 4 * w), dtype=np.uint8)
    raw[:, 0] = 2  # filter type "up" ...
    raw[0, 0] = 0  # ... except for the first row, stored as is
    raw[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=raw[1:, 1:])  # modulo 256, as PNG wants
    header = struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(raw.tobytes(), 1))
        + _png_chunk(b"IEND", b"")
    )


def _is_live_figure(draw: Any) -> bool:
    """A LiveFigure subclass, or a functools.partial of one (which binds its data)."""
    cls = draw.func if isinstance(draw, functools.partial) else draw
    return isinstance(cls, type) and issubclass(cls, LiveFigure)


class Explorer:
    """An interactive figure: ``draw(fig, **values)``, redrawn when a control changes.

    ``draw`` is a drawing function, which gets a cleared figure each time, or a
    :class:`~.figures.LiveFigure` class (or a ``functools.partial`` of one that binds
    its data), built once and then updated in place: much faster, which matters to a
    reader moving a slider.

    controls: ``{name: [option, ...]}``; the first option is the default unless
    ``defaults`` says otherwise. Two bool options make a checkbox, numbers a slider,
    strings a selector. ``draw`` may return :class:`~.heatmap.HoverGrid` objects (or a
    list of them) for hover read-outs on the site. Titles and labels may hold inline
    math, ``$...$``.
    """

    def __init__(
        self,
        draw: Callable[..., Any],
        controls: dict[str, Sequence],
        *,
        defaults: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        figsize: tuple[float, float] = (6.0, 4.0),
        dpi: int = 90,
        title: str | None = None,
    ) -> None:
        if not controls:
            raise ValueError("an Explorer needs at least one control")
        self.draw = draw
        self.controls = {name: list(opts) for name, opts in controls.items()}
        for name, opts in self.controls.items():
            if not opts:
                raise ValueError(f"control {name!r} has no options")
        self.defaults = {name: opts[0] for name, opts in self.controls.items()}
        for name, value in (defaults or {}).items():
            if name not in self.controls or value not in self.controls[name]:
                raise ValueError(
                    f"default {name}={value!r} is not one of the options"
                    f" {self.controls.get(name)}"
                )
            self.defaults[name] = value
        self.labels = {name: (labels or {}).get(name, name) for name in self.controls}
        self.figsize, self.dpi, self.title = figsize, dpi, title
        n_frames = int(np.prod([len(o) for o in self.controls.values()]))
        if n_frames > MAX_FRAMES:
            raise ValueError(
                f"{n_frames} combinations of control values exceed"
                f" MAX_FRAMES={MAX_FRAMES}"
            )
        self._fig = Figure(figsize=figsize, dpi=dpi)
        # draws off-screen, whatever backend Jupyter uses
        self._canvas = FigureCanvasAgg(self._fig)
        self._widget = None  # the live form, built on first display
        # a LiveFigure class: built once on the figure, then updated
        self._live_class = _is_live_figure(draw)
        self._figure: LiveFigure | None = None
        self._changing: list = []  # its artists a redraw paints, in drawing order
        self._backgrounds: dict = {}  # layout key -> saved picture of the rest
        self._overlays: dict = {}  # layout key -> its overlays' pixels, or None
        # the language of the words drawn in the picture: a Chinese notebook's (see
        # image_words.use_image_words), or an edition's while the book is built
        self._words: image_words.Words | None = image_words.live_words()

    # -- the redraw: the live widget calls update(), the static twin _frame(); both
    # paint the figure the same way
    def paint(self, values: dict[str, Any]) -> tuple[np.ndarray, Any]:
        """Draw the figure for these control values on the canvas.

        Returns the picture, an (H, W, 4) uint8 view of the canvas (valid until the
        next paint), and what the figure returned (HoverGrids or None). The live widget
        and the static twin both call this: their pictures are the same.
        """
        if self._live_class:
            grids = self._paint_live(values)
        else:
            self._fig.clear()
            grids = self.draw(self._fig, **values)
            if self._words is not None:
                self._words.apply(self._fig)
            self._canvas.draw()
        return np.asarray(self._canvas.buffer_rgba()), grids

    def _paint_live(self, values: dict[str, Any]):
        """A LiveFigure: update it, restore the saved picture of what did not change
        (one per ``layout`` key), paint the changed artists over it."""
        if self._figure is None:
            self._figure = self.draw(self._fig)
            self._changing = self._changing_artists()
        if not self._backgrounds:
            self._save_layouts()
        grids = self._figure.update(**values)
        if self._words is not None:
            self._words.apply(self._fig)
        key = self._figure.layout(**values)
        self._canvas.restore_region(self._backgrounds[key])
        renderer = self._canvas.get_renderer()
        for a in self._changing:
            a.draw(renderer)
        if self._overlays[key] is not None:  # laid over what was just painted
            top, left, over = self._overlays[key]
            picture = np.asarray(self._canvas.buffer_rgba())
            under = picture[top : top + over.shape[0], left : left + over.shape[1], :3]
            alpha = over[..., 3:] / 255.0
            under[:] = np.rint(over[..., :3] * alpha + under * (1 - alpha))
        return grids

    def _save_layouts(self) -> None:
        """Save a picture of the unchanging part of the figure for every layout key,
        once, before the first redraw: then no redraw has to draw it."""
        names = list(self.controls)
        for combo in itertools.product(*self.controls.values()):
            values = dict(zip(names, combo, strict=True))
            key = self._figure.layout(**values)
            if key in self._backgrounds:
                continue
            self._figure.update(**values)
            if self._words is not None:
                self._words.apply(self._fig)
            left_out = self._changing + self._figure.overlays
            for a in left_out:
                a.set_animated(True)  # left out of a full draw
            self._canvas.draw()
            for a in left_out:
                a.set_animated(False)
            self._backgrounds[key] = self._canvas.copy_from_bbox(self._fig.bbox)
            self._overlays[key] = self._paint_overlays()

    def _paint_overlays(self) -> tuple[int, int, np.ndarray] | None:
        """The LiveFigure's overlays painted alone on a transparent canvas: (top row,
        left column, the (h, w, 4) RGBA pixels of the box that holds them)."""
        overlays = [a for a in self._figure.overlays if a.get_visible()]
        if not overlays:
            return None
        renderer = self._canvas.get_renderer()
        renderer.clear()  # transparent
        for a in overlays:
            a.draw(renderer)
        picture = np.asarray(self._canvas.buffer_rgba())
        height, width = picture.shape[:2]
        box = Bbox.union([a.get_window_extent(renderer) for a in overlays])
        x0, x1 = max(int(box.x0) - 2, 0), min(int(np.ceil(box.x1)) + 2, width)
        y0 = max(height - int(np.ceil(box.y1)) - 2, 0)  # rows count from the top
        y1 = min(height - int(box.y0) + 2, height)
        return y0, x0, picture[y0:y1, x0:x1].copy()

    def _changing_artists(self) -> list:
        """The LiveFigure's registered artists, with the spines of their Axes (an
        image must not cover the frame), in the order a full draw paints them."""
        artists = list(dict.fromkeys(self._figure.dynamic))
        axes = [a.axes for a in artists if a.axes is not None]
        for ax in dict.fromkeys(axes):
            if ax.axison and ax.get_frame_on():
                artists += [s for s in ax.spines.values() if s not in artists]
        order = {ax: i for i, ax in enumerate(self._fig.axes)}

        def depth(a) -> tuple:
            if a.axes is None:  # a figure-level artist: text, image, patch
                return (a.get_zorder(), -1, 0.0)
            return (a.axes.get_zorder(), order[a.axes], a.get_zorder())

        return sorted(artists, key=depth)

    def update(self, **values: Any) -> bytes:
        """Redraw for these control values (the others at their defaults); the PNG.

        This is what a live control does on change; :func:`.live.build_widget` shows
        the PNG.
        """
        rgba, _ = self.paint({**self.defaults, **values})
        return _fast_png(rgba)

    def _frame(self, values: dict[str, Any]) -> tuple[np.ndarray, list[dict]]:
        """One frame of the static twin: the (H, W, 4) uint8 picture the live widget
        shows for these values, and its hover data."""
        rgba, grids = self.paint(values)
        return rgba, static.hover_data(self._fig, grids)

    @contextlib.contextmanager
    def _drawn_in(self, words: image_words.Words):
        """Within the block, paint() draws the words in ``words``' language; the
        figure, and its saved pictures of the unchanging part, are English again
        after."""
        saved = self._words, self._backgrounds, self._overlays
        self._words, self._backgrounds, self._overlays = words, {}, {}
        try:
            yield
        finally:
            words.restore()
            self._words, self._backgrounds, self._overlays = saved

    def edition_pictures(
        self, english: dict[str, dict], english_words: static.PageWords
    ) -> tuple[dict, dict] | None:
        """While the book is built (:func:`.image_words.render_editions`): the
        kernel-free twin once more per edition, its words in the edition's language,
        those drawn in the pictures and those of the HTML (``english``: the English
        frames, whose repeated pictures are not drawn again; ``english_words``: the
        words the English twin looked up). The (data, metadata) to add to the figure's
        output (:func:`.image_words.edition_bundle`), or None if it has no words."""
        twins, pictured = {}, {}
        for language in image_words.editions():
            words, page_words = image_words.edition_words(language)
            with image_words.every_glyph_drawn(language), self._drawn_in(words):
                drawn = static.frames(self.controls, self._frame, like=english)
            pictured.update(words.seen)
            twins[language] = static.to_html(self, drawn, static.PageWords(page_words))
        page = [w for w in english_words.seen if w]
        if not pictured and not page:
            return None
        return image_words.edition_bundle("text/html", twins, list(pictured), page)

    # -- the two lives
    def widget(self):
        """The ipywidgets form: a control per entry of ``controls``, over the figure."""
        if self._widget is None:
            self._widget = live.build_widget(self, self.update)
        return self._widget

    def frames(self) -> dict[str, dict]:
        """Every combination of control values, rendered: :func:`.static.frames`."""
        return static.frames(self.controls, self._frame)

    def to_html(self) -> str:
        """The kernel-free twin, one HTML block: :func:`.static.to_html`, in the
        notebook's language (:func:`.live.use_words`)."""
        return static.to_html(self, self.frames(), live.page_words())

    def _repr_mimebundle_(self, include=None, exclude=None):
        frames = self.frames()
        words = live.page_words()
        bundle = {
            "text/plain": "Interactive figure with controls: "
            + ", ".join(self.controls),
            "text/html": static.to_html(self, frames, words),
        }
        try:
            view = self.widget()._repr_mimebundle_()
        except Exception:  # no ipywidgets or no frontend: the static twin is enough
            view = {}
        if view and "application/vnd.jupyter.widget-view+json" in view:
            key = "application/vnd.jupyter.widget-view+json"
            bundle[key] = view[key]
        editions = (
            self.edition_pictures(frames, words) if image_words.editions() else None
        )
        if editions is None:
            return bundle
        bundle.update(editions[0])
        return bundle, editions[1]
