"""Chapter 1 figure: queries, keys and values as a soft dictionary look-up.

``lookup_explorer()`` draws the attention weights of the hand-built head of
:mod:`transformer_lib.demos.handbuilt_head` and lets the reader pick the question every
word asks (W_Q) and its sharpness.
"""

from __future__ import annotations

from ..demos.handbuilt_head import RULES, WORDS, lookup
from .explorer import Explorer, HoverGrid, heatmap

BETAS = [0, 1, 2, 4, 8]


def draw_lookup(fig, rule: str = "the previous word", beta: float = 4) -> HoverGrid:
    """Who each query finds: the attention weights, with each row's largest weight printed."""
    weights, _ = lookup(rule, beta)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.13, right=0.86, bottom=0.17, top=0.9)
    grid = heatmap(
        ax,
        weights.numpy(),
        WORDS,
        WORDS,
        colorbar="light",
        annotate="rowmax",
        title=f"each word looks for {rule} (\u03b2 = {beta:g})",
    )
    return grid


def lookup_explorer() -> Explorer:
    """Choose the question every word asks (W_Q) and how sharply it asks (beta)."""
    return Explorer(
        draw_lookup,
        {"rule": RULES, "beta": BETAS},
        defaults={"rule": "the previous word", "beta": 4},
        labels={"rule": "each word looks for", "beta": r"sharpness $\beta$"},
        figsize=(6, 4),
        title="A hand-built attention head: the query picks the key",
    )


EXPLORERS = {"lookup": lookup_explorer}
