"""The Traditional edition as Taiwan readers write it. The seed (booktools.taiwan's
converter, which fills a new or changed zh_TW entry from zh_CN, fuzzy until reviewed):
its term table, rows and columns in Taiwan's sense, no rule inside a longer word, and
the flow from a changed English sentence to a fuzzy zh_TW entry that fails the tests.
The reviewed catalogs and the built zh_TW pages: the scan (forbidden strings, mainland
terms, Simplified-only characters, N 位 for bits), the themes' words, the glossary."""

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
    for path in po_check.catalogs("zh_CN"):
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
    """(catalog, English, Simplified, Taiwan) of every entry, the Taiwan text as the
    zh_TW catalog holds it (seeded by the converter, then reviewed)."""
    zh_tw = {}
    for path in po_check.catalogs("zh_TW"):
        zh_tw.update(
            {(path.stem, en): tw for en, tw in catalogs.read_translations(path).items()}
        )
    return [(c, en, cn, zh_tw[c, en]) for c, en, cn in entries if (c, en) in zh_tw]


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


# ------------------------------------------------------------------ the scan's lists
def test_every_forbidden_string_has_its_reason():
    for s, reason in taiwan.FORBIDDEN.items():
        assert CJK.search(s) and len(reason) > 10, s


SOURCES = {"NAER", "OpenCC-TW", "TW", "issue-27"}


def test_the_mainland_list_gives_each_term_its_taiwan_form_source_and_reason():
    rows = taiwan.MAINLAND
    assert len(rows) >= 150, len(rows)
    keys = [m.mainland for m in rows]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    mainland = taiwan.mainland_terms()
    for m in rows:
        assert CJK.search(m.taiwan) and m.taiwan != m.mainland, m
        assert m.source in SOURCES and len(m.reason) > 10, m
        # as a converted page shows it: Traditional characters
        assert not taiwan.simplified_characters(m.mainland), m
        for word in m.right:
            assert m.mainland in word, m
        # what Taiwan writes instead is not itself a mainland term or a trap
        found = [
            s
            for s, inside in mainland.items()
            if taiwan.count_mainland(m.taiwan, s, inside)
        ]
        assert not found, f"{m.mainland} -> {m.taiwan}: {found}"
        assert not any(s in m.taiwan for s in taiwan.FORBIDDEN), m


def test_the_mainland_list_keeps_the_term_tables_mainland_words():
    """The table's unconditional mainland words (方差, 掩碼 …) are scanned for too."""
    import opencc

    s2t = opencc.OpenCC("s2t")
    scanned = taiwan.mainland_terms()
    for t in taiwan.TERMS:
        word = s2t.convert(t.simplified)
        if t.english is None and t.mainland and word not in t.taiwan:
            assert any(s in word for s in scanned), word


def test_traditional_too_is_opencc_s_own_list():
    """TRADITIONAL_TOO: the characters that OpenCC's STCharacters dictionary lists among
    their own Traditional forms (后: 後 后), read from the dictionary that ships with
    the opencc package, through its own opencc_dict tool."""
    import subprocess
    import tempfile

    import opencc

    root = Path(opencc.__file__).parent / "clib"
    tool, ocd2 = root / "bin" / "opencc_dict", root / "share/opencc/STCharacters.ocd2"
    if not tool.exists() or not ocd2.exists():
        pytest.skip("this opencc build ships no opencc_dict tool")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "st.txt"
        subprocess.run(
            [tool, "-i", ocd2, "-o", out, "-f", "ocd2", "-t", "text"], check=True
        )
        lines = out.read_text(encoding="utf-8").splitlines()
    too = set()
    for line in lines:
        char, forms = line.split("\t")
        forms = forms.split()
        if forms[0] != char and char in forms:
            too.add(char)
    assert too == set(taiwan.TRADITIONAL_TOO)


