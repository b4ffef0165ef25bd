"""Check the translation catalogs: every entry translated, none fuzzy or obsolete, and
the MyST markup of each msgstr the same as its msgid's (and the number slots {0}, {1},
... of a figure's words).

    .venv/bin/python -m booktools.po_check [FILE.po ...]  # default: zh_CN's and zh_TW's

A translation may reword everything except what the build resolves: roles
({ref}, {eq}, {cite}, {glue}, ...), math, inline code and link targets must come
through unchanged, or the Chinese page would lose a link, a number or a formula.
Used by tests/test_translations.py; exits 1 and lists the problems when there are any.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from babel.messages.pofile import read_po

from .catalogs import TRANSLATED
from .paths import LOCALES, ROOT

CJK = re.compile(r"[\u3400-\u9fff]")
ROLE = re.compile(r"\{(?P<name>[\w:.-]+)\}`(?P<body>[^`]*)`")
# roles whose text may be translated: {ref}`text <label>` keeps only the label
TEXT_ROLES = {"ref", "numref", "doc", "term", "download"}
MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
CODE = re.compile(r"(?<![`}])`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# the numbers of a text drawn inside a figure (images.po): {0}, {1}, ...
SLOT = re.compile(r"\{\d+\}")
# CommonMark does not close **bold** or *emphasis* when the closing marker follows
# punctuation and is followed by a letter: in Chinese, **注意力。**然后 stays literal.
# Checked by rendering: an asterisk the English does not show must not show.


def stray_asterisks(text: str) -> int:
    """Asterisks left as literal text once the Markdown is rendered."""
    from markdown_it import MarkdownIt

    plain = CODE.sub("x", MATH.sub("x", ROLE.sub("x", text)))
    html = MarkdownIt("commonmark").renderInline(plain)
    return html.count("*")


def role_key(match: re.Match) -> str:
    name, body = match.group("name"), match.group("body")
    if name in TEXT_ROLES:
        target = re.search(r"<([^<>]+)>\s*$", body)
        body = target.group(1) if target else body
    return f"{{{name}}}{body}"


def markup(text: str) -> dict[str, Counter]:
    without_roles = ROLE.sub(" ", text)
    without_math = MATH.sub(" ", without_roles)
    return {
        "roles": Counter(role_key(m) for m in ROLE.finditer(text)),
        "math": Counter(
            (m.group(1) or m.group(2)).strip() for m in MATH.finditer(without_roles)
        ),
        "code": Counter(CODE.findall(without_math)),
        "links": Counter(LINK.findall(without_math)),
        "number slots": Counter(SLOT.findall(without_math)),
    }


def needs_words(msgid: str) -> bool:
    """An entry with more than a few English words must come out in Chinese."""
    plain = MATH.sub(" ", ROLE.sub(" ", msgid))
    plain = CODE.sub(" ", plain)
    return len(re.findall(r"[A-Za-z]{2,}", plain)) > 3


def check_entry(msgid: str, msgstr: str, data: bool = False) -> list[str]:
    problems = []
    if not msgstr.strip():
        return ["not translated"]
    want, got = markup(msgid), markup(msgstr)
    for kind in want:
        if want[kind] != got[kind]:
            missing = want[kind] - got[kind]
            extra = got[kind] - want[kind]
            problems.append(
                f"{kind} differ: missing {sorted(missing)}, extra {sorted(extra)}"
            )
    if (
        needs_words(msgid)
        and not CJK.search(msgstr)
        and not (msgstr == msgid and (re.fullmatch(r"\*\*[^*]+\*\*", msgid) or data))
    ):  # a glossary's English term, and data (example sentences), stay English
        problems.append("left in English")
    if re.match(r"\d+[.)] ", msgstr):
        problems.append(
            "starts like a numbered list item: Sphinx re-parses a translated title "
            "as Markdown, so write the number as 7\\. to keep it a title"
        )
    if stray_asterisks(msgstr) > stray_asterisks(msgid):
        problems.append(
            "emphasis marker next to punctuation and a letter: CommonMark will not "
            "render it; move the punctuation outside the ** ** or *"
        )
    return problems


def check_file(path: Path) -> list[str]:
    with path.open("rb") as f:
        catalog = read_po(f)
    problems = []
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for message in catalog:
        if not message.id:
            continue
        where = f"{name}: {str(message.id)[:70]!r}"
        if message.fuzzy:
            problems.append(f"{where}: fuzzy")
        data = "data" in message.user_comments  # "# data": kept as it is, on purpose
        for p in check_entry(str(message.id), str(message.string or ""), data):
            problems.append(f"{where}: {p}")
    for message in catalog.obsolete.values():
        problems.append(f"{name}: obsolete entry {message.id!r:.70}")
    return problems


def catalogs(language: str | None = None) -> list[Path]:
    """An edition's catalogs; without ``language``, every edition's."""
    languages = [language] if language else TRANSLATED
    return sorted(
        p for x in languages for p in (LOCALES / x / "LC_MESSAGES").rglob("*.po")
    )


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or catalogs()
    problems = [p for path in paths for p in check_file(path)]
    for p in problems:
        print(p)
    print(f"{len(paths)} catalogs, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
