"""Every exercise solution runs: a solution in a dropdown is code a learner will paste.

Two layers keep the solutions working (``booktools/solutions.py`` reads them from a
chapter):

1. **Static, here** (``make test-lib``, a second): every exercise has exactly one
   solution; every solution's code parses; every name it reads is defined by the
   solution, by the chapter's code cells or by Python; an implementation exercise's
   solution has code.
2. **Executed, with the chapter** (``pytest --nbval-lax --solutions``, which
   ``make test`` runs as the book's execution): each solution runs after the chapter's
   last cell, in the same kernel, so the chapter is executed once for the book and its
   solutions together. A solution runs in a copy of the chapter's namespace, as if a
   learner had pasted it alone at the end of the notebook, followed by its exercise's
   check cell with the stub removed. It fails when either raises, or when a checker
   still reports "not attempted". Run one chapter's solutions with
   ``.venv/bin/python -m pytest --nbval-lax --solutions book/03_softmax.ipynb``.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import symtable
import textwrap
from pathlib import Path

import pytest
from test_execute import execute_chapter

from booktools import execute
from booktools.paths import CHAPTERS
from booktools.solutions import (
    all_exercises,
    as_python,
    notebook_cells,
    without_stubs,
)

IPYTHON_NAMES = {"display", "get_ipython", "In", "Out"}


# --------------------------------------------------------------------------------------
# Reading code: IPython syntax, free names, stubs
# --------------------------------------------------------------------------------------


def bound_names(src: str) -> set[str]:
    """Names that code binds at module level (assignments, imports, defs, loops...)."""
    table = symtable.symtable(as_python(src), "<cell>", "exec")
    return {
        s.get_name()
        for s in table.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }


def free_names(src: str) -> set[str]:
    """Names that code reads from the global namespace without binding them itself."""
    table = symtable.symtable(as_python(src), "<solution>", "exec")
    used: set[str] = set()

    def walk(t: symtable.SymbolTable) -> None:
        for s in t.get_symbols():
            if s.is_referenced() and (t.get_type() == "module" or s.is_global()):
                used.add(s.get_name())
        for child in t.get_children():
            walk(child)

    walk(table)
    return used - bound_names(src) - set(dir(builtins)) - IPYTHON_NAMES


@functools.cache
def chapter_names(path: Path) -> frozenset[str]:
    """What the chapter's own code cells define: what a pasted solution can rely on."""
    return frozenset(
        name
        for c in notebook_cells(path)
        if c["type"] == "code"
        for name in bound_names(c["source"])
    )


# --------------------------------------------------------------------------------------
# 1. Static checks (fast)
# --------------------------------------------------------------------------------------

EXERCISES = all_exercises()


def test_the_book_has_exercises_with_code_solutions():
    assert len(CHAPTERS) >= 12, [p.name for p in CHAPTERS]
    with_code = [ex for ex in EXERCISES if ex.code]
    assert len(EXERCISES) >= 40 and len(with_code) >= 25, (
        f"{len(EXERCISES)} exercises, {len(with_code)} with code: some were missed"
    )


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_exercise_has_one_solution(ex):
    assert ex.solutions == 1, f"{ex.name} has {ex.solutions} solutions, expected 1"
    if ex.check_cells:
        assert ex.code, (
            f"{ex.name} asks for code (its cell has a stub); its solution shows none"
        )


@pytest.mark.parametrize(
    "ex", [ex for ex in EXERCISES if ex.code], ids=lambda ex: ex.name
)
def test_solution_code_parses_and_uses_only_defined_names(ex):
    for block in ex.code:
        try:
            ast.parse(as_python(block))
        except SyntaxError as err:
            pytest.fail(f"{ex.name}: the solution does not parse: {err}\n{block}")
    code = "\n".join(ex.code)
    check = "\n".join(without_stubs(c) for c in ex.check_cells)
    unknown = free_names(code + "\n" + check) - chapter_names(ex.notebook)
    assert not unknown, (
        f"{ex.name}: the solution uses {sorted(unknown)}, which neither the solution "
        "nor the chapter's code defines (import it in the solution)"
    )


def test_free_names_catch_a_missing_import():
    code = "def f(q):\n    return math.sqrt(q.size(-1)) * [x for x in range(3)][0]\n"
    assert free_names(code) == {"math"}
    assert free_names("import math\n" + code) == set()
    assert bound_names("for i, (a, b) in enumerate([]):\n    pass") >= {"i", "a", "b"}


