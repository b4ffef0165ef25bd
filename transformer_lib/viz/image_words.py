"""The words drawn inside the figures, in other languages.

A figure's title, axis labels, legend and notes are matplotlib ``Text`` artists: they
end up as pixels, where no catalog of the page can reach them. So the figure is drawn
once more per language, with each of those texts swapped for its translation and set in
that language's font, right after the English picture is drawn (the data, the layout
code and the kernel's state are the same; only the words differ). Which languages,
their words and their fonts are the caller's: this module knows none of them.

The translations are a table ``{key: translation}`` per language, looked up by each
text's key (:mod:`.word_keys`: its numbers written as ``{0}``, ``{1}``, ...). A figure's
texts are swapped by :class:`~.figure_words.Words`, a result table's cells by
:func:`~.table_words.table_in_language`; this module decides when, and in which
languages, and carries the results in the outputs.

Two uses:

* ``render_editions({language: table}, {language: font}, {language: page words})``,
  which the book's build (``booktools``) calls in each chapter's kernel: every figure
  shown inline, and every :class:`~.interactive.Explorer`, then also carries its
  pictures in the other languages, in the same output, each under its own MIME type
  (:func:`edition_mime`: ``image/png`` drawn in zh_CN is ``image/vnd.tl.zh_CN+png``),
  with the keys of the English texts it drew in that type's metadata (``tl_words``,
  from which the build makes its catalog). An Explorer's whole HTML block is written
  again per language (``text/vnd.tl.zh_CN+html``), its words (title, labels, options,
  hover names) from the page-words table (``tl_page_words``: the English words it
  looked up). Each edition's build shows its own type (``booktools.figures``).
* ``use_image_words(language, table, font)``, which a translated notebook calls in its
  first cells: from then on, figures are drawn in that language only.

A printed result table (a Markdown table shown with ``IPython.display.Markdown``, or an
HTML ``<table>`` shown with ``HTML``) is words too: while the book is built, it is
written again per language (``text/vnd.tl.zh_CN+markdown``, ``text/vnd.tl.zh_CN+html``)
with each header, row label and line around it that has words looked up in the same
table, by the same keys (:mod:`.table_words`).

A figure shown inline becomes a PNG through IPython's ``image/png`` display formatter;
:class:`PNGInWords`, a subclass of it put in its place, draws a translated notebook's
words (``%matplotlib inline`` registers matplotlib's printer on it as on any
formatter). While the book is built, a printer registered for matplotlib's ``Figure``
on IPython's mime-bundle formatter adds the editions' pictures: both are IPython's own
extension points.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exercises.language import edition_mime, say_also_in
from .figure_words import FALLBACK, Words, drawn_in, every_glyph_drawn, font_family
from .table_words import is_table, table_cells, table_has_words, table_in_language
from .word_keys import has_words, key_of, translate

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    # the two uses, and what the build's outputs are made of
    "render_editions",
    "use_image_words",
    "live_words",
    "editions",
    "edition_words",
    "edition_bundle",
    "edition_pictures",
    # imported from where they are written, as callers know them here
    "edition_mime",
    "FALLBACK",
    "Words",
    "drawn_in",
    "every_glyph_drawn",
    "font_family",
    "is_table",
    "table_cells",
    "table_has_words",
    "table_in_language",
    "has_words",
    "key_of",
    "translate",
]

# language -> (the table of the words in pictures, their font, the table of the words
# of the HTML blocks: see static.PageWords)
_EDITIONS: dict[str, tuple[dict[str, str], str, dict[str, str]]] = {}
_LIVE: dict[str, Any] = {}  # {"language": ..., "table": ..., "font": ...}


# ------------------------------------------------------------------ the two uses
def render_editions(
    tables: dict[str, dict[str, str]],
    fonts: dict[str, str] | None = None,
    page_words: dict[str, dict[str, str]] | None = None,
) -> None:
    """Also draw every figure in each language of ``tables`` ({language: {key:
    translation}}), in its font (``fonts``: {language: font name}), into its output's
    metadata (the book's build calls this before a chapter's first cell). An
    interactive figure's HTML is then also written in each language, with the words of
    ``page_words`` ({language: {word: translation}}, see :class:`.static.PageWords`).
    Every exercise checker then also says its message in each language, from the
    library's own catalogs (:mod:`transformer_lib.exercises.language`).
    ``render_editions({})`` stops."""
    fonts, page_words = fonts or {}, page_words or {}
    for language in tables:
        font_family(fonts[language])  # fail now, not in the middle of a chapter
    _EDITIONS.clear()
    _EDITIONS.update(
        {
            lang: (table, fonts[lang], page_words.get(lang, {}))
            for lang, table in tables.items()
        }
    )
    say_also_in(list(tables))
    _use_png_formatter()


def use_image_words(
    language: str | None,
    table: dict[str, str] | None = None,
    font: str | None = None,
) -> None:
    """Draw the figures' words in ``language`` from now on, from ``table`` and in the
    font ``font`` (``use_image_words(None)``: English again). A translated notebook's
    first cells call this."""
    _LIVE.clear()
    if language is not None:
        if font is None:
            raise ValueError(f"use_image_words({language!r}, ...) needs the font")
        font_family(font)
        _LIVE.update(language=language, table=table or {}, font=font)
        _use_png_formatter()


def live_words() -> Words | None:
    """A fresh ``Words`` for the notebook's language, or None in English."""
    return Words(_LIVE["language"], _LIVE["table"], _LIVE["font"]) if _LIVE else None


def editions() -> dict[str, dict[str, str]]:
    """The languages the book is being built in, besides English: {language: table}."""
    return {language: table for language, (table, _, _) in _EDITIONS.items()}


