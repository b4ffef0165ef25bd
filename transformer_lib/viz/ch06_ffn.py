"""Chapter 6 figure: a feed-forward network with a 1-D input, seen as a sum of bent
lines.

With d_model = 1, FFN(x) = sum_k W2[k] act(W1[k] x + b1[k]) + b2 maps numbers to
numbers. Each hidden unit contributes one hinge (ReLU) or one smooth hinge (GELU) at
x = -b1[k] / W1[k]. ``hinge_explorer()`` (:class:`HingeFigure`) draws the target, the
network fitted by :func:`transformer_lib.demos.ffn_curve_fit.fitted_ffn` and every
unit.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import torch
from matplotlib.collections import LineCollection

import transformer_lib as tl

from ..demos.ffn_curve_fit import TARGETS, X_RANGE, fitted_ffn
from .figures import LiveFigure
from .interactive import Explorer

ACTIVATIONS, D_FFS = ["relu", "gelu"], [1, 2, 4, 8, 16, 32]


@cache
def fitted_curves(d_ff: int, activation: str, target: str) -> dict[str, np.ndarray]:
    """The fitted FFN on its grid (computed once per setting): the inputs "x", the
    network's output "y", the hidden units "hidden" (N, d_ff) and the bends "knots"."""
    ffn, x = fitted_ffn(d_ff, activation, target)
    xs = torch.as_tensor(x, dtype=torch.float32).view(-1, 1)  # (N, d_model = 1)
    act = tl.feed_forward.ACTIVATIONS[activation]
    with torch.no_grad():
        y = ffn(xs).view(-1).numpy()  # the network itself, eq. ffn with d_model = 1
        hidden = act(ffn.linear1(xs)).numpy()  # (N, d_ff): h_k(x) = act(x - knot_k)
    knots = -ffn.linear1.bias.detach().numpy()
    return {"x": x, "y": y, "hidden": hidden, "knots": knots}


class HingeFigure(LiveFigure):
    """Top: the target, the fitted FFN and its bends. Bottom: every hidden unit
    h_k(x)."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        ax, parts = fig.subplots(
            2, 1, gridspec_kw={"height_ratios": [3, 2], "hspace": 0.08}
        )
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.11, top=0.91)
        self.target = ax.plot([], [], color="0.6", lw=4, label="target")[0]
        self.net = ax.plot([], [], color="C0", lw=2, label="FFN(x)")[0]
        self.knots = ax.plot(
            [], [], "o", color="C3", ms=4, label="bends, x = -b\u2081[k]"
        )[0]
        self.title = fig.text(0.5, 0.95, "", fontsize=10, ha="center")
        legend = ax.legend(
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
        ax.set_xticks([])  # the x axis is labelled below
        ax.set_yticks([-1, 0, 1, 2, 3])
        self.units = LineCollection([], linewidths=0.9, alpha=0.8)
        parts.add_collection(self.units)
        parts.set_ylabel("hidden units", fontsize=8)
        parts.set_xlabel("input x")
        parts.set_ylim(-0.5, 6.2)
        parts.set_xlim(*X_RANGE)
        parts.set_xticks(range(-3, 4))
        parts.set_yticks([0, 3, 6])
        zero = parts.axhline(0, color="0.8", lw=0.8)  # over the units, as drawn
        self.live(self.target, self.net, self.knots, self.title)
        self.over(legend)  # over the lines
        self.live(self.units, zero)

    def update(
        self, activation: str = "relu", d_ff: int = 4, target: str = "sin(2x)"
    ) -> None:
        c = fitted_curves(d_ff, activation, target)
        x, y, knots = c["x"], c["y"], c["knots"]
        want = TARGETS[target](x)
        self.target.set_data(x, want)
        self.net.set_data(x, y)
        self.knots.set_data(knots, np.interp(knots, x, y))
        err = np.abs(y - want).max()
        units = f"{d_ff} {activation.upper()} unit{'s' if d_ff > 1 else ''}"
        self.title.set_text(f"{units}: largest error {err:.2f}")
        self.units.set_segments(
            [np.column_stack([x, c["hidden"][:, k]]) for k in range(d_ff)]
        )
        self.units.set_colors([f"C{k % 10}" for k in range(d_ff)])


def hinge_explorer() -> Explorer:
    """Activation, hidden width and target curve of a 1-D FFN (24 frames)."""
    for setting in itertools.product(D_FFS, ACTIVATIONS, TARGETS):
        fitted_curves(*setting)  # fitted once: a redraw only draws
    return Explorer(
        HingeFigure,
        {"activation": ACTIVATIONS, "d_ff": D_FFS, "target": list(TARGETS)},
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
