"""The appendix pages stay honest: the formula index (book/formulas.md) lists every
labelled equation of the book, with the formula as the chapter writes it, a link to it,
a library function that exists and a test that exists; the glossary (book/glossary.md)
links only to real chapters and marks its Chinese for the browser.

When a chapter adds, removes or edits a labelled equation, refresh the generated columns
with

    .venv/bin/python tests/test_formula_index.py --update

then fill in the Library and Test cells of any new row (they read TODO until you do).
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl

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


# --------------------------------------------------------------------------------------
# The tests of the formula index
# --------------------------------------------------------------------------------------

UPDATE = (
    "run `.venv/bin/python tests/test_formula_index.py --update`, "
    "then fill in the new rows' Library and Test cells"
)


def test_index_page_is_in_the_toc_and_has_its_label():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert re.search(r"file:\s*book/formulas\b", toc) and re.search(
        r"file:\s*book/glossary\b", toc
    )
    assert INDEX.read_text(encoding="utf-8").startswith("(app-formulas)=\n")
    assert GLOSSARY.read_text(encoding="utf-8").startswith("(app-glossary)=\n")


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


def test_index_covers_the_formulas_the_issue_requires():
    """The first article's formulas, plus the masks, GQA, Pre-LN, RoPE and the KV-cache
    memory formula."""
    labels = {r.label for r in index_rows()}
    missing = [lab for lab in FIRST_ARTICLE + BEYOND_THE_ARTICLE if lab not in labels]
    assert not missing, (
        f"formulas the issue requires are not labelled in any chapter: {missing}"
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
    monkeypatch.setattr(sys.modules[__name__], "INDEX", broken)
    with pytest.raises(AssertionError, match=label):
        check()


# --------------------------------------------------------------------------------------
# Derivation steps: formulas that no library function computes on its own. The index
# points each
# of them at the test below that checks it numerically (float64, against PyTorch where
# it can).
# --------------------------------------------------------------------------------------

F64 = torch.float64


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def test_derivation_qk_is_a_bilinear_form():
    """q_i . k_j = x_i W_Q W_K^T x_j^T   (eq-qk-bilinear)."""
    x, W_q, W_k = _rand(5, 8, seed=1), _rand(8, 4, seed=2), _rand(8, 4, seed=3)
    torch.testing.assert_close((x @ W_q) @ (x @ W_k).T, x @ (W_q @ W_k.T) @ x.T)


def test_derivation_soft_lookup_is_unscaled_attention():
    """lookup(q) = sum_j softmax(q . k)_j v_j   (eq-soft-lookup), torch's attention with
    scale 1."""
    q, k, v = _rand(3, 4, seed=1), _rand(6, 4, seed=2), _rand(6, 5, seed=3)
    by_hand = torch.stack(
        [
            sum(
                torch.exp(qi @ kj) / torch.exp(k @ qi).sum() * vj
                for kj, vj in zip(k, v, strict=True)
            )
            for qi in q
        ]
    )
    torch.testing.assert_close(by_hand, tl.softmax(q @ k.T) @ v)
    torch.testing.assert_close(
        by_hand, F.scaled_dot_product_attention(q, k, v, scale=1.0)
    )


def test_derivation_scores_are_dot_products_of_rows():
    """S = Q K^T, S_ij = sum_c Q_ic K_jc   (eq-scores)."""
    q, k = _rand(2, 5, 8, seed=1), _rand(2, 7, 8, seed=2)
    S = tl.attention_scores(q, k, scale=False)
    torch.testing.assert_close(S, torch.einsum("bic,bjc->bij", q, k))
    torch.testing.assert_close(
        S[1, 2, 3], sum(q[1, 2, c] * k[1, 3, c] for c in range(8))
    )


def test_derivation_softmax_jacobian():
    """d a_i / d s_j = a_i (delta_ij - a_j) (eq-softmax-jacobian), against autograd."""
    s = _rand(6, seed=4) * 2
    a = tl.softmax(s)
    J = torch.autograd.functional.jacobian(lambda t: tl.softmax(t), s)
    torch.testing.assert_close(J, torch.diag(a) - torch.outer(a, a))
    torch.testing.assert_close(
        J, torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), s)
    )


def test_derivation_softmax_ratio():
    """a_i / a_j = exp(s_i - s_j)   (eq-softmax-ratio)."""
    s = _rand(7, seed=5) * 3
    a = tl.softmax(s)
    torch.testing.assert_close(
        a[:, None] / a[None, :], torch.exp(s[:, None] - s[None, :])
    )


def test_derivation_temperature():
    """softmax(s / tau)   (eq-temperature): tau -> 0 picks the argmax, tau -> infinity
    is uniform."""
    s = _rand(2, 6, seed=6)
    for tau in (0.5, 1.0, 4.0):
        torch.testing.assert_close(tl.softmax(s / tau), torch.softmax(s / tau, -1))
    torch.testing.assert_close(tl.softmax(s / 1e-4), F.one_hot(s.argmax(-1), 6).to(F64))
    torch.testing.assert_close(
        tl.softmax(s / 1e6), torch.full_like(s, 1 / 6), atol=1e-5, rtol=0
    )


def test_derivation_lm_factorisation_sums_to_one():
    """p(x_1..x_{T-1} | x_0) = prod_t p(x_t | x_<t)   (eq-lm-factorisation): the product
    of a causal model's next-token distributions is a distribution over whole
    continuations, summing to 1 over every one of them."""
    torch.manual_seed(0)
    cfg = tl.GPTConfig(
        vocab_size=3, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=4
    )
    model = tl.GPT(cfg).double().eval()
    seqs = torch.cartesian_prod(*[torch.arange(3)] * 3)  # (27, 3) continuations
    tokens = torch.cat([torch.zeros(27, 1, dtype=torch.long), seqs], dim=1)  # x_0 = 0
    with torch.no_grad():
        logp = torch.log_softmax(model(tokens), -1)[:, :-1]  # (27, 3, V)
    joint = logp.gather(-1, tokens[:, 1:, None]).squeeze(-1).sum(-1).exp()  # (27,)
    torch.testing.assert_close(joint.sum(), torch.tensor(1.0, dtype=F64))


def test_derivation_entropy_grows_with_temperature():
    """dH/dtau = Var_tau(z) / tau^3   (eq-entropy-temperature), against a central
    difference, and H runs from 0 to log V."""
    z = 2 * _rand(4, 9, seed=11)

    def entropy(tau: float) -> torch.Tensor:
        logp = torch.log_softmax(z / tau, -1)
        return -(logp.exp() * logp).sum(-1)

    for tau in (0.2, 0.7, 1.0, 2.5, 10.0):
        h = 1e-5
        numeric = (entropy(tau + h) - entropy(tau - h)) / (2 * h)
        p = torch.softmax(z / tau, -1)
        var = (p * z**2).sum(-1) - (p * z).sum(-1) ** 2
        torch.testing.assert_close(numeric, var / tau**3, atol=1e-7, rtol=1e-5)
    assert (entropy(1e-3) < 1e-6).all()
    torch.testing.assert_close(
        entropy(1e6), torch.full((4,), math.log(9), dtype=F64), atol=1e-6, rtol=0
    )


def test_derivation_unused_position_rows_get_no_gradient():
    """dL/dP_p = 0 for every position p that no training sequence reaches
    (eq-unused-rows): a learned table's rows past the training length stay untrained,
    and so does the last row used: position T-1 predicts nothing, and no later position
    reads it."""
    torch.manual_seed(0)
    cfg = tl.GPTConfig(
        vocab_size=7, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=12
    )
    model = tl.GPT(cfg).double()
    tokens = torch.randint(0, 7, (4, 8))  # length 8 of 12
    tl.causal_lm_loss(model(tokens), tokens).backward()
    grad = model.pos_emb.weight.grad  # (12, d_model)
    assert (grad[7:] == 0).all()
    assert (grad[:7].abs().sum(-1) > 0).all()


def test_derivation_masked_softmax_renormalises():
    """A_ij = M_ij e^S_ij / sum_j' M_ij' e^S_ij'   (eq-masked-softmax) is what masking
    with -inf gives."""
    q, k, v = _rand(4, 8, seed=1), _rand(6, 8, seed=2), _rand(6, 3, seed=3)
    mask = tl.causal_mask(4, 6) & (torch.arange(6) != 1)
    e = torch.exp(tl.attention_scores(q, k)) * mask
    _, w = tl.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(w, e / e.sum(-1, keepdim=True))


def test_derivation_combined_mask_matches_torch():
    """M = M_causal AND M_pad   (eq-combined-mask) equals torch's attn_mask plus
    key_padding_mask."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=F64)
    ours = tl.MultiHeadAttention.from_torch(mha)
    x, lengths = _rand(2, 5, 8, seed=7), torch.tensor([5, 3])
    mask = tl.causal_mask(5) & tl.padding_mask(lengths, 5)  # (B, 1, T, T)
    out, _ = ours(x, x, x, mask)
    expected, _ = mha(
        x,
        x,
        x,
        attn_mask=~tl.causal_mask(5),
        key_padding_mask=~tl.padding_mask(lengths, 5)[:, 0, 0],
    )
    torch.testing.assert_close(out, expected)


