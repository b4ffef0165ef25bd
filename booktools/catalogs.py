"""The editions' languages and their gettext catalogs.

* zh_CN is translated by hand, in ``locales/zh_CN/LC_MESSAGES/**/*.po``.
* zh_TW is a catalog of its own, in ``locales/zh_TW/LC_MESSAGES/**/*.po``, reviewed
  as Taiwan writes. The converter only seeds it: :func:`seed_zh_tw` fills an entry
  that is new or changed in zh_CN with ``booktools.taiwan``'s conversion (OpenCC word
  by word, the Taiwan term table, rows and columns in Taiwan's sense) and marks it
  fuzzy; a reviewer accepts it by removing the flag. The build uses the zh_TW catalogs
  as they are, and a fuzzy or empty entry fails ``make test``.
"""

from __future__ import annotations

import re
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from . import taiwan
from .paths import LOCALES, ROOT

# (language code, label in its own language); the first is the source edition
EDITIONS = [("en", "English"), ("zh_CN", "简体中文"), ("zh_TW", "繁體中文")]
SOURCE_LANGUAGE = "zh_CN"  # the catalogs `make catalogs` extracts into; zh_TW's seed
TRANSLATED = ("zh_CN", "zh_TW")  # the editions with catalogs of their own
IMAGE_CATALOG = "images"  # the words drawn inside the figures
FIGURE_CATALOG = "figures"  # the words of the interactive figures' HTML blocks


def locale_dir(language: str) -> Path:
    """The directory whose ``<language>/LC_MESSAGES`` holds an edition's catalogs."""
    return LOCALES


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


def _tables(name: str) -> dict[str, dict[str, str]]:
    tables = {}
    for language in TRANSLATED:
        path = catalog_path(language, name)
        tables[language] = read_translations(path) if path.exists() else {}
    return tables


def image_tables() -> dict[str, dict[str, str]]:
    """{language: {key: translation}} of the words inside the figures, for every
    edition, each from its own catalog."""
    return _tables(IMAGE_CATALOG)


def figure_tables() -> dict[str, dict[str, str]]:
    """{language: {word: translation}} of the words of the interactive figures' HTML
    (titles, control labels, options, hover names), for every edition."""
    return _tables(FIGURE_CATALOG)


# --------------------------------------------------------------------- Traditional
# The wording itself (the term table, the rows and columns, OpenCC) is booktools.taiwan.

PROTECTED = taiwan.PROTECTED  # roles, math, code, link targets: never converted
REF_WITH_TEXT = re.compile(r"(\{(?:ref|numref|doc|term)\}`)([^`<]+)(<[^<>`]+>`)")


def to_taiwan(text: str, english: str | None = None) -> str:
    """Simplified -> Traditional (Taiwan) outside code, math and roles. ``english``, the
    source the text translates, decides the words whose sense only it tells (a row or a
    line, inference or reasoning); without it the matrix sense is taken."""

    def convert(part: str) -> str:
        return taiwan.convert_prose(part, english)

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


def _read(path: Path, locale: str) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale=locale)


# The themes' words, kept by hand: pydata-sphinx-theme ships one Chinese catalog, "zh",
# in Simplified, which gettext gives a zh_TW page for every word the edition's own
# sphinx.po lacks (跳转至主要内容, 回到顶部, 上一页); zh_CN takes those as they are, so
# zh_TW's catalog has entries of its own there, kept after zh_CN's.
THEME_CATALOGS = ("sphinx", "booktheme")


def seed_catalog(src: Path, dst: Path, accept: bool = False) -> tuple[int, int]:
    """Bring the zh_TW catalog ``dst`` in step with the zh_CN catalog ``src``: the same
    entries in the same order (in a theme catalog, zh_TW's own entries after them); an
    entry that is new, empty or fuzzy in zh_TW while zh_CN has a text for it gets the
    conversion of that text, marked fuzzy (not with ``accept``, unless zh_CN's is
    fuzzy itself: an English sentence changed, and sphinx-intl kept the old text); a
    reviewed entry is kept as it is. Returns (entries, seeded)."""
    source = _read(src, "zh_CN")
    old = {}
    if dst.exists():
        old = {str(m.id): m for m in _read(dst, "zh_TW") if m.id}
    catalog = Catalog(locale="zh_TW", project=source.project)
    catalog.header_comment = source.header_comment
    n = seeded = 0
    for message in source:
        if not message.id:
            continue
        n += 1
        before = old.get(str(message.id))
        string, flags = "", set()
        if before is not None and before.string and not before.fuzzy:
            string, flags = before.string, set(before.flags)
        elif message.string:  # zh_CN's own, or its old text of a changed sentence
            # a figure's words are short labels whose English decides nothing
            english = None if src.stem == FIGURE_CATALOG else str(message.id)
            string = to_taiwan(message.string, english)
            flags = set() if accept and not message.fuzzy else {"fuzzy"}
            seeded += 1
        elif before is not None:  # zh_CN itself waits for a translator
            string, flags = before.string, set(before.flags)
        flags.update(f for f in message.flags if f != "fuzzy")
        # zh_CN's comments ("data": kept as it is, on purpose) and the reviewer's own
        mine = before.user_comments if before is not None else []
        comments = list(dict.fromkeys([*message.user_comments, *mine]))
        catalog.add(
            message.id,
            string,
            locations=message.locations,
            user_comments=comments,
            flags=flags,
        )
    if src.stem in THEME_CATALOGS:
        for message in old.values():
            if message.id not in catalog:
                catalog[message.id] = message
    dst.parent.mkdir(parents=True, exist_ok=True)
    with dst.open("wb") as f:
        write_po(f, catalog, width=88)
    return n, seeded


