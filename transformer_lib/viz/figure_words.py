"""A figure's words drawn in another language, then put back.

Each matplotlib ``Text`` artist with words (title, axis labels, legend, notes, and tick
labels that are words with numbers) is swapped for its translation and set in that
language's font while the figure is drawn, and put back after (:class:`Words`);
:func:`every_glyph_drawn` fails a drawing whose glyphs its fonts lack. The texts are
looked up by their keys (:mod:`.word_keys`); :mod:`.image_words` decides when a figure
is drawn in which language.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .word_keys import has_words, key_of, translate

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# a language's font draws the Latin letters and digits of a translated text too (a CJK
# font has them), math is drawn by matplotlib's own fonts
FALLBACK = "DejaVu Sans"  # matplotlib's own default, for any glyph the CJK font lacks


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
