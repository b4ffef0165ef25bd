"""The published site, checked in a real browser with no kernel and no outside network.

Serves ``_build/html`` (built by ``make book``) on 127.0.0.1 and drives Debian's
Chromium with Playwright. Every request to another host is blocked and counted. On every
page of ``_toc.yml``: no request leaves 127.0.0.1, none fails, the console has no
errors, every image has loaded, all math is typeset by the site's own MathJax (no raw
``\\[``, ``$$`` or ``\\frac`` left), no dead widget text (``interactive(children=...``,
``<function ...>``, ...) shows, and the page's own bytes (HTML, images, figure data:
everything outside the shared ``_static/``) stay under 2 MB. On every interactive
figure, each control changes what the reader sees (screenshots before and after differ)
and hovering a heatmap cell shows its value. Search finds "softmax"; Chinese text is
drawn with a CJK font. The checks of the built files that need no browser are in
tests/test_site_files.py; the site's location, pages and report in tests/built_site.py.

On failure, screenshots go to ``_build/screenshots/``; ``TL_SITE_SHOTS=1`` saves one of
every page. A per-page report (bytes transferred, own bytes, interactive figures, load
time, the Chinese search results) is written to ``_build/site-report.md`` when the run
ends (tests/conftest.py; the pages may be visited by several pytest-xdist workers).
``TL_SITE_DIR`` (and ``TL_BOOK_DIR`` for its sources) test another build.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from built_site import (
    EDITION_PAGES,
    EDITIONS,
    PAGES,
    SHOTS,
    SITE,
    _record,
)
from conftest import QuietHandler, serve

PAGE_BUDGET = (
    2 * 1024 * 1024
)  # a page's own content (not the shared theme and MathJax under _static/)


SAVE_ALL_SHOTS = os.environ.get("TL_SITE_SHOTS") == "1"


# What a reader sees when a notebook output could not be rendered without a kernel.
DEAD_WIDGET_TEXT = re.compile(
    r"interactive\(children=|<function \w|\bVBox\(|\bHBox\(|Output\(\)|Image\(value=|"
    r"Interactive figure with controls|Loading widget|application/vnd\.jupyter\.widget|"
    r"<Figure size \d|<matplotlib\.|<IPython\.core\.display|"
    r"<[\w.]+ (?:object )?at 0x[0-9a-fA-F]+>"  # a bare object repr, e.g. <torch._C.Generator at 0x7f...>
)


# TeX that MathJax should have typeset but did not.
RAW_MATH = re.compile(
    r"\\\[|\\\]|\$\$|\\frac|\\\(|\\sqrt\{|\\mathrm\{|\\top\b|\\begin\{"
)


# ---------------------------------------------------------------------------------------------
# Static server and browser
# ---------------------------------------------------------------------------------------------
class _CountingHandler(QuietHandler):
    """Serves the built site and records (path, bytes) of every response body it sends."""

    served: list[tuple[str, int]] = []

    def copyfile(self, source, outputfile):
        data = source.read()
        outputfile.write(data)
        self.served.append((urlsplit(self.path).path, len(data)))


@pytest.fixture(scope="module")
def server(site):
    with serve(site, _CountingHandler) as url:
        yield url


@pytest.fixture(scope="module")
def context(browser):
    ctx = browser.new_context(
        viewport={"width": 1280, "height": 900}, device_scale_factor=1, locale="en-US"
    )
    # a loaded 2-core machine: the formula index once took over 20 s to load
    ctx.set_default_timeout(60_000)
    yield ctx
    ctx.close()


class Visit:
    """One page opened in the browser, with everything that happened while it loaded."""

    def __init__(self, context, base: str, path: str):
        self.path = path
        self.page = context.new_page()
        self.blocked: list[str] = []  # requests to other hosts (aborted)
        self.failed: list[str] = []  # local requests that failed or answered >= 400
        self.console_errors: list[str] = []
        origin = urlsplit(base).netloc

        def route(r):
            if urlsplit(r.request.url).netloc == origin:
                r.continue_()
            else:
                self.blocked.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on(
            "console",
            lambda m: m.type == "error" and self.console_errors.append(m.text),
        )
        self.page.on(
            "pageerror", lambda e: self.console_errors.append(f"uncaught: {e}")
        )
        self.page.on(
            "requestfailed",
            lambda r: (
                urlsplit(r.url).netloc == origin
                and self.failed.append(f"{r.url} ({r.failure})")
            ),
        )
        self.page.on(
            "response",
            lambda r: (
                r.status >= 400 and self.failed.append(f"{r.url} -> HTTP {r.status}")
            ),
        )
        # Requests in flight, to wait for the page to go quiet. (Playwright's own
        # "networkidle" sometimes never fires with nothing in flight: seen on CI and
        # reproduced here, about one page load in 40 on a busy machine.)
        self.in_flight: dict[int, str] = {}
        self.last_activity = time.perf_counter()

        def started(r):
            self.in_flight[id(r)] = r.url
            self.last_activity = time.perf_counter()

        def ended(r):
            self.in_flight.pop(id(r), None)
            self.last_activity = time.perf_counter()

        self.page.on("request", started)
        self.page.on("requestfinished", ended)
        self.page.on("requestfailed", ended)
        _CountingHandler.served.clear()
        t0 = time.perf_counter()
        self.page.goto(f"{base}/{path}", wait_until="load")
        # MathJax typesets after load; its fonts arrive after that.
        self.page.evaluate(
            "async () => { if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
            " { await MathJax.startup.promise; } }"
        )
        self._wait_until_quiet()
        self.load_seconds = time.perf_counter() - t0
        self.served = list(_CountingHandler.served)

    def _wait_until_quiet(self, quiet: float = 0.5, limit: float = 60.0) -> None:
        """Wait until no request has been in flight for ``quiet`` seconds."""
        deadline = time.perf_counter() + limit
        while self.in_flight or time.perf_counter() - self.last_activity < quiet:
            if time.perf_counter() > deadline:
                raise AssertionError(
                    f"{self.path}: requests still in flight after {limit:.0f} s: "
                    f"{sorted(self.in_flight.values())[:5]}"
                )
            self.page.wait_for_timeout(100)  # lets Playwright deliver the events

    @property
    def bytes_total(self) -> int:
        return sum(n for _, n in self.served)

    @property
    def bytes_own(self) -> int:
        """The page's own content: everything but the shared theme/MathJax files and the
        search index."""
        shared = re.compile(r"^/(?:zh_CN/|zh_TW/)?(?:_static/|searchindex\.js$)")
        return sum(n for p, n in self.served if not shared.match(p))

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        out = SHOTS / (re.sub(r"[^\w.-]+", "_", f"{self.path}-{name}") + ".png")
        self.page.screenshot(path=str(out), full_page=True)
        return out

    def close(self):
        self.page.close()


# One pass over the page's DOM: images, leftover TeX, dead widget text, math and
# figures.
AUDIT_JS = r"""
async () => {
  const imgs = Array.from(document.images);
  imgs.forEach(i => { if (i.loading === "lazy") i.loading = "eager"; });
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  const broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => (i.currentSrc || i.src).slice(0, 120));
  const article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  const CODE = "script, style, textarea, pre, code, kbd, .highlight, .cell_input, mjx-container, mjx-assistive-mml";
  // Code listings are allowed to contain TeX and widget reprs; notebook text/plain outputs are not
  // (they are where a dead widget shows up), so those are kept for the widget check.
  const LISTING = "script, style, textarea, .cell_input, mjx-container, " +
    "div[class*='highlight-']:not([class*='highlight-myst-ansi']), code.literal, .tl-frames";
  function text(skip) {
    const out = [];
    const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {
      acceptNode: n => (n.parentElement && n.parentElement.closest(skip)) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
    });
    while (walker.nextNode()) out.push(walker.currentNode.nodeValue);
    return out.join(" ");
  }
  const maths = Array.from(document.querySelectorAll(".math"));
  return {
    images: imgs.length,
    broken,
    prose: text(CODE),
    outputs: text(LISTING),
    widget_views: document.querySelectorAll("script[type='application/vnd.jupyter.widget-view+json'], .jupyter-widgets").length,
    math: maths.length,
    untypeset: maths.filter(m => !m.querySelector("mjx-container")).map(m => m.textContent.slice(0, 80)),
    mjx: document.querySelectorAll("mjx-container").length,
    mjx_errors: Array.from(document.querySelectorAll("mjx-merror")).map(e => e.getAttribute("data-mjx-error") || "error"),
    explorers: document.querySelectorAll(".tl-explorer").length,
    title: document.title,
  };
}
"""


def _context_around(text: str, match: re.Match, width: int = 60) -> str:
    return text[max(0, match.start() - width) : match.end() + width].replace("\n", " ")


def _change_control(control, kind: str, attempt: int, initial) -> None:
    """Move one control the way a reader would: arrow key on a slider, click a box, pick
    an option."""
    if kind == "range":
        at_max = control.evaluate("c => +c.value >= +c.max")
        control.focus()
        control.press("ArrowLeft" if at_max else "ArrowRight")
    elif kind == "checkbox":
        control.click()
    else:  # select: the next option after the initial one, then the one after that...
        n = control.evaluate("c => c.options.length")
        control.select_option(index=(int(initial) + 1 + attempt) % n)


# The controls' values on show, and a way to put them back (as a reload of the page
# would).
READ_CONTROLS_JS = "el => Array.from(el.querySelectorAll('[data-k]')).map(c => c.type === 'checkbox' ? c.checked : c.value)"


RESET_CONTROLS_JS = """(el, init) => {
  const ctls = Array.from(el.querySelectorAll('[data-k]'));
  ctls.forEach((c, k) => { if (c.type === 'checkbox') c.checked = init[k]; else c.value = init[k]; });
  ctls[0].dispatchEvent(new Event('input'));
}"""


# The hover boxes of the frame on show (null when its figure has no heatmap).
HOVER_BOX_JS = """el => {
  const frames = JSON.parse(el.querySelector('script.tl-frames').textContent);
  const idx = [];
  el.querySelectorAll('[data-k]').forEach(c => {
    idx[+c.dataset.k] = c.type === 'checkbox' ? (c.checked ? c.dataset.true : c.dataset.false) : c.value;
  });
  const f = frames[idx.join(',')];
  return f && f.hover && f.hover.length ? f.hover[0].box : null;
}"""


def _kind(control) -> tuple[str, int]:
    """("range" | "checkbox" | "select", number of options) of one control."""
    return control.evaluate(
        "c => c.tagName === 'SELECT' ? ['select', c.options.length]"
        " : (c.type === 'range' ? ['range', +c.max + 1] : [c.type, 2])"
    )


def _moves_picture(figure, control, initial, baseline: bytes) -> bool:
    """Move ``control`` (up to through all of its options) until the figure differs from
    ``baseline``."""
    kind, n_options = _kind(control)
    for attempt in range(1 if kind == "checkbox" else max(1, n_options - 1)):
        _change_control(control, kind, attempt, initial)
        if figure.screenshot() != baseline:
            return True
    return False


def _check_explorers(visit: Visit, every_control: bool = True) -> list[str]:
    """Each control changes the picture (screenshots before and after differ): from the
    figure as the page shows it or, for a control that only matters in other settings
    (say, a Pre-LN toggle while the input tensor is shown), after one other control is
    moved. Hovering a heatmap cell shows its value.

    ``every_control=False`` (the Chinese editions, whose figures are the English
    page's figures with translated words) moves the first control of each figure only.
    """
    problems = []
    page = visit.page
    explorers = page.locator(".tl-explorer")
    for i in range(explorers.count()):
        ex = explorers.nth(i)
        figure = ex.locator(".tl-explorer-figure img")
        figure.scroll_into_view_if_needed()
        initial = ex.evaluate(READ_CONTROLS_JS)
        shown = figure.screenshot()
        controls = ex.locator("[data-k]")
        n = controls.count()
        for j in range(n if every_control else min(n, 1)):
            works = _moves_picture(figure, controls.nth(j), initial[j], shown)
            ex.evaluate(RESET_CONTROLS_JS, initial)
            for m in (m for m in range(n) if m != j and not works):
                kind_m, _ = _kind(controls.nth(m))
                _change_control(controls.nth(m), kind_m, 0, initial[m])
                works = _moves_picture(
                    figure, controls.nth(j), initial[j], figure.screenshot()
                )
                ex.evaluate(RESET_CONTROLS_JS, initial)
            if not works:
                SHOTS.mkdir(parents=True, exist_ok=True)
                (
                    SHOTS
                    / re.sub(
                        r"[^\w.-]+",
                        "_",
                        f"{visit.path}-figure{i + 1}-control{j + 1}.png",
                    )
                ).write_bytes(shown)
                kind, _ = _kind(controls.nth(j))
                problems.append(
                    f"figure {i + 1}, control {j + 1} ({kind}): changing it never changes the figure"
                )
        # Hover: point at the middle of the first heatmap, expect a read-out with its
        # value.
        box = ex.evaluate(HOVER_BOX_JS)
        if box:
            r = figure.bounding_box()
            page.mouse.move(
                r["x"] + (box[0] + box[2] * 0.5) * r["width"],
                r["y"] + (box[1] + box[3] * 0.5) * r["height"],
            )
            tip = ex.locator(".tl-hover")
            # the edition's word for a masked cell ("masked", 被遮蔽...)
            masked = ex.locator("script.tl-describe").evaluate(
                "s => JSON.parse(s.textContent).masked"
            )
            value = rf": (-?[\d.e+-]+|{re.escape(masked)})$"
            if not (tip.is_visible() and re.search(value, tip.inner_text())):
                problems.append(
                    f"figure {i + 1}: hovering a heatmap cell shows no value "
                    f"({tip.inner_text()!r})"
                )
            elif _edition_of(visit.path) and re.search(
                r"\b(query|key|masked)\b", tip.inner_text()
            ):
                problems.append(
                    f"figure {i + 1}: English hover read-out {tip.inner_text()!r}"
                )
            page.mouse.move(0, 0)
    return problems


# Up to three runs of Chinese text on the page (article and navigation), marked for the
# font probe.
MARK_CJK_JS = r"""() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let n = 0;
  while (walker.nextNode() && n < 3) {
    const t = walker.currentNode, el = t.parentElement;
    if (/[\u3400-\u9fff]/.test(t.nodeValue) && el && !el.closest('script,style') && el.getClientRects().length) {
      el.setAttribute('data-tl-cjk', String(n++));
    }
  }
  return n;
}"""


CJK_FONT = re.compile(
    r"CJK|Han Sans|Noto Sans [ST]C|Hei|Song|Ming|PingFang|YaHei|WenQuanYi"
)


def _cjk_fonts(visit: Visit) -> list[dict[str, int]]:
    """The fonts Chromium really drew each marked run of Chinese text with ({family:
    glyphs})."""
    if not visit.page.evaluate(MARK_CJK_JS):
        return []
    cdp = visit.page.context.new_cdp_session(visit.page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        found = []
        for node in cdp.send(
            "DOM.querySelectorAll", {"nodeId": root, "selector": "[data-tl-cjk]"}
        )["nodeIds"]:
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
            found.append({f["familyName"]: f["glyphCount"] for f in fonts})
        return found
    finally:
        cdp.detach()


def _edition_of(path: str) -> str:
    return next(
        e for e in sorted(EDITIONS, key=len, reverse=True) if path.startswith(e)
    )


# Paragraphs, list items, headings, table cells and captions of the article whose own
# words (code, math, outputs and the interactive figures aside) are an English sentence:
# five or more English words and not one Chinese character.
ENGLISH_PROSE_JS = r"""() => {
  const article = document.querySelector("article.bd-article") || document.body;
  const SKIP = ".cell_output, .cell_input, pre, .highlight, .tl-explorer, .bibliography, " +
    "div.citation, .footnote, script, style";
  const NEUTRAL = "mjx-container, code, kbd, .math, cite, span.bibtex-citation";
  const blocks = article.querySelectorAll("p, li, h1, h2, h3, h4, td, th, dt, dd, figcaption, .admonition-title");
  const out = [];
  for (const el of blocks) {
    if (el.closest(SKIP)) continue;
    if (el.querySelector("p, li, td")) continue;  // judge the innermost block only
    const clone = el.cloneNode(true);
    clone.querySelectorAll(NEUTRAL).forEach(n => n.remove());
    const t = clone.textContent.replace(/\s+/g, " ").trim();
    if (/[\u3400-\u9fff]/.test(t)) continue;
    if (/(?:\b[A-Za-z][a-z'’-]+\b[\s,;:()]+){4,}\b[A-Za-z][a-z'’-]+\b/.test(t)) out.push(t.slice(0, 100));
  }
  return out;
}"""


def _edition_problems(visit: Visit, path: str) -> list[str]:
    """What every edition's page must have: its own <html lang>, a language switcher
    whose links open the same page in the other editions, and, in a Chinese edition, no
    paragraph left in English."""
    edition = _edition_of(path)
    problems = []
    lang = visit.page.evaluate("() => document.documentElement.lang")
    if lang != EDITIONS[edition]:
        problems.append(f"<html lang={lang!r}>, expected {EDITIONS[edition]!r}")
    links = visit.page.evaluate(
        "() => Array.from(document.querySelectorAll('.tl-editions a'))"
        ".map(a => [a.getAttribute('hreflang'), a.href])"
    )
    if len(links) != len(EDITIONS) - 1:
        problems.append(f"language switcher has {len(links)} links: {links}")
    # its label: English and the edition's own script, never the other script (Sphinx
    # hands templates the tag zh-TW, which once matched no edition and showed both)
    label = visit.page.evaluate(
        "() => document.querySelector('.tl-editions')?.getAttribute('aria-label')"
    )
    want_label = {
        "": "Language · 语言 · 語言",
        "zh_CN/": "Language · 语言",
        "zh_TW/": "Language · 語言",
    }
    if label != want_label.get(edition, label):
        problems.append(
            f"language switcher labelled {label!r}, expected {want_label[edition]!r}"
        )
    page = path[len(edition) :]
    for hreflang, href in links:
        target = urlsplit(href).path.lstrip("/")
        want = {v: k for k, v in EDITIONS.items()}.get(hreflang, "?") + page
        if target != want or not (SITE / target).is_file():
            problems.append(f"switcher link {hreflang} -> {target}, expected {want}")
    if edition:
        for text in visit.page.evaluate(ENGLISH_PROSE_JS)[:5]:
            problems.append(f"English prose left in a Chinese page: {text!r}")
    return problems


@pytest.mark.parametrize("path", EDITION_PAGES)
def test_page_works_offline(context, server, path):
    visit = Visit(context, server, path)
    try:
        audit = visit.page.evaluate(AUDIT_JS)
        problems = _edition_problems(visit, path)
        if visit.blocked:
            problems.append(
                f"{len(visit.blocked)} requests to other hosts: {sorted(set(visit.blocked))[:5]}"
            )
        if visit.failed:
            problems.append(f"{len(visit.failed)} failed requests: {visit.failed[:5]}")
        if visit.console_errors:
            problems.append(
                f"{len(visit.console_errors)} console errors: {visit.console_errors[:5]}"
            )
        if audit["broken"]:
            problems.append(
                f"{len(audit['broken'])} images did not load: {audit['broken'][:3]}"
            )
        for m in list(RAW_MATH.finditer(audit["prose"]))[:3]:
            problems.append(
                f"raw TeX on the page: ...{_context_around(audit['prose'], m)}..."
            )
        if audit["untypeset"]:
            problems.append(
                f"{len(audit['untypeset'])} math elements not typeset: {audit['untypeset'][:3]}"
            )
        if audit["mjx_errors"]:
            problems.append(f"MathJax errors: {audit['mjx_errors'][:3]}")
        for m in list(DEAD_WIDGET_TEXT.finditer(audit["outputs"]))[:3]:
            problems.append(
                f"dead widget text: ...{_context_around(audit['outputs'], m)}..."
            )
        if audit["widget_views"]:
            problems.append(
                f"{audit['widget_views']} live-widget views that need a kernel"
            )
        if visit.bytes_own > PAGE_BUDGET:
            problems.append(
                f"page's own content is {visit.bytes_own / 1e6:.2f} MB (> 2 MB)"
            )
        cjk = _cjk_fonts(visit)
        for fonts in cjk:
            if not any(CJK_FONT.search(name) for name in fonts):
                problems.append(
                    f"Chinese text drawn with {fonts}: no CJK font, the reader sees boxes"
                )
        problems += _check_explorers(visit, every_control=not _edition_of(path))
        _record(
            "page",
            path,
            {
                "title": audit["title"],
                "bytes": visit.bytes_total,
                "own": visit.bytes_own,
                "requests": len(visit.served),
                "figures": audit["explorers"],
                "images": audit["images"],
                "math": audit["mjx"],
                "cjk": len(cjk),
                "seconds": visit.load_seconds,
            },
        )
        if problems:
            problems.append(f"(screenshot: {visit.shot('page')})")
        elif SAVE_ALL_SHOTS:
            visit.shot("page")
        assert not problems, f"{path}:\n  " + "\n  ".join(problems)
    finally:
        visit.close()


def test_math_is_typeset_by_the_sites_own_mathjax(context, server):
    """At least one page has math, and it is MathJax 3 from _static/mathjax that
    typesets it."""
    with_math = [
        p for p in PAGES if "mathjax" in (SITE / p).read_text(encoding="utf-8")
    ]
    assert with_math, "no page loads MathJax: is there no math in the book?"
    visit = Visit(context, server, with_math[0])
    try:
        mj = [p for p, _ in visit.served if "mathjax" in p.lower()]
        assert any(p.startswith("/_static/mathjax/") for p in mj), mj
        version = visit.page.evaluate("() => window.MathJax && MathJax.version")
        assert version and version.startswith("3."), version
        assert visit.page.locator("mjx-container").count() > 0
    finally:
        visit.close()


def test_search_finds_softmax(context, server):
    visit = Visit(context, server, "search.html?q=softmax")
    try:
        page = visit.page
        page.wait_for_function(
            "() => document.querySelectorAll('#search-results ul.search li').length > 0"
            " || /finished|did not match|no results/i.test((document.querySelector('#search-results') || {}).textContent || '')",
            timeout=60_000,
        )
        hits = page.locator("#search-results ul.search li a")
        assert hits.count() > 0, "search for 'softmax' found nothing"
        first = hits.first.get_attribute("href")
        assert first and ".html" in first, first
        assert not visit.blocked and not visit.failed and not visit.console_errors, (
            visit.blocked,
            visit.failed,
            visit.console_errors,
        )
    except Exception:
        visit.shot("search")
        raise
    finally:
        visit.close()


@pytest.mark.parametrize(
    ("edition", "word"),
    [
        ("zh_CN/", "残差"),
        ("zh_CN/", "注意力"),
        ("zh_CN/", "掩码"),
        ("zh_CN/", "缓存"),
        ("zh_TW/", "殘差"),
        ("zh_TW/", "注意力"),
        ("zh_TW/", "位置編碼"),
    ],
)
def test_search_finds_chinese_words(context, server, edition, word):
    """Sphinx's Chinese search (jieba, with the glossary as its dictionary) finds the
    pages that use a word, even inside compounds such as 残差连接."""
    visit = Visit(context, server, f"{edition}search.html?q={word}")
    try:
        page = visit.page
        page.wait_for_function(
            "() => document.querySelectorAll('#search-results ul.search li').length > 0"
            " || /finished|did not match|no results|搜索完成|搜尋完成|没有|沒有/i"
            ".test((document.querySelector('#search-results') || {}).textContent || '')",
            timeout=60_000,
        )
        hrefs = page.locator("#search-results ul.search li > a").evaluate_all(
            "els => els.map(a => a.href)"
        )
        assert hrefs, f"searching {word} on {edition} found nothing"
        for href in hrefs[:3]:
            target = SITE / urlsplit(href).path.lstrip("/")
            assert target.is_file(), href
            assert word in target.read_text(encoding="utf-8"), (
                f"{href} was found for {word} but does not contain it"
            )
        _record("search", f"{edition}{word}", [urlsplit(h).path for h in hrefs])
    except Exception:
        visit.shot(f"search-{word}")
        raise
    finally:
        visit.close()


def test_chinese_text_uses_a_cjk_font(context, server):
    """The glossary's Chinese terms are drawn with a CJK font (Simplified Chinese
    first), not as tofu."""
    glossary = [p for p in PAGES if "glossary" in p]
    assert glossary, "no glossary page in _toc.yml"
    visit = Visit(context, server, glossary[0])
    try:
        fonts = _cjk_fonts(visit)
        assert fonts, f"{glossary[0]} has no Chinese text"
        for used in fonts:
            assert any(CJK_FONT.search(name) for name in used), (
                f"Chinese text drawn with {used} (tofu?)"
            )
        family = visit.page.evaluate(
            "() => getComputedStyle(document.querySelector('[data-tl-cjk]')).fontFamily"
        )
        assert "Noto Sans CJK SC" in family, family
    except Exception:
        visit.shot("cjk")
        raise
    finally:
        visit.close()
    # The site's CSS names CJK fonts for readers whose system has other ones.
    css = (SITE / "_static" / "tl-site.css").read_text(encoding="utf-8")
    assert (
        '"Noto Sans CJK SC"' in css
        and '"Noto Sans CJK TC"' in css
        and ":lang(zh" in css
    )


CODE_FONT_JS = r"""() => {
  const out = [];
  for (const sel of ["div.highlight pre", "div.highlight pre span", "code.literal"]) {
    const el = document.querySelector("article.bd-article " + sel);
    if (!el) { out.push([sel, null, 0, 0]); continue; }
    const probe = (text) => {
      const s = document.createElement("span");
      s.textContent = text;
      el.appendChild(s);
      const w = s.getBoundingClientRect().width;
      s.remove();
      return w;
    };
    out.push([sel, getComputedStyle(el).fontFamily, probe("iiiiiiiiii"), probe("MMMMMMMMMM")]);
  }
  return out;
}"""


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_code_is_monospace_in_every_edition(context, server, edition):
    """A code block, a highlighted token in it and inline code are set in a monospace
    font on every edition's pages: the Chinese pages' :lang(zh) rule in
    book/_static/tl-site.css must not outrank the theme's monospace. Checked on the
    computed font-family and on the drawn widths (ten i's as wide as ten M's)."""
    page = next(p for p in PAGES if "01_" in p)
    visit = Visit(context, server, edition + page)
    try:
        for selector, family, narrow, wide in visit.page.evaluate(CODE_FONT_JS):
            assert family is not None, f"{edition}{page}: no {selector}"
            first = family.split(",")[0].strip().strip('"')
            assert first == "SFMono-Regular", f"{selector}: font-family {family}"
            assert wide > 0 and abs(narrow - wide) < 0.5, (
                f"{edition}{page} {selector}: not monospace ({family}):"
                f" 10 i = {narrow:.1f} px, 10 M = {wide:.1f} px"
            )
    except Exception:
        visit.shot(f"code-font-{edition.strip('/') or 'en'}")
        raise
    finally:
        visit.close()
