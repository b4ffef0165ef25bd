"""Plotting and widgets for the book: kept apart so that ``import transformer_lib`` needs no matplotlib.

``Explorer`` is the live-or-static interactive figure; ``heatmap`` draws a labelled attention map;
``show_source`` shows the library's own code. Each chapter's interactive figures live in a module
``chNN_*.py`` of this package that declares them in ``EXPLORERS`` (name -> factory), so that
``benchmarks/widgets.py`` can time every control's redraw.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from .explorer import Explorer, HoverGrid, figure, heatmap, show_source

__all__ = ["Explorer", "HoverGrid", "heatmap", "show_source", "figure", "all_explorers"]


def all_explorers() -> dict[str, Callable[[], Explorer]]:
    """Every chapter's explorer factories, as ``{"chNN_module.name": factory}``."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("ch"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            for name, factory in getattr(module, "EXPLORERS", {}).items():
                found[f"{info.name}.{name}"] = factory
    return found
