"""The formula index (book/formulas.md): every labelled equation of the book, read from
the chapters, with the formula as the chapter writes it, a link to it, the library
function that computes it and the test that checks it.

When a chapter adds, removes or edits a labelled equation, refresh the generated
columns (Label, Article, Formula, Where) with

    .venv/bin/python -m booktools.formula_index --update

then fill in the Library and Test cells of any new row (they read TODO until you do).
``tests/test_formula_index.py`` checks the page against the chapters.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
INDEX = BOOK / "formulas.md"
GLOSSARY = BOOK / "glossary.md"
BIBLIOGRAPHY = BOOK / "bibliography.md"
TABLE_START, TABLE_END = "% BEGIN FORMULA TABLE", "% END FORMULA TABLE"
HEADER = (
    "| Label | Article | Formula | Where | Library | Test |\n"
    "|:--|:-:|:--|:--|:--|:--|\n"
)

# $$ ... $$ (eq-x)   |   ```{math} / :::{math} with :label: eq-x   |   \label{eq-x}
# inside amsmath
DOLLAR_LABEL = re.compile(r"[ \t]*\((eq-[\w.-]+)\)")  # right after the closing $$
MATH_DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{math\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)
LABEL_OPTION = re.compile(r"^:label:[ \t]*(eq-[\w.-]+)[ \t]*$", re.M)
TEX_LABEL = re.compile(r"\\label\{(eq-[\w.-]+)\}")
HEADING = re.compile(r"^#{1,6} ", re.M)
TARGET = re.compile(
    r"^\((?P<label>[\w.-]+)\)=[ \t]*$", re.M
)  # MyST targets such as (ch-masks)=
ANY_EQ_LABEL = re.compile(
    r"(?:\$\$[ \t]*\(|:label:[ \t]*|\\label\{)(eq-[\w.-]+)"
)  # every way a label is written


@dataclass
class Equation:
    label: str
    tex: str  # the LaTeX as the chapter writes it
    page: str  # e.g. "04_masks.ipynb"
    chapter: str | None  # the page's (ch-...)= label
    section: (
        str | None
    )  # the nearest (label)= target above the equation, if not the chapter's own


@dataclass
class Row:
    label: str
    article: str  # the formula's number in the first source article, "prose" or "—"
    formula: str
    where: str
    library: str
    test: str


# --------------------------------------------------------------------------------------
# Reading the book
# --------------------------------------------------------------------------------------


def book_pages() -> list[Path]:
    """Chapters in book order, then the markdown pages (the appendices included)."""
    return sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("*.md"))


def page_cells(path: Path) -> list[str]:
    """The markdown of a page: a .md file as one cell, or a notebook's markdown cells in
    order."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
    ]


def page_markdown(path: Path) -> str:
    return "\n\n".join(page_cells(path))


def display_math(text: str):
    """(start, tex, label or None) of every $$ ... $$ block: the delimiters pair up in
    order, as in MyST."""
    marks = [m.start() for m in re.finditer(r"\$\$", text)]
    for open_, close in zip(marks[0::2], marks[1::2], strict=False):
        label = DOLLAR_LABEL.match(text, close + 2)
        yield open_, text[open_ + 2 : close], label.group(1) if label else None


def _flat(tex: str) -> str:
    """One line, single spaces: the form the index cell holds."""
    return " ".join(tex.split())


def _only_target(between: str) -> bool:
    """True when the text between a target and a heading is just the target line."""
    return not between.split(")=", 1)[1].strip()


def labelled_equations() -> list[Equation]:
    """Every labelled equation of the book, in reading order."""
    found: list[Equation] = []
    for path in book_pages():
        text = page_markdown(path)
        targets = [(m.start(), m.group("label")) for m in TARGET.finditer(text)]
        chapter = next(
            (lab for _, lab in targets if lab.startswith(("ch-", "app-"))), None
        )
        hits: list[tuple[int, str, str]] = []
        offset = 0
        for cell in page_cells(path):  # $$ pairs never span cells
            for start, tex, label in display_math(cell):
                if label:
                    hits.append((offset + start, label, tex))
            offset += len(cell) + 2  # page_markdown joins the cells with a blank line
        for m in MATH_DIRECTIVE.finditer(text):
            body = m.group("body")
            label = LABEL_OPTION.search(body)
            if label:
                tex = "\n".join(
                    line for line in body.splitlines() if not line.startswith(":")
                )
                hits.append((m.start(), label.group(1), tex))
        for m in TEX_LABEL.finditer(text):
            hits.append((m.start(), m.group(1), ""))
        headings = [m.start() for m in HEADING.finditer(text)]
        for pos, label, tex in sorted(hits):
            # the heading the equation sits under, and the target written right above
            # that heading
            heading = max((h for h in headings if h < pos), default=None)
            section = next(
                (
                    lab
                    for p, lab in targets
                    if heading is not None
                    and p < heading
                    and _only_target(text[p:heading])
                ),
                None,
            )
            section = None if section == chapter else section
            found.append(Equation(label, _flat(tex), path.name, chapter, section))
    return found


def every_label_written() -> set[str]:
    """Each eq- label however it is written, a safety net for the parser above."""
    return {
        m.group(1)
        for path in book_pages()
        for m in ANY_EQ_LABEL.finditer(page_markdown(path))
    }


