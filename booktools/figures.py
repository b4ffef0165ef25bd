"""The words of the figures, in each edition.

Two kinds of figure carry words:

* the kernel-free interactive figures (``transformer_lib/viz/static.py``), whose title,
  control labels, options, hover hint and read-out names are HTML in a code cell's
  output: each edition's Sphinx build replaces them from its catalog ``figures.po``
  (:func:`translate_figure_words`, called by :mod:`.sphinx_ext`), and writes the
  picture's alt text again from the translated words;
* the pictures themselves (titles, axis labels, legends, notes drawn by matplotlib):
  while the notebooks execute, every figure is drawn once more per edition with the
  words of ``images.po`` (``transformer_lib.viz.image_words``), into its output's
  metadata; :func:`use_edition_pictures` puts them in place of the English ones in an
  edition's copy of the jupyter-cache, and :func:`update_image_catalog` lists the
  words for ``images.po``.
"""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path

from .catalogs import IMAGE_CATALOG, catalog_path, write_catalog
from .paths import CACHE, SITE

# the font each edition's figures draw their words in (Latin letters and digits of a
# translated text too; math in matplotlib's own fonts); `make fonts` installs them
FONTS = {"zh_CN": "Noto Sans CJK SC", "zh_TW": "Noto Sans CJK TC"}

# The words of the kernel-free interactive figures: title, control labels, options, the
# hover hint, the names of a heatmap's rows and columns in the hover read-out, and the
# word for a masked cell. Their HTML is a code cell's output, computed once in English
# (transformer_lib/viz/static.py); each edition replaces these words from its catalog
# figures.po (update_figure_catalog extracts them), and writes the picture's alt text
# again from the translated title, labels and options.
FIGURE_WORDS = re.compile(
    r'(class="tl-explorer-title[^"]*"[^>]*>)(?P<a>.*?)(</div>)'
    r'|(class="tl-ctl-label[^"]*">)(?P<b>.*?)(</span>)'
    r"|(<option[^>]*>)(?P<c>.*?)(</option>)"
    r'|(class="tl-explorer-hint">)(?P<d>.*?)(</div>)'
    r'|("(?:rn|cn|masked)":")(?P<e>(?:[^"\\]|\\.)*)(")'
    r'|(class="tl-live-word"[^>]*>)(?P<f>.*?)(</span>)',
    re.S,
)
FIGURE_GROUPS = "abcdef"
FIGURE_CATALOG = "figures"
EXPLORER = re.compile(
    r'<div class="tl-explorer".*?class="tl-describe">.*?</script>', re.S
)
# a live panel (transformer_lib/viz/live_panel.py): its words are spans, filled in by
# book/_static/tl-live-panels.js; {name} in a word is a number or text the page fills in
LIVE_PANEL = re.compile(r'<div class="tl-live-panel".*?</script>', re.S)
DESCRIBE = re.compile(r'(class="tl-describe">)(.*?)(</script>)', re.S)
ALT = re.compile(r'(<img alt=")([^"]*)(")')


@functools.cache
def _labels():
    """transformer_lib.viz.labels, imported when first needed (it imports torch, with
    the library, into a Chinese edition's Sphinx build: 3 s)."""
    from transformer_lib.viz import labels

    return labels


def _json_text(m: re.Match, group: str) -> str:
    """A word as the page shows it (the hover names are JSON strings)."""
    text = m.group(group)
    return json.loads(f'"{text}"') if group == "e" else text


def figure_words(page: str) -> list[str]:
    """The translatable words of a page's interactive figures, in page order."""
    out = []
    for m in FIGURE_WORDS.finditer(page):
        group = next(g for g in FIGURE_GROUPS if m.group(g) is not None)
        out.append(_json_text(m, group))
    return [w for w in out if w]


def _alt_text(info: dict, chosen: list[int]) -> str:
    """The picture's alt text, as explorer.js writes it after a control moves."""
    settings = "; ".join(
        f"{label}: {texts[i]}"
        for label, texts, i in zip(info["labels"], info["texts"], chosen, strict=True)
    )
    return f"{info['title']} ({settings})"


def _swap_words(block: str, table: dict[str, str]) -> str:
    """The words of one figure or panel replaced by their translations in ``table``."""
    script_json = _labels().script_json

    def swap(m: re.Match) -> str:
        group = next(g for g in FIGURE_GROUPS if m.group(g) is not None)
        i = FIGURE_GROUPS.index(group) * 3
        text = _json_text(m, group)
        new = table.get(text, text)
        if group == "e":
            new = script_json(new)[1:-1]
        return m.group(i + 1) + new + m.group(i + 3)

    return FIGURE_WORDS.sub(swap, block)


