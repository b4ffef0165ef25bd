"""The built site (``make book``) shows no Python warning.

A warning that a cell prints (a ``UserWarning`` from ``float()`` on a tensor that
requires grad, a ``FutureWarning`` from a library) ends up in the page as a stderr
output: the reader sees the machinery instead of the book. Each edition's pages are read
as text; the test is skipped when the site has not been built.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("TL_SITE_DIR", ROOT / "_build" / "html"))

# how Python's warnings module writes a warning: "file.py:12: UserWarning: message"
WARNING = re.compile(r"\b[\w./\\-]+\.py:\d+: [A-Z]\w*Warning: |\b[A-Z]\w*Warning: ")
# the prose may name a warning class (chapter 4 says nn.MultiheadAttention gives "no
# error and no warning"); what a page must not hold is a warning as an output prints it
OUTPUT = re.compile(r'<div class="output stderr">.*?</div>|<pre>.*?</pre>', re.S)


def pages() -> list[Path]:
    if not (SITE / "index.html").exists():
        return []
    return sorted(p for p in SITE.rglob("*.html") if "_static" not in p.parts)


@pytest.mark.built  # the built book: not in make test-fast
@pytest.mark.skipif(not pages(), reason="the site is not built (make book)")
def test_no_built_page_shows_a_python_warning():
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8", errors="replace")
        if 'class="output stderr"' in text:
            found.append(f"{page.relative_to(SITE)}: a stderr output")
        for block in OUTPUT.findall(text):
            plain = html.unescape(re.sub(r"<[^>]+>", "", block))
            for hit in WARNING.finditer(plain):
                line = plain[hit.start() : plain.find("\n", hit.start())][:160]
                found.append(f"{page.relative_to(SITE)}: {line}")
    assert not found, "Python warnings in the built site:\n" + "\n".join(found)


def test_the_warning_pattern_finds_what_python_prints():
    import warnings

    printed = warnings.formatwarning(
        UserWarning("Converting a tensor with requires_grad=True"),
        UserWarning,
        "/tmp/ipykernel_1/cell.py",
        3,
        None,
    )
    assert WARNING.search(printed)
    assert not WARNING.search("no error and no warning")
