"""The repository's address, written once: ``repository.url`` in ``_config.yml``.

The site's launch, repository and download buttons read it from there. The one other
place that needs it is each chapter's first (hidden) cell, which installs
``transformer_lib`` from the repository in Colab, where nothing of the repository is
present yet; that cell is written from ``_config.yml`` by this module, never by hand.

    python -m booktools.repository --check          # exit 1 if a chapter disagrees
    python -m booktools.repository --set URL        # a fork: the address, everywhere

The deploy workflow (``.github/workflows/deploy.yml``) runs ``--set`` with the address
of the repository it runs in, so a fork publishes a book that points at the fork
without changing a file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

from .paths import BOOK, CONFIG_FILE, ROOT

# `  url: https://...` inside the `repository:` mapping of _config.yml: what --set
# rewrites, keeping the file's comments (reading goes through YAML)
URL_LINE = re.compile(r"^(repository:\n(?:[ \t]+#.*\n)*[ \t]+url:[ \t]*)(\S+)", re.M)
INSTALL_LINE = re.compile(r'(%pip install -q "transformer_lib @ git\+)([^"]+)(")')
ADDRESS = re.compile(r"^https://[\w.-]+/[\w.-]+/[\w.-]+$")


def repository_url(config: Path | None = None) -> str:
    config = config or CONFIG_FILE
    data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    url = (data.get("repository") or {}).get("url")
    if not isinstance(url, str):
        raise ValueError(f"{config}: no `url:` under `repository:`")
    return url.rstrip("/")


def install_cells(book: Path | None = None) -> dict[Path, tuple[int, str]]:
    """Each chapter that installs the library: its first code cell's index and the
    address that cell installs from."""
    book = book or BOOK
    out = {}
    for path in sorted(book.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            m = INSTALL_LINE.search("".join(cell["source"]))
            if m:
                out[path] = (i, m.group(2))
            break  # only the first code cell installs
    return out


def disagreements(config: Path | None = None, book: Path | None = None) -> list[str]:
    url = repository_url(config)
    return [
        f"{path.name}: installs from {found}, _config.yml says {url}"
        for path, (_, found) in install_cells(book).items()
        if found != url
    ]


def set_url(
    url: str, config: Path | None = None, book: Path | None = None
) -> list[Path]:
    """Write `url` into _config.yml and every chapter's install cell; returns the
    files changed."""
    config, book = config or CONFIG_FILE, book or BOOK
    url = url.rstrip("/")
    if not ADDRESS.match(url):
        raise ValueError(f"not a repository address: {url!r} (https://host/owner/name)")
    changed = []
    text = config.read_text(encoding="utf-8")
    if URL_LINE.search(text) is None:
        raise ValueError(f"{config}: no `url:` line under `repository:` to rewrite")
    new = URL_LINE.sub(lambda m: m.group(1) + url, text, count=1)
    if new != text:
        config.write_text(new, encoding="utf-8")
        changed.append(config)
    for path, (index, found) in install_cells(book).items():
        if found == url:
            continue
        raw = path.read_text(encoding="utf-8")
        nb = json.loads(raw)
        cell = nb["cells"][index]
        cell["source"] = [
            INSTALL_LINE.sub(lambda m: m.group(1) + url + m.group(3), line)
            for line in cell["source"]
        ]
        # the notebooks' own JSON layout (nbformat writes one-space indents)
        path.write_text(
            json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problems = disagreements()
        print("\n".join(problems) or f"every chapter installs from {repository_url()}")
        return 1 if problems else 0
    if len(argv) == 2 and argv[0] == "--set":
        for path in set_url(argv[1]):
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
