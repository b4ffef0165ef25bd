"""Chapter 4 figure: causal and padding masks on a live attention map.

``mask_explorer()`` toggles the causal mask, the padding side (right or left) and the number
of real tokens of a six-token sentence (6 = no padding), and applies the mask either before
the softmax (correct) or after it (wrong: the rows stop summing to 1). Masked cells are grey.
The masks and weights come from :mod:`transformer_lib.demos.masking`.
"""

from __future__ import annotations

import numpy as np

from ..demos.masking import build_mask, example_scores, masked_weights, padded_tokens
from .explorer import Explorer, heatmap

def draw_masked_attention(
    fig,
    causal: bool = True,
    padding: str = "right",
    length: int = 3,
    order: str = "before softmax",
):
    """One attention map with its mask shaded grey and each row's sum written at its right."""
    tokens = padded_tokens(length, padding)
    T = len(tokens)
    allowed = build_mask(T, causal, padding, length)
    w = masked_weights(example_scores(T), allowed, order).numpy()  # (T, T)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.15, right=0.9, bottom=0.2, top=0.9)
    parts = ["causal" if causal else None, f"{padding} padding" if length < T else None]
    what = " + ".join(p for p in parts if p)
    title = f"{what}, mask {order}" if what else "no mask: a plain softmax"
    shown = np.where(
        allowed.numpy(), w, np.nan
    )  # NaN: the hover read-out says "masked"
    grid = heatmap(ax, shown, tokens, tokens, masked=~allowed.numpy(), colorbar=False)
    fig.text(
        0.15, 0.93, title, fontsize=10, ha="left"
    )  # cheaper to lay out than a title
    fig.colorbar(
        ax.images[0],
        ax=ax,
        fraction=0.046,
        pad=0.15,
        label="attention weight",
        ticks=[0, 0.5, 1],
    )
    x = T - 0.5 + 0.12  # just right of the last column
    ax.text(x, -0.55, "sum", fontsize=8, ha="left", va="bottom")
    for i, total in enumerate(
        w.sum(axis=1)
    ):  # a correct mask keeps every row a distribution
        if not allowed[i].any():  # no key allowed: the library's all-zero row
            ax.text(
                x, i, "0 (none)", fontsize=8, ha="left", va="center", color="dimgrey"
            )
            continue
        ok = abs(total - 1) < 1e-6
        ax.text(
            x,
            i,
            f"{total:.2f}",
            fontsize=9,
            ha="left",
            va="center",
            color="black" if ok else "crimson",
            fontweight="normal" if ok else "bold",
        )
    return grid


def mask_explorer() -> Explorer:
    """Causal, padding side, real tokens, before/after the softmax (24 frames)."""
    return Explorer(
        draw_masked_attention,
        {
            "causal": [True, False],
            "padding": ["right", "left"],
            "length": [1, 3, 6],
            "order": ["before softmax", "after softmax"],
        },
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
