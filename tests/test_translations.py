"""The Chinese editions' catalogs: in step with the English pages, complete, and
markup-safe; the Traditional edition's markup; the translated notebooks.

When English text changes, its entry here no longer matches: run `make catalogs`,
translate what became empty or fuzzy, and these tests pass again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from booktools import catalogs, editions, figures, po_check
from booktools import notebooks as translate_notebooks

ROOT = Path(__file__).resolve().parents[1]

ZH_CN = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CJK = re.compile(r"[\u3400-\u9fff]")


def read(path: Path):
    with path.open("rb") as f:
        return read_po(f)


@pytest.fixture(scope="module")
def pot_dir(tmp_path_factory) -> Path:
    """The English messages of every page, extracted now (gettext builder), from the
    outputs in the last `make book`'s cache (with no cache, it executes every chapter):
    the tests that read it are marked built."""
    return editions.extract(tmp_path_factory.mktemp("gettext"))


@pytest.mark.built  # a gettext build over the build's cache: not in make test-fast
def test_every_page_has_a_catalog_with_exactly_its_messages(pot_dir):
    pots = sorted(pot_dir.rglob("*.pot"))
    assert len(pots) >= len(NOTEBOOKS), pots
    problems = []
    for pot in pots:
        rel = pot.relative_to(pot_dir).with_suffix(".po")
        po = ZH_CN / rel
        if not po.exists():
            problems.append(f"{rel}: no zh_CN catalog (run `make catalogs`)")
            continue
        want = {str(m.id) for m in read(pot) if m.id}
        have = {str(m.id) for m in read(po) if m.id}
        for msgid in sorted(want - have):
            problems.append(f"{rel}: new English text not in the catalog: {msgid:.80}")
        for msgid in sorted(have - want):
            problems.append(f"{rel}: the catalog has text the page lost: {msgid:.80}")
    orphans = {
        p.relative_to(ZH_CN).with_suffix(".pot")
        for p in ZH_CN.rglob("*.po")
        # the figures' words, Sphinx's and the theme's (tests/test_site.py checks
        # them) and the words inside the figures (checked below)
        if p.stem not in ("figures", "sphinx", "booktheme", "images")
    }
    orphans -= {p.relative_to(pot_dir) for p in pots}
    problems += [f"{o}: a catalog for a page that does not exist" for o in orphans]
    assert not problems, "run `make catalogs`:\n" + "\n".join(problems)


def test_catalogs_are_complete_and_markup_safe():
    """100 % translated, 0 fuzzy, 0 obsolete; roles, math, code and link targets as in
    the English; no emphasis CommonMark would leave as literal asterisks."""
    problems = [p for path in po_check.catalogs() for p in po_check.check_file(path)]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])


@pytest.mark.parametrize(
    ("msgid", "msgstr", "complaint"),
    [
        ("See {ref}`ch-qkv` and eq. {eq}`eq-q`.", "见 {ref}`ch-qkv`。", "roles"),
        ("With $x_i$ and $y$ here, and more words", "有 $x_i$ 和 $z$", "math"),
        ("Call `tl.softmax` on the rows here", "对各行调用 `softmax`", "code"),
        ("Read [chapter 8](08_pe.ipynb) next.", "接着读[第 8 章](08.ipynb)。", "links"),
        ("The **attention** part. Then more", "**注意力。**然后", "emphasis"),
        ("Attention lets every token collect information", "", "not translated"),
        ("Attention lets every token collect information", "Attention lets", "English"),
    ],
)
def test_the_checker_catches_each_kind_of_mistake(msgid, msgstr, complaint):
    problems = po_check.check_entry(msgid, msgstr)
    assert any(complaint in p for p in problems), problems


def test_the_checker_accepts_a_faithful_translation():
    msgid = (
        "Read one row at a time, {eq}`eq-q` says $q_i = x_i W_Q$; see "
        "{ref}`the glossary <app-glossary>` and [chapter 8](08_pe.ipynb), "
        "`tl.softmax` and **the mask**."
    )
    msgstr = (
        "逐行来读，{eq}`eq-q` 说的是 $q_i = x_i W_Q$；"
        "参见 {ref}`术语表 <app-glossary>` 和[第 8 章](08_pe.ipynb)、"
        "`tl.softmax` 以及**掩码**。"
    )
    assert po_check.check_entry(msgid, msgstr) == []


# ------------------------------------------------- zh_TW (more in test_zh_tw.py)
def test_conversion_leaves_markup_alone():
    text = "“残差连接”的参数：{eq}`eq-q`、$\\text{参数}$、`参数`、[参数](01_参数.ipynb)"
    tw = catalogs.to_taiwan(text)
    want = "「殘差連接」的參數：{eq}`eq-q`、$\\text{参数}$、"
    assert tw == want + "`参数`、[參數](01_参数.ipynb)"


# ------------------------------------------------------------ Chinese notebooks
@pytest.mark.built  # a gettext build over the build's cache: not in make test-fast
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_translated_notebook_replaces_every_block_and_keeps_the_code(notebook, pot_dir):
    """With a stand-in catalog (every message marked), each message of the page is
    found in the notebook's Markdown and replaced; code cells are unchanged."""
    pot = pot_dir / "book" / f"{notebook.stem}.pot"
    toc_captions = {
        c["caption"]
        for c in __import__("yaml").safe_load(
            (ROOT / "_toc.yml").read_text(encoding="utf-8")
        )["parts"]
    }
    lookup = {
        str(m.id): f"【译】{m.id}"
        for m in read(pot)
        if m.id and str(m.id) not in toc_captions
    }
    used: set[str] = set()
    source = json.loads(notebook.read_text(encoding="utf-8"))
    out = translate_notebooks.translate_notebook(source, lookup, used)
    missing = sorted(set(lookup) - used)
    assert not missing, f"{len(missing)} messages not found, e.g. {missing[:3]}"
    for a, b in zip(source["cells"], out["cells"], strict=True):
        assert a["cell_type"] == b["cell_type"]
        if a["cell_type"] == "code":
            assert a["source"] == b["source"]
        elif "".join(a["source"]).strip():
            assert "".join(b["source"]).strip()
    marked = sum(
        "".join(c["source"]).count("【译】")
        for c in out["cells"]
        if c["cell_type"] == "markdown"
    )
    assert marked >= len(lookup)


