"""Chapter 4 figure: causal and padding masks on a live attention map.

``mask_explorer()`` (:class:`MaskFigure`) toggles the causal mask, the padding side
(right or left) and the number of real tokens of a six-token sentence (6 = no padding),
and applies the mask either before the softmax (correct) or after it (wrong: the rows
stop summing to 1). Masked cells are grey. The masks and weights come from
:mod:`transformer_lib.demos.masking`.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np

from ..demos.masking import (
    ORDERS,
    WORDS,
    build_mask,
    example_scores,
    masked_weights,
    padded_tokens,
)
from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid
from .interactive import Explorer

CAUSAL, PADDING, LENGTHS = [True, False], ["right", "left"], [1, 3, 6]


@cache
def _weights(causal: bool, padding: str, length: int, order: str):
    """(allowed (T, T), weights (T, T)) as NumPy arrays, computed once per setting."""
    allowed = build_mask(len(WORDS), causal, padding, length)
    weights = masked_weights(example_scores(len(WORDS)), allowed, order)
    return allowed.numpy(), weights.numpy()


class MaskFigure(LiveFigure):
    """One attention map with its mask shaded grey and each row's sum written at its
    right (red and bold when it is not 1)."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        T = len(WORDS)
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.15, right=0.9, bottom=0.2, top=0.9)
        self.map = Heatmap(
            ax, np.zeros((T, T)), WORDS, WORDS, colorbar=False, maskable=True
        )
        self.tokens = list(WORDS)
        self.title = fig.text(0.15, 0.93, "", fontsize=10, ha="left")  # cheap title
        fig.colorbar(
            self.map.image,
            ax=ax,
            fraction=0.046,
            pad=0.15,
            label="attention weight",
            ticks=[0, 0.5, 1],
        )
        x = T - 0.5 + 0.12  # just right of the last column
        ax.text(x, -0.55, "sum", fontsize=8, ha="left", va="bottom")
        self.sums = [ax.text(x, i, "", ha="left", va="center") for i in range(T)]
        self.live(*self.map.artists, self.title, *self.sums)

    def layout(self, padding: str, length: int, **_) -> tuple:
        return tuple(padded_tokens(length, padding))  # the tick labels

    def update(
        self,
        causal: bool = True,
        padding: str = "right",
        length: int = 3,
        order: str = "before softmax",
    ) -> HoverGrid:
        tokens = padded_tokens(length, padding)
        T = len(tokens)
        if tokens != self.tokens:
            self.map.set_labels(tokens, tokens, (T, T))
            self.tokens = tokens
        allowed, w = _weights(causal, padding, length, order)
        parts = ["causal" if causal else None]
        parts.append(f"{padding} padding" if length < T else None)
        what = " + ".join(p for p in parts if p)
        self.title.set_text(
            f"{what}, mask {order}" if what else "no mask: a plain softmax"
        )
        # a correct mask keeps every row a distribution
        for i, (text, total) in enumerate(zip(self.sums, w.sum(axis=1), strict=True)):
            if not allowed[i].any():  # no key allowed: the library's all-zero row
                text.set(text="0 (none)", fontsize=8, color="dimgrey", weight="normal")
                continue
            ok = abs(total - 1) < 1e-6
            text.set(
                text=f"{total:.2f}",
                fontsize=9,
                color="black" if ok else "crimson",
                weight="normal" if ok else "bold",
            )
        # NaN: the hover read-out says "masked"
        shown = np.where(allowed, w, np.nan)
        return self.map.set(shown, masked=~allowed)


def mask_explorer() -> Explorer:
    """Causal, padding side, real tokens, before/after the softmax (24 frames)."""
    for setting in itertools.product(CAUSAL, PADDING, LENGTHS, ORDERS):
        _weights(*setting)  # computed once: a redraw only draws
    return Explorer(
        MaskFigure,
        {"causal": CAUSAL, "padding": PADDING, "length": LENGTHS, "order": ORDERS},
        defaults={"length": 3},
        labels={
            "causal": "causal mask",
            "padding": "padding",
            "length": "real tokens",
            "order": "apply mask",
        },
        figsize=(5.6, 4.2),
        dpi=80,
        title="Masks on a live attention map: grey cells are masked; "
        "red row sums mark rows that do not sum to 1",
    )


EXPLORERS = {"mask": mask_explorer}
