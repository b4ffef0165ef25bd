"""The appendix pages stay honest: the formula index (book/formulas.md) lists every labelled
equation of the book, with the formula as the chapter writes it, a link to it, a library function
that exists and a test that exists; the glossary (book/glossary.md) links only to real chapters and
marks its Chinese for the browser.

When a chapter adds, removes or edits a labelled equation, refresh the generated columns with

    .venv/bin/python tests/test_formula_index.py --update

then fill in the Library and Test cells of any new row (they read TODO until you do).
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
INDEX = BOOK / "formulas.md"
GLOSSARY = BOOK / "glossary.md"
TABLE_START, TABLE_END = "% BEGIN FORMULA TABLE", "% END FORMULA TABLE"
HEADER = "| Label | Formula | Where | Library | Test |\n|:--|:--|:--|:--|:--|\n"

# $$ ... $$ (eq-x)   |   ```{math} / :::{math} with :label: eq-x   |   \label{eq-x} inside amsmath
DOLLAR_LABEL = re.compile(r"[ \t]*\((eq-[\w.-]+)\)")  # right after the closing $$
MATH_DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{math\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M
)
LABEL_OPTION = re.compile(r"^:label:[ \t]*(eq-[\w.-]+)[ \t]*$", re.M)
TEX_LABEL = re.compile(r"\\label\{(eq-[\w.-]+)\}")
HEADING = re.compile(r"^#{1,6} ", re.M)
TARGET = re.compile(r"^\((?P<label>[\w.-]+)\)=[ \t]*$", re.M)  # MyST targets such as (ch-masks)=
ANY_EQ_LABEL = re.compile(r"(?:\$\$[ \t]*\(|:label:[ \t]*|\\label\{)(eq-[\w.-]+)")  # every way a label is written


@dataclass
class Equation:
    label: str
    tex: str  # the LaTeX as the chapter writes it
    page: str  # e.g. "04_masks.ipynb"
    chapter: str | None  # the page's (ch-...)= label
    section: str | None  # the nearest (label)= target above the equation, if not the chapter's own


@dataclass
class Row:
    label: str
    formula: str
    where: str
    library: str
    test: str


# ------------------------------------------------------------------------------------------------
# Reading the book
# ------------------------------------------------------------------------------------------------


def book_pages() -> list[Path]:
    """Chapters in book order, then the markdown pages (the appendices included)."""
    return sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("*.md"))


def page_cells(path: Path) -> list[str]:
    """The markdown of a page: a .md file as one cell, or a notebook's markdown cells in order."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"] if c["cell_type"] == "markdown"]


def page_markdown(path: Path) -> str:
    return "\n\n".join(page_cells(path))


def display_math(text: str):
    """(start, tex, label or None) of every $$ ... $$ block: the delimiters pair up in order, as in MyST."""
    marks = [m.start() for m in re.finditer(r"\$\$", text)]
    for open_, close in zip(marks[0::2], marks[1::2]):
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
        chapter = next((lab for _, lab in targets if lab.startswith(("ch-", "app-"))), None)
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
                tex = "\n".join(line for line in body.splitlines() if not line.startswith(":"))
                hits.append((m.start(), label.group(1), tex))
        for m in TEX_LABEL.finditer(text):
            hits.append((m.start(), m.group(1), ""))
        headings = [m.start() for m in HEADING.finditer(text)]
        for pos, label, tex in sorted(hits):
            # the heading the equation sits under, and the target written right above that heading
            heading = max((h for h in headings if h < pos), default=None)
            section = next((lab for p, lab in targets if heading is not None and p < heading and _only_target(text[p:heading])), None)
            section = None if section == chapter else section
            found.append(Equation(label, _flat(tex), path.name, chapter, section))
    return found


def every_label_written() -> set[str]:
    """Each eq- label however it is written, a safety net for the parser above."""
    return {m.group(1) for path in book_pages() for m in ANY_EQ_LABEL.finditer(page_markdown(path))}


# ------------------------------------------------------------------------------------------------
# Reading and writing the index
# ------------------------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def index_rows(text: str | None = None) -> list[Row]:
    text = INDEX.read_text(encoding="utf-8") if text is None else text
    rows = []
    for line in text.splitlines():
        if line.startswith("| `eq-"):
            cells = _cells(line)
            assert len(cells) == 5, f"an index row needs 5 cells, got {len(cells)}: {line}"
            rows.append(Row(cells[0].strip("`"), *cells[1:]))
    return rows


