"""Introduction figures: a first attention map, and where each chapter sits in it.

``heads_explorer()`` (:class:`HeadsFigure`) shows the attention weights of a few
hand-built heads over a six-word sentence (chapter 1 builds them from W_Q and W_K), with
and without the causal mask of chapter 4. ``draw_pipeline(ax)`` draws the flow
X -> Q, K, V -> scores -> weights -> Z with chapter numbers.
"""

from __future__ import annotations

import numpy as np

from ..demos.handbuilt_head import WORDS, lookup
from .figures import MapFigure
from .heatmap import HoverGrid
from .interactive import Explorer

HEADS = {  # what the reader picks -> the rule of chapter 1 that builds that head
    "previous word": "the previous word",
    "next word": "the next word",
    "first word": "the first word",
    "nouns": "a noun",
    "same kind of word": "its own kind",
}


class HeadsFigure(MapFigure):
    """The attention weights of one hand-built head over the sentence; with the causal
    mask, each word's future is shaded grey."""

    def __init__(self, fig) -> None:
        super().__init__(fig, WORDS, WORDS, maskable=True)

    def update(self, head: str = "previous word", causal: bool = False) -> HoverGrid:
        weights, _ = lookup(HEADS[head], beta=6.0, causal=causal)
        T = len(WORDS)
        future = np.triu(np.ones((T, T), dtype=bool), k=1) if causal else None
        title = f"head: {head}" + (" (causal mask)" if causal else "")
        return self.show(weights.numpy(), title, masked=future)


def heads_explorer() -> Explorer:
    """Pick a head; tick the causal mask to hide every word's future."""
    return Explorer(
        HeadsFigure,
        {"head": list(HEADS), "causal": [False, True]},
        labels={"head": "head", "causal": "causal mask"},
        figsize=(6, 4),
        title="Where each word looks: five hand-built attention heads",
    )


def draw_pipeline(ax) -> None:
    """One attention layer as a flow of boxes, each labelled with its chapter."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    boxes = [  # (label, formula, chapter, width)
        ("tokens", "$X$", "ch. 1 and 8", 0.1),
        ("projections", "$XW_Q,\\ XW_K,\\ XW_V$", "ch. 1", 0.17),
        ("scores", r"$S = QK^\top/\sqrt{d_k}$", "ch. 2", 0.14),
        ("mask", r"$-\infty$ where masked", "ch. 4", 0.14),
        ("weights", r"$A=\mathrm{softmax}(S)$", "ch. 3", 0.14),
        ("output", "$Z = AV$", "ch. 3", 0.1),
    ]
    gap = (1 - sum(b[3] for b in boxes)) / (len(boxes) - 1)
    ax.set_xlim(-0.012, 1.012)
    ax.set_ylim(0.05, 0.75)
    ax.axis("off")
    left, spans = 0.0, []
    for label, formula, chapter, w in boxes:
        x = left + w / 2
        ax.add_patch(
            FancyBboxPatch(
                (left, 0.3),
                w,
                0.4,
                boxstyle="round,pad=0.005",
                fc="#eef3fb",
                ec="#4a6fa5",
            )
        )
        ax.text(x, 0.6, label, ha="center", va="center", fontsize=9, weight="bold")
        ax.text(x, 0.43, formula, ha="center", va="center", fontsize=8)
        ax.text(x, 0.16, chapter, ha="center", va="center", fontsize=8, color="#4a6fa5")
        spans.append((left, left + w))
        left += w + gap
    for (_, end0), (start1, _) in zip(spans, spans[1:], strict=False):
        ax.add_patch(
            FancyArrowPatch(
                (end0 + 0.004, 0.5),
                (start1 - 0.004, 0.5),
                arrowstyle="-|>",
                mutation_scale=10,
                color="#4a6fa5",
            )
        )


EXPLORERS = {"heads": heads_explorer}
