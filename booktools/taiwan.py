"""The Traditional (Taiwan) edition's wording: zh_CN text -> zh_TW text.

OpenCC (s2twp) turns Simplified characters into Traditional ones and swaps its
everyday Taiwan phrases, but it segments with a greedy longest match over its own
dictionary, so it splits words wrongly (推导出 -> 推匯出, 大多只有 -> 大多隻有), it
knows no field (方差, 掩码, 激活 stay mainland or become 啟用), and it cannot know that
Taiwan writes 列 for a matrix row and 行 for a column, the opposite of mainland usage.
Here:

1. the Simplified text is cut into words by jieba (the same segmenter the Chinese search
   uses), with every key of the term table added as a word; a rule therefore applies to
   a whole word only and never inside a longer one (运算元 is not 算子, 执行 is not 行);
2. a word that is a key of ``TERMS`` becomes the Taiwan term, some only when the English
   source says so (推理 is 推論 for "inference", 推理 for "reason");
3. a word that names a matrix row (行, 每行, 行向量 …) or column (列, 各列 …) has
   行 and 列 swapped, when the English source speaks of rows or columns;
   ``ROW_COLUMN_WORDS`` lists them and ``OTHER_ROW_COLUMN_WORDS`` the words that
   only contain the characters (执行, 序列, 一行代码 …); tests/test_zh_tw.py fails on
   a word in neither list;
4. every other word goes through OpenCC on its own, so OpenCC's phrases apply within a
   word and never across two.

``python -m booktools.taiwan [SITE_DIR [LOCALE_DIR]]`` scans the built zh_TW pages and
the derived catalogs and prints the counts of forbidden strings, mainland terms,
row/column words and the entries that still write a row with 行.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Term:
    """One word of the term table: what the mainland text (zh_CN) writes, what the
    second source article (Traditional characters, mainland vocabulary) writes, what
    Taiwan writes, and why. ``english``: a regular expression the English source must
    match for the rule to apply (None: always)."""

    simplified: str
    taiwan: str
    article: str
    reason: str
    english: str | None = None
    mainland: bool = True  # False: a conversion fix, not a mainland term to scan for


T = Term

TERMS: list[Term] = [
    # statistics and mathematics (國家教育研究院 雙語詞彙)
    T("方差", "變異數", "方差", "variance is 變異數 in Taiwan; 方差 is mainland"),
    T(
        "有偏方差",
        "有偏變異數",
        "",
        "biased variance (jieba alone cuts 有 + 偏方 + 差)",
    ),
    T(
        "无偏方差",
        "無偏變異數",
        "",
        "unbiased variance (jieba alone cuts 无 + 偏方 + 差)",
    ),
    T("协方差", "共變異數", "", "covariance is 共變異數 in Taiwan"),
    T("均值", "平均值", "", "a mean is 平均值 (平均數) in Taiwan"),
    T("噪声", "雜訊", "", "noise is 雜訊 in Taiwan"),
    T("正态分布", "常態分佈", "", "the normal distribution: 常態分佈"),
    T("正态", "常態", "", "the normal distribution is 常態分佈 in Taiwan"),
    T("归一化", "正規化", "歸一化", "normalization (LayerNorm, softmax) is 正規化"),
    T("批归一化", "批次正規化", "批歸一化", "BatchNorm is 批次正規化"),
    T("插值", "內插", "", "interpolation is 內插 in Taiwan"),
    T("随机数", "亂數", "", "random numbers are 亂數 in Taiwan"),
    T("滑动均值", "移動平均值", "", "a running mean: 移動平均值"),
    T("滑动中位数", "移動中位數", "", "a running median: 移動中位數"),
    T("滑动平均值", "移動平均值", "", "a running (moving) average: 移動平均值"),
    T("滑动平均", "移動平均", "", "a running (moving) average is 移動平均"),
    T(
        "最多只",
        "最多只",
        "",
        "at most only; jieba cuts 最 + 多只, which OpenCC reads as 多隻 (many animals)",
        mainland=False,
    ),
    T("不变量", "不變量", "", "an invariant; OpenCC makes it 不變數"),
    T(
        "几根指针",
        "幾根指針",
        "",
        "a clock's hands are 指針; OpenCC makes them 指標",
        mainland=False,
    ),
    T("环形", "環狀", "", "ring attention / ring all-reduce: 環狀"),
    # machine learning
    T("掩码", "遮罩", "掩碼", "a mask is 遮罩 in Taiwan ML texts"),
    T("掩蔽", "遮蔽", "", "masked out: 遮蔽"),
    T(
        "激活",
        "活化",
        "激活",
        "an activation is 活化 (值); OpenCC's 啟用 means 'enable'",
    ),
    T("激活函数", "活化函數", "激活函數", "the activation function is 活化函數"),
    T(
        "激活值",
        "活化值",
        "",
        "activation values; OpenCC's 啟用值 means 'enabled value'",
    ),
    T("预激活", "預活化", "", "pre-activation; OpenCC's 預啟用 means 'pre-enable'"),
    T(
        "推理",
        "推論",
        "推理",
        "inference (running a trained model) is 推論",
        r"\binferen",
    ),
    T(
        "循环",
        "遞迴",
        "",
        "recurrence (an RNN's recurrent layer) is 遞迴; a loop stays 迴圈",
        r"\brecurren",
    ),
    T(
        "前缀",
        "前綴",
        "",
        "the top-p prefix of a sorted list; OpenCC's 字首 is a word prefix",
    ),
    T("贪心", "貪婪", "", "greedy decoding is 貪婪解碼"),
    T("束搜索", "集束搜尋", "", "beam search is 集束搜尋"),
    T("词表", "詞彙表", "", "a vocabulary is 詞彙表"),
    T("绑定", "綁定", "", "weight tying is 權重綁定; 繫結 is a programming binding"),
    T(
        "连接",
        "連接",
        "鏈接",
        "a residual connection is 連接; OpenCC's 連線 means online",
    ),
    T(
        "连接起来",
        "連接起來",
        "",
        "to connect (two positions): 連接; OpenCC's 連線 is online",
    ),
    T(
        "参数",
        "參數",
        "參數",
        "a model's parameters are 參數; 引數 is a call's argument",
    ),
    T("算子", "運算子", "", "an operator (kernel) is 運算子; 運算元 is an operand"),
    T("并行", "平行", "并行", "parallel computing is 平行 (平行運算, 資料平行)"),
    T("并行计算", "平行運算", "并行計算", "parallel computing is 平行運算"),
    T("并行执行", "平行執行", "", "executed in parallel: 平行"),
    T(
        "串行",
        "循序",
        "",
        "serial execution is 循序執行; OpenCC makes it 序列 (sequence)",
    ),
    # computing
    T(
        "函数",
        "函數",
        "函數",
        "a mathematical function (softmax, sine) is 函數 in Taiwan too",
    ),
    T(
        "指数函数",
        "指數函數",
        "",
        "the exponential function: 函數, as every mathematical one",
    ),
    T("三角函数", "三角函數", "", "trigonometric functions: 函數"),
    T("偶函数", "偶函數", "", "an even function: 函數"),
    T("一元函数", "一元函數", "", "a function of one variable: 函數"),
    T("映射", "映射", "", "a (linear) map is 映射; OpenCC makes it 對映"),
    T("克隆", "複製", "", "to clone a repository: 複製"),
    T("拖动", "拖曳", "", "to drag a slider: 拖曳"),
    T("实现", "實作", "實現", "an implementation, to implement: 實作"),
    T("构建", "建構", "", "to construct (a table, a model): 建構"),
    T("构建本书", "建置本書", "", "building the book (a software build) is 建置"),
    T("本书构建", "本書建置", "", "the book's build is 建置"),
    T("构建出来", "建置出來", "", "built (by the book's build): 建置"),
    T("构建就会失败", "建置就會失敗", "", "the build fails: 建置"),
    T("构建失败", "建置失敗", "", "the build fails: 建置"),
    T("返回值", "傳回值", "", "a return value: 傳回值"),
    T("类", "類別", "", "a Python class is 類別", r"\bclass"),
    T(
        "实例化",
        "實例化",
        "",
        "to instantiate: 實例化; OpenCC's 例項 is a Microsoft term",
    ),
    T("打印", "印出", "", "to print to the output is 印出; 列印 is printing on paper"),
    T("打印出", "印出", "", "printed out: 印出 (not 印出出)"),
    T("打印输出", "印出輸出", "", "prints the output: 印出"),
    T("并打印", "並印出", "", "and prints: 印出"),
    T("该类", "該類別", "", "this class (of the library): 類別", r"\bclass"),
    T("超参数", "超參數", "", "a hyperparameter; OpenCC makes it 超引數"),
    T("返回", "傳回", "", "a function returns (傳回) a value"),
    T("缓存", "快取", "緩存", "a cache is 快取 (OpenCC's own choice)"),
    T("网络", "網路", "網絡", "a network is 網路 (OpenCC's own choice)"),
    T("单元格", "儲存格", "", "a notebook cell is 儲存格 (Jupyter's Taiwan wording)"),
    T("代码单元", "程式碼儲存格", "", "a code cell is 程式碼儲存格"),
    T("滑块", "滑桿", "", "a slider is 滑桿"),
    T("仓库", "儲存庫", "", "a code repository is 儲存庫"),
    T("显存", "顯示卡記憶體", "顯存", "a GPU's memory, not video memory"),
    T(
        "进程",
        "行程",
        "",
        "an operating system's process is 行程 in Taiwan; 程序 is a program",
    ),
    T(
        "作用对象",
        "作用對象",
        "",
        "what something acts on; OpenCC's 物件 is a program object",
        mainland=False,
    ),
    T(
        "支持该结论",
        "支持該結論",
        "",
        "results support a conclusion: 支持, not software 支援",
        mainland=False,
    ),
]


# The words that name a matrix's (or a table's) row or column. Their 行 (mainland: row)
# becomes 列 and their 列 (mainland: column) becomes 行, when the English says row or
# column. jieba cuts 第 $i$ 行 to a lone 行, 每一行 to 每 + 一行.
ROW_WORDS = set(
    "行 一行 两行 几行 三行 六行 每行 各行 逐行 按行 整行 该行 空行 行数 行向量 "
    "第一行 第二行 第三行 最后一行 行长 分行 行会 再行 行为".split()
)
COLUMN_WORDS = set("列 一列 两列 第一列 第二列 列块 先列 列向量 各列 逐列 按列".split())
ROW_COLUMN_WORDS = ROW_WORDS | COLUMN_WORDS
# words with 行 or 列 in another sense: left to OpenCC
OTHER_ROW_COLUMN_WORDS = set(
    "序列 运行 进行 并行 执行 并列 列出 列在 排列 重新排列 顺序排列 拒绝执行 "
    "一行代码 两行代码 三行代码 平行 下列 并行计算 串行 另行 列表 流行 行不通 "
    "并行执行 一系列 系列 不行 反其道而行之 自行 行程 数列".split()
)
# a word cut wrongly by jieba's dictionary: 第 $k$ 行为 $w_k$ is row k *is* w_k, while
# 行为 is a behaviour; 行会 (guild) is 填充行 + 会; 分行 (branch) is 得分 + 行
_SPLIT_WHEN_ENGLISH = {"行为": r"\brows?\b(?!.*behavi)", "行会": r"\brows?\b",
                       "分行": r"\brows?\b"}  # fmt: skip
# a whole-entry exception: "the last line" of a code cell is a line, not a row
_LINE_WORDS = {"一行", "两行", "几行", "三行", "最后一行", "每行"}

ROWS = re.compile(r"\brows?\b|\brow-|\browwise", re.I)
COLUMNS = re.compile(r"\bcolumns?\b|\bcolumn-", re.I)
LINES = re.compile(r"\blines?\b", re.I)

# roles, math, inline code, link targets, and text already marked as Simplified or
# Traditional: never converted
PROTECTED = re.compile(
    r'<span lang="zh-Han[st]"[^>]*>[^<]*</span>|'
    r"\{[\w:.-]+\}`[^`]*`|\$\$.+?\$\$|\$[^$]+\$|`[^`]*`|\]\([^)\s]+\)|<[^<>]+>",
    re.S,
)

# Taiwan typesetting quotes
QUOTES = {"“": "「", "”": "」", "‘": "『", "’": "』"}

# Taiwan words that contain a mainland term of the table and are right (平均值, the
# mean, holds 均值); mainland_terms subtracts them
ALSO_TAIWAN = {"平均值"}

# Strings that must never appear on a zh_TW page, each with its reason.
FORBIDDEN: dict[str, str] = {
    "推匯出": "推导出 split as 推 + 导出 (export): 推導出",
    "隻": "只 (only) read as the classifier of animals (大多隻有, 這隻需要, 最多隻)",
    "后": "后 is an empress; after is 後 (詞元后)",
    "併為": "并为 (and for) read as 合併 (merge)",
    "作用物件": "作用对象 (what it acts on) read as a program object",
    "迴圈層": "a recurrent layer is 遞迴層, not a programming loop",
    "啟用值": "an activation is 活化值, not an 'enabled value'",
    "預啟用": "pre-activation is 預活化",
    "隱藏啟用": "hidden activations are 隱藏活化值",
    "啟用函式": "the activation function is 活化函數",
    "字首": "the top-p prefix is 前綴; 字首 is a word prefix",
    "不變數": "an invariant is 不變量",
    "支援該結論": "results support (支持) a conclusion; 支援 is software support",
    "幾根指標": "a clock's hands are 指針",
    "幹淨": "干净 (clean) is 乾淨",
    "詞元后": "后 after a word is 後",
    "格里": "里 (inside) after a cell is 裡",
    "序列執行": "串行 (serial) read as 序列 (sequence): 循序執行",
    "連線": "a connection (residual, between positions) is 連接; 連線 is online",
    "繫結": "weight tying is 綁定",
    "引數": "a model's parameters are 參數",
    "視訊記憶體": "a GPU's memory is 顯示卡記憶體",
    "運算子數": "an operand is 運算元",
}


# ------------------------------------------------------------------------- conversion
@functools.cache
def _s2twp():
    import opencc

    return opencc.OpenCC("s2twp")


@functools.cache
def tokenizer():
    """jieba with the table's keys and the row/column words added as words."""
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    tk = jieba.Tokenizer()
    tk.initialize()
    for word in (
        [t.simplified for t in TERMS]
        + sorted(ROW_COLUMN_WORDS)
        + sorted(OTHER_ROW_COLUMN_WORDS)
    ):
        if word not in ("行", "列"):
            tk.add_word(word)
    tk.del_word("行列")  # 某行列出 is 某行 + 列出, not 行列 (ranks)
    return tk


