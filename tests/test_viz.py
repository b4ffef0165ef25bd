"""The interactive-figure machinery: one object gives a live widget in Jupyter and a
static twin on the site."""

import base64
import hashlib
import io
import itertools
import json
import random
import re
from collections import Counter
from importlib import resources

import numpy as np
import pytest

from transformer_lib.viz import Explorer, HoverGrid, all_explorers, heatmap, static


def _draw(fig, T, temperature, causal):
    ax = fig.add_subplot()
    s = np.random.default_rng(0).normal(size=(T, T)) / temperature
    if causal:
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    return heatmap(
        ax, w, [f"t{i}" for i in range(T)], [f"t{i}" for i in range(T)], title="weights"
    )


def make():
    return Explorer(
        _draw,
        {"T": [3, 5], "temperature": [0.5, 1.0, 2.0], "causal": [False, True]},
        defaults={"temperature": 1.0},
    )


def test_update_changes_the_picture():
    e = make()
    a, b = e.update(temperature=0.5), e.update(temperature=2.0)
    assert a[:8] == b"\x89PNG\r\n\x1a\n" and a != b
    assert e.update(temperature=0.5) == a  # deterministic


def test_static_twin_has_every_frame_and_hover_values():
    e = make()
    html = e.to_html()
    frames = json.loads(
        re.search(
            r'<script type="application/json" class="tl-frames">(.*?)</script>', html
        ).group(1)
    )
    assert len(frames) == 2 * 3 * 2
    hover = frames["1,1,1"]["hover"][0]
    assert hover["r"] == ["t0", "t1", "t2", "t3", "t4"] and len(hover["v"]) == 5
    assert hover["v"][0][4] == 0.0  # causal: query 0 gives key 4 no weight
    assert all(0 <= x <= 1 for x in hover["box"])
    assert 'type="range"' in html and 'type="checkbox"' in html
    assert "http://" not in html and "https://" not in html  # nothing from another host


def test_bundle_has_live_view_and_static_twin():
    bundle = make()._repr_mimebundle_()
    assert "text/html" in bundle and "tl-explorer" in bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_bad_controls_are_refused():
    with pytest.raises(ValueError, match="not one of the options"):
        Explorer(_draw, {"T": [3]}, defaults={"T": 4})
    with pytest.raises(ValueError, match="exceed"):
        Explorer(_draw, {"a": list(range(20)), "b": list(range(20))})


@pytest.mark.slow  # every explorer built and redrawn: not in make test-fast
def test_every_registered_explorer_builds_and_redraws():
    found = all_explorers()
    assert found, "no chapter registers an explorer"
    for name, factory in found.items():
        e = factory()
        assert isinstance(e, Explorer), name
        for control, options in e.controls.items():
            assert e.update(**{control: options[-1]})[:4] == b"\x89PNG", (name, control)


# --------------------------------------------------------------------------------------
# The static twin's bytes, pinned: a refactoring must not change what readers get
# --------------------------------------------------------------------------------------


def _pinned_draw(fig, n, flip, cmap, note):
    """A figure without text: its pixels do not depend on the fonts installed."""
    ax = fig.add_axes((0.1, 0.1, 0.6, 0.8))
    values = np.linspace(0.0, 1.0, n * n).reshape(n, n)
    if flip:
        values = values[::-1]
    ax.imshow(values, cmap=cmap, vmin=0, vmax=1, interpolation="nearest", aspect="auto")
    ax.set_axis_off()
    rows, cols = [f"q{i}" for i in range(n)], [f"k{j}" for j in range(n)]
    return HoverGrid(ax, values, rows, cols, "query", "key")


# sha256 of to_html() for _pinned_figure() with the element id blanked; recorded with
# explorer.py as it was before its split into interactive, live, static, heatmap and
# source (commit 695da99), and again when .tl-describe gained the word for a masked
# cell (and explorer.js read it from there), for the Chinese editions; and again when
# the frames' PNGs went from zlib level 9 to 6 (static.PNG_LEVEL: the same pixels); and
# again when the id stopped counting the session's figures (static._written).
PINNED_HTML = "31bce962c9a3c37ba4b9fbf0ca57590e8812277995f0e30740c94acf8daac56a"
# the same HTML with the PNGs and the element id blanked: what our own code writes
PINNED_MARKUP = "16e40cd124b4cd84ea03ba3643309294509cf172220bb8dafd30bab30dd01f0d"