def test_an_interactive_figure_is_written_in_an_editions_words():
    """Title, labels, options, the hint, the hover names, the word for a masked cell and
    the alt text of a kernel-free figure all come out in the edition's language when
    its block is written with the edition's words, and its frames are untouched."""
    import html as html_lib

    import test_viz

    from transformer_lib.viz import static

    figure = test_viz._pinned_figure()
    frames = figure.frames()
    english = static.PageWords()
    page = static.to_html(figure, frames, english)
    assert {"query", "key", "masked", "Point at a cell to read its value."} <= set(
        english.seen
    ), english.seen
    table = {
        "A pinned figure: \\(\\alpha &lt; \\beta\\) &amp; more": (
            "钉住的图：\\(\\alpha &lt; \\beta\\) 等"
        ),
        "size \\(\\sqrt{n}\\)": "大小 \\(\\sqrt{n}\\)",
        "flip &lt;rows&gt;": "翻转&lt;行&gt;",
        "magma": "岩浆",
        "query": "查询",
        "key": "键",
        "masked": "被遮蔽",
        "Point at a cell to read its value.": "将指针移到格子上，即可读出它的值。",
    }
    missing = [w for w in table if w not in english.seen]
    assert not missing, f"not words of the figure as its HTML writes them: {missing}"
    edition = static.PageWords(table)
    out = static.to_html(figure, frames, edition)
    assert list(edition.seen) == list(english.seen)  # the same words, looked up
    for word, translation in table.items():
        assert translation in out or json.dumps(translation)[1:-1] in out, word
    for english_word in ('"query"', '"key"', '"masked"'):
        assert f":{english_word}" in page and f":{english_word}" not in out
    assert ">Point at" in page and ">Point at" not in out
    assert ">magma</option>" in page and ">岩浆</option>" in out
    describe = re.compile(r'class="tl-describe">(.*?)</script>', re.S)
    info = json.loads(describe.search(out).group(1))
    assert info["title"] == "钉住的图：α< β 等", info["title"]
    assert info["labels"] == ["大小 √n", "翻转<行>", "cmap", "note"], info["labels"]
    assert info["texts"][2] == ["viridis", "岩浆"] and info["masked"] == "被遮蔽"
    alt = html_lib.unescape(re.search(r'<img alt="([^"]*)"', out).group(1))
    assert (
        alt == "钉住的图：α< β 等 (大小 √n: 3; 翻转<行>: False; cmap: viridis; note: a)"
    )
    pngs = re.compile(r'"png":"[^"]+"')
    assert pngs.findall(out) == pngs.findall(page)


