"""ARCHITECTURE.md stays a true map: its layer drawings are the import-linter contracts
of pyproject.toml (which `make lint` enforces); its module index is the one
``booktools.module_map`` generates from the modules' docstrings and ``__all__``; it
names every test file; and every module, file or object path that it or any docstring
of the code names exists.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
MAP = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
    "tool"
]["importlinter"]["contracts"]
LAYER_CONTRACTS = [c for c in CONTRACTS if c["type"] == "layers"]


def drawing(container: str) -> list[str]:
    """The layers of the ```text drawing that follows the heading naming `container`,
    top to bottom: the first column of each line that is not a `|` connector or a
    continuation (indented) line."""
    heading = re.search(rf"^#+ The layers of `{re.escape(container)}`\s*$", MAP, re.M)
    assert heading, f"ARCHITECTURE.md has no heading 'The layers of `{container}`'"
    block = re.search(r"```text\n(.*?)```", MAP[heading.end() :], re.S)
    assert block, f"no ```text drawing under the layers of {container}"
    layers = []
    for line in block.group(1).splitlines():
        if not line.strip() or line.startswith(" ") or line.strip() == "|":
            continue
        layers.append(re.split(r"\s{2,}", line.strip())[0])
    return layers


def contract_layers(contract: dict) -> list[str]:
    """A contract's layers as the drawing writes them: no parentheses, `:` and `|`
    with single spaces."""
    return [
        re.sub(r"\s*([:|])\s*", r" \1 ", layer.replace("(", "").replace(")", ""))
        for layer in contract["layers"]
    ]


@pytest.mark.parametrize(
    "contract", LAYER_CONTRACTS, ids=[c["name"] for c in LAYER_CONTRACTS]
)
def test_layer_drawing_is_the_import_linter_contract(contract):
    (container,) = contract["containers"]
    assert drawing(container) == contract_layers(contract), (
        f"ARCHITECTURE.md's drawing of {container} differs from the contract "
        f"{contract['name']!r} in pyproject.toml; redraw it from the contract"
    )


def test_the_module_index_is_generated_from_the_modules():
    """Every module of transformer_lib and booktools has its row, with its docstring's
    first sentence and public names as they are now."""
    from booktools import module_map

    assert module_map.current(MAP) == module_map.index(), (
        "ARCHITECTURE.md's module index is out of date: "
        "python -m booktools.module_map --update"
    )
    for package in module_map.PACKAGES:
        for name, _ in module_map.modules(package):
            assert f"| `{name}` |" in module_map.current(MAP), name


def test_every_test_file_is_on_the_map():
    missing = [
        p.name for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name not in MAP
    ]
    assert not missing, f"ARCHITECTURE.md does not name these test files: {missing}"


def test_the_checks_catch_a_drawing_that_drifted(monkeypatch):
    """A map that no longer matches the contract must fail the check above."""
    contract = LAYER_CONTRACTS[0]
    (container,) = contract["containers"]
    top = drawing(container)[0]
    start = MAP.index(f"The layers of `{container}`")  # drift inside the drawing
    drifted = MAP[:start] + MAP[start:].replace(top, top + " : extra", 1)
    monkeypatch.setitem(globals(), "MAP", drifted)
    with pytest.raises(AssertionError, match="differs from the contract"):
        test_layer_drawing_is_the_import_linter_contract(contract)


# a path of the repository named in prose: a file under one of its folders, or the
# top-level files; generated outputs (_build/, book/_static/live/) and patterns
# (NN, NAME, *, <...>, {...}) are not paths to check
FOLDERS = (
    r"(?:book|booktools|transformer_lib|tests|benchmarks|scripts|locales|binder"
    r"|\.github)"
)
FILE_PATH = re.compile(
    rf"(?<![\w./-])(?:{FOLDERS}/[\w./-]*[\w]|"
    r"(?:viz|demos|exercises|parallel|_ext|_templates|_static)/[\w./-]*\.\w+|"
    r"(?:ARCHITECTURE|README|UPSTREAM|LICENSE)[\w.-]*|Makefile|pyproject\.toml|"
    r"requirements\.(?:txt|lock)|_config\.yml|_toc\.yml)"
)
DOTTED = re.compile(r"(?<![\w.])(?:transformer_lib|booktools)(?:\.\w+)+")
PATTERN = re.compile(
    r"NN|NAME|\*|<|\{|_build|_static/live|LC_MESSAGES/book/|benchmarks/results/"
    r"|\bname\.py|test_x\.py|\.a\.b\b"
)
SUBFOLDERS = ["", "transformer_lib/", "book/", "booktools/"]


def _docstrings() -> list[tuple[str, str]]:
    """(where, text) of every docstring of the library, the build package, the book's
    extensions, the tests and the benchmarks."""
    out = []
    for folder in ("transformer_lib", "booktools", "book/_ext", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in [tree, *ast.walk(tree)]:
                if isinstance(
                    node,
                    (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef),
                ):
                    doc = ast.get_docstring(node)
                    if doc:
                        rel = path.relative_to(ROOT)
                        out.append((f"{rel}:{getattr(node, 'lineno', 1)}", doc))
    return out


def _path_exists(name: str) -> bool:
    name = name.rstrip(".")
    return any((ROOT / (prefix + name)).exists() for prefix in SUBFOLDERS)


def _object_exists(dotted: str) -> bool:
    """``a.b.c``: a module, or an attribute of the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def named_paths(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(where, name) of every repository path and every dotted name of the two
    packages that the texts name, that does not exist."""
    missing = []
    for where, text in texts:
        for m in FILE_PATH.finditer(text):
            if not PATTERN.search(m.group()) and not _path_exists(m.group()):
                missing.append((where, m.group()))
        for m in DOTTED.finditer(text):
            if not PATTERN.search(m.group()) and not _object_exists(m.group()):
                missing.append((where, m.group()))
    return missing


def test_every_path_named_in_the_map_exists():
    assert not named_paths([("ARCHITECTURE.md", MAP)])


def test_every_path_named_in_a_docstring_exists():
    assert not named_paths(_docstrings())


def test_the_path_check_catches_a_missing_module():
    """The check the loophole let through: a module named in backticks that does not
    exist fails, wherever else its name appears."""
    text = "`transformer_lib.viz.explorer`, `viz/explorer.py`, `booktools/nothere.py`"
    assert [name for _, name in named_paths([("t", text)])] == [
        "viz/explorer.py",
        "booktools/nothere.py",
        "transformer_lib.viz.explorer",
    ]