def test_stubs_are_removed_from_check_cells():
    cell = textwrap.dedent(
        """\
        from x import check
        @decorate
        def my_fn(a):
            raise NotImplementedError("your code here")
        def helper():
            return 1
        check(my_fn)
        """
    )
    out = without_stubs(cell)
    assert "NotImplementedError" not in out and "@decorate" not in out
    assert "def helper" in out and "check(my_fn)" in out


NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "source": "import math\nx = 3\n"},
        {
            "cell_type": "markdown",
            "source": "```{exercise} Good\n:label: ex-good\n\nDouble x.\n```",
        },
        {
            "cell_type": "code",
            "source": "def double(v):\n    raise NotImplementedError\n\n"
            "try:\n    assert double(x) == 6, 'wrong'\n    print('correct')\n"
            "except NotImplementedError:\n    print('not attempted yet')\n",
        },
        {
            "cell_type": "markdown",
            "source": "````{solution} ex-good\n:class: dropdown\n\n```python\n"
            "def double(v):\n    return 2 * v\n```\n````\n\n"
            "```{exercise} Broken\n:label: ex-broken\n\nSay it.\n```\n\n"
            "````{solution} ex-broken\n```python\nprint(undefined_name)\n```\n````\n\n"
            "```{exercise} Stub\n:label: ex-stub\n\nTriple x.\n```",
        },
        {
            "cell_type": "code",
            "source": "def triple(v):\n    raise NotImplementedError\n\n"
            "try:\n    print(triple(x))\n"
            "except NotImplementedError:\n    print('not attempted yet')\n",
        },
        {
            "cell_type": "markdown",
            "source": "````{solution} ex-stub\n```python\n"
            "def triple(v):\n    raise NotImplementedError('forgot')\n```\n````",
        },
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 4,
}


@pytest.mark.slow  # a notebook kernel: not in make test-fast
def test_solutions_run_after_the_chapter_in_its_kernel(tmp_path):
    """A made-up chapter: the good solution passes, the broken and unfinished fail."""
    import nbformat

    for c in NOTEBOOK["cells"]:
        if c["cell_type"] == "code":
            c.update(outputs=[], execution_count=None, metadata={})
        else:
            c["metadata"] = {}
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps(NOTEBOOK), encoding="utf-8")
    status, tests, executed = execute_chapter(path, tmp_path, solutions=True)
    solutions = {
        name.removeprefix("solution "): why
        for name, why in tests.items()
        if name.startswith("solution ")
    }
    assert status == 1
    assert set(solutions) == {"ex-good", "ex-broken", "ex-stub"}
    assert solutions["ex-good"] is None, solutions["ex-good"]
    assert "NameError" in solutions["ex-broken"], solutions
    assert "undefined_name" in solutions["ex-broken"], solutions
    assert "not attempted" in solutions["ex-stub"], solutions
    failures = [name for name, why in tests.items() if why is not None]
    assert len(failures) == 2, failures
    # the executed chapter keeps its own cells only, with their outputs (the cache
    # stores a notebook's code cells)
    executed = nbformat.from_dict(executed)
    code = [c for c in NOTEBOOK["cells"] if c["cell_type"] == "code"]
    assert ["".join(c.source) for c in executed.cells] == [c["source"] for c in code]
    assert executed.cells[1].outputs[0]["text"] == "not attempted yet\n"


@pytest.mark.slow  # a notebook kernel: not in make test-fast
def test_a_failing_chapter_cell_fails_the_run_and_the_chapter_is_not_cached(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("raise ValueError('shape (2, 3) is wrong')"),
        nbformat.v4.new_code_cell("print('never')"),
    ]
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    status, tests, executed = execute_chapter(path, tmp_path, solutions=True)
    assert status == 1 and executed is None
    failures = [why for why in tests.values() if why is not None]
    assert len(failures) == 1 and "shape (2, 3) is wrong" in failures[0], tests


def test_every_chapter_has_a_typical_time_so_a_fresh_clone_starts_the_slowest_first():
    typical = json.loads(execute.TYPICAL_TIMES.read_text())
    assert sorted(typical) == sorted(p.name for p in CHAPTERS), (
        "booktools/notebook-seconds.json must list every chapter: copy "
        "_build/notebook-times.json over it after a clean `make test`"
    )
    assert all(seconds > 0 for seconds in typical.values())