# -------------------------------------------------------------------------- the scan
def test_the_scanner_finds_what_it_looks_for(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(
        '<html><body><a class="skip-link" href="#main">跳转至主要内容</a>'
        '<button title="回到顶部">x</button>'
        '<article role="main"><p>方差、掩碼、推匯出，每一行；平均值不算，'
        "均值算；源代碼算一次；8 位浮點數、16 位元、第 3 位、三位作者</p>"
        '<p><span lang="zh-Hans">术语表</span><a lang="zh-CN">简体中文</a></p>'
        "<pre>掩碼</pre><script>var s = '这个';</script></article></body></html>",
        encoding="utf-8",
    )
    found = taiwan.scan(tmp_path)
    assert found["forbidden"] == {"推匯出": 1}
    assert found["mainland"] == {"方差": 1, "掩碼": 1, "均值": 1, "源代碼": 1}
    assert found["bits"] == {"8 位浮點": 1}
    # the skip link and the tooltip; not the marked span, not the script
    want = {c: 1 for c in "转内顶"}
    assert found["simplified"] == want, found["simplified"]


ROLE_TEXT = re.compile(r"\{[\w:.-]+\}`([^`<]*?)\s*(?:<[^<>`]*>)?`")


def test_the_zh_tw_catalogs_pass_the_scan(derived):
    """Each zh_TW entry's prose (a role's text, not code, math, nor text marked zh-Hans
    or zh-Hant): no forbidden string, no mainland term, no Simplified-only character, no
    N 位 for bits. The page scan below finds the same on the built site; this names the
    entry."""
    mainland = taiwan.mainland_terms()
    bad = []
    for catalog, en, _, tw in derived:
        prose = _prose(ROLE_TEXT.sub(r"\1", tw))  # a role's text is shown: {term}`…`
        found = [s for s in taiwan.FORBIDDEN if s in prose]
        found += [s for s, w in mainland.items() if taiwan.count_mainland(prose, s, w)]
        found += list(taiwan.simplified_characters(prose))
        found += [m.group(0) for m in taiwan.BITS.finditer(prose)]
        if found:
            bad.append(f"{catalog}: {found} in {en[:50]!r}")
    assert not bad, f"{len(bad)} entries:\n" + "\n".join(bad[:60])


@pytest.mark.built  # the built book: not in make test-fast
def test_the_built_zh_tw_pages_pass_the_scan():
    """Every built zh_TW page: the forbidden strings, the mainland terms and N 位 for
    bits in its prose; a Simplified-only character anywhere it shows (the theme's
    buttons, skip link, sidebar, search page), except in an element marked
    lang="zh-Hans". make test builds the site before the library tests."""
    if not SITE.is_dir():
        pytest.skip("no built zh_TW edition: run `make book` first")
    found = taiwan.scan(SITE)
    bad = {k: v for k, v in found.items() if v and k != "row/column"}
    assert not bad, "\n".join(f"{k}: {sum(v.values())} {v}" for k, v in bad.items())


def test_a_row_is_written_with_the_taiwan_character_in_the_zh_tw_catalogs():
    rows, wrong, count = taiwan.row_entries(ROOT / "locales" / "zh_TW")
    assert rows > 20 and wrong == 0, (rows, wrong, count)


# ------------------------------------------------------------------ the theme's words
def _catalog(path: Path):
    with path.open("rb") as f:
        return read_po(f)


def test_every_theme_word_has_a_taiwan_entry():
    """pydata-sphinx-theme ships one Chinese catalog, "zh", in Simplified, which gettext
    falls back to from zh_TW: each of its words has a zh_TW entry, in the edition's own
    sphinx.po or in Sphinx's zh_TW catalog, which Sphinx reads before the theme's."""
    import pydata_sphinx_theme
    import sphinx

    theme = Path(pydata_sphinx_theme.__file__).parent / "locale/zh/LC_MESSAGES"
    ours = _catalog(ROOT / "locales/zh_TW/LC_MESSAGES/sphinx.po")
    sphinx_tw = Path(sphinx.__file__).parent / "locale/zh_TW/LC_MESSAGES/sphinx.po"
    theirs = _catalog(sphinx_tw)
    missing = []
    for m in _catalog(theme / "sphinx.po"):
        if not m.id or not m.string or not CJK.search(str(m.string)):
            continue
        entry = ours.get(m.id) or theirs.get(m.id)
        if entry is None or not entry.string or entry.fuzzy:
            missing.append(str(m.id))
        elif taiwan.simplified_characters(str(entry.string)):
            missing.append(f"{m.id}: {entry.string}")
    assert not missing, missing


# --------------------------------------------------------- a changed English sentence
@pytest.mark.slow  # sphinx-intl, a Python process: not in make test-fast
def test_a_changed_sentence_reaches_zh_tw_as_a_fuzzy_seed_that_fails(tmp_path):
    """make catalogs' flow on catalogs of its own: the English sentence changes,
    sphinx-intl (as `make catalogs` runs it) keeps zh_CN's old text as fuzzy, the seed
    puts the conversion of that text in zh_TW, fuzzy, in place of the reviewed entry of
    the old sentence, and po_check (make test) fails on both until they are reviewed."""
    import subprocess
    import sys

    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    def write(path: Path, locale: str | None, entries: dict[str, str]) -> None:
        catalog = Catalog(locale=locale)
        for msgid, msgstr in entries.items():
            catalog.add(msgid, msgstr)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            write_po(f, catalog)

    old, new = "The library prints the output.", "The library prints the outputs."
    keep = "A mask hides the future."
    pot = tmp_path / "pot"
    locales = tmp_path / "locales"
    write(pot / "ch.pot", None, {new: "", keep: ""})
    cn = locales / "zh_CN/LC_MESSAGES/ch.po"
    tw = locales / "zh_TW/LC_MESSAGES/ch.po"
    write(cn, "zh_CN", {old: "这个库打印输出。", keep: "掩码遮住未来。"})
    write(tw, "zh_TW", {old: "這個函式庫印出輸出。", keep: "遮罩擋住未來。"})
    sphinx_intl = Path(sys.executable).parent / "sphinx-intl"
    subprocess.run(
        [sphinx_intl, "update", "-p", pot, "-l", "zh_CN", "-d", locales, "-w", "88"],
        check=True,
        capture_output=True,
    )
    entries, seeded = catalogs.seed_zh_tw(locales=locales)
    assert (entries, seeded) == (4, 3)  # ch.po's two, sphinx-exercise's two
    got = {str(m.id): m for m in _catalog(tw) if m.id}
    assert list(got) == [new, keep]
    assert got[new].fuzzy and got[new].string == catalogs.to_taiwan(
        "这个库打印输出。", new
    )
    assert got[new].string != "這個函式庫印出輸出。"  # the converter's, not reviewed
    assert not got[keep].fuzzy and got[keep].string == "遮罩擋住未來。"  # reviewed
    problems = po_check.check_file(tw)
    assert len(problems) == 1 and problems[0].endswith(": fuzzy"), problems
    assert any(p.endswith(": fuzzy") for p in po_check.check_file(cn))
    # zh_CN translated again: the seed, not yet reviewed, follows its new text
    write(cn, "zh_CN", {new: "这个库打印各个输出。", keep: "掩码遮住未来。"})
    catalogs.seed_zh_tw(locales=locales)
    got = {str(m.id): m for m in _catalog(tw) if m.id}
    assert got[new].fuzzy and "各個" in got[new].string
    # a reviewer accepts it (Taiwan's words, no fuzzy flag): make test passes, and the
    # next `make catalogs` keeps it
    write(tw, "zh_TW", {new: "這個函式庫印出各個輸出。", keep: "遮罩擋住未來。"})
    catalogs.seed_zh_tw(locales=locales)
    assert po_check.check_file(tw) == []
    assert _catalog(tw).get(new).string == "這個函式庫印出各個輸出。"


# --------------------------------------------------------------------- glossary
GLOSSARY_ROW = re.compile(
    r'^\| \*\*(.+?)\*\* \| <span lang="zh-Hans">([^<]+)</span> \| '
    r'(?:<span lang="zh-Hant">([^<]+)</span>)?'
    r'(?: <span lang="zh-Hant" class="tl-article">（源文：([^<]+)）</span>)? \|',
    re.M,
)


def test_glossary_traditional_column_is_taiwan_usage():
    """The Traditional cell is what the zh_TW pages write (empty when the scripts
    agree): it passes the page scan (no mainland term, no forbidden string, no
    Simplified-only character), and is not a copy of the Simplified cell. The second
    article's wording follows wherever it uses a term of the table differently."""
    rows = GLOSSARY_ROW.findall((ROOT / "book" / "glossary.md").read_text("utf-8"))
    assert len(rows) > 100
    mainland = taiwan.mainland_terms()
    wrong = []
    for term, hans, hant, article in rows:
        tw = hant or hans
        found = [s for s, w in mainland.items() if taiwan.count_mainland(tw, s, w)]
        found += [s for s in taiwan.FORBIDDEN if s in tw]
        found += list(taiwan.simplified_characters(tw))
        if found or hant == hans:
            wrong.append(f"{term}: the Traditional cell {tw!r} ({found})")
        want_article = ""
        if taiwan.uses_article_term(hans) and taiwan.article_wording(hans) != tw:
            want_article = taiwan.article_wording(hans)
        # the article's own spacing: it writes KV緩存 where the book writes KV 缓存
        if article.replace(" ", "") != want_article.replace(" ", ""):
            wrong.append(f"{term}: article {want_article!r}, glossary {article!r}")
    assert not wrong, "\n".join(wrong)
