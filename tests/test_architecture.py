"""ARCHITECTURE.md stays a true map: its layer drawings are the import-linter contracts
of pyproject.toml (which `make lint` enforces), and it names every module of the library
and of the build package, and every test file.
"""

from __future__ import annotations

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


def _modules(package: str) -> list[str]:
    base = ROOT / package
    out = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).with_suffix("")
        if rel.name == "__init__":
            rel = rel.parent
            if not rel.parts:
                continue
        out.append(".".join(rel.parts))
    return out


@pytest.mark.parametrize("package", ["transformer_lib", "booktools"])
def test_every_module_is_on_the_map(package):
    missing = [
        name
        for name in _modules(package)
        if f"`{name}`" not in MAP
        and f"`{name.rsplit('.', 1)[-1]}`" not in MAP
        and f"`{name.replace('.', '/')}" not in MAP
    ]
    assert not missing, (
        f"ARCHITECTURE.md does not name these {package} modules: {missing}"
    )


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
