"""Chapter 2 figures: why the scores are divided by sqrt(d_k).

``scale_explorer()`` draws the attention weights of random unit-variance queries and keys for a
chosen d_k, with and without the 1/sqrt(d_k) of eq. scaled-scores. Without it, the rows turn
one-hot as d_k grows; with it, they look the same at every d_k.
"""

from __future__ import annotations

import torch

import transformer_lib as tl

from .explorer import Explorer, HoverGrid, heatmap

T = 6
D_KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
POSITIONS = [str(i + 1) for i in range(T)]


def random_qk(
    seed: int = 0, d_max: int = max(D_KS)
) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k of shape (T, d_max) with independent N(0, 1) entries; a smaller d_k uses the first columns."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, d_max, generator=g), torch.randn(T, d_max, generator=g)


_Q, _K = random_qk()


def scale_weights(d_k: int, scale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores (T, T), weights (T, T)) of the first d_k features of the fixed random q and k."""
    scores = tl.attention_scores(
        _Q[:, :d_k], _K[:, :d_k], scale=scale
    )  # (T, T)   eq. scores / scaled-scores
    return scores, tl.softmax(scores, dim=-1)


def draw_scale(fig, d_k: int = 64, scale: bool = True) -> HoverGrid:
    """Attention weights of random q, k with d_k features; each row's largest weight printed."""
    scores, weights = scale_weights(d_k, scale)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.13, right=0.86, bottom=0.15, top=0.88)
    what = "QK\u1d40/\u221ad\u2096" if scale else "QK\u1d40 (no scale)"
    grid = heatmap(
        ax,
        weights.numpy(),
        POSITIONS,
        POSITIONS,
        colorbar="light",
        annotate="rowmax",
        title=f"softmax({what}), d\u2096 = {d_k}: scores have std {scores.std().item():.1f}",
    )
    ax.title.set_fontsize(10)
    return grid


def scale_explorer() -> Explorer:
    """Slide d_k; switch the 1/sqrt(d_k) off to watch the softmax saturate."""
    return Explorer(
        draw_scale,
        {"d_k": D_KS, "scale": [True, False]},
        defaults={"d_k": 64},
        labels={"d_k": "$d_k$", "scale": r"divide by $\sqrt{d_k}$"},
        figsize=(6, 4),
        title="Random queries and keys: the attention weights with and without the scale",
    )


EXPLORERS = {"scale": scale_explorer}
