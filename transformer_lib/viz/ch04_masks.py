"""Chapter 4 figures: causal and padding masks on a live attention map.

``mask_explorer()`` toggles the causal mask, the padding side (right or left) and the number
of real tokens of a six-token sentence (6 = no padding), and applies the mask either before
the softmax (correct) or after it (wrong: the rows stop summing to 1). Masked cells are grey.
"""

from __future__ import annotations

import numpy as np
import torch

import transformer_lib as tl

from .explorer import Explorer, heatmap

WORDS = ["the", "cat", "sat", "on", "the", "mat"]
PAD = "<pad>"


def example_scores(T: int = len(WORDS), seed: int = 4) -> torch.Tensor:
    """A fixed (T, T) matrix of scaled scores, a stand-in for Q K^T / sqrt(d_k) of one head."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, 8, generator=g)
    k = torch.randn(T, 8, generator=g)
    return tl.attention_scores(q, k) * 1.5  # (T, T), spread enough to give uneven rows


def padded_tokens(length: int, padding: str, words: list[str] = WORDS) -> list[str]:
    """The first ``length`` words, padded to len(words) with <pad> on the right or left."""
    real, pads = words[:length], [PAD] * (len(words) - length)
    return real + pads if padding == "right" else pads + real


def build_mask(T: int, causal: bool, padding: str, length: int) -> torch.Tensor:
    """(T, T) bool, True = may attend: causal AND key padding   (eq. combined-mask)."""
    allowed = torch.ones(T, T, dtype=torch.bool)
    if causal:
        allowed &= tl.causal_mask(T)  # (T, T)
    real = tl.padding_mask([length], T)[0, 0, 0]  # (T,), True at the first `length`
    if padding == "left":
        real = real.flip(0)  # left padding: the real tokens are the last ones
    allowed &= real  # (T, T) & (T,): the same key columns go in every row
    return allowed


def masked_weights(
    scores: torch.Tensor, allowed: torch.Tensor, order: str
) -> torch.Tensor:
    """Attention weights, the mask applied before the softmax (right) or after it (wrong)."""
    if order == "before softmax":  # eq. masked-scores
        return tl.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return (
        tl.softmax(scores, dim=-1) * allowed
    )  # zeroed afterwards: rows no longer sum to 1


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
