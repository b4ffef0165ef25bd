"""The Traditional (Taiwan) edition's wording: the seed of a zh_TW entry from zh_CN, and
the scan of the built zh_TW pages.

The zh_TW catalogs are reviewed by hand; this converter only seeds a new or changed
entry, fuzzy until a reviewer accepts it (``booktools.catalogs``). OpenCC (s2twp) alone
splits words wrongly (推导出 -> 推匯出), knows no field (方差, 掩码 stay mainland) and
cannot know that Taiwan writes 列 for a matrix row and 行 for a column. Here:

1. jieba cuts the Simplified text into words, the table's keys added as words, so a
   rule applies to a whole word only (运算元 is not 算子, 执行 is not 行);
2. a key of the term table (``taiwan_terms.tsv``) becomes the Taiwan term, some only
   when the English source says so (推理 is 推論 for "inference");
3. a row word (行, 每行 …) or column word (列, 各列 …) has 行 and 列 swapped when the
   English speaks of rows or columns; ``OTHER_ROW_COLUMN_WORDS`` are the words that
   only contain the characters (执行, 序列 …);
4. every other word goes through OpenCC on its own.

:func:`scan` reads the built pages, not the table: the forbidden strings
(``taiwan_forbidden.tsv``), the mainland terms (``mainland_terms.tsv`` and the table's),
the Simplified-only characters outside ``lang="zh-Hans"``, and N 位 for bits.
``python -m booktools.taiwan [-v] [SITE_DIR [LOCALE_DIR]]`` prints the counts per class
(-v: and where), and the zh_TW entries that still write a row with 行.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


def _rows(name: str, fields: int) -> list[list[str]]:
    """The rows of one of the tab-separated data files next to this module."""
    lines = (HERE / name).read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if line.strip() and line[0] != "#"]
    if bad := [r for r in rows if len(r) != fields]:
        raise ValueError(f"{name}: rows of {fields} tab-separated fields, not {bad}")
    return rows


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


TERMS: list[Term] = [
    Term(s, tw, article, reason, english or None, mainland == "yes")
    for s, tw, article, english, mainland, reason in _rows("taiwan_terms.tsv", 6)
]


@dataclass(frozen=True)
class Mainland:
    """A mainland term as a converted page shows it, what Taiwan writes instead, the
    Taiwan words that contain it and are right, where the usage is recorded, and why."""

    mainland: str
    taiwan: str
    right: tuple[str, ...]
    source: str
    reason: str


MAINLAND: list[Mainland] = [
    Mainland(m, tw, tuple(right.split()), source, reason)
    for m, tw, right, source, reason in _rows("mainland_terms.tsv", 5)
]

# Strings that must never appear on a zh_TW page, each with its reason.
FORBIDDEN: dict[str, str] = dict(_rows("taiwan_forbidden.tsv", 2))

_WORDS = {kind: set(words.split()) for kind, words in _rows("taiwan_row_column.tsv", 2)}
ROW_WORDS, COLUMN_WORDS = _WORDS["row"], _WORDS["column"]
ROW_COLUMN_WORDS = ROW_WORDS | COLUMN_WORDS
OTHER_ROW_COLUMN_WORDS = _WORDS["other"]  # 行 or 列 in another sense: left to OpenCC
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


# ------------------------------------------------------------------------- conversion
@functools.cache
def _s2twp():
    import opencc

    return opencc.OpenCC("s2twp")


@functools.cache
def _s2t():
    import opencc

    return opencc.OpenCC("s2t")


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
# Characters whose s2t conversion differs but which are standard Traditional characters
# too, in another sense (后 an empress, 里 a mile, 台 in 台灣, 于 a surname): OpenCC's
# STCharacters lists each among its own Traditional forms. tests/test_zh_tw.py checks
# this against the dictionary that ships with opencc.
TRADITIONAL_TOO = (
    "熏淀郁适雇采里辟荐胜苹虫跖腊腌范蚝蝎蜡膻准几凶厂厘划占台叶吁吃后帘岩岳党夸咨咸尸"
    "唇干广征确种筑皂挂涂涌杠杰极游据斗愿朴柜万丑丰伙于云亘仆价余佣㐹"
)
CJK = re.compile(r"[\u3400-\u9fff\U00020000-\U0002ffff]")
# N 位 for N bits: in Taiwan 8 位數 is an eight-digit number and 16 位 a count of people
# or places; bits are 位元 (8 位元整數, 16 位元浮點數). Not counted: 位元, 位置, 位址,
# 位移, 位於, N 位數字 (N digits), an ordinal (第 3 位), 位 as the classifier of people.
BITS = re.compile(
    r"(?<![第\d.])(?<!第 )\d+\s?位(?!元|置|址|移|於|數字|[讀作學專使同參開研工])"
)


def mainland_terms() -> dict[str, tuple[str, ...]]:
    """{a mainland term in Traditional characters: the Taiwan words that contain it}:
    every row of ``mainland_terms.tsv`` and every unconditional row of the term table
    whose mainland word differs from Taiwan's. An occurrence inside one of those words
    (均值 in 平均值), or inside a longer mainland term of the list (代碼 in 源代碼,
    counted there), is not counted."""
    import opencc

    s2t = opencc.OpenCC("s2t")
    right: dict[str, set[str]] = {}
    for m in MAINLAND:
        right.setdefault(m.mainland, set()).update(m.right + (m.taiwan,))
    taiwan = {t.taiwan for t in TERMS} | {"平均值"}
    for t in TERMS:
        mainland = s2t.convert(t.simplified)
        if t.english is None and t.mainland and mainland not in t.taiwan:
            right.setdefault(mainland, set()).update(taiwan)
    out = {}
    for m, words in right.items():
        longer = {o for o in right if m in o and o != m}
        out[m] = tuple(sorted(w for w in words | longer if m in w and w != m))
    return out


def count_mainland(text: str, mainland: str, inside: tuple[str, ...]) -> int:
    for word in sorted(inside, key=len, reverse=True):
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


SHOWN = re.compile(r'\s(?:title|aria-label|placeholder|alt)="([^"]*)"')


def visible_text(html: str) -> str:
    """Everything a reader of the page sees, header, sidebars and footer included:
    text, tooltips, labels, placeholders; not scripts, styles, nor an element of text
    marked Simplified (``<span lang="zh-Hans">``, the switcher's ``lang="zh-CN"``), nor
    the glossary's verbatim quotes of the second article, which writes 并 itself."""
    html = re.sub(
        r"<(script|style|template)\b.*?</\1>"
        r'|<(\w+)\b[^>]*\slang="zh-(?:Hans|CN)\b[^>]*>[^<]*</\2>'
        r'|<span lang="zh-Hant" class="tl-article">[^<]*</span>',
        " ",
        html,
        flags=re.S,
    )
    shown = SHOWN.findall(html)
    return "\n".join([re.sub(r"<[^>]+>", " ", html), *shown])


@functools.cache
def is_simplified_only(char: str) -> bool:
    """A character that OpenCC turns into another in Traditional text (发, 这, 们),
    and in Taiwan's, and that is no Traditional character itself."""
    return (
        char not in TRADITIONAL_TOO
        and _s2t().convert(char) != char
        and _s2twp().convert(char) != char  # 群: OpenCC's 羣, Taiwan's 群
    )


def simplified_characters(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in CJK.findall(text):
        if is_simplified_only(c):
            out[c] = out.get(c, 0) + 1
    return out


KINDS = ("forbidden", "mainland", "simplified", "bits", "row/column")


def scan(site: Path, places: dict | None = None) -> dict[str, dict[str, int]]:
    """{kind: {string: count}} over every built zh_TW page under ``site``: forbidden
    strings, mainland terms and N 位 for bits in the pages' prose; Simplified-only
    characters in all the page shows (and the search's words, ``translations.js``);
    the row/column words, for the record. ``places``: filled with {(kind, string):
    [page, ...]}."""
    import opencc

    t2s = opencc.OpenCC("tw2sp")
    mainland = mainland_terms()
    found: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}

    def add(kind: str, key: str, n: int = 1) -> None:
        found[kind][key] = found[kind].get(key, 0) + n
        if places is not None:
            places.setdefault((kind, key), []).append(page.relative_to(site))

    pages = sorted(site.rglob("*.html")) + sorted(site.rglob("translations.js"))
    for page in pages:
        html = page.read_text(encoding="utf-8")
        if page.suffix == ".js":  # the search's words, \u-escaped
            js = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), html)
            for c, n in simplified_characters(js).items():
                add("simplified", c, n)
            continue
        text = page_text(html)
        for s in FORBIDDEN:
            if n := text.count(s):
                add("forbidden", s, n)
        for s, inside in mainland.items():
            if n := count_mainland(text, s, inside):
                add("mainland", s, n)
        for m in BITS.finditer(text):
            add("bits", m.group(0) + text[m.end() : m.end() + 2])
        for c, n in simplified_characters(visible_text(html)).items():
            add("simplified", c, n)
        # the row/column words, cut as the Simplified text would be
        for word in words(t2s.convert(text)):
            if word in ROW_COLUMN_WORDS:
                add("row/column", "行 words" if "行" in word else "列 words")
    return found


