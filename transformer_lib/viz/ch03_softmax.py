"""Chapter 3 figures: softmax with a temperature, and the output as a convex combination
of the values.

Both figures use one fixed head over a six-word sentence: scores S (standing in for
Q K^T / sqrt(d_k)) and two-dimensional values V, so that every output
z_i = sum_j A_ij v_j (eq. weighted-sum) can be drawn in the plane, inside the convex
hull of the values. ``temperature_explorer()`` draws :class:`TemperatureFigure`,
``hull_explorer()`` :class:`HullFigure`.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

import transformer_lib as tl

from .figures import LiveFigure, MapFigure
from .heatmap import HoverGrid
from .interactive import Explorer

WORDS = ["my", "dog", "chased", "the", "red", "ball"]
TAUS = [0.1, 0.3, 1, 3, 10, 100]


def sentence_scores(seed: int = 1) -> torch.Tensor:
    """A fixed (T, T) score matrix: the scaled scores Q K^T / sqrt(d_k) of random q, k
    with d_k = 8, times 2."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(len(WORDS), 8, generator=g)
    k = torch.randn(len(WORDS), 8, generator=g)
    return 2 * tl.attention_scores(q, k)  # (T, T)


def sentence_values() -> torch.Tensor:
    """V (T, d_v = 2): one point in the plane per word, all of them corners of their
    convex hull."""
    # increasing angles: the hull is the polygon in this order
    angles = torch.tensor([0.3, 1.25, 2.2, 3.2, 4.2, 5.3])
    radii = torch.tensor([1.0, 0.8, 1.1, 0.9, 1.0, 0.85])
    return torch.stack([radii * torch.cos(angles), radii * torch.sin(angles)], dim=1)


_S = sentence_scores()
_V = sentence_values()


@cache
def tempered_weights(tau: float) -> torch.Tensor:
    """A = softmax(S / tau), row by row   (eq. temperature)."""
    return tl.softmax(_S / tau, dim=-1)  # (T, T)


class TemperatureFigure(MapFigure):
    """The attention map softmax(S / tau); each row's largest weight printed."""

    def __init__(self, fig) -> None:
        super().__init__(fig, WORDS, WORDS, margins=(0.15, 0.86, 0.19, 0.9))

    def update(self, tau: float = 1) -> HoverGrid:
        title = f"A = softmax(S / \u03c4),  \u03c4 = {tau:g}"
        return self.show(tempered_weights(tau).numpy(), title)


def temperature_explorer() -> Explorer:
    """Slide the temperature from nearly argmax (tau = 0.1) to nearly uniform
    (tau = 100)."""
    for tau in TAUS:  # the weights, computed once: a redraw only draws
        tempered_weights(tau)
    return Explorer(
        TemperatureFigure,
        {"tau": TAUS},
        defaults={"tau": 1},
        labels={"tau": r"temperature $\tau$"},
        figsize=(6, 4),
        title="Temperature: from a hard choice to an even average",
    )


class HullFigure(LiveFigure):
    """The values (coloured corners) and their convex hull, every output z_i (dots),
    and the chosen query's output (star) with a line to each value whose width is
    that value's weight."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        V = _V.numpy()
        T = len(WORDS)
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.9)
        ax.fill(
            V[:, 0], V[:, 1], color="#dde6f3", zorder=0
        )  # the hull, corners in order
        self.spokes = [
            ax.plot([], [], color="#c0392b", alpha=0.6, zorder=1)[0] for _ in range(T)
        ]
        # the values, drawn again over the spokes
        corners = ax.scatter(V[:, 0], V[:, 1], s=60, c=[f"C{j}" for j in range(T)])
        corners.set_zorder(2)
        self.others = ax.scatter(np.zeros(T - 1), np.zeros(T - 1), s=14, c="#555555")
        self.others.set_zorder(3)
        self.star = ax.scatter([0], [0], s=90, marker="*", c="#c0392b", zorder=4)
        for j, word in enumerate(WORDS):
            x, y = V[j] * (1 + 0.22 / np.linalg.norm(V[j]))
            ax.text(x, y, f"v({word})", ha="center", va="center", fontsize=9)
        self.label = ax.text(
            0, 0, "", ha="center", va="top", fontsize=9, color="#c0392b", weight="bold"
        )
        ax.set_xlim(-1.5, 1.5)
        ax.set_ylim(-1.35, 1.35)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(" ", fontsize=10)
        self.live(*self.spokes, corners, self.others, self.star, self.label, ax.title)

    def update(self, tau: float = 1, query: str = "dog") -> None:
        weights = tempered_weights(tau)
        Z = (weights @ _V).numpy()  # (T, T) @ (T, 2) -> (T, 2)   eq. weighted-sum
        V = _V.numpy()
        i = WORDS.index(query)
        for j, (line, w) in enumerate(
            zip(self.spokes, weights[i].tolist(), strict=True)
        ):
            line.set_data([Z[i, 0], V[j, 0]], [Z[i, 1], V[j, 1]])
            line.set_linewidth(0.3 + 6 * w)
        self.others.set_offsets(np.delete(Z, i, axis=0))
        self.star.set_offsets(Z[i : i + 1])
        self.label.set_position((Z[i, 0], Z[i, 1] - 0.13))
        self.label.set_text(f"z({query})")
        self.star.axes.set_title(
            f"\u03c4 = {tau:g}: z({query}) (star) and the other outputs (dots)",
            fontsize=10,
        )


def hull_explorer() -> Explorer:
    """Every output lies inside the hull of the values; the temperature moves it
    between a corner and the centre."""
    return Explorer(
        HullFigure,
        {"tau": TAUS, "query": WORDS},
        defaults={"tau": 1, "query": "dog"},
        labels={"tau": r"temperature $\tau$", "query": "query"},
        figsize=(5, 4),
        title="Each output is a weighted average of the values",
    )


EXPLORERS = {"temperature": temperature_explorer, "hull": hull_explorer}
