"""Every place the build reaches into another package's internals, in one module.

Where a supported hook exists (a Sphinx event or API call, a theme's template
override, myst-nb's configuration or its mime render plugins, IPython's formatters)
the build uses it, elsewhere in ``booktools``. What is here has none: each entry of
:data:`REGISTER` names the package and the version it was written against (the one
``requirements.lock`` pins), what the build does, why no supported hook does it, and
the test in ``tests/test_replaced_upstream.py`` (or ``tests/test_execute.py``) that
fails first when that package changes. ``UPSTREAM.md`` holds, for each, the report to
file upstream; when an upstream release fixes one, its entry and its code go.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import pathlib
import posixpath

from docutils import nodes
from nbval.plugin import IPyNbFile
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform


@dataclasses.dataclass(frozen=True)
class Workaround:
    name: str  # the code's name in this module (or the file it lives in)
    package: str  # the distribution whose internals it relies on
    version: str  # the version it was written against (requirements.lock's pin)
    relies_on: str  # the internal it relies on
    why: str  # why no supported hook does it
    test: str  # tests/<file>.py::<test> that fails first when the package changes


REGISTER = [
    Workaround(
        "linear_chinese_search", "sphinx", "7.4.7",
        "sphinx.search.zh.SearchChinese: its latin_terms list and split()",
        "add_search_language registers a class, but Sphinx's own Chinese class keeps "
        "its Latin terms in a list it searches once per stemmed word (quadratic): the "
        "subclass keeps them in a set; no option changes the container",
        "test_replaced_upstream.py::test_the_linear_chinese_search_splits_as_sphinx_own",
    ),
    Workaround(
        "wrap_glue_lookup", "myst-nb", "1.4.0",
        "myst_nb.ext.glue.utils.retrieve_glue_data, imported by name into "
        "myst_nb.ext.glue.roles and .directives",
        "Sphinx parses a translated paragraph as a document of its own, where "
        "{glue:text} finds no value; myst-nb has no option or event for it",
        "test_replaced_upstream.py::"
        "test_myst_nb_glue_roles_still_look_values_up_through_retrieve_glue_data",
    ),
    Workaround(
        "hidden_cell_html_visitors", "myst-nb", "1.4.0",
        "myst_nb.sphinx_.visit_HideCellInput writes aria-label=\"Toggle hidden "
        "content\" as a literal",
        "the label is not passed through a catalog; the node is registered again "
        "with add_node(override=True), Sphinx's API, around myst-nb's own visitor",
        "test_replaced_upstream.py::"
        "test_myst_nb_still_writes_the_hidden_cell_label_the_build_translates",
    ),
    Workaround(
        "give_subtitles_a_source, ExtractExerciseNames", "sphinx-exercise", "1.2.1",
        "its post-transform builds each exercise's title (a subtitle) without a "
        "source, folding the name into a new node",
        "Sphinx's gettext builder and Locale transform skip a node without a source; "
        "sphinx-exercise offers no hook before it folds the title",
        "test_replaced_upstream.py::test_sphinx_exercise_titles_still_have_no_source",
    ),
    Workaround(
        "exercise_titles_as_translated", "sphinx-exercise", "1.2.1",
        "app.env.sphinx_exercise_registry[label]['node'], the node a solution's "
        "title is copied from",
        "the registry keeps the node read before the page was translated; there is "
        "no event between translation and the solution's title",
        "test_replaced_upstream.py::test_sphinx_exercise_registry_still_holds_nodes",
    ),
    Workaround(
        "ChineseExerciseTitles", "sphinx-exercise", "1.2.1",
        "the Text nodes ' (' and ')' that its post-transforms put around an exercise's "
        "name, in the exercise's title and in a solution's reference to it",
        "it writes the brackets as literal English text, not through its catalog; no "
        "option or event lets a Chinese edition write them full-width",
        "test_replaced_upstream.py::test_exercise_and_solution_titles_in_each_edition",
    ),
    Workaround(
        "exercise_words_for_derived_editions", "sphinx-exercise", "1.2.1",
        "its config-inited handler init_numfig (priority 500) reads \"Exercise\" "
        "from its catalog, which ships zh_CN but no zh_TW",
        "the catalog must be added before sphinx-exercise's own handler reads it",
        "test_replaced_upstream.py::test_sphinx_exercise_ships_no_zh_tw_catalog",
    ),
    Workaround(
        "translate_toc_captions", "sphinx-external-toc", "1.1.0",
        "it inserts the toctrees of _toc.yml after Sphinx's Locale transform",
        "their captions are never looked up in a catalog; the build does it on "
        "doctree-read with sphinx.locale.init, before the toctree collector",
        "test_replaced_upstream.py::test_external_toc_still_adds_toctrees_untranslated",
    ),
    Workaround(
        "theme_words", "sphinx", "7.4.7",
        "sphinx.util.i18n.CatalogRepository, to compile booktheme.po, and the "
        "theme's catalog domain 'booktheme'",
        "Sphinx compiles only the catalogs of its own domain from locale_dirs; a "
        "theme's domain needs its .mo made and added (add_message_catalog)",
        "test_replaced_upstream.py::test_sphinx_catalog_repository_still_compiles",
    ),
    Workaround(
        "THEME_COPIES (book/_templates)", "sphinx-book-theme", "1.3.0",
        "four templates that write English with no _(): layout.html, "
        "toggle-primary-sidebar.html, toggle-secondary-sidebar.html, "
        "sbt-sidebar-nav.html",
        "a template override (supported) must copy the theme's whole template to "
        "put _() around its words",
        "test_replaced_upstream.py::"
        "test_template_overrides_are_the_themes_own_with_their_words_in_a_catalog",
    ),
    Workaround(
        "KeepsKernelMessages", "nbval", "0.11.0",
        "nbval.plugin.IPyNbFile.get_kernel_message, through which IPyNbCell.runtest "
        "reads every iopub message",
        "nbval keeps no record of a cell's messages, only its own comparison "
        "outputs; it has no hook per message",
        "test_execute.py::test_nbval_still_reads_every_message_through_get_kernel_message",
    ),
    Workaround(
        "outputs_from_messages", "nbclient", "0.11.0",
        "NotebookClient.process_message with its execution trackers "
        "(reset_execution_trackers, clear_before_next_output, CellExecutionComplete)",
        "nbclient turns messages into outputs only while it runs the kernel itself; "
        "replaying nbval's messages reuses its per-message step",
        "test_execute.py::test_a_chapter_is_cached_with_the_outputs_a_notebook_run_stores",
    ),
]  # fmt: skip


def _translated(app: Sphinx) -> bool:
    """True in a translated edition's build."""
    return (app.config.language or "en") != "en"


