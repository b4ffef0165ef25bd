"""Build the book's Chinese editions from the English notebooks and the catalogs.

    python -m booktools.editions catalogs   # English changed: refresh locales/zh_CN
    python -m booktools.editions build en zh_CN zh_TW

``make book`` executes every notebook into the jupyter-cache at
``_build/.jupyter_cache`` (:mod:`booktools.execute`); then ``build`` builds the
English site into ``_build/html`` and each edition into ``_build/html/<language>/``,
side by side, from the same notebooks with that cache, so the code runs once and every
edition shows the same outputs.

Each Chinese edition has its own catalogs, ``locales/<language>/LC_MESSAGES/**/*.po``;
``catalogs`` seeds a new or changed zh_TW entry from zh_CN, marked fuzzy until it is
reviewed (:mod:`booktools.catalogs`).

The words drawn inside the figures (titles, axis labels, legends, notes) are translated
in each edition's ``images.po``. While the notebooks execute, every figure is
drawn once more per edition, into the same output under the edition's own MIME type;
an edition's config shows that type (:mod:`booktools.figures`).

Each edition's download button gives its own notebook: the English notebook with every
Markdown cell translated from the catalog, written by the Sphinx extension
:mod:`booktools.notebooks` when the edition's build finishes.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .catalogs import (
    compile_exercise_catalog,
    locale_dir,
    seed_zh_tw,
    to_taiwan,
    update_checker_catalogs,
)
from .figures import (
    mime_priority_overrides,
    update_figure_catalog,
    update_image_catalog,
)
from .paths import BUILD, CONFIG, EDITIONS_DIR, LOCALES, ROOT

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
# sphinx-togglebutton's hint on a folded solution or dropdown: the package translates
# its default when it is imported, before Sphinx knows the language, so every edition
# said "Click to show"; its own config values take the edition's words
TOGGLE_HINTS = {"zh_CN": ("点击显示", "点击隐藏"), "zh_TW": ("點選顯示", "點選隱藏")}


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=ROOT, **kw)


def edition_config(language: str | None, mode: str) -> Path:
    """A copy of _config.yml for one edition, with absolute paths (jupyter-book reads
    relative ones from the config file's directory)."""
    config = copy.deepcopy(CONFIG)
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {
        k: str(ROOT / v) for k, v in sphinx.get("local_extensions", {}).items()
    }
    config["bibtex_bibfiles"] = [str(ROOT / b) for b in config["bibtex_bibfiles"]]
    cfg = sphinx.setdefault("config", {})
    cfg["html_static_path"] = [str(ROOT / p) for p in cfg.get("html_static_path", [])]
    cfg["templates_path"] = [str(ROOT / p) for p in cfg.get("templates_path", [])]
    config["execute"]["cache"] = str(ROOT / config["execute"]["cache"])
    if mode == "gettext":
        # the executed notebooks of the last `make book`: a {glue:figure}'s caption is
        # only parsed when its glued picture is found, so with no outputs the captions
        # of chapters 9 and 10 would never reach the catalogs
        config["execute"]["execute_notebooks"] = "cache"
        cfg.update(gettext_compact=False, gettext_uuid=False, gettext_location=False)
    else:
        config["title"] = TITLES[language]
        config["only_build_toc_files"] = True
        cfg.update(
            language=language,
            locale_dirs=[str(locale_dir(language))],
            gettext_compact=False,
            nb_code_prompt_show=CODE_PROMPTS[language][0],
            nb_code_prompt_hide=CODE_PROMPTS[language][1],
            togglebutton_hint=TOGGLE_HINTS[language][0],
            togglebutton_hint_hide=TOGGLE_HINTS[language][1],
            html_search_options={"dict": str(search_dictionary(language))},
        )
        cfg.setdefault("html_theme_options", {})["search_bar_text"] = (
            SEARCH_PLACEHOLDER[language]
        )
        if language == "zh_TW":
            # a citation's tooltip is an attribute, which cannot be marked
            # lang="zh-Hans", and the first source article's title in it is
            # Simplified (its bibliography entry, where it is marked, is a click away)
            cfg["bibtex_tooltips"] = False
        # the figures drawn in the edition's language (booktools.figures)
        cfg["nb_mime_priority_overrides"] = [
            *cfg.get("nb_mime_priority_overrides", []),
            *mime_priority_overrides(language),
        ]
        # the notebooks behind the download buttons, in the edition's language
        sphinx["extra_extensions"] = [
            *sphinx.get("extra_extensions", []),
            "booktools.notebooks",
        ]
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
    pot = out / "_build" / "gettext"
    # the messages of the book's template overrides (book/_templates): Sphinx's own
    # catalog, sphinx.po, is kept by hand with the other words Sphinx and the theme
    # write around the pages (booktools/sphinx_ext.py), which no .pot lists; the
    # browser test checks that none of them is left in English
    (pot / "sphinx.pot").unlink(missing_ok=True)
    return pot


def update_catalogs() -> None:
    """Refresh locales/zh_CN from the English pages: new entries appear empty, changed
    ones become fuzzy, removed ones obsolete (``python -m booktools.po_check`` then
    fails); then bring locales/zh_TW in step, its new entries seeded from zh_CN."""
    pot = extract()
    run(
        [Path(sys.executable).parent / "sphinx-intl", "update", "-p", pot, "-l",
         "zh_CN", "-d", LOCALES, "-w", "88"]
    )  # fmt: skip
    update_figure_catalog()
    update_image_catalog()
    entries, seeded = seed_zh_tw()
    print(f"zh_TW: {entries} entries, {seeded} seeded from zh_CN (fuzzy: review them)")
    messages, seeded = update_checker_catalogs()
    print(f"the checkers' messages: {messages}, zh_TW {seeded} seeded (fuzzy: review)")


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
def build(languages: list[str]) -> dict[str, float]:
    """Build the editions side by side, one process each, and return their times.

    ``en`` is the English site, built into ``_build/html``; every edition reads the
    same jupyter-cache, and shows its own pictures by its config (:mod:`.figures`).
    No notebook is executed again. A
    build's log goes to _build/editions/<language>/build.log and is printed when the
    build fails.
    """
    if "zh_TW" in languages:
        compile_exercise_catalog("zh_TW")
    commands = {}
    for language in languages:
        out = EDITIONS_DIR / language
        out.mkdir(parents=True, exist_ok=True)
        if language == "en":
            commands[language] = [JB, "build", ".", "-W", "-n", "--keep-going",
                                  "--path-output", "."]  # fmt: skip
            continue
        shutil.rmtree(out / "_build", ignore_errors=True)
        config = edition_config(language, "html")
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
    for language in languages:
        if language == "en":
            print(f"English: built in {seconds[language]:.0f} s -> {BUILD / 'html'}")
            continue
        out = EDITIONS_DIR / language
        target = BUILD / "html" / language
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(out / "_build" / "html"), target)
        print(f"edition {language}: built in {seconds[language]:.0f} s -> {target}")
    return seconds


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    os.chdir(ROOT)
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
