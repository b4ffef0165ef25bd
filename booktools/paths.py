"""Where the book's sources and build outputs are; ``_config.yml``, read once."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CONFIG_FILE = ROOT / "_config.yml"
CONFIG: dict = yaml.safe_load(CONFIG_FILE.read_text(encoding="utf-8"))
BUILD = ROOT / "_build"
SITE = BUILD / "html"  # the English site; the editions in SITE / <language>
LOCALES = ROOT / "locales"  # the catalogs of the Chinese editions (zh_CN, zh_TW)
EDITIONS_DIR = BUILD / "editions"  # each edition's config, cache copy and log
# the jupyter-cache the notebooks are executed into, and the book is built from
CACHE = ROOT / CONFIG["execute"]["cache"]
CELL_TIMEOUT = int(CONFIG["execute"]["timeout"])  # seconds per cell
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]*.ipynb"))  # 07b_depth too