# ------------------------------------------------------------- sphinx-exercise
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


# ------------------------------------------------------------------- myst-nb
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


def wrap_glue_lookup() -> None:
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


# ------------------------------------- sphinx-external-toc, sphinx-exercise, Sphinx
def translate_toc_captions(app: Sphinx, doctree: nodes.document) -> None:
    """Translate the part captions of the table of contents.

    sphinx-external-toc adds the toctrees from _toc.yml after Sphinx's Locale
    transform has run, so their captions would stay English; look them up in the
    page's catalog here, before the toctree collector stores them.
    """
    if not _translated(app):
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
    if not _translated(app):
        return
    registry = getattr(app.env, "sphinx_exercise_registry", {})
    for node in doctree.findall(nodes.Element):
        label = node.get("label")
        entry = registry.get(label) if isinstance(label, str) else None
        if entry and entry.get("type") == "exercise" and entry.get("node") is not node:
            if entry.get("docname") == app.env.docname:
                # a copy: sphinx-exercise's post-transform (priority 20) rewrites the
                # page's own exercise title before the solutions (21) read it, and a
                # solution then said "解答  ( 5" where it should name the exercise
                entry["node"] = node.deepcopy()


class ChineseExerciseTitles(SphinxPostTransform):
    """sphinx-exercise writes the brackets of its titles as English does, "Exercise 5
    (name)" and "Solution to Exercise 5 (name)"; a Chinese edition writes them
    full-width: 练习 5（name）and 解答（练习 5：name）. Runs after sphinx-exercise's
    ResolveTitlesInSolutions (priority 21)."""

    default_priority = 22

    def run(self, **kwargs) -> None:
        if not _translated(self.app):
            return
        from sphinx_exercise.nodes import is_exercise_node, solution_node

        for node in self.document.findall(is_exercise_node):
            _full_width_brackets(node.children[0], "（", "）")
        for node in self.document.findall(solution_node):
            title = node.children[0]
            reference = next(
                (c for c in title.children if isinstance(c, nodes.reference)), None
            )
            if reference is None or not reference.children:
                continue
            first = reference.children[0]
            if isinstance(first, nodes.Text):  # " 练习 5"
                reference.replace(first, nodes.Text(first.astext().strip()))
            _full_width_brackets(reference, "：", "")
            said = title.children[0]
            if isinstance(said, nodes.Text):  # "解答"
                title.replace(said, nodes.Text(said.astext().strip() + "（"))
                title += nodes.Text("）")


