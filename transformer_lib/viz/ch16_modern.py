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

from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid
from .interactive import Explorer

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


class RopeMatrixFigure(LiveFigure):
    """One view of R(m) (d = 8): interleaved, half, or half with its features
    reordered by the inverse of ``tl.rope_permutation``; the non-zero entries printed.
    The view sets the tick labels: it is the layout."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        ax = fig.add_axes((0.13, 0.14, 0.6, 0.68))
        self.map = Heatmap(
            ax,
            np.zeros((ROPE_D, ROPE_D)),
            cmap="RdBu_r",
            vmin=-1.0,
            vmax=1.0,
            colorbar=False,
        )
        self.texts = [
            ax.text(j, i, "", ha="center", va="center", fontsize=8)
            for i in range(ROPE_D)
            for j in range(ROPE_D)
        ]
        self.note = fig.text(0.76, 0.5, " ", fontsize=8, va="center")
        self.title = fig.suptitle(" ", fontsize=10, y=0.95)
        self.view = None
        self.live(*self.map.artists, *self.texts, self.note, self.title)

    def update(self, view: str = "interleaved", m: int = 1) -> HoverGrid:
        # half-layout feature inv[a] is interleaved feature a: (2i, 2i+1) -> (i, i+d/2)
        inv = np.argsort(tl.rope_permutation(ROPE_D).numpy())
        reordered = view == "half, reordered by perm"
        R = (
            rope_matrix(m, "half")[np.ix_(inv, inv)]
            if reordered
            else rope_matrix(m, view)
        )
        if view != self.view:  # the tick labels and axis names: the layout
            names = [str(j) for j in (inv if reordered else range(ROPE_D))]
            self.map.set_labels(names, names, (ROPE_D, ROPE_D))
            kind = "interleaved" if view == "interleaved" else "half"
            self.map.ax.set_ylabel(f"output feature ({kind} layout)")
            self.map.ax.set_xlabel(f"input feature ({kind} layout)")
            self.map.row_name = f"output feature ({kind} layout)"
            self.map.col_name = f"input feature ({kind} layout)"
            self.view = view
        for text, v in zip(self.texts, R.flatten(), strict=True):
            text.set_visible(bool(abs(v) > 1e-12))  # print the non-zero cells only
            text.set_text(f"{v:.2f}")
            text.set_color("white" if abs(v) > 0.6 else "black")
        if reordered:
            order = ", ".join(str(j) for j in inv)
            gap = np.abs(R - rope_matrix(m, "interleaved")).max()
            self.note.set_text(
                f"the half layout's features\nin the order\n({order})\n"
                f"max |this - interleaved|\n= {gap:.1g}: the same matrix"
            )
        else:
            half = ROPE_D // 2
            pairs = (
                [(2 * i, 2 * i + 1) for i in range(half)]
                if view == "interleaved"
                else [(i, i + half) for i in range(half)]
            )
            self.note.set_text(
                "pairs that rotate together:\n" + ", ".join(map(str, pairs))
            )
        self.title.set_text(
            f"RoPE at position m = {m} as a matrix ({view}; d = {ROPE_D},"
            f" base = {ROPE_BASE:g})"
        )
        return self.map.set(R)

    def layout(self, view: str = "interleaved", **_) -> str:
        return view


def rope_layout_explorer() -> Explorer:
    """Controls: the layout (or the reordered half layout) and the position m."""
    for m in ROPE_POSITIONS:
        for layout in tl.positional.ROPE_LAYOUTS:
            rope_matrix(m, layout)  # compute once; a redraw only plots
    return Explorer(
        RopeMatrixFigure,
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


class NormFigure(LiveFigure):
    """Three bar charts: the input scale * (z + shift), its LayerNorm, its RMSNorm.
    The input's axis range follows the scale: the scale is the layout."""

    COLOURS = {"input": "#7f7f7f", "LayerNorm": "#1f77b4", "RMSNorm": "#d62728"}

    def __init__(self, fig) -> None:
        super().__init__(fig)
        axes = fig.subplots(1, 3, sharex=False)
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.15, top=0.78, wspace=0.35)
        j = np.arange(NORM_D)
        self.axes, self.bars, self.titles = {}, {}, {}
        for ax, name in zip(axes, self.COLOURS, strict=True):
            self.bars[name] = ax.bar(j, np.zeros(NORM_D), color=self.COLOURS[name])
            self.over(ax.axhline(0, color="black", lw=0.6))  # over the bars
            ax.set_ylim(-4.0, 4.0)
            ax.set_xticks([0, NORM_D - 1])
            ax.set_xlabel("feature")
            self.titles[name] = ax.set_title(" ", fontsize=9)
            self.axes[name] = ax
            self.live(*self.bars[name], self.titles[name])
        self.suptitle = fig.suptitle(" ", fontsize=10, y=0.97)
        self.live(self.suptitle)

    def update(self, shift: float = 0.0, scale: float = 1.0) -> None:
        out = norm_outputs(shift, scale)
        lim = max(4.0, 1.1 * scale * (np.abs(_base_vector()).max() + max(SHIFTS)))
        self.axes["input"].set_ylim(-lim, lim)
        for name, v in out.items():
            for bar, height in zip(self.bars[name], v, strict=True):
                bar.set_height(height)
            self.titles[name].set_text(
                f"{name}\nmean {v.mean():+.2f}, RMS {np.sqrt((v**2).mean()):.2f}"
            )
        self.suptitle.set_text(
            f"input = {scale:g} · (z + {shift:g}), z centred with RMS 1"
        )

    def layout(self, scale: float = 1.0, **_) -> float:
        return scale


def norm_explorer() -> Explorer:
    """Controls: a shift added to every feature, and a common scale."""
    return Explorer(
        NormFigure,
        {"shift": SHIFTS, "scale": SCALES},
        defaults={"shift": 0.0, "scale": 1.0},
        labels={"shift": "shift $c$", "scale": "scale $s$"},
        figsize=(8.4, 3.2),
        dpi=80,
        title="LayerNorm and RMSNorm of the same vector, shifted and scaled",
    )


EXPLORERS = {"rope_layout": rope_layout_explorer, "norms": norm_explorer}
