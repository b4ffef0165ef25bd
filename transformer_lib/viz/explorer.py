"""The names chapters import from ``transformer_lib.viz.explorer``, re-exported.


``Explorer`` (the figure, its controls and its redraw) is in :mod:`.interactive`, its
live widget in :mod:`.live`, its static twin in :mod:`.static` (with ``explorer.js``),
the heatmap helper in :mod:`.heatmap`, and ``show_source`` in :mod:`.source`.
"""

from .heatmap import HoverGrid, heatmap, light_colorbar
from .interactive import Explorer
from .source import show_source
from .static import MAX_FRAMES, PALETTE_COLORS

__all__ = [
    "Explorer",
    "HoverGrid",
    "heatmap",
    "light_colorbar",
    "show_source",
    "MAX_FRAMES",
    "PALETTE_COLORS",
]