def _full_width_brackets(parent: nodes.Element, opening: str, closing: str) -> None:
    """The " (" and ")" that sphinx-exercise puts around a subtitle, as ``opening``
    and ``closing``."""
    texts = [c for c in parent.children if isinstance(c, nodes.Text)]
    opened = next((t for t in texts if t.astext() == " ("), None)
    if opened is None or texts[-1].astext() != ")":
        return
    parent.replace(opened, nodes.Text(opening))
    if closing:
        parent.replace(texts[-1], nodes.Text(closing))
    else:
        parent.remove(texts[-1])


def exercise_words_for_derived_editions(app: Sphinx, config=None) -> None:
    """sphinx-exercise ships no zh_TW catalog ("Exercise", "Solution to"); the
    edition keeps its own, locales/zh_TW/LC_MESSAGES/exercise.po (compiled by
    booktools.catalogs.compile_exercise_catalog), registered here.

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
    if not _translated(app):
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


# ----------------------------------------------------------- sphinx-book-theme
# book/_templates: copies of the theme's templates that wrote English into the page,
# with `_()` put around those words; {override: the theme's template it copies}
THEME_COPIES = {
    "layout.html": "sphinx_book_theme/theme/sphinx_book_theme/layout.html",
    "toggle-primary-sidebar.html": (
        "sphinx_book_theme/theme/sphinx_book_theme/components/"
        "toggle-primary-sidebar.html"
    ),
    "toggle-secondary-sidebar.html": (
        "sphinx_book_theme/theme/sphinx_book_theme/components/"
        "toggle-secondary-sidebar.html"
    ),
    "sbt-sidebar-nav.html": (
        "sphinx_book_theme/theme/sphinx_book_theme/components/sbt-sidebar-nav.html"
    ),
}


# --------------------------------------------------------------- nbval, nbclient
class KeepsKernelMessages(IPyNbFile):
    """nbval's notebook, which also keeps the iopub messages of the cell that runs
    (in ``messages``, a list while a cell runs, else None)."""

    messages: list[dict] | None = None

    def get_kernel_message(self, timeout=None, stream="iopub"):
        msg = super().get_kernel_message(timeout=timeout, stream=stream)
        if self.messages is not None and stream == "iopub":
            self.messages.append(msg)
        return msg


def outputs_from_messages(client, target, index: int, messages: list[dict]) -> None:
    """A cell's outputs from its messages, as nbclient would store them when running
    it: ``client`` is an ``nbclient.NotebookClient`` over the notebook (after
    ``reset_execution_trackers()``), ``target`` the cell, ``index`` its index."""
    from nbclient.exceptions import CellExecutionComplete

    target.outputs = []
    client.clear_before_next_output = False  # as execute_cell starts a cell
    for msg in messages:
        try:
            client.process_message(msg, target, index)
        except CellExecutionComplete:
            break
