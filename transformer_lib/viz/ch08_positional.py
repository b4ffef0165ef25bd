"""Chapter 8 figures: the sinusoidal positional encoding and rotary position embeddings (RoPE).

``sinusoid_explorer()`` shows one sin/cos pair of the encoding over positions and as a point going
round the unit circle; ``pe_heatmap_explorer()`` the whole (T, d_model) table;
``pe_similarity_explorer()`` the dot product PE(p) . PE(p + k) against the offset k;
``rope_explorer()`` the RoPE score q_m . k_n against the distance m - n.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch

import transformer_lib as tl

from .explorer import Explorer

BASE = 10000.0
SIN_C, COS_C = "#1f77b4", "#d62728"


def frequencies(d_model: int, base: float = BASE) -> np.ndarray:
    """omega_i = base^(-2i/d_model) for the pairs i = 0 .. d_model/2 - 1   (eq. pe-freq)."""
    return base ** (-np.arange(0, d_model, 2) / d_model)


@cache
def pe_table(T: int, d_model: int) -> np.ndarray:
    """tl.sinusoidal_positional_encoding(T, d_model) as float64 NumPy, computed once per shape."""
    return tl.sinusoidal_positional_encoding(T, d_model, dtype=torch.float64).numpy()


# -- one sin/cos pair ---------------------------------------------------------------------------------
SIN_D_MODEL = 64
PAIRS = [0, 2, 8, 31]
RANGES = [64, 1024]


def draw_sinusoids(fig, i: int = 2, T: int = 64, d_model: int = SIN_D_MODEL) -> None:
    """Columns 2i (sin) and 2i+1 (cos) of the encoding over positions 0..T-1, and the same pair as a
    point (PE[pos, 2i], PE[pos, 2i+1]) on the unit circle, turning by omega_i per position."""
    pe = pe_table(T, d_model)  # (T, d_model)
    w = frequencies(d_model)[i]
    ax, axc = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.6, 1]})
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.84, wspace=0.25)
    pos = np.arange(T)
    if T <= 100:  # few positions: the integer samples as dots on the continuous curves
        smooth = np.linspace(0, T - 1, 200)
        ax.plot(smooth, np.sin(w * smooth), color=SIN_C, lw=0.8, alpha=0.5)
        ax.plot(smooth, np.cos(w * smooth), color=COS_C, lw=0.8, alpha=0.5)
        style = dict(ls="none", marker="o", ms=3)
    else:  # many positions: the samples joined by lines
        style = dict(lw=0.9)
    ax.plot(
        pos, pe[:, 2 * i], color=SIN_C, label=f"PE[pos, {2 * i}] = sin(ω·pos)", **style
    )
    ax.plot(
        pos,
        pe[:, 2 * i + 1],
        color=COS_C,
        label=f"PE[pos, {2 * i + 1}] = cos(ω·pos)",
        **style,
    )
    ax.set_ylim(-1.15, 1.5)
    ax.set_xlabel("position pos")
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    ax.axhline(0, color="#bbbbbb", lw=0.6)
    ax.set_title(
        f"pair i = {i} of d_model = {d_model}: ω = 10000^(−{2 * i}/{d_model}) = {w:.3g}\n"
        f"one full period (wavelength 2π/ω) = {2 * math.pi / w:,.1f} positions",
        fontsize=9,
        y=1.01,
    )
    t = np.linspace(0, 2 * math.pi, 200)
    axc.plot(np.cos(t), np.sin(t), color="#cccccc", lw=0.8)
    shown = pos[: min(T, 64)]
    axc.scatter(
        pe[shown, 2 * i], pe[shown, 2 * i + 1], c=shown, cmap="viridis", s=9, zorder=3
    )
    for p in (0, 1, 2):
        axc.annotate(
            str(p),
            (pe[p, 2 * i], pe[p, 2 * i + 1]),
            textcoords="offset points",
            xytext=(4, 3),
            fontsize=7,
        )
    axc.set_aspect("equal")
    axc.set_xlim(-1.25, 1.25)
    axc.set_ylim(-1.25, 1.25)
    axc.set_xlabel(f"PE[pos, {2 * i}]", fontsize=8)
    axc.set_ylabel(f"PE[pos, {2 * i + 1}]", fontsize=8)
    axc.set_xticks([])
    axc.set_yticks([])
    axc.set_title(
        f"positions 0–{shown[-1]}: one step\nturns the point by ω rad",
        fontsize=8,
        y=1.01,
    )


def sinusoid_explorer() -> Explorer:
    """Pick the pair i: fast pairs wrap many times over the sequence, slow pairs barely move."""
    for T in RANGES:
        pe_table(T, SIN_D_MODEL)  # compute the tables once; a redraw only plots
    return Explorer(
        draw_sinusoids,
        {"i": PAIRS, "T": RANGES},
        defaults={"i": 2},
        labels={"i": "pair i", "T": "positions"},
        figsize=(7.6, 3.3),
        dpi=80,
        title="One sin/cos pair of the sinusoidal encoding (d_model = 64)",
    )


# -- the whole table -------------------------------------------------------------------------------
HEAT_T = [32, 256]
HEAT_D = [16, 64, 256]


def draw_pe_heatmap(fig, T: int = 256, d_model: int = 64) -> None:
    """PE (T, d_model) as an image: rows are positions, columns dimensions (even sin, odd cos)."""
    pe = pe_table(T, d_model)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.1, right=0.93, bottom=0.13, top=0.9)
    im = ax.imshow(
        pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
    )
    ax.set_xlabel("dimension j  (even j: sin, odd j: cos; pair i = j // 2)")
    ax.set_ylabel("position pos")
    ax.set_title(
        f"PE for T = {T} positions and d_model = {d_model}", fontsize=10, y=1.01
    )
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)


def pe_heatmap_explorer() -> Explorer:
    """Change the length and the width of the table; the left columns always oscillate fastest."""
    for T in HEAT_T:
        for d in HEAT_D:
            pe_table(T, d)
    return Explorer(
        draw_pe_heatmap,
        {"T": HEAT_T, "d_model": HEAT_D},
        defaults={"T": 256, "d_model": 64},
        labels={"T": "T", "d_model": "d_model"},
        figsize=(7, 3.6),
        dpi=80,
        title="The sinusoidal positional encoding as a table",
    )


# -- similarity against offset -----------------------------------------------------------------------
SIM_D = [16, 64, 512]
SIM_K = [50, 1000]


def draw_pe_similarity(fig, d_model: int = 64, K: int = 50) -> None:
    """PE(p) . PE(p + k) / (d_model / 2) for k in [-K, K]: the formula sum_i cos(omega_i k) (line) and
    dot products of actual rows for three starting positions p (markers), which all fall on it."""
    pe = pe_table(4 * K + 1, d_model)  # (4K+1, d_model)
    ks = np.arange(-K, K + 1)
    curve = np.cos(np.outer(ks, frequencies(d_model))).sum(1) / (
        d_model / 2
    )  # eq. pe-dot, normalised
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.1, right=0.7, bottom=0.13, top=0.9)
    ax.plot(ks, curve, color="k", lw=1, label="formula: Σᵢ cos(ωᵢ k) / (d_model/2)")
    sub = ks[:: max(1, K // 25)]
    for p, marker, c in (
        (K, "o", "#1f77b4"),
        (2 * K, "s", "#ff7f0e"),
        (3 * K, "^", "#2ca02c"),
    ):
        dots = pe[p + sub] @ pe[p] / (d_model / 2)  # rows p+k against row p
        ax.plot(
            sub,
            dots,
            marker,
            ms=4,
            mfc="none",
            color=c,
            label=f"rows p = {p} and p + k",
        )
    ax.axhline(0, color="#999999", lw=0.6)
    ax.set_ylim(-0.55, 1.05)
    ax.set_xlabel("offset k")
    ax.set_ylabel("cosine similarity")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    ax.set_title(
        f"PE(p) · PE(p + k) depends only on the offset k (d_model = {d_model})",
        fontsize=10,
        y=1.01,
    )


def pe_similarity_explorer() -> Explorer:
    """More dimensions give a smoother curve; the offset range shows the slow decline."""
    for d in SIM_D:
        for K in SIM_K:
            pe_table(4 * K + 1, d)
    return Explorer(
        draw_pe_similarity,
        {"d_model": SIM_D, "K": SIM_K},
        defaults={"d_model": 64},
        labels={"d_model": "d_model", "K": "max offset"},
        figsize=(7.6, 3.6),
        dpi=80,
        title="PE(p) · PE(p + k) against the offset k",
    )


# -- RoPE score against distance -----------------------------------------------------------------------
ROPE_VECTORS = ["q = k = all ones", "q = k, random", "q, k independent random"]


def rope_pair(kind: str, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key vectors (d,) the RoPE explorer rotates."""
    g = torch.Generator().manual_seed(seed)
    if kind == ROPE_VECTORS[0]:
        q = torch.ones(d, dtype=torch.float64)
        return q, q.clone()
    q = torch.randn(d, generator=g, dtype=torch.float64)
    k = (
        q.clone()
        if kind == ROPE_VECTORS[1]
        else torch.randn(d, generator=g, dtype=torch.float64)
    )
    return q, k


