"""Write a chapter notebook in another language: the English notebook with each
Markdown paragraph, heading, list item and table cell replaced by its translation from
the edition's catalog. Code cells stay as they are (and carry no outputs), so the
notebook runs as it is. A first code cell sets gettext's ``LANGUAGE`` to the edition's,
so that the exercise checkers explain mistakes in it; one code cell is added after the
chapter's first, which gives the live figures' forms the edition's words
(``transformer_lib.viz.use_words``, with the chapter's entries of the catalog
figures.po) and has the figures drawn with the edition's words inside them
(``transformer_lib.viz.image_words.use_image_words``, with the chapter's entries of
images.po).

    python -m booktools.notebooks zh_CN book/01_qkv.ipynb out.ipynb

The Sphinx message of a block is its Markdown source with newlines made spaces, so
each block is found again by parsing the cell with the same MyST Markdown parser and
using the line numbers of its tokens. This module is also the Sphinx extension that
puts these notebooks behind each edition's download button (``_sources/book/*.ipynb``):
:mod:`booktools.editions` lists it in the Chinese editions' configs, and
:func:`write_edition_notebooks` writes them when the build finishes (Sphinx's
``build-finished`` event, after its HTML builder has copied the English sources).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .catalogs import catalog_path, read_translations
from .figures import FONTS
from .paths import BOOK

EXTENSIONS = ["amsmath", "dollarmath", "colon_fence", "deflist", "substitution"]


def load_catalog(language: str, docname: str) -> dict[str, str]:
    path = catalog_path(language, docname)
    return read_translations(str(path)) if path.exists() else {}


def _parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    config = MdParserConfig(enable_extensions=set(EXTENSIONS))
    return create_md_parser(config, RendererHTML)


_MD = None


def message(text: str) -> str:
    """What Sphinx's gettext builder takes as the message of a block."""
    return text.replace("\n", " ").strip()


def translate_markdown(source: str, lookup: dict[str, str], used: set[str]) -> str:
    global _MD
    if _MD is None:
        _MD = _parser()
    lines = source.split("\n")
    tokens = _MD.parse(source)
    edits: list[tuple[int, int, list[str]]] = []

    def translated(text: str) -> str | None:
        key = message(text)
        if key in lookup:
            used.add(key)
            return lookup[key]
        return None

    in_row, row_map = False, None
    for i, tok in enumerate(tokens):
        if tok.type == "tr_open":
            in_row, row_map = True, tok.map
            row_line = lines[tok.map[0]]
            continue
        if tok.type == "tr_close":
            if row_map and row_line != lines[row_map[0]]:
                edits.append((row_map[0], row_map[0] + 1, [row_line]))
            in_row, row_map = False, None
            continue
        if in_row and tok.type == "inline":
            new = translated(tok.content)
            if new is not None and tok.content.strip():
                cells = re.split(r"(?<!\\)\|", row_line)
                for j, cell in enumerate(cells):
                    if cell.strip() == tok.content.strip():
                        cells[j] = cell.replace(tok.content.strip(), new, 1)
                        break
                row_line = "|".join(cells)
            continue
        if tok.type in ("fence", "colon_fence") and tok.info.strip().startswith("{"):
            # a directive: its body is Markdown again; its argument may be a title
            if tok.map is None:
                continue
            start, end = tok.map
            head = lines[start]
            arg = re.match(r"^(\s*[`:~]{3,}\s*\{[^}]+\}\s*)(.*)$", head)
            if arg and arg.group(2).strip():
                new = translated(arg.group(2))
                if new is not None:
                    head = arg.group(1) + new
            body_end = end - 1 if end - 1 > start else end
            options = start + 1  # ":class: tip" lines are options, not Markdown
            while options < body_end and re.match(r"^\s*:[\w-]+:", lines[options]):
                options += 1
            body = "\n".join(lines[options:body_end])
            new_body = translate_markdown(body, lookup, used) if body else None
            edits.append(
                (
                    start,
                    body_end,
                    [head, *lines[start + 1 : options]]
                    + (new_body.split("\n") if new_body is not None else []),
                )
            )
            continue
        if tok.type == "inline" and i > 0 and tokens[i - 1].map is not None:
            opener = tokens[i - 1]
            if opener.type not in ("paragraph_open", "heading_open", "dt_open"):
                continue
            new = translated(tok.content)
            if new is None:
                continue
            start, end = opener.map
            first = tok.content.split("\n")[0]
            at = lines[start].find(first)
            prefix = lines[start][: max(at, 0)]
            edits.append((start, end, [prefix + new]))
    for start, end, new_lines in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[start:end] = new_lines
    return "\n".join(lines)


