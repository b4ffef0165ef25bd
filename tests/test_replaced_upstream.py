"""The build reaches into other packages' internals only in ``booktools/upstream.py``,
whose ``REGISTER`` lists each place with the package and version it was written
against. Each is checked here (or in tests/test_execute.py) against the installed
package, so that an upgrade that changes it fails loudly instead of quietly changing
the book; ``UPSTREAM.md`` holds the report to file for each.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

from booktools import sphinx_ext, upstream

ROOT = Path(__file__).resolve().parents[1]


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
    ours, theirs = upstream.linear_chinese_search()({}), zh.SearchChinese({})
    assert ours.lang == "zh"
    assert ours.split(text) == theirs.split(text)
    assert set(theirs.latin_terms) == ours.latin_terms
    assert _digest(zh.SearchChinese) == "5f4963b38ec2d941", _digest(zh.SearchChinese)


THEME_COPIES = upstream.THEME_COPIES


def test_template_overrides_are_the_themes_own_with_their_words_in_a_catalog():
    """Each copy in book/_templates is the installed theme's template, its header
    comment aside, with only ``_('…')`` put around English words: when the theme
    changes its template, the copy must be made again."""
    import site

    root = Path(__file__).resolve().parents[1] / "book" / "_templates"
    packages = [Path(p) for p in site.getsitepackages()]
    for name, copied in THEME_COPIES.items():
        theirs = next(p / copied for p in packages if (p / copied).exists())
        ours = (root / name).read_text(encoding="utf-8")
        assert ours.startswith("{#-"), f"{name}: no comment saying what it changes"
        ours = ours.split("-#}\n", 1)[1]
        assert "{{ _('" in ours, name
        as_theirs = re.sub(r"\{\{ _\('([^']*)'\) \}\}", r"\1", ours)
        assert as_theirs == theirs.read_text(encoding="utf-8"), (
            f"book/_templates/{name} no longer matches {theirs}: copy it again"
        )


def test_myst_nb_still_writes_the_hidden_cell_label_the_build_translates():
    """booktools.upstream registers myst-nb's visitor of a hidden code cell again
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
    assert upstream.HIDDEN_CELL_LABEL in "".join(writer.body)
    visit, _ = upstream.hidden_cell_html_visitors()
    writer.body = []
    visit(writer, node)  # no Sphinx here: the English label comes back
    assert upstream.HIDDEN_CELL_LABEL in "".join(writer.body)


def _source(obj) -> str:
    return inspect.getsource(obj)


def test_sphinx_exercise_titles_still_have_no_source():
    """sphinx-exercise builds an exercise's subtitle with ``inline_text`` and gives it
    no source (so upstream.give_subtitles_a_source gives it one)."""
    from sphinx_exercise.directive import ExerciseDirective

    run = _source(ExerciseDirective.run)
    assert "subtitle = exercise_subtitle()" in run
    assert "subtitle.source" not in run and "subtitle.line" not in run
    assert _digest(ExerciseDirective.run) == "6cb609c141223b0d", _digest(
        ExerciseDirective.run
    )


def test_sphinx_exercise_registry_still_holds_nodes():
    """A solution's title is copied from ``env.sphinx_exercise_registry[label]
    ["node"]``, a copy of the exercise's node made when it was read."""
    from sphinx_exercise import directive

    assert '"node": node.deepcopy(),' in _source(directive)
    assert "sphinx_exercise_registry[label] = {" in _source(directive)


def test_sphinx_exercise_ships_no_zh_tw_catalog():
    """Its catalogs have zh_CN and no zh_TW, and its own config-inited handler
    (default priority 500, after the book's 400) reads "Exercise" from them."""
    import sphinx_exercise

    locales = Path(sphinx_exercise.__file__).parent / "translations" / "locales"
    assert (locales / "zh_CN" / "LC_MESSAGES").is_dir()
    assert not (locales / "zh_TW").exists(), "sphinx-exercise ships zh_TW now"
    setup = _source(sphinx_exercise.setup)
    assert 'app.connect("config-inited", init_numfig)' in setup


def test_external_toc_still_adds_toctrees_untranslated():
    """sphinx-external-toc inserts the toctrees in a transform of priority 100 (after
    Sphinx's Locale transform, 20), copying the caption of _toc.yml as it is."""
    from sphinx.transforms.i18n import Locale
    from sphinx_external_toc import events

    assert events.InsertToctrees.default_priority > Locale.default_priority
    inserted = _source(events.insert_toctrees)
    assert 'subnode["caption"] = toctree.caption' in inserted
    assert "gettext" not in inserted and "_(" not in inserted


def test_sphinx_catalog_repository_still_compiles(tmp_path):
    """upstream.theme_words compiles booktheme.po through Sphinx's CatalogRepository:
    its catalogs, their domain, is_outdated and write_mo."""
    from sphinx.util.i18n import CatalogRepository

    po = tmp_path / "locales" / "zh_CN" / "LC_MESSAGES" / "booktheme.po"
    po.parent.mkdir(parents=True)
    po.write_text('msgid "Launch"\nmsgstr "启动"\n', encoding="utf-8")
    repo = CatalogRepository(str(tmp_path), ["locales"], "zh_CN", "utf-8")
    (catalog,) = list(repo.catalogs)
    assert catalog.domain == "booktheme" and catalog.is_outdated()
    catalog.write_mo("zh_CN")
    assert po.with_suffix(".mo").exists() and not catalog.is_outdated()
    assert Path(catalog.base_dir).parents[1] == tmp_path / "locales"


