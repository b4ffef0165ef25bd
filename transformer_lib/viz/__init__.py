"""Plotting and widgets for the book: kept apart so that ``import transformer_lib``
needs no matplotlib.

Generic drawing, one concern per module:

* ``interactive``: ``Explorer``, the live-or-static interactive figure (controls,
  redraw);
* ``live``: its ipywidgets form in Jupyter; ``static``: its kernel-free twin on the
  site, with the script ``explorer.js`` (package data);
* ``heatmap``: ``heatmap``, a labelled attention map (a ``Heatmap`` drawn once), with
  ``HoverGrid`` and ``light_colorbar``;
* ``figures``: ``LiveFigure``, a figure drawn once whose ``update`` changes only what
  the controls change (what keeps a live redraw fast), and ``MapFigure``, the
  one-attention-map figure;
* ``source``: ``show_source``, the library's own code in a chapter;
* ``image_words``: the words drawn inside the pictures, drawn again in each Chinese
  edition's language while the book builds (or in a Chinese notebook's language); a
  text's catalog key in ``word_keys``, a figure's words swapped in ``figure_words``, a
  printed result table's in ``table_words``.

Each chapter's interactive figures (LiveFigure classes) live in a module ``chNN_*.py``
of this package that declares them in ``EXPLORERS`` (name -> factory), so that
``benchmarks/widgets.py`` can time every control's redraw. The models, tasks and
hand-set weights they show are in :mod:`transformer_lib.demos`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from .figures import LiveFigure, MapFigure
from .heatmap import Heatmap, HoverGrid, heatmap, light_colorbar
from .interactive import Explorer
from .live import use_words
from .source import show_source

__all__ = [
    "Explorer",
    "LiveFigure",
    "MapFigure",
    "Heatmap",
    "HoverGrid",
    "heatmap",
    "light_colorbar",
    "show_source",
    "use_words",
    "all_explorers",
]


def all_explorers() -> dict[str, Callable[[], Explorer]]:
    """Every chapter's explorer factories, as ``{"chNN_module.name": factory}``."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("ch"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            for name, factory in getattr(module, "EXPLORERS", {}).items():
                found[f"{info.name}.{name}"] = factory
    return found