def _translate_explorer(
    block: str, table: dict[str, str], words: dict[str, str], options: dict[str, str]
) -> str:
    script_json = _labels().script_json

    describe = DESCRIBE.search(block)
    info = json.loads(describe.group(2))
    alt = ALT.search(block)
    # which option each control shows first: the alt text names it
    shown = html.unescape(alt.group(2))
    head = f"{info['title']} ("
    parts = shown[len(head) : -1].split("; ") if shown.startswith(head) else []
    chosen = []
    for label, texts, part in zip(info["labels"], info["texts"], parts, strict=False):
        text = part[len(label) + 2 :] if part.startswith(f"{label}: ") else None
        if text in texts:
            chosen.append(texts.index(text))
    if len(chosen) != len(info["labels"]) or _alt_text(info, chosen) != shown:
        raise ValueError(
            f"cannot read the controls' settings in the alt text {shown!r}"
        )
    info["title"] = words.get(info["title"], info["title"])
    info["labels"] = [words.get(t, t) for t in info["labels"]]
    info["texts"] = [[options.get(t, t) for t in texts] for texts in info["texts"]]
    if "masked" in info:
        info["masked"] = table.get(info["masked"], info["masked"])
    described = script_json(info)
    block = (
        block[: alt.start(2)]
        + html.escape(_alt_text(info, chosen))
        + block[alt.end(2) : describe.start(2)]
        + described
        + block[describe.end(2) :]
    )
    return _swap_words(block, table)


def translate_figure_words(page: str, table: dict[str, str]) -> str:
    """A page with its interactive figures' words in the edition's language."""
    label_text, plain = _labels().label_text, _labels().plain

    # the alt text's words are the HTML's as plain text (no markup, no TeX), the
    # options' as the reader sees them
    words = {plain(label_text(en)): plain(label_text(zh)) for en, zh in table.items()}
    options = {html.unescape(en): html.unescape(zh) for en, zh in table.items()}
    page = EXPLORER.sub(
        lambda m: _translate_explorer(m.group(0), table, words, options), page
    )
    return LIVE_PANEL.sub(lambda m: _swap_words(m.group(0), table), page)


def site_figure_words(site: Path = SITE) -> dict[str, list[str]]:
    """{words: [pages]} of every interactive figure of the English site."""
    pages = sorted((site / "book").glob("*.html"))
    if not pages:
        raise SystemExit(f"no English site in {site}: run `make book` first")
    found: dict[str, list[str]] = {}
    for page in pages:
        for words in figure_words(page.read_text(encoding="utf-8")):
            found.setdefault(words, [])
            if page.stem not in found[words]:
                found[words].append(page.stem)
    return found


def update_figure_catalog(language: str = "zh_CN") -> Path:
    """locales/<language>/LC_MESSAGES/figures.po: the words of the interactive figures,
    taken from the built English site."""
    path = catalog_path(language, FIGURE_CATALOG)
    return write_catalog(path, language, site_figure_words())


IMAGE_HEADER = """\
# The words drawn inside the book's figures (titles, axis labels, legends, notes),
# as the last `make book` drew them: `make catalogs` refreshes this file.
# {0}, {1}, ... are numbers filled in when the figure is drawn: a translation keeps
# every one of them (in any order), and every $...$ formula as it is.
#"""


def cached_notebooks(cache_dir: Path | None = None):
    """(page name, the stored file, the executed notebook as a dict) of every notebook
    in a jupyter-cache (by default the one ``make book`` executes into)."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir or CACHE))
    for record in cache.list_cache_records():
        path = Path(record.uri)
        stored = Path(cache.path) / "executed" / record.hashkey / "base.ipynb"
        yield path.stem, stored, json.loads(stored.read_text(encoding="utf-8"))


def _edition_entries(output: dict):
    """(mimetype, its metadata entry) of each output picture drawn for the editions."""
    for mime in output.get("data", {}):
        plain = mime.removeprefix("application/papermill.record/")
        entry = output.get("metadata", {}).get(plain)
        if isinstance(entry, dict) and "tl_editions" in entry:
            yield mime, entry


def image_words(cache_dir: Path | None = None) -> dict[str, list[str]]:
    """{key: [pages]} of the words drawn inside the executed figures."""
    found: dict[str, list[str]] = {}
    for page, _, nb in sorted(cached_notebooks(cache_dir), key=lambda c: c[0]):
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                for _, entry in _edition_entries(output):
                    for key in entry["tl_words"]:
                        pages = found.setdefault(key, [])
                        if page not in pages:
                            pages.append(page)
    return found


def update_image_catalog(language: str = "zh_CN") -> Path:
    """locales/<language>/LC_MESSAGES/images.po: the words inside the figures, as the
    last ``make book`` drew them."""
    words = image_words()
    if not words:
        raise SystemExit("no executed notebooks in the cache: run `make book` first")
    path = catalog_path(language, IMAGE_CATALOG)
    return write_catalog(path, language, words, IMAGE_HEADER)


def use_edition_pictures(cache_dir: Path, language: str) -> int:
    """In an edition's copy of the jupyter-cache, put the edition's pictures in place
    of the English ones; returns how many were replaced."""
    n = 0
    for _, stored, nb in cached_notebooks(cache_dir):
        changed = False
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                for mime, entry in list(_edition_entries(output)):
                    output["data"][mime] = entry["tl_editions"][language]
                    del entry["tl_editions"], entry["tl_words"]
                    changed = True
                    n += 1
        if changed:
            stored.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return n
