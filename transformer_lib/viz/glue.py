"""``glue``: numbers the code computed, in the prose, so that the text cannot drift.

In the book's build, MyST-NB's ``glue(name, value)`` stores the value, and a sentence
writes ``{glue:text}`name:.2f``` where the number belongs. A reader running a chapter in
plain Jupyter, Binder or Colab may not have MyST-NB installed; there the same call shows
the value in the cell's output (unless ``display=False``), so the notebook runs
everywhere.
"""

from __future__ import annotations

from typing import Any

__all__ = ["glue"]


def glue(name: str, value: Any, display: bool = True) -> None:
    """Store ``value`` as ``name`` for MyST-NB's ``{glue:...}`` roles, or show it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue needs a non-empty string name, got {name!r}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:  # plain Jupyter: no build to hand the value to
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)
