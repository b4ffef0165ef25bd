"""The built site's location, its pages and editions, and the per-page report the
browser tests record (written when the run ends, by tests/conftest.py). Shared by
tests/test_site.py (in Chromium) and tests/test_site_files.py (the built files, no
browser); not a test module.

``TL_SITE_DIR`` (and ``TL_BOOK_DIR`` for its sources) test another build.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


BOOK = Path(
    os.environ.get("TL_BOOK_DIR", ROOT)
)  # the sources (_toc.yml, _config.yml, notebooks) of SITE


SITE = Path(os.environ.get("TL_SITE_DIR", BOOK / "_build" / "html"))


SHOTS = ROOT / "_build" / "screenshots"


REPORT = ROOT / "_build" / "site-report.md"


ROWS = ROOT / "_build" / "site-report-rows"  # one JSON file per visited page or search


def _toc_pages() -> list[str]:
    """Every page of the book, as paths of the built site, in _toc.yml's order."""
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({k: v for k, v in toc.items() if k != "root"})
    return [re.sub(r"\.(ipynb|md)$", "", f) + ".html" for f in files]


PAGES = _toc_pages()


# The book's editions: English at the site root, the Chinese ones in their own directory
# (booktools/editions.py); every page exists in each.
EDITIONS = {"": "en", "zh_CN/": "zh-CN", "zh_TW/": "zh-TW"}


EDITION_PAGES = [e + p for e in EDITIONS for p in PAGES]


def _notebook_sources() -> list[Path]:
    stems = [p[: -len(".html")] for p in PAGES]
    return [BOOK / f"{s}.ipynb" for s in stems if (BOOK / f"{s}.ipynb").exists()]


def _record(kind: str, key: str, row) -> None:
    """Keep one row of the report (written by write_report when the run ends)."""
    ROWS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", f"{kind}-{key}") + ".json"
    (ROWS / name).write_text(json.dumps({"kind": kind, "key": key, "row": row}))


def write_report() -> Path | None:
    """The per-page report of the pages and searches this run recorded."""
    if not ROWS.is_dir():
        return None
    recorded = [json.loads(p.read_text()) for p in ROWS.glob("*.json")]
    pages = {r["key"]: r["row"] for r in recorded if r["kind"] == "page"}
    searches = {r["key"]: r["row"] for r in recorded if r["kind"] == "search"}
    if not pages and not searches:
        return None
    order = {p: i for i, p in enumerate(EDITION_PAGES)}
    rows = [
        "| page | title | requests | bytes transferred | own bytes "
        "| interactive figures | images | math | CJK runs | load s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path, r in sorted(pages.items(), key=lambda kv: order.get(kv[0], 10**6)):
        rows.append(
            f"| {path} | {r['title'].split(' — ')[0]} | {r['requests']} "
            f"| {r['bytes']:,} | {r['own']:,} | {r['figures']} | {r['images']} "
            f"| {r['math']} | {r['cjk']} | {r['seconds']:.1f} |"
        )
    total = sum(r["figures"] for r in pages.values())
    rows.append(f"\n{len(pages)} pages, {total} interactive figures.")
    for query, found in sorted(searches.items()):
        rows.append(f"\nsearch {query}: {len(found)} pages, {', '.join(found[:5])}")
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(rows) + "\n")
    return REPORT