# --------------------------------------------------------------------------------------
# Reading and writing the index
# --------------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def index_rows(text: str | None = None) -> list[Row]:
    text = INDEX.read_text(encoding="utf-8") if text is None else text
    rows = []
    for line in text.splitlines():
        if line.startswith("| `eq-"):
            cells = _cells(line)
            assert len(cells) == 6, (
                f"an index row needs 6 cells, got {len(cells)}: {line}"
            )
            rows.append(Row(cells[0].strip("`"), *cells[1:]))
    return rows


def formula_cell(eq: Equation) -> str:
    return "$" + eq.tex.replace("|", r"\vert ") + "$" if eq.tex else "—"


def where_cell(eq: Equation) -> str:
    parts = [f"{{ref}}`{eq.chapter}`"] if eq.chapter else []
    if eq.section:
        parts.append(f"{{ref}}`{eq.section}`")
    return " › ".join(parts) + f" · eq. {{eq}}`{eq.label}`"


def article_cell(label: str) -> str:
    """The formula's number in the first source article, "prose" or "—"."""
    if label in ARTICLE_NUMBERS:
        return str(ARTICLE_NUMBERS[label])
    return "prose" if label in ARTICLE_PROSE else "—"


def update_index() -> None:
    """Rewrite the table: Label, Article, Formula and Where from the chapters and
    ARTICLE_NUMBERS; Library and Test kept (TODO when new)."""
    text = INDEX.read_text(encoding="utf-8")
    head, rest = text.split(TABLE_START + "\n", 1)
    _, tail = rest.split(TABLE_END, 1)
    kept = {r.label: r for r in index_rows(text)}
    lines = []
    for eq in labelled_equations():
        old = kept.pop(eq.label, None)
        library, test = (old.library, old.test) if old else ("TODO", "TODO")
        cells = [f"`{eq.label}`", article_cell(eq.label), formula_cell(eq)]
        cells += [where_cell(eq), library, test]
        lines.append(f"| {' | '.join(cells)} |\n")
        if not old:
            print(
                f"new row: {eq.label} ({eq.page}): fill in its Library and Test cells"
            )
    for label in kept:
        print(f"dropped row: {label} (no longer in the book)")
    INDEX.write_text(
        head + TABLE_START + "\n" + HEADER + "".join(lines) + TABLE_END + tail,
        encoding="utf-8",
    )


# --------------------------------------------------------------------------------------
# Resolving library and test names
# --------------------------------------------------------------------------------------


def resolve_library(name: str) -> object:
    """`tl.a.b` -> transformer_lib.a.b, importing a submodule (tl.exercises) when
    needed."""
    parts = name.split(".")
    assert parts[0] == "tl", f"library names start with tl., got {name}"
    obj: object = importlib.import_module("transformer_lib")
    path = "transformer_lib"
    for part in parts[1:]:
        path += "." + part
        if not hasattr(obj, part):
            try:
                importlib.import_module(path)
            except ImportError:
                pass
        obj = getattr(obj, part)  # AttributeError names what is missing
    return obj


@functools.cache
def _module_body(path: Path) -> list[ast.stmt]:
    return ast.parse(path.read_text(encoding="utf-8")).body


def named_test_exists(ref: str) -> bool:
    """`tests/test_x.py::test_name` or `tests/test_x.py::TestClass::test_name` (a
    [param] id is ignored)."""
    file, *names = re.sub(r"\[.*\]$", "", ref).split("::")
    path = ROOT / file
    if not path.is_file() or not names or not names[-1].startswith("test"):
        return False
    body = _module_body(path)
    for name in names:
        node = next(
            (
                n
                for n in body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name
            ),
            None,
        )
        if node is None:
            return False
        body = getattr(node, "body", [])
    return True


# The first source article's own numbering, 1-25. Its formulas were images, lost from
# its text, but the sentence before each says which formula follows: formula 1 is Q, K
# and V together, formula 11 is the standard deviation sigma (the book labels its
# square), and the positional encoding is two formulas, sine and cosine. The final
# linear layer and softmax the article describes only in words.
ARTICLE_NUMBERS = {
    "eq-q": 1,
    "eq-k": 1,
    "eq-v": 1,
    "eq-scores": 2,
    "eq-scaled-scores": 3,
    "eq-softmax": 4,
    "eq-weighted-sum": 5,
    "eq-multi-head": 6,
    "eq-ffn": 7,
    "eq-residual": 8,
    "eq-layer-norm-article": 9,
    "eq-ln-mean": 10,
    "eq-ln-var": 11,
    "eq-pe-sin": 12,
    "eq-pe-cos": 13,
    "eq-x-pos": 14,
    "eq-enc-attn": 15,
    "eq-enc-add-norm-1": 16,
    "eq-enc-ffn": 17,
    "eq-enc-out": 18,
    "eq-y-pos": 19,
    "eq-dec-masked-attn": 20,
    "eq-dec-add-norm-2": 21,
    "eq-dec-cross-attn": 22,
    "eq-dec-add-norm-3": 23,
    "eq-dec-ffn": 24,
    "eq-dec-out": 25,
}
ARTICLE_PROSE = ["eq-output-softmax"]
FIRST_ARTICLE = list(ARTICLE_NUMBERS) + ARTICLE_PROSE
BEYOND_THE_ARTICLE = [
    "eq-causal-mask",
    "eq-causal-mask-offset",
    "eq-padding-mask",
    "eq-combined-mask",
    "eq-gqa",
    "eq-pre-ln",
    "eq-rope",
    "eq-kv-memory",
    "eq-kv-memory-total",
]


def main(argv: list[str]) -> int:
    if argv == ["--update"]:
        update_index()
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
