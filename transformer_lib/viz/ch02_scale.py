"""Chapter 2 figure: why the scores are divided by sqrt(d_k).

``scale_explorer()`` (:class:`ScaleFigure`) draws the attention weights of random
unit-variance queries and keys for a chosen d_k, with and without the 1/sqrt(d_k) of
eq. scaled-scores. Without it, the rows turn one-hot as d_k grows; with it, they look
the same at every d_k.
"""

from __future__ import annotations

from functools import cache

import torch

import transformer_lib as tl

from .figures import MapFigure
from .heatmap import HoverGrid
from .interactive import Explorer

T = 6
D_KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
POSITIONS = [str(i + 1) for i in range(T)]


def random_qk(
    seed: int = 0, d_max: int = max(D_KS)
) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k of shape (T, d_max) with independent N(0, 1) entries; a smaller d_k uses
    the first columns."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, d_max, generator=g), torch.randn(T, d_max, generator=g)


_Q, _K = random_qk()


@cache
def scale_weights(d_k: int, scale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores (T, T), weights (T, T)) of the first d_k features of the fixed random
    q and k (computed once per d_k and scale)."""
    q, k = _Q[:, :d_k], _K[:, :d_k]
    scores = tl.attention_scores(q, k, scale=scale)  # (T, T)   eq. scores / scaled
    return scores, tl.softmax(scores, dim=-1)


class ScaleFigure(MapFigure):
    """Attention weights of random q, k with d_k features, with or without the scale;
    each row's largest weight printed."""

    def __init__(self, fig) -> None:
        margins = (0.13, 0.86, 0.15, 0.88)
        super().__init__(fig, POSITIONS, POSITIONS, margins, title_size=10)

    def update(self, d_k: int = 64, scale: bool = True) -> HoverGrid:
        scores, weights = scale_weights(d_k, scale)
        what = "QK\u1d40/\u221ad\u2096" if scale else "QK\u1d40 (no scale)"
        std = scores.std().item()
        title = f"softmax({what}), d\u2096 = {d_k}: scores have std {std:.1f}"
        return self.show(weights.numpy(), title)


def scale_explorer() -> Explorer:
    """Slide d_k; switch the 1/sqrt(d_k) off to watch the softmax saturate."""
    for d_k in D_KS:  # the weights, computed once: a redraw only draws
        scale_weights(d_k, True), scale_weights(d_k, False)
    return Explorer(
        ScaleFigure,
        {"d_k": D_KS, "scale": [True, False]},
        defaults={"d_k": 64},
        labels={"d_k": "$d_k$", "scale": r"divide by $\sqrt{d_k}$"},
        figsize=(6, 4),
        title="Random queries and keys: the attention weights with and without the "
        "scale",
    )


EXPLORERS = {"scale": scale_explorer}