def test_derivation_stacked_projection_splits_into_heads():
    """X W^Q = [X W^Q_0 | ... | X W^Q_{h-1}]   (eq-stacked-proj): split_heads picks the
    column blocks."""
    x, W, h = _rand(2, 5, 12, seed=1), _rand(12, 12, seed=2), 3
    heads = tl.split_heads(x @ W, h)  # (B, h, T, d_k)
    for i in range(h):
        torch.testing.assert_close(heads[:, i], x @ W[:, 4 * i : 4 * (i + 1)])


def test_derivation_concat_times_w_o_is_a_sum_over_heads():
    """Concat(head_0, ..., head_{h-1}) W^O = sum_i head_i W^O_i   (eq-concat-sum)."""
    heads, W_o = (
        _rand(2, 3, 5, 4, seed=1),
        _rand(12, 12, seed=2),
    )  # (B, h, T, d_v), (h d_v, d_model)
    torch.testing.assert_close(
        tl.merge_heads(heads) @ W_o,
        sum(heads[:, i] @ W_o[4 * i : 4 * (i + 1)] for i in range(3)),
    )


def test_derivation_gelu_and_its_tanh_approximation():
    """GELU(z) = z Phi(z)   (eq-gelu) and its tanh approximation   (eq-gelu-tanh),
    against F.gelu."""
    z = torch.linspace(-6, 6, 241, dtype=F64)
    exact = z / 2 * (1 + torch.erf(z / math.sqrt(2)))
    approx = z / 2 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    torch.testing.assert_close(exact, F.gelu(z))
    torch.testing.assert_close(approx, F.gelu(z, approximate="tanh"))
    assert (approx - exact).abs().max() < 1e-3