def words(text: str) -> list[str]:
    """The Simplified text cut into words (jieba, no HMM guesses: deterministic)."""
    return list(tokenizer().cut(text, HMM=False))


_TERM = {}
for _t in TERMS:
    _TERM.setdefault(_t.simplified, []).append(_t)
_SWAP_ROW = str.maketrans({"行": "列"})
_SWAP_COLUMN = str.maketrans({"列": "行"})


def _row_column(word: str, english: str | None) -> str | None:
    """The Taiwan spelling of a row/column word (converted), or None if not one."""
    if word not in ROW_COLUMN_WORDS:
        return None
    rows = english is None or bool(ROWS.search(english))
    columns = english is None or bool(COLUMNS.search(english))
    if word in _SPLIT_WHEN_ENGLISH:
        if english is not None and not re.search(_SPLIT_WHEN_ENGLISH[word], english):
            return None
    if english is not None and word in _LINE_WORDS and LINES.search(english):
        if word == "最后一行" and re.search(r"\blast line\b", english, re.I):
            return None
        if not ROWS.search(english.replace("arrow", "")):
            return None
    converted = _s2twp().convert(word)
    if word in ROW_WORDS:
        return converted.translate(_SWAP_ROW) if rows else converted
    return converted.translate(_SWAP_COLUMN) if columns else converted


