"""The catalog key of a text drawn in a figure or shown in a result table, and looking
a text up by it.

A text's key is the text with every number outside ``$...$`` (and inline `code`) written
as ``{0}``, ``{1}``, ...: ``"P after 40 training steps"`` has the key ``"P after {0}
training steps"``, whose translation ``"训练 {0} 步后的 P"`` gets the numbers back. Text
with no letter outside math and numbers (tick values, ``$\\sqrt{d_k}$``) has no words,
and is never looked up. :mod:`.figure_words` and :mod:`.table_words` both look their
texts up this way; :mod:`.image_words` puts them to use.
"""

from __future__ import annotations

import re

MATH = re.compile(r"\$[^$]*\$")  # inline math, never translated
# a number that stands alone: not part of a name (W1, GPT-2, x_3), not an exponent
_NUMBER = re.compile(
    r"(?<![\w^-])(?<!\d\.)[-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"(?:e[-+\u2212]?\d+)?(?!\w)(?!\.\d)"
)
# a release (torch 2.13.0+cpu) is one slot too, so no key changes with an upgrade
_VERSION = re.compile(r"(?<![\w.])\d+(?:\.\d+){2}(?:\+\w+(?:\.\w+)*)?(?!\w)(?!\.\d)")
_SLOTTED = re.compile(f"{_VERSION.pattern}|{_NUMBER.pattern}")
_SLOT = re.compile(r"\{(\d+)\}")
_LETTER = re.compile(r"[^\W\d_]")
_SCIENTIFIC = re.compile(r"\d(?:\.\d+)?e[-+\u2212]?\d+")  # 1e-3: a number, not a word

# kept as they are in a key: math, and inline code (a result table's `-1e9`)
_LITERAL = re.compile(r"\$[^$]*\$|`[^`]*`")


def _outside_math(text: str, change) -> str:
    """``text`` with ``change`` applied to the parts outside ``$...$`` and inline
    `code`."""
    out, pos = [], 0
    for m in _LITERAL.finditer(text):
        out.append(change(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(change(text[pos:]))
    return "".join(out)


def key_of(text: str) -> tuple[str, list[str]]:
    """(the catalog key of ``text``, the numbers it took out, in order)."""
    numbers: list[str] = []

    def slot(m: re.Match) -> str:
        numbers.append(m.group(0))
        return f"{{{len(numbers) - 1}}}"

    return _outside_math(text, lambda part: _SLOTTED.sub(slot, part)), numbers


def has_words(text: str) -> bool:
    """Whether ``text`` has a letter outside math: something to translate."""
    return bool(_LETTER.search(_SCIENTIFIC.sub("", MATH.sub("", text))))


def translate(text: str, table: dict[str, str]) -> str | None:
    """``text`` in the table's language, its numbers put back; None if the table
    lacks its key."""
    key, numbers = key_of(text)
    found = table.get(key)
    if found is None:
        return None

    def fill(part: str) -> str:
        return _SLOT.sub(lambda m: numbers[int(m.group(1))], part)

    return _outside_math(found, fill)
