"""The Traditional edition as Taiwan readers write it (booktools.taiwan): the term
table, rows and columns in Taiwan's sense, no rule inside a longer word, no forbidden
string or mainland term in the derived catalogs or on any built zh_TW page, and the
glossary in step with the table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from booktools import catalogs, po_check, taiwan

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html" / "zh_TW"
CJK = re.compile(r"[\u3400-\u9fff]")


def _s2twp(text: str) -> str:
    import opencc

    return opencc.OpenCC("s2twp").convert(text)


def _entries() -> list[tuple[str, str, str]]:
    """(catalog, English, Simplified) of every translated zh_CN entry."""
    out = []
    for path in po_check.catalogs():
        with path.open("rb") as f:
            for m in read_po(f):
                if m.id and m.string and not m.fuzzy:
                    out.append((path.stem, str(m.id), str(m.string)))
    return out


@pytest.fixture(scope="module")
def entries():
    return _entries()


@pytest.fixture(scope="module")
def derived(entries):
    """(catalog, English, Simplified, Taiwan) of every entry, as the build makes it."""
    return [(c, en, cn, catalogs.to_taiwan(cn, en)) for c, en, cn in entries]


def _prose(text: str) -> str:
    return catalogs.PROTECTED.sub("\n", text)


# ---------------------------------------------------------------------- the table
@pytest.mark.parametrize("term", taiwan.TERMS, ids=[t.simplified for t in taiwan.TERMS])
def test_each_term_is_what_taiwan_writes_and_opencc_does_not(term):
    assert CJK.search(term.taiwan) and len(term.reason) > 10, term
    # a row either corrects OpenCC or records the article's different wording
    assert _s2twp(term.simplified) != term.taiwan or term.article, (
        f"{term.simplified}: OpenCC already gives {term.taiwan}; the row is dead"
    )
    english = "inference, a recurrent layer, a class" if term.english else None
    assert catalogs.to_taiwan(term.simplified, english) == term.taiwan
    # inside a sentence, next to other words
    sentence = f"我们在这里看到{term.simplified}，然后继续"
    assert term.taiwan in catalogs.to_taiwan(sentence, english)


def test_the_table_has_one_rule_per_word():
    keys = [(t.simplified, t.english) for t in taiwan.TERMS]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    ("simplified", "english", "want"),
    [
        ("推理", "Inference and the KV cache", "推論"),
        ("先根据规则的需要推理", "Reason from what the rule needs", "推理"),
        ("循环层", "a recurrent layer", "遞迴層"),
        ("训练循环很短", "The training loop is short", "訓練迴圈"),
    ],
)
def test_a_term_that_depends_on_the_english_follows_it(simplified, english, want):
    assert want in catalogs.to_taiwan(simplified, english)


# ---------------------------------------------------- no rule inside a longer word
# Longer words (as jieba cuts the catalogs) that contain a key of the table and are
# right as OpenCC converts them, each with its reason.
LONGER_WORDS_LEFT_TO_OPENCC = {
    "库函数": "a library's (program) function is 函式 in Taiwan",
    "函数调用": "a function call: 函式呼叫",
    "平均值": "the mean: 平均值, what the row 均值 writes",
    "神经网络": "OpenCC's 神經網路 is Taiwan's",
    # 类 is a (Python) class only alone; in these words it is a kind: OpenCC's 類
    **{
        w: "a kind of thing: 類"
        for w in "一类 三类 依此类推 分类 另一类 同类 数据类型 种类 类型 词类".split()
    },
}


def _longer_words(keys: set[str]) -> dict[str, str]:
    """{word of the catalogs (as jieba cuts them): the key it contains} for every word
    that contains one of ``keys`` without being a key of the table itself."""
    table = {t.simplified for t in taiwan.TERMS}
    found = {}
    for _, _, text in _entries():
        for word in taiwan.words(_prose(text)):
            if word in table or word in LONGER_WORDS_LEFT_TO_OPENCC:
                continue
            for key in keys:
                if key in word:
                    found.setdefault(word, key)
    return found


@pytest.mark.parametrize("term", taiwan.TERMS, ids=[t.simplified for t in taiwan.TERMS])
def test_no_rule_matches_inside_a_longer_word(term):
    """A rule applies to a whole word only. Every longer word of the catalogs that
    contains its key is a key itself (with its own Taiwan form) or listed above with
    its reason: a new word that contains a key fails here until someone decides."""
    found = _longer_words({term.simplified})
    assert not found, (
        f"{sorted(found)} contain {term.simplified}: add each to the table or to "
        "LONGER_WORDS_LEFT_TO_OPENCC"
    )


def test_a_rule_on_a_fragment_would_fail_its_own_test():
    """The check above is real: a rule keyed on 行 alone (the mainland row) would
    match inside 执行, 进行 and 并行, and the check names them."""
    found = _longer_words({"行"})
    assert {"执行", "进行", "运行"} <= set(found), sorted(found)[:10]


@pytest.mark.parametrize(
    ("simplified", "want", "not_want", "english"),
    [
        (
            "两个操作数",
            "運算元",
            "運算子",
            "rows and columns",
        ),  # operand; the old rule 運算元->運算子 hit it
        ("执行这个单元格", "執行", "執列", "rows and columns"),
        ("进行比较", "進行", "進列", "rows and columns"),
        ("并行计算", "平行運算", "平列", "rows and columns"),
        ("改变了行为", "行為", "列為", "its behaviour changed"),
        ("两行代码", "兩行程式碼", "兩列", "rows and columns"),
        ("每个进程", "行程", "列程", "rows and columns"),
        ("打乱序列", "序列", "序行", "rows and columns"),
        ("同一个短语的排列", "排列", "排行", "rows and columns"),
        ("术语都列在这里", "列在", "行在", "rows and columns"),
        ("协方差", "共變異數", "協變異數", "rows and columns"),
        ("无偏方差", "無偏變異數", "偏方", "rows and columns"),
    ],
)
def test_a_rule_does_not_fire_inside_a_longer_correct_word(
    simplified, want, not_want, english
):
    tw = catalogs.to_taiwan(simplified, english)
    assert want in tw and not_want not in tw, tw


def test_every_word_with_row_or_column_is_classified():
    """Each word that contains 行 or 列 is a row/column word (swapped) or a word of
    another sense (left): a new one fails here instead of being guessed."""
    known = taiwan.ROW_COLUMN_WORDS | taiwan.OTHER_ROW_COLUMN_WORDS
    new = {}
    for catalog, _, text in _entries():
        for word in taiwan.words(_prose(text)):
            if ("行" in word or "列" in word) and word not in known:
                new.setdefault(word, catalog)
    assert not new, (
        "classify these in booktools/taiwan.py (ROW_WORDS, COLUMN_WORDS or "
        f"OTHER_ROW_COLUMN_WORDS): {new}"
    )


# (catalog, start of the English entry, Taiwan text the entry must contain, and not)
KNOWN_SENTENCES = [
    ("01_qkv", "", "每一列都幾乎是獨熱的", None),
    ("08_positional_encoding", "", "的每一列、每一行都只有一", None),
    ("06_feed_forward", "There is a useful way to read", "第 $k$ 行是一個模式", None),
    ("06_feed_forward", "There is a useful way to read", "的第 $k$ 列就", None),
    ("04_masks", "With left padding the real tokens", "第 0 列（一個填充位置）", None),
    ("04_masks", "With left padding the real tokens", "去掉了第 0 行", None),
    (
        "00_introduction",
        "A Transformer layer fits on an index card",
        "大多只有一行",
        "列",
    ),
    ("05_multi_head", "The last line is the classic bug", "最後一行是", "各取一塊列"),
    (
        "00_introduction",
        "Here is scaled dot-product attention",
        "最後一行印出輸出",
        None,
    ),
    ("00_introduction", "Here is scaled dot-product attention", "每一列權重", None),
    ("12_kv_cache", "In particular the keys and values", "追加一列", "追加一行"),
    ("18_attention_across_processes", "", "先行平行、再列平行", None),
]


@pytest.mark.parametrize(("catalog", "english", "want", "not_want"), KNOWN_SENTENCES)
def test_rows_and_columns_in_taiwan_sense_on_known_sentences(
    derived, catalog, english, want, not_want
):
    found = [
        tw for c, en, _, tw in derived if c == catalog and en.startswith(english) and (
            want is None or want in tw)
    ]  # fmt: skip
    assert found, f"{catalog}: no entry starting {english!r} gives {want!r}"
    if not_want:
        assert not any(not_want in tw for tw in found if english), found[0][:200]


def test_a_row_is_never_written_with_the_mainland_character(derived):
    """Where the English speaks only of rows (no column, no line), no word of the
    Taiwan text names it with 行: every row word turned into 列."""
    wrong = []
    for catalog, en, cn, _ in derived:
        if (
            not taiwan.ROWS.search(en)
            or taiwan.COLUMNS.search(en)
            or taiwan.LINES.search(en)
        ):
            continue
        for word in taiwan.words(_prose(cn)):
            if word in taiwan.ROW_WORDS and word not in ("行为", "行会", "分行"):
                tw = taiwan._row_column(word, en)
                if tw is None or "行" in tw:
                    wrong.append(f"{catalog}: {word} -> {tw} in {cn[:50]}")
    assert not wrong, "\n".join(wrong[:20])


# ------------------------------------------------- forbidden strings, mainland terms
def test_every_forbidden_string_has_its_reason():
    for s, reason in taiwan.FORBIDDEN.items():
        assert CJK.search(s) and len(reason) > 10, s


def test_no_forbidden_string_or_mainland_term_in_the_derived_catalogs(derived):
    mainland = taiwan.mainland_terms()
    bad = []
    for catalog, _, _, tw in derived:
        prose = re.sub(r'<span lang="zh-Hant"[^>]*>[^<]*</span>', "", _prose(tw))
        for s in list(taiwan.FORBIDDEN) + list(mainland):
            if s in prose:
                bad.append(
                    f"{catalog}: {s} in …{prose[max(0, prose.index(s) - 15) :][:40]}"
                )
    assert not bad, "\n".join(bad[:40])


def test_no_forbidden_string_or_mainland_term_on_any_built_page():
    """The term table applied to every built zh_TW page (make test builds the site
    before the library tests)."""
    if not SITE.is_dir():
        pytest.skip("no built zh_TW edition: run `make book` first")
    found = taiwan.scan(SITE)
    assert not found["forbidden"], found["forbidden"]
    assert not found["mainland"], found["mainland"]


def test_the_scanner_finds_what_it_looks_for(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(
        '<article role="main"><p>方差、掩碼、推匯出，每一行</p>'
        "<pre>掩碼</pre></article>",
        encoding="utf-8",
    )
    found = taiwan.scan(tmp_path)
    assert found["forbidden"] == {"推匯出": 1}
    assert found["mainland"] == {"方差": 1, "掩碼": 1}


# --------------------------------------------------------------------- glossary
GLOSSARY_ROW = re.compile(
    r'^\| \*\*(.+?)\*\* \| <span lang="zh-Hans">([^<]+)</span> \| '
    r'(?:<span lang="zh-Hant">([^<]+)</span>)?'
    r'(?: <span lang="zh-Hant" class="tl-article">（源文：([^<]+)）</span>)? \|',
    re.M,
)


def test_glossary_traditional_column_follows_the_table():
    """The Traditional cell is what the zh_TW pages write (empty when the scripts
    agree), followed by the second article's wording wherever it uses a term of the
    table differently."""
    rows = GLOSSARY_ROW.findall((ROOT / "book" / "glossary.md").read_text("utf-8"))
    assert len(rows) > 100
    wrong = []
    for term, hans, hant, article in rows:
        want = catalogs.to_taiwan(hans)
        if (hant or hans) != want or (hant and hant == hans):
            wrong.append(f"{term}: the zh_TW edition writes {want}, glossary {hant}")
        want_article = ""
        if taiwan.uses_article_term(hans) and taiwan.article_wording(hans) != want:
            want_article = taiwan.article_wording(hans)
        if article != want_article:
            wrong.append(f"{term}: article {want_article!r}, glossary {article!r}")
    assert not wrong, "\n".join(wrong)
