"""The kernel-free twin of an Explorer: every frame rendered in advance, in one block.

``frames(controls, render)`` renders every combination of control values;
``to_html(spec, frames)`` writes them, with the controls, into a self-contained HTML
block; ``explorer.js`` (shipped as package data and inlined once per figure) swaps the
picture when a control changes and shows a heatmap cell's value under the pointer.
Nothing is loaded from another host.

Every word of the block (title, control labels, options, the hover hint, the hover
read-out's row and column names, the word for a masked cell) goes through one
:class:`PageWords` lookup: in English it returns the word as it is, and records it; an
edition of the book passes its own table (the build's catalog ``figures.po``), so that
the block is written in the edition's language in the first place.

Pages stay small: each frame is re-encoded as a palette PNG of at most
``PALETTE_COLORS`` colours (about a third of matplotlib's RGBA output, with no visible
change on these flat-coloured plots), and frames that come out identical are stored
once. Titles and control labels may hold inline math, ``$...$``, which MathJax typesets
on the site.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import io
import itertools
import json
import struct
from collections import Counter
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from .controls import Spec, is_bool_options, is_number_options, option_text
from .heatmap import HoverGrid
from .labels import label_html, label_text, plain, script_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_FRAMES = 160  # a page's frames must stay well inside its 2 MB budget
PALETTE_COLORS = 256  # frames are palette PNGs with at most this many colours
# zlib's default level, not 9: 48 frames of four explorers took 1.03 s against 1.49 s
# (palette quantisation included) for 487 KiB against 454 KiB; every frame is encoded
# three times, once per edition
PNG_LEVEL = 6
# how many blocks of the same content this kernel has written: an element id is the
# content's digest and this count, unique on a page and the same at every build
_written: Counter[str] = Counter()
HINT = "Point at a cell to read its value."
MASKED = "masked"  # the hover read-out of a masked cell


class PageWords:
    """The words of the HTML blocks in one language.

    ``table`` maps a word as the English block writes it (:func:`.labels.label_html`:
    HTML, math as ``\\(...\\)``) to its translation, in the same form; a word it lacks
    stays as it is. Calling it looks a word up and records it in ``seen`` (the words an
    edition's catalog needs); :meth:`get` looks up without recording.
    """

    def __init__(self, table: dict[str, str] | None = None) -> None:
        self.table = table or {}
        self.seen: dict[str, None] = {}  # the words looked up, in the order first met

    def __call__(self, word: str) -> str:
        self.seen[word] = None
        return self.table.get(word, word)

    def get(self, word: str) -> str:
        return self.table.get(word, word)

    def text(self, label: str) -> str:
        """A label as written (``$...$``) in this language, as the table has it."""
        markup = label_html(label)[0]
        return label_text(self.table[markup]) if markup in self.table else label


# --------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------


def frames(
    controls: dict[str, list],
    render: Callable[[dict[str, Any]], tuple[np.ndarray, list[dict]]],
    like: dict[str, dict] | None = None,
) -> dict[str, dict]:
    """Every combination of control values, rendered: "i,j,..." (indices) -> frame.

    ``render(values) -> (rgba, hover)`` draws one combination: the (H, W, 4) uint8 image
    and its :func:`hover_data`. A frame is ``{"png": base64 PNG, "hover": [...]}``; a
    frame whose picture is identical to an earlier one is ``{"ref": that frame's key,
    "hover": [...]}``, so that each picture is stored once.

    ``like``: the same figure's frames with other words in the pictures (the English
    ones, when an edition's are drawn). A frame whose picture was the same as an
    earlier one there is the same here too: it is not drawn again, and its hover data
    are its own, placed where the earlier frame's are.
    """
    names = list(controls)
    out: dict[str, dict] = {}
    seen: dict[bytes, str] = {}
    for idx in itertools.product(*(range(len(controls[n])) for n in names)):
        key = ",".join(map(str, idx))
        if like is not None and "ref" in like[key]:
            first = out[like[key]["ref"]]
            boxes = [h["box"] for h in first["hover"]]
            hover = [
                {**h, "box": box}
                for h, box in zip(like[key]["hover"], boxes, strict=True)
            ]
            out[key] = {"ref": first.get("ref", like[key]["ref"]), "hover": hover}
            continue
        values = {n: controls[n][i] for n, i in zip(names, idx, strict=True)}
        rgba, hover = render(values)
        digest = hashlib.sha1(rgba.tobytes()).digest() + bytes(str(rgba.shape), "ascii")
        if digest in seen:
            out[key] = {"ref": seen[digest], "hover": hover}
        else:
            seen[digest] = key
            out[key] = {
                "png": base64.b64encode(palette_png(rgba)).decode("ascii"),
                "hover": hover,
            }
    return out


def hover_data(fig: Figure, grids) -> list[dict]:
    """What the script shows under the pointer: each HoverGrid's box and values."""
    if grids is None:
        return []
    if isinstance(grids, HoverGrid):
        grids = [grids]
    else:
        grids = [g for g in grids if isinstance(g, HoverGrid)]
    w, h = fig.canvas.get_width_height()
    out = []
    for g in grids:
        bbox = g.ax.get_window_extent()
        out.append(
            {
                # axes box as fractions of the image, origin top-left
                "box": [bbox.x0 / w, 1 - bbox.y1 / h, bbox.width / w, bbox.height / h],
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


def palette_png(rgba: np.ndarray) -> bytes:
    """Encode an (H, W, 4) uint8 image as a palette PNG.

    These plots have few colours, so this is a third of the size of matplotlib's RGBA
    PNG and looks the same.
    """
    from PIL import Image  # a matplotlib dependency

    rgb = Image.fromarray(np.ascontiguousarray(rgba[..., :3]))
    quant = rgb.quantize(
        colors=PALETTE_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    out = io.BytesIO()
    quant.save(out, format="PNG", compress_level=PNG_LEVEL)
    return out.getvalue()


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels, read from the PNG header."""
    return struct.unpack(">II", png[16:24])


# --------------------------------------------------------------------------------------
# Alt text (the labels' HTML and plain text: .labels)
# --------------------------------------------------------------------------------------


def describe(spec: Spec, values: dict[str, Any], words: PageWords | None = None) -> str:
    """Alt text: the title and the value of every control (in ``words``' language)."""
    words = words or PageWords()
    settings = "; ".join(
        f"{plain(words.text(spec.labels[n]))}: {_option(values[n], words)}"
        for n in spec.controls
    )
    if spec.title:
        return f"{plain(words.text(spec.title))} ({settings})"
    return f"Interactive figure ({settings})"


def _option(value: Any, words: PageWords) -> str:
    """An option as the reader sees it: a word in ``words``' language, a number as
    it is."""
    text = option_text(value)
    return html.unescape(words.get(html.escape(text)))


# --------------------------------------------------------------------------------------
# The HTML block
# --------------------------------------------------------------------------------------


@functools.cache
def script() -> str:
    """explorer.js without its leading ``//`` lines (notes for maintainers)."""
    text = resources.files(__package__).joinpath("explorer.js").read_text("utf-8")
    lines = text.split("\n")
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    return "\n".join(lines)


def _control(k: int, name: str, spec: Spec, words: PageWords) -> str:
    """One control's markup; ``data-k`` is its index in the frame keys."""
    opts = spec.controls[name]
    d = opts.index(spec.defaults[name])
    label, math = label_html(spec.labels[name])
    label = words(label)
    span = (
        f'<span class="tl-ctl-label{" mathjax_process" if math else ""}">{label}</span>'
    )
    if is_bool_options(opts):
        checked = " checked" if bool(spec.defaults[name]) else ""
        return (
            '<label class="tl-ctl tl-ctl-checkbox"><input type="checkbox"'
            f' data-k="{k}" data-true="{opts.index(True)}"'
            f' data-false="{opts.index(False)}"{checked}> {span}</label>'
        )
    if is_number_options(opts):
        texts = json.dumps([option_text(o) for o in opts])
        shown = html.escape(option_text(opts[d]))
        return (
            f'<label class="tl-ctl tl-ctl-range">{span} <input type="range" min="0"'
            f' max="{len(opts) - 1}" step="1" value="{d}" data-k="{k}"'
            f" aria-valuetext=\"{shown}\" data-texts='{html.escape(texts)}'> "
            f'<output aria-hidden="true">{shown}</output></label>'
        )
    options = "".join(
        f'<option value="{i}"{" selected" if i == d else ""}>'
        f"{words(html.escape(str(o)))}</option>"
        for i, o in enumerate(opts)
    )
    return (
        f'<label class="tl-ctl tl-ctl-select">{span} <select data-k="{k}">{options}'
        "</select></label>"
    )


def to_html(
    spec: Spec, rendered: dict[str, dict], words: PageWords | None = None
) -> str:
    """A self-contained HTML block (inline PNGs, a small script): no kernel, no CDN.

    Its words are looked up in ``words`` (English, recorded, when None)."""
    words = words if words is not None else PageWords()
    names = list(spec.controls)
    default_key = ",".join(str(spec.controls[n].index(spec.defaults[n])) for n in names)
    # the words in the order the block shows them (the order of the catalogs)
    title_html, math = label_html(spec.title) if spec.title else ("", False)
    title_html = words(title_html) if spec.title else ""
    controls = [_control(k, name, spec, words) for k, name in enumerate(names)]
    has_hover = any(f["hover"] for f in rendered.values())
    hint = words(HINT) if has_hover else ""
    rendered = {key: _named(frame, words) for key, frame in rendered.items()}
    masked = words(MASKED)
    frames_json = script_json(rendered)
    digest = hashlib.sha1(f"{spec.title}|{names}|{frames_json}".encode()).hexdigest()
    uid = f"tlx-{digest[:12]}"
    if _written[digest]:  # the same block again in this kernel
        uid += f"-{_written[digest]}"
    _written[digest] += 1
    first = rendered[default_key]
    first_png = first["png"] if "png" in first else rendered[first["ref"]]["png"]
    width, height = png_size(base64.b64decode(first_png))

    parts = [f'<div class="tl-explorer" id="{uid}" role="group"']
    if spec.title:
        parts.append(f' aria-labelledby="{uid}-title">')
        cls = "tl-explorer-title mathjax_process" if math else "tl-explorer-title"
        parts.append(f'<div class="{cls}" id="{uid}-title">{title_html}</div>')
    else:
        parts.append(' aria-label="interactive figure">')
    parts.append('<div class="tl-explorer-controls">')
    parts.extend(controls)
    parts.append("</div>")
    parts.append(
        '<div class="tl-explorer-figure" style="position:relative;'
        'display:inline-block;max-width:100%">'
        f'<img alt="{html.escape(describe(spec, spec.defaults, words))}"'
        f' width="{width}" height="{height}" src="data:image/png;base64,{first_png}"'
        ' style="max-width:100%;height:auto;display:block">'
        '<div class="tl-hover" style="display:none;position:absolute;'
        "pointer-events:none;z-index:2;background:rgba(255,255,255,.95);color:#111;"
        "border:1px solid #888;border-radius:3px;padding:1px 6px;"
        'font:12px/1.5 sans-serif;white-space:nowrap"></div></div>'
    )
    if has_hover:
        parts.append(f'<div class="tl-explorer-hint">{hint}</div>')
    parts.append(
        f'<script type="application/json" class="tl-frames">{frames_json}</script>'
    )
    labels = {
        "title": plain(words.text(spec.title)) if spec.title else "Interactive figure",
        "labels": [plain(words.text(spec.labels[n])) for n in names],
        "texts": [[_option(o, words) for o in spec.controls[n]] for n in names],
        "masked": masked,
    }
    described = script_json(labels)
    parts.append(
        f'<script type="application/json" class="tl-describe">{described}</script>'
    )
    parts.append(f"<script>\n{script().replace('__UID__', uid)}</script>")
    parts.append("</div>")
    return "".join(parts)


def _named(frame: dict, words: PageWords) -> dict:
    """A frame whose hover read-outs name their rows and columns in ``words``."""
    if not frame.get("hover"):
        return frame
    hover = [
        {**h, "rn": h["rn"] and words(h["rn"]), "cn": h["cn"] and words(h["cn"])}
        for h in frame["hover"]
    ]
    return {**frame, "hover": hover}
