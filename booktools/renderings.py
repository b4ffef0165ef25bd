"""How the zh_CN catalogs render each term of the glossary, so that drift is seen.

    python -m booktools.renderings          # the report, one line per glossary term

For every term of ``book/glossary.md`` the report counts the catalog entries whose
English names the term and, of those, how many write the glossary's Simplified Chinese
(any of its forms: 掩蔽自注意力 and 带掩码的自注意力 both count), and shows where the
others are. A low share is not always wrong (a sentence may say "the mask" with 它); it
is where to look.

``DRIFT`` holds the renderings the book has settled against, each with the one it
writes and why; ``tests/test_renderings.py`` fails when one of them comes back into a
catalog. Text in code, math, roles and markup is not prose and is never counted.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .catalogs import PROTECTED, SOURCE_LANGUAGE, read_translations
from .paths import BOOK, LOCALES

GLOSSARY = BOOK / "glossary.md"
ROW = re.compile(
    r'^\| \*\*(?P<en>[^*]+)\*\* \| <span lang="zh-Hans">(?P<zh>[^<]+)</span>', re.M
)


@dataclass(frozen=True)
class Drift:
    """A rendering the book does not write (a regular expression over prose), the one
    it writes instead, why, and a sentence the rule catches (its test)."""

    term: str
    rejected: str
    written: str
    reason: str
    example: str


DRIFT: list[Drift] = [
    Drift(
        "stack (of layers)", "堆栈", "层堆叠",
        "堆栈 is the data structure (a LIFO stack), not layers stacked up",
        "模型有两个堆栈",
    ),
    Drift(
        "masked", r"被掩码(?!遮)", "被掩蔽",
        "the glossary's verb is 掩蔽 (掩蔽自注意力); 掩码 is the noun, the mask "
        "itself (被掩码遮住, hidden by the mask, has the noun as agent and stays)",
        "被掩码的键",
    ),
    Drift(
        "masked", "被遮住|被遮蔽|被遮盖|被遮挡", "被掩蔽",
        "one word for a masked position, in the prose and in the figures alike",
        "灰色 = 被遮蔽",
    ),
    Drift(
        "memory (encoder output)", r"记忆（memory）|编码器记忆|(?<!值)记忆",
        "编码器输出",
        "the glossary's word; 记忆 stays only in Geva's key-value memories (键–值记忆)",
        "查找记忆的键和值",
    ),
    Drift(
        "memory (encoder output)", r"(?<![\w`])(?<!称为 )memory(?![\w`])",
        "编码器输出",
        "the English word left bare in Chinese prose (code such as `memory` stays, "
        "and so does the paper's word where the term is introduced: 称为 memory)",
        "memory 本身并不标明",
    ),
    Drift(
        "d_model (model width)", "模型宽度", "模型维度", "the glossary's word",
        "混合回模型宽度",
    ),
    Drift(
        "d_k (head width)", "头宽", "每个头的维度", "the glossary's word",
        "对三种头宽测量",
    ),
    Drift(
        "code cell", r"代码单元(?!格)", "单元格 / 代码单元格",
        "a notebook's cell is 单元格, as Jupyter's own Chinese interface says",
        "下面的代码单元计算",
    ),
    Drift(
        "nat", r"(?<![\w`（])nats?(?![\w`）])", "奈特",
        "the glossary's unit of entropy (奈特（nat） glosses it)",
        "熵为 2.08 nats",
    ),
    Drift(
        "encoder–decoder", "编码器–解码器", "编码器-解码器",
        "the glossary's hyphen, one spelling of the term",
        "编码器–解码器模型",
    ),
    Drift(
        "bookkeeping", "簿记|记账", "管理上的开销 / 对齐长度",
        "accountancy words calqued from the English",
        "只是记账用的",
    ),
    Drift(
        "learning-rate warm-up", "学习率先经过学习率预热", "学习率先经过预热",
        "the learning rate named twice in one clause",
        "学习率先经过学习率预热逐步上升",
    ),
]  # fmt: skip


def prose(text: str) -> str:
    """``text`` without code, math, roles and markup: the words a reader reads."""
    return PROTECTED.sub(" ", text)


def glossary_terms(path: Path = GLOSSARY) -> list[tuple[str, list[str]]]:
    """(English term, its Simplified forms) of every row of the glossary: the
    glossary's 掩蔽自注意力（带掩码的自注意力） gives both forms."""
    rows = []
    for m in ROW.finditer(path.read_text(encoding="utf-8")):
        forms = [f for f in re.split(r"[（）/]", m.group("zh")) if f.strip()]
        rows.append((m.group("en"), [f.strip() for f in forms]))
    return rows


def catalog_entries(language: str = SOURCE_LANGUAGE) -> list[tuple[str, str, str]]:
    """(catalog, English, translation) of every entry translated into other words
    (the glossary's English column is its own translation, and is left out)."""
    root = LOCALES / language / "LC_MESSAGES"
    out = []
    for path in sorted(root.rglob("*.po")):
        name = path.relative_to(root).as_posix()
        out += [
            (name, en, zh) for en, zh in read_translations(path).items() if zh != en
        ]
    return out


def english_pattern(term: str) -> re.Pattern:
    """The term as English prose writes it: the glossary's head word without its
    bracket (``layer normalization (LayerNorm)`` -> layer normalization), or the
    bracket of a symbol (``d_model (model width)`` -> model width), any case."""
    head = re.sub(r"\s*\(.*\)$", "", term).split(" / ")[0]
    bracket = re.search(r"\(([^)]+)\)$", term)
    if "_" in head and bracket:  # a symbol, d_model: prose names it in the bracket
        head = bracket.group(1)
    return re.compile(rf"\b{re.escape(head)}", re.I)


def drift_found(entries=None) -> list[tuple[Drift, str, str]]:
    """(the drift, catalog, the text around it) of every rejected rendering left."""
    found = []
    for name, _, zh in entries if entries is not None else catalog_entries():
        text = prose(zh)
        for drift in DRIFT:
            for m in re.finditer(drift.rejected, text):
                around = text[max(0, m.start() - 12) : m.end() + 12]
                found.append((drift, name, around.replace("\n", " ")))
    return found


def report(entries=None) -> list[str]:
    """One line per glossary term: the entries whose English names it, how many of them
    write the glossary's form, and the first few that do not."""
    entries = entries if entries is not None else catalog_entries()
    lines = []
    for term, forms in glossary_terms():
        english = english_pattern(term)
        named = [(n, zh) for n, en, zh in entries if english.search(prose(en))]
        if not named:
            continue
        others = [n for n, zh in named if not any(f in zh for f in forms)]
        share = 1 - len(others) / len(named)
        where = ", ".join(sorted(set(others))[:4])
        lines.append(
            f"{share:4.0%}  {term} = {' / '.join(forms)}: {len(named) - len(others)}"
            f" of {len(named)} entries" + (f" (others in {where})" if others else "")
        )
    return lines


def main(argv: list[str]) -> int:
    entries = catalog_entries()
    for line in report(entries):
        print(line)
    found = drift_found(entries)
    for drift, name, around in found:
        print(f"DRIFT {drift.term}: {name}: …{around}… (write {drift.written})")
    print(
        f"{len(glossary_terms())} glossary terms; {len(found)} rejected renderings left"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
