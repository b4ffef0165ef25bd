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

from .figures import LiveFigure
from .interactive import Explorer

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


def _colours(block_k: int, j: int) -> tuple[np.ndarray, np.ndarray]:
    """The bars' colours (orange: this tile, blue: read, grey: not yet) and the
    values' lighter ones, after ``j`` tiles of ``block_k`` keys."""
    idx = np.arange(T_K)
    seen = min(j * block_k, T_K)
    current = (idx >= (j - 1) * block_k) & (idx < seen) if j else np.zeros(T_K, bool)
    bars = np.where(current, "#fd8d3c", np.where(idx < seen, "#3182bd", "#d9d9d9"))
    light = np.where(current, "#fd8d3c", np.where(idx < seen, "#9ecae1", "#d9d9d9"))
    return bars, light


def _bars(x: np.ndarray, heights: np.ndarray) -> list:
    """vlines' segments: one bar from 0 to each height."""
    return [[(xi, 0.0), (xi, h)] for xi, h in zip(x, heights, strict=True)]


class TilesFigure(LiveFigure):
    """Left: the scores, the tiles already read, the one being read, the running max
    m. Middle: the weight of each key so far against its final weight. Right: the
    values, the running output o / l tile after tile (and without rescaling, faint),
    the exact output. Drawn once; ``update`` moves what the tiles change."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        _, _, exact, final, sv, vv = _example(BLOCKS[0])
        idx = np.arange(T_K)
        grey = ["#d9d9d9"] * T_K

        ax1 = fig.add_axes((0.06, 0.2, 0.26, 0.62))
        # one collection per layer of the picture (vlines, hlines): a redraw stays fast
        self.scores = ax1.vlines(idx, 0, sv, colors=grey, lw=9)
        self.bounds = ax1.vlines([], -1, 3.7, colors="#999999", lw=0.6, linestyles=":")
        self.max_line = ax1.hlines([0.0], -0.5, 0.5, color="#d62728", lw=1.5)
        self.max_text = ax1.text(0, 0, "", color="#d62728", fontsize=8)
        ax1.set(xlim=(-0.6, T_K - 0.4), ylim=(-1, 3.7), xlabel="key i")
        ax1.set_xticks([0, 4, 8, 11])
        ax1.set_yticks([-1, 0, 1, 2, 3])
        ax1.set_title("scores s\u1d62 (orange: this tile), running max m", fontsize=9)
        ax1.tick_params(labelsize=7)

        ax2 = fig.add_axes((0.39, 0.2, 0.26, 0.62))
        self.weights = ax2.vlines(idx, 0, np.zeros(T_K), colors=grey, lw=9)
        final_marks = ax2.hlines(final, idx - 0.4, idx + 0.4, colors="black", lw=1.2)
        ax2.set(xlim=(-0.6, T_K - 0.4), ylim=(0, 1.0), xlabel="key i")
        ax2.set_xticks([0, 4, 8, 11])
        ax2.set_yticks([0, 0.5, 1])
        ax2.set_title(
            "weight so far e^(s\u1d62 \u2212 m) / \u2113; black: final", fontsize=9
        )
        self.ell = ax2.text(0.03, 0.92, "", transform=ax2.transAxes, fontsize=8)
        ax2.tick_params(labelsize=7)

        ax3 = fig.add_axes((0.72, 0.2, 0.26, 0.62))
        self.values = ax3.scatter(
            vv[:, 0], vv[:, 1], s=18, c=grey, marker="s", zorder=3
        )
        (self.unscaled,) = ax3.plot([], [], "-", color="#d62728", alpha=0.35, lw=1)
        (self.path,) = ax3.plot([], [], "-o", color="#3182bd", ms=3, lw=1.2)
        (self.now,) = ax3.plot([], [], "o", color="#08519c", ms=6, zorder=4)
        (star,) = ax3.plot(*exact, "*", color="black", ms=11, zorder=5)
        ax3.set(xlim=(-1.5, 1.5), ylim=(-1.5, 1.5), aspect="equal")
        ax3.set_xticks([])  # positions in the plane, no scale needed
        ax3.set_yticks([])
        ax3.set_title("output o / \u2113 after each tile; \u2605 exact", fontsize=9)
        self.status = fig.text(0.5, 0.95, " ", ha="center", fontsize=10)
        fig.text(
            0.72,
            0.05,
            "faint red: without rescaling o",
            fontsize=7,
            color="#d62728",
            alpha=0.8,
        )
        self.live(
            self.scores,
            self.bounds,
            self.max_line,
            self.max_text,
            self.weights,
            self.ell,
            self.values,
            self.unscaled,
            self.path,
            self.now,
            self.status,
        )
        # the final weights lie over the bars of the weights so far: painted with
        # them (a collection has no box to lay over); the exact output over the path
        # that reaches it
        self.live(final_marks)
        self.over(star)

    def update(self, block_k: int = 3, tiles: int = 2) -> None:
        states, wrong, exact, _, sv, _ = _example(block_k)
        n_tiles = -(-T_K // block_k)
        j = min(tiles, n_tiles)  # tiles read so far
        m, ell, o = states[j]
        seen = min(j * block_k, T_K)
        idx = np.arange(T_K)
        bars, light = _colours(block_k, j)
        self.scores.set_colors(bars)
        bounds = np.arange(block_k, T_K, block_k) - 0.5  # tile boundaries
        self.bounds.set_segments([[(b, -1.0), (b, 3.7)] for b in bounds])
        so_far = np.zeros(T_K)
        if j:
            so_far[:seen] = np.exp(sv[:seen] - m) / ell
        self.weights.set_segments(_bars(idx, so_far))
        self.weights.set_colors(bars)
        self.ell.set_text(f"\u2113 = {ell:.3f}")
        self.values.set_facecolor(light)
        for artist in (
            self.max_line,
            self.max_text,
            self.unscaled,
            self.path,
            self.now,
        ):
            artist.set_visible(bool(j))
        if j:
            self.max_line.set_segments([[(-0.5, m), (seen - 0.5, m)]])
            self.max_text.set_position((0, m + 0.12))
            self.max_text.set_text(f"m = {m:.2f}")
            path = np.array([st[2] / st[1] for st in states[1 : j + 1]])
            bad = np.array([st[2] / st[1] for st in wrong[1 : j + 1]])
            self.unscaled.set_data(bad[:, 0], bad[:, 1])
            self.path.set_data(path[:, 0], path[:, 1])
            self.now.set_data([path[-1, 0]], [path[-1, 1]])
        err = np.abs(o / ell - exact).max() if j else float("nan")
        self.status.set_text(
            "no tile read yet: m = -inf, l = 0, o = 0"
            if not j
            else f"after tile {j} of {n_tiles}: keys 0..{seen - 1} read, "
            f"largest gap to the exact output {err:.1e}"
        )


def tiles_explorer() -> Explorer:
    """Controls: the tile width block_k and how many tiles have been read."""
    return Explorer(
        TilesFigure,
        {"block_k": BLOCKS, "tiles": list(range(MAX_TILES + 1))},
        defaults={"block_k": 3, "tiles": 2},
        labels={"block_k": "keys per tile $b_k$", "tiles": "tiles read"},
        figsize=(8.6, 3.1),
        title="The online softmax, one tile of keys at a time",
    )


EXPLORERS = {"tiles": tiles_explorer}
