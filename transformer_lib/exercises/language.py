"""The checkers' messages in the learner's language, with the standard library's
gettext.

Every message is written in English and marked: ``_("...")`` is translated where it is
said; ``N_("...")`` only marks a template that a table keeps, translated when the row
says it (:meth:`.harness.Mistake.says`). The language is gettext's own choice, read
each time a message is said (so a notebook may set it after the import): the first of
the environment variables ``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is
set, e.g. ``LANGUAGE=zh_TW`` or ``LANGUAGE=zh_CN``; English when no catalog matches.

The catalogs are the library's own gettext domain, ``transformer_lib``: a ``.po``
named after the domain in ``transformer_lib/locale/zh_CN/LC_MESSAGES/`` (and zh_TW),
with its compiled ``.mo`` committed beside it, because a learner installs the library
from git (``pip install "transformer_lib @ git+..."``, Colab, Binder) or editable, and
neither runs a build step that could compile it, while gettext reads only ``.mo`` files.
``python -m booktools.editions catalogs`` (``make catalogs``) extracts the marked
messages with Babel, updates both catalogs and compiles them;
``tests/test_exercises.py`` checks that every message has both translations and that
each ``.mo`` is its ``.po``.

While the book executes, the build asks for the messages in its editions' languages too
(:func:`say_also_in`): a checker's output then carries, beside its English
``text/plain``, the message in each of them under the edition's own MIME type
(:func:`edition_mime`: ``text/vnd.tl.zh_CN+plain``), the way the figures carry their
pictures; each edition's build shows its own type (``booktools.figures``).
"""

from __future__ import annotations

import contextlib
import contextvars
import gettext
from collections.abc import Iterator
from pathlib import Path

DOMAIN = "transformer_lib"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
LANGUAGES = ("zh_CN", "zh_TW")  # the languages the catalogs translate into

_speaking: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "speaking", default=None
)
_twins: list[str] = []


def translation(language: str | None = None) -> gettext.NullTranslations:
    """The catalog of ``language`` (default: :func:`speaking`'s, else the
    environment's), or English (no translation) when there is none."""
    language = language or _speaking.get()
    return gettext.translation(
        DOMAIN, LOCALE_DIR, languages=[language] if language else None, fallback=True
    )


def _(message: str) -> str:
    """``message`` in the current language."""
    return translation().gettext(message)


def N_(message: str) -> str:
    """Marks ``message`` for the catalogs; translated later, where it is said."""
    return message


@contextlib.contextmanager
def speaking(language: str) -> Iterator[None]:
    """Say every message in ``language`` inside the block, whatever the environment."""
    token = _speaking.set(language)
    try:
        yield
    finally:
        _speaking.reset(token)


def say_also_in(languages: list[str]) -> None:
    """From now on, every checker also says its message in each of ``languages``
    (the build's editions); an empty list stops it."""
    unknown = sorted(set(languages) - set(LANGUAGES))
    if unknown:
        raise ValueError(
            f"no catalog of the checkers' messages for {unknown}; there are"
            f" {list(LANGUAGES)}"
        )
    _twins[:] = languages


def twin_languages() -> list[str]:
    return list(_twins)


def edition_mime(mime: str, language: str) -> str:
    """The MIME type of an output in an edition's language: ``text/plain`` in zh_CN
    is ``text/vnd.tl.zh_CN+plain``, ``image/png`` is ``image/vnd.tl.zh_CN+png`` (a
    front end that does not know the type shows the English one beside it)."""
    kind, _, sub = mime.partition("/")
    return f"{kind}/vnd.tl.{language}+{sub}"