def test_live_forms_show_the_editions_words():
    """In a Chinese notebook, use_words (the cell translate_notebooks adds) puts the
    edition's words on the live form: title, labels, options; the values stay."""
    import test_viz

    from transformer_lib.viz import use_words

    words = {
        "A pinned figure: \\(\\alpha &lt; \\beta\\) &amp; more": (
            "钉住的图：\\(\\alpha &lt; \\beta\\) 等"
        ),
        "size \\(\\sqrt{n}\\)": "大小 \\(\\sqrt{n}\\)",
        "flip &lt;rows&gt;": "翻转&lt;行&gt;",
        "magma": "岩浆",
    }
    use_words(words)
    try:
        form = test_viz._pinned_figure().widget()
    finally:
        use_words({})
    title, row = form.children[0], form.children[1]
    assert title.value == "<b>钉住的图：$\\alpha &lt; \\beta$ 等</b>", title.value
    by_label = {c.description: c for c in row.children}
    assert set(by_label) == {"大小 $\\sqrt{n}$", "翻转<行>", "cmap", "note"}, by_label
    cmap = by_label["cmap"]
    assert [label for label, _ in cmap.options] == ["viridis", "岩浆"]
    cmap.value = "magma"  # the value is the English option the figure draws with
    assert by_label["大小 $\\sqrt{n}$"].value == 3
    english = test_viz._pinned_figure().widget()
    assert english.children[1].children[0].description == "size $\\sqrt{n}$"


def test_chinese_notebooks_give_the_live_forms_their_words():
    nb = json.loads((ROOT / "book" / "04_masks.ipynb").read_text(encoding="utf-8"))
    words = translate_notebooks.figure_words("zh_CN", "book/04_masks")
    assert words.get("causal mask") == "因果掩码", words
    pictured = translate_notebooks.figure_words("zh_CN", "book/04_masks", "images")
    assert pictured.get("key position") == "键位置", pictured
    out = translate_notebooks.with_figure_words(nb, words, "zh_CN", pictured)
    code = [c for c in out["cells"] if c["cell_type"] == "code"]
    before = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) == len(before) + 1 and code[0] == before[0]
    assert code[2:] == before[1:]
    namespace: dict = {}
    exec("".join(code[1]["source"]), namespace)  # runs as the learner's kernel would
    from transformer_lib.viz import image_words, live

    try:
        assert live._WORDS == words
        drawn = image_words.live_words()
        assert drawn.language == "zh_CN" and drawn.table == pictured
    finally:
        live.use_words({})
        image_words.use_image_words(None)


@pytest.mark.parametrize("language", ["zh_CN", "zh_TW"])
def test_chinese_notebooks_set_the_checkers_language_first(language, monkeypatch):
    nb = json.loads((ROOT / "book" / "03_softmax.ipynb").read_text(encoding="utf-8"))
    out = translate_notebooks.with_language(nb, language)
    code = [c for c in out["cells"] if c["cell_type"] == "code"]
    before = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code[1:] == before  # the edition's first cell, then the chapter's own
    monkeypatch.delenv("LANGUAGE", raising=False)
    exec("".join(code[0]["source"]), {})  # runs as the learner's kernel would
    from transformer_lib.exercises import check_softmax
    from transformer_lib.exercises.language import translation

    assert __import__("os").environ["LANGUAGE"] == language  # undone by monkeypatch

    def stub(x, dim=-1):
        raise NotImplementedError

    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        check_softmax(stub)
    said = translation(language).gettext("{name}: not attempted yet.")
    assert printed.getvalue().startswith(said.format(name="check_softmax"))
    assert "not attempted" not in printed.getvalue()


