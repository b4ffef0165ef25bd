"""The labels of the interactive figures as HTML (with MathJax), as plain text (alt
text) and as JSON in a page. Standard library only: the Chinese editions' Sphinx build
(``booktools.figures``) uses it to write the translated words back into a figure's
HTML."""

from __future__ import annotations

import html
import json
import re
from typing import Any

_INLINE_MATH = re.compile(r"\$([^$\n]+?)\$")


def label_html(text: str) -> tuple[str, bool]:
    """Escape ``text`` for HTML; ``$...$`` becomes ``\\(...\\)`` for MathJax.

    Returns (html, has_math).
    """
    parts, has_math, pos = [], False, 0
    for m in _INLINE_MATH.finditer(text):
        parts.append(html.escape(text[pos : m.start()]))
        parts.append("\\(" + html.escape(m.group(1)) + "\\)")
        has_math, pos = True, m.end()
    parts.append(html.escape(text[pos:]))
    return "".join(parts), has_math


def label_text(markup: str) -> str:
    """The inverse of :func:`label_html`: the label as it was written, ``$...$`` and all
    (the Chinese editions translate the HTML, then write alt text from it)."""
    return html.unescape(re.sub(r"\\\((.*?)\\\)", r"$\1$", markup, flags=re.S))


_TEX_WORDS = {
    "sqrt": "\u221a",
    "cdot": "\u00b7",
    "times": "\u00d7",
    "top": "\u1d40",
    "to": "\u2192",
    "infty": "\u221e",
    "alpha": "\u03b1",
    "beta": "\u03b2",
    "gamma": "\u03b3",
    "epsilon": "\u03b5",
    "theta": "\u03b8",
    "lambda": "\u03bb",
    "mu": "\u03bc",
    "sigma": "\u03c3",
    "tau": "\u03c4",
    "omega": "\u03c9",
}


def plain(text: str) -> str:
    """``text`` for alt text: ``$\\sqrt{d_k}$`` becomes ``\u221ad_k`` (no TeX read)."""

    def untex(m: re.Match) -> str:
        body = re.sub(
            r"\\([A-Za-z]+)\s*",
            lambda w: _TEX_WORDS.get(w.group(1), w.group(1)),
            m.group(1),
        )
        return re.sub(r"[{}]", "", body)

    return _INLINE_MATH.sub(untex, text)


def script_json(data: Any) -> str:
    """Compact JSON that can sit in a <script> element (it never ends the script)."""
    return json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