def formula_cell(eq: Equation) -> str:
    return "$" + eq.tex.replace("|", r"\vert ") + "$" if eq.tex else "—"


def where_cell(eq: Equation) -> str:
    parts = [f"{{ref}}`{eq.chapter}`"] if eq.chapter else []
    if eq.section:
        parts.append(f"{{ref}}`{eq.section}`")
    return " › ".join(parts) + f" · eq. {{eq}}`{eq.label}`"


def update_index() -> None:
    """Rewrite the table: Label, Formula and Where from the chapters; Library and Test kept (TODO when new)."""
    text = INDEX.read_text(encoding="utf-8")
    head, rest = text.split(TABLE_START + "\n", 1)
    _, tail = rest.split(TABLE_END, 1)
    kept = {r.label: r for r in index_rows(text)}
    lines = []
    for eq in labelled_equations():
        old = kept.pop(eq.label, None)
        library, test = (old.library, old.test) if old else ("TODO", "TODO")
        lines.append(f"| `{eq.label}` | {formula_cell(eq)} | {where_cell(eq)} | {library} | {test} |\n")
        if not old:
            print(f"new row: {eq.label} ({eq.page}): fill in its Library and Test cells")
    for label in kept:
        print(f"dropped row: {label} (no longer in the book)")
    INDEX.write_text(head + TABLE_START + "\n" + HEADER + "".join(lines) + TABLE_END + tail, encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# Resolving library and test names
# ------------------------------------------------------------------------------------------------


def resolve_library(name: str) -> object:
    """`tl.a.b` -> transformer_lib.a.b, importing a submodule (tl.exercises) when needed."""
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


def named_test_exists(ref: str) -> bool:
    """`tests/test_x.py::test_name` or `tests/test_x.py::TestClass::test_name` (a [param] id is ignored)."""
    file, *names = re.sub(r"\[.*\]$", "", ref).split("::")
    path = ROOT / file
    if not path.is_file() or not names or not names[-1].startswith("test"):
        return False
    body = ast.parse(path.read_text(encoding="utf-8")).body
    for name in names:
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name), None)
        if node is None:
            return False
        body = getattr(node, "body", [])
    return True



# ------------------------------------------------------------------------------------------------
# The tests of the formula index
# ------------------------------------------------------------------------------------------------

UPDATE = "run `.venv/bin/python tests/test_formula_index.py --update`, then fill in the new rows' Library and Test cells"


def test_index_page_is_in_the_toc_and_has_its_label():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert re.search(r"file:\s*book/formulas\b", toc) and re.search(r"file:\s*book/glossary\b", toc)
    assert INDEX.read_text(encoding="utf-8").startswith("(app-formulas)=\n")
    assert GLOSSARY.read_text(encoding="utf-8").startswith("(app-glossary)=\n")


def test_equation_labels_are_unique_and_all_parsed():
    labels = [eq.label for eq in labelled_equations()]
    dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
    assert not dupes, f"equation labels used twice in the book: {dupes}"
    assert every_label_written() == set(labels), (
        f"labels written in a form this test cannot read: {sorted(every_label_written() - set(labels))}; "
        "write equations as $$ ... $$ (eq-x) or a {math} directive with :label: eq-x"
    )


def test_every_labelled_formula_is_in_the_index():
    missing = [f"{eq.label} ({eq.page})" for eq in labelled_equations() if eq.label not in {r.label for r in index_rows()}]
    assert not missing, f"labelled formulas missing from book/formulas.md: {missing}; {UPDATE}"


def test_index_has_no_stale_or_repeated_rows():
    labels = [r.label for r in index_rows()]
    in_book = {eq.label for eq in labelled_equations()}
    assert len(labels) == len(set(labels)), f"rows repeated: {sorted({x for x in labels if labels.count(x) > 1})}"
    stale = sorted(set(labels) - in_book)
    assert not stale, f"index rows for labels no chapter defines any more: {stale}; {UPDATE}"


def test_index_rows_follow_the_book_order():
    in_book = [eq.label for eq in labelled_equations()]
    assert [r.label for r in index_rows()] == [lab for lab in in_book if lab in {r.label for r in index_rows()}], UPDATE


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
            continue  # a derivation step: no function computes it; its Test checks it numerically
        if not names or re.sub(r"`[^`]+`|[,;\s]|and", "", row.library):
            problems.append(f"{row.label}: Library must be `tl.name` cells or —, got {row.library!r}")
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