def test_derivation_parameter_counts():
    """P_attn, P_FFN (eq-ffn-params), P_enc (eq-enc-params), P_dec (eq-dec-params),
    against torch's layers."""
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    d, d_ff = 16, 48
    assert (
        count(tl.MultiHeadAttention(d, 4))
        == 4 * d * d + 4 * d
        == count(torch.nn.MultiheadAttention(d, 4))
    )
    assert count(tl.FeedForward(d, d_ff)) == 2 * d * d_ff + d_ff + d
    assert count(tl.FeedForward(d, 4 * d)) == 8 * d * d + 5 * d
    p_enc = 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d
    assert (
        count(tl.EncoderLayer(d, 4, d_ff))
        == p_enc
        == count(torch.nn.TransformerEncoderLayer(d, 4, d_ff))
    )
    p_dec = 8 * d * d + 2 * d * d_ff + d_ff + 15 * d
    assert (
        count(tl.DecoderLayer(d, 4, d_ff))
        == p_dec
        == count(torch.nn.TransformerDecoderLayer(d, 4, d_ff))
    )


def test_derivation_ffn_is_position_wise():
    """FFN(X)_t = FFN(x_t)   (eq-position-wise): every position alone gives the same
    rows."""
    torch.manual_seed(0)
    ffn = tl.FeedForward(8, 32).double()
    x = _rand(2, 5, 8, seed=1)
    torch.testing.assert_close(
        ffn(x), torch.stack([ffn(x[:, t]) for t in range(5)], dim=1)
    )


