"""Chapter 6 figures: a feed-forward network with a 1-D input, seen as a sum of bent lines.

With d_model = 1, FFN(x) = sum_k W2[k] act(W1[k] x + b1[k]) + b2 maps numbers to numbers.
Each hidden unit contributes one hinge (ReLU) or one smooth hinge (GELU) at
x = -b1[k] / W1[k]. ``hinge_explorer()`` draws the target, the network fitted by
:func:`transformer_lib.demos.ffn_curve_fit.fitted_ffn` and every unit.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.collections import LineCollection

import transformer_lib as tl

from ..demos.ffn_curve_fit import TARGETS, X_RANGE, fitted_ffn
from .explorer import Explorer

def draw_hinges(fig, activation: str = "relu", d_ff: int = 4, target: str = "sin(2x)"):
    """Top: the target, the fitted FFN and its bends. Bottom: every hidden unit h_k(x)."""
    ffn, x = fitted_ffn(d_ff, activation, target)
    xs = torch.as_tensor(x, dtype=torch.float32).view(-1, 1)
    with torch.no_grad():
        y = ffn(xs).view(-1).numpy()  # the network itself, eq. ffn with d_model = 1
        act = tl.feed_forward.ACTIVATIONS[activation]
        hidden = act(ffn.linear1(xs)).numpy()  # (N, d_ff): h_k(x) = act(x - knot_k)
    want = TARGETS[target](x)
    ax, ax_parts = fig.subplots(
        2, 1, gridspec_kw={"height_ratios": [3, 2], "hspace": 0.08}
    )
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.11, top=0.91)
    ax.plot(x, want, color="0.6", lw=4, label="target")
    ax.plot(x, y, color="C0", lw=2, label="FFN(x)")
    knots = -ffn.linear1.bias.detach().numpy()
    ax.plot(
        knots,
        np.interp(knots, x, y),
        "o",
        color="C3",
        ms=4,
        label="bends, x = -b\u2081[k]",
    )
    err = np.abs(y - want).max()
    units = f"{d_ff} {activation.upper()} unit{'s' if d_ff > 1 else ''}"
    fig.text(0.5, 0.95, f"{units}: largest error {err:.2f}", fontsize=10, ha="center")
    ax.legend(
        loc="upper center",
        ncol=3,
        fontsize=7.5,
        frameon=False,
        handlelength=1.5,
        columnspacing=1.2,
    )
    ax.set_ylabel("output")
    ax.set_ylim(-1.6, 3.4)  # the top band holds the legend
    ax.set_xlim(*X_RANGE)
    ax.set_xticks([])  # the x axis is labelled below (explicit ticks keep redraws fast)
    ax.set_yticks([-1, 0, 1, 2, 3])
    segments = [np.column_stack([x, hidden[:, k]]) for k in range(d_ff)]
    colours = [f"C{k % 10}" for k in range(d_ff)]
    ax_parts.add_collection(
        LineCollection(segments, colors=colours, linewidths=0.9, alpha=0.8)
    )
    ax_parts.set_ylabel("hidden units", fontsize=8)
    ax_parts.set_xlabel("input x")
    ax_parts.set_ylim(-0.5, 6.2)
    ax_parts.set_xlim(*X_RANGE)
    ax_parts.set_xticks(range(-3, 4))
    ax_parts.set_yticks([0, 3, 6])
    ax_parts.axhline(0, color="0.8", lw=0.8)
    return None


def hinge_explorer() -> Explorer:
    """Activation, hidden width and target curve of a 1-D FFN (24 frames)."""
    return Explorer(
        draw_hinges,
        {
            "activation": ["relu", "gelu"],
            "d_ff": [1, 2, 4, 8, 16, 32],
            "target": list(TARGETS),
        },
        defaults={"d_ff": 4},
        labels={
            "activation": "activation",
            "d_ff": "hidden units $d_{ff}$",
            "target": "target",
        },
        figsize=(6.0, 4.4),
        dpi=80,
        title="A feed-forward network on one number: each hidden unit adds one bend",
    )


EXPLORERS = {"hinges": hinge_explorer}
