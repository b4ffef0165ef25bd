"""A chapter's exercises and their solutions, read from the notebook's cells.

A chapter's exercises are sphinx-exercise directives in its markdown cells, and each
solution is a ``{solution}`` directive whose code sits in fenced ``python`` blocks (or,
in the gated form, code cells between ``{solution-start}`` and ``{solution-end}``). An
implementation exercise also has a code cell with a stub (``raise NotImplementedError``)
and a check.

:mod:`booktools.execute` runs each solution after its chapter, in the chapter's kernel
(:func:`runner_source`); ``tests/test_solutions.py`` checks them statically.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from .paths import CHAPTERS

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


def notebook_cells(path: Path) -> list[dict]:
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
    for cell in notebook_cells(path):
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


def as_python(src: str) -> str:
    """IPython cell source (magics, shell escapes) as plain Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(textwrap.dedent(src))


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
