"""Chapter 8 figures: the sinusoidal positional encoding and rotary position embeddings
(RoPE).

``sinusoid_explorer()`` (:class:`SinusoidFigure`) shows one sin/cos pair of the
encoding over positions and as a point going round the unit circle;
``pe_heatmap_explorer()`` (:class:`PEHeatmapFigure`) the whole (T, d_model) table;
``pe_similarity_explorer()`` (:class:`PESimilarityFigure`) the dot product
PE(p) . PE(p + k) against the offset k; ``rope_explorer()`` (:class:`RopeFigure`) the
RoPE score q_m . k_n against the distance m - n. Each figure is drawn once and then
updated; call one outside an explorer with any values, for example
``RopeFigure(plt.figure(figsize=(8, 4))).update(R=4000)``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from matplotlib.legend import Legend

import transformer_lib as tl

from .figures import LiveFigure
from .interactive import Explorer

BASE = 10000.0
SIN_C, COS_C = "#1f77b4", "#d62728"


def frequencies(d_model: int, base: float = BASE) -> np.ndarray:
    """omega_i = base^(-2i/d_model) for the pairs i = 0 .. d_model/2 - 1
    (eq. pe-freq)."""
    return base ** (-np.arange(0, d_model, 2) / d_model)


@cache
def pe_table(T: int, d_model: int) -> np.ndarray:
    """tl.sinusoidal_positional_encoding(T, d_model) as float64 NumPy, computed once
    per shape."""
    return tl.sinusoidal_positional_encoding(T, d_model, dtype=torch.float64).numpy()


# -- one sin/cos pair ------------------------------------------------------------------
SIN_D_MODEL = 64
PAIRS = [0, 2, 8, 31]
RANGES = [64, 1024]
FEW = 100  # up to this many positions, the samples are dots on the continuous curves


class SinusoidFigure(LiveFigure):
    """Columns 2i (sin) and 2i+1 (cos) of the encoding over positions 0..T-1, and the
    same pair as a point (PE[pos, 2i], PE[pos, 2i+1]) on the unit circle, turning by
    omega_i per position."""

    def __init__(self, fig, d_model: int = SIN_D_MODEL) -> None:
        super().__init__(fig)
        self.d_model = d_model
        ax, axc = self.ax, self.axc = fig.subplots(
            1, 2, gridspec_kw={"width_ratios": [2.6, 1]}
        )
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.84, wspace=0.25)
        # the continuous curves, and the samples as dots (few) or joined (many)
        self.smooth = [
            ax.plot([], [], color=c, lw=0.8, alpha=0.5)[0] for c in (SIN_C, COS_C)
        ]
        self.dots = [
            ax.plot([], [], color=c, ls="none", marker="o", ms=3)[0]
            for c in (SIN_C, COS_C)
        ]
        self.joined = [ax.plot([], [], color=c, lw=0.9)[0] for c in (SIN_C, COS_C)]
        zero = ax.axhline(0, color="#bbbbbb", lw=0.6)
        self.legends = {
            style: Legend(ax, lines, ["", ""], fontsize=8, loc="upper right", ncol=2)
            for style, lines in (("dots", self.dots), ("joined", self.joined))
        }
        for legend in self.legends.values():
            ax.add_artist(legend)
        ax.set_ylim(-1.15, 1.5)
        ax.set_xlabel("position pos")
        ax.set_title(" ", fontsize=9, y=1.01)
        t = np.linspace(0, 2 * math.pi, 200)
        axc.plot(np.cos(t), np.sin(t), color="#cccccc", lw=0.8)
        self.shown = np.arange(64)
        self.points = axc.scatter(
            np.zeros(64), np.zeros(64), c=self.shown, cmap="viridis", s=9, zorder=3
        )
        self.first = [
            axc.annotate(
                str(p), (0, 0), textcoords="offset points", xytext=(4, 3), fontsize=7
            )
            for p in (0, 1, 2)
        ]
        axc.set_aspect("equal")
        axc.set_xlim(-1.25, 1.25)
        axc.set_ylim(-1.25, 1.25)
        axc.set_xticks([])
        axc.set_yticks([])
        axc.set_title(
            f"positions 0–{self.shown[-1]}: one step\nturns the point by ω rad",
            fontsize=8,
            y=1.01,
        )
        self.live(*self.smooth, *self.dots, *self.joined, zero)
        self.live(self.points, *self.first)
        self.over(*self.legends.values())

    def layout(self, i: int, T: int, **_) -> tuple:
        return i, T  # the range of positions; the pair's labels and title

    def update(self, i: int = 2, T: int = 64) -> None:
        d_model = self.d_model
        pe = pe_table(T, d_model)  # (T, d_model)
        w = frequencies(d_model)[i]
        pos = np.arange(T)
        few = T <= FEW
        smooth = np.linspace(0, T - 1, 200)
        for line, f in zip(self.smooth, (np.sin, np.cos), strict=True):
            line.set_data(smooth, f(w * smooth))
            line.set_visible(few)
        for dots, joined, col in zip(self.dots, self.joined, (0, 1), strict=True):
            dots.set_data(pos, pe[:, 2 * i + col])
            joined.set_data(pos, pe[:, 2 * i + col])
            dots.set_visible(few)
            joined.set_visible(not few)
        self.ax.set_xlim(-0.05 * (T - 1), 1.05 * (T - 1))
        for style, legend in self.legends.items():
            legend.set_visible((style == "dots") == few)
            sin_text, cos_text = legend.get_texts()
            sin_text.set_text(f"PE[pos, {2 * i}] = sin(ω·pos)")
            cos_text.set_text(f"PE[pos, {2 * i + 1}] = cos(ω·pos)")
        self.ax.title.set_text(
            f"pair i = {i} of d_model = {d_model}:"
            f" ω = 10000^(−{2 * i}/{d_model}) = {w:.3g}\n"
            f"one full period (wavelength 2π/ω) = {2 * math.pi / w:,.1f} positions"
        )
        self.points.set_offsets(pe[self.shown][:, [2 * i, 2 * i + 1]])
        for p, note in enumerate(self.first):
            note.xy = (pe[p, 2 * i], pe[p, 2 * i + 1])
        self.axc.set_xlabel(f"PE[pos, {2 * i}]", fontsize=8)
        self.axc.set_ylabel(f"PE[pos, {2 * i + 1}]", fontsize=8)


def sinusoid_explorer() -> Explorer:
    """Pick the pair i: fast pairs wrap many times over the sequence, slow pairs
    barely move."""
    for T in RANGES:
        pe_table(T, SIN_D_MODEL)  # compute the tables once; a redraw only plots
    return Explorer(
        SinusoidFigure,
        {"i": PAIRS, "T": RANGES},
        defaults={"i": 2},
        labels={"i": "pair i", "T": "positions"},
        figsize=(7.6, 3.3),
        dpi=80,
        title="One sin/cos pair of the sinusoidal encoding (d_model = 64)",
    )


# -- the whole table -------------------------------------------------------------------
HEAT_T = [32, 256]
HEAT_D = [16, 64, 256]


class PEHeatmapFigure(LiveFigure):
    """PE (T, d_model) as an image: rows are positions, columns dimensions (even sin,
    odd cos)."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.1, right=0.93, bottom=0.13, top=0.9)
        self.image = ax.imshow(
            np.zeros((2, 2)),
            cmap="RdBu_r",
            vmin=-1,
            vmax=1,
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_xlabel("dimension j  (even j: sin, odd j: cos; pair i = j // 2)")
        ax.set_ylabel("position pos")
        ax.set_title(" ", fontsize=10, y=1.01)
        fig.colorbar(self.image, ax=ax, fraction=0.046, pad=0.03)
        self.live(self.image)

    def layout(self, T: int, d_model: int, **_) -> tuple:
        return T, d_model  # the axes' ticks and the title

    def update(self, T: int = 256, d_model: int = 64) -> None:
        self.image.set_data(pe_table(T, d_model))
        self.image.set_extent((-0.5, d_model - 0.5, T - 0.5, -0.5))
        self.ax.set_xlim(-0.5, d_model - 0.5)
        self.ax.set_ylim(T - 0.5, -0.5)
        self.ax.title.set_text(f"PE for T = {T} positions and d_model = {d_model}")


def pe_heatmap_explorer() -> Explorer:
    """Change the length and the width of the table; the left columns always
    oscillate fastest."""
    for T in HEAT_T:
        for d in HEAT_D:
            pe_table(T, d)
    return Explorer(
        PEHeatmapFigure,
        {"T": HEAT_T, "d_model": HEAT_D},
        defaults={"T": 256, "d_model": 64},
        labels={"T": "T", "d_model": "d_model"},
        figsize=(7, 3.6),
        dpi=80,
        title="The sinusoidal positional encoding as a table",
    )


def _frame(ax, xlabel: str, ylabel: str):
    """The axes' labels, a grid, room for a title, and the legend to the right of the
    axes (where no curve passes); returns the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.set_title(" ", fontsize=10, y=1.01)
    return ax.legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False
    )


# -- similarity against offset ---------------------------------------------------------
SIM_D = [16, 64, 512]
SIM_K = [50, 1000]
_STARTS = (("o", "#1f77b4"), ("s", "#ff7f0e"), ("^", "#2ca02c"))  # p = K, 2K, 3K


class PESimilarityFigure(LiveFigure):
    """PE(p) . PE(p + k) / (d_model / 2) for k in [-K, K]: the formula
    sum_i cos(omega_i k) (line) and dot products of actual rows for three starting
    positions p (markers), which all fall on it."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.1, right=0.7, bottom=0.13, top=0.9)
        self.curve = ax.plot(
            [], [], color="k", lw=1, label="formula: Σᵢ cos(ωᵢ k) / (d_model/2)"
        )[0]
        self.rows = [
            ax.plot([], [], marker, ms=4, mfc="none", color=c, label=" ")[0]
            for marker, c in _STARTS
        ]
        zero = ax.axhline(0, color="#999999", lw=0.6)  # over the curves, as drawn
        ax.set_ylim(-0.55, 1.05)
        self.legend = _frame(ax, "offset k", "cosine similarity")
        self.live(self.curve, *self.rows, zero, ax.title)

    def layout(self, K: int, **_) -> int:
        return K  # the range of offsets, and the legend's p

    def update(self, d_model: int = 64, K: int = 50) -> None:
        pe = pe_table(4 * K + 1, d_model)  # (4K+1, d_model)
        ks = np.arange(-K, K + 1)
        # eq. pe-dot, normalised
        curve = np.cos(np.outer(ks, frequencies(d_model))).sum(1) / (d_model / 2)
        self.curve.set_data(ks, curve)
        sub = ks[:: max(1, K // 25)]
        texts = self.legend.get_texts()[1:]
        for n, (line, text) in enumerate(zip(self.rows, texts, strict=True), start=1):
            p = n * K
            line.set_data(sub, pe[p + sub] @ pe[p] / (d_model / 2))  # rows p+k, p
            text.set_text(f"rows p = {p} and p + k")
        self.ax.set_xlim(-1.1 * K, 1.1 * K)
        self.ax.title.set_text(
            f"PE(p) · PE(p + k) depends only on the offset k (d_model = {d_model})"
        )


def pe_similarity_explorer() -> Explorer:
    """More dimensions give a smoother curve; the offset range shows the slow
    decline."""
    for d in SIM_D:
        for K in SIM_K:
            pe_table(4 * K + 1, d)
    return Explorer(
        PESimilarityFigure,
        {"d_model": SIM_D, "K": SIM_K},
        defaults={"d_model": 64},
        labels={"d_model": "d_model", "K": "max offset"},
        figsize=(7.6, 3.6),
        dpi=80,
        title="PE(p) · PE(p + k) against the offset k",
    )


# -- RoPE score against distance -------------------------------------------------------
ROPE_VECTORS = ["q = k = all ones", "q = k, random", "q, k independent random"]


def rope_pair(kind: str, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key vectors (d,) the RoPE explorer rotates."""
    g = torch.Generator().manual_seed(seed)
    if kind == ROPE_VECTORS[0]:
        q = torch.ones(d, dtype=torch.float64)
        return q, q.clone()
    q = torch.randn(d, generator=g, dtype=torch.float64)
    if kind == ROPE_VECTORS[1]:
        return q, q.clone()
    return q, torch.randn(d, generator=g, dtype=torch.float64)


def rope_scores(
    q: torch.Tensor, k: torch.Tensor, m: int, ns: torch.Tensor
) -> np.ndarray:
    """RoPE(q, m) . RoPE(k, n) for every n in ns (eq. rope-relative: a function of
    m - n only)."""
    qm = tl.apply_rope(q[None], torch.tensor([m]))[0]  # (d,)
    kn = tl.apply_rope(k.expand(len(ns), -1), ns)  # (len(ns), d): k at every n
    return (kn @ qm).numpy()


ROPE_RANGES = [64, 1024]
ROPE_QUERIES = (1, 3, 10)  # the query sits at m = factor * R
_QUERY_STYLES = (("o", "k"), ("s", "#ff7f0e"), ("^", "#2ca02c"))


@cache
def rope_curves(vectors: str, d: int, R: int) -> tuple:
    """For each query position m in ROPE_QUERIES * R: the scores against keys at
    distances 0..R, and the plain q . k."""
    q, k = rope_pair(vectors, d)
    out = []
    for f in ROPE_QUERIES:
        m = f * R
        ns = torch.arange(m - R, m + 1)  # keys at or before the query: distance R..0
        out.append((m, (m - ns).numpy(), rope_scores(q, k, m, ns)))
    return tuple(out), float(q @ k)


class RopeFigure(LiveFigure):
    """The score of a query at m and a key at n against the distance m - n, for three
    query positions m."""

    def __init__(self, fig, d: int = 128) -> None:
        super().__init__(fig)
        self.d = d
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.1, right=0.76, bottom=0.13, top=0.9)
        self.curves = [ax.plot([], [], color="k", lw=0.9, label=" ")[0]]
        self.curves += [
            ax.plot([], [], marker, ms=4, mfc="none", color=c, label=" ")[0]
            for marker, c in _QUERY_STYLES[1:]
        ]
        zero = ax.axhline(0, color="#999999", lw=0.6)
        self.plain = ax.axhline(0, color="#999999", lw=0.8, ls=":")
        self.plain.set_label("q · k, no rotation")
        self.legend = _frame(
            ax, "distance m − n between query and key", "score RoPE(q, m) · RoPE(k, n)"
        )
        self.live(*self.curves, zero, self.plain)

    def layout(self, vectors: str, R: int, **_) -> tuple:
        return vectors, R  # the axes' ranges, the legend's m, the title

    def update(self, vectors: str = ROPE_VECTORS[0], R: int = 64) -> None:
        curves, plain = rope_curves(vectors, self.d, R)
        texts = self.legend.get_texts()
        for n, (m, dist, s) in enumerate(curves):
            step = 1 if n == 0 else max(1, R // 32)
            self.curves[n].set_data(dist[::step], s[::step])
            texts[n].set_text(f"query at m = {m}")
        self.plain.set_ydata([plain, plain])
        # the data's range and 5 % margins, as autoscaling would give
        lo = min(0.0, plain, *(s.min() for _, _, s in curves))
        hi = max(0.0, plain, *(s.max() for _, _, s in curves))
        self.ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        self.ax.set_xlim(-0.05 * R, 1.05 * R)
        self.ax.title.set_text(f"RoPE scores, {vectors}, d = {self.d}")


def rope_explorer() -> Explorer:
    """The three query positions give the same curve: the score only sees the
    distance."""
    for v in ROPE_VECTORS:
        for R in ROPE_RANGES:
            rope_curves(v, 128, R)
    return Explorer(
        RopeFigure,
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
