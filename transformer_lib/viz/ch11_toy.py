"""Chapter 11 figures: the attention maps of a whole encoder-decoder, every layer and
head.

``attention_explorer(attn, src_labels, tgt_labels)`` (:class:`MapsFigure`) picks one
map out of the three stacks (encoder self-attention, decoder self-attention,
cross-attention), a layer and a head. The notebook passes the maps of the trained
reversal model; called with no arguments (as ``EXPLORERS`` does), it uses the
random-weight model of :func:`transformer_lib.demos.reversal.random_model`, which
builds in a fraction of a second. ``draw_map`` draws one map, ``draw_heads`` all heads
of one stack side by side, for static figures.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

import transformer_lib as tl

from ..demos import reversal
from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid, heatmap
from .interactive import Explorer

# control text -> the key of Transformer.forward(..., need_weights=True)'s maps
STACKS = {"cross": "cross", "encoder self": "encoder", "decoder self": "decoder_self"}
_SUB = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def position_labels(ids) -> list[str]:
    """Token names with their position as a subscript, e.g. ['c₀', 'a₁', ...], since
    symbols repeat."""
    return [
        f"{name}{str(i).translate(_SUB)}"
        for i, name in enumerate(reversal.token_labels(ids))
    ]


def _axes(stack: str, src_labels: list[str], tgt_labels: list[str]):
    """(row labels, column labels, row name, column name) of one stack's maps."""
    if stack == "encoder":
        return src_labels, src_labels, "source (query)", "source (key)"
    if stack == "decoder_self":
        return tgt_labels, tgt_labels, "decoder input (query)", "decoder input (key)"
    return tgt_labels, src_labels, "decoder input (query)", "source (key)"


def _future(stack: str, n: int) -> np.ndarray | None:
    """The decoder's future keys (n, n), masked; None for the other stacks."""
    return ~tl.causal_mask(n).numpy() if stack == "decoder_self" else None


def draw_map(
    ax,
    weights: np.ndarray,
    stack: str,
    src_labels,
    tgt_labels,
    title: str | None = None,
) -> HoverGrid:
    """One attention map (T_q, T_k) as a labelled heatmap; the decoder's future keys
    are hatched."""
    rows, cols, row_name, col_name = _axes(stack, src_labels, tgt_labels)
    return heatmap(
        ax,
        weights,
        rows,
        cols,
        title=title,
        row_name=row_name,
        col_name=col_name,
        masked=_future(stack, len(rows)),
    )


class MapsFigure(LiveFigure):
    """One map of the model: ``maps`` is ``{stack: [(h, T_q, T_k) per layer]}`` for one
    sequence, the labels its source and decoder-input tokens."""

    def __init__(self, fig, maps: dict, src_labels, tgt_labels) -> None:
        super().__init__(fig)
        self.maps, self.src_labels, self.tgt_labels = maps, src_labels, tgt_labels
        # fixed margins: cheaper than tight_layout
        fig.subplots_adjust(left=0.2, right=0.9, bottom=0.2, top=0.92)
        ax = self.ax = fig.add_subplot(1, 1, 1)
        self.map = Heatmap(
            ax, maps["cross"][0][0], tgt_labels, src_labels, maskable=True
        )
        self.stack = None
        self.live(*self.map.artists)

    def layout(self, attention: str, **_) -> str:
        return attention  # the labels and the axes' names

    def update(self, attention: str = "cross", layer: int = 1, head: int = 1):
        stack = STACKS[attention]
        weights = self.maps[stack][layer - 1][head - 1]
        rows, cols, row_name, col_name = _axes(stack, self.src_labels, self.tgt_labels)
        if stack != self.stack:
            self.map.set_labels(rows, cols, weights.shape)
            self.map.row_name, self.map.col_name = row_name, col_name
            self.ax.set_xlabel(col_name)
            self.ax.set_ylabel(row_name)
            self.stack = stack
        title = f"{attention}-attention, layer {layer}, head {head}"
        return self.map.set(weights, masked=_future(stack, len(rows)), title=title)


def attention_explorer(
    attn: dict | None = None,
    src_labels: list[str] | None = None,
    tgt_labels: list[str] | None = None,
) -> Explorer:
    """Controls: which attention, layer, head. ``attn`` as returned by
    ``Transformer.forward(..., need_weights=True)``; the first sequence of the batch
    is shown."""
    if attn is None:
        attn, src_labels, tgt_labels = _random_model_maps()
    # (h, T_q, T_k) per layer
    maps = {key: [w[0].detach().numpy() for w in ws] for key, ws in attn.items()}
    n_layers, n_heads = len(maps["cross"]), maps["cross"][0].shape[0]
    return Explorer(
        functools.partial(
            MapsFigure, maps=maps, src_labels=src_labels, tgt_labels=tgt_labels
        ),
        {
            "attention": list(STACKS),
            "layer": list(range(1, n_layers + 1)),
            "head": list(range(1, n_heads + 1)),
        },
        figsize=(5.6, 4.6),
        title="Every attention map of the model: pick the attention, the layer and "
        "the head",
    )


def draw_heads(
    fig, maps: list[torch.Tensor], stack: str, src_labels, tgt_labels, example: int = 0
) -> list[HoverGrid]:
    """All layers (rows) and heads (columns) of one stack, for sequence ``example``;
    one shared colour bar."""
    n_layers, n_heads = len(maps), maps[0].shape[1]
    axes = np.atleast_2d(fig.subplots(n_layers, n_heads, sharex=True, sharey=True))
    grids = []
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer, head]
            rows, cols, row_name, col_name = _axes(stack, src_labels, tgt_labels)
            grids.append(
                heatmap(
                    ax,
                    maps[layer][example, head].detach().numpy(),
                    rows,
                    cols,
                    colorbar=False,
                    title=f"layer {layer + 1}, head {head + 1}",
                    row_name=row_name if head == 0 else "",
                    col_name=col_name if layer == n_layers - 1 else "",
                )
            )
    fig.colorbar(
        axes[0, 0].images[0],
        ax=axes.ravel().tolist(),
        fraction=0.02,
        pad=0.02,
        label="attention weight",
    )
    return grids


def _random_model_maps():
    """Maps of the random-weight reversal model on one example (for EXPLORERS and the
    benchmark)."""
    model = reversal.random_model(seed=0)
    src, tgt_in, _ = reversal.reversal_batch(1, 8, torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, attn = model(src, tgt_in, need_weights=True)
    return attn, position_labels(src[0]), position_labels(tgt_in[0])


EXPLORERS = {"attention": attention_explorer}
