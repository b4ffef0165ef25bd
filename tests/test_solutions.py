"""Every exercise solution runs: a solution in a dropdown is code a learner will paste.

A chapter's exercises are sphinx-exercise directives in its markdown cells, and each
solution is a ``{solution}`` directive whose code sits in fenced ``python`` blocks (or,
in the gated form, code cells between ``{solution-start}`` and ``{solution-end}``). An
implementation exercise also has a code cell with a stub (``raise NotImplementedError``)
and a check.

Two layers keep the solutions working:

1. **Static, here** (``make test-lib``, a second): every exercise has exactly one
   solution; every solution's code parses; every name it reads is defined by the
   solution, by the chapter's code cells or by Python; an implementation exercise's
   solution has code.
2. **Executed, with the chapter** (``make test-notebooks``): the repository's
   ``conftest.py`` hands :func:`pytest_collection_modifyitems` to pytest. When nbval
   runs a chapter, each of its solutions becomes one more test item after the chapter's
   last cell, in the same kernel, so the chapter is executed once for its cells and its
   solutions together. A solution runs in a copy of the chapter's namespace, as if a
   learner had pasted it alone at the end of the notebook, followed by its exercise's
   check cell with the stub removed. It fails when either raises, or when a checker
   still reports "not attempted". Run one chapter's solutions with
   ``pytest --nbval-lax --nbval-current-env book/03_softmax.ipynb``.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import os
import re
import subprocess
import symtable
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]*.ipynb"))  # 07b_depth too

# ```{exercise} / ````{solution} label / :::{exercise} ... up to the same fence
DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<kind>exercise|solution)\}(?P<arg>[^\n]*)\n"
    r"(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)
# the gated form: code cells between {solution-start} label and {solution-end}
GATE = re.compile(
    r"^(`{3,}|:{3,})\{(?P<kind>(?:exercise|solution)-(?:start|end))\}(?P<arg>[^\n]*)$",
    re.M,
)
LABEL = re.compile(r"^:label:[ \t]*(\S+)[ \t]*$", re.M)
CODE_BLOCK = re.compile(
    r"^(?P<fence>`{3,})[ \t]*(?:\{code-cell\}[ \t]*)?(?:python3?|py|ipython3?)[ \t]*\n"
    r"(?P<code>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)
NOT_ATTEMPTED = re.compile(r"not attempted", re.I)
IPYTHON_NAMES = {"display", "get_ipython", "In", "Out"}


@dataclass
class Exercise:
    notebook: Path
    label: str
    check_cells: list[str] = field(default_factory=list)  # code cells with a stub
    solutions: int = 0  # how many {solution} directives name this exercise
    code: list[str] = field(default_factory=list)  # the solution's code, in order

    @property
    def name(self) -> str:
        return f"{self.notebook.name}::{self.label}"


def _cells(path: Path) -> list[dict]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        {"type": c["cell_type"], "source": "".join(c["source"])} for c in nb["cells"]
    ]


@functools.cache
def exercises(path: Path) -> tuple[Exercise, ...]:
    """The exercises of one notebook, in order, with their solutions and check cells."""
    found: dict[str, Exercise] = {}
    orphans: list[str] = []
    current: Exercise | None = None  # the exercise a following code cell belongs to
    gated: Exercise | None = None  # inside {solution-start} ... {solution-end}
    for cell in _cells(path):
        text = cell["source"]
        if cell["type"] == "code":
            if gated is not None:
                gated.code.append(text)
            elif current is not None and "NotImplementedError" in text:
                current.check_cells.append(text)
            continue
        if cell["type"] != "markdown":
            continue
        events = [(m.start(), m.group("kind"), m) for m in DIRECTIVE.finditer(text)]
        events += [(m.start(), m.group("kind"), m) for m in GATE.finditer(text)]
        for _, kind, m in sorted(events, key=lambda e: e[0]):
            if kind in ("exercise", "exercise-start"):
                body = m.group("body") if kind == "exercise" else text[m.end() :]
                label = LABEL.search(body)
                if label:
                    current = found.setdefault(
                        label.group(1), Exercise(path, label.group(1))
                    )
            elif kind in ("solution", "solution-start"):
                target = found.get(m.group("arg").strip())
                if target is None:
                    orphans.append(m.group("arg").strip())
                    continue
                target.solutions += 1
                if kind == "solution":
                    target.code += [
                        b.group("code") for b in CODE_BLOCK.finditer(m.group("body"))
                    ]
                else:
                    gated = target
                if current is target:
                    current = None
            elif kind == "solution-end":
                gated = None
    if orphans:
        raise AssertionError(
            f"{path.name}: solutions for exercises this page does not define: {orphans}"
        )
    return tuple(found.values())


def all_exercises() -> list[Exercise]:
    return [ex for path in CHAPTERS for ex in exercises(path)]


# --------------------------------------------------------------------------------------
# Reading code: IPython syntax, free names, stubs
# --------------------------------------------------------------------------------------


def as_python(src: str) -> str:
    """IPython cell source (magics, shell escapes) as plain Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(textwrap.dedent(src))


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
        for c in _cells(path)
        if c["type"] == "code"
        for name in bound_names(c["source"])
    )


