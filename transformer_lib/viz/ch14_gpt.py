"""Chapter 14 figures: the attention of a small decoder-only model that adds numbers.

``attention_explorer(weights, labels)`` shows one causal self-attention map per
problem, layer and head; the cells above the diagonal (the future, which the causal
mask hides) are hatched. Rows are the positions that predict the next token, labelled
with the token they read. Called with no arguments (as ``EXPLORERS`` does) it uses a
random-weight model.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

import transformer_lib as tl

from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid
from .interactive import Explorer


def position_labels(labels: list[str]) -> list[str]:
    """'3' at position 5 -> '3₅': symbols repeat, positions do not."""
    sub = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
    return [f"{s}{str(i).translate(sub)}" for i, s in enumerate(labels)]


class AttentionFigure(LiveFigure):
    """One (T, T) causal map: ``weights[problem][layer - 1, head - 1]``, the future
    hatched, each row's largest weight printed. ``labels[problem]``: its T token
    labels (they change with the problem: a new layout)."""

    def __init__(self, fig, weights: dict, labels: dict) -> None:
        super().__init__(fig)
        self.weights, self.labels = weights, labels
        first = next(iter(weights))
        T = np.asarray(weights[first]).shape[-1]
        self.future = np.triu(np.ones((T, T), dtype=bool), k=1)
        ax = fig.add_axes((0.15, 0.17, 0.62, 0.7))
        self.map = Heatmap(
            ax,
            np.zeros((T, T)),
            labels[first],
            labels[first],
            row_name="query: position reading (predicts the next token)",
            col_name="key",
            masked=self.future,
            annotate="rowmax",
            colorbar="light",
        )
        self.shown = first
        self.live(*self.map.artists)

    def update(self, problem: str, layer: int = 1, head: int = 1) -> HoverGrid:
        if problem != self.shown:  # tick labels: part of the layout
            T = self.future.shape[0]
            self.map.set_labels(self.labels[problem], self.labels[problem], (T, T))
            self.shown = problem
        w = np.asarray(self.weights[problem][layer - 1, head - 1], dtype=float)
        return self.map.set(
            np.where(self.future, np.nan, w),
            masked=self.future,
            title=f"layer {layer}, head {head}",
        )

    def layout(self, problem: str, **_) -> str:
        return problem


def attention_explorer(
    weights: dict[str, np.ndarray] | None = None,
    labels: dict[str, list[str]] | None = None,
) -> Explorer:
    """Controls: the problem, the layer and the head. ``weights[problem]`` is a
    (layers, heads, T, T) array, ``labels[problem]`` its T token labels."""
    if weights is None:
        weights, labels = _random_model_maps()
    problems = list(weights)
    n_layers, n_heads = np.asarray(weights[problems[0]]).shape[:2]
    return Explorer(
        functools.partial(AttentionFigure, weights=weights, labels=labels),
        {
            "problem": problems,
            "layer": list(range(1, n_layers + 1)),
            "head": list(range(1, n_heads + 1)),
        },
        figsize=(6.6, 5.6),
        dpi=80,
        title="Causal self-attention of the adder, by problem, layer and head",
    )


def _random_model_maps():
    """Maps of a random-weight model of the adder's shape, for two problems."""
    from ..demos import addition  # noqa: PLC0415  (demos import the model, not viz)

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = tl.GPT(addition.addition_config(3)).eval()
    a, b = torch.tensor([47, 505]), torch.tensor([985, 495])
    tokens = addition.encode(a, b, 3)
    with torch.no_grad():
        _, w = model(tokens, need_weights=True)
    maps = torch.stack(w, 1).numpy()  # (B, layers, heads, T, T)
    weights, labels = {}, {}
    for i in range(len(a)):
        name = f"{int(a[i]):03d}+{int(b[i]):03d}"
        weights[name] = maps[i]
        labels[name] = position_labels(addition.token_labels(tokens[i]))
    return weights, labels


EXPLORERS = {"attention": attention_explorer}
