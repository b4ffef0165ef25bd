"""Sphinx extension for the book's three editions (English, zh_CN, zh_TW).

Registered in _config.yml (``sphinx.local_extensions``) through its adapter
``book/_ext/tl_i18n.py``. It

* keeps out of the translation catalogs what every edition shares: code-cell outputs
  (computed once), display math, and paragraphs made only of math, code and bare
  cross-references;
* makes the catalogs see, and the editions translate, what Sphinx would miss: the
  exercises' names, the part captions of the table of contents, glued numbers inside
  translated paragraphs, and the solutions' titles;
* puts a language switcher on every page (``book/_templates/tl-editions.html``),
  linking to the same page in the other editions (English at the site root, the
  others under ``zh_CN/`` and ``zh_TW/``);
* indexes Chinese pages for search in linear time;
* gives the theme's words that its own catalogs leave in English (button tooltips,
  landmark labels, the footer, Sphinx's "Link to this heading") to the catalogs Sphinx
  and the theme look them up in: the edition's ``sphinx.po`` and ``booktheme.po``
  with ``_()`` put where a template wrote English (``book/_templates``) and in
  myst-nb's hidden-cell toggle;
* writes show_source's line above the library code in the edition's words
  (:class:`TranslateSourceLines`).

What reaches into another package's internals to do this (the Chinese search, the
glue lookup, the hidden-cell label, sphinx-exercise's titles and catalog, the table of
contents' captions, the theme's catalog) lives in :mod:`booktools.upstream`; this
module registers it. The editions themselves, and the Chinese search's dictionary,
come from :mod:`booktools.editions` (called by ``make book``).
"""

from __future__ import annotations

import posixpath
import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

from .catalogs import EDITIONS
from .upstream import (
    ChineseExerciseTitles,
    ExtractExerciseNames,
    exercise_titles_as_translated,
    exercise_words_for_derived_editions,
    give_subtitles_a_source,
    hidden_cell_html_visitors,
    theme_words,
    translate_toc_captions,
    use_linear_chinese_search,
    wrap_glue_lookup,
)


def edition_root(language: str | None) -> str:
    """The directory of an edition, relative to the English site's root."""
    return "" if language in (None, "", "en") else f"{language}/"


def is_translation(app: Sphinx) -> bool:
    """True when this build is one of the translated editions."""
    return bool(edition_root(app.config.language))


# Latin letters: a cell that is already Chinese (the glossary's columns) is not prose
# to translate
LETTER = re.compile(r"[A-Za-z]")
SCRIPT_SPAN = re.compile(r'<span lang="zh-Han[st]">[^<]*</span>')
NEUTRAL_INLINE = (nodes.math, nodes.literal, nodes.raw)


def is_language_neutral(node: nodes.Element) -> bool:
    """True for a paragraph with no English word outside math, code and
    cross-references: a formula, a file name, a label, a term already in Chinese. It
    reads the same in every edition."""
    if SCRIPT_SPAN.fullmatch(node.rawsource.strip()):  # a cell already in Chinese
        return True
    text = []
    for child in node.findall(nodes.Text):
        ancestor, neutral = child.parent, False
        while ancestor is not None and ancestor is not node:
            # a bare {ref}`label` shows the target's (translated) title; a link
            # with its own text, [the encoder layer](09_encoder.ipynb), is prose
            bare_ref = ancestor.get("refdomain") and not ancestor.get("refexplicit")
            if isinstance(ancestor, NEUTRAL_INLINE) or bare_ref:
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
        give_subtitles_a_source(self.document)
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for node in self.document.findall(nodes.paragraph):
            if is_language_neutral(node):
                node["translatable"] = False


# show_source's line above the code it shows (transformer_lib/viz/source.py), as the
# notebook's output has it: "Source of `name` in `module`:"
SOURCE_LINE = "Source of %(name)s in %(module)s:"


def _is_source_line(node: nodes.paragraph) -> bool:
    words = [c.astext() if isinstance(c, nodes.Text) else None for c in node.children]
    return (
        len(node.children) == 5
        and words[0] == "Source of "
        and words[2] == " in "
        and words[4] == ":"
        and all(isinstance(node.children[i], nodes.literal) for i in (1, 3))
    )


class TranslateSourceLines(SphinxTransform):
    """In a Chinese edition, show_source's line above the library code a chapter shows
    ("Source of `softmax` in `transformer_lib.attention`:") in the edition's words.

    The line is a code cell's output, computed once in English and kept out of the
    page catalogs with every output (:class:`KeepNeutralTextUntranslated`); its words
    come from Sphinx's own catalog of the edition (``locales/zh_CN/LC_MESSAGES/
    sphinx.po``, and zh_TW's), the names stay code. The library knows
    nothing of editions: it prints English, as it does in a reader's kernel.
    """

    default_priority = 25  # after the Locale transform

    def apply(self, **kwargs) -> None:
        if not is_translation(self.app):
            return
        from sphinx.locale import _

        words = _(SOURCE_LINE)
        if words == SOURCE_LINE:
            return
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code_output":
                continue
            for para in list(cell.findall(nodes.paragraph)):
                if _is_source_line(para):
                    name, module = para.children[1], para.children[3]
                    del para[:]
                    para.extend(_source_line(words, name, module))