def _pinned_figure() -> Explorer:
    """Every kind of control, math and HTML in labels, hover data, repeated frames."""
    return Explorer(
        _pinned_draw,
        {
            "n": [2, 3],
            "flip": [False, True],
            "cmap": ["viridis", "magma"],
            "note": ["a", "b"],  # changes nothing: its frames are stored once
        },
        defaults={"n": 3},
        labels={"n": "size $\\sqrt{n}$", "flip": "flip <rows>"},
        figsize=(3, 2),
        dpi=50,
        title="A pinned figure: $\\alpha < \\beta$ & more",
    )


def test_static_twin_html_is_byte_identical_to_the_pinned_one(monkeypatch):
    # as if first in a session: the element id counts the blocks of the same content
    monkeypatch.setattr(static, "_written", Counter())
    html = _pinned_figure().to_html()
    uid = re.search(r'id="(tlx-[0-9a-f]{12})"', html).group(1)
    blanked = html.replace(uid, "tlx-UID")
    markup = re.sub(r'("png":"|base64,)[A-Za-z0-9+/=]+', r"\1PNG", blanked)
    assert html.count('"ref"') == 8 and 'class="tl-hover"' in html
    assert hashlib.sha256(markup.encode()).hexdigest() == PINNED_MARKUP, (
        "the static twin's markup changed: the site's HTML for the same figure differs"
    )
    assert hashlib.sha256(blanked.encode()).hexdigest() == PINNED_HTML, (
        "the markup is the same but the frames' PNG bytes differ: did a matplotlib or"
        " Pillow upgrade change the rendering? If the figures look right, re-pin"
    )


def test_element_ids_come_from_the_content_and_stay_unique(monkeypatch):
    """A block's id is its content's digest, the same at every build whatever was drawn
    before it; the same block written again in the kernel gets a numbered id."""
    monkeypatch.setattr(static, "_written", Counter())
    first = _pinned_figure().to_html()
    make().to_html()  # another figure in between changes nothing
    again = _pinned_figure().to_html()
    uid = re.search(r'id="(tlx-[0-9a-f]{12})"', first).group(1)
    assert f'id="{uid}-1"' in again and f'id="{uid}"' not in again
    assert again.replace(f"{uid}-1", uid) == first


def test_the_script_is_a_packaged_js_file_inlined_once_per_figure():
    js = resources.files("transformer_lib.viz").joinpath("explorer.js").read_text()
    assert js.startswith("//")  # notes for maintainers, not shipped
    html = make().to_html()
    before, after = static.script().split("__UID__")  # the element id goes between
    assert html.count("<script>") == 1 and before in html and after in html
    assert "//" not in static.script().split("\n")[0]
    assert "__UID__" not in html and "document.currentScript" in html


def test_the_live_widget_shows_the_figure_before_any_control_moves():
    e = make()
    image = e.widget().children[-1]
    assert image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.value == e.update()  # the defaults' picture
    slider = e.widget().children[0].children[1]  # temperature
    slider.value = 2.0
    assert image.value == e.update(temperature=2.0) != e.update()


def test_public_names_import_from_viz():
    from transformer_lib import viz

    for name in ("Explorer", "HoverGrid", "heatmap", "light_colorbar", "show_source"):
        assert callable(getattr(viz, name)), name
    assert not hasattr(viz, "figure") and not hasattr(Explorer, "_render")  # dead code


# --------------------------------------------------------------------------------------
# Live figures: drawn once, then only their changing artists are repainted
# --------------------------------------------------------------------------------------