def _term(word: str, english: str | None) -> str | None:
    for term in _TERM.get(word, ()):
        if (
            term.english is None
            or english is None
            or re.search(term.english, english, re.I)
        ):
            return term.taiwan
    return None


def article_wording(text: str) -> str:
    """The text as the second source article would write it: Traditional characters
    (OpenCC s2t, no Taiwan phrases) with the article's own word for each term it
    uses."""
    import opencc

    s2t = opencc.OpenCC("s2t")
    out = []
    for word in words(text):
        article = [t.article for t in _TERM.get(word, ()) if t.article]
        out.append(article[0] if article else s2t.convert(word))
    return "".join(out)


def uses_article_term(text: str) -> bool:
    """Does the text contain a term whose article wording differs from Taiwan's?"""
    return any(
        t.article and t.article != t.taiwan
        for w in words(text)
        for t in _TERM.get(w, ())
    )


def convert_prose(text: str, english: str | None = None) -> str:
    """Simplified prose -> Taiwan prose (no markup handling; see catalogs.to_taiwan)."""
    if not text:
        return text
    pieces = words(text)
    fixed: dict[int, str] = {}
    for i, word in enumerate(pieces):
        ours = _term(word, english)
        if ours is None:
            ours = _row_column(word, english)
        if ours is not None:
            fixed[i] = ours
    # one OpenCC call for the words left: \x01 keeps its phrases inside one word
    converted = _s2twp().convert("\x01".join(pieces)).split("\x01")
    assert len(converted) == len(pieces), "OpenCC dropped a word separator"
    out = "".join(fixed.get(i, c) for i, c in enumerate(converted))
    for a, b in QUOTES.items():
        out = out.replace(a, b)
    return out


