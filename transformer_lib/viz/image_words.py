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
  pictures in the other languages, in its output's metadata (``tl_editions``), with
  the keys of the English texts it drew (``tl_words``, from which the build makes its
  catalog). An Explorer's whole HTML block is written again per language, its words
  (title, labels, options, hover names) from the page-words table
  (``tl_page_words``: the English words it looked up).
* ``use_image_words(language, table, font)``, which a translated notebook calls in its
  first cells: from then on, figures are drawn in that language only.

A figure shown inline becomes a PNG through IPython's ``image/png`` display formatter;
:class:`PNGInWords`, a subclass of it put in its place, draws the other languages' words
too (``%matplotlib inline`` registers matplotlib's printer on it as on any formatter).
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
_SLOT = re.compile(r"\{(\d+)\}")
_LETTER = re.compile(r"[^\W\d_]")
_SCIENTIFIC = re.compile(r"\d(?:\.\d+)?e[-+\u2212]?\d+")  # 1e-3: a number, not a word

# language -> (the table of the words in pictures, their font, the table of the words
# of the HTML blocks: see static.PageWords)
_EDITIONS: dict[str, tuple[dict[str, str], str, dict[str, str]]] = {}
_LIVE: dict[str, Any] = {}  # {"language": ..., "table": ..., "font": ...}


def _outside_math(text: str, change) -> str:
    """``text`` with ``change`` applied to the parts outside ``$...$``."""
    out, pos = [], 0
    for m in _MATH.finditer(text):
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

    return _outside_math(text, lambda part: _NUMBER.sub(slot, part)), numbers


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

    def restore(self) -> None:
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


def edition_pictures(draw: Callable[[Words], Any]) -> dict[str, Any] | None:
    """A figure's output metadata while the book is built: its picture in each
    edition's language. ``draw(words)`` draws the figure with ``words`` applied and
    returns the picture (it may return None when ``words.seen`` shows that the figure
    has no words). ``{"tl_editions": {language: picture}, "tl_words": [keys]}``, or
    None if the figure has no words."""
    pictures, seen = {}, {}
    for language in _EDITIONS:
        words = edition_words(language)[0]
        with every_glyph_drawn(language):
            picture = draw(words)
        if not words.seen:  # the same figure has the same words in every language
            return None
        seen.update(words.seen)
        pictures[language] = picture
    return {"tl_editions": pictures, "tl_words": list(seen)} if seen else None


@functools.cache
def _png_formatter_class():
    from IPython.core.formatters import PNGFormatter

    class PNGInWords(PNGFormatter):
        """IPython's ``image/png`` formatter, which also draws a figure in the
        languages of :func:`use_image_words` (that one only) or of
        :func:`render_editions` (into the output's metadata)."""

        def __call__(self, obj):
            from matplotlib.figure import Figure

            if not isinstance(obj, Figure):
                return super().__call__(obj)
            words = live_words()
            if words is not None:  # a translated notebook: that language only
                with words.drawn(obj):
                    return super().__call__(obj)
            data = super().__call__(obj)
            if not _EDITIONS or data is None:
                return data

            def draw(words: Words) -> str | None:
                with words.drawn(obj):
                    if not words.seen:  # no words: no second picture
                        return None
                    png = super(PNGInWords, self).__call__(obj)
                return png if isinstance(png, str) else base64.b64encode(png).decode()

            metadata = edition_pictures(draw)
            return data if metadata is None else (data, metadata)

    return PNGInWords


def _use_png_formatter() -> None:
    """Put :class:`PNGInWords` in place of the kernel's ``image/png`` formatter, with
    the printers registered on it so far (once per kernel; none outside IPython).
    Every way a figure is shown inline (``plt.show``, a figure left as a cell's value,
    ``display``, ``glue``) goes through it."""
    try:
        from IPython import get_ipython
    except ImportError:  # not in IPython: nothing is shown inline
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return
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
