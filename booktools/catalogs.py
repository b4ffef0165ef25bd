"""The editions' languages and their gettext catalogs.

* zh_CN is translated by hand, in ``locales/zh_CN/LC_MESSAGES/**/*.po``.
* zh_TW is derived from zh_CN at build time with OpenCC (s2twp: Traditional characters
  and Taiwan phrases), then ``ZH_TW_OVERRIDES`` corrects the few places where OpenCC's
  everyday choice is wrong for this field. Its catalogs go to ``_build/locales``.
"""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from .paths import DERIVED_LOCALES, LOCALES

# (language code, label in its own language); the first is the source edition
EDITIONS = [("en", "English"), ("zh_CN", "简体中文"), ("zh_TW", "繁體中文")]
SOURCE_LANGUAGE = "zh_CN"  # the hand-written catalogs; zh_TW is derived from them
IMAGE_CATALOG = "images"  # the words drawn inside the figures
FIGURE_CATALOG = "figures"  # the words of the interactive figures' HTML blocks


def locale_dir(language: str) -> Path:
    """The directory whose ``<language>/LC_MESSAGES`` holds an edition's catalogs."""
    return LOCALES if language == SOURCE_LANGUAGE else DERIVED_LOCALES


def catalog_path(language: str, name: str) -> Path:
    return locale_dir(language) / language / "LC_MESSAGES" / f"{name}.po"


def read_translations(path: str | Path, location: str | None = None) -> dict[str, str]:
    """{msgid: msgstr} of a gettext catalog, translated and not fuzzy entries only;
    with ``location`` (a docname), only the entries found on that page."""
    with open(path, "rb") as f:
        return {
            str(m.id): str(m.string)
            for m in read_po(f)
            if m.id and m.string and not m.fuzzy
            and (location is None or any(loc == location for loc, _ in m.locations))
        }  # fmt: skip


def write_catalog(
    path: Path, language: str, entries: dict[str, list[str]], header: str = ""
) -> Path:
    """A catalog of ``entries`` ({English: [pages]}): translations kept, new entries
    empty, entries no longer found obsolete."""
    old = {}
    if path.exists():
        with path.open("rb") as f:
            old = {str(m.id): m for m in read_po(f) if m.id}
    catalog = Catalog(locale=language, project="The Transformer, Formula by Formula")
    if header:
        catalog.header_comment = header
    for text, pages in entries.items():
        before = old.get(text)
        catalog.add(
            text,
            before.string if before else "",
            locations=[(f"book/{p}", 0) for p in pages],
            user_comments=before.user_comments if before else [],
            flags=before.flags if before else (),
        )
    for text, message in old.items():
        if text not in entries:
            catalog.obsolete[text] = message
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=88)
    return path


def image_tables() -> dict[str, dict[str, str]]:
    """{language: {key: translation}} of the words inside the figures, for every
    edition (zh_TW derived from zh_CN as everywhere else)."""
    path = catalog_path(SOURCE_LANGUAGE, IMAGE_CATALOG)
    zh_cn = read_translations(path) if path.exists() else {}
    return {"zh_CN": zh_cn, "zh_TW": {k: to_taiwan(v) for k, v in zh_cn.items()}}


def figure_tables() -> dict[str, dict[str, str]]:
    """{language: {word: translation}} of the words of the interactive figures' HTML
    (titles, control labels, options, hover names), for every edition."""
    path = catalog_path(SOURCE_LANGUAGE, FIGURE_CATALOG)
    zh_cn = read_translations(path) if path.exists() else {}
    return {"zh_CN": zh_cn, "zh_TW": {k: to_taiwan(v) for k, v in zh_cn.items()}}


