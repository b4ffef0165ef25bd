"""The formula index (book/formulas.md) stays honest: it lists every labelled equation
of the book, in the book's order, with the formula as the chapter writes it, a link to
it, a library function that exists and a test that exists. The page is generated and
read by ``booktools.formula_index``; a broken index must fail these checks (the last
test breaks one on purpose for each).
"""

from __future__ import annotations

import re

import pytest

from booktools import formula_index
from booktools.formula_index import (
    ARTICLE_NUMBERS,
    ARTICLE_PROSE,
    BEYOND_THE_ARTICLE,
    FIRST_ARTICLE,
    INDEX,
    TABLE_START,
    _cells,
    article_cell,
    every_label_written,
    formula_cell,
    index_rows,
    labelled_equations,
    named_test_exists,
    resolve_library,
    where_cell,
)

UPDATE = (
    "run `.venv/bin/python -m booktools.formula_index --update`, "
    "then fill in the new rows' Library and Test cells"
)


def test_equation_labels_are_unique_and_all_parsed():
    labels = [eq.label for eq in labelled_equations()]
    dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
    assert not dupes, f"equation labels used twice in the book: {dupes}"
    unread = sorted(every_label_written() - set(labels))
    assert not unread, (
        f"labels written in a form this test cannot read: {unread}; "
        "write equations as $$ ... $$ (eq-x) or a {math} directive with :label: eq-x"
    )


def test_every_labelled_formula_is_in_the_index():
    missing = [
        f"{eq.label} ({eq.page})"
        for eq in labelled_equations()
        if eq.label not in {r.label for r in index_rows()}
    ]
    assert not missing, (
        f"labelled formulas missing from book/formulas.md: {missing}; {UPDATE}"
    )


def test_index_has_no_stale_or_repeated_rows():
    labels = [r.label for r in index_rows()]
    in_book = {eq.label for eq in labelled_equations()}
    assert len(labels) == len(set(labels)), (
        f"rows repeated: {sorted({x for x in labels if labels.count(x) > 1})}"
    )
    stale = sorted(set(labels) - in_book)
    assert not stale, (
        f"index rows for labels no chapter defines any more: {stale}; {UPDATE}"
    )


def test_index_rows_follow_the_book_order():
    in_book = [eq.label for eq in labelled_equations()]
    assert [r.label for r in index_rows()] == [
        lab for lab in in_book if lab in {r.label for r in index_rows()}
    ], UPDATE


def test_formula_and_link_match_the_chapter():
    by_label = {eq.label: eq for eq in labelled_equations()}
    wrong = []
    for row in index_rows():
        eq = by_label.get(row.label)
        if eq is None:
            continue  # reported by test_index_has_no_stale_or_repeated_rows
        if row.formula != formula_cell(eq):
            wrong.append(f"{row.label}: the formula differs from {eq.page}")
        if row.where != where_cell(eq):
            wrong.append(f"{row.label}: the link should read {where_cell(eq)!r}")
    assert not wrong, "\n" + "\n".join(wrong) + f"\n{UPDATE}"


def test_every_row_names_existing_library_functions():
    problems = []
    for row in index_rows():
        names = re.findall(r"`([^`]+)`", row.library)
        if row.library == "—":
            # a derivation step: no function computes it; its Test checks it numerically
            continue
        if not names or re.sub(r"`[^`]+`|[,;\s]|and", "", row.library):
            problems.append(
                f"{row.label}: Library must be `tl.name` cells or —, "
                f"got {row.library!r}"
            )
            continue
        for name in names:
            try:
                resolve_library(name)
            except (AssertionError, AttributeError) as err:
                problems.append(f"{row.label}: {name} does not exist ({err})")
    assert not problems, "\n" + "\n".join(problems)


def test_every_row_names_existing_tests():
    problems = []
    for row in index_rows():
        refs = re.findall(r"`([^`]+)`", row.test)
        if not refs:
            problems.append(f"{row.label}: no test named (got {row.test!r})")
        for ref in refs:
            if not named_test_exists(ref):
                problems.append(f"{row.label}: {ref} is not a test function")
    assert not problems, "\n" + "\n".join(problems)


def test_index_covers_the_first_article_and_the_named_extensions():
    """The first article's formulas, plus the masks, GQA, Pre-LN, RoPE and the KV-cache
    memory formula."""
    labels = {r.label for r in index_rows()}
    missing = [lab for lab in FIRST_ARTICLE + BEYOND_THE_ARTICLE if lab not in labels]
    assert not missing, (
        f"formulas the index must list are not labelled in any chapter: {missing}"
    )


def test_article_numbering_runs_from_1_to_25_in_the_articles_order():
    numbers = list(ARTICLE_NUMBERS.values())
    assert sorted(set(numbers)) == list(range(1, 26)), "the article has 25 formulas"
    assert numbers == sorted(numbers), "keep ARTICLE_NUMBERS in the article's order"
    assert not set(ARTICLE_PROSE) & set(ARTICLE_NUMBERS)
    prose = INDEX.read_text(encoding="utf-8").split(TABLE_START)[0]
    assert f"25 formulas are {len(ARTICLE_NUMBERS)} rows here" in prose


def test_article_column_matches_the_numbering():
    wrong = [
        f"{row.label}: Article is {row.article!r}, expected {article_cell(row.label)!r}"
        for row in index_rows()
        if row.article != article_cell(row.label)
    ]
    assert not wrong, "\n" + "\n".join(wrong) + f"\n{UPDATE}"


def test_labels_named_in_the_index_prose_exist():
    prose = INDEX.read_text(encoding="utf-8").split(TABLE_START)[0]
    named = set(re.findall(r"`(eq-[\w.-]+)`", prose))
    assert named >= set(FIRST_ARTICLE + BEYOND_THE_ARTICLE), (
        "the page's list of the article's formulas is out of date"
    )
    unknown = sorted(named - {eq.label for eq in labelled_equations()})
    assert not unknown, f"the page mentions labels no chapter defines: {unknown}"


def _corrupt(text: str, label: str, column: int, value: str | None) -> str:
    """The index text with one row changed: a cell replaced, or the row dropped (value
    None)."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith(f"| `{label}` |"):
            if value is None:
                continue
            cells = _cells(line)
            cells[column] = value
            line = "| " + " | ".join(cells) + " |\n"
        out.append(line)
    return "".join(out)


@pytest.mark.parametrize(
    ("column", "value", "check"),
    [
        (None, None, test_every_labelled_formula_is_in_the_index),
        (4, "`tl.no_such_function`", test_every_row_names_existing_library_functions),
        (4, "softmax", test_every_row_names_existing_library_functions),
        (
            5,
            "`tests/test_library.py::test_no_such_test`",
            test_every_row_names_existing_tests,
        ),
        (5, "TODO", test_every_row_names_existing_tests),
        (2, "$x$", test_formula_and_link_match_the_chapter),
        (1, "7", test_article_column_matches_the_numbering),
    ],
    ids=[
        "row-missing",
        "unknown-function",
        "not-a-tl-name",
        "unknown-test",
        "no-test",
        "formula-drifted",
        "article-number-wrong",
    ],
)
def test_the_index_checks_catch_a_broken_index(
    tmp_path, monkeypatch, column, value, check
):
    label = labelled_equations()[0].label
    broken = tmp_path / "formulas.md"
    broken.write_text(
        _corrupt(INDEX.read_text(encoding="utf-8"), label, column, value),
        encoding="utf-8",
    )
    monkeypatch.setattr(formula_index, "INDEX", broken)
    with pytest.raises(AssertionError, match=label):
        check()
