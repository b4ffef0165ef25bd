"""The built site's files, read without a browser, in every edition: the promised
interactive figures are on their pages, the launch and download buttons point at the
repository, the figures' words are exactly the catalog's and translated, no word
around a Chinese page is left in English, and each Chinese edition's download button
gives its own notebook. The browser's checks are in tests/test_site.py (``make
test-site`` runs both, after ``make book``).
"""

from __future__ import annotations

import json
import re
from html import unescape as html_unescape
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from built_site import BOOK, EDITIONS, PAGES, ROOT, _notebook_sources

# The interactive figures the book promises; each must have a kernel-free twin
# on its page.
REQUIRED_FIGURES = {
    "book/02_scores_and_scale.html": (
        "the sqrt(d_k) scale and temperature on attention weights"
    ),
    "book/04_masks.html": "the mask toggles",
    "book/05_multi_head.html": "the head selector",
    "book/08_positional_encoding.html": "the positional-encoding explorer",
    "book/11_toy_model.html": "the toy model's attention maps by layer and head",
    "book/14_decoder_only.html": (
        "the adder's attention maps by problem, layer and head"
    ),
    "book/15_sampling.html": (
        "the next-token distribution under temperature, top-k, top-p"
    ),
    "book/16_modern_block.html": "RoPE's two layouts as matrices, LayerNorm vs RMSNorm",
    "book/17_length_extrapolation.html": (
        "attention and accuracy past the training length"
    ),
    "book/18_attention_across_processes.html": "the ring's schedule and running error",
}


@pytest.mark.parametrize("path", sorted(REQUIRED_FIGURES))
def test_promised_interactive_figures_are_on_the_site(site, path):
    if path not in PAGES:
        pytest.fail(f"{path} is not in _toc.yml")
    html = (site / path).read_text(encoding="utf-8")
    n = html.count('class="tl-explorer"')
    assert n >= 1, (
        f"{path} has no kernel-free interactive figure for {REQUIRED_FIGURES[path]}"
    )


def test_launch_and_download_buttons(site):
    """Each chapter offers Binder, Colab and a download of its .ipynb, all pointing at
    the repository."""
    config = yaml.safe_load((BOOK / "_config.yml").read_text())
    repo = config["repository"]["url"].rstrip("/")
    owner_repo = urlsplit(repo).path.strip("/")
    notebooks = [p for p in PAGES if (BOOK / p.replace(".html", ".ipynb")).exists()]
    assert notebooks
    for path in notebooks:
        html = (site / path).read_text(encoding="utf-8")
        nb = path.replace(".html", ".ipynb")
        assert f"mybinder.org/v2/gh/{owner_repo}/" in html and nb in html, (
            f"{path}: no Binder button"
        )
        assert f"colab.research.google.com/github/{owner_repo}/blob/" in html, (
            f"{path}: no Colab button"
        )
        download = re.search(r'href="([^"]*_sources/[^"]*\.ipynb)"', html)
        assert download, f"{path}: no download-.ipynb button"
        target = (site / Path(path).parent / download.group(1)).resolve()
        assert target.is_file(), f"{path}: download button points at missing {target}"


def test_figure_catalog_has_exactly_the_words_of_the_figures(site):
    """locales/zh_CN/LC_MESSAGES/figures.po holds every title, control label, option,
    hover hint, hover row and column name and masked-cell word of the executed
    interactive figures, and nothing else (`make catalogs` refreshes it)."""
    from babel.messages.pofile import read_po

    from booktools.figures import figure_words

    words = figure_words()
    on_pages = set(_figure_words_on("".join(
        (site / page).read_text(encoding="utf-8") for page in PAGES
    )))  # fmt: skip
    assert set(words) == on_pages, "the figures' recorded words are not their HTML's"
    path = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "figures.po"
    with path.open("rb") as f:
        catalog = {str(m.id) for m in read_po(f) if m.id}
    assert words, "no interactive figure on the English site"
    assert set(words) == catalog, (
        f"run `make catalogs`: missing {sorted(set(words) - catalog)[:5]}, "
        f"stale {sorted(catalog - set(words))[:5]}"
    )


# the words of an interactive figure's HTML block (static.to_html), read back from a
# page
FIGURE_WORDS = re.compile(
    r'class="tl-explorer-title[^"]*"[^>]*>(?P<a>.*?)</div>'
    r'|class="tl-ctl-label[^"]*">(?P<b>.*?)</span>'
    r"|<option[^>]*>(?P<c>.*?)</option>"
    r'|class="tl-explorer-hint">(?P<d>.*?)</div>'
    r'|"(?:rn|cn|masked)":"(?P<e>(?:[^"\\]|\\.)*)"',
    re.S,
)


