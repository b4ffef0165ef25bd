"""Chapter 9 figures: one sentence through one encoder layer, tensor by tensor.

The sentence and the seeded, untrained layer come from
:mod:`transformer_lib.demos.encoder_example`; ``encoder_steps()`` returns the named tensors X_pos, Z_attn,
Z_add_norm_1, Z_ffn and Z_encoder_output (eq. x-pos ... enc-out) computed from
the layer's own submodules, in either LayerNorm placement. ``step_explorer()``
shows any of them as a (T x d_model) heatmap next to each token's mean and
standard deviation, for Post-LN and Pre-LN.
"""

from __future__ import annotations

import torch

import transformer_lib as tl

from ..demos.encoder_example import D_MODEL, Example, example, with_placement
from .explorer import Explorer, HoverGrid, heatmap

STEPS = ["X_pos", "Z_attn", "Z_add_norm_1", "Z_ffn", "Z_encoder_output"]


def encoder_steps(
    layer: tl.EncoderLayer, x_pos: torch.Tensor, mask: torch.Tensor | None = None
) -> dict:
    """The named tensors of one layer, each (B, T, d_model), and "weights".

    Post-LN (eq. enc-attn ... enc-out): Z_add_norm_1 = LN(X_pos + Z_attn),
    output = LN(Z_add_norm_1 + Z_ffn). Pre-LN (eq. enc-pre-ln): sublayers
    read LN(.) of the stream and nothing normalises the sums, so
    "Z_add_norm_1" is the plain sum X_pos + Z_attn.
    """
    if layer.norm_first:
        a = layer.sub1.norm(x_pos)
        z_attn, weights = layer.self_attn(a, a, a, mask, need_weights=True)
        z1 = x_pos + z_attn
        z_ffn = layer.ffn(layer.sub2.norm(z1))
        out = z1 + z_ffn
    else:
        z_attn, weights = layer.self_attn(x_pos, x_pos, x_pos, mask, need_weights=True)
        z1 = layer.sub1.norm(x_pos + z_attn)
        z_ffn = layer.ffn(z1)
        out = layer.sub2.norm(z1 + z_ffn)
    return {
        "X_pos": x_pos,
        "Z_attn": z_attn,
        "Z_add_norm_1": z1,
        "Z_ffn": z_ffn,
        "Z_encoder_output": out,
        "weights": weights,
    }


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


def draw_step(
    fig, step: str, norm_first: bool, tensors: dict, tokens: list[str]
) -> HoverGrid:
    """A named tensor as a heatmap, each row's mean and std at its right."""
    z = tensors[norm_first][step][0].numpy()  # (T, d_model)
    T, d = z.shape
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.085, right=0.75, bottom=0.15, top=0.87)
    grid = heatmap(
        ax,
        z,
        tokens,
        [str(j) for j in range(d)],
        row_name="token",
        col_name="feature",
        cmap="RdBu_r",
        vmin=-3,
        vmax=3,
        colorbar=False,
        title=f"{step} = {FORMULAS[norm_first][step]}",
    )
    ax.set_xticks(range(0, d, 3))  # fewer ticks: cheaper, still countable
    cax = fig.add_axes((0.94, 0.15, 0.015, 0.72))
    fig.colorbar(ax.images[0], cax=cax, ticks=[-3, 0, 3])
    mean = z.mean(axis=1).round(2) + 0.0  # + 0.0 turns -0.0 into 0.0
    std = z.std(axis=1)  # biased, as LayerNorm uses
    ax.text(
        1.02,
        1.02,
        " mean   std",
        transform=ax.transAxes,
        fontsize=9.5,
        va="bottom",
        family="monospace",
    )
    for i in range(T):  # after a LayerNorm: +0.00 and 1.00 (at init)
        ax.text(
            1.02,
            (T - 0.5 - i) / T,
            f"{mean[i]:+5.2f} {std[i]:5.2f}",
            transform=ax.transAxes,
            fontsize=9.5,
            va="center",
            family="monospace",
        )
    return grid


def step_explorer(ex: Example | None = None) -> Explorer:
    """Pick a named tensor and the LN placement (5 x 2 = 10 frames)."""
    ex = ex or example()
    pe = tl.sinusoidal_positional_encoding(len(ex.tokens), D_MODEL)
    with torch.no_grad():
        x_pos = ex.embedding(ex.ids) + pe  # (1, T, d_model)
        tensors = {
            nf: encoder_steps(with_placement(ex.layer, nf), x_pos)
            for nf in (False, True)
        }

    def draw(fig, step, norm_first):
        return draw_step(fig, step, norm_first, tensors, ex.tokens)

    return Explorer(
        draw,
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