def test_derivation_residual_jacobian():
    """d x_L / d x_l = prod_j (I + J_j)   (eq-residual-jacobian), against autograd."""
    torch.manual_seed(0)
    blocks = [
        torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh()).double()
        for _ in range(3)
    ]
    x0 = _rand(6, seed=2)
    xs = [x0]
    for f in blocks:
        xs.append(xs[-1] + f(xs[-1]))  # x_{l+1} = x_l + F_l(x_l)   (eq-residual)
    product = torch.eye(6, dtype=F64)
    for f, x in zip(blocks, xs[:-1], strict=True):
        product = (
            torch.eye(6, dtype=F64) + torch.autograd.functional.jacobian(f, x)
        ) @ product

    def whole(x):
        for f in blocks:
            x = x + f(x)
        return x

    torch.testing.assert_close(torch.autograd.functional.jacobian(whole, x0), product)


def test_derivation_layer_norm_output_std():
    """std(z_hat) = sigma / sqrt(sigma^2 + eps) (PyTorch) and sigma / (sigma + eps)
    (article)   (eq-ln-output-std)."""
    one, zero = torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64)
    for scale in (1e-3, 1e-2, 1.0):
        z = _rand(4, 8, seed=3) * scale
        sigma = z.std(-1, unbiased=False)
        std = lambda y: y.std(-1, unbiased=False)  # noqa: E731
        torch.testing.assert_close(
            std(tl.layer_norm(z, one, zero)), sigma / torch.sqrt(sigma**2 + 1e-5)
        )
        torch.testing.assert_close(
            std(tl.layer_norm_article(z, one, zero)), sigma / (sigma + 1e-5)
        )


def test_derivation_batch_norm_formula_matches_torch():
    """BN normalises each feature over (B, T)   (eq-batch-norm), as nn.BatchNorm1d does
    in training."""
    z, gamma, beta = _rand(3, 5, 4, seed=1) * 2 + 1, _rand(4, seed=2), _rand(4, seed=3)
    mu = z.mean(dim=(0, 1))
    var = ((z - mu) ** 2).mean(dim=(0, 1))
    by_formula = gamma * (z - mu) / torch.sqrt(var + 1e-5) + beta
    bn = torch.nn.BatchNorm1d(4, dtype=F64).train()
    with torch.no_grad():
        bn.weight.copy_(gamma)
        bn.bias.copy_(beta)
    torch.testing.assert_close(
        by_formula, bn(z.transpose(1, 2)).transpose(1, 2)
    )  # BatchNorm1d wants (B, C, T)


def test_derivation_layer_norm_is_scale_invariant():
    """LN(a z) = LN(z) and the gradient scales by 1/a   (eq-ln-scale), exactly when eps
    = 0."""
    z, gamma, beta, a = _rand(8, seed=4), _rand(8, seed=5), _rand(8, seed=6), 7.0
    ln = lambda t: tl.layer_norm(t, gamma, beta, eps=0.0)  # noqa: E731
    torch.testing.assert_close(ln(a * z), ln(z))
    J = torch.autograd.functional.jacobian
    torch.testing.assert_close(J(ln, a * z), J(ln, z) / a)


def test_derivation_pe_dot_depends_only_on_the_offset():
    """PE(p) . PE(p + k) = sum_i cos(omega_i k)   (eq-pe-dot), whatever p."""
    d = 32
    pe = tl.sinusoidal_positional_encoding(200, d, dtype=F64)
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    for k in (0, 1, 5, 40):
        expected = torch.cos(omega * k).sum()
        for p in (0, 3, 100):
            torch.testing.assert_close(pe[p] @ pe[p + k], expected)


def test_derivation_pe_dot_approximation():
    """PE(p) . PE(p + k) / (d/2) ~ 1 - log_10000 k for 1 << k << 10000
    (eq-pe-dot-approx), to within 0.1."""
    pe = tl.sinusoidal_positional_encoding(1001, 512, dtype=F64)
    for k in (10, 30, 100, 300, 1000):
        assert abs((pe[0] @ pe[k]).item() / 256 - (1 - math.log(k, 10000))) < 0.1