# --------------------------------------------------------------------- Traditional
# Where OpenCC's everyday Taiwan phrase is wrong for this field: (Simplified term, what
# s2twp makes of it, what this book writes, why). tests/test_translations.py checks that
# s2twp still gives the second column, so the table cannot go stale silently. Applied to
# the converted text (outside code, math and roles), longest first.
ZH_TW_OVERRIDES: list[tuple[str, str, str, str]] = [
    ("残差连接", "殘差連線", "殘差連接",
     "連線 is a network connection; a residual path is 連接"),
    ("参数", "引數", "參數",
     "a model's parameters are 參數; 引數 is a function call's argument"),
    ("算子", "運算元", "運算子",
     "an operator (kernel) is 運算子; 運算元 is an operand"),
    ("激活函数", "啟用函式", "激活函數",
     "the activation function of a network, as both source articles write it"),
    ("函数", "函式", "函數",
     "a mathematical function (softmax, sine, activation) is 函數 in Taiwan too"),
    ("显存", "視訊記憶體", "顯示卡記憶體", "a GPU's memory, not video memory"),
    ("进程", "程序", "行程",
     "an operating system's process is 行程 in Taiwan; 程序 is a program"),
]  # fmt: skip
# Taiwan typesetting quotes
ZH_TW_QUOTES = {"“": "「", "”": "」", "‘": "『", "’": "』"}

# roles, math, inline code, link targets, and text already marked as Simplified or
# Traditional: never converted
PROTECTED = re.compile(
    r'<span lang="zh-Han[st]">[^<]*</span>|'
    r"\{[\w:.-]+\}`[^`]*`|\$\$.+?\$\$|\$[^$]+\$|`[^`]*`|\]\([^)\s]+\)|<[^<>]+>",
    re.S,
)
REF_WITH_TEXT = re.compile(r"(\{(?:ref|numref|doc|term)\}`)([^`<]+)(<[^<>`]+>`)")

_FIXES = sorted(
    ((opencc_says, ours) for _, opencc_says, ours, _ in ZH_TW_OVERRIDES),
    key=lambda fix: len(fix[0]),
    reverse=True,
)


@functools.cache
def _s2twp():
    import opencc

    return opencc.OpenCC("s2twp")


def to_taiwan(text: str) -> str:
    """Simplified -> Traditional (Taiwan) outside code, math and roles."""
    converter = _s2twp()

    def convert(part: str) -> str:
        part = converter.convert(part)
        for opencc_says, ours in _FIXES:
            part = part.replace(opencc_says, ours)
        for a, b in ZH_TW_QUOTES.items():
            part = part.replace(a, b)
        return part

    pieces, last = [], 0
    for m in PROTECTED.finditer(text):
        pieces.append(convert(text[last : m.start()]))
        shown = REF_WITH_TEXT.fullmatch(m.group(0))
        if shown:  # {ref}`文字 <label>`: the text is prose, the label is not
            pieces.append(shown.group(1) + convert(shown.group(2)) + shown.group(3))
        else:
            pieces.append(m.group(0))
        last = m.end()
    pieces.append(convert(text[last:]))
    return "".join(pieces)


def _to_taiwan_catalog(src: Path, dst: Path) -> Catalog:
    """Read a zh_CN catalog, convert every translation, write it as zh_TW."""
    with src.open("rb") as f:
        catalog = read_po(f, locale="zh_CN")
    catalog.locale = "zh_TW"
    for message in catalog:
        if message.id and message.string:
            message.string = to_taiwan(message.string)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with dst.open("wb") as f:
        write_po(f, catalog, width=88)
    return catalog


def derive_zh_tw() -> int:
    """Write _build/locales/zh_TW from locales/zh_CN; returns the number of entries."""
    import sphinx_exercise

    src = LOCALES / "zh_CN" / "LC_MESSAGES"
    dst = DERIVED_LOCALES / "zh_TW" / "LC_MESSAGES"
    shutil.rmtree(dst, ignore_errors=True)
    n = 0
    for po in sorted(src.rglob("*.po")):
        catalog = _to_taiwan_catalog(po, dst / po.relative_to(src))
        n += sum(1 for m in catalog if m.id and m.string)
    # sphinx-exercise's own words ("Exercise", "Solution to"), which it ships for
    # zh_CN only; booktools/sphinx_ext.py registers the result
    exercise = Path(sphinx_exercise.__file__).parent / "translations/locales/zh_CN"
    catalog = _to_taiwan_catalog(
        exercise / "LC_MESSAGES/exercise.po", dst / "exercise.po"
    )
    with (dst / "exercise.mo").open("wb") as f:
        write_mo(f, catalog)
    return n
