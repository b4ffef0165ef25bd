"""Notebooks are committed without outputs or widget state, so their diffs stay
readable."""

from pathlib import Path

import nbformat
import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 13, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count)
    ]
    assert not dirty, (
        f"{path.name}: cells {dirty} carry outputs; clear them before committing"
    )
    assert "widgets" not in nb.metadata, (
        f"{path.name} carries saved widget state in its metadata"
    )
    nbformat.validate(nb)