EXPLORER = re.compile(
    r'<div class="tl-explorer".*?class="tl-describe">.*?</script>', re.S
)


ALT = re.compile(r'<img alt="([^"]*)"')


def _figure_words_on(page: str) -> list[str]:
    """The words of a page's interactive figures, in page order."""
    out = []
    for block in EXPLORER.findall(page):
        for m in FIGURE_WORDS.finditer(block):
            text = next(t for t in m.groups() if t is not None)
            out.append(json.loads(f'"{text}"') if m.group("e") is not None else text)
    # the live panels of chapters 11 and 14 (transformer_lib/viz/live_panel.py)
    for block in LIVE_PANEL.findall(page):
        out.extend(LIVE_WORD.findall(block))
    return [w for w in out if w]


LIVE_PANEL = re.compile(r'<div class="tl-live-panel".*?</script>', re.S)


LIVE_WORD = re.compile(
    r'<span class="tl-live-word" data-key="[^"]*">(.*?)</span>', re.S
)


@pytest.mark.parametrize("edition", [e for e in EDITIONS if e])
def test_figure_words_are_translated(site, edition):
    """On a Chinese page, the interactive figures' words (titles, labels, options, the
    hover hint and read-out) are the catalog's translations (example sentences and
    numbers are data and stay), and so is the alt text of each picture."""
    from babel.messages.pofile import read_po

    path = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "figures.po"
    with path.open("rb") as f:
        data = {str(m.id) for m in read_po(f) if m.id and "data" in m.user_comments}
    cjk = re.compile(r"[\u3400-\u9fff]")
    english, checked = [], 0
    for page in PAGES:
        zh_page = (site / (edition + page)).read_text(encoding="utf-8")
        for block in EXPLORER.findall(zh_page):
            alt = ALT.search(block).group(1)
            if not cjk.search(alt):
                english.append(f"{page}: alt text {alt[:60]}")
        en = _figure_words_on((site / page).read_text(encoding="utf-8"))
        zh = _figure_words_on(zh_page)
        assert len(en) == len(zh), f"{edition}{page}: figures differ in structure"
        for a, b in zip(en, zh, strict=True):
            checked += 1
            if a == b and a not in data and re.search(r"[A-Za-z]{2,}", a):
                if not cjk.search(b) and len(re.findall(r"[A-Za-z]{2,}", a)) > 1:
                    english.append(f"{page}: {a}")
    assert checked > 100, checked
    assert not english, f"figure words left in English on {edition}: {english[:5]}"


# The words Sphinx, the theme and the build write around a page, in English, where a
# Chinese page must have its own: (what, a pattern over the page's text or its
# attributes). Each is on the English pages (checked too), so the check cannot pass
# for want of something to find.
ENGLISH_AROUND_THE_PAGE = {
    "exercise caption": ("text", re.compile(r"\bExercise \d")),
    "solution title": ("text", re.compile(r"\bSolution to\b")),
    "show_source line": ("text", re.compile(r"\bSource of\b")),
    "footer's authors": ("text", re.compile(r"transformer_lib authors|\bBy The\b")),
    "copyright line": ("text", re.compile(r"© Copyright")),
    "¶ link tooltip": ("attr", re.compile(r"^Link to this ")),
    # sphinx-togglebutton's hint, written into the page's script (booktools/editions.py)
    "fold hint": ("html", re.compile(r"toggleHint\w+ = 'Click to")),
}


def _page_text(page: str) -> str:
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return html_unescape(re.sub(r"<[^>]+>", " ", page))


def _page_attributes(page: str) -> list[str]:
    return [
        html_unescape(m.group(1))
        for m in re.finditer(
            r'\s(?:title|aria-label|alt|data-bs-title)="([^"]*)"', page
        )
    ]