def test_index_covers_the_formulas_the_issue_requires():
    """The first article's 25 formulas plus masks, GQA, Pre-LN, RoPE and the KV-cache memory formula."""
    rows = index_rows()
    named = " ".join(r.library for r in rows)
    assert len(rows) >= 30, f"only {len(rows)} formulas are labelled in the book"
    for needed in ("tl.causal_mask", "tl.padding_mask", "tl.repeat_kv", "tl.apply_rope", "tl.kv_cache_nbytes"):
        assert f"`{needed}" in named, f"no index row implemented by {needed}"
    assert any("norm_first" in r.library or "Pre" in r.label or "pre-ln" in r.label for r in rows), "no Pre-LN row"


# ------------------------------------------------------------------------------------------------
# The glossary
# ------------------------------------------------------------------------------------------------

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]+")
LANG_SPAN = re.compile(r'<span lang="(zh-Hans|zh-Hant)">(.*?)</span>')


def glossary_rows() -> list[list[str]]:
    return [_cells(line) for line in GLOSSARY.read_text(encoding="utf-8").splitlines() if line.startswith("| **")]


def chapter_labels() -> set[str]:
    return {m.group("label") for p in book_pages() for m in TARGET.finditer(page_markdown(p))}


def test_glossary_rows_are_complete():
    rows = glossary_rows()
    assert len(rows) >= 50, f"the glossary has only {len(rows)} terms"
    problems = []
    for en, hans, hant, meaning, where in rows:
        if not re.fullmatch(r'<span lang="zh-Hans">[^<]+</span>', hans) or not CJK.search(hans + hant) and "Transformer" not in hans:
            problems.append(f"{en}: the Simplified cell must be one zh-Hans span, got {hans!r}")
        if hant and not re.fullmatch(r'<span lang="zh-Hant">[^<]+</span>', hant):
            problems.append(f"{en}: the Traditional cell must be empty or one zh-Hant span, got {hant!r}")
        if hant and LANG_SPAN.search(hant).group(2) == LANG_SPAN.search(hans).group(2):
            problems.append(f"{en}: leave the Traditional cell empty when it equals the Simplified one")
        if len(meaning) < 20 or "\n" in meaning:
            problems.append(f"{en}: needs a one-line meaning")
        if not re.fullmatch(r"\{ref\}`[^`<]*<ch-[\w-]+>`", where):
            problems.append(f"{en}: the last cell must be a {{ref}} to a chapter label, got {where!r}")
    assert not problems, "\n" + "\n".join(problems)
    terms = [r[0] for r in rows]
    assert len(terms) == len(set(terms)), "a term is listed twice"
    assert terms == sorted(terms, key=lambda t: t.strip("*").lower().lstrip("(").replace("-", " ")), "keep the terms in alphabetical order"


def test_glossary_links_point_at_chapters_that_exist():
    labels = chapter_labels()
    targets = {re.search(r"<(ch-[\w-]+)>", r[4]).group(1) for r in glossary_rows()}
    assert targets <= labels, f"glossary links to chapter labels no page defines: {sorted(targets - labels)}"


@pytest.mark.parametrize(
    ("english", "chinese"),
    [("query", "查询"), ("key", "键"), ("value", "值"), ("attention", "注意力"), ("mask", "掩码"),
     ("residual connection", "残差连接"), ("layer normalization (LayerNorm)", "层归一化"),
     ("positional encoding", "位置编码"), ("KV cache", "KV缓存"), ("grouped-query attention (GQA)", "分组查询注意力"),
     ("feed-forward network (FFN)", "前馈网络"), ("rotary position embedding (RoPE)", "旋转位置编码")],
)
def test_glossary_has_the_terms_of_the_issue(english, chinese):
    row = next((r for r in glossary_rows() if r[0] == f"**{english}**"), None)
    assert row is not None, f"{english} is missing from the glossary"
    assert chinese in row[1]


@pytest.mark.parametrize("page", [GLOSSARY, INDEX], ids=lambda p: p.name)
def test_chinese_text_is_marked_with_its_language(page):
    """Browsers pick a CJK font (and Simplified or Traditional glyphs) from lang=; every run of Chinese needs one."""
    text = page.read_text(encoding="utf-8")
    unmarked = CJK.findall(LANG_SPAN.sub("", text))
    assert not unmarked, f"Chinese outside a <span lang=...>: {unmarked[:5]}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update_index()
    else:
        print(__doc__)
