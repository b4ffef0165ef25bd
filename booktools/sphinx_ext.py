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
* gives the theme's words that its own catalogs leave in English (button tooltips,
  landmark labels, the footer, Sphinx's "Link to this heading") to the catalogs Sphinx
  and the theme look them up in: the edition's ``sphinx.po`` and ``booktheme.po``
  (:func:`theme_words`), with ``_()`` put where a template wrote English
  (``book/_templates``) and in myst-nb's hidden-cell toggle
  (:func:`hidden_cell_html_visitors`);
* writes show_source's line above the library code in the edition's words
  (:class:`TranslateSourceLines`).

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
    sphinx.po``, zh_TW derived from it), the names stay code. The library knows
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


HIDDEN_CELL_LABEL = 'aria-label="Toggle hidden content"'


def hidden_cell_html_visitors() -> tuple:
    """myst-nb's HTML visitors of a hidden code cell, with the toggle's label in the
    edition's language: myst-nb writes ``aria-label="Toggle hidden content"`` as a
    literal, outside any catalog. Registered with Sphinx's ``add_node(...,
    override=True)``; the rest of the HTML is myst-nb's own."""
    from myst_nb.sphinx_ import depart_HideCellInput, visit_HideCellInput
    from sphinx.locale import _

    def visit(self, node) -> None:
        start = len(self.body)
        visit_HideCellInput(self, node)
        label = f'aria-label="{html.escape(_("Toggle hidden content"))}"'
        self.body[start:] = [
            part.replace(HIDDEN_CELL_LABEL, label) for part in self.body[start:]
        ]

    return visit, depart_HideCellInput


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


def translate_author(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree
) -> None:
    """The authors' name (``_config.yml``'s ``author``, which sphinx-book-theme puts
    in the page's context) from the edition's catalog, for the footer's sentence of
    ``book/_templates/author.html``."""
    if app.builder.format == "html" and is_translation(app) and context.get("author"):
        from sphinx.locale import _

        context["author"] = _(context["author"])


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


def exercise_words_for_derived_editions(app: Sphinx, config=None) -> None:
    """sphinx-exercise ships no zh_TW catalog ("Exercise", "Solution to");
    booktools.catalogs.derive_zh_tw derives one from its zh_CN catalog into the
    edition's locale directory, registered here.

    Connected to ``config-inited`` ahead of sphinx-exercise's own handler, which
    writes the exercises' caption format ("Exercise %s") from the catalog there: at
    ``builder-inited`` the catalog would come too late for the captions."""
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


# sphinx-book-theme looks its words up in its own catalog domain, "booktheme", whose
# zh_CN lacks a few ("Launch on Binder", the logos' "logo"): the editions add theirs
THEME_DOMAIN = "booktheme"


def theme_words(app: Sphinx) -> None:
    """The theme's words through its own catalogs, as Sphinx and the theme look them
    up: Sphinx's and pydata-sphinx-theme's (and those of the book's template overrides
    in ``book/_templates``, which put ``_()`` where the theme wrote English) in the
    edition's ``sphinx.po``, which Sphinx reads from ``locale_dirs`` before its own;
    sphinx-book-theme's in the edition's ``booktheme.po``, compiled and added here
    behind the theme's own catalog."""
    if not is_translation(app):
        return
    from sphinx.util.i18n import CatalogRepository

    repo = CatalogRepository(
        app.srcdir, app.config.locale_dirs, app.config.language, "utf-8"
    )
    for catalog in repo.catalogs:
        if catalog.domain == THEME_DOMAIN:
            if catalog.is_outdated():
                catalog.write_mo(app.config.language)
            locale_dir = pathlib.Path(catalog.base_dir).parents[1]
            app.add_message_catalog(THEME_DOMAIN, str(locale_dir))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", theme_words)
    app.connect("builder-inited", use_linear_chinese_search)
    app.add_transform(KeepNeutralTextUntranslated)
    app.add_transform(TranslateSourceLines)
    from myst_nb.sphinx_ import HideCodeCellNode

    app.setup_extension("myst_nb")  # its own add_node comes first
    app.add_node(HideCodeCellNode, override=True, html=hidden_cell_html_visitors())
    _patch_glue_lookup()
    app.connect("html-page-context", add_switcher)
    app.connect("html-page-context", translate_author, priority=600)  # after the theme
    app.connect("doctree-read", translate_toc_captions, priority=400)
    app.connect("doctree-read", exercise_titles_as_translated)
    # before sphinx-exercise's init_numfig (priority 500) reads "Exercise"
    app.connect("config-inited", exercise_words_for_derived_editions, priority=400)
    app.add_post_transform(ExtractExerciseNames)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