# ------------------------------------------------------------------------ page scan
def mainland_terms() -> dict[str, tuple[str, ...]]:
    """{a mainland term in Traditional characters: the Taiwan words that contain it}
    for every unconditional row whose mainland word differs from Taiwan's: 方差, 掩碼,
    歸一化 …; an occurrence inside one of those words (均值 in 平均值) is no mainland
    term."""
    import opencc

    s2t = opencc.OpenCC("s2t")
    taiwan = {t.taiwan for t in TERMS} | ALSO_TAIWAN
    out = {}
    for t in TERMS:
        mainland = s2t.convert(t.simplified)
        if t.english is None and t.mainland and mainland not in t.taiwan:
            out[mainland] = tuple(w for w in taiwan if mainland in w and w != mainland)
    # 構建 covers 構建本書: count each occurrence once
    return {m: w for m, w in out.items() if not any(o in m and o != m for o in out)}


def count_mainland(text: str, mainland: str, inside: tuple[str, ...]) -> int:
    for word in inside:
        text = text.replace(word, "")
    return text.count(mainland)


def page_text(html: str) -> str:
    """The visible prose of a built page: its article without code, math, scripts."""
    m = re.search(r'<article[^>]*role="main"[^>]*>(.*)</article>', html, re.S)
    body = m.group(1) if m else html
    # Simplified text and the second article's wording (the glossary) are quoted
    body = re.sub(
        r'<span lang="zh-Hans">[^<]*</span>'
        r'|<span lang="zh-Hant" class="tl-article">[^<]*</span>',
        " ",
        body,
    )
    body = re.sub(
        r"<(script|style|pre|code|math|svg)\b.*?</\1>"
        r"|<span class=\"math[^\"]*\">.*?</span>"
        r"|<div class=\"math[^\"]*\">.*?</div>",
        " ",
        body,
        flags=re.S,
    )
    return re.sub(r"<[^>]+>", "", body)