def test_derivation_pe_dot_integral():
    """sum_i cos(omega_i k) / (d/2) ~ integral_0^1 cos(k 10000^-u) du
    ~ 1 - log_10000 k - gamma / ln 10000   (eq-pe-dot-integral)."""
    d, gamma = 512, 0.5772156649015329
    pe = tl.sinusoidal_positional_encoding(1001, d, dtype=F64)
    u = torch.linspace(0, 1, 200_001, dtype=F64)
    for k in (10, 100, 1000):
        exact = (pe[0] @ pe[k]).item() / (d / 2)
        integral = torch.trapezoid(torch.cos(k * 10000.0**-u), u).item()
        closed = 1 - math.log(k, 10000) - gamma / math.log(10000)
        assert abs(exact - integral) < 0.015 and abs(integral - closed) < 0.01


def test_derivation_decoder_loss_is_cross_entropy_over_real_positions():
    """L = -1/N sum over real (b, t) of log P[b, t, y_{b,t}]   (eq-dec-loss) =
    F.cross_entropy(ignore_index=pad)."""
    logits, pad = _rand(2, 5, 7, seed=1), 0
    targets = torch.tensor([[3, 4, 2, 0, 0], [5, 6, 1, 2, 3]])
    log_p = torch.log(tl.softmax(logits))  # P = softmax(logits)   (eq-output-softmax)
    real = targets != pad
    by_formula = -log_p.gather(-1, targets[..., None])[..., 0][real].sum() / real.sum()
    torch.testing.assert_close(
        by_formula,
        F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1), ignore_index=pad),
    )
    # with no padding it is the toy model's mean over all B * T targets   (eq-toy-loss)
    full = torch.tensor([[3, 4, 2, 6, 5], [5, 6, 1, 2, 3]])
    by_formula = -log_p.gather(-1, full[..., None]).mean()
    torch.testing.assert_close(
        by_formula, F.cross_entropy(logits.reshape(-1, 7), full.reshape(-1))
    )


def _explicit_sdpa(q, k, v, attn_mask=None, enable_gqa=False, **_):
    """softmax(Q K^T / sqrt(d_k)) V with explicit matmuls, which torch's FLOP counter
    can see."""
    n_rep = q.size(-3) // k.size(-3) if enable_gqa else 1
    return tl.scaled_dot_product_attention(
        q, tl.repeat_kv(k, n_rep), tl.repeat_kv(v, n_rep), attn_mask
    )[0]


@pytest.mark.parametrize("n_kv_heads", [None, 2], ids=["mha", "gqa"])
def test_derivation_decode_cost_matches_torch_flop_counter(n_kv_heads):
    """C(t) of one greedy step, with and without a cache (eq-decode-macs), is what torch
    counts: 2 FLOPs per multiply-add.

    The fused CPU attention kernel has no FLOP formula in torch, so attention runs
    through the explicit path here.
    """
    import types
    from unittest import mock

    from torch.utils.flop_counter import FlopCounterMode

    import transformer_lib.attention as attention_module

    torch.manual_seed(0)
    cfg = tl.TransformerConfig(
        vocab_size=11,
        d_model=16,
        n_heads=4,
        n_kv_heads=n_kv_heads,
        n_layers=2,
        d_ff=24,
        max_len=16,
    )
    model = tl.Transformer(cfg).eval()
    src = torch.randint(2, 11, (1, 5))
    explicit = types.SimpleNamespace(scaled_dot_product_attention=_explicit_sdpa)
    with torch.no_grad(), mock.patch.object(attention_module, "F", explicit):
        memory = model.encode(src)
        cache = model.init_cache(memory)
        seq = torch.full((1, 1), cfg.bos_id)
        for t in range(1, 5):
            with FlopCounterMode(display=False) as cached:
                logits = model.decode_step(seq[:, -1:], cache)
            with FlopCounterMode(display=False) as uncached:
                model.out_proj(model.decode(seq, memory)[:, -1])
            assert cached.get_total_flops() == 2 * tl.decode_step_macs(
                cfg, t, 5, use_cache=True
            )
            assert uncached.get_total_flops() == 2 * tl.decode_step_macs(
                cfg, t, 5, use_cache=False
            )
            seq = torch.cat([seq, logits[:, -1:].argmax(-1)], dim=1)