# ---------------------------------------------------------------------- the register
def test_each_workaround_names_the_installed_version_of_its_package():
    """An upgrade of a package the build reaches into fails here first: read its
    entries again (and their tests), then change the version in the register."""
    stale = [
        f"{w.name}: written against {w.package} {w.version}, installed "
        + importlib.metadata.version(w.package)
        for w in upstream.REGISTER
        if importlib.metadata.version(w.package) != w.version
    ]
    assert not stale, stale


def test_each_workaround_is_pinned_by_a_test_that_exists():
    for w in upstream.REGISTER:
        file, name = w.test.split("::")
        text = (ROOT / "tests" / file).read_text(encoding="utf-8")
        assert f"def {name}(" in text, w.test
        assert w.why and w.relies_on, w.name


def test_each_workaround_has_its_report_in_upstream_md():
    """UPSTREAM.md has a section per entry, headed by its name."""
    text = (ROOT / "UPSTREAM.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### `([^`]+)`", text, re.M)
    assert sorted(headings) == sorted(w.name for w in upstream.REGISTER)


def test_each_workaround_is_defined_in_booktools_upstream():
    for w in upstream.REGISTER:
        names = re.findall(r"\w+", w.name.split(" (")[0])
        for name in names:
            assert hasattr(upstream, name), name


EXERCISE_PAGE = """\
# Title

:::{exercise} Scores with einsum
:label: ex-einsum

Do it.
:::

:::{solution} ex-einsum
Done.
:::
"""
EXERCISE_PO = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=utf-8\\n"

msgid "Scores with einsum"
msgstr "用 einsum 计算得分"
"""


def _exercise_titles(tmp_path, language: str) -> list[str]:
    import re
    import subprocess
    import sys

    (tmp_path / "conf.py").write_text(
        'extensions = ["myst_nb", "sphinx_exercise", "booktools.sphinx_ext"]\n'
        'myst_enable_extensions = ["colon_fence"]\nnb_execution_mode = "off"\n'
        'locale_dirs = ["locales"]\ngettext_compact = False\nnumfig = True\n'
    )
    (tmp_path / "index.md").write_text(EXERCISE_PAGE)
    po = tmp_path / "locales" / "zh_CN" / "LC_MESSAGES" / "index.po"
    po.parent.mkdir(parents=True, exist_ok=True)
    po.write_text(EXERCISE_PO, encoding="utf-8")
    out = tmp_path / f"_build_{language}"
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", "-D",
         f"language={language}", str(tmp_path), str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    html = (out / "index.html").read_text(encoding="utf-8")
    found = re.findall(r'<p class="admonition-title">(.*?)</p>', html, re.S)
    return [re.sub(r"<[^>]+>", "", t).strip() for t in found]


@pytest.mark.slow  # two Sphinx builds: not in make test-fast
def test_exercise_and_solution_titles_in_each_edition(tmp_path):
    """sphinx-exercise builds a solution's title from its exercise's title node, which
    its own post-transform has rewritten by then on a translated page (the build
    registers a copy), and writes the brackets as English does (the Chinese editions
    write them full-width). English keeps sphinx-exercise's own "Solution to
    Exercise 1 (name)"; its brackets are what the build looks for."""
    import sphinx_exercise.post_transforms as upstream

    assert 'Text(" (")' in inspect.getsource(upstream.resolve_solution_title)
    assert _exercise_titles(tmp_path, "zh_CN") == [
        "练习 1 （用 einsum 计算得分）",
        "解答（练习 1：用 einsum 计算得分）",
    ]


def test_bibliography_labels_are_alphas_or_the_entrys_shorthand():
    """The "book" style that _config.yml names, found as sphinxcontrib-bibtex finds it
    (pybtex's plugin registry): the two source articles get their shorthand, every
    other entry alpha's label (Vas17), and no label cuts a one-name author apart."""
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    from booktools.paths import CONFIG, ROOT

    sphinx_ext.register_label_style()
    assert CONFIG["sphinx"]["config"]["bibtex_default_style"] == "book"
    data = parse_file(str(ROOT / "book" / "references.bib"))
    entries = list(data.entries.values())
    book = find_plugin("pybtex.style.formatting", "book")()
    alpha = find_plugin("pybtex.style.formatting", "alpha")()
    ours = {e.key: e.label for e in book.format_entries(entries)}
    theirs = {e.key: e.label for e in alpha.format_entries(entries)}
    assert ours["turing25formulas"] == "Turing" and ours["zhhantnotes"] == "Anon"
    assert theirs["zhhantnotes"] == "Authornnamed"  # what alpha alone would say
    assert {
        k: v for k, v in ours.items() if k not in ("turing25formulas", "zhhantnotes")
    } == {
        k: v for k, v in theirs.items() if k not in ("turing25formulas", "zhhantnotes")
    }
    assert ours["vaswani2017attention"] == "VSP+17"