def translate_notebook(
    notebook: dict, lookup: dict[str, str], used: set[str] | None = None
) -> dict:
    used = set() if used is None else used
    out = json.loads(json.dumps(notebook))
    for cell in out["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        new = translate_markdown(source, lookup, used)
        cell["source"] = [line + "\n" for line in new.split("\n")]
        cell["source"][-1] = cell["source"][-1][:-1]
    out.setdefault("metadata", {})["language_info"] = out["metadata"].get(
        "language_info", {"name": "python"}
    )
    return out


# the comment over the added cell, in each edition's language
WORDS_COMMENT = {
    "zh_CN": "# 本章图中的文字，以及交互图的标题、控件标签和选项，都用中文显示",
    "zh_TW": "# 本章圖中的文字，以及互動圖的標題、控制項標籤和選項，都以中文顯示",
}


def figure_words(
    language: str, docname: str, catalog: str = "figures"
) -> dict[str, str]:
    """The translated words of one chapter's figures: its interactive figures' forms
    (``figures``) or the words drawn inside its pictures (``images``); not the data
    words, which the catalog keeps as they are."""
    path = catalog_path(language, catalog)
    if not path.exists():
        return {}
    words = read_translations(str(path), location=docname)
    return {en: zh for en, zh in words.items() if zh != en}


def _table(name: str, words: dict[str, str]) -> list[str]:
    return (
        [f"{name} = {{"] + [f"    {en!r}: {zh!r}," for en, zh in words.items()] + ["}"]
    )


def with_figure_words(
    notebook: dict,
    words: dict[str, str],
    language: str,
    image_words: dict[str, str] | None = None,
) -> dict:
    """The notebook with a cell after its first code cell: use_words(words), and
    use_image_words(language, image_words, font)."""
    if not words and not image_words:
        return notebook
    lines = [WORDS_COMMENT[language]]
    lines += ["from transformer_lib.viz import use_words"]
    lines += ["from transformer_lib.viz.image_words import use_image_words", ""]
    lines += _table("_form_words", words) + _table("_image_words", image_words or {})
    lines += [
        "use_words(_form_words)",
        f"use_image_words({language!r}, _image_words, font={FONTS[language]!r})",
        "del _form_words, _image_words",
    ]
    return _with_code_cell(notebook, lines, "words", after_first=True)


def _with_code_cell(notebook: dict, lines: list[str], name: str, after_first: bool):
    """The notebook with a code cell of ``lines`` just before or just after its first
    code cell, its id that cell's with ``-name`` added."""
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": [line + "\n" for line in lines[:-1]] + [lines[-1]],
    }
    cells = notebook["cells"]
    first = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    if "id" in cells[first]:
        cell["id"] = f"{cells[first]['id']}-{name}"
    at = first + 1 if after_first else first
    return {**notebook, "cells": cells[:at] + [cell] + cells[at:]}


# the first cell of an edition's notebook: the checkers speak the edition's language
# (gettext reads LANGUAGE each time a checker says something: transformer_lib's
# exercises/language.py)
LANGUAGE_COMMENT = {
    "zh_CN": "# 练习检查器的提示用简体中文显示",
    "zh_TW": "# 練習檢查器的提示以繁體中文顯示",
}


def with_language(notebook: dict, language: str) -> dict:
    """The notebook with a first code cell that sets gettext's LANGUAGE to the
    edition's, so that the exercise checkers explain mistakes in it."""
    lines = [
        LANGUAGE_COMMENT[language],
        "import os",
        "",
        f"os.environ[{'LANGUAGE'!r}] = {language!r}",
    ]
    return _with_code_cell(notebook, lines, "language", after_first=False)


def translate_site_notebooks(language: str, site: Path) -> dict[str, tuple[int, int]]:
    """Replace the English notebooks behind an edition's download buttons; returns
    {docname: (catalog entries used, catalog entries)}."""
    stats = {}
    for src in sorted(BOOK.glob("*.ipynb")):
        docname = f"book/{src.stem}"
        target = site / "_sources" / "book" / src.name
        if not target.exists():
            continue
        lookup = load_catalog(language, docname)
        used: set[str] = set()
        notebook = json.loads(src.read_text(encoding="utf-8"))
        translated = translate_notebook(notebook, lookup, used)
        translated = with_figure_words(
            translated,
            figure_words(language, docname),
            language,
            figure_words(language, docname, "images"),
        )
        translated = with_language(translated, language)
        target.write_text(
            json.dumps(translated, ensure_ascii=False, indent=1) + "\n",
            encoding="utf-8",
        )
        stats[docname] = (len(used), len(lookup))
    return stats


def write_edition_notebooks(app, exception) -> None:
    """Sphinx's ``build-finished``: the edition's notebooks in place of the English
    ones its HTML builder copied to ``_sources``."""
    language = app.config.language
    if (
        exception is None
        and app.builder.format == "html"
        and language not in (None, "en")
    ):
        translate_site_notebooks(language, Path(app.outdir))


def setup(app) -> dict:
    app.connect("build-finished", write_edition_notebooks)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    language, src, dst = sys.argv[1:4]
    docname = str(Path(src).with_suffix("")).replace("\\", "/")
    lookup = load_catalog(language, docname)
    used: set[str] = set()
    nb = translate_notebook(json.loads(Path(src).read_text("utf-8")), lookup, used)
    Path(dst).write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(f"{len(used)} of {len(lookup)} catalog entries used")