def _source_line(words: str, name: nodes.literal, module: nodes.literal) -> list:
    """The translated line: its words as text, the two names as the code they are."""
    out = []
    for piece in re.split(r"(%\((?:name|module)\)s)", words):
        if piece == "%(name)s":
            out.append(name)
        elif piece == "%(module)s":
            out.append(module)
        elif piece:
            out.append(nodes.Text(piece))
    return out


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
    # the edition as the config names it (zh_TW); templates get `language` as zh-TW
    context["tl_edition"] = app.config.language or "en"


def translate_author(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    """The authors' name (``_config.yml``'s ``author``, which sphinx-book-theme puts
    in the page's context) from the edition's catalog, for the footer's sentence of
    ``book/_templates/author.html``."""
    if app.builder.format == "html" and is_translation(app) and context.get("author"):
        from sphinx.locale import _

        context["author"] = _(context["author"])


def titles_in_the_editions_script(app: Sphinx, doctree: nodes.document) -> None:
    """The glossary's title, "Glossary · 术语表 · 術語表", reads in English and the
    edition's own script in the sidebar and the previous/next links: the span of the
    other script (raw nodes, its text) and a separator leave the stored title."""
    other = {"zh_CN": "zh-Hant", "zh_TW": "zh-Hans"}.get(app.config.language or "")
    toc = app.env.tocs.get(app.env.docname)
    titles = [app.env.titles.get(app.env.docname), *(toc.findall(nodes.reference))]
    for title in (t for t in titles if other and f'lang="{other}"' in str(t)):
        keep, skip = [], False
        for child in title.children:
            raw, text = isinstance(child, nodes.raw), child.astext().strip()
            if skip or (raw and f'lang="{other}"' in text):
                skip = not (raw and "</span>" in text)
            elif text != "·" or (keep and keep[-1].astext().strip()[-1:] != "·"):
                keep.append(child)
        title.children = keep[:-1] if keep[-1].astext().strip() == "·" else keep


# The first source article's author and title are Simplified Chinese in every edition;
# where the bibliography writes them (the citations, the reference list), they are
# marked so, as the pages' own prose marks them, and a zh_TW page shows no unmarked
# Simplified text (tests/test_zh_tw.py scans the built pages)
SIMPLIFIED_SOURCE_WORDS = ("图灵编辑部", "25 个公式深度解读", "数学原理")
_SOURCE_WORDS = re.compile(
    "(" + "|".join(map(re.escape, SIMPLIFIED_SOURCE_WORDS)) + ")"
)


class MarkSimplifiedSourceWords(SphinxPostTransform):
    """Wrap the source article's Simplified words in ``<span lang="zh-Hans">``, after
    sphinxcontrib-bibtex has written its citations."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        import html

        for text in list(self.document.findall(nodes.Text)):
            parent = text.parent
            if parent is None or isinstance(parent, (nodes.raw, nodes.literal)):
                continue
            pieces = _SOURCE_WORDS.split(str(text))
            if len(pieces) == 1:
                continue
            new = [
                nodes.raw(
                    "", f'<span lang="zh-Hans">{html.escape(p)}</span>', format="html"
                )
                if i % 2
                else nodes.Text(p)
                for i, p in enumerate(pieces)
                if p
            ]
            parent.replace(text, new)


def register_label_style() -> None:
    """The bibliography's labels: pybtex's alpha labels (Vas17), except for an entry
    that gives its own in biblatex's ``shorthand`` field. The alpha label of an author
    written as one braced name (the two source articles, whose authors are an
    editorial team and nobody) cut it into [TuringBeteam] and [Authornnamed].
    Registered as pybtex plugins, the way sphinxcontrib-bibtex takes a style
    (``bibtex_default_style: book`` in _config.yml)."""
    from pybtex.plugin import register_plugin
    from pybtex.style.formatting.alpha import Style as AlphaStyle
    from pybtex.style.labels.alpha import LabelStyle as AlphaLabels

    class ShorthandLabels(AlphaLabels):
        def format_labels(self, sorted_entries):
            entries = list(sorted_entries)
            for entry, label in zip(
                entries, super().format_labels(entries), strict=True
            ):
                yield entry.fields.get("shorthand", label)

    class BookStyle(AlphaStyle):
        default_label_style = "book"

    register_plugin("pybtex.style.labels", "book", ShorthandLabels, force=True)
    register_plugin("pybtex.style.formatting", "book", BookStyle, force=True)


def setup(app: Sphinx) -> dict:
    register_label_style()
    app.connect("builder-inited", theme_words)
    app.connect("builder-inited", use_linear_chinese_search)
    app.add_transform(KeepNeutralTextUntranslated)
    app.add_transform(TranslateSourceLines)
    from myst_nb.sphinx_ import HideCodeCellNode

    app.setup_extension("myst_nb")  # its own add_node comes first
    app.add_node(HideCodeCellNode, override=True, html=hidden_cell_html_visitors())
    wrap_glue_lookup()
    app.connect("html-page-context", add_switcher)
    app.connect("html-page-context", translate_author, priority=600)  # after the theme
    app.connect("doctree-read", translate_toc_captions, priority=400)
    app.connect("doctree-read", exercise_titles_as_translated)
    app.connect("doctree-read", titles_in_the_editions_script, priority=900)
    # before sphinx-exercise's init_numfig (priority 500) reads "Exercise"
    app.connect("config-inited", exercise_words_for_derived_editions, priority=400)
    app.add_post_transform(ExtractExerciseNames)
    app.add_post_transform(ChineseExerciseTitles)
    app.add_post_transform(MarkSimplifiedSourceWords)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