def edition_words(language: str) -> tuple[Words, dict[str, str]]:
    """(the words of the pictures, the table of the words of the HTML) of one of the
    languages the book is being built in."""
    table, font, page_words = _EDITIONS[language]
    return Words(language, table, font), page_words


def edition_bundle(
    mime: str,
    renderings: dict[str, Any],
    words: list[str],
    page_words: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, dict]]:
    """(data, metadata) to add to an output's bundle: each edition's rendering
    (``renderings``: {language: the ``mime`` data}) under its own type
    (:func:`edition_mime`), and in that type's metadata the English keys its words
    were looked up by (``tl_words`` for the words in pictures, ``tl_page_words`` for
    an HTML block's)."""
    data, metadata = {}, {}
    for language, rendering in renderings.items():
        key = edition_mime(mime, language)
        data[key] = rendering
        metadata[key] = {"tl_words": list(words)}
        if page_words is not None:
            metadata[key]["tl_page_words"] = list(page_words)
    return data, metadata


def edition_pictures(
    draw: Callable[[Words], Any], mime: str = "image/png"
) -> tuple[dict[str, Any], dict[str, dict]] | None:
    """A figure's outputs in the editions' languages while the book is built, as
    :func:`edition_bundle` gives them. ``draw(words)`` draws the figure with ``words``
    applied and returns the picture (it may return None when ``words.seen`` shows that
    the figure has no words). None if the figure has no words."""
    pictures, seen = {}, {}
    for language in _EDITIONS:
        words = edition_words(language)[0]
        with every_glyph_drawn(language):
            picture = draw(words)
        if not words.seen:  # the same figure has the same words in every language
            return None
        seen.update(words.seen)
        pictures[language] = picture
    return edition_bundle(mime, pictures, list(seen)) if seen else None


@functools.cache
def _png_formatter_class():
    from IPython.core.formatters import PNGFormatter

    class PNGInWords(PNGFormatter):
        """IPython's ``image/png`` formatter, which draws a figure in the language
        of :func:`use_image_words`."""

        def __call__(self, obj):
            from matplotlib.figure import Figure

            words = live_words()
            if words is None or not isinstance(obj, Figure):
                return super().__call__(obj)
            with words.drawn(obj):  # a translated notebook: that language only
                return super().__call__(obj)

    return PNGInWords


def _figure_in_editions(fig: Figure):
    """The mime-bundle printer of a figure while the book is built: its English PNG
    (the kernel's ``image/png`` formatter's, drawn first as always) and, when it has
    words, its picture in each edition's language under the edition's type."""
    if not _EDITIONS or live_words() is not None:
        return None
    from IPython import get_ipython

    png = get_ipython().display_formatter.formatters["image/png"]
    english = png(fig)
    if english is None:
        return None
    data, metadata = {}, {}
    if isinstance(english, tuple):
        english, metadata["image/png"] = english
    data["image/png"] = english

    def draw(words: Words) -> str | None:
        with words.drawn(fig):
            if not words.seen:  # no words: no second picture
                return None
            picture = png(fig)
        picture = picture[0] if isinstance(picture, tuple) else picture
        return (
            picture if isinstance(picture, str) else base64.b64encode(picture).decode()
        )

    editions = edition_pictures(draw)
    if editions is not None:
        data.update(editions[0])
        metadata.update(editions[1])
    return data, metadata


def _table_in_editions(obj):
    """The mime-bundle printer of a Markdown or HTML display object while the book is
    built: when it holds a result table with words, its English form and, under each
    edition's type, the table in that edition's words (None otherwise: IPython's own
    formatters print it)."""
    if not _EDITIONS or live_words() is not None:
        return None
    from IPython.display import HTML

    mime = "text/html" if isinstance(obj, HTML) else "text/markdown"
    shown = obj._repr_html_() if mime == "text/html" else obj._repr_markdown_()
    if isinstance(shown, tuple):
        shown = shown[0]
    if not isinstance(shown, str) or not is_table(shown, mime):
        return None
    renderings, seen = {}, {}
    for language in _EDITIONS:
        renderings[language] = table_in_language(
            shown, mime, edition_words(language)[0].table, seen
        )
    if not seen:
        return None
    data, metadata = edition_bundle(mime, renderings, list(seen))
    data[mime] = shown
    return data, metadata


def _use_png_formatter() -> None:
    """Put :class:`PNGInWords` in place of the kernel's ``image/png`` formatter, with
    the printers registered on it so far, and :func:`_figure_in_editions` on the
    mime-bundle formatter (once per kernel; none outside IPython). Every way a figure
    is shown inline (``plt.show``, a figure left as a cell's value, ``display``,
    ``glue``) goes through them."""
    try:
        from IPython import get_ipython
    except ImportError:  # not in IPython: nothing is shown inline
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    from IPython.display import HTML, Markdown
    from matplotlib.figure import Figure

    bundles = shell.display_formatter.mimebundle_formatter
    bundles.for_type(Figure, _figure_in_editions)
    bundles.for_type(Markdown, _table_in_editions)
    bundles.for_type(HTML, _table_in_editions)
    formatters = shell.display_formatter.formatters
    current = formatters["image/png"]
    cls = _png_formatter_class()
    if isinstance(current, cls):
        return
    ours = cls(parent=shell.display_formatter)
    ours.enabled = current.enabled
    ours.singleton_printers.update(current.singleton_printers)
    ours.type_printers.update(current.type_printers)
    ours.deferred_printers.update(current.deferred_printers)
    formatters["image/png"] = ours
