"""Chapter 13 figure: the online softmax of one query, one tile of keys at a time.

``tiles_explorer()`` steps one query through its keys, ``block_k`` keys per tile, with
the library's own update, ``tl.flash.online_attention_step`` (eq. flash-update). Left:
the scores, the tiles already read, the one being read, and the running max m. Middle:
the weight each key has so far, e^{s_i - m} / l, against its final softmax weight.
Right: the values v_i (d_v = 2, points in the plane), the running output o / l tile
after tile, and the exact attention output it ends on; a faint line shows where the
output goes when the running output is not rescaled (a classic mistake).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

import transformer_lib as tl
from transformer_lib import flash

from .explorer import Explorer

T_K = 12
BLOCKS = [2, 3, 4, 6]
MAX_TILES = T_K // min(BLOCKS)
# a query whose largest scores come late, so the running max grows several times
_SCORES = [0.4, -0.6, 1.1, 0.2, 2.0, 1.3, -0.2, 0.9, 3.1, 0.0, 1.8, 2.6]


def example_row() -> tuple[torch.Tensor, torch.Tensor]:
    """One query's scaled scores s (T_k,) and the values V (T_k, 2) it averages."""
    s = torch.tensor(_SCORES, dtype=torch.float64)
    angles = torch.linspace(0.2, 2 * np.pi - 0.4, T_K, dtype=torch.float64)
    radii = 1.0 + 0.35 * torch.cos(3 * angles)
    values = torch.stack([radii * torch.cos(angles), radii * torch.sin(angles)], 1)
    return s, values


def tile_states(
    s: torch.Tensor, v: torch.Tensor, block_k: int, rescale: bool = True
) -> list[tuple[float, float, np.ndarray]]:
    """(m, l, o) before any tile and after each tile of ``block_k`` keys, for one query
    row s (T_k,) over values v (T_k, d_v), with tl.flash.online_attention_step.
    ``rescale=False`` is the mistake of never multiplying o by e^{m_old - m_new}."""
    m = torch.full((1,), float("-inf"), dtype=s.dtype)
    ell = torch.zeros(1, dtype=s.dtype)
    o = torch.zeros(1, v.size(1), dtype=s.dtype)
    states = [(float(m), float(ell), o[0].numpy().copy())]
    for j0 in range(0, s.numel(), block_k):
        tile, v_tile = s[None, j0 : j0 + block_k], v[j0 : j0 + block_k]
        m_new, ell, o_new = flash.online_attention_step(m, ell, o, tile, v_tile)
        if not rescale:  # what o would be without the factor e^{m_old - m_new}
            p = torch.exp(tile - m_new.unsqueeze(-1))  # (1, b)
            o_new = o + p @ v_tile
        m, o = m_new, o_new
        states.append((float(m), float(ell), o[0].numpy().copy()))
    return states


@functools.cache
def _example(block_k: int) -> tuple:
    """Everything the figure draws for one tile width, computed once."""
    s, v = example_row()
    return (
        tile_states(s, v, block_k),
        tile_states(s, v, block_k, rescale=False),
        (tl.softmax(s) @ v).numpy(),  # eq. attention, all at once
        tl.softmax(s).numpy(),
        s.numpy(),
        v.numpy(),
    )