def row_entries(locales: Path) -> tuple[int, int, int]:
    """(entries whose English speaks of rows only, those whose zh_TW text still names a
    row with 行, the number of such words) over the zh_TW catalogs under ``locales``;
    the row words are found by cutting the text turned back into Simplified."""
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
    from .paths import BUILD, LOCALES

    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    site = Path(argv[0]) if argv else BUILD / "html" / "zh_TW"
    locales = Path(argv[1]) if len(argv) > 1 else LOCALES / "zh_TW"
    places: dict = {}
    found = scan(site, places)
    print(f"lists: {len(mainland_terms())} mainland terms ({len(MAINLAND)} in "
          f"mainland_terms.tsv), {len(FORBIDDEN)} forbidden strings; term table: "
          f"{len(TERMS)} terms, {len(ROW_COLUMN_WORDS)} row/column words")  # fmt: skip
    for kind, counts in found.items():
        total = sum(counts.values())
        items = sorted(counts.items(), key=lambda x: -x[1])
        detail = ", ".join(f"{s} {n}" for s, n in items)
        print(f"{site}: {kind}: {total}" + (f" ({detail})" if detail else ""))
        if verbose and kind != "row/column":
            for s, _ in items:
                pages = sorted(set(map(str, places[kind, s])))
                print(f"    {s}: {' '.join(pages)}")
    rows, wrong, count = row_entries(locales)
    print(f"{locales}: {rows} entries speak of rows only (no column, no line); "
          f"{wrong} of them write a row with 行 ({count} words)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
