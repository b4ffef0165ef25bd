"""Chapter 10 figures: a one-layer encoder-decoder that learns two translations
(:mod:`transformer_lib.demos.translation`).

``attention_explorer()`` shows the decoder's masked self-attention next to its
cross-attention, per head, before and after training; ``output_explorer()``
shows the output distribution at every target position as training proceeds.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.patches import Rectangle

import transformer_lib as tl

from ..demos.translation import (
    SENTENCES,
    TGT_VOCAB,
    Batch,
    ToyTranslator,
    attention_weights,
    trained_toy,
)
from .explorer import Explorer, HoverGrid, heatmap

_GREY_BAD = matplotlib.colormaps["viridis"].with_extremes(bad="0.72")


def draw_attention(
    fig, head: int, sentence: str, trained: bool, weights: dict, batch: Batch
) -> HoverGrid:
    """Masked self-attention (a triangle) beside cross-attention (a
    T_tgt x T_src rectangle): one head, one heatmap, masked cells grey."""
    b, i = SENTENCES.index(sentence), head - 1
    w_self, w_cross = weights[trained]
    n = batch.tgt_lengths[b]  # real decoder positions (no padded rows)
    tgt, src = batch.tgt_tokens(b)[:n], batch.src_tokens(b)
    self_w = w_self[b, i, :n, :n].numpy().copy()  # (n, n)
    self_w[~tl.causal_mask(n).numpy()] = np.nan  # the future: masked
    cross_w = w_cross[b, i, :n].numpy().copy()  # (n, T_src)
    cross_w[:, ~batch.src_mask[b, 0, 0].numpy()] = np.nan  # <pad> keys
    gap = np.full((n, 1), np.nan)  # a blank column between the two maps
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.11, right=0.94, bottom=0.25, top=0.8)
    grid = heatmap(
        ax,
        np.hstack([self_w, gap, cross_w]),
        tgt,
        tgt + [""] + src,
        cmap=_GREY_BAD,
        row_name="query",
        col_name="key: decoder (left), encoder (right)",
    )
    ax.add_patch(Rectangle((n - 0.5, -0.5), 1, n, color="white"))
    for x, text in [
        ((n - 1) / 2, "masked self-attention"),
        (n + 1 + (len(src) - 1) / 2, "cross-attention"),
    ]:
        ax.text(x, -0.6, text, ha="center", va="bottom", fontsize=10)
    state = "trained" if trained else "untrained"
    fig.suptitle(
        f"head {head} of the {state} decoder layer, \u201c{sentence}\u201d",
        fontsize=10.5,
    )
    return grid


def attention_explorer(
    trained: ToyTranslator | None = None, batch: Batch | None = None
) -> Explorer:
    """Head x sentence: both attention maps of a trained toy (8 frames)."""
    if trained is None or batch is None:
        trained, batch, _ = trained_toy()
    weights = {True: attention_weights(trained, batch)}

    def draw(fig, head, sentence):
        return draw_attention(fig, head, sentence, True, weights, batch)

    return Explorer(
        draw,
        {"head": [1, 2, 3, 4], "sentence": SENTENCES},
        labels={"head": "head", "sentence": "source"},
        figsize=(7.6, 3.7),
        dpi=80,
        title="The decoder's two attentions: causal self-attention (left), "
        "cross-attention to the source (right)",
    )


def draw_outputs(fig, step: int, sentence: str, probs: dict, batch: Batch) -> HoverGrid:
    """P (eq. output-softmax) at every real target position; a red box
    marks the correct next token, its probability is written at the right."""
    b = SENTENCES.index(sentence)
    n = batch.tgt_lengths[b]
    p = probs[step][b, :n].numpy()  # (n, |V|)
    correct = batch.tgt_out[b, :n].numpy()  # (n,) label ids
    p_correct = p[np.arange(n), correct]
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.14, right=0.8, bottom=0.27, top=0.89)
    grid = heatmap(
        ax,
        p,
        batch.tgt_tokens(b)[:n],
        TGT_VOCAB,
        row_name="input at position t",
        col_name="next token",
        colorbar=False,
        title=f"P after {step} training steps, \u201c{sentence}\u201d",
    )
    ax.text(1.02, 1.01, "P(correct)", transform=ax.transAxes, fontsize=9, va="bottom")
    for t, (col, pc) in enumerate(zip(correct, p_correct)):
        ax.add_patch(
            Rectangle(
                (col - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="crimson", lw=1.8
            )
        )
        ax.text(
            1.05,
            (n - 0.5 - t) / n,
            f"{pc:.2f}",
            transform=ax.transAxes,
            fontsize=9.5,
            va="center",
        )
    nll = -np.log(p_correct).mean()  # this sentence's share of eq. dec-loss
    ax.text(
        1.0,
        -0.37,
        f"mean -log P(correct) = {nll:.3f}",
        transform=ax.transAxes,
        ha="right",
        fontsize=9,
    )
    cax = fig.add_axes((0.915, 0.27, 0.015, 0.62))
    fig.colorbar(ax.images[0], cax=cax)
    return grid


def output_explorer(probs: dict | None = None, batch: Batch | None = None) -> Explorer:
    """Training step x sentence: the output distributions (12 frames)."""
    if probs is None or batch is None:
        _, batch, probs = trained_toy()
    steps = sorted(probs)

    def draw(fig, step, sentence):
        return draw_outputs(fig, step, sentence, probs, batch)

    return Explorer(
        draw,
        {"step": steps, "sentence": SENTENCES},
        labels={"step": "training steps", "sentence": "source"},
        figsize=(7.6, 3.9),
        dpi=80,
        title="Teacher forcing: the distribution over the next token at "
        "every position (red box: the correct one)",
    )


EXPLORERS = {"attention": attention_explorer, "outputs": output_explorer}
