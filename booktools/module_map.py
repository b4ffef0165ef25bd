"""ARCHITECTURE.md's module index, generated from the modules themselves.

    python -m booktools.module_map --update   # rewrite the index in ARCHITECTURE.md
    python -m booktools.module_map --check    # exit 1 if it is out of date

Each module of ``transformer_lib`` and ``booktools`` gets one row: its name, the first
sentence of its docstring, and its first public names (its ``__all__``, or else the
functions, classes and constants it defines whose names do not start with ``_``). The
modules are read with :mod:`ast`, not imported, so the index is the source's.
``tests/test_architecture.py`` fails while the index differs from what this writes.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from .paths import ROOT

PACKAGES = ("transformer_lib", "booktools")
MAP = ROOT / "ARCHITECTURE.md"
START = "<!-- module index: python -m booktools.module_map --update -->"
END = "<!-- end of the module index -->"
SHOWN = 8  # public names shown per module


def modules(package: str) -> list[tuple[str, Path]]:
    """(dotted name, file) of every module of ``package``, its own ``__init__`` too."""
    base = ROOT / package
    out = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out.append((".".join((package, *parts)), path))
    return out


def _all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return [ast.literal_eval(e) for e in node.value.elts]
    return None


def public_names(tree: ast.Module) -> list[str]:
    """``__all__``, or the public names the module defines at its top level."""
    listed = _all(tree)
    if listed is not None:
        return listed
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [
                t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()
            ]
    return [n for n in names if not n.startswith("_")]


def summary(tree: ast.Module) -> str:
    """The first sentence of the module's docstring (its first line, continued where
    the sentence wraps)."""
    doc = ast.get_docstring(tree)
    if not doc:
        return ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0]


def rows(package: str) -> list[str]:
    out = []
    for name, path in modules(package):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = public_names(tree)
        shown = ", ".join(f"`{n}`" for n in names[:SHOWN])
        if len(names) > SHOWN:
            shown += f" and {len(names) - SHOWN} more"
        line = summary(tree).replace("|", "\\|")
        out.append(f"| `{name}` | {line} | {shown} |")
    return out


def index() -> str:
    """The index, as ARCHITECTURE.md holds it between its two markers."""
    parts = [START]
    for package in PACKAGES:
        parts += ["", f"`{package}`:", "", "| module | what it is | public names |"]
        parts += ["|---|---|---|", *rows(package)]
    return "\n".join([*parts, "", END])


def current(text: str) -> str:
    """The index as ARCHITECTURE.md holds it now."""
    if START not in text or END not in text:
        raise SystemExit(f"{MAP.name} has no module index between {START} and {END}")
    return text[text.index(START) : text.index(END) + len(END)]


def update() -> bool:
    """Rewrite the index; True if it changed."""
    text = MAP.read_text(encoding="utf-8")
    new = text.replace(current(text), index())
    MAP.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str]) -> int:
    if argv == ["--update"]:
        print("updated" if update() else "up to date")
        return 0
    if argv == ["--check"]:
        same = current(MAP.read_text(encoding="utf-8")) == index()
        print(
            "up to date"
            if same
            else "out of date: python -m booktools.module_map --update"
        )
        return 0 if same else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
