"""Chapter 3 figures: softmax with a temperature, and the output as a convex combination of values.

Both figures use one fixed head over a six-word sentence: scores S (standing in for
Q K^T / sqrt(d_k)) and two-dimensional values V, so that every output z_i = sum_j A_ij v_j
(eq. weighted-sum) can be drawn in the plane, inside the convex hull of the values.
"""

from __future__ import annotations

import numpy as np
import torch

import transformer_lib as tl

from .explorer import Explorer, HoverGrid, heatmap

WORDS = ["my", "dog", "chased", "the", "red", "ball"]
TAUS = [0.1, 0.3, 1, 3, 10, 100]


def sentence_scores(seed: int = 1) -> torch.Tensor:
    """A fixed (T, T) score matrix: scaled scores Q K^T / sqrt(d_k) of random q, k with d_k = 8, times 2."""
    g = torch.Generator().manual_seed(seed)
    q, k = (
        torch.randn(len(WORDS), 8, generator=g),
        torch.randn(len(WORDS), 8, generator=g),
    )
    return 2 * tl.attention_scores(q, k)  # (T, T)


def sentence_values() -> torch.Tensor:
    """V (T, d_v = 2): one point in the plane per word, all of them corners of their convex hull."""
    angles = torch.tensor(
        [0.3, 1.25, 2.2, 3.2, 4.2, 5.3]
    )  # increasing: the hull is the polygon in this order
    radii = torch.tensor([1.0, 0.8, 1.1, 0.9, 1.0, 0.85])
    return torch.stack(
        [radii * torch.cos(angles), radii * torch.sin(angles)], dim=1
    )  # (T, 2)


_S = sentence_scores()
_V = sentence_values()


def tempered_weights(tau: float) -> torch.Tensor:
    """A = softmax(S / tau), row by row   (eq. temperature)."""
    return tl.softmax(_S / tau, dim=-1)  # (T, T)


def draw_temperature(fig, tau: float = 1) -> HoverGrid:
    """The attention map softmax(S / tau); each row's largest weight printed."""
    weights = tempered_weights(tau)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.15, right=0.86, bottom=0.19, top=0.9)
    grid = heatmap(
        ax,
        weights.numpy(),
        WORDS,
        WORDS,
        colorbar="light",
        annotate="rowmax",
        title=f"A = softmax(S / \u03c4),  \u03c4 = {tau:g}",
    )
    return grid


def temperature_explorer() -> Explorer:
    """Slide the temperature from nearly argmax (tau = 0.1) to nearly uniform (tau = 100)."""
    return Explorer(
        draw_temperature,
        {"tau": TAUS},
        defaults={"tau": 1},
        labels={"tau": r"temperature $\tau$"},
        figsize=(6, 4),
        title="Temperature: from a hard choice to an even average",
    )


def draw_hull(fig, tau: float = 1, query: str = "dog") -> None:
    """Values (coloured corners), their convex hull, every output z_i (dots), and the chosen query's
    output with a line to each value whose width is that value's weight."""
    weights = tempered_weights(tau)
    Z = weights @ _V  # (T, T) @ (T, 2) -> (T, 2)   eq. weighted-sum
    V = _V.numpy()
    i = WORDS.index(query)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.9)
    ax.fill(
        V[:, 0], V[:, 1], color="#dde6f3", zorder=0
    )  # the hull: the values are its corners, in order
    for j, w in enumerate(weights[i].tolist()):
        ax.plot(
            [Z[i, 0], V[j, 0]],
            [Z[i, 1], V[j, 1]],
            color="#c0392b",
            lw=0.3 + 6 * w,
            alpha=0.6,
            zorder=1,
        )
    ax.scatter(V[:, 0], V[:, 1], s=60, c=[f"C{j}" for j in range(len(WORDS))], zorder=2)
    others = [r for r in range(len(WORDS)) if r != i]
    ax.scatter(Z[others, 0], Z[others, 1], s=14, c="#555555", zorder=3)
    ax.scatter(Z[i, 0], Z[i, 1], s=90, marker="*", c="#c0392b", zorder=4)
    for j, word in enumerate(WORDS):
        ax.text(
            *(V[j] * (1 + 0.22 / np.linalg.norm(V[j]))),
            f"v({word})",
            ha="center",
            va="center",
            fontsize=9,
        )
    ax.text(
        Z[i, 0],
        Z[i, 1] - 0.13,
        f"z({query})",
        ha="center",
        va="top",
        fontsize=9,
        color="#c0392b",
        weight="bold",
    )
    ax.set_xlim(-1.5, 1.5)
    ax.set_ylim(-1.35, 1.35)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        f"\u03c4 = {tau:g}: z({query}) (star) and the other outputs (dots)", fontsize=10
    )


def hull_explorer() -> Explorer:
    """Every output lies inside the hull of the values; the temperature moves it between a corner and the centre."""
    return Explorer(
        draw_hull,
        {"tau": TAUS, "query": WORDS},
        defaults={"tau": 1, "query": "dog"},
        labels={"tau": r"temperature $\tau$", "query": "query"},
        figsize=(5, 4),
        title="Each output is a weighted average of the values",
    )


EXPLORERS = {"temperature": temperature_explorer, "hull": hull_explorer}
