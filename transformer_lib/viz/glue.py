"""``glue``: numbers the code computed, in the prose, so that the text cannot drift.

A cell calls ``glue("name", value, display=False)``, and a sentence writes
``{glue:text}`name:.2f``` where the number belongs; when the book is built, MyST-NB puts
the value there. This is MyST-NB's own ``glue`` without importing MyST-NB: importing it
loads nbformat and jsonschema, which takes seconds in every chapter, and a reader on
Binder or Colab may not have it. The value is stored in the output exactly as MyST-NB
stores it (``tests/test_book_helpers.py`` compares the two).
"""

from __future__ import annotations

from typing import Any

__all__ = ["GLUE_PREFIX", "glue"]

# MyST-NB (and papermill's scrapbook before it) finds glued values under this prefix
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value: Any, display: bool = True) -> None:
    """Store ``value`` as ``name`` for MyST-NB's ``{glue:...}`` roles (and show it)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue needs a non-empty string name, got {name!r}")
    from IPython.core.formatters import format_display_data
    from IPython.display import display as show

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    show({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