def _catalog_words(name: str) -> set[str]:
    """The plain (not formatted) English words of a hand-kept catalog of the theme."""
    from babel.messages.pofile import read_po

    with (ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{name}.po").open("rb") as f:
        return {str(m.id) for m in read_po(f) if m.id and "%(" not in str(m.id)}


@pytest.mark.parametrize("edition", [e for e in EDITIONS if e])
def test_no_english_words_around_a_chinese_page(site, edition):
    """The words Sphinx, the theme and the build write around a page come from their
    catalogs in the edition's language (locales/zh_CN/LC_MESSAGES/sphinx.po and
    booktheme.po, through book/_templates and booktools/sphinx_ext.py): no exercise
    caption, "Link to this heading" tooltip, show_source line, footer, theme tooltip,
    fold hint ("Click to show") or landmark label in English, and every figure
    caption translated."""
    theme = _catalog_words("sphinx") | _catalog_words("booktheme")
    theme |= {"Launch on Binder", "Launch on Colab", "Binder logo", "Colab logo"}
    theme -= {"logo", "The transformer_lib authors"}  # parts of the ones above
    theme = {w for w in theme if not re.search(r"[\u3400-\u9fff]", w)}  # English
    cjk = re.compile(r"[\u3400-\u9fff]")
    on_english = {what: 0 for what in ENGLISH_AROUND_THE_PAGE}
    seen, left = set(), []
    for page in PAGES:
        en = (site / page).read_text(encoding="utf-8")
        zh = (site / (edition + page)).read_text(encoding="utf-8")
        for what, (where, pattern) in ENGLISH_AROUND_THE_PAGE.items():
            for html, count in ((en, True), (zh, False)):
                if where == "text":
                    found = pattern.findall(_page_text(html))
                elif where == "html":
                    found = pattern.findall(html)
                else:
                    found = [a for a in _page_attributes(html) if pattern.search(a)]
                if count:
                    on_english[what] += len(found)
                elif found:
                    left.append(f"{page}: {what}: {found[0]!r} (x{len(found)})")
        seen |= theme & set(_page_attributes(en))
        left += [
            f"{page}: theme word {a!r}" for a in _page_attributes(zh) if a in theme
        ]
        for caption in re.findall(r"<figcaption>(.*?)</figcaption>", zh, re.S):
            caption = re.sub(r'<span class="caption-number">.*?</span>', "", caption)
            if not cjk.search(_page_text(caption)):
                left.append(f"{page}: figure caption {_page_text(caption)[:60]!r}")
    assert all(on_english.values()), (
        f"nothing to check on the English pages: {on_english}"
    )
    assert seen, "no theme word found on the English pages"
    assert not left, f"{len(left)} English words on {edition}: {left[:8]}"


@pytest.mark.parametrize("edition", [e for e in EDITIONS if e])
def test_chinese_editions_download_chinese_notebooks(site, edition):
    """A Chinese page's download button gives the notebook in its language: the same
    code cells (so it runs as it is), plus a first one that makes the checkers speak
    the edition's language and one that gives the live figures the edition's words,
    and Markdown translated from the catalog."""
    cjk = re.compile(r"[\u3400-\u9fff]")
    for source in _notebook_sources():
        page = edition + source.relative_to(BOOK).with_suffix(".html").as_posix()
        html = (site / page).read_text(encoding="utf-8")
        link = re.search(r'href="([^"]*_sources/[^"]+\.ipynb)"', html)
        assert link, f"{page} has no download link for its notebook"
        target = (site / page).parent / link.group(1)
        english = json.loads(source.read_text(encoding="utf-8"))
        chinese = json.loads(target.read_text(encoding="utf-8"))
        code = [c["source"] for c in chinese["cells"] if c["cell_type"] == "code"]
        language = f"os.environ['LANGUAGE'] = {edition.strip('/')!r}"
        assert language in "".join(code[0]), f"{target}: first cell {code[0][:4]}"
        words = [c for c in code if "use_words(" in "".join(c)]
        assert len(words) <= 1, f"{target}: {len(words)} use_words cells"
        if words:
            assert code.index(words[0]) == 2, f"{target}: use_words is not 3rd"
            assert cjk.search("".join(words[0])), f"{target}: {words[0][:3]}"
        assert [c for c in code[1:] if c not in words] == [
            c["source"] for c in english["cells"] if c["cell_type"] == "code"
        ], f"{target}: code cells differ from {source}"
        markdown = [
            "".join(c["source"])
            for c in chinese["cells"]
            if c["cell_type"] == "markdown"
        ]
        words = re.compile(r"(?:[A-Za-z]{2,}\W+){4,}")
        neutral = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|^\(.*\)=$", re.S | re.M)
        english_only = [
            m[:80]
            for m in markdown
            if words.search(neutral.sub(" ", m)) and not cjk.search(m)
        ]
        assert not english_only, (
            f"{target}: Markdown cells left in English: {english_only}"
        )
