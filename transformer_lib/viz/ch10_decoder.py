"""Chapter 10 figures: a one-layer encoder-decoder that learns two translations
(:mod:`transformer_lib.demos.translation`).

``attention_explorer()`` (:class:`AttentionFigure`) shows the trained decoder's masked
self-attention next to its cross-attention, per head; ``output_explorer()``
(:class:`OutputFigure`) shows the output distribution at every target position as
training proceeds.
"""

from __future__ import annotations

import functools

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
from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid
from .interactive import Explorer

_GREY_BAD = matplotlib.colormaps["viridis"].with_extremes(bad="0.72")


class AttentionFigure(LiveFigure):
    """Masked self-attention (a triangle) beside cross-attention (a T_tgt x T_src
    rectangle): one head of the decoder layer, one heatmap, masked cells grey.
    ``weights``: (self, cross) attention weights of the whole batch."""

    def __init__(self, fig, weights: tuple, batch: Batch) -> None:
        super().__init__(fig)
        self.weights, self.batch = weights, batch
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.11, right=0.94, bottom=0.25, top=0.8)
        self.map = Heatmap(
            ax,
            np.zeros((1, 1)),
            cmap=_GREY_BAD,
            row_name="query",
            col_name="key: decoder (left), encoder (right)",
        )
        # a blank column between the two maps, over the image
        self.gap = ax.add_patch(Rectangle((0, -0.5), 1, 1, color="white"))
        self.names = [
            ax.text(0, -0.6, text, ha="center", va="bottom", fontsize=10)
            for text in ("masked self-attention", "cross-attention")
        ]
        self.title = fig.suptitle(" ", fontsize=10.5)
        self.sentence = None
        self.live(*self.map.artists, self.gap, self.title)

    def layout(self, sentence: str, **_) -> str:
        return sentence  # the map's shape and labels

    def update(self, head: int = 1, sentence: str = SENTENCES[0]) -> HoverGrid:
        b, i, batch = SENTENCES.index(sentence), head - 1, self.batch
        n = batch.tgt_lengths[b]  # real decoder positions (no padded rows)
        tgt, src = batch.tgt_tokens(b)[:n], batch.src_tokens(b)
        if sentence != self.sentence:
            self.map.set_labels(tgt, tgt + [""] + src, (n, n + 1 + len(src)))
            self.gap.set_bounds(n - 0.5, -0.5, 1, n)
            self.names[0].set_x((n - 1) / 2)
            self.names[1].set_x(n + 1 + (len(src) - 1) / 2)
            self.sentence = sentence
        w_self, w_cross = self.weights
        self_w = w_self[b, i, :n, :n].numpy().copy()  # (n, n)
        self_w[~tl.causal_mask(n).numpy()] = np.nan  # the future: masked
        cross_w = w_cross[b, i, :n].numpy().copy()  # (n, T_src)
        cross_w[:, ~batch.src_mask[b, 0, 0].numpy()] = np.nan  # <pad> keys
        gap = np.full((n, 1), np.nan)
        self.title.set_text(
            f"head {head} of the trained decoder layer, \u201c{sentence}\u201d"
        )
        return self.map.set(np.hstack([self_w, gap, cross_w]))


def attention_explorer(
    trained: ToyTranslator | None = None, batch: Batch | None = None
) -> Explorer:
    """Head x sentence: both attention maps of a trained toy (8 frames)."""
    if trained is None or batch is None:
        trained, batch, _ = trained_toy()
    weights = attention_weights(trained, batch)
    return Explorer(
        functools.partial(AttentionFigure, weights=weights, batch=batch),
        {"head": [1, 2, 3, 4], "sentence": SENTENCES},
        labels={"head": "head", "sentence": "source"},
        figsize=(7.6, 3.7),
        dpi=80,
        title="The decoder's two attentions: causal self-attention (left), "
        "cross-attention to the source (right)",
    )


class OutputFigure(LiveFigure):
    """P (eq. output-softmax) at every real target position; a red box marks the
    correct next token, its probability is written at the right. ``probs``:
    ``{training step: P (B, T_tgt, |V|)}``."""

    def __init__(self, fig, probs: dict, batch: Batch) -> None:
        super().__init__(fig)
        self.probs, self.batch = probs, batch
        T = batch.tgt_in.size(1)  # the most rows a sentence has
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.14, right=0.8, bottom=0.27, top=0.89)
        self.map = Heatmap(
            ax,
            np.zeros((1, len(TGT_VOCAB))),
            None,
            TGT_VOCAB,
            row_name="input at position t",
            col_name="next token",
            colorbar=False,
        )
        ax.text(
            1.02, 1.01, "P(correct)", transform=ax.transAxes, fontsize=9, va="bottom"
        )
        # over the image: drawn with it
        box = dict(fill=False, edgecolor="crimson", lw=1.8)
        self.boxes = [ax.add_patch(Rectangle((0, 0), 1, 1, **box)) for _ in range(T)]
        self.p_correct = [
            ax.text(1.05, 0, "", transform=ax.transAxes, fontsize=9.5, va="center")
            for _ in range(T)
        ]
        self.nll = ax.text(
            1.0, -0.37, "", transform=ax.transAxes, ha="right", fontsize=9
        )
        cax = fig.add_axes((0.915, 0.27, 0.015, 0.62))
        fig.colorbar(self.map.image, cax=cax)
        self.sentence = None
        self.live(*self.map.artists, *self.boxes, *self.p_correct, self.nll)

    def layout(self, sentence: str, **_) -> str:
        return sentence  # the rows and their labels

    def update(self, step: int = 0, sentence: str = SENTENCES[0]) -> HoverGrid:
        b, batch = SENTENCES.index(sentence), self.batch
        n = batch.tgt_lengths[b]
        if sentence != self.sentence:
            self.map.set_labels(batch.tgt_tokens(b)[:n], TGT_VOCAB, (n, len(TGT_VOCAB)))
            self.sentence = sentence
        p = self.probs[step][b, :n].numpy()  # (n, |V|)
        correct = batch.tgt_out[b, :n].numpy()  # (n,) label ids
        p_correct = p[np.arange(n), correct]
        for t, (box, text) in enumerate(zip(self.boxes, self.p_correct, strict=True)):
            box.set_visible(t < n)
            text.set_visible(t < n)
            if t < n:
                box.set_xy((correct[t] - 0.5, t - 0.5))
                text.set_y((n - 0.5 - t) / n)
                text.set_text(f"{p_correct[t]:.2f}")
        nll = -np.log(p_correct).mean()  # this sentence's share of eq. dec-loss
        self.nll.set_text(f"mean -log P(correct) = {nll:.3f}")
        title = f"P after {step} training steps, \u201c{sentence}\u201d"
        return self.map.set(p, title=title)


def output_explorer(probs: dict | None = None, batch: Batch | None = None) -> Explorer:
    """Training step x sentence: the output distributions (12 frames)."""
    if probs is None or batch is None:
        _, batch, probs = trained_toy()
    return Explorer(
        functools.partial(OutputFigure, probs=probs, batch=batch),
        {"step": sorted(probs), "sentence": SENTENCES},
        labels={"step": "training steps", "sentence": "source"},
        figsize=(7.6, 3.9),
        dpi=80,
        title="Teacher forcing: the distribution over the next token at "
        "every position (red box: the correct one)",
    )


EXPLORERS = {"attention": attention_explorer, "outputs": output_explorer}
