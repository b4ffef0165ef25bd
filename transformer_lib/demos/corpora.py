"""The real text the book's two language models learn from, read from Debian packages
that the setup installs (``make corpora``); nothing is downloaded or committed.

- Chinese: ``fortunes-zh`` (GPL-3.0+ as packaged; the poems and classics themselves are
  centuries old): 313 Tang poems (``tang300``), 95 Song *ci* (``song100``) and the
  classical and modern passages of ``chinese``.
- English: ``fortunes`` and ``fortunes-min`` (BSD-licensed, as packaged): the
  quotations, verses and jokes of the classic Unix ``fortune`` files, about 2.5 MB.
  No novel-length public-domain text ships as plain text in a Debian or PyPI package
  the setup may use (Debian's King James Bible, ``bible-kjv-text``, is stored
  compressed for its own reader program), so the book uses these.

A fortune file is passages separated by lines holding only ``%``; ``fortunes-zh`` also
colours its titles with ANSI escape codes. :func:`read_fortunes` strips both, and the
filters below drop what is not running text (tables drawn with box characters, ASCII
art). The held-out split is by a stable hash of each passage (:func:`is_held_out`),
never by position, so that it does not depend on the order of the files.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

FORTUNES = Path("/usr/share/games/fortunes")
CHINESE_FILES = ("tang300", "song100", "chinese")
# every English file of the `fortunes` and `fortunes-min` packages but the ASCII art
ENGLISH_FILES = (
    "art", "computers", "cookie", "debian", "definitions", "disclaimer", "drugs",
    "education", "ethnic", "food", "fortunes", "goedel", "humorists", "kids",
    "knghtbrd", "law", "linux", "linuxcookie", "literature", "love", "magic",
    "medicine", "men-women", "miscellaneous", "news", "paradoxum", "people", "perl",
    "pets", "platitudes", "politics", "pratchett", "riddles", "science",
    "songs-poems", "sports", "startrek", "tao", "wisdom", "work", "zippy",
)  # fmt: skip
PACKAGES = {"zh": "fortunes-zh", "en": "fortunes"}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SEPARATOR = re.compile(r"^%[ \t]*$", re.M)
_BOX = re.compile(r"[\u2500-\u259f]")  # box drawing and block elements: tables
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def read_fortunes(path: str | Path) -> list[str]:
    """The passages of one fortune file: ANSI codes and ``%`` separators removed,
    trailing spaces of each line and blank lines around a passage stripped."""
    path = Path(path)
    if not path.exists():
        pkg = "fortunes-zh" if path.name in CHINESE_FILES else "fortunes"
        raise FileNotFoundError(
            f"{path} is missing: install Debian's {pkg} package "
            "(`make corpora` does, as root)"
        )
    text = _ANSI.sub("", path.read_text(encoding="utf-8", errors="replace"))
    text = text.replace("\r", "").replace("\xa0", " ")
    passages = []
    for p in _SEPARATOR.split(text):
        p = "\n".join(line.rstrip() for line in p.split("\n")).strip("\n")
        if p.strip():
            passages.append(p)
    return passages


def is_chinese_prose(p: str) -> bool:
    """A passage of running Chinese: no box-drawing table, and at least half of its
    non-space characters are Han characters (``chinese`` also holds translated
    Debian documentation, mostly commands and English)."""
    chars = [c for c in p if not c.isspace()]
    if not chars or _BOX.search(p):
        return False
    return sum(bool(_HAN.match(c)) for c in chars) >= 0.5 * len(chars)


def is_english_prose(p: str) -> bool:
    """A passage of running text, not ASCII art: at least 60% of its non-space
    characters are letters, and no line is mostly one repeated symbol."""
    chars = [c for c in p if not c.isspace()]
    if not chars or sum(c.isalpha() for c in chars) < 0.6 * len(chars):
        return False
    for line in p.split("\n"):
        s = line.strip()
        if len(s) >= 8 and max(s.count(c) for c in set(s)) > 0.6 * len(s):
            return False
    return True


def chinese_passages(root: str | Path = FORTUNES) -> dict[str, list[str]]:
    """{file name: its kept passages} for the three Chinese files."""
    root = Path(root)
    return {
        name: [p for p in read_fortunes(root / f"{name}.u8") if is_chinese_prose(p)]
        for name in CHINESE_FILES
    }


def english_passages(root: str | Path = FORTUNES) -> dict[str, list[str]]:
    """{file name: its kept passages} for the English fortune files."""
    root = Path(root)
    return {
        name: [p for p in read_fortunes(root / name) if is_english_prose(p)]
        for name in ENGLISH_FILES
    }


def is_held_out(passage: str, share: float = 0.1) -> bool:
    """Whether ``passage`` belongs to the held-out split: the first 8 bytes of its
    SHA-256, as a fraction of 2**64, below ``share``. Stable across runs, machines and
    orders (Python's own ``hash`` of a string is salted per process)."""
    h = int.from_bytes(hashlib.sha256(passage.encode("utf-8")).digest()[:8], "big")
    return h < share * 2**64


def split(passages: list[str], share: float = 0.1) -> tuple[list[str], list[str]]:
    """(train, held_out) by :func:`is_held_out`, each in the given order."""
    train = [p for p in passages if not is_held_out(p, share)]
    held = [p for p in passages if is_held_out(p, share)]
    return train, held


def corpus(language: str, root: str | Path = FORTUNES) -> tuple[list[str], list[str]]:
    """(train, held_out) passages of ``language`` ("zh" or "en"), duplicates dropped
    (a passage in two files would otherwise sit in both splits only by luck)."""
    if language == "zh":
        by_file = chinese_passages(root)
    elif language == "en":
        by_file = english_passages(root)
    else:
        raise ValueError(f"language must be 'zh' or 'en', got {language!r}")
    passages = list(dict.fromkeys(p for ps in by_file.values() for p in ps))
    return split(passages)
