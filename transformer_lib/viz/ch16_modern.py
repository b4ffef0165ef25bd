"""Chapter 16 figures: the pieces of the modern (Llama-style) block.

``rope_layout_explorer()`` draws RoPE as the d x d matrix it multiplies a head's query
or key by, read off ``tl.apply_rope`` itself, in the interleaved layout, in the half
layout, and in the half layout seen through ``tl.rope_permutation`` (where it becomes
the interleaved matrix again). ``norm_explorer()`` feeds one vector, shifted and
scaled, to LayerNorm and to RMSNorm side by side.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

import transformer_lib as tl

from .explorer import Explorer, heatmap

# -- RoPE as a matrix ------------------------------------------------------------------
ROPE_D = 8  # 4 pairs: small enough to read every cell
ROPE_BASE = (
    10.0  # a small base, so that every pair visibly turns within a few positions
)
ROPE_POSITIONS = [0, 1, 2, 3, 5, 8, 13]
ROPE_VIEWS = ["interleaved", "half", "half, reordered by perm"]


@cache
def rope_matrix(m: int, layout: str, d: int = ROPE_D, base: float = ROPE_BASE):
    """R (d, d) with RoPE(x, m) = R x for every x, read off ``tl.apply_rope``: column j
    is the rotated j-th basis vector."""
    eye = torch.eye(
        d, dtype=torch.float64
    )  # row j = e_j, as d "positions" of one token
    rotated = tl.apply_rope(
        eye[:, None, :], torch.tensor([m]), base, layout
    )  # (d, 1, d)
    return rotated[:, 0, :].T.numpy()  # (d, d): column j = RoPE(e_j, m)


def draw_rope_matrix(fig, view: str = "interleaved", m: int = 1) -> object:
    """One view of R(m): see the module docstring."""
    # half-layout feature inv[a] is interleaved feature a: pair (2i, 2i+1) -> (i, i+d/2)
    inv = np.argsort(tl.rope_permutation(ROPE_D).numpy())
    if view == "half, reordered by perm":
        R = rope_matrix(m, "half")[np.ix_(inv, inv)]  # the half matrix, reordered
        names = [str(j) for j in inv]
    else:
        R = rope_matrix(m, view)
        names = [str(j) for j in range(ROPE_D)]
    inter = rope_matrix(m, "interleaved")
    ax = fig.add_axes((0.13, 0.14, 0.6, 0.68))
    grid = heatmap(
        ax,
        R,
        names,
        names,
        cmap="RdBu_r",
        vmin=-1.0,
        vmax=1.0,
        row_name=f"output feature ({'half' if view != 'interleaved' else view} layout)",
        col_name=f"input feature ({'half' if view != 'interleaved' else view} layout)",
        colorbar=False,
    )
    for (i, j), v in np.ndenumerate(R):  # print the non-zero cells only
        if abs(v) > 1e-12:
            colour = "white" if abs(v) > 0.6 else "black"
            ax.text(
                j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color=colour
            )
    pairs = (
        [(2 * i, 2 * i + 1) for i in range(ROPE_D // 2)]
        if view == "interleaved"
        else [(i, i + ROPE_D // 2) for i in range(ROPE_D // 2)]
    )
    note = ", ".join(f"({a}, {b})" for a, b in pairs)
    if view == "half, reordered by perm":
        gap = np.abs(R - inter).max()
        text = (
            f"the half layout's features\nin the order\n({', '.join(names)})\n"
            f"max |this - interleaved|\n= {gap:.1g}: the same matrix"
        )
    else:
        text = f"pairs that rotate together:\n{note}"
    fig.text(0.76, 0.5, text, fontsize=8, va="center", wrap=True)
    fig.suptitle(
        f"RoPE at position m = {m} as a matrix ({view}; d = {ROPE_D}, "
        f"base = {ROPE_BASE:g})",
        fontsize=10,
        y=0.95,
    )
    return grid


def rope_layout_explorer() -> Explorer:
    """Controls: the layout (or the reordered half layout) and the position m."""
    for m in ROPE_POSITIONS:
        for layout in tl.positional.ROPE_LAYOUTS:
            rope_matrix(m, layout)  # compute once; a redraw only plots
    return Explorer(
        draw_rope_matrix,
        {"view": ROPE_VIEWS, "m": ROPE_POSITIONS},
        defaults={"m": 2},
        labels={"view": "layout", "m": "position $m$"},
        figsize=(7.2, 4.6),
        title="RoPE as a matrix: interleaved pairs, half pairs, and the permutation "
        "between them",
    )


# -- LayerNorm against RMSNorm ---------------------------------------------------------
NORM_D = 12
SHIFTS = [-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0]
SCALES = [0.1, 1.0, 10.0]


@cache
def _base_vector() -> np.ndarray:
    """A fixed centred vector of unit RMS, (NORM_D,)."""
    z = torch.randn(
        NORM_D, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    z = z - z.mean()
    return (z / z.pow(2).mean().sqrt()).numpy()


def norm_outputs(shift: float, scale: float) -> dict[str, np.ndarray]:
    """The input scale * (z + shift) and its LayerNorm and RMSNorm (gamma 1, beta 0)."""
    x = torch.from_numpy(scale * (_base_vector() + shift))
    ones = torch.ones(NORM_D, dtype=torch.float64)
    return {
        "input": x.numpy(),
        "LayerNorm": tl.layer_norm(x, ones, torch.zeros_like(ones), 1e-6).numpy(),
        "RMSNorm": tl.rms_norm(x, ones, 1e-6).numpy(),
    }


def draw_norms(fig, shift: float = 0.0, scale: float = 1.0) -> None:
    """Three bar charts: the input vector, its LayerNorm, its RMSNorm."""
    out = norm_outputs(shift, scale)
    axes = fig.subplots(1, 3, sharex=True)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.15, top=0.78, wspace=0.35)
    colours = {"input": "#7f7f7f", "LayerNorm": "#1f77b4", "RMSNorm": "#d62728"}
    j = np.arange(NORM_D)
    for ax, (name, v) in zip(axes, out.items(), strict=True):
        ax.bar(j, v, color=colours[name], width=0.8)
        ax.axhline(0, color="black", lw=0.6)
        lim = 4.0 if name != "input" else max(4.0, 1.1 * np.abs(v).max())
        ax.set_ylim(-lim, lim)
        ax.set_xticks([0, NORM_D - 1])
        ax.set_xlabel("feature")
        ax.set_title(
            f"{name}\nmean {v.mean():+.2f}, RMS {np.sqrt((v**2).mean()):.2f}",
            fontsize=9,
        )
    fig.suptitle(
        f"input = {scale:g} · (z + {shift:g}), z centred with RMS 1",
        fontsize=10,
        y=0.97,
    )


def norm_explorer() -> Explorer:
    """Controls: a shift added to every feature, and a common scale."""
    return Explorer(
        draw_norms,
        {"shift": SHIFTS, "scale": SCALES},
        defaults={"shift": 0.0, "scale": 1.0},
        labels={"shift": "shift $c$", "scale": "scale $s$"},
        figsize=(8.4, 3.2),
        dpi=80,
        title="LayerNorm and RMSNorm of the same vector, shifted and scaled",
    )


EXPLORERS = {"rope_layout": rope_layout_explorer, "norms": norm_explorer}
