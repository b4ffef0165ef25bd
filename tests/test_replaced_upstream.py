"""The build machinery extends other packages where they offer no hook; each such place
is checked here against the pinned upstream, so that an upgrade that changes it fails
loudly instead of quietly changing the book (see NOTES / ARCHITECTURE.md).

* myst-nb's ``retrieve_glue_data`` is wrapped (booktools/sphinx_ext.py), so that glued
  numbers resolve inside translated paragraphs;
* Sphinx's Chinese search language is registered again, with a set for its Latin terms,
  through ``Sphinx.add_search_language`` (a supported call; checked here because the
  subclass relies on SearchChinese's attributes);
* nbval's notebook collector is extended (tests/test_execute.py checks it).
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
