"""The printed book: each edition's built chapters printed by Chromium, joined by pypdf.

    python -m booktools.pdf                  # the three editions, two side by side
    python -m booktools.pdf en --jobs 1      # one edition

Reads the built site (``make book``: _build/html, zh_CN/ and zh_TW/ below it) and
writes ``_build/pdf/transformer-formula-by-formula.<edition>.pdf``: A4, a title page, a
table of contents with page numbers and links, the chapters in ``_toc.yml``'s order,
and an outline (bookmarks) of parts, chapters and their sections in the edition's
language. One Chromium and one page per edition print every chapter once, each after
MathJax's own ``startup.promise``; a print stylesheet hides the site's navigation and
controls, opens the solutions, names each live figure's address under its picture and
numbers the pages on from the previous chapter's last one (a page margin box), so the
joined book is numbered throughout. Links between chapters, printed as ``file://``
addresses, become links to the chapter's first page in the joined book.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import yaml

from .paths import BUILD, ROOT, SITE

OUT = BUILD / "pdf"
NAME = "transformer-formula-by-formula"
EDITIONS = ("en", "zh_CN", "zh_TW")
# Debian's Chromium, as the browser tests use; CHROMIUM=/path picks another (the deploy
# workflow's runner has Google Chrome)
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
MARGIN = {"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"}
# the front matter's words, per edition (the chapters' own titles come from the site)
WORDS = {
    "en": {
        "contents": "Contents",
        "edition": "",
        "online": "Read online, with live figures:",
        "live": "Live figure:",
    },
    "zh_CN": {
        "contents": "目录",
        "edition": "简体中文版",
        "online": "在线阅读（含交互图）：",
        "live": "交互图：",
    },
    "zh_TW": {
        "contents": "目錄",
        "edition": "繁體中文版",
        "online": "線上閱讀（含互動圖）：",
        "live": "互動圖：",
    },
}
LANG = {"en": "en", "zh_CN": "zh-Hans", "zh_TW": "zh-Hant"}
# Chromium's ToUnicode maps give some CJK glyphs a Kangxi or supplement radical
# (U+2E80 to U+2FDF), so copying 文 gave ⽂; those become the ideograph: NFKC, or this
# table where Unicode has no decomposition (the simplified radicals)
RADICALS = dict(
    zip(
        map(ord, "⻅⻉⻋⻓⻔⻛⻜⻢⻥⻦⻩⻬⻰⻈⻐⻆⻑⻚⻝⻘⻣⻤⻨⻮⻊⻙⻠⻡"),
        "见贝车长门风飞马鱼鸟黄齐龙讠钅角長页食青骨鬼麦齿足韦饣首",
        strict=True,
    )
)
TO_UNICODE_PAIR = re.compile(rb"(<[0-9A-Fa-f]{2}>\s*)<(2[EF][0-9A-Fa-f]{2})>")
SANS = '"Noto Sans", "Noto Sans CJK SC", "Noto Sans CJK TC", sans-serif'

# what a printed page shows of a site page: the article, every solution open, the page
# number in the bottom margin counting on from `start`
PRINT_CSS = """
@page { size: A4; margin: 16mm 15mm 18mm;
  @bottom-center { content: counter(page); font: 9pt sans-serif; color: #555; } }
html { counter-reset: page START; }  /* the first page shows START + 1 */
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .header-article, .bd-footer,
.bd-footer-article, .bd-footer-content, .prev-next-area, .footer-article, footer,
.headerlink, .copybtn, .toggle-button, button, .tl-explorer-hint, .thebe-launch-button,
.dropdown-buttons, .tl-live-ui, .tl-explorer-controls, .tl-editions,
.article-header-buttons, #pst-back-to-top, .skip-link,
.bd-search, .search-button-field, .theme-switch-button, .tl-hover, input, select,
nav.bd-links, .sidebar-toggle, .primary-toggle, .secondary-toggle {
  display: none !important; }
html, body, .bd-page-width, .bd-container, .bd-container__inner, .bd-main, .bd-content,
.bd-article-container, .bd-article { max-width: none !important; width: auto !important;
  margin: 0 !important; padding: 0 !important; display: block !important; }
body { font-size: 10.5pt; }
.toggle-hidden, .dropdown > *:not(.admonition-title), details > * {
  display: block !important; }
.toggle-hidden { visibility: visible !important; opacity: 1 !important;
  height: auto !important; }
pre, .highlight pre { white-space: pre-wrap !important; word-break: break-all;
  overflow: visible !important; font-size: 8.5pt; }
.output pre, .cell_output pre { max-height: none !important; }
img, svg, canvas, figure, .cell_output img { max-width: 100% !important; height: auto;
  break-inside: avoid; }
mjx-container[display="true"] { overflow: visible !important; break-inside: avoid;
  max-width: 100%; }
table { break-inside: auto; font-size: 9pt; }
h1, h2, h3 { break-after: avoid; }
div.cell_input, div.highlight, .admonition-title { break-inside: avoid; }
details.above-input, .tag_remove-input .cell_input, details.hide > summary {
  display: none !important; }
.tl-print-live { font-size: 8.5pt; color: #444; margin-top: 1mm; }
"""

# runs on each page before printing: live figures' addresses, eager images, open
# solutions; then waits for MathJax's typesetting, the pictures and the fonts
PREPARE_JS = """async ([words, url]) => {
  document.querySelectorAll('.tl-explorer, .tl-live-panel').forEach(fig => {
    const id = fig.id || fig.closest('[id]')?.id || '';
    const p = document.createElement('p');
    p.className = 'tl-print-live';
    p.textContent = words + ' ' + url + (id ? '#' + id : '');
    fig.after(p);
  });
  document.querySelectorAll('img[loading]').forEach(i => i.loading = 'eager');
  document.querySelectorAll('details:not(.above-input)').forEach(d => d.open = true);
  document.querySelectorAll('.toggle-hidden')
    .forEach(e => e.classList.remove('toggle-hidden'));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise)
    await MathJax.startup.promise;
  await Promise.all([...document.images].filter(i => !i.complete)
    .map(i => new Promise(r => { i.onload = i.onerror = r; })));
  await document.fonts.ready;
  return /Loading[^.\\n]*\\u2026/.test(document.body.innerText) ? 'Loading' : '';
}"""


@dataclass
class Chapter:
    doc: str  # book/03_softmax
    title: str  # in the edition's language
    part: str | None  # the part's caption, in the edition's language
    first: int = 0  # 0-based page of the joined book
    pages: int = 0


def toc_docs() -> list[tuple[int | None, str]]:
    """(part index or None, docname) of every page of ``_toc.yml``, the root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    out: list[tuple[int | None, str]] = [(None, toc["root"])]
    for i, part in enumerate(toc.get("parts", [])):
        out += [(i, ch["file"]) for ch in part["chapters"]]
    return out


def site_dir(edition: str) -> Path:
    return SITE if edition == "en" else SITE / edition


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def chapters(edition: str) -> tuple[str, list[Chapter]]:
    """The book's title and its chapters, as the edition's built site names them."""
    site = site_dir(edition)
    docs = toc_docs()
    root = (site / f"{docs[0][1]}.html").read_text(encoding="utf-8")
    captions = [_text(c) for c in re.findall(r'caption-text">(.*?)</span>', root)]
    book_title = ""
    out = []
    for part, doc in docs:
        page = (site / f"{doc}.html").read_text(encoding="utf-8")
        title, _, book_title = _text(
            re.search(r"<title>(.*?)</title>", page, re.S)[1]
        ).rpartition(" \u2014 ")
        out.append(Chapter(doc, title, None if part is None else captions[part]))
    return book_title, out


def site_url() -> str:
    """The published site's address, from the repository's (GitHub Pages)."""
    from .repository import repository_url

    owner, name = urlparse(repository_url()).path.strip("/").split("/")[:2]
    return f"https://{owner}.github.io/{name}/"


def front_matter(
    edition: str, book_title: str, chaps: list[Chapter], offset: int
) -> str:
    """The title page and the table of contents, as HTML; page numbers as printed."""
    words = WORDS[edition]
    url = site_url() + ("" if edition == "en" else f"{edition}/")
    rows, part = [], None
    for ch in chaps:
        if ch.part and ch.part != part:
            part = ch.part
            rows.append(f'<li class="part">{html.escape(part)}</li>')
        number = ch.first - offset + 1
        rows.append(
            f'<li><a href="http://toc.invalid/p{ch.first}">{html.escape(ch.title)}</a>'
            f"<span>{number}</span></li>"
        )
    return f"""<!doctype html><html lang="{LANG[edition]}"><meta charset="utf-8"><style>
@page {{ size: A4; margin: 25mm 22mm; }}
body {{ font-family: {SANS}; color: #111; }}
.title {{ height: 230mm; display: flex; flex-direction: column; justify-content: center;
  break-after: page; }}
.title h1 {{ font-size: 30pt; margin: 0 0 8mm; }}
.title p {{ font-size: 13pt; color: #444; }}
h2 {{ font-size: 20pt; }} ol {{ list-style: none; padding: 0; font-size: 11pt; }}
li {{ display: flex; justify-content: space-between; border-bottom: 1px dotted #bbb;
  padding: 1.2mm 0; }}
li.part {{ font-weight: bold; border: none; margin-top: 4mm; }}
a {{ color: #111; text-decoration: none; }}
</style><body><div class="title"><h1>{html.escape(book_title)}</h1>
<p>{html.escape(words["edition"])}</p><p>{html.escape(words["online"])}<br>{url}</p></div>
<h2>{html.escape(words["contents"])}</h2><ol>{"".join(rows)}</ol></body></html>"""


def _print_chapters(page, edition: str, chaps: list[Chapter], tmp: Path) -> list[Path]:
    """Print every chapter once; each numbered on from the last. Returns the files."""
    files, start = [], 0
    site = site_dir(edition)
    for i, ch in enumerate(chaps):
        page.goto((site / f"{ch.doc}.html").as_uri(), wait_until="load")
        page.add_style_tag(content=PRINT_CSS.replace("START", str(start)))
        url = f"{site_url()}{'' if edition == 'en' else edition + '/'}{ch.doc}.html"
        if page.evaluate(PREPARE_JS, [WORDS[edition]["live"], url]):
            print(f"{edition} {ch.doc}: 'Loading' text on the page", file=sys.stderr)
        out = tmp / f"{i:02d}.pdf"
        page.pdf(path=str(out), prefer_css_page_size=True, print_background=True,
                 outline=True, tagged=True)  # fmt: skip
        files.append(out)
        from pypdf import PdfReader

        ch.pages = len(PdfReader(out).pages)
        start += ch.pages
    return files


def _relink(writer, chaps: list[Chapter], site: Path) -> int:
    """Turn the chapters' ``file://`` links to other chapters into links to their first
    page in the book; returns how many links were turned."""
    from pypdf.generic import ArrayObject, NameObject, NullObject

    first = {(site / f"{ch.doc}.html").resolve(): ch.first for ch in chaps}
    turned = 0
    for page in writer.pages:
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            action = annot.get("/A")
            uri = action and action.get_object().get("/URI")
            if not uri or not str(uri).startswith("file://"):
                continue
            target = first.get(Path(unquote(urlparse(str(uri)).path)).resolve())
            if target is None:
                continue
            del annot["/A"]
            annot[NameObject("/Dest")] = ArrayObject(
                [writer.pages[target].indirect_reference, NameObject("/XYZ"),
                 NullObject(), NullObject(), NullObject()]
            )  # fmt: skip
            turned += 1
    return turned


def build(edition: str) -> dict:
    """Print one edition into ``_build/pdf``; returns its pages, seconds and MB."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    t0 = time.monotonic()
    book_title, chaps = chapters(edition)
    tmp = OUT / f".{edition}"
    tmp.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        files = _print_chapters(page, edition, chaps, tmp)
        printed = time.monotonic() - t0
        # the front matter's length does not depend on its numbers: print it once to
        # count its pages, then with the chapters' pages known
        front = tmp / "front.pdf"
        for _ in range(2):
            offset = len(PdfReader(front).pages) if front.exists() else 0
            at = offset
            for ch in chaps:
                ch.first, at = at, at + ch.pages
            page.set_content(front_matter(edition, book_title, chaps, offset))
            page.evaluate("document.fonts.ready.then(() => 0)")
            page.pdf(path=str(front), prefer_css_page_size=True, print_background=True)
        browser.close()
    writer = PdfWriter()
    writer.append(str(front), import_outline=False)
    for f in files:
        writer.append(str(f), import_outline=False)
    part_item, part = None, None  # the outline, once every page is in
    for ch, f in zip(chaps, files, strict=True):
        if ch.part and ch.part != part:
            part = ch.part
            part_item = writer.add_outline_item(title=part, page_number=ch.first)
        parent = part_item if ch.part else None
        item = writer.add_outline_item(
            title=ch.title, page_number=ch.first, parent=parent
        )
        _import_sections(writer, PdfReader(f), ch.first, item)
    _front_links(writer, chaps, offset)
    turned = _relink(writer, chaps, site_dir(edition))
    _fix_to_unicode(writer)
    writer.add_metadata({"/Title": book_title, "/Lang": LANG[edition]})
    writer.page_mode = "/UseOutlines"
    out = OUT / f"{NAME}.{edition}.pdf"
    with out.open("wb") as fh:
        writer.write(fh)
    for f in [*files, front]:
        f.unlink()
    tmp.rmdir()
    pages = len(writer.pages)
    return {"edition": edition, "pages": pages, "print_s": round(printed, 1),
            "total_s": round(time.monotonic() - t0, 1), "links": turned,
            "MB": round(out.stat().st_size / 1e6, 1)}  # fmt: skip


def _import_sections(writer, reader, first: int, parent) -> None:
    """The chapter's own outline (Chromium's, from its headings) below its entry,
    without the chapter's title (the entry itself); two levels deep."""

    def walk(items, into, depth):
        last = None
        for it in items:
            if isinstance(it, list):
                if last is not None and depth < 2:
                    walk(it, last, depth + 1)
                continue
            number = reader.get_destination_page_number(it)
            last = writer.add_outline_item(
                title=str(it.title), page_number=first + number, parent=into
            )

    top = reader.outline
    # Chromium's outline starts with the page's h1; its children are the sections
    if len(top) >= 2 and isinstance(top[1], list):
        walk(top[1], parent, 1)


def _ideograph(match: re.Match) -> bytes:
    code = int(match[2], 16)
    char = RADICALS.get(code) or unicodedata.normalize("NFKC", chr(code))
    if len(char) != 1 or 0x2E80 <= ord(char) <= 0x2FDF:
        return match[0]
    return match[1] + b"<%04X>" % ord(char)


def _fix_to_unicode(writer) -> int:
    """Map the radicals of the one-byte (Type 3) fonts' ToUnicode maps to the ideographs
    they draw; returns how many maps changed."""
    seen, changed = set(), 0
    for page in writer.pages:
        fonts = (page.get("/Resources") or {}).get("/Font") or {}
        for ref in fonts.values():
            font = ref.get_object()
            cmap = font.get("/ToUnicode")
            if cmap is None or id(cmap.get_object()) in seen:
                continue
            seen.add(id(cmap.get_object()))
            stream = cmap.get_object()
            data = stream.get_data()
            fixed = TO_UNICODE_PAIR.sub(_ideograph, data)
            if fixed != data:
                stream.set_data(fixed)
                changed += 1
    return changed


def _front_links(writer, chaps: list[Chapter], offset: int) -> None:
    """The table of contents' links (``toc.invalid/p<page>``) go to that page."""
    from pypdf.generic import ArrayObject, NameObject, NullObject

    for page in writer.pages[:offset]:
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            action = annot.get("/A")
            uri = str(action and action.get_object().get("/URI") or "")
            m = re.search(r"toc\.invalid/p(\d+)$", uri)
            if m:
                del annot["/A"]
                annot[NameObject("/Dest")] = ArrayObject(
                    [writer.pages[int(m[1])].indirect_reference,
                     NameObject("/XYZ"), NullObject(), NullObject(), NullObject()]
                )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("editions", nargs="*", help=f"any of {EDITIONS} (all)")
    parser.add_argument(
        "--jobs", type=int, default=2, help="editions printed side by side"
    )
    args = parser.parse_args(argv)
    args.editions = args.editions or list(EDITIONS)
    unknown = set(args.editions) - set(EDITIONS)
    if unknown:
        parser.error(f"no edition {sorted(unknown)}: the editions are {EDITIONS}")
    if not (SITE / "index.html").exists():
        print("No site yet: run 'make book' first", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if args.jobs > 1 and len(args.editions) > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(build, args.editions))
    else:
        results = [build(e) for e in args.editions]
    for r in results:
        print(r)
    print(f"{len(results)} PDFs in {time.monotonic() - t0:.0f} s, in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
