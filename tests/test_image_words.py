"""The words drawn inside figures, in the Chinese editions (viz/image_words.py).

A figure's texts are swapped for their translations and drawn with a CJK font, then put
back: the English picture must come out byte-identical afterwards. The catalog keys
take the numbers out of a text, and a translation gets them back. A chapter executed
as the book executes it (nbval, with booktools/execute.py) carries each figure's
pictures in the other languages, however the figure was shown.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_execute import execute_chapter  # noqa: E402

from booktools.figures import FONTS  # noqa: E402
from transformer_lib.viz import Explorer, all_explorers, image_words  # noqa: E402
from transformer_lib.viz.static import frames  # noqa: E402

_FRAMES = re.compile(r'class="tl-frames">(.*?)</script>', re.S)


@pytest.mark.parametrize(
    "text, key, numbers",
    [
        ("P after 40 training steps", "P after {0} training steps", ["40"]),
        (
            "after tile 3 of 6: keys 0..11 read, largest gap 1.1e+01",
            "after tile {0} of {1}: keys {2}..{3} read, largest gap {4}",
            ["3", "6", "0", "11", "1.1e+01"],
        ),
        ("one period = 1,000 positions", "one period = {0} positions", ["1,000"]),
        ("x = -3 and $x_1 = 2$", "x = {0} and $x_1 = 2$", ["-3"]),  # math kept whole
        ("GPT-2 has W1 and 2L", "GPT-2 has W1 and 2L", []),  # parts of names
        ("$\\sqrt{d_k} = 8$", "$\\sqrt{d_k} = 8$", []),
        # a release is one slot, so a key does not change with an upgrade
        ("torch 2.13.0+cpu, 3 rows", "torch {0}, {1} rows", ["2.13.0+cpu", "3"]),
        ("with torch 2.14.1.", "with torch {0}.", ["2.14.1"]),
        ("v1.2.3 and 1.2.3.4", "v1.2.3 and 1.2.3.4", []),
    ],
)
def test_a_key_takes_out_the_numbers_outside_math(text, key, numbers):
    assert image_words.key_of(text) == (key, numbers)


def test_a_translation_gets_the_numbers_back_in_its_own_order():
    table = {"{0} of {1} heads read $K_{1}$": "{1} 个头中有 {0} 个读取 $K_{1}$"}
    # the slots inside math are the formula's, not numbers to fill in
    assert (
        image_words.translate("3 of 8 heads read $K_{1}$", table)
        == "8 个头中有 3 个读取 $K_{1}$"
    )
    assert image_words.translate("something else", table) is None


@pytest.mark.parametrize(
    "text, words",
    [("0.5", False), ("1e-05", False), ("$\\tau$", False), ("τ = 2", True)],
)
def test_only_text_with_letters_outside_math_and_numbers_has_words(text, words):
    assert image_words.has_words(text) is words


def _figure():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=60)
    ax.plot([0, 1, 2], [1, 0, 2], label="weight")
    ax.set_xticks([0, 1, 2], labels=["the", "cat", "sat"])  # tokens: data
    ax.set_title("P after 40 training steps")
    ax.set_xlabel("temperature $\\tau$")
    ax.legend()
    return fig, ax


TABLE = {
    "P after {0} training steps": "训练 {0} 步后的 P",
    "temperature $\\tau$": "温度 $\\tau$",
    "weight": "权重",
    "the": "这",  # a tick label: never looked up
}


def _png(fig) -> bytes:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).tobytes()


def test_words_are_drawn_in_the_language_then_english_again(caplog):
    fig, ax = _figure()
    english = _png(fig)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")  # a glyph missing from the fonts is an error
        with image_words.drawn_in(fig, "zh_CN", TABLE, FONTS["zh_CN"]) as words:
            assert ax.get_title() == "训练 40 步后的 P"
            assert ax.get_xlabel() == "温度 $\\tau$"  # CJK inside mathtext too
            assert ax.get_legend().get_texts()[0].get_text() == "权重"
            assert [t.get_text() for t in ax.get_xticklabels()] == ["the", "cat", "sat"]
            chinese = _png(fig)
    assert not [r for r in caplog.records if "glyph" in r.getMessage()]
    assert sorted(words.seen) == [
        "P after {0} training steps",
        "temperature $\\tau$",
        "weight",
    ]
    assert chinese != english
    assert _png(fig) == english
    plt.close(fig)


def test_tick_labels_that_are_words_with_numbers_are_drawn_in_the_language():
    """``layer 1, head 2`` or ``keys 0–3`` on an axis are words; the tokens of an
    example sentence on the other axis are data, even when the table has them."""
    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    ax.imshow(np.arange(4.0).reshape(2, 2))
    ax.set_yticks([0, 1], ["layer 1, head 2", "keys 0–3"])
    ax.set_xticks([0, 1], ["the", "cat"])
    english = _png(fig)
    table = {"layer {0}, head {1}": "第 {0} 层，头 {1}", "keys {0}–{1}": "键 {0}–{1}"}
    table["the"] = "这"
    with image_words.drawn_in(fig, "zh_CN", table, FONTS["zh_CN"]) as words:
        chinese = _png(fig)
        assert [t.get_text() for t in ax.get_yticklabels()] == [
            "第 1 层，头 2",
            "键 0–3",
        ]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["the", "cat"]
        family = ax.get_yticklabels()[0].get_fontfamily()
        assert family[0] == FONTS["zh_CN"], family
    assert list(words.seen) == ["layer {0}, head {1}", "keys {0}–{1}"]
    assert chinese != english
    assert _png(fig) == english  # English labels and font again
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "layer 1, head 2",
        "keys 0–3",
    ]
    plt.close(fig)


def test_a_missing_font_is_a_clear_error():
    with pytest.raises(RuntimeError, match="No Such CJK Font.*fonts-noto-cjk"):
        image_words.Words("zh_CN", TABLE, "No Such CJK Font")


def _frames_json(explorer: Explorer) -> str:
    return json.dumps(frames(explorer.controls, explorer._frame))


@pytest.mark.parametrize("name", ["ch03_softmax.temperature", "ch05_heads.groups"])
def test_an_explorer_carries_its_pictures_in_each_edition(name):
    """A LiveFigure keeps saved pictures of its unchanging part: the editions' passes
    must draw their own, and leave the English ones as they were."""
    explorer = all_explorers()[name]()
    english = _frames_json(explorer)
    collect = image_words.Words("zh_CN", {}, FONTS["zh_CN"])
    with explorer._drawn_in(collect):
        explorer.frames()
    table = {key: "词" + key for key in collect.seen}
    image_words.render_editions({"zh_CN": table, "zh_TW": table}, FONTS)
    try:
        bundle, metadata = explorer._repr_mimebundle_()
    finally:
        image_words.render_editions({})
    types = {lang: image_words.edition_mime("text/html", lang) for lang in LANGUAGES}
    assert types == {
        "zh_CN": "text/vnd.tl.zh_CN+html",
        "zh_TW": "text/vnd.tl.zh_TW+html",
    }
    assert sorted(m for m in bundle if ".tl." in m) == sorted(types.values())
    for mime in types.values():
        assert metadata[mime]["tl_words"] == list(collect.seen)
        block = bundle[mime]
        assert "tl-explorer" in block and block != bundle["text/html"]
    assert _frames_json(explorer) == english


def test_an_explorer_without_editions_has_no_metadata():
    explorer = all_explorers()["ch03_softmax.temperature"]()
    assert isinstance(explorer._repr_mimebundle_(), dict)


LANGUAGES = ["zh_CN", "zh_TW"]

CHAPTER = [
    "import matplotlib.pyplot as plt\n%matplotlib inline",
    "fig, ax = plt.subplots(figsize=(3, 2), dpi=50)\n"
    "ax.set_title('P after 40 training steps')\nax.plot([0, 1])\nplt.show()",
    "%matplotlib inline\n"  # registers the figure formats again: must keep the editions
    "fig, ax = plt.subplots(figsize=(3, 2), dpi=50)\nax.set_ylabel('weight')\n"
    "display(fig)\nplt.close(fig)",
    "from myst_nb import glue\n"
    "fig, ax = plt.subplots(figsize=(3, 2), dpi=50)\nax.set_xlabel('weight')\n"
    "glue('fig', fig, display=False)\nplt.close(fig)",
    "fig, ax = plt.subplots(figsize=(3, 2), dpi=50)\nax.plot([1, 0])\nplt.show()",
]


@pytest.mark.slow  # a notebook kernel: not in make test-fast
def test_a_chapter_executed_for_the_book_carries_every_figure_in_each_edition(
    tmp_path,
):
    path = tmp_path / "chapter.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CHAPTER]
    nbformat.write(nb, path)
    table = {"P after {0} training steps": "训练 {0} 步后的 P", "weight": "权重"}
    status, tests, executed = execute_chapter(
        path, tmp_path, tables={"zh_CN": table, "zh_TW": table}
    )
    assert status == 0, tests
    executed = nbformat.from_dict(executed)
    assert [c.execution_count for c in executed.cells] == [1, 2, 3, 4, 5]
    outputs = []
    for cell in executed.cells[1:]:
        (out,) = [o for o in cell.outputs if "data" in o]
        outputs.append(out)
    # every way of showing a figure (plt.show, display, glue's record) carries the
    # editions' pictures under their own types, the glued one under glue's prefix
    prefix = "application/papermill.record/"
    for out, glued in zip(outputs[:3], [False, False, True], strict=True):
        english = out.data[prefix * glued + "image/png"]
        for lang in LANGUAGES:
            mime = image_words.edition_mime("image/png", lang)
            png = out.data[prefix * glued + mime]
            assert base64.b64decode(png).startswith(b"\x89PNG") and png != english
    assert [
        o.metadata[f"image/vnd.tl.{LANGUAGES[0]}+png"]["tl_words"] for o in outputs[:3]
    ] == [
        ["P after {0} training steps"],
        ["weight"],
        ["weight"],
    ]
    assert not [
        m for m in outputs[3].data if ".tl." in m
    ]  # no words: no second picture


def test_a_chinese_notebook_draws_its_figures_in_its_language_only():
    explorer_class = all_explorers()["ch03_softmax.temperature"]
    english = _frames_json(explorer_class())
    image_words.use_image_words("zh_TW", {"query": "查詢"}, FONTS["zh_TW"])
    try:
        explorer = explorer_class()
        assert _frames_json(explorer) != english
        words = image_words.live_words()
        assert words is not None and words.language == "zh_TW"
    finally:
        image_words.use_image_words(None)
    assert image_words.live_words() is None
    assert _frames_json(explorer_class()) == english


def test_an_editions_repeated_pictures_are_not_drawn_again():
    """Frames whose English pictures repeat an earlier frame's repeat it in every
    edition too: they are stored as references without being drawn again."""
    calls = []

    def draw(fig, n, unused):
        calls.append((n, unused))
        ax = fig.add_subplot()
        ax.plot(range(n + 2))
        ax.set_title(f"P after {n} training steps")

    explorer = Explorer(draw, {"n": [1, 2, 3], "unused": ["a", "b"]}, dpi=40)
    table = {"P after {0} training steps": "训练 {0} 步后的 P"}
    image_words.render_editions({"zh_CN": table}, FONTS)
    try:
        bundle, metadata = explorer._repr_mimebundle_()
    finally:
        image_words.render_editions({})
    # English: every frame, and the live form's first picture; zh_CN: the three
    # distinct pictures
    assert len(calls) == 6 + 1 + 3
    assert calls[-3:] == [(1, "a"), (2, "a"), (3, "a")]
    block = bundle["text/vnd.tl.zh_CN+html"]
    assert metadata["text/vnd.tl.zh_CN+html"]["tl_words"] == [
        "P after {0} training steps"
    ]
    english = json.loads(_FRAMES.search(bundle["text/html"]).group(1))
    chinese = json.loads(_FRAMES.search(block).group(1))
    assert {k: f.get("ref") for k, f in chinese.items()} == {
        k: f.get("ref") for k, f in english.items()
    }
    assert sum("png" in f for f in chinese.values()) == 3
    assert not {f.get("png") for f in chinese.values()} & {
        f.get("png") for f in english.values()
    } - {None}


def _overlapping_texts(fig) -> list[tuple[str, str]]:
    """Pairs of the figure's titles (axes' and the figure's own) whose drawn boxes
    overlap or touch (within 2 px), and titles whose own lines do."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = [fig._suptitle] if fig._suptitle else []
    titles += [ax.title for ax in fig.axes if ax.title.get_text()]
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(2)) for t in titles]
    out = [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a.overlaps(box_b)
    ]
    for t in titles:  # a title's lines, each drawn alone at its place
        lines = t.get_text().split("\n")
        if len(lines) > 1:
            height = t.get_window_extent(renderer).height
            one = Text(text=lines[0], fontproperties=t.get_fontproperties())
            one.figure = fig
            if one.get_window_extent(renderer).height * len(lines) > height:
                out.append((t.get_text(), "its own lines"))
    return out


