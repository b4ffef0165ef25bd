"""A printed result table in another language.

A Markdown table (shown with ``IPython.display.Markdown``) or an HTML ``<table>`` (shown
with ``HTML``) with each header, row label and line around it that has words looked up
by its key (:mod:`.word_keys`); numbers, ``$...$`` math and inline `code` stay as they
are. :mod:`.image_words` writes each table again per edition while the book is built.
"""

from __future__ import annotations

import re

from .word_keys import MATH, key_of, translate

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
    return bool(_WORD.search(_NOT_WORDS.sub(" ", MATH.sub(" ", text))))


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