def without_stubs(src: str) -> str:
    """A check cell without its stub: top-level defs that raise NotImplementedError."""
    src = as_python(src)
    lines = src.splitlines(keepends=True)
    drop: set[int] = set()
    for node in ast.parse(src).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raises = any(
                isinstance(n, ast.Raise)
                and "NotImplementedError" in ast.unparse(n.exc or ast.Pass())
                for n in ast.walk(node)
            )
            if raises:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                drop.update(range(first - 1, node.end_lineno))
    return "".join(line for i, line in enumerate(lines) if i not in drop)


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


# --------------------------------------------------------------------------------------
# 2. Execution, in nbval's kernel after the chapter (make test-notebooks)
# --------------------------------------------------------------------------------------

RUNNER = """\
def __run_solution(label, parts):
    import linecache

    namespace = dict(globals())  # as if pasted alone at the end of the chapter
    for kind, src in parts:
        filename = f"<{kind} of {label}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        exec(compile(src, filename, "exec"), namespace)


__solution_parts = %r
try:
    __run_solution(%r, __solution_parts)
finally:
    del __run_solution, __solution_parts
"""


def runner_source(ex: Exercise) -> tuple[str, str]:
    """(the code sent to the kernel, the same code as a failure report shows it)."""
    parts = [("solution", as_python(c)) for c in ex.code]
    parts += [("check", without_stubs(c)) for c in ex.check_cells]
    readable = "\n".join(f"# --- {kind} of {ex.label}\n{src}" for kind, src in parts)
    return RUNNER % (parts, ex.label), readable


@functools.cache
def _solution_item_class():
    from nbval.plugin import IPyNbCell, NbCellError

    class SolutionItem(IPyNbCell):
        """One exercise's solution, run in the chapter's kernel after its cells."""

        def __init__(self, name, parent, cell_num, cell, options, exercise, readable):
            super().__init__(name, parent, cell_num, cell, options)
            self.exercise, self.readable = exercise, readable

        def raise_cell_error(self, message, *args, **kwargs):
            raise NbCellError(self.cell_num, message, self.readable, *args, **kwargs)

        def runtest(self):
            super().runtest()
            printed = "".join(
                out.get("text", "")
                for out in self.test_outputs or []
                if out.get("output_type") == "stream"
            )
            if NOT_ATTEMPTED.search(printed):
                self.raise_cell_error(
                    f"the solution of {self.exercise.label} leaves its exercise "
                    f"'not attempted':\n{printed}"
                )

        def reportinfo(self):
            return self.path, 0, self.nodeid

    return SolutionItem


def solution_items(notebook_item) -> list:
    """Test items for the solutions of the notebook ``notebook_item`` belongs to."""
    import nbformat

    SolutionItem = _solution_item_class()
    parent = notebook_item.parent
    items = []
    for i, ex in enumerate(exercises(Path(parent.path))):
        if not ex.code:
            continue
        source, readable = runner_source(ex)
        options = {"check": False, "skip": False, "check_exception": False}
        items.append(
            SolutionItem.from_parent(
                parent,
                name=f"solution {ex.label}",
                cell_num=1000 + i,
                cell=nbformat.v4.new_code_cell(source),
                options=options,
                exercise=ex,
                readable=readable,
            )
        )
    return items


def pytest_collection_modifyitems(session, config, items):
    """Add each notebook's solutions after its last cell (nbval sees code cells)."""
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # no nbval: no notebooks are being run
        return
    SolutionItem = _solution_item_class()
    last: dict[object, int] = {}
    for i, item in enumerate(items):
        if isinstance(item, IPyNbCell) and not isinstance(item, SolutionItem):
            last[item.parent] = i
    for parent, i in sorted(last.items(), key=lambda kv: -kv[1]):
        if any(isinstance(it, SolutionItem) and it.parent is parent for it in items):
            continue  # already added (the hook ran twice)
        items[i + 1 : i + 1] = solution_items(items[i])


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
    "nbformat_minor": 5,
}


def test_nbval_runs_solutions_after_the_chapter(tmp_path):
    """A made-up chapter: the good solution passes, the broken and unfinished fail."""
    pytest.importorskip("nbval")
    for c in NOTEBOOK["cells"]:
        if c["cell_type"] == "code":
            c.update(outputs=[], execution_count=None, metadata={})
        else:
            c["metadata"] = {}
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps(NOTEBOOK), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "test_solutions", "--nbval-lax",
         "--nbval-current-env", "-p", "no:cacheprovider", "-rA", "-q", str(path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert re.search(r"PASSED \S*chapter\.ipynb::solution ex-good", out), out
    assert re.search(r"FAILED \S*chapter\.ipynb::solution ex-broken", out), out
    assert re.search(r"FAILED \S*chapter\.ipynb::solution ex-stub", out), out
    assert "NameError" in out and "not attempted" in out, out
