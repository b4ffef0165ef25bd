"""One interactive figure, two lives: live in Jupyter, kernel-free on the site.


``Explorer(draw, controls)`` takes a drawing function ``draw(fig, **values)`` and, for
each control, the list of values it can take. Jupyter shows the live widget
(:mod:`.live`) when a kernel is there; the static site, which has none, shows the
``text/html`` twin (:mod:`.static`), every combination of control values rendered in
advance. This module holds what both share: the controls, the figure, and the redraw.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# Explorer draws on its own Agg canvas, so importing this module leaves matplotlib's
# backend alone: in Jupyter, plt.show() keeps drawing inline after an import from viz.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from . import live, static
from .static import MAX_FRAMES


class Explorer:
    """An interactive figure: ``draw(fig, **values)``, redrawn when a control changes.


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
        self._image = None  # its Image, which update() fills

    # -- the redraw, shared by the live widget and the static twin
    def _draw(self, values: dict[str, Any]):
        """Clear the figure and let ``draw`` fill it.

        Returns what ``draw`` returned (HoverGrids or None).
        """
        self._fig.clear()
        return self.draw(self._fig, **values)

    def update(self, **values: Any) -> bytes:
        """Redraw for these control values and return the PNG.

        This is what a live control does on change: the PNG goes into the widget's
        Image.
        """
        full = {**self.defaults, **values}
        self._draw(full)
        buf = io.BytesIO()
        self._fig.savefig(buf, format="png", dpi=self.dpi, metadata={"Software": None})
        png = buf.getvalue()
        if self._image is not None:
            self._image.value = png
        return png

    # -- the two lives
    def widget(self):
        """The ipywidgets form: a control per entry of ``controls``, over the figure."""
        if self._widget is None:
            self._widget = live.build_widget(self)
        return self._widget

    def frames(self) -> dict[str, dict]:
        """Every combination of control values, rendered: :func:`.static.frames`."""
        return static.frames(self)

    def to_html(self) -> str:
        """The kernel-free twin, one HTML block: :func:`.static.to_html`."""
        return static.to_html(self)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {
            "text/plain": "Interactive figure with controls: "
            + ", ".join(self.controls),
            "text/html": self.to_html(),
        }
        try:
            view = self.widget()._repr_mimebundle_()
        except Exception:  # no ipywidgets or no frontend: the static twin is enough
            view = {}
        if view and "application/vnd.jupyter.widget-view+json" in view:
            key = "application/vnd.jupyter.widget-view+json"
            bundle[key] = view[key]
        return bundle
