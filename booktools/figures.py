"""The words of the figures, in each edition.

Every figure's words are translated one way: while the notebooks execute, the build
passes each edition's tables into the chapter's kernel
(``transformer_lib.viz.image_words.render_editions``), and every figure is drawn once
more per edition, into its output's metadata (``tl_editions``):

* the pictures (titles, axis labels, legends, notes drawn by matplotlib) with the words
  of ``images.po``;
* the kernel-free interactive figures' HTML blocks (``transformer_lib/viz/static.py``:
  title, control labels, options, the hover hint, the hover read-out's names, the
  masked-cell word, and the alt text written from them) with the words of
  ``figures.po``, in their pictures' language.

:func:`use_edition_pictures` puts them in place of the English ones in an edition's
copy of the jupyter-cache, so that the edition's Sphinx build reads them as it reads any
output. The outputs also list the English words they looked up (``tl_words``,
``tl_page_words``), from which :func:`update_image_catalog` and
:func:`update_figure_catalog` make the catalogs.
"""

from __future__ import annotations

import json
from pathlib import Path

from .catalogs import FIGURE_CATALOG, IMAGE_CATALOG, catalog_path, write_catalog
from .paths import CACHE

# the font each edition's figures draw their words in (Latin letters and digits of a
# translated text too; math in matplotlib's own fonts); `make fonts` installs them
FONTS = {"zh_CN": "Noto Sans CJK SC", "zh_TW": "Noto Sans CJK TC"}


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


def image_words(
    cache_dir: Path | None = None, kind: str = "tl_words"
) -> dict[str, list[str]]:
    """{key: [pages]} of the words drawn inside the executed figures (``kind``
    ``"tl_page_words"``: of the interactive figures' HTML blocks)."""
    found: dict[str, list[str]] = {}
    for page, _, nb in sorted(cached_notebooks(cache_dir), key=lambda c: c[0]):
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                for _, entry in _edition_entries(output):
                    for key in entry.get(kind, []):
                        pages = found.setdefault(key, [])
                        if page not in pages:
                            pages.append(page)
    return found


def figure_words(cache_dir: Path | None = None) -> dict[str, list[str]]:
    """{word: [pages]} of the interactive figures' HTML blocks, as executed."""
    return image_words(cache_dir, "tl_page_words")


def update_figure_catalog(language: str = "zh_CN") -> Path:
    """locales/<language>/LC_MESSAGES/figures.po: the words of the interactive figures'
    HTML blocks, as the last ``make book`` wrote them."""
    words = figure_words()
    if not words:
        raise SystemExit("no executed notebooks in the cache: run `make book` first")
    return write_catalog(catalog_path(language, FIGURE_CATALOG), language, words)


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
                    for key in ("tl_editions", "tl_words", "tl_page_words"):
                        entry.pop(key, None)
                    changed = True
                    n += 1
        if changed:
            stored.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return n
