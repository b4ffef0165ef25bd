"""Build the book's Chinese editions from the English notebooks and the catalogs.

    python tools/editions.py catalogs        # English changed: refresh locales/zh_CN
    python tools/editions.py build en zh_CN zh_TW

``make book`` executes every notebook into the jupyter-cache at
``_build/.jupyter_cache`` (``tools/run_notebooks.py``); then ``build`` builds the
English site into ``_build/html`` and each edition into ``_build/html/<language>/``,
side by side, from the same notebooks with that cache, so the code runs once and every
edition shows the same outputs.

* zh_CN is translated by hand, in ``locales/zh_CN/LC_MESSAGES/**/*.po``.
* zh_TW is derived from zh_CN at build time with OpenCC (s2twp: Traditional characters
  and Taiwan phrases), then ``ZH_TW_OVERRIDES`` corrects the few places where OpenCC's
  everyday choice is wrong for this field. Its catalogs go to ``_build/locales``.

The words drawn inside the figures (titles, axis labels, legends, notes) are translated
in ``locales/zh_CN/LC_MESSAGES/images.po``. ``tools/run_notebooks.py`` has every figure
drawn once more per edition while the notebooks execute, into its output's metadata
(``transformer_lib/viz/image_words.py``); an edition's copy of the cache shows those
pictures in place of the English ones.

Each edition's download button gives its own notebook: the English notebook with every
Markdown cell translated from the catalog (``tools/translate_notebooks.py``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
LOCALES = ROOT / "locales"
DERIVED_LOCALES = BUILD / "locales"
EDITIONS_DIR = BUILD / "editions"
JB = Path(sys.executable).parent / "jupyter-book"

TITLES = {
    "zh_CN": "逐个公式读懂 Transformer",
    "zh_TW": "逐個公式讀懂 Transformer",
}
# myst-nb's toggle on hidden code cells; {type} would print the English "source"
CODE_PROMPTS = {
    "zh_CN": ("显示代码", "隐藏代码"),
    "zh_TW": ("顯示程式碼", "隱藏程式碼"),
}
SEARCH_PLACEHOLDER = {"zh_CN": "搜索本书……", "zh_TW": "搜尋本書……"}

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


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=ROOT, **kw)


def edition_config(language: str | None, mode: str, cache: Path | None = None) -> Path:
    """A copy of _config.yml for one edition, with absolute paths (jupyter-book reads
    relative ones from the config file's directory)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {
        k: str(ROOT / v) for k, v in sphinx.get("local_extensions", {}).items()
    }
    config["bibtex_bibfiles"] = [str(ROOT / b) for b in config["bibtex_bibfiles"]]
    cfg = sphinx.setdefault("config", {})
    cfg["html_static_path"] = [str(ROOT / p) for p in cfg.get("html_static_path", [])]
    cfg["templates_path"] = [str(ROOT / p) for p in cfg.get("templates_path", [])]
    config["execute"]["cache"] = str(cache or ROOT / config["execute"]["cache"])
    if mode == "gettext":
        config["execute"]["execute_notebooks"] = "off"
        cfg.update(gettext_compact=False, gettext_uuid=False, gettext_location=False)
    else:
        config["title"] = TITLES[language]
        config["only_build_toc_files"] = True
        locale_dir = LOCALES if language == "zh_CN" else DERIVED_LOCALES
        cfg.update(
            language=language,
            locale_dirs=[str(locale_dir)],
            gettext_compact=False,
            nb_code_prompt_show=CODE_PROMPTS[language][0],
            nb_code_prompt_hide=CODE_PROMPTS[language][1],
            html_search_options={"dict": str(search_dictionary(language))},
        )
        cfg.setdefault("html_theme_options", {})["search_bar_text"] = (
            SEARCH_PLACEHOLDER[language]
        )
    out = EDITIONS_DIR / (language or "gettext")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "_config.yml"
    path.write_text(
        yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8"
    )
    return path


# ----------------------------------------------------------------------- catalogs
def extract(out: Path = EDITIONS_DIR / "gettext") -> Path:
    """The English message catalogs (.pot) of every page, built under ``out``."""
    config = edition_config(None, "gettext")
    shutil.rmtree(out / "_build", ignore_errors=True)
    run(
        [JB, "build", ".", "--config", config, "--path-output", out, "--builder",
         "custom", "--custom-builder", "gettext"]
    )  # fmt: skip
    return out / "_build" / "gettext"