def scan(site: Path) -> dict[str, dict[str, int]]:
    """{kind: {string: count}} over every built zh_TW page under ``site``."""
    import opencc

    t2s = opencc.OpenCC("tw2sp")
    mainland = mainland_terms()
    found: dict[str, dict[str, int]] = {
        "forbidden": {},
        "mainland": {},
        "row/column": {},
    }
    for page in sorted(site.rglob("*.html")):
        text = page_text(page.read_text(encoding="utf-8"))
        for s in FORBIDDEN:
            if n := text.count(s):
                found["forbidden"][s] = found["forbidden"].get(s, 0) + n
        for s, inside in mainland.items():
            if n := count_mainland(text, s, inside):
                found["mainland"][s] = found["mainland"].get(s, 0) + n
        # the row/column words, cut as the Simplified text would be
        for word in words(t2s.convert(text)):
            if word in ROW_COLUMN_WORDS:
                key = "行 words" if "行" in word else "列 words"
                found["row/column"][key] = found["row/column"].get(key, 0) + 1
    return found


def row_entries(locales: Path) -> tuple[int, int, int]:
    """(entries whose English speaks of rows only, those whose derived zh_TW text still
    names a row with 行, the number of such words) over the derived catalogs under
    ``locales``; the row words are found by cutting the text turned back into
    Simplified."""
    import opencc
    from babel.messages.pofile import read_po

    t2s = opencc.OpenCC("tw2sp")
    rows = wrong = count = 0
    for path in sorted(locales.rglob("*.po")):
        with path.open("rb") as f:
            messages = [m for m in read_po(f) if m.id and m.string]
        for m in messages:
            english = str(m.id)
            if (
                not ROWS.search(english)
                or COLUMNS.search(english)
                or LINES.search(english)
            ):
                continue
            rows += 1
            text = t2s.convert(PROTECTED.sub("\n", str(m.string)))
            hang = [
                w for w in words(text) if w in ROW_WORDS and "行" in w
                and w not in _SPLIT_WHEN_ENGLISH
            ]  # fmt: skip
            wrong += bool(hang)
            count += len(hang)
    return rows, wrong, count


def main(argv: list[str]) -> int:
    from .paths import BUILD, DERIVED_LOCALES

    site = Path(argv[0]) if argv else BUILD / "html" / "zh_TW"
    locales = Path(argv[1]) if len(argv) > 1 else DERIVED_LOCALES / "zh_TW"
    found = scan(site)
    print(f"term table: {len(TERMS)} terms, {len(FORBIDDEN)} forbidden strings, "
          f"{len(ROW_COLUMN_WORDS)} row/column words")  # fmt: skip
    for kind, counts in found.items():
        total = sum(counts.values())
        items = sorted(counts.items(), key=lambda x: -x[1])
        detail = ", ".join(f"{s} {n}" for s, n in items)
        print(f"{site}: {kind}: {total}" + (f" ({detail})" if detail else ""))
    rows, wrong, count = row_entries(locales)
    print(f"{locales}: {rows} entries speak of rows only (no column, no line); "
          f"{wrong} of them write a row with 行 ({count} words)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