def exercise_catalog(language: str) -> Path:
    """The edition's catalog of sphinx-exercise's own words ("Exercise", "Solution
    to"): sphinx-exercise ships zh_CN only, so zh_TW keeps its own."""
    return LOCALES / language / "LC_MESSAGES" / "exercise.po"


def sphinx_exercise_zh_cn() -> Path:
    import sphinx_exercise

    root = Path(sphinx_exercise.__file__).parent
    return root / "translations/locales/zh_CN/LC_MESSAGES/exercise.po"


def seed_zh_tw(accept: bool = False, locales: Path = LOCALES) -> tuple[int, int]:
    """Bring every zh_TW catalog under ``locales`` in step with its zh_CN twin (see
    :func:`seed_catalog`); returns (entries, seeded). ``accept``: the entries seeded
    from a reviewed zh_CN text are not marked fuzzy (the first seed, reviewed
    afterwards)."""
    src = locales / "zh_CN" / "LC_MESSAGES"
    dst = locales / "zh_TW" / "LC_MESSAGES"
    pairs = [(po, dst / po.relative_to(src)) for po in sorted(src.rglob("*.po"))]
    pairs.append((sphinx_exercise_zh_cn(), dst / "exercise.po"))
    wanted = {d for _, d in pairs}
    for stale in dst.rglob("*.po"):
        if stale not in wanted:
            stale.unlink()
    n = seeded = 0
    for src_po, dst_po in pairs:
        a, b = seed_catalog(src_po, dst_po, accept)
        n, seeded = n + a, seeded + b
    return n, seeded


def compile_exercise_catalog(language: str) -> None:
    """exercise.po -> exercise.mo, which booktools/sphinx_ext.py registers."""
    po = exercise_catalog(language)
    if po.exists():
        with po.with_suffix(".mo").open("wb") as f:
            write_mo(f, _read(po, language))


# ------------------------------------------------------------ the checkers' messages
# transformer_lib's own gettext domain (transformer_lib/exercises/language.py): the
# messages marked _() or N_() in transformer_lib/exercises, zh_CN translated by hand,
# zh_TW seeded from it as the book's catalogs are; each .mo is committed beside its .po
# (a git or editable install of the library runs no build step that could compile it).
CHECKER_DOMAIN = "transformer_lib"
CHECKER_SOURCES = ROOT / "transformer_lib" / "exercises"
CHECKER_LOCALES = ROOT / "transformer_lib" / "locale"
CHECKER_HEADER = """\
# The messages of transformer_lib's exercise checkers (transformer_lib/exercises).
# `make catalogs` refreshes this file from the code and compiles the .mo beside it;
# {name}, {inputs}, {got:.4g}, ... are filled in when a message is said: a
# translation keeps every one of them, and the code, shapes and formulas as they are.
#"""


def checker_catalog(language: str) -> Path:
    return CHECKER_LOCALES / language / "LC_MESSAGES" / f"{CHECKER_DOMAIN}.po"


def checker_messages() -> Catalog:
    """The English messages of the checkers, as Babel extracts them (the template)."""
    from babel.messages.extract import extract_from_dir

    template = Catalog(project="transformer_lib", locale=None)
    found = extract_from_dir(
        str(CHECKER_SOURCES),
        method_map=[("**.py", "python")],
        keywords={"_": None, "N_": None},
        comment_tags=("TRANSLATORS:",),
        strip_comment_tags=True,
    )
    for filename, lineno, message, comments, _context in found:
        path = f"transformer_lib/exercises/{filename}"
        template.add(message, None, [(path, lineno)], auto_comments=comments)
    return template


def compiled(po: Path, language: str) -> bytes:
    """The .mo of a catalog, as gettext reads it (fuzzy entries left out)."""
    import io

    buffer = io.BytesIO()
    write_mo(buffer, _read(po, language))
    return buffer.getvalue()


def update_checker_catalogs() -> tuple[int, int]:
    """Refresh the checkers' catalogs from the code: zh_CN's new messages empty and
    changed ones fuzzy (Babel's update), zh_TW seeded from zh_CN; both compiled.
    Returns (messages, zh_TW entries seeded)."""
    template = checker_messages()
    src, dst = checker_catalog("zh_CN"), checker_catalog("zh_TW")
    catalog = _read(src, "zh_CN") if src.exists() else Catalog(locale="zh_CN")
    catalog.project = "transformer_lib"
    catalog.update(template)
    catalog.header_comment = CHECKER_HEADER
    catalog.fuzzy = False  # the header: gettext reads the charset from it
    src.parent.mkdir(parents=True, exist_ok=True)
    with src.open("wb") as f:
        write_po(f, catalog, width=88, omit_header=False, ignore_obsolete=True)
    _, seeded = seed_catalog(src, dst, accept=False)
    seeded_catalog = _read(dst, "zh_TW")
    seeded_catalog.fuzzy = False
    with dst.open("wb") as f:
        write_po(f, seeded_catalog, width=88)
    for po, language in ((src, "zh_CN"), (dst, "zh_TW")):
        po.with_suffix(".mo").write_bytes(compiled(po, language))
    return len(template), seeded
