"""Chapter 1 figure: queries, keys and values as a soft dictionary look-up.

``lookup_explorer()`` draws the attention weights of the hand-built head of
:mod:`transformer_lib.demos.handbuilt_head` and lets the reader pick the question every
word asks (W_Q) and its sharpness.
"""

from __future__ import annotations

from ..demos.handbuilt_head import RULES, WORDS, lookup
from .figures import MapFigure
from .heatmap import HoverGrid
from .interactive import Explorer

BETAS = [0, 1, 2, 4, 8]


class LookupFigure(MapFigure):
    """Who each query finds: the attention weights, each row's largest one printed."""

    def __init__(self, fig) -> None:
        super().__init__(fig, WORDS, WORDS)

    def update(self, rule: str = "the previous word", beta: float = 4) -> HoverGrid:
        weights, _ = lookup(rule, beta)
        return self.show(
            weights.numpy(), f"each word looks for {rule} (\u03b2 = {beta:g})"
        )


def lookup_explorer() -> Explorer:
    """Choose the question every word asks (W_Q) and how sharply it asks (beta)."""
    return Explorer(
        LookupFigure,
        {"rule": RULES, "beta": BETAS},
        defaults={"rule": "the previous word", "beta": 4},
        labels={"rule": "each word looks for", "beta": r"sharpness $\beta$"},
        figsize=(6, 4),
        title="A hand-built attention head: the query picks the key",
    )


EXPLORERS = {"lookup": lookup_explorer}
