"""``show_source``: a chapter shows the library's own code, never a retyped copy."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from IPython.display import Markdown


def show_source(obj) -> Markdown:
    """Display the source of ``obj`` as a highlighted code block, saying where."""
    from IPython.display import Markdown

    src = inspect.getsource(obj)
    module = inspect.getmodule(obj).__name__
    return Markdown(
        f"Source of `{obj.__qualname__}` in `{module}`:\n\n```python\n{src}```"
    )
