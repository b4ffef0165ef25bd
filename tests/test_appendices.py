"""The appendix pages: the formula index and the glossary are in the table of contents
with their labels, the glossary's rows are complete and link only to real chapters, and
every run of Chinese on the appendix pages is marked with its language for the browser.
"""

from __future__ import annotations

import re

import pytest

from booktools.formula_index import (
    BIBLIOGRAPHY,
    GLOSSARY,
    INDEX,
    ROOT,
    TARGET,
    _cells,
    book_pages,
    page_markdown,
)


def test_index_page_is_in_the_toc_and_has_its_label():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert re.search(r"file:\s*book/formulas\b", toc) and re.search(
        r"file:\s*book/glossary\b", toc
    )
    assert INDEX.read_text(encoding="utf-8").startswith("(app-formulas)=\n")
    assert GLOSSARY.read_text(encoding="utf-8").startswith("(app-glossary)=\n")


CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]+")
LANG_SPAN = re.compile(r'<span lang="(zh-Hans|zh-Hant)"[^>]*>(.*?)</span>')


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
        if hant and not re.fullmatch(
            r'<span lang="zh-Hant">[^<]+</span>'
            r'(?: <span lang="zh-Hant" class="tl-article">（源文：[^<]+）</span>)?',
            hant,
        ):
            problems.append(
                f"{en}: the Traditional cell must be empty or one zh-Hant span, "
                f"then perhaps the article's wording, got {hant!r}"
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
        ("KV cache", "KV 缓存"),
        ("grouped-query attention (GQA)", "分组查询注意力"),
        ("feed-forward network (FFN)", "前馈网络"),
        ("rotary position embedding (RoPE)", "旋转位置编码"),
    ],
)
def test_glossary_has_the_core_terms_with_their_chinese(english, chinese):
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