def _full_draw(explorer: Explorer, values: dict) -> np.ndarray:
    """The same figure for ``values``, built and drawn from scratch: the reference."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=explorer.figsize, dpi=explorer.dpi)
    canvas = FigureCanvasAgg(fig)
    explorer.draw(fig).update(**values)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def _combos(explorer: Explorer) -> list[dict]:
    names = list(explorer.controls)
    return [
        dict(zip(names, c, strict=True))
        for c in itertools.product(*explorer.controls.values())
    ]


CHAPTER_EXPLORERS = all_explorers()  # name -> factory (nothing is built yet)


@pytest.mark.parametrize("name", sorted(CHAPTER_EXPLORERS))
def test_a_redraw_paints_what_a_full_draw_paints_whatever_came_before(name):
    """Every chapter's explorer is a live figure. The repainted picture equals the
    figure drawn from scratch (a changed artist that is not registered, or a layout
    that is not keyed, leaves stale pixels), and does not depend on the values shown
    before (the live widget and the static twin visit the values in different
    orders)."""
    explorer = CHAPTER_EXPLORERS[name]()
    assert explorer._live_class, f"{name} redraws from scratch: make it a LiveFigure"
    combos = _combos(explorer)
    shuffled = combos[:]
    random.Random(0).shuffle(shuffled)
    for values in shuffled:  # every frame, in an order no reader follows
        explorer.paint(values)
    for k, values in enumerate(shuffled[:: max(1, len(shuffled) // 4)]):  # 4 or so
        picture = explorer.paint(values)[0].astype(int)
        full = _full_draw(explorer, values).astype(int)
        differ = (np.abs(picture - full).max(-1) > 8).sum()
        assert differ <= 10, (name, values, f"{differ} pixels differ")
        if k >= 2:
            continue
        fresh = CHAPTER_EXPLORERS[name]()
        assert np.array_equal(fresh.paint(values)[0], explorer.paint(values)[0]), (
            name,
            values,
            "the picture depends on what was shown before",
        )


def test_the_static_twin_shows_the_live_widgets_pictures():
    explorer = CHAPTER_EXPLORERS["ch02_scale.scale"]()
    frames = explorer.frames()
    from PIL import Image

    for key in ("0,0", "6,1", "9,0"):
        i, j = map(int, key.split(","))
        values = {"d_k": explorer.controls["d_k"][i], "scale": [True, False][j]}
        live = Image.open(io.BytesIO(explorer.update(**values))).convert("RGB")
        frame = frames[key]
        png = frame["png"] if "png" in frame else frames[frame["ref"]]["png"]
        twin = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")
        # the twin is a 256-colour palette copy of the same picture
        diff = np.abs(np.asarray(live, int) - np.asarray(twin, int)).max(-1)
        assert (diff > 24).mean() < 0.002, key


def test_heatmap_set_changes_values_mask_title_and_labels():
    from matplotlib.figure import Figure

    from transformer_lib.viz.heatmap import Heatmap

    fig = Figure()
    ax = fig.add_subplot()
    values = np.array([[0.2, 0.8], [0.5, np.nan]])
    h = Heatmap(ax, values, ["a", "b"], ["x", "y"], annotate="rowmax", maskable=True)
    assert [t.get_text() for t in h.texts] == ["0.80", "0.50"]
    assert not h.shade.get_visible()  # nothing masked yet
    grid = h.set(values.T, title="new")  # [[0.2, 0.5], [0.8, nan]]
    assert ax.get_title() == "new" and grid.values[1, 0] == 0.8
    assert [t.get_text() for t in h.texts] == ["0.50", "0.80"]
    h.set(values.T, masked=~np.eye(2, dtype=bool))  # both maxima masked
    assert h.shade.get_array().mask.tolist() == [[True, False], [False, True]]
    assert [t.get_visible() for t in h.texts] == [False, False]
    h.set_labels(["p", "q", "r"], ["x", "y"], (3, 2))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["p", "q", "r"]
    assert ax.get_ylim() == (2.5, -0.5)
    with pytest.raises(ValueError, match="keep an annotated map's shape"):
        h.set(np.zeros((3, 2)))


def test_png_of_a_redraw_decodes_to_the_canvas_pixels():
    from PIL import Image

    from transformer_lib.viz.interactive import _fast_png

    rgba = np.random.default_rng(0).integers(0, 256, (37, 53, 4), dtype=np.uint8)
    decoded = Image.open(io.BytesIO(_fast_png(rgba)))
    assert decoded.mode == "RGBA" and np.array_equal(np.asarray(decoded), rgba)