def update_catalogs() -> None:
    """Refresh locales/zh_CN from the English pages: new entries appear empty, changed
    ones become fuzzy, removed ones obsolete (tools/po_check.py then fails)."""
    pot = extract()
    run(
        [Path(sys.executable).parent / "sphinx-intl", "update", "-p", pot, "-l",
         "zh_CN", "-d", LOCALES, "-w", "88"]
    )  # fmt: skip
    update_figure_catalog()
    update_image_catalog()


def _write_catalog(
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


def site_figure_words(site: Path = BUILD / "html") -> dict[str, list[str]]:
    """{words: [pages]} of every interactive figure of the English site."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from tl_i18n import figure_words

    pages = sorted((site / "book").glob("*.html"))
    if not pages:
        raise SystemExit(f"no English site in {site}: run `make book` first")
    found: dict[str, list[str]] = {}
    for page in pages:
        for words in figure_words(page.read_text(encoding="utf-8")):
            found.setdefault(words, [])
            if page.stem not in found[words]:
                found[words].append(page.stem)
    return found


def update_figure_catalog(language: str = "zh_CN") -> Path:
    """locales/<language>/LC_MESSAGES/figures.po: the words of the interactive figures,
    taken from the built English site."""
    path = LOCALES / language / "LC_MESSAGES" / "figures.po"
    return _write_catalog(path, language, site_figure_words())


# ------------------------------------------------------------ words inside figures
IMAGE_CATALOG = "images"
IMAGE_HEADER = """\
# The words drawn inside the book's figures (titles, axis labels, legends, notes),
# as the last `make book` drew them: `make catalogs` refreshes this file.
# {0}, {1}, ... are numbers filled in when the figure is drawn: a translation keeps
# every one of them (in any order), and every $...$ formula as it is.
#"""


def cached_notebooks(cache_dir: Path | None = None):
    """(page name, the stored file, the executed notebook as a dict) of every notebook
    in a jupyter-cache (by default the one ``make book`` executes into)."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir or shared_cache_dir()))
    for record in cache.list_cache_records():
        path = Path(record.uri)
        stored = Path(cache.path) / "executed" / record.hashkey / "base.ipynb"
        yield path.stem, stored, json.loads(stored.read_text(encoding="utf-8"))


def _edition_entries(output: dict):
    """(mimetype, its metadata entry) of each output picture drawn for the editions."""
    for mime in output.get("data", {}):
        plain = mime.removeprefix("application/papermill.record/")
        entry = output.get("metadata", {}).get(plain)
        if isinstance(entry, dict) and "tl_editions" in entry:
            yield mime, entry


def image_words(cache_dir: Path | None = None) -> dict[str, list[str]]:
    """{key: [pages]} of the words drawn inside the executed figures."""
    found: dict[str, list[str]] = {}
    for page, _, nb in sorted(cached_notebooks(cache_dir), key=lambda c: c[0]):
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                for _, entry in _edition_entries(output):
                    for key in entry["tl_words"]:
                        pages = found.setdefault(key, [])
                        if page not in pages:
                            pages.append(page)
    return found


def update_image_catalog(language: str = "zh_CN") -> Path:
    """locales/<language>/LC_MESSAGES/images.po: the words inside the figures, as the
    last ``make book`` drew them."""
    words = image_words()
    if not words:
        raise SystemExit("no executed notebooks in the cache: run `make book` first")
    path = LOCALES / language / "LC_MESSAGES" / f"{IMAGE_CATALOG}.po"
    return _write_catalog(path, language, words, IMAGE_HEADER)


def image_tables() -> dict[str, dict[str, str]]:
    """{language: {key: translation}} of the words inside the figures, for every
    edition (zh_TW derived from zh_CN as everywhere else)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from tl_i18n import read_translations

    path = LOCALES / "zh_CN" / "LC_MESSAGES" / f"{IMAGE_CATALOG}.po"
    zh_cn = read_translations(str(path)) if path.exists() else {}
    return {"zh_CN": zh_cn, "zh_TW": {k: to_taiwan(v) for k, v in zh_cn.items()}}


def use_edition_pictures(cache_dir: Path, language: str) -> int:
    """In an edition's copy of the jupyter-cache, put the edition's pictures in place
    of the English ones; returns how many were replaced."""
    n = 0
    for _, stored, nb in cached_notebooks(cache_dir):
        changed = False
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                for mime, entry in list(_edition_entries(output)):
                    output["data"][mime] = entry["tl_editions"][language]
                    del entry["tl_editions"], entry["tl_words"]
                    changed = True
                    n += 1
        if changed:
            stored.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return n


# --------------------------------------------------------------------- Traditional
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
    # zh_CN only; book/_ext/tl_i18n.py registers the result
    exercise = Path(sphinx_exercise.__file__).parent / "translations/locales/zh_CN"
    catalog = _to_taiwan_catalog(
        exercise / "LC_MESSAGES/exercise.po", dst / "exercise.po"
    )
    with (dst / "exercise.mo").open("wb") as f:
        write_mo(f, catalog)
    return n


# ------------------------------------------------------------------------- search
def glossary_terms(language: str) -> list[str]:
    """The glossary's Chinese terms, split at its brackets and slashes."""
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    terms = set()
    for cell in re.findall(r'<span lang="zh-Hans">([^<]+)</span>', text):
        for word in re.split(r"[（）()/／、，\s]+", cell):
            if re.search(r"[\u3400-\u9fff]", word):
                terms.add(word)
    if language == "zh_TW":
        terms = {to_taiwan(t) for t in terms}
    return sorted(terms)


def search_dictionary(language: str) -> Path:
    """A jieba user dictionary of the glossary's terms, so that 残差连接 is found
    by 残差 and the Traditional terms are cut as words too."""
    path = EDITIONS_DIR / language / "search_dict.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for term in glossary_terms(language):
        lines.append(f"{term} 2000 n")
        # the parts of a compound term are words too (残差 in 残差连接)
        if len(term) >= 4:
            for part in (term[:2], term[2:]):
                lines.append(f"{part} 1000 n")
    path.write_text("\n".join(dict.fromkeys(lines)) + "\n", encoding="utf-8")
    return path


# -------------------------------------------------------------------------- build
def shared_cache_dir() -> Path:
    """The jupyter-cache that ``make book`` executes the notebooks into."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return ROOT / config["execute"]["cache"]


def build(languages: list[str]) -> dict[str, float]:
    """Build the editions side by side, one process each, and return their times.

    ``en`` is the English site, built from the jupyter-cache itself into
    ``_build/html``; each Chinese edition reads its own copy of that cache (a SQLite
    database that records every read), made before any build starts, with the
    edition's pictures in place of the English ones. No notebook is executed again. A
    build's log goes to _build/editions/<language>/build.log and is printed when the
    build fails.
    """
    if "zh_TW" in languages:
        derive_zh_tw()
    shared_cache = shared_cache_dir()
    commands = {}
    for language in languages:
        out = EDITIONS_DIR / language
        out.mkdir(parents=True, exist_ok=True)
        if language == "en":
            commands[language] = [JB, "build", ".", "-W", "-n", "--keep-going",
                                  "--path-output", "."]  # fmt: skip
            continue
        shutil.rmtree(out / "_build", ignore_errors=True)
        cache = out / "jupyter_cache"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(shared_cache, cache)
        swapped = use_edition_pictures(cache, language)
        print(f"edition {language}: {swapped} pictures in its language", flush=True)
        config = edition_config(language, "html", cache)
        commands[language] = [JB, "build", ".", "--config", config, "--path-output",
                              out, "-W", "-n", "--keep-going"]  # fmt: skip
    jobs = {}
    for language, cmd in commands.items():
        log_path = EDITIONS_DIR / language / "build.log"
        log = log_path.open("w", encoding="utf-8")
        print("+", " ".join(str(c) for c in cmd), f"> {log_path}", flush=True)
        process = subprocess.Popen(
            [str(c) for c in cmd], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        )
        jobs[language] = (process, log, time.perf_counter())
    seconds, failed = {}, []
    for language, (process, log, start) in jobs.items():
        code = process.wait()
        log.close()
        seconds[language] = time.perf_counter() - start
        if code:
            print((EDITIONS_DIR / language / "build.log").read_text(encoding="utf-8"))
            failed.append(language)
    if failed:
        raise SystemExit(f"edition build failed: {failed} (logs printed above)")
    from translate_notebooks import translate_site_notebooks

    for language in languages:
        if language == "en":
            print(f"English: built in {seconds[language]:.0f} s -> {BUILD / 'html'}")
            continue
        out = EDITIONS_DIR / language
        target = BUILD / "html" / language
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(out / "_build" / "html"), target)
        translate_site_notebooks(language, target)
        print(f"edition {language}: built in {seconds[language]:.0f} s -> {target}")
    return seconds


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    os.chdir(ROOT)
    sys.path.insert(0, str(Path(__file__).parent))
    if argv[0] == "catalogs":
        update_catalogs()
    elif argv[0] == "build":
        build(argv[1:] or ["en", "zh_CN", "zh_TW"])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
