"""One interactive figure, two lives: a live ipywidgets control in Jupyter, a kernel-free twin on the site.

``Explorer(draw, controls)`` takes a drawing function ``draw(fig, **values)`` and, for each
control, the list of values it can take. In a notebook with a kernel, the frontend shows the
live widget (the ``application/vnd.jupyter.widget-view+json`` part of the output). The static
site, which has no kernel, shows the ``text/html`` part instead: every combination of control
values is rendered in advance to a PNG, and a few lines of local JavaScript swap the picture
when a control changes. Nothing is loaded from another host.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import matplotlib

matplotlib.use("Agg", force=False)  # no-op when a backend is already chosen (e.g. inline in Jupyter)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

MAX_FRAMES = 160  # a page's frames must stay well inside its 2 MB budget


@dataclass
class HoverGrid:
    """Values of one heatmap, kept so the static twin can show them under the mouse pointer."""

    ax: Any
    values: np.ndarray
    row_labels: Sequence[str]
    col_labels: Sequence[str]
    row_name: str = "row"
    col_name: str = "col"
    fmt: str = "{:.3f}"
    extent: tuple[float, float, float, float] | None = field(default=None, repr=False)


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
    colorbar: bool = True,
    annotate: bool = False,
    fmt: str = "{:.2f}",
    masked: np.ndarray | None = None,
) -> HoverGrid:
    """Draw a labelled heatmap (rows = ``row_name``, columns = ``col_name``) with a colour bar.

    ``masked`` (bool, same shape, True = masked out) hatches those cells in grey.
    Returns a :class:`HoverGrid` that :class:`Explorer` turns into hover read-outs on the site.
    """
    values = np.asarray(values, dtype=float)
    n_rows, n_cols = values.shape
    row_labels = [str(r) for r in (row_labels if row_labels is not None else range(n_rows))]
    col_labels = [str(c) for c in (col_labels if col_labels is not None else range(n_cols))]
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if masked is not None:
        shade = np.ma.masked_where(~np.asarray(masked, dtype=bool), np.ones_like(values))
        ax.imshow(shade, cmap="Greys", vmin=0, vmax=2.5, aspect="auto", interpolation="nearest", alpha=0.9)
    ax.set_xticks(range(n_cols), col_labels, rotation=45 if max(map(len, col_labels)) > 2 else 0, ha="right" if max(map(len, col_labels)) > 2 else "center")
    ax.set_yticks(range(n_rows), row_labels)
    ax.set_xlabel(col_name)
    ax.set_ylabel(row_name)
    if title:
        ax.set_title(title)
    if annotate:
        for (i, j), val in np.ndenumerate(values):
            if masked is not None and masked[i, j]:
                continue
            colour = "white" if (vmax is not None and val < 0.6 * vmax) else "black"
            ax.text(j, i, fmt.format(val), ha="center", va="center", fontsize=7, color=colour)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return HoverGrid(ax, values, row_labels, col_labels, row_name, col_name)


def _is_bool_options(options: Sequence) -> bool:
    return len(options) == 2 and all(isinstance(o, (bool, np.bool_)) for o in options)


class Explorer:
    """An interactive figure: ``draw(fig, **values)`` redrawn whenever a control changes.

    controls: ``{name: [option, ...]}``; the first option is the default unless ``defaults``
    says otherwise. Two bool options make a checkbox, numbers a slider, strings a selector.
    ``draw`` may return :class:`HoverGrid` objects (or a list of them) for hover read-outs.
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
                raise ValueError(f"default {name}={value!r} is not one of the options {self.controls.get(name)}")
            self.defaults[name] = value
        self.labels = {name: (labels or {}).get(name, name) for name in self.controls}
        self.figsize, self.dpi, self.title = figsize, dpi, title
        n_frames = int(np.prod([len(o) for o in self.controls.values()]))
        if n_frames > MAX_FRAMES:
            raise ValueError(f"{n_frames} combinations of control values exceed MAX_FRAMES={MAX_FRAMES}")
        self._fig = Figure(figsize=figsize, dpi=dpi)
        self._widget = None

    # -- drawing -------------------------------------------------------------------------------
    def _render(self, values: dict[str, Any]) -> tuple[bytes, list[dict]]:
        fig = self._fig
        fig.clear()
        grids = self.draw(fig, **values)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=self.dpi)
        return buf.getvalue(), self._hover_data(fig, grids)

    def update(self, **values: Any) -> bytes:
        """Redraw for these control values and return the PNG (what a live control does on change)."""
        full = {**self.defaults, **values}
        png, _ = self._render(full)
        if self._widget is not None:
            self._image.value = png
        return png

    @staticmethod
    def _hover_data(fig: Figure, grids) -> list[dict]:
        if grids is None:
            return []
        grids = [grids] if isinstance(grids, HoverGrid) else [g for g in grids if isinstance(g, HoverGrid)]
        w, h = fig.canvas.get_width_height()
        out = []
        for g in grids:
            bbox = g.ax.get_window_extent()
            out.append(
                {
                    # axes box as fractions of the image, origin top-left
                    "box": [bbox.x0 / w, 1 - bbox.y1 / h, bbox.width / w, bbox.height / h],
                    "v": [[None if not np.isfinite(x) else float(f"{x:.4g}") for x in row] for row in g.values],
                    "r": list(g.row_labels),
                    "c": list(g.col_labels),
                    "rn": g.row_name,
                    "cn": g.col_name,
                }
            )
        return out

    # -- live widget ---------------------------------------------------------------------------
    def widget(self):
        """The ipywidgets form: one control per entry of ``controls`` and an Image of the figure."""
        if self._widget is None:
            import ipywidgets as W

            self._image = W.Image(format="png")
            ctrls = {}
            for name, opts in self.controls.items():
                label = self.labels[name]
                if _is_bool_options(opts):
                    c = W.Checkbox(value=bool(self.defaults[name]), description=label)
                elif all(isinstance(o, (int, float, np.number)) and not isinstance(o, bool) for o in opts):
                    c = W.SelectionSlider(options=opts, value=self.defaults[name], description=label, continuous_update=True)
                else:
                    c = W.Dropdown(options=opts, value=self.defaults[name], description=label)
                ctrls[name] = c

            def on_change(_change=None):
                self.update(**{n: c.value for n, c in ctrls.items()})

            for c in ctrls.values():
                c.observe(on_change, names="value")
            on_change()
            self._widget = W.VBox([W.HBox(list(ctrls.values())), self._image])
        return self._widget

    # -- kernel-free twin ----------------------------------------------------------------------
    def frames(self) -> dict[str, dict]:
        """Every combination of control values, rendered: key "i,j,..." (option indices) -> frame."""
        names = list(self.controls)
        out = {}
        for idx in itertools.product(*(range(len(self.controls[n])) for n in names)):
            values = {n: self.controls[n][i] for n, i in zip(names, idx)}
            png, hover = self._render(values)
            out[",".join(map(str, idx))] = {"png": base64.b64encode(png).decode("ascii"), "hover": hover}
        return out

    def to_html(self) -> str:
        """A self-contained HTML block (inline PNGs and a small script) that needs no kernel and no network."""
        uid = "tlx-" + uuid.uuid4().hex[:10]
        names = list(self.controls)
        parts = [f'<div class="tl-explorer" id="{uid}">']
        if self.title:
            parts.append(f'<div class="tl-explorer-title">{html.escape(self.title)}</div>')
        parts.append('<div class="tl-explorer-controls">')
        for k, name in enumerate(names):
            opts = self.controls[name]
            d = opts.index(self.defaults[name])
            label = html.escape(self.labels[name])
            if _is_bool_options(opts):
                checked = " checked" if bool(self.defaults[name]) else ""
                parts.append(
                    f'<label class="tl-ctl">{label} <input type="checkbox" data-k="{k}" '
                    f'data-true="{opts.index(True)}" data-false="{opts.index(False)}"{checked}></label>'
                )
            elif all(isinstance(o, (int, float, np.number)) and not isinstance(o, bool) for o in opts):
                texts = json.dumps([f"{o:g}" if isinstance(o, (float, np.floating)) else str(o) for o in opts])
                parts.append(
                    f'<label class="tl-ctl">{label} <input type="range" min="0" max="{len(opts) - 1}" step="1" '
                    f"value=\"{d}\" data-k=\"{k}\" data-texts='{html.escape(texts)}'> "
                    f'<output>{html.escape(str(opts[d]))}</output></label>'
                )
            else:
                options = "".join(
                    f'<option value="{i}"{" selected" if i == d else ""}>{html.escape(str(o))}</option>'
                    for i, o in enumerate(opts)
                )
                parts.append(f'<label class="tl-ctl">{label} <select data-k="{k}">{options}</select></label>')
        parts.append("</div>")
        frames = self.frames()
        default_key = ",".join(str(self.controls[n].index(self.defaults[n])) for n in names)
        parts.append(
            f'<div class="tl-explorer-figure" style="position:relative;display:inline-block">'
            f'<img alt="{html.escape(self.title or "interactive figure")}" '
            f'src="data:image/png;base64,{frames[default_key]["png"]}" style="max-width:100%">'
            f'<div class="tl-hover" style="display:none;position:absolute;pointer-events:none;'
            f'background:rgba(255,255,255,.93);border:1px solid #888;border-radius:3px;padding:1px 5px;'
            f'font:12px sans-serif;white-space:nowrap"></div></div>'
        )
        parts.append(f'<script type="application/json" class="tl-frames">{json.dumps(frames)}</script>')
        parts.append(f"<script>{_JS.replace('__UID__', uid)}</script>")
        parts.append("</div>")
        return "".join(parts)

    # -- display -------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {
            "text/plain": f"Interactive figure with controls: {', '.join(self.controls)}",
            "text/html": self.to_html(),
        }
        try:
            view = self.widget()._repr_mimebundle_()
        except Exception:  # no ipywidgets or no frontend: the static twin is enough
            view = {}
        if view and "application/vnd.jupyter.widget-view+json" in view:
            bundle["application/vnd.jupyter.widget-view+json"] = view["application/vnd.jupyter.widget-view+json"]
        return bundle


