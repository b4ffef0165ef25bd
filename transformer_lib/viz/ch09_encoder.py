"""Chapter 9 figure: one sentence through one encoder layer, tensor by tensor.

The sentence and the seeded, untrained layer come from
:mod:`transformer_lib.demos.encoder_example`. ``step_explorer()``
(:class:`StepFigure`) shows the named tensors X_pos, Z_attn, Z_add_norm_1, Z_ffn and
Z_encoder_output (eq. x-pos ... enc-out), as the layer records them with ``trace=``,
each as a (T x d_model) heatmap next to each token's mean and standard deviation, for
Post-LN and Pre-LN.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

import transformer_lib as tl

from ..demos.encoder_example import D_MODEL, Example, example, with_placement
from .figures import LiveFigure
from .heatmap import Heatmap
from .interactive import Explorer

STEPS = ["X_pos", "Z_attn", "Z_add_norm_1", "Z_ffn", "Z_encoder_output"]


FORMULAS = {
    False: {
        "X_pos": "X_emb + PE",
        "Z_attn": "MultiHead(X_pos, X_pos, X_pos)",
        "Z_add_norm_1": "LayerNorm(X_pos + Z_attn)",
        "Z_ffn": "FFN(Z_add_norm_1)",
        "Z_encoder_output": "LayerNorm(Z_add_norm_1 + Z_ffn)",
    },
    True: {
        "X_pos": "X_emb + PE",
        "Z_attn": "MultiHead(LN(X_pos)), Pre-LN",
        "Z_add_norm_1": "X_pos + Z_attn (Pre-LN: no norm)",
        "Z_ffn": "FFN(LN(X_pos + Z_attn)), Pre-LN",
        "Z_encoder_output": "sum + Z_ffn (Pre-LN: no norm)",
    },
}


class StepFigure(LiveFigure):
    """A named tensor (T, d_model) as a heatmap, each token's mean and standard
    deviation at its right. ``tensors``: ``{norm_first: named_tensors(...)}``."""

    def __init__(self, fig, tensors: dict, tokens: list[str]) -> None:
        super().__init__(fig)
        self.tensors = tensors
        T, d = tensors[False]["X_pos"][0].shape
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.085, right=0.75, bottom=0.15, top=0.87)
        self.map = Heatmap(
            ax,
            np.zeros((T, d)),
            tokens,
            [str(j) for j in range(d)],
            row_name="token",
            col_name="feature",
            cmap="RdBu_r",
            vmin=-3,
            vmax=3,
            colorbar=False,
        )
        ax.set_xticks(range(0, d, 3))  # fewer ticks: cheaper, still countable
        cax = fig.add_axes((0.94, 0.15, 0.015, 0.72))
        fig.colorbar(self.map.image, cax=cax, ticks=[-3, 0, 3])
        style = dict(transform=ax.transAxes, fontsize=9.5, family="monospace")
        ax.text(1.02, 1.02, " mean   std", va="bottom", **style)
        self.stats = [
            ax.text(1.02, (T - 0.5 - i) / T, "", va="center", **style) for i in range(T)
        ]
        self.live(*self.map.artists, *self.stats)

    def update(self, step: str = "Z_add_norm_1", norm_first: bool = False):
        z = self.tensors[norm_first][step][0].numpy()  # (T, d_model)
        mean = z.mean(axis=1).round(2) + 0.0  # + 0.0 turns -0.0 into 0.0
        std = z.std(axis=1)  # biased, as LayerNorm uses
        for text, m, s in zip(self.stats, mean, std, strict=True):
            text.set_text(f"{m:+5.2f} {s:5.2f}")  # after a LayerNorm: +0.00, 1.00
        return self.map.set(z, title=f"{step} = {FORMULAS[norm_first][step]}")


def step_explorer(ex: Example | None = None) -> Explorer:
    """Pick a named tensor and the LN placement (5 x 2 = 10 frames)."""
    ex = ex or example()
    pe = tl.sinusoidal_positional_encoding(len(ex.tokens), D_MODEL)
    tensors = {False: {}, True: {}}  # the layer's named intermediates, per placement
    with torch.no_grad():
        x_pos = ex.embedding(ex.ids) + pe  # (1, T, d_model)
        for norm_first, trace in tensors.items():
            with_placement(ex.layer, norm_first)(x_pos, trace=trace)
    return Explorer(
        functools.partial(StepFigure, tensors=tensors, tokens=ex.tokens),
        {"step": STEPS, "norm_first": [False, True]},
        # open on the first Add & Norm, where the two placements visibly differ
        defaults={"step": "Z_add_norm_1"},
        labels={"step": "tensor", "norm_first": "Pre-LN (norm_first)"},
        figsize=(7.6, 3.2),
        dpi=85,
        title="One sentence through one encoder layer: "
        "pick a tensor and the LayerNorm placement",
    )


EXPLORERS = {"steps": step_explorer}
