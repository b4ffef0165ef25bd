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
* indexes Chinese pages for search in linear time (:func:`use_linear_chinese_search`);
* translates the words of the theme that its own catalogs leave in English (button
  tooltips, landmark labels, the footer) from the catalog ``theme.po``, once every page
  is written (:func:`translate_theme_words`).

The editions themselves, and the Chinese search's dictionary, come from
:mod:`booktools.editions` (called by ``make book``).
"""

from __future__ import annotations

import functools
import html
import pathlib
import posixpath
import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

from .catalogs import EDITIONS, read_translations


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


def give_subtitles_a_source(doctree: nodes.document) -> None:
    """sphinx-exercise builds its titles without a source, so Sphinx would not
    translate them; give each subtitle (an exercise's own name) one."""
    source = doctree.get("source")
    for node in doctree.findall(nodes.subtitle):
        if not node.source:
            node.source = (node.parent.source if node.parent else None) or source
            node.line = node.line or (node.parent.line if node.parent else 0)
            node.rawsource = node.rawsource or node.astext()


class ExtractExerciseNames(SphinxPostTransform):
    """For the catalogs only: sphinx-exercise's post-transform folds each exercise's
    name into a new title without a source, where the gettext builder would not see
    it. Copy the names first into paragraphs the builder extracts; the Locale
    transform then translates the subtitles themselves when the page is read."""

    builders = ("gettext",)
    default_priority = 5

    def run(self, **kwargs) -> None:
        source = self.document.get("source") or self.env.doc2path(self.env.docname)

        for node in list(self.document.findall(nodes.subtitle)):
            # the source's text (set when read, before smart quotes), as the
            # Locale transform looks it up
            text = node.rawsource or node.astext()
            if text and node.get("translatable", True):
                para = nodes.paragraph(text, text)
                para.source, para.line = node.source or source, node.line or 0
                para.uid = ""  # the gettext builder skips a node without one
                self.document += para


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


# (docname, key) -> the glued value, as the notebook's own parse found it
_GLUE_VALUES: dict[tuple[str, str], object] = {}


def _patch_glue_lookup() -> None:
    """Let ``{glue:text}`name``` work inside a translated paragraph.

    Sphinx parses a translated paragraph as a small document of its own, which has
    none of the notebook's outputs, so the glue roles there would find no value. Every
    such role was resolved first in the English paragraph, during the notebook's own
    parse: remember each value then, and fall back to it.
    """
    from myst_nb.core.variables import RetrievalError
    from myst_nb.ext.glue import directives, roles, utils

    original = utils.retrieve_glue_data
    if getattr(original, "tl_i18n", False):
        return

    def retrieve_glue_data(document, key):
        env = getattr(document.settings, "env", None)
        docname = env.docname if env is not None else None
        try:
            value = original(document, key)
        except RetrievalError:
            if (docname, key) not in _GLUE_VALUES:
                raise
            return _GLUE_VALUES[(docname, key)]
        _GLUE_VALUES[(docname, key)] = value
        return value

    retrieve_glue_data.tl_i18n = True
    for module in (utils, roles, directives):
        module.retrieve_glue_data = retrieve_glue_data


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


_TABLES: dict[tuple[str, str], dict[str, str]] = {}


def catalog_table(app: Sphinx, name: str) -> dict[str, str]:
    """{English: translation} of the edition's catalog ``name`` (theme)."""
    key = (app.config.language, name)
    if key not in _TABLES:
        table = {}
        for d in app.config.locale_dirs:
            path = posixpath.join(
                app.srcdir, d, app.config.language, "LC_MESSAGES", name + ".po"
            )
            if posixpath.exists(path):
                table.update(read_translations(path))
        _TABLES[key] = table
    return _TABLES[key]


def add_switcher(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    if app.builder.format != "html":
        return
    context["tl_editions"] = language_links(app, pagename)


def translate_toc_captions(app: Sphinx, doctree: nodes.document) -> None:
    """Translate the part captions of the table of contents.

    sphinx-external-toc adds the toctrees from _toc.yml after Sphinx's Locale
    transform has run, so their captions would stay English; look them up in the
    page's catalog here, before the toctree collector stores them.
    """
    if not is_translation(app):
        return
    from sphinx import addnodes
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    dirs = [posixpath.join(app.srcdir, d) for d in app.config.locale_dirs]
    catalog, has_catalog = init_locale(dirs, app.config.language, domain)
    if not has_catalog:
        return
    for toctree in doctree.findall(addnodes.toctree):
        caption = toctree.get("caption")
        if caption and catalog.gettext(caption) != caption:
            toctree["rawcaption"] = caption
            toctree["caption"] = catalog.gettext(caption)


def exercise_titles_as_translated(app: Sphinx, doctree: nodes.document) -> None:
    """A solution's title repeats its exercise's name, which sphinx-exercise takes
    from the node it registered before the page was translated; register the
    translated node instead."""
    if not is_translation(app):
        return
    registry = getattr(app.env, "sphinx_exercise_registry", {})
    for node in doctree.findall(nodes.Element):
        label = node.get("label")
        entry = registry.get(label) if isinstance(label, str) else None
        if entry and entry.get("type") == "exercise" and entry.get("node") is not node:
            if entry.get("docname") == app.env.docname:
                entry["node"] = node


def exercise_words_for_derived_editions(app: Sphinx) -> None:
    """sphinx-exercise ships no zh_TW catalog ("Exercise", "Solution to");
    booktools.catalogs.derive_zh_tw derives one from its zh_CN catalog into the
    edition's locale directory, registered here."""
    for d in app.config.locale_dirs:
        path = posixpath.join(app.srcdir, d)
        mo = posixpath.join(path, app.config.language or "", "LC_MESSAGES")
        if posixpath.exists(posixpath.join(mo, "exercise.po")):
            app.add_message_catalog("exercise", path)


@functools.cache
def linear_chinese_search():
    """Sphinx 7.4's Chinese search language, with its Latin terms kept in a set.

    ``sphinx.search.zh.SearchChinese`` appends every Latin word of every page to a list,
    then tests each word it stems for membership in that list: quadratic in the size of
    the book, about 50 of the 90 seconds of an edition's build. A set gives the same
    answers (``tests/test_replaced_upstream.py`` compares the two).
    """
    from sphinx.search import zh  # needs jieba, so only in the Chinese editions

    class ChineseSearch(zh.SearchChinese):
        def init(self, options: dict[str, str]) -> None:
            super().init(options)
            self.latin_terms = set()  # the parent's is one list shared by the class

        def split(self, input: str) -> list[str]:
            chinese = list(zh.jieba.cut_for_search(input)) if zh.JIEBA else []
            latin = [t.strip() for t in self.latin1_letters.findall(input)]
            self.latin_terms.update(latin)
            return chinese + latin

    return ChineseSearch


def use_linear_chinese_search(app: Sphinx) -> None:
    """In a Chinese edition, index with :func:`linear_chinese_search` (registered
    for the language "zh" through Sphinx's own ``add_search_language``)."""
    if (app.config.language or "").startswith("zh"):
        app.add_search_language(linear_chinese_search())


THEME_CATALOG = "theme"
# where the theme's words sit: attribute values, and the footer's text
THEME_ATTRIBUTE = re.compile(r'(\s(?:title|aria-label|data-bs-title|alt)=")([^"]+)(")')
THEME_TEXT = re.compile(r"(>\s*)([^<>]*?[A-Za-z][^<>]*?)(\s*<)")


def translate_theme_words(page: str, table: dict[str, str]) -> str:
    """The theme's English words of one written page, in the edition's language.

    The theme writes some words straight into its templates (``title="Toggle primary
    sidebar"``) and looks others up in catalogs that lack them, so they are replaced
    in the written HTML: exact attribute values and exact text between tags only.
    """

    def swap(m: re.Match) -> str:
        word = html.unescape(m.group(2))
        if word not in table:
            return m.group(0)
        return m.group(1) + html.escape(table[word]) + m.group(3)

    page = THEME_ATTRIBUTE.sub(swap, page)  # the code cells' toggles too
    # text only outside the chapter itself (its code and outputs are not the theme's)
    article = re.search(r'<article class="bd-article".*?</article>', page, re.S)
    start, end = article.span() if article else (len(page), len(page))
    return (
        THEME_TEXT.sub(swap, page[:start])
        + page[start:end]
        + THEME_TEXT.sub(swap, page[end:])
    )


def translate_theme(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or not is_translation(app):
        return

    table = catalog_table(app, THEME_CATALOG)
    for path in pathlib.Path(app.outdir).rglob("*.html"):
        page = path.read_text(encoding="utf-8")
        translated = translate_theme_words(page, table)
        if translated != page:
            path.write_text(translated, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", translate_theme)
    app.connect("builder-inited", use_linear_chinese_search)
    app.add_transform(KeepNeutralTextUntranslated)
    _patch_glue_lookup()
    app.connect("html-page-context", add_switcher)
    app.connect("doctree-read", translate_toc_captions, priority=400)
    app.connect("doctree-read", exercise_titles_as_translated)
    app.connect("builder-inited", exercise_words_for_derived_editions)
    app.add_post_transform(ExtractExerciseNames)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