_JS = r"""
(function () {
  var root = document.getElementById("__UID__");
  var frames = JSON.parse(root.querySelector("script.tl-frames").textContent);
  var img = root.querySelector("img"), tip = root.querySelector(".tl-hover");
  var ctls = root.querySelectorAll("[data-k]");
  var current = null;
  function key() {
    var idx = [];
    ctls.forEach(function (c) {
      var k = +c.dataset.k;
      if (c.type === "checkbox") idx[k] = c.checked ? c.dataset.true : c.dataset.false;
      else idx[k] = c.value;
      if (c.type === "range") c.nextElementSibling.textContent = JSON.parse(c.dataset.texts)[+c.value];
    });
    return idx.join(",");
  }
  function show() { current = frames[key()]; img.src = "data:image/png;base64," + current.png; tip.style.display = "none"; }
  ctls.forEach(function (c) { c.addEventListener("input", show); c.addEventListener("change", show); });
  img.addEventListener("mousemove", function (e) {
    var r = img.getBoundingClientRect(), fx = (e.clientX - r.left) / r.width, fy = (e.clientY - r.top) / r.height;
    var hit = null;
    (current || frames[key()]).hover.forEach(function (g) {
      var x = (fx - g.box[0]) / g.box[2], y = (fy - g.box[1]) / g.box[3];
      if (x >= 0 && x < 1 && y >= 0 && y < 1) {
        var i = Math.floor(y * g.r.length), j = Math.floor(x * g.c.length), v = g.v[i][j];
        hit = g.rn + " " + g.r[i] + " \u2192 " + g.cn + " " + g.c[j] + ": " + (v === null ? "masked" : v);
      }
    });
    if (hit) { tip.textContent = hit; tip.style.display = "block";
      tip.style.left = (e.clientX - r.left + 12) + "px"; tip.style.top = (e.clientY - r.top + 12) + "px"; }
    else tip.style.display = "none";
  });
  img.addEventListener("mouseleave", function () { tip.style.display = "none"; });
})();
"""


def show_source(obj) -> "Markdown":
    """Display the library's own source of ``obj`` as a highlighted code block (never a retyped copy)."""
    import inspect

    from IPython.display import Markdown

    src = inspect.getsource(obj)
    module = inspect.getmodule(obj).__name__
    return Markdown(f"Source of `{obj.__qualname__}` in `{module}`:\n\n```python\n{src}```")


def figure(figsize: tuple[float, float] = (6, 4), **kwargs) -> tuple[Figure, Any]:
    """A pyplot figure for a static plot in a chapter (closed by the caller's notebook display)."""
    return plt.subplots(figsize=figsize, **kwargs)
