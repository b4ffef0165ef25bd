"""One interactive figure, two lives: a live ipywidgets control in Jupyter, a kernel-free twin on the site.

``Explorer(draw, controls)`` takes a drawing function ``draw(fig, **values)`` and, for each
control, the list of values it can take. In a notebook with a kernel, the frontend shows the
live widget (the ``application/vnd.jupyter.widget-view+json`` part of the output). The static
site, which has no kernel, shows the ``text/html`` part instead: every combination of control
values is rendered in advance to a PNG, and a few lines of inline JavaScript swap the picture
when a control changes. Nothing is loaded from another host.

The static twin keeps pages small: each frame is re-encoded as a 256-colour palette PNG (about a
third of matplotlib's RGBA output, with no visible change on these flat-coloured plots) and frames
that come out identical are stored once. Titles and control labels may contain inline math
written as ``$...$``; MathJax typesets it on the site, and ipywidgets does in Jupyter.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import itertools
import json
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Explorer draws on its own Agg canvas, so importing this module leaves matplotlib's backend alone:
# in Jupyter, plt.show() keeps drawing inline after `from transformer_lib.viz import ...`.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

MAX_FRAMES = 160  # a page's frames must stay well inside its 2 MB budget
PALETTE_COLORS = (
    256  # frames of the static twin are palette PNGs with at most this many colours
)
_counter = (
    itertools.count()
)  # makes element ids unique within one kernel session, and repeatable


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

    It looks like ``fig.colorbar`` at a fraction of the drawing cost, which keeps a live redraw
    under 100 ms. Call it after the layout is fixed. The bar is placed in pixels, so the figure
    must be saved at its own dpi, as ``Explorer`` does.
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
    """Draw a labelled heatmap (rows = ``row_name``, columns = ``col_name``) with a colour bar.

    ``masked`` (bool, same shape, True = masked out) hatches those cells in grey.
    ``annotate``: True prints every value, ``"rowmax"`` only each row's largest (an attention
    row's winner), which is far cheaper to draw. ``colorbar="light"`` paints the bar straight onto
    the figure (see :func:`light_colorbar`): set the axes' layout first.
    Returns a :class:`HoverGrid` that :class:`Explorer` turns into hover read-outs on the site.
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


def _is_bool_options(options: Sequence) -> bool:
    return len(options) == 2 and all(isinstance(o, (bool, np.bool_)) for o in options)


def _is_number_options(options: Sequence) -> bool:
    return all(
        isinstance(o, (int, float, np.number)) and not isinstance(o, (bool, np.bool_))
        for o in options
    )


def _option_text(option: Any) -> str:
    return f"{option:g}" if isinstance(option, (float, np.floating)) else str(option)


_INLINE_MATH = re.compile(r"\$([^$\n]+?)\$")


def _label_html(text: str) -> tuple[str, bool]:
    """Escape ``text`` for HTML; ``$...$`` becomes ``\\(...\\)`` for MathJax. Returns (html, has_math)."""
    parts, has_math, pos = [], False, 0
    for m in _INLINE_MATH.finditer(text):
        parts.append(html.escape(text[pos : m.start()]))
        parts.append("\\(" + html.escape(m.group(1)) + "\\)")
        has_math, pos = True, m.end()
    parts.append(html.escape(text[pos:]))
    return "".join(parts), has_math


_TEX_WORDS = {
    "sqrt": "\u221a",
    "cdot": "\u00b7",
    "times": "\u00d7",
    "top": "\u1d40",
    "to": "\u2192",
    "infty": "\u221e",
    "alpha": "\u03b1",
    "beta": "\u03b2",
    "gamma": "\u03b3",
    "epsilon": "\u03b5",
    "theta": "\u03b8",
    "lambda": "\u03bb",
    "mu": "\u03bc",
    "sigma": "\u03c3",
    "tau": "\u03c4",
    "omega": "\u03c9",
}


def _plain(text: str) -> str:
    """``text`` for alt text: ``$\\sqrt{d_k}$`` becomes ``\u221ad_k`` (no TeX markup read aloud)."""

    def untex(m: re.Match) -> str:
        body = re.sub(
            r"\\([A-Za-z]+)\s*",
            lambda w: _TEX_WORDS.get(w.group(1), w.group(1)),
            m.group(1),
        )
        return re.sub(r"[{}]", "", body)

    return _INLINE_MATH.sub(untex, text)