# --------------------------------------------------------------------------------------
# The glossary
# --------------------------------------------------------------------------------------

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]+")
LANG_SPAN = re.compile(r'<span lang="(zh-Hans|zh-Hant)">(.*?)</span>')


def glossary_rows() -> list[list[str]]:
    return [
        _cells(line)
        for line in GLOSSARY.read_text(encoding="utf-8").splitlines()
        if line.startswith("| **")
    ]


def chapter_labels() -> set[str]:
    return {
        m.group("label")
        for p in book_pages()
        for m in TARGET.finditer(page_markdown(p))
    }


def test_glossary_rows_are_complete():
    rows = glossary_rows()
    assert len(rows) >= 50, f"the glossary has only {len(rows)} terms"
    problems = []
    for en, hans, hant, meaning, where in rows:
        if (
            not re.fullmatch(r'<span lang="zh-Hans">[^<]+</span>', hans)
            or not CJK.search(hans + hant)
            and "Transformer" not in hans
        ):
            problems.append(
                f"{en}: the Simplified cell must be one zh-Hans span, got {hans!r}"
            )
        if hant and not re.fullmatch(r'<span lang="zh-Hant">[^<]+</span>', hant):
            problems.append(
                f"{en}: the Traditional cell must be empty or one zh-Hant span, "
                f"got {hant!r}"
            )
        if hant and LANG_SPAN.search(hant).group(2) == LANG_SPAN.search(hans).group(2):
            problems.append(
                f"{en}: leave the Traditional cell empty "
                "when it equals the Simplified one"
            )
        if len(meaning) < 20 or "\n" in meaning:
            problems.append(f"{en}: needs a one-line meaning")
        if not re.fullmatch(r"\{ref\}`[^`<]*<ch-[\w-]+>`", where):
            problems.append(
                f"{en}: the last cell must be a {{ref}} to a chapter label, "
                f"got {where!r}"
            )
    assert not problems, "\n" + "\n".join(problems)
    terms = [r[0] for r in rows]
    assert len(terms) == len(set(terms)), "a term is listed twice"
    assert terms == sorted(
        terms, key=lambda t: t.strip("*").lower().lstrip("(").replace("-", " ")
    ), "keep the terms in alphabetical order"


def test_glossary_links_point_at_chapters_that_exist():
    labels = chapter_labels()
    targets = {re.search(r"<(ch-[\w-]+)>", r[4]).group(1) for r in glossary_rows()}
    assert targets <= labels, (
        f"glossary links to chapter labels no page defines: {sorted(targets - labels)}"
    )


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        ("query", "查询"),
        ("key", "键"),
        ("value", "值"),
        ("attention", "注意力"),
        ("mask", "掩码"),
        ("residual connection", "残差连接"),
        ("layer normalization (LayerNorm)", "层归一化"),
        ("positional encoding", "位置编码"),
        ("KV cache", "KV缓存"),
        ("grouped-query attention (GQA)", "分组查询注意力"),
        ("feed-forward network (FFN)", "前馈网络"),
        ("rotary position embedding (RoPE)", "旋转位置编码"),
    ],
)
def test_glossary_has_the_terms_of_the_issue(english, chinese):
    row = next((r for r in glossary_rows() if r[0] == f"**{english}**"), None)
    assert row is not None, f"{english} is missing from the glossary"
    assert chinese in row[1]


@pytest.mark.parametrize("page", [GLOSSARY, INDEX, BIBLIOGRAPHY], ids=lambda p: p.name)
def test_chinese_text_is_marked_with_its_language(page):
    """Browsers pick a CJK font (and Simplified or Traditional glyphs) from lang=; every
    run of Chinese needs one."""
    text = page.read_text(encoding="utf-8")
    unmarked = CJK.findall(LANG_SPAN.sub("", text))
    assert not unmarked, f"Chinese outside a <span lang=...>: {unmarked[:5]}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update_index()
    else:
        print(__doc__)