def rope_scores(
    q: torch.Tensor, k: torch.Tensor, m: int, ns: torch.Tensor
) -> np.ndarray:
    """RoPE(q, m) . RoPE(k, n) for every n in ns (eq. rope-relative: a function of m - n only)."""
    qm = tl.apply_rope(q[None], torch.tensor([m]))[0]  # (d,)
    kn = tl.apply_rope(
        k.expand(len(ns), -1), ns
    )  # (len(ns), d): key k placed at every position n
    return (kn @ qm).numpy()


ROPE_RANGES = [64, 1024]
ROPE_QUERIES = (1, 3, 10)  # the query sits at m = factor * R


@cache
def rope_curves(vectors: str, d: int, R: int) -> tuple:
    """For each query position m in ROPE_QUERIES * R: the scores against keys at distances 0..R."""
    q, k = rope_pair(vectors, d)
    out = []
    for f in ROPE_QUERIES:
        m = f * R
        ns = torch.arange(m - R, m + 1)  # keys at or before the query: distance R..0
        out.append((m, (m - ns).numpy(), rope_scores(q, k, m, ns)))
    return tuple(out), float(q @ k)


def draw_rope(fig, vectors: str = ROPE_VECTORS[0], R: int = 64, d: int = 128) -> None:
    """The score of a query at m and a key at n against the distance m - n, for three query positions m."""
    curves, plain = rope_curves(vectors, d, R)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.1, right=0.76, bottom=0.13, top=0.9)
    for (m, dist, s), marker, c in zip(
        curves, ("o", "s", "^"), ("k", "#ff7f0e", "#2ca02c")
    ):
        if marker == "o":
            ax.plot(dist, s, color=c, lw=0.9, label=f"query at m = {m}")
        else:
            step = max(1, R // 32)
            ax.plot(
                dist[::step],
                s[::step],
                marker,
                ms=4,
                mfc="none",
                color=c,
                label=f"query at m = {m}",
            )
    ax.axhline(0, color="#999999", lw=0.6)
    ax.axhline(plain, color="#999999", lw=0.8, ls=":", label="q · k, no rotation")
    ax.set_xlabel("distance m − n between query and key")
    ax.set_ylabel("score RoPE(q, m) · RoPE(k, n)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    ax.set_title(f"RoPE scores, {vectors}, d = {d}", fontsize=10, y=1.01)


def rope_explorer() -> Explorer:
    """The three query positions give the same curve: the score only sees the distance."""
    for v in ROPE_VECTORS:
        for R in ROPE_RANGES:
            rope_curves(v, 128, R)
    return Explorer(
        draw_rope,
        {"vectors": ROPE_VECTORS, "R": ROPE_RANGES},
        labels={"vectors": "q and k", "R": "max distance"},
        figsize=(7.6, 3.6),
        dpi=80,
        title="RoPE (d = 128): the score of a query and a key against their distance",
    )


EXPLORERS = {
    "sinusoids": sinusoid_explorer,
    "pe_heatmap": pe_heatmap_explorer,
    "pe_similarity": pe_similarity_explorer,
    "rope": rope_explorer,
}
