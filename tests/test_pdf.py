"""The printed book (``make pdf``, booktools/pdf.py): each edition's PDF against the
table of contents and the built site. Skips when ``_build/pdf`` holds no PDFs."""

from __future__ import annotations

import re

import pytest

from booktools.pdf import EDITIONS, NAME, OUT, chapters, site_dir

pypdf = pytest.importorskip("pypdf")

PDFS = {e: OUT / f"{NAME}.{e}.pdf" for e in EDITIONS}
MAX_MB = 60
PAGES = range(300, 900)  # 468 / 458 / 458 pages on A4 when written
RAW_TEX = ("\\frac", "$$", "\\[", "\\begin{", "\\mathrm{")
# the live panels' loading words, in any edition: "Loading the model into this page…"
LOADING = re.compile(r"Loading[^.\n]{0,60}\u2026|正在加载|正在載入|載入中|加载中")


def _reader(edition: str):
    path = PDFS[edition]
    if not path.exists():
        pytest.skip(f"no {path.name} in {OUT}: run `make pdf` (after `make book`)")
    if not (site_dir(edition) / "index.html").exists():
        pytest.skip("no built site to compare with: run `make book`")
    return pypdf.PdfReader(path)


_TEXT: dict[str, list[str]] = {}


def _text(edition: str) -> list[str]:
    if edition not in _TEXT:
        _TEXT[edition] = [p.extract_text() or "" for p in _reader(edition).pages]
    return _TEXT[edition]


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("edition", EDITIONS)
def test_outline_is_the_table_of_contents(edition):
    reader = _reader(edition)
    _, chaps = chapters(edition)
    top: list[str] = []
    below: list[str] = []
    items = reader.outline
    for i, item in enumerate(items):
        if isinstance(item, list):
            continue
        top.append(item.title)
        nxt = items[i + 1] if i + 1 < len(items) else None
        if isinstance(nxt, list) and item.title in {c.part for c in chaps}:
            below += [c.title for c in nxt if not isinstance(c, list)]
    parts = list(dict.fromkeys(c.part for c in chaps if c.part))
    loose = [c.title for c in chaps if not c.part]
    assert top == loose + parts, f"{edition}: the outline's top level is {top}"
    assert below == [c.title for c in chaps if c.part], (
        f"{edition}: the parts' chapters in the outline differ from _toc.yml's"
    )


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_chapter_title_is_printed_and_on_its_outline_page(edition):
    reader = _reader(edition)
    text = _text(edition)
    _, chaps = chapters(edition)
    flat = []

    def walk(items):
        for it in items:
            walk(it) if isinstance(it, list) else flat.append(it)

    walk(reader.outline)
    pages: dict[str, int] = {}
    for it in flat:  # a section may repeat a chapter's title: the first is the chapter
        pages.setdefault(it.title, reader.get_destination_page_number(it))
    for ch in chaps:
        where = pages[ch.title]
        assert _squash(ch.title) in _squash(text[where]), (
            f"{edition}: {ch.title!r} is not on page {where + 1}, the outline's page"
        )
        assert _squash(ch.title) in _squash("".join(text[:where])), (
            f"{edition}: the table of contents does not list {ch.title!r}"
        )


@pytest.mark.parametrize("edition", EDITIONS)
def test_no_raw_tex_and_no_loading_text(edition):
    for number, page in enumerate(_text(edition), 1):
        for tex in RAW_TEX:
            assert tex not in page, f"{edition} page {number}: raw TeX {tex!r}"
        found = LOADING.search(page)
        assert not found, (
            f"{edition} page {number}: {found[0]!r}, a live panel's loading text"
        )


def _fonts(reader) -> set[str]:
    names = set()
    for page in reader.pages:
        fonts = (page.get("/Resources") or {}).get("/Font") or {}
        for ref in fonts.values():
            font = ref.get_object()
            names.add(
                str(font.get("/BaseFont") or font.get("/Name") or font.get("/Subtype"))
            )
            if font.get("/Subtype") == "/Type3" and "/ToUnicode" in font:
                names.add("Type3+ToUnicode")
    return names


@pytest.mark.parametrize("edition", ["zh_CN", "zh_TW"])
def test_chinese_editions_carry_their_characters(edition):
    """The CJK glyphs are embedded (Chromium writes Noto CJK as Type 3 fonts, with a
    ToUnicode map) and the text extracts as Chinese, not glyph ids."""
    reader = _reader(edition)
    fonts = _fonts(reader)
    assert any("CJK" in f for f in fonts) or "Type3+ToUnicode" in fonts, sorted(fonts)
    text = "".join(_text(edition))
    han = len(re.findall(r"[\u4e00-\u9fff]", text))
    assert han > 50_000, f"{edition}: only {han} Chinese characters extracted"
    # copying gives the characters, not the radicals Chromium's maps name (⽂ for 文)
    radicals = re.findall(r"[\u2e80-\u2fdf]", text)
    assert not radicals, f"{edition}: radicals for ideographs: {sorted(set(radicals))}"
    for word in {"zh_CN": ("注意力", "简体中文版"), "zh_TW": ("注意力", "繁體中文版")}[
        edition
    ]:
        assert word in text, f"{edition}: {word!r} is not in the extracted text"


@pytest.mark.parametrize("edition", EDITIONS)
def test_pictures_present(edition):
    reader = _reader(edition)
    seen: set[int] = set()

    def count(resources) -> int:
        n = 0
        for ref in ((resources or {}).get("/XObject") or {}).values():
            key = getattr(ref, "idnum", None) or id(ref)
            if key in seen:
                continue
            seen.add(key)
            xobject = ref.get_object()
            if xobject.get("/Subtype") == "/Image":
                n += 1
            elif xobject.get("/Subtype") == "/Form":
                n += count(xobject.get("/Resources"))
        return n

    images = sum(count(page.get("/Resources")) for page in reader.pages)
    # the chapters' own pictures (figures, diagrams, the live figures' first states),
    # not the theme's logos, which the print stylesheet hides
    _, chaps = chapters(edition)
    site = 0
    for ch in chaps:
        page = (site_dir(edition) / f"{ch.doc}.html").read_text(encoding="utf-8")
        site += len(re.findall(r"<img(?![^>]*_static/)", page))
    assert site > 40, f"{edition}: the site shows only {site} pictures"
    assert images >= site, (
        f"{edition}: {images} pictures in the PDF, {site} on the site"
    )


@pytest.mark.parametrize("edition", EDITIONS)
def test_a4_page_count_and_size(edition):
    reader = _reader(edition)
    assert len(reader.pages) in PAGES, f"{edition}: {len(reader.pages)} pages"
    box = reader.pages[len(reader.pages) // 2].mediabox
    assert (round(float(box.width)), round(float(box.height))) == (595, 842), box
    size = PDFS[edition].stat().st_size / 1e6
    assert size <= MAX_MB, f"{edition}: {size:.1f} MB"
