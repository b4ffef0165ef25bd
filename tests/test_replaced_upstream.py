"""The build machinery extends other packages where they offer no hook; each such place
is checked here against the pinned upstream, so that an upgrade that changes it fails
loudly instead of quietly changing the book (see NOTES / ARCHITECTURE.md).

* myst-nb's ``retrieve_glue_data`` is wrapped (booktools/sphinx_ext.py), so that glued
  numbers resolve inside translated paragraphs;
* Sphinx's Chinese search language is registered again, with a set for its Latin terms,
  through ``Sphinx.add_search_language`` (a supported call; checked here because the
  subclass relies on SearchChinese's attributes);
* nbval's notebook collector is extended (tests/test_execute.py checks it);
* four of sphinx-book-theme's templates are copied into book/_templates with ``_()``
  around the English words they wrote, and myst-nb's visitor of a hidden code cell is
  registered again with its toggle's label from the catalog.
"""

from __future__ import annotations

import hashlib
import inspect

from booktools import sphinx_ext


def _digest(obj) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


def test_myst_nb_glue_roles_still_look_values_up_through_retrieve_glue_data():
    """The wrapper replaces ``retrieve_glue_data`` in the three modules that call it by
    name; it relies on the function's signature and on RetrievalError for a miss."""
    from myst_nb.ext.glue import directives, roles, utils

    original = utils.retrieve_glue_data  # not wrapped: no Sphinx in this process
    assert not getattr(original, "tl_i18n", False)
    assert list(inspect.signature(original).parameters) == ["document", "key"]
    for module in (roles, directives):
        # imported by name, so the wrapper must be put in each module
        assert module.retrieve_glue_data is original, module.__name__
        assert "retrieve_glue_data(self.document," in inspect.getsource(module)
    assert "raise RetrievalError(msg)" in inspect.getsource(original)
    # myst-nb 1.4.0's function, as read when the wrapper was written
    assert _digest(original) == "5df1644a85123748", _digest(original)


def test_the_linear_chinese_search_splits_as_sphinx_own():
    from sphinx.search import zh

    text = "残差连接 keeps the residual stream; LayerNorm 归一化 each token."
    ours, theirs = sphinx_ext.linear_chinese_search()({}), zh.SearchChinese({})
    assert ours.lang == "zh"
    assert ours.split(text) == theirs.split(text)
    assert set(theirs.latin_terms) == ours.latin_terms
    assert _digest(zh.SearchChinese) == "5f4963b38ec2d941", _digest(zh.SearchChinese)


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


def test_template_overrides_are_the_themes_own_with_their_words_in_a_catalog():
    """Each copy in book/_templates is the installed theme's template, its header
    comment aside, with only ``_('…')`` put around English words: when the theme
    changes its template, the copy must be made again."""
    import re
    import site
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "book" / "_templates"
    packages = [Path(p) for p in site.getsitepackages()]
    for name, upstream in THEME_COPIES.items():
        theirs = next(p / upstream for p in packages if (p / upstream).exists())
        ours = (root / name).read_text(encoding="utf-8")
        assert ours.startswith("{#-"), f"{name}: no comment saying what it changes"
        ours = ours.split("-#}\n", 1)[1]
        assert "{{ _('" in ours, name
        as_theirs = re.sub(r"\{\{ _\('([^']*)'\) \}\}", r"\1", ours)
        assert as_theirs == theirs.read_text(encoding="utf-8"), (
            f"book/_templates/{name} no longer matches {theirs}: copy it again"
        )


def test_myst_nb_still_writes_the_hidden_cell_label_the_build_translates():
    """booktools.sphinx_ext registers myst-nb's visitor of a hidden code cell again
    (``add_node(override=True)``), swapping the English toggle label it writes for the
    catalog's; the label must still be there to swap."""
    from myst_nb.sphinx_ import HideCodeCellNode, visit_HideCellInput

    class Writer:
        body: list[str] = []

    node = HideCodeCellNode(
        classes=["tag_hide-input"], prompt_show="s", prompt_hide="h"
    )
    writer = Writer()
    visit_HideCellInput(writer, node)
    assert sphinx_ext.HIDDEN_CELL_LABEL in "".join(writer.body)
    visit, _ = sphinx_ext.hidden_cell_html_visitors()
    writer.body = []
    visit(writer, node)  # no Sphinx here: the English label comes back
    assert sphinx_ext.HIDDEN_CELL_LABEL in "".join(writer.body)