# ------------------------------------------------------- words inside the figures
SITE = ROOT / "_build" / "html"
IMAGE_SRC = re.compile(r'src="(?:\.\./)*_images/([^"]+)"')
FRAME_PNG = re.compile(r'"png":"([^"]+)"')  # an interactive figure's frames


def _text(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


@pytest.fixture(scope="module")
def executed() -> list[tuple[str, dict]]:
    """(page, executed notebook) of every chapter in the English build's cache."""
    found = [(page, nb) for page, _, nb in figures.cached_notebooks()]
    if len(found) < len(NOTEBOOKS) or not (SITE / "zh_TW").is_dir():
        pytest.fail("no built book with its editions: run `make book` first")
    return found


@pytest.mark.built  # the built book: not in make test-fast
def test_the_images_catalog_has_exactly_the_words_the_figures_draw(executed):
    drawn = figures.image_words()
    catalog = {str(m.id) for m in read(ZH_CN / "images.po") if m.id}
    new = sorted(set(drawn) - catalog)
    gone = sorted(catalog - set(drawn))
    assert not new, f"figure words not in images.po (run `make catalogs`): {new[:5]}"
    assert not gone, f"images.po has words no figure draws any more: {gone[:5]}"
    # the word lists really are the figures': the axis label of ch02's first plot
    assert "median entropy (nats)" in drawn


def _digest(data: str | bytes) -> str:
    import base64
    import hashlib

    raw = base64.b64decode(data) if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def _page_images(root: Path, page: str) -> set[str]:
    text = (root / "book" / f"{page}.html").read_text(encoding="utf-8")
    return {
        _digest((root / "_images" / name).read_bytes())
        for name in IMAGE_SRC.findall(text)
    }


def _page_frames(root: Path, page: str) -> set[str]:
    text = (root / "book" / f"{page}.html").read_text(encoding="utf-8")
    return set(FRAME_PNG.findall(text))


@pytest.mark.built  # the built book: not in make test-fast
def test_each_edition_shows_its_own_pictures_of_every_figure_with_words(executed):
    """Every picture with words that an English page shows (a static figure, or an
    interactive figure's frames) is, on each Chinese page, the picture drawn in that
    language, and never the English one."""
    checked, problems = 0, []
    for page, nb in executed:
        english_images = _page_images(SITE, page)
        english_frames = _page_frames(SITE, page)
        for language in ("zh_CN", "zh_TW"):
            images = _page_images(SITE / language, page)
            frames = _page_frames(SITE / language, page)
            for cell in nb["cells"]:
                for output in cell.get("outputs", []):
                    for mime, entry in figures._edition_entries(output):
                        if mime.endswith("text/plain"):
                            continue  # a checker's message: test_built_pages
                        if mime.endswith("text/markdown") or "<table" in _text(
                            output["data"][mime]
                        ):
                            continue  # a result table, not a figure
                        drawn = entry["tl_editions"][language]
                        if mime.endswith("image/png"):
                            english = _digest(_text(output["data"][mime]))
                            if english not in english_images:
                                continue  # glued, and shown on no page
                            ok = _digest(drawn) in images and english not in images
                        else:
                            english = set(
                                FRAME_PNG.findall(_text(output["data"][mime]))
                            )
                            assert english <= english_frames, page
                            ok = set(FRAME_PNG.findall(drawn)) <= frames
                            ok = ok and not english & frames
                        checked += 1
                        if not ok:
                            problems.append(
                                f"{language} {page}: {entry['tl_words'][:2]}"
                            )
    assert not problems, problems
    assert checked > 100, checked  # every static figure and explorer, twice


def test_the_traditional_catalogs_have_the_simplified_ones_entries():
    """locales/zh_TW is a catalog of its own, reviewed as Taiwan writes, with exactly
    zh_CN's entries (`make catalogs` seeds a new one, fuzzy until reviewed), plus
    sphinx-exercise's words, which that package ships for zh_CN only, and in the theme
    catalogs the words pydata-sphinx-theme would give a zh_TW page in Simplified."""
    zh_tw = ROOT / "locales" / "zh_TW" / "LC_MESSAGES"
    problems = []
    for po in sorted(ZH_CN.rglob("*.po")):
        twin = zh_tw / po.relative_to(ZH_CN)
        if not twin.exists():
            problems.append(f"{twin.relative_to(ROOT)}: missing (run `make catalogs`)")
            continue
        want = [str(m.id) for m in read(po) if m.id]
        have = [str(m.id) for m in read(twin) if m.id]
        if po.stem in catalogs.THEME_CATALOGS:  # and zh_TW's own theme words after
            have = have[: len(want)]
        if want != have:
            problems.append(f"{twin.relative_to(ROOT)}: entries differ from zh_CN's")
    extra = {p.relative_to(zh_tw) for p in zh_tw.rglob("*.po")}
    extra -= {p.relative_to(ZH_CN) for p in ZH_CN.rglob("*.po")} | {Path("exercise.po")}
    problems += [f"{p}: a zh_TW catalog zh_CN does not have" for p in sorted(extra)]
    assert not problems, "\n".join(problems)
    assert (zh_tw / "exercise.po").exists()


# ------------------------------------------------------------ printed result tables
# names every edition keeps as the English writes them: acronyms, activation and
# variant names the prose uses as they are, symbols
KEPT_IN_TABLES = {
    "MHA", "GQA", "MQA", "FFN", "NaN", "relu", "gelu", "sin(2x)", "causal=True",
    "rank", "χ²", "{0} / P²", "Post-LN", "Pre-LN", "BPE",
}  # fmt: skip
TH = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)