def draw_tiles(fig, block_k: int = 3, tiles: int = 2) -> None:
    states, wrong, exact, final, sv, vv = _example(block_k)
    n_tiles = -(-T_K // block_k)
    j = min(tiles, n_tiles)  # tiles read so far
    m, ell, o = states[j]
    seen = min(j * block_k, T_K)
    idx = np.arange(T_K)
    current = (idx >= (j - 1) * block_k) & (idx < seen) if j else np.zeros(T_K, bool)
    colours = np.where(current, "#fd8d3c", np.where(idx < seen, "#3182bd", "#d9d9d9"))

    # one collection per layer of the picture (vlines, hlines): a redraw stays fast
    ax1 = fig.add_axes((0.06, 0.2, 0.26, 0.62))
    ax1.vlines(idx, 0, sv, colors=colours, lw=9)
    bounds = np.arange(block_k, T_K, block_k) - 0.5  # tile boundaries
    ax1.vlines(bounds, -1, 3.7, colors="#999999", lw=0.6, linestyles=":")
    if j:
        ax1.hlines(m, -0.5, seen - 0.5, color="#d62728", lw=1.5)
        ax1.text(0, m + 0.12, f"m = {m:.2f}", color="#d62728", fontsize=8)
    ax1.set(xlim=(-0.6, T_K - 0.4), ylim=(-1, 3.7), xlabel="key i")
    ax1.set_xticks([0, 4, 8, 11])
    ax1.set_yticks([-1, 0, 1, 2, 3])
    ax1.set_title("scores s\u1d62 (orange: this tile), running max m", fontsize=9)
    ax1.tick_params(labelsize=7)

    ax2 = fig.add_axes((0.39, 0.2, 0.26, 0.62))
    so_far = np.zeros(T_K)
    if j:
        so_far[:seen] = np.exp(sv[:seen] - m) / ell
    ax2.vlines(idx, 0, so_far, colors=colours, lw=9)
    ax2.hlines(final, idx - 0.4, idx + 0.4, colors="black", lw=1.2)
    ax2.set(xlim=(-0.6, T_K - 0.4), ylim=(0, 1.0), xlabel="key i")
    ax2.set_xticks([0, 4, 8, 11])
    ax2.set_yticks([0, 0.5, 1])
    ax2.set_title(
        "weight so far e^(s\u1d62 \u2212 m) / \u2113; black: final", fontsize=9
    )
    ax2.text(0.03, 0.92, f"\u2113 = {ell:.3f}", transform=ax2.transAxes, fontsize=8)
    ax2.tick_params(labelsize=7)

    ax3 = fig.add_axes((0.72, 0.2, 0.26, 0.62))
    light = np.where(current, "#fd8d3c", np.where(idx < seen, "#9ecae1", "#d9d9d9"))
    ax3.scatter(vv[:, 0], vv[:, 1], s=18, c=light, marker="s", zorder=3)
    path = np.array([st[2] / st[1] for st in states[1 : j + 1]])
    bad = np.array([st[2] / st[1] for st in wrong[1 : j + 1]])
    if j:
        ax3.plot(bad[:, 0], bad[:, 1], "-", color="#d62728", alpha=0.35, lw=1)
        ax3.plot(path[:, 0], path[:, 1], "-o", color="#3182bd", ms=3, lw=1.2)
        ax3.plot(*path[-1], "o", color="#08519c", ms=6, zorder=4)
    ax3.plot(*exact, "*", color="black", ms=11, zorder=5)
    ax3.set(xlim=(-1.5, 1.5), ylim=(-1.5, 1.5), aspect="equal")
    ax3.set_xticks([])  # positions in the plane, no scale needed
    ax3.set_yticks([])
    ax3.set_title("output o / \u2113 after each tile; \u2605 exact", fontsize=9)
    err = np.abs(o / ell - exact).max() if j else float("nan")
    status = (
        "no tile read yet: m = -inf, l = 0, o = 0"
        if not j
        else f"after tile {j} of {n_tiles}: keys 0..{seen - 1} read, "
        f"largest gap to the exact output {err:.1e}"
    )
    fig.text(0.5, 0.95, status, ha="center", fontsize=10)
    fig.text(
        0.72,
        0.05,
        "faint red: without rescaling o",
        fontsize=7,
        color="#d62728",
        alpha=0.8,
    )


def tiles_explorer() -> Explorer:
    """Controls: the tile width block_k and how many tiles have been read."""
    return Explorer(
        draw_tiles,
        {"block_k": BLOCKS, "tiles": list(range(MAX_TILES + 1))},
        defaults={"block_k": 3, "tiles": 2},
        labels={"block_k": "keys per tile $b_k$", "tiles": "tiles read"},
        figsize=(8.6, 3.1),
        title="The online softmax, one tile of keys at a time",
    )


EXPLORERS = {"tiles": tiles_explorer}
