"""The words drawn inside the figures, in other languages.

A figure's title, axis labels, legend and notes are matplotlib ``Text`` artists: they
end up as pixels, where no catalog of the page can reach them. So the figure is drawn
once more per language, with each of those texts swapped for its translation and set in
that language's font, right after the English picture is drawn (the data, the layout
code and the kernel's state are the same; only the words differ). Which languages,
their words and their fonts are the caller's: this module knows none of them.

The translations are a table ``{key: translation}`` per language. A text's key is the
text with every number outside ``$...$`` written as ``{0}``, ``{1}``, ...:
``"P after 40 training steps"`` has the key ``"P after {0} training steps"``, whose
translation ``"训练 {0} 步后的 P"`` gets the numbers back. Text with no letter outside
math and numbers (tick values, ``$\\sqrt{d_k}$``) has no words, and is never looked up.

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
table, by the same keys (:func:`table_in_language`); numbers, ``$...$`` math and
inline `code` stay as they are.

A figure shown inline becomes a PNG through IPython's ``image/png`` display formatter;
:class:`PNGInWords`, a subclass of it put in its place, draws a translated notebook's
words (``%matplotlib inline`` registers matplotlib's printer on it as on any
formatter). While the book is built, a printer registered for matplotlib's ``Figure``
on IPython's mime-bundle formatter adds the editions' pictures: both are IPython's own
extension points.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exercises.language import edition_mime, say_also_in

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# a language's font draws the Latin letters and digits of a translated text too (a CJK
# font has them), math is drawn by matplotlib's own fonts
FALLBACK = "DejaVu Sans"  # matplotlib's own default, for any glyph the CJK font lacks

_MATH = re.compile(r"\$[^$]*\$")
# a number that stands alone: not part of a name (W1, GPT-2, x_3), not an exponent
_NUMBER = re.compile(
    r"(?<![\w^-])(?<!\d\.)[-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"(?:e[-+\u2212]?\d+)?(?!\w)(?!\.\d)"
)
# a release (torch 2.13.0+cpu) is one slot too, so no key changes with an upgrade
_VERSION = re.compile(r"(?<![\w.])\d+(?:\.\d+){2}(?:\+\w+(?:\.\w+)*)?(?!\w)(?!\.\d)")
_SLOTTED = re.compile(f"{_VERSION.pattern}|{_NUMBER.pattern}")
_SLOT = re.compile(r"\{(\d+)\}")
_LETTER = re.compile(r"[^\W\d_]")
_SCIENTIFIC = re.compile(r"\d(?:\.\d+)?e[-+\u2212]?\d+")  # 1e-3: a number, not a word

# language -> (the table of the words in pictures, their font, the table of the words
# of the HTML blocks: see static.PageWords)
_EDITIONS: dict[str, tuple[dict[str, str], str, dict[str, str]]] = {}
_LIVE: dict[str, Any] = {}  # {"language": ..., "table": ..., "font": ...}


# kept as they are in a key: math, and inline code (a result table's `-1e9`)
_LITERAL = re.compile(r"\$[^$]*\$|`[^`]*`")


def _outside_math(text: str, change) -> str:
    """``text`` with ``change`` applied to the parts outside ``$...$`` and inline
    `code`."""
    out, pos = [], 0
    for m in _LITERAL.finditer(text):
        out.append(change(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(change(text[pos:]))
    return "".join(out)


def key_of(text: str) -> tuple[str, list[str]]:
    """(the catalog key of ``text``, the numbers it took out, in order)."""
    numbers: list[str] = []

    def slot(m: re.Match) -> str:
        numbers.append(m.group(0))
        return f"{{{len(numbers) - 1}}}"

    return _outside_math(text, lambda part: _SLOTTED.sub(slot, part)), numbers


def has_words(text: str) -> bool:
    """Whether ``text`` has a letter outside math: something to translate."""
    return bool(_LETTER.search(_SCIENTIFIC.sub("", _MATH.sub("", text))))


def translate(text: str, table: dict[str, str]) -> str | None:
    """``text`` in the table's language, its numbers put back; None if the table
    lacks its key."""
    key, numbers = key_of(text)
    found = table.get(key)
    if found is None:
        return None

    def fill(part: str) -> str:
        return _SLOT.sub(lambda m: numbers[int(m.group(1))], part)

    return _outside_math(found, fill)


@functools.cache
def font_family(name: str) -> tuple[str, str]:
    """The font family list for words in the font ``name``; a clear error if this
    machine lacks the font (matplotlib's font list may predate its installation: the
    system's CJK fonts are then added to it)."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    if not any(f.name == name for f in manager.ttflist):
        for path in font_manager.findSystemFonts():
            if "CJK" in Path(path).name:
                manager.addfont(path)
    if not any(f.name == name for f in manager.ttflist):
        raise RuntimeError(
            f"the figures' words are to be drawn in the font {name!r}, which this"
            " machine lacks: install it (Debian: apt-get install fonts-noto-cjk)"
        )
    return (name, FALLBACK)


def _tick_labels(fig: Figure) -> set:
    """The figure's tick labels: numbers, or the tokens of an example sentence, which
    are data and stay as they are."""
    out = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in [*axis.majorTicks, *axis.minorTicks]:
                out.update((tick.label1, tick.label2))
    return out


class Words:
    """Swaps a figure's texts into one language, and back.

    ``apply(fig)`` translates every visible text the table has (a text already
    translated is left alone), and records the key of every English text with words it
    saw, translated or not, in ``seen``. ``restore()`` puts back the English text and
    font of every artist it changed that still exists.
    """

    def __init__(self, language: str, table: dict[str, str], font: str) -> None:
        self.language, self.table = language, table
        self.family = list(font_family(font))
        self.seen: dict[str, None] = {}  # keys, in the order first drawn
        self._before: dict[Any, tuple[str, list[str]]] = {}
        self._done: dict[Any, str] = {}  # artist -> the translation it was given
        # axis -> (its English tick formatter, the one translating it, its font)
        self._ticks: dict[Any, tuple[Any, Any, list[str]]] = {}

    def _tick_words(self, label: str) -> str:
        """A tick label in the language when it is words with numbers (``layer 1,
        head 2``, ``keys 0–3``, ``digit 3``); as it is otherwise: a tick label with no
        number outside math (a token of an example sentence) is data."""
        key, numbers = key_of(label)
        if not numbers or not has_words(label):
            return label
        self.seen[key] = None
        return translate(label, self.table) or label

    def _apply_ticks(self, fig: Figure) -> None:
        """Each axis whose tick labels have words gets a formatter that writes the
        labels of its own formatter in the language (matplotlib writes the labels
        anew at every draw, from the axis' formatter)."""
        from matplotlib.ticker import Formatter

        words = self

        class InLanguage(Formatter):
            def __init__(self, english: Formatter) -> None:
                self.english = english

            def __call__(self, x, pos=None):
                return words._tick_words(str(self.english(x, pos)))

            def format_ticks(self, values):
                return [
                    words._tick_words(str(t)) for t in self.english.format_ticks(values)
                ]

        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                english = axis.get_major_formatter()
                if axis in self._ticks and self._ticks[axis][1] is english:
                    continue
                labels = [
                    str(t) for t in english.format_ticks(axis.get_majorticklocs())
                ]
                if [self._tick_words(t) for t in labels] == labels:
                    continue
                ticks = axis.get_major_ticks()
                family = ticks[0].label1.get_fontfamily() if ticks else []
                was = self._ticks.get(axis)
                ours = InLanguage(english)
                self._ticks[axis] = (english, ours, was[2] if was else list(family))
                default = axis.isDefault_majfmt
                axis.set_major_formatter(ours)
                axis.isDefault_majfmt = default
                axis.set_tick_params(labelfontfamily=self.family)

    def _restore_ticks(self) -> None:
        for axis, (english, ours, family) in self._ticks.items():
            if axis.get_major_formatter() is ours:  # not given new labels since
                default = axis.isDefault_majfmt
                axis.set_major_formatter(english)
                axis.isDefault_majfmt = default
            axis.set_tick_params(labelfontfamily=family or None)
        self._ticks.clear()

    def apply(self, fig: Figure) -> None:
        from matplotlib.text import Text

        ticks = _tick_labels(fig)
        for artist in fig.findobj(Text):
            text = artist.get_text()
            if (
                not text
                or artist in ticks
                or self._done.get(artist) == text
                or not has_words(text)
            ):
                continue
            self.seen[key_of(text)[0]] = None
            new = translate(text, self.table)
            if new is None:
                continue
            if artist not in self._before:
                self._before[artist] = (text, artist.get_fontfamily())
            artist.set_text(new)
            artist.set_fontfamily(self.family)
            self._done[artist] = new
        self._apply_ticks(fig)

    def restore(self) -> None:
        self._restore_ticks()
        for artist, (text, family) in self._before.items():
            if self._done.get(artist) == artist.get_text():  # not redrawn since
                artist.set_text(text)
            artist.set_fontfamily(family)
        self._before.clear()
        self._done.clear()

    @contextlib.contextmanager
    def drawn(self, fig: Figure) -> Iterator[Words]:
        """Within the block, ``fig``'s texts are in this language; English after."""
        self.apply(fig)
        try:
            yield self
        finally:
            self.restore()


def drawn_in(fig: Figure, language: str, table: dict[str, str], font: str):
    """Within the block, ``fig``'s texts are in ``language``; English again after."""
    return Words(language, table, font).drawn(fig)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def every_glyph_drawn(language: str) -> Iterator[None]:
    """Fail if a glyph of the block's drawing is missing from its fonts (matplotlib
    would draw a box in its place, and say so in a warning or a log line); other
    warnings pass through."""
    records = _Records()
    logger = logging.getLogger("matplotlib")
    logger.addHandler(records)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        logger.removeHandler(records)
    missing = [m for m in records.messages if "glyph" in m.lower()]
    for w in caught:
        if "glyph" in str(w.message).lower():
            missing.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        raise RuntimeError(
            f"the {language} words of a figure use glyphs its fonts lack: "
            + "; ".join(dict.fromkeys(missing))
        )


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


# ------------------------------------------------------------------ result tables
_MD_ROW = re.compile(r"^\s*\|.*\|\s*$")
_MD_RULE = re.compile(r"^\s*\|(?:\s*:?-+:?\s*\|)+\s*$")
_HTML_CELL = re.compile(r"(<t[hd]\b[^>]*>)([^<]*)(</t[hd]>)")


# what a table cell holds that is not words: inline code, a name with a dot or an
# underscore (tl.GPT, top_k, decoder_self), a measured number with its unit (2.8x,
# 16 KiB, 67.1 M), a one-letter symbol (P, T, τ)
_NOT_WORDS = re.compile(
    r"`[^`]*`|\b[^\W\d_]\w*(?:[._]\w+)+|"
    r"\d[\d.,]*\s*(?:x|KiB|MiB|GiB|M|G|ms)(?!\w)"
)
_WORD = re.compile(r"[^\W\d_]{2,}")


def table_has_words(text: str) -> bool:
    """Whether a table cell (or a line around a table) has words: two letters in a
    row outside math, numbers, inline `code`, dotted or underscored names and
    measured numbers with their units (``2.8x``, ``16 KiB``)."""
    return bool(_WORD.search(_NOT_WORDS.sub(" ", _MATH.sub(" ", text))))


def _md_cells(line: str) -> list[str]:
    """A Markdown table row split at its ``|``s (not at one inside inline `code` or
    ``$math$``), the text before the first and after the last included."""
    cells, current, code, math = [], [], False, False
    for i, ch in enumerate(line):
        if ch == "`" and not math:
            code = not code
        elif ch == "$" and not code:
            math = not math
        elif ch == "|" and not code and not math and (i == 0 or line[i - 1] != "\\"):
            cells.append("".join(current))
            current = []
            continue
        current.append(ch)
    cells.append("".join(current))
    return cells


def is_table(text: str, mime: str) -> bool:
    """Whether a Markdown or HTML output holds a result table."""
    if mime == "text/html":
        return "<table" in text
    lines = text.splitlines()
    return "```" not in text and any(_MD_RULE.match(line) for line in lines)


def table_cells(text: str, mime: str) -> list[tuple[bool, str]]:
    """(whether it is a header, its text) of every cell of a result table, and of
    every line around it, in order: what :func:`table_in_language` looks up."""
    if mime == "text/html":
        import html

        return [
            (m.group(1).startswith("<th"), html.unescape(m.group(2)).strip())
            for m in _HTML_CELL.finditer(text)
        ]
    out, header = [], True
    for line in text.split("\n"):
        if _MD_RULE.match(line):
            header = False
        elif _MD_ROW.match(line):
            out += [(header, c.strip()) for c in _md_cells(line)[1:-1]]
        elif line.strip():
            out.append((False, line.strip()))
    return out


def table_in_language(
    text: str, mime: str, table: dict[str, str], seen: dict[str, None]
) -> str:
    """A result table (``mime``: ``text/markdown`` or ``text/html``) with every cell
    and line with words in the table's language, as :func:`translate` gives it (its
    numbers put back); a cell the table lacks stays as it is. The key of every cell
    with words goes into ``seen``."""

    def words(cell: str) -> str:
        stripped = cell.strip()
        if not stripped or not table_has_words(stripped):
            return cell
        seen[key_of(stripped)[0]] = None
        new = translate(stripped, table)
        if new is None:
            return cell
        start = cell.index(stripped)
        return cell[:start] + new + cell[start + len(stripped) :]

    if mime == "text/html":
        import html

        def cell(m: re.Match) -> str:
            inner = words(html.unescape(m.group(2)))
            return m.group(1) + html.escape(inner, quote=False) + m.group(3)

        return _HTML_CELL.sub(cell, text)
    out = []
    for line in text.split("\n"):
        if _MD_RULE.match(line):
            out.append(line)
        elif _MD_ROW.match(line):
            out.append("|".join(words(c) for c in _md_cells(line)))
        else:
            out.append(words(line))
    return "\n".join(out)


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