def _th_texts(page: Path) -> set[str]:
    from html import unescape

    text = page.read_text(encoding="utf-8")
    return {unescape(re.sub(r"<[^>]+>", "", m)).strip() for m in TH.findall(text)}


@pytest.mark.built  # the built book: not in make test-fast
def test_every_result_table_is_shown_in_each_editions_words(executed):
    """Every Markdown or HTML table a chapter prints carries, in the same output, its
    rendering in each edition (booktools.figures), in which no header, row label or
    line with words is left in English (but for the names of KEPT_IN_TABLES); and the
    Chinese page shows those headers, not the English ones."""
    from transformer_lib.viz import image_words

    tables, problems = 0, []
    for page, nb in executed:
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                for mime in ("text/markdown", "text/html"):
                    english = _text(output.get("data", {}).get(mime, ""))
                    if not image_words.is_table(english, mime):
                        continue
                    tables += 1
                    for language in ("zh_CN", "zh_TW"):
                        twin = output["data"].get(
                            image_words.edition_mime(mime, language)
                        )
                        if twin is None:
                            problems.append(
                                f"{language} {page}: no rendering of {english[:60]!r}"
                            )
                            continue
                        cells = image_words.table_cells(english, mime)
                        translated = image_words.table_cells(_text(twin), mime)
                        assert len(cells) == len(translated), (page, language)
                        headers = set()
                        for (header, en), (_, zh) in zip(
                            cells, translated, strict=True
                        ):
                            key = image_words.key_of(en)[0]
                            if (
                                image_words.table_has_words(en)
                                and zh == en
                                and key not in KEPT_IN_TABLES
                            ):
                                problems.append(f"{language} {page}: {en!r} in English")
                            if header and zh != en and not re.search(r"[`$*]", zh):
                                headers.add((en, zh))
                        shown = _th_texts(SITE / language / "book" / f"{page}.html")
                        for en, zh in headers:
                            if zh not in shown or en in shown:
                                problems.append(f"{language} {page}: page shows {en!r}")
    assert not problems, problems[:10]
    assert tables >= 16, tables  # the chapters' tables, from chapter 0 to 18