def _palette_png(rgba: np.ndarray) -> bytes:
    """Encode an (H, W, 4) uint8 image as a palette PNG: these plots have few colours, so this is a
    third of the size of matplotlib's RGBA PNG and looks the same."""
    from PIL import Image  # a matplotlib dependency

    rgb = Image.fromarray(np.ascontiguousarray(rgba[..., :3]))
    quant = rgb.quantize(
        colors=PALETTE_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    out = io.BytesIO()
    quant.save(out, format="PNG", compress_level=9)
    return out.getvalue()


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels, read from the PNG header."""
    return struct.unpack(">II", png[16:24])


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
                raise ValueError(
                    f"default {name}={value!r} is not one of the options {self.controls.get(name)}"
                )
            self.defaults[name] = value
        self.labels = {name: (labels or {}).get(name, name) for name in self.controls}
        self.figsize, self.dpi, self.title = figsize, dpi, title
        n_frames = int(np.prod([len(o) for o in self.controls.values()]))
        if n_frames > MAX_FRAMES:
            raise ValueError(
                f"{n_frames} combinations of control values exceed MAX_FRAMES={MAX_FRAMES}"
            )
        self._fig = Figure(figsize=figsize, dpi=dpi)
        self._canvas = FigureCanvasAgg(
            self._fig
        )  # draws off-screen, whatever backend Jupyter uses
        self._widget = None

    # -- drawing -------------------------------------------------------------------------------
    def _draw(self, values: dict[str, Any]):
        """Clear the figure and let ``draw`` fill it; returns what ``draw`` returned (HoverGrids or None)."""
        self._fig.clear()
        return self.draw(self._fig, **values)

    def _render(self, values: dict[str, Any]) -> tuple[bytes, list[dict]]:
        grids = self._draw(values)
        buf = io.BytesIO()
        self._fig.savefig(buf, format="png", dpi=self.dpi, metadata={"Software": None})
        return buf.getvalue(), self._hover_data(self._fig, grids)

    def update(self, **values: Any) -> bytes:
        """Redraw for these control values and return the PNG (what a live control does on change)."""
        full = {**self.defaults, **values}
        self._draw(full)
        buf = io.BytesIO()
        self._fig.savefig(buf, format="png", dpi=self.dpi, metadata={"Software": None})
        png = buf.getvalue()
        if self._widget is not None:
            self._image.value = png
        return png

    @staticmethod
    def _hover_data(fig: Figure, grids) -> list[dict]:
        if grids is None:
            return []
        grids = (
            [grids]
            if isinstance(grids, HoverGrid)
            else [g for g in grids if isinstance(g, HoverGrid)]
        )
        w, h = fig.canvas.get_width_height()
        out = []
        for g in grids:
            bbox = g.ax.get_window_extent()
            out.append(
                {
                    # axes box as fractions of the image, origin top-left
                    "box": [
                        bbox.x0 / w,
                        1 - bbox.y1 / h,
                        bbox.width / w,
                        bbox.height / h,
                    ],
                    "v": [
                        [None if not np.isfinite(x) else float(f"{x:.4g}") for x in row]
                        for row in g.values
                    ],
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

            self._image = W.Image(
                format="png", layout=W.Layout(max_width="100%", height="auto")
            )
            style = {"description_width": "initial"}  # never truncate a label
            ctrls = {}
            for name, opts in self.controls.items():
                label = self.labels[name]
                if _is_bool_options(opts):
                    c = W.Checkbox(
                        value=bool(self.defaults[name]),
                        description=label,
                        indent=False,
                        style=style,
                    )
                elif _is_number_options(opts):
                    c = W.SelectionSlider(
                        options=[(_option_text(o), o) for o in opts],
                        value=self.defaults[name],
                        description=label,
                        continuous_update=True,
                        style=style,
                    )
                else:
                    c = W.Dropdown(
                        options=opts,
                        value=self.defaults[name],
                        description=label,
                        style=style,
                    )
                ctrls[name] = c

            def on_change(_change=None):
                self.update(**{n: c.value for n, c in ctrls.items()})

            for c in ctrls.values():
                c.observe(on_change, names="value")
            on_change()
            row = W.HBox(list(ctrls.values()), layout=W.Layout(flex_flow="row wrap"))
            parts = [row, self._image]
            if self.title:
                parts.insert(
                    0, W.HTMLMath(f"<b>{html.escape(self.title)}</b>")
                )  # typesets $...$
            self._widget = W.VBox(parts)
        return self._widget

    # -- kernel-free twin ----------------------------------------------------------------------
    def frames(self) -> dict[str, dict]:
        """Every combination of control values, rendered: key "i,j,..." (option indices) -> frame.

        A frame is ``{"png": base64 PNG, "hover": [...]}``; a frame whose picture is identical to an
        earlier one is ``{"ref": that frame's key, "hover": [...]}`` so each picture is stored once.
        """
        names = list(self.controls)
        out: dict[str, dict] = {}
        seen: dict[bytes, str] = {}
        for idx in itertools.product(*(range(len(self.controls[n])) for n in names)):
            values = {n: self.controls[n][i] for n, i in zip(names, idx)}
            grids = self._draw(values)
            self._canvas.draw()
            hover = self._hover_data(self._fig, grids)
            rgba = np.asarray(
                self._canvas.buffer_rgba()
            )  # (H, W, 4) uint8, what savefig would write
            digest = hashlib.sha1(rgba.tobytes()).digest() + bytes(
                str(rgba.shape), "ascii"
            )
            key = ",".join(map(str, idx))
            if digest in seen:
                out[key] = {"ref": seen[digest], "hover": hover}
            else:
                seen[digest] = key
                out[key] = {
                    "png": base64.b64encode(_palette_png(rgba)).decode("ascii"),
                    "hover": hover,
                }
        return out

    def _describe(self, values: dict[str, Any]) -> str:
        """Alt text: the title and the value of every control."""
        settings = "; ".join(
            f"{_plain(self.labels[n])}: {_option_text(values[n])}"
            for n in self.controls
        )
        return (
            f"{_plain(self.title)} ({settings})"
            if self.title
            else f"Interactive figure ({settings})"
        )

    def to_html(self) -> str:
        """A self-contained HTML block (inline PNGs and a small script) that needs no kernel and no network."""
        names = list(self.controls)
        frames = self.frames()
        default_key = ",".join(
            str(self.controls[n].index(self.defaults[n])) for n in names
        )
        frames_json = json.dumps(frames, separators=(",", ":")).replace(
            "<", "\\u003c"
        )  # never ends the script
        digest = hashlib.sha1(
            f"{next(_counter)}|{self.title}|{names}|{frames_json}".encode()
        ).hexdigest()
        uid = "tlx-" + digest[:12]
        first = frames[default_key]
        first_png = first["png"] if "png" in first else frames[first["ref"]]["png"]
        width, height = _png_size(base64.b64decode(first_png))
        has_hover = any(f["hover"] for f in frames.values())

        parts = [f'<div class="tl-explorer" id="{uid}" role="group"']
        if self.title:
            title_html, math = _label_html(self.title)
            parts.append(f' aria-labelledby="{uid}-title">')
            cls = "tl-explorer-title mathjax_process" if math else "tl-explorer-title"
            parts.append(f'<div class="{cls}" id="{uid}-title">{title_html}</div>')
        else:
            parts.append(' aria-label="interactive figure">')
        parts.append('<div class="tl-explorer-controls">')
        for k, name in enumerate(names):
            opts = self.controls[name]
            d = opts.index(self.defaults[name])
            label, math = _label_html(self.labels[name])
            span = f'<span class="tl-ctl-label{" mathjax_process" if math else ""}">{label}</span>'
            if _is_bool_options(opts):
                checked = " checked" if bool(self.defaults[name]) else ""
                parts.append(
                    f'<label class="tl-ctl tl-ctl-checkbox"><input type="checkbox" data-k="{k}" '
                    f'data-true="{opts.index(True)}" data-false="{opts.index(False)}"{checked}> {span}</label>'
                )
            elif _is_number_options(opts):
                texts = json.dumps([_option_text(o) for o in opts])
                parts.append(
                    f'<label class="tl-ctl tl-ctl-range">{span} <input type="range" min="0" max="{len(opts) - 1}" '
                    f'step="1" value="{d}" data-k="{k}" aria-valuetext="{html.escape(_option_text(opts[d]))}" '
                    f"data-texts='{html.escape(texts)}'> "
                    f'<output aria-hidden="true">{html.escape(_option_text(opts[d]))}</output></label>'
                )
            else:
                options = "".join(
                    f'<option value="{i}"{" selected" if i == d else ""}>{html.escape(str(o))}</option>'
                    for i, o in enumerate(opts)
                )
                parts.append(
                    f'<label class="tl-ctl tl-ctl-select">{span} <select data-k="{k}">{options}</select></label>'
                )
        parts.append("</div>")
        parts.append(
            '<div class="tl-explorer-figure" style="position:relative;display:inline-block;max-width:100%">'
            f'<img alt="{html.escape(self._describe(self.defaults))}" width="{width}" height="{height}" '
            f'src="data:image/png;base64,{first_png}" style="max-width:100%;height:auto;display:block">'
            '<div class="tl-hover" style="display:none;position:absolute;pointer-events:none;z-index:2;'
            "background:rgba(255,255,255,.95);color:#111;border:1px solid #888;border-radius:3px;padding:1px 6px;"
            'font:12px/1.5 sans-serif;white-space:nowrap"></div></div>'
        )
        if has_hover:
            parts.append(
                '<div class="tl-explorer-hint">Point at a cell to read its value.</div>'
            )
        parts.append(
            f'<script type="application/json" class="tl-frames">{frames_json}</script>'
        )
        describe = {
            "title": _plain(self.title) if self.title else "Interactive figure",
            "labels": [_plain(self.labels[n]) for n in names],
            "texts": [[_option_text(o) for o in self.controls[n]] for n in names],
        }
        describe_json = json.dumps(describe, separators=(",", ":")).replace(
            "<", "\\u003c"
        )
        parts.append(
            f'<script type="application/json" class="tl-describe">{describe_json}</script>'
        )
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
            bundle["application/vnd.jupyter.widget-view+json"] = view[
                "application/vnd.jupyter.widget-view+json"
            ]
        return bundle


_JS = r"""
(function () {
  var me = document.currentScript, root = (me && me.parentNode) || document.getElementById("__UID__");
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var frames, info;
  try {
    frames = JSON.parse(root.querySelector("script.tl-frames").textContent);
    info = JSON.parse(root.querySelector("script.tl-describe").textContent);
  } catch (err) { return; }
  var img = root.querySelector(".tl-explorer-figure img"), tip = root.querySelector(".tl-hover");
  var ctls = root.querySelectorAll("[data-k]");
  function frame(key) {
    var f = frames[key];
    return f && f.ref !== undefined ? { png: frames[f.ref].png, hover: f.hover } : f;
  }
  function state() {
    var idx = [];
    ctls.forEach(function (c) {
      var k = +c.getAttribute("data-k");
      if (c.type === "checkbox") idx[k] = c.checked ? c.getAttribute("data-true") : c.getAttribute("data-false");
      else idx[k] = c.value;
      if (c.type === "range") {
        var text = info.texts[k][+c.value], out = c.parentNode.querySelector("output");
        if (out) out.textContent = text;
        c.setAttribute("aria-valuetext", text);
      }
    });
    return idx;
  }
  var current = frame(state().join(","));
  function show() {
    var idx = state(), f = frame(idx.join(","));
    if (!f) return;
    current = f;
    img.src = "data:image/png;base64," + f.png;
    img.alt = info.title + " (" + idx.map(function (i, k) { return info.labels[k] + ": " + info.texts[k][+i]; }).join("; ") + ")";
    tip.style.display = "none";
  }
  ctls.forEach(function (c) { c.addEventListener("input", show); c.addEventListener("change", show); });
  function hover(e) {
    var r = img.getBoundingClientRect(), fx = (e.clientX - r.left) / r.width, fy = (e.clientY - r.top) / r.height;
    var hit = null;
    ((current && current.hover) || []).forEach(function (g) {
      var x = (fx - g.box[0]) / g.box[2], y = (fy - g.box[1]) / g.box[3];
      if (x >= 0 && x < 1 && y >= 0 && y < 1) {
        var i = Math.floor(y * g.r.length), j = Math.floor(x * g.c.length), v = g.v[i][j];
        hit = g.rn + " " + g.r[i] + " \u2192 " + g.cn + " " + g.c[j] + ": " + (v === null ? "masked" : v);
      }
    });
    if (!hit) { tip.style.display = "none"; return; }
    tip.textContent = hit;
    tip.style.display = "block";
    var left = e.clientX - r.left + 12, top = e.clientY - r.top + 14;
    if (left + tip.offsetWidth > r.width) left = Math.max(0, e.clientX - r.left - tip.offsetWidth - 8);
    if (top + tip.offsetHeight > r.height) top = Math.max(0, e.clientY - r.top - tip.offsetHeight - 8);
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  img.addEventListener("pointermove", hover);
  img.addEventListener("pointerdown", hover);
  img.addEventListener("pointerleave", function () { tip.style.display = "none"; });
})();
"""


def show_source(obj) -> Markdown:
    """Display the library's own source of ``obj`` as a highlighted code block (never a retyped copy)."""
    import inspect

    from IPython.display import Markdown

    src = inspect.getsource(obj)
    module = inspect.getmodule(obj).__name__
    return Markdown(
        f"Source of `{obj.__qualname__}` in `{module}`:\n\n```python\n{src}```"
    )


def figure(figsize: tuple[float, float] = (6, 4), **kwargs) -> tuple[Figure, Any]:
    """A pyplot figure for a static plot in a chapter (closed by the caller's notebook display)."""
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize, **kwargs)