def test_chapter_4s_combined_mask_titles_do_not_crowd_in_any_edition():
    """The figure of chapter 4 that puts the causal, padding and combined masks side
    by side (its own cell, run here as the chapter runs it): no title touches another
    or the figure's title, in English and in each Chinese edition's words, whose CJK
    font is taller (the two-line Chinese titles of its middle column once did)."""
    import transformer_lib as tl
    from booktools.catalogs import image_tables
    from transformer_lib.demos import masking
    from transformer_lib.viz import heatmap

    nb = nbformat.read("book/04_masks.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "combined (B, 1, T, T)" in c.source)
    T, lengths = 6, torch_tensor([6, 4, 2])
    pad = tl.padding_mask(lengths, T)
    causal = tl.causal_mask(T)
    namespace = dict(
        plt=plt, masking=masking, heatmap=heatmap, T=T, lengths=lengths, pad=pad,
        causal=causal, combined=causal & pad,
    )  # fmt: skip
    shown = []
    plt_show, plt.show = plt.show, lambda: shown.append(plt.gcf())
    try:
        exec(cell.source, namespace)
    finally:
        plt.show = plt_show
    (fig,) = shown
    assert not _overlapping_texts(fig), _overlapping_texts(fig)
    for language, table in image_tables().items():
        with image_words.drawn_in(fig, language, table, FONTS[language]):
            crowded = _overlapping_texts(fig)
            assert not crowded, f"{language}: {crowded}"
    plt.close(fig)


def torch_tensor(values):
    import torch

    return torch.tensor(values)


# ------------------------------------------------------------ printed result tables
TABLE_WORDS = {
    "path": "路径",
    "T = {0}, CPU ms": "T = {0}，CPU 毫秒",
    "tiled {0} x {1}, causal": "分块 {0} x {1}，因果",
    "largest gap to the explicit `tl` path": "与显式 `tl` 路径的最大差距",
    "Measured on the three empty rows:": "在三个空行上测得：",
}
MARKDOWN_TABLE = (
    "Measured on the three empty rows:\n\n"
    "| path | T = 1024, CPU ms | largest gap to the explicit `tl` path |\n"
    "|:--|--:|--:|\n"
    "| tiled 256 x 256, causal | 100 | 2.8x |\n"
    "| `F.sdpa` | 86 | 1.0x |\n"
    "| MHA | 16 KiB | $h_{kv}$ |"
)


def test_a_markdown_tables_words_are_looked_up_and_its_numbers_kept():
    seen: dict[str, None] = {}
    out = image_words.table_in_language(
        MARKDOWN_TABLE, "text/markdown", TABLE_WORDS, seen
    )
    assert out.splitlines() == [
        "在三个空行上测得：",
        "",
        "| 路径 | T = 1024，CPU 毫秒 | 与显式 `tl` 路径的最大差距 |",
        "|:--|--:|--:|",  # the rule, as it was
        "| 分块 256 x 256，因果 | 100 | 2.8x |",  # measured numbers are not words
        "| `F.sdpa` | 86 | 1.0x |",  # code is not words
        "| MHA | 16 KiB | $h_{kv}$ |",  # a name the table lacks stays
    ]
    # every cell with words was looked up, by its key: the catalog's entries
    assert list(seen) == [
        "Measured on the three empty rows:",
        "path",
        "T = {0}, CPU ms",
        "largest gap to the explicit `tl` path",
        "tiled {0} x {1}, causal",
        "MHA",
    ]


def test_an_html_tables_cells_are_looked_up_and_escaped():
    html = (
        "<table><thead><tr><th>path</th><th>T = 2048, CPU ms</th></tr></thead>"
        '<tbody><tr><td style="text-align:left">tiled 64 x 64, causal</td>'
        '<td style="text-align:right">1,024</td></tr>'
        "<tr><td>left &lt; right &amp; up</td><td>0.5</td></tr></tbody></table>"
    )
    seen: dict[str, None] = {}
    table = {**TABLE_WORDS, "left < right & up": "左 < 右 & 上"}
    out = image_words.table_in_language(html, "text/html", table, seen)
    assert out == (
        "<table><thead><tr><th>路径</th><th>T = 2048，CPU 毫秒</th></tr></thead>"
        '<tbody><tr><td style="text-align:left">分块 64 x 64，因果</td>'
        '<td style="text-align:right">1,024</td></tr>'
        "<tr><td>左 &lt; 右 &amp; 上</td><td>0.5</td></tr></tbody></table>"
    )
    assert list(seen) == [
        "path",
        "T = {0}, CPU ms",
        "tiled {0} x {1}, causal",
        "left < right & up",
    ]


def test_only_outputs_holding_a_table_are_tables():
    assert image_words.is_table(MARKDOWN_TABLE, "text/markdown")
    assert not image_words.is_table("| not a table |", "text/markdown")
    source = "```python\n| a | b |\n|---|---|\n```"  # show_source's listing
    assert not image_words.is_table(source, "text/markdown")
    assert image_words.is_table("<table><tr><td>1</td></tr></table>", "text/html")
    assert not image_words.is_table("<div>explorer</div>", "text/html")


TABLE_CHAPTER = [
    "from IPython.display import HTML, Markdown, display",
    f"display(Markdown({MARKDOWN_TABLE!r}))",
    "HTML('<table><tr><th>path</th></tr><tr><td>7</td></tr></table>')",
    "Markdown('no table here: **path**')",
]


@pytest.mark.slow  # a notebook kernel: not in make test-fast
def test_a_chapter_executed_for_the_book_carries_its_tables_in_each_edition(tmp_path):
    path = tmp_path / "chapter.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in TABLE_CHAPTER]
    nbformat.write(nb, path)
    tw = {**TABLE_WORDS, "path": "路徑", "T = {0}, CPU ms": "T = {0}，CPU 毫秒"}
    status, tests, executed = execute_chapter(
        path, tmp_path, tables={"zh_CN": TABLE_WORDS, "zh_TW": tw}
    )
    assert status == 0, tests
    executed = nbformat.from_dict(executed)
    (markdown,) = [o for o in executed.cells[1].outputs if "data" in o]
    (html,) = [o for o in executed.cells[2].outputs if "data" in o]
    (plain,) = [o for o in executed.cells[3].outputs if "data" in o]
    assert markdown.data["text/markdown"] == MARKDOWN_TABLE  # English as it was
    zh_cn = markdown.data["text/vnd.tl.zh_CN+markdown"]
    zh_tw = markdown.data["text/vnd.tl.zh_TW+markdown"]
    assert "| 路径 | T = 1024，CPU 毫秒 |" in zh_cn and "| 路徑 |" in zh_tw
    meta = markdown.metadata["text/vnd.tl.zh_TW+markdown"]
    assert meta["tl_words"][:2] == ["Measured on the three empty rows:", "path"]
    assert html.data["text/vnd.tl.zh_CN+html"].startswith("<table><tr><th>路径</th>")
    assert not [m for m in plain.data if ".tl." in m]  # no table: no twin
