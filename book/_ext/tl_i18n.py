"""Sphinx extension for the book's three editions (English, zh_CN, zh_TW).

Registered in _config.yml (``sphinx.local_extensions``). It

* keeps code-cell outputs out of the translation catalogs: numbers, printed text
  and figures are computed once and shared by every edition (the English notebooks
  are the one source), so only the prose is translated;
* puts a language switcher on every page, linking to the same page in the other
  editions (English at the site root, the others under ``zh_CN/`` and ``zh_TW/``);
* gives the Chinese search index a user dictionary of the glossary's terms, so that
  jieba keeps words such as 残差 and 位置編碼 whole.

The editions themselves are built by ``tools/editions.py`` (called by ``make book``).
"""

from __future__ import annotations

import posixpath
import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

# (language code, label in its own language); the first is the source edition
EDITIONS = [("en", "English"), ("zh_CN", "简体中文"), ("zh_TW", "繁體中文")]


def edition_root(language: str | None) -> str:
    """The directory of an edition, relative to the English site's root."""
    return "" if language in (None, "", "en") else f"{language}/"


LETTER = re.compile(r"[^\W\d_]")
NEUTRAL_INLINE = (nodes.math, nodes.literal, nodes.raw)


def is_language_neutral(node: nodes.Element) -> bool:
    """True for a paragraph with no word outside math, code and cross-references:
    a formula, a file name, a label. It reads the same in every edition."""
    text = []
    for child in node.findall(nodes.Text):
        ancestor, neutral = child.parent, False
        while ancestor is not None and ancestor is not node:
            if isinstance(ancestor, NEUTRAL_INLINE) or ancestor.get("refdomain"):
                neutral = True
                break
            ancestor = ancestor.parent
        if not neutral:
            text.append(str(child))
    return not LETTER.search("".join(text))


class KeepNeutralTextUntranslated(SphinxTransform):
    """Mark what needs no translation as not translatable: everything inside a code
    cell's output (computed once, shared by every edition), display math, and
    paragraphs made only of math, code and cross-references.

    Runs before Sphinx's Locale transform (priority 20) and its message extraction.
    """

    default_priority = 15

    def apply(self, **kwargs) -> None:
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") == "cell_code_output":
                for node in cell.findall(nodes.Element):
                    node["translatable"] = False
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for node in self.document.findall(nodes.paragraph):
            if is_language_neutral(node):
                node["translatable"] = False


def language_links(app: Sphinx, pagename: str) -> list[dict]:
    """Links from ``pagename`` to the same page in every edition."""
    here = app.config.language or "en"
    to_site_root = "../" * pagename.count("/") + ("../" if edition_root(here) else "")
    links = []
    for code, label in EDITIONS:
        href = posixpath.join(
            to_site_root + edition_root(code), pagename + app.builder.link_suffix
        )
        links.append(
            {
                "code": code,
                "lang": code.replace("_", "-") if code != "en" else "en",
                "label": label,
                "href": href,
                "current": code == here,
            }
        )
    return links


def add_switcher(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    if app.builder.format != "html":
        return
    context["tl_editions"] = language_links(app, pagename)


def setup(app: Sphinx) -> dict:
    app.add_transform(KeepNeutralTextUntranslated)
    app.connect("html-page-context", add_switcher)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
