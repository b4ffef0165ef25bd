"""The words of the figures, in each edition.

Every figure's words are translated one way: while the notebooks execute, the build
passes each edition's tables into the chapter's kernel
(``transformer_lib.viz.image_words.render_editions``), and every figure is drawn once
more per edition, into the same output under the edition's own MIME type
(``image_words.edition_mime``: ``image/vnd.tl.zh_CN+png``, ``text/vnd.tl.zh_CN+html``):

* the pictures (titles, axis labels, legends, notes drawn by matplotlib) with the words
  of ``images.po``;
* the printed result tables (a Markdown or HTML table: headers, row labels, the
  lines around them) with the words of ``images.po``
  (``image_words.table_in_language``);
* the kernel-free interactive figures' HTML blocks (``transformer_lib/viz/static.py``:
  title, control labels, options, the hover hint, the hover read-out's names, the
  masked-cell word, and the alt text written from them) with the words of
  ``figures.po``, in their pictures' language;
* the exercise checkers' messages (``text/vnd.tl.zh_CN+plain``), which a checker says
  once more in each edition's language from the library's own catalogs
  (``transformer_lib.exercises.language``).

An edition's build shows its own types: its generated config ranks them first with
myst-nb's ``nb_mime_priority_overrides`` (:func:`mime_priority_overrides`), and
:class:`EditionRenderer`, registered in ``pyproject.toml`` under myst-nb's entry point
``myst_nb.mime_renderers``, renders each as the PNG or HTML it is. The English build
ranks none of them and shows the English types. Nothing is written into the
jupyter-cache, which every edition reads as it is. The outputs' metadata also lists the
English words each rendering looked up (``tl_words``, ``tl_page_words``), from which
:func:`update_image_catalog` and :func:`update_figure_catalog` make the catalogs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import ClassVar

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
    """(page name, notebook path, the executed notebook as a dict) of every notebook
    in a jupyter-cache (by default the one ``make book`` executes into), through
    jupyter-cache's public API."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir or CACHE))
    for record in cache.list_cache_records():
        nb = cache.get_cache_bundle(record.pk).nb
        yield Path(record.uri).stem, Path(record.uri), json.loads(json.dumps(nb))


# an edition's type: kind/vnd.tl.<language>+subtype (image_words.edition_mime)
EDITION_MIME = re.compile(
    r"^(?P<kind>[\w-]+)/vnd\.tl\.(?P<lang>\w+)\+(?P<sub>[\w.-]+)$"
)
GLUE_PREFIX = "application/papermill.record/"


def _edition_entries(output: dict):
    """(the English type, {"tl_editions": {language: data}, "tl_words": [...],
    "tl_page_words": [...]}) of each rendering of an output drawn for the editions
    (under glue's prefix for a glued output)."""
    found: dict[str, dict] = {}
    for mime, data in output.get("data", {}).items():
        plain = mime.removeprefix(GLUE_PREFIX)
        match = EDITION_MIME.match(plain)
        if match is None:
            continue
        english = mime[: len(mime) - len(plain)] + f"{match['kind']}/{match['sub']}"
        entry = found.setdefault(english, {"tl_editions": {}})
        entry["tl_editions"][match["lang"]] = data
        for key, words in output.get("metadata", {}).get(plain, {}).items():
            if key.startswith("tl_"):
                entry.setdefault(key, list(words))
    yield from found.items()


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


def mime_priority_overrides(language: str) -> list[list]:
    """myst-nb's ``nb_mime_priority_overrides`` entries that make the HTML build of
    an edition show its own renderings first (myst-nb shows an output's type of the
    lowest number; its own start at 10)."""
    from transformer_lib.viz.image_words import edition_mime

    return [
        ["html", edition_mime("text/html", language), 1],
        ["html", edition_mime("image/png", language), 2],
        ["html", edition_mime("text/markdown", language), 3],  # a result table
        # the exercise checkers' messages (transformer_lib.exercises.language)
        ["html", edition_mime("text/plain", language), 4],
    ]


class EditionRenderer:
    """myst-nb's mime render plugin (``myst_nb.mime_renderers``) for the editions'
    types: ``image/vnd.tl.zh_CN+png`` is rendered as the ``image/png`` it is,
    ``text/vnd.tl.zh_CN+html`` as ``text/html``, a checker's
    ``text/vnd.tl.zh_CN+plain`` as ``text/plain``, by myst-nb's own renderers. It ranks
    none of them (``mime_priority_overrides`` is empty): only an edition's config
    does."""

    mime_priority_overrides: ClassVar[list] = []

    @staticmethod
    def handle_mime(renderer, data, inline: bool):
        match = EDITION_MIME.match(data.mime_type)
        if match is None:
            return None
        plain = dataclasses.replace(data, mime_type=f"{match['kind']}/{match['sub']}")
        if inline:
            return renderer.render_mime_type_inline(plain)
        return renderer.render_mime_type(plain)
