"""Chapter 7 figures: residual connections and LayerNorm.

``depth_explorer()`` draws the statistics of the depth experiment
(:mod:`transformer_lib.demos.sublayer_stack`) at initialisation, for five wirings;
``layer_norm_explorer()`` shows one vector through both LayerNorm formulas;
``draw_norm_axes`` which values LayerNorm and BatchNorm average over.
"""

from __future__ import annotations

import matplotlib.patches as mpatches
import numpy as np
import torch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

import transformer_lib as tl

from ..demos.sublayer_stack import DEPTHS, VARIANTS, depth_profiles
from .figures import LiveFigure
from .interactive import Explorer

COLORS = {
    "plain": "#7f7f7f",
    "LN only": "#9467bd",
    "residual": "#ff7f0e",
    "Post-LN": "#1f77b4",
    "Pre-LN": "#2ca02c",
}
MEASURES = [
    "gradient norm per sublayer",
    "stream norm ‖xₗ‖",
    "similarity of different inputs",
]


_MEASURE_KEYS = {MEASURES[0]: "grad", MEASURES[1]: "act", MEASURES[2]: "sim"}


class DepthFigure(LiveFigure):
    """One measure against depth for the five wirings of the same freshly initialised
    stack (the statistics of ``depth_profiles()``, computed once)."""

    def __init__(self, fig, profiles: dict | None = None) -> None:
        super().__init__(fig)
        self.profiles = depth_profiles() if profiles is None else profiles
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.9)
        self.lines = {
            v: ax.plot([], [], "o-", ms=3, color=COLORS[v], label=f"{v}:  {w}")[0]
            for v, w in VARIANTS.items()
        }
        ax.grid(alpha=0.3)
        ax.set_title(" ", fontsize=10, y=1.01)  # fixed y: faster
        self.live(*self.lines.values(), ax.title)
        self.legend = self.over(ax.legend(fontsize=8))  # over the lines

    def layout(self, depth: int, measure: str, **_) -> tuple:
        return depth, measure  # the axes' ranges, scale and labels; the legend

    def update(self, depth: int = 16, measure: str = MEASURES[0]) -> None:
        key, ax = _MEASURE_KEYS[measure], self.ax
        # gradients belong to sublayers 1..L, streams to depths 0..L
        start = 1 if key == "grad" else 0
        for v, line in self.lines.items():
            vals = self.profiles[(depth, v)][key]
            line.set_data(np.arange(start, start + len(vals)), vals)
        self.legend.set_loc("upper left" if key == "sim" else "lower right")
        ax.set_yscale("log" if key == "grad" else "linear")
        values = np.concatenate([self.profiles[(depth, v)][key] for v in VARIANTS])
        lo, hi = values.min(), values.max()
        end = start + len(vals) - 1
        ax.set_xlim(start - 0.05 * (end - start), end + 0.05 * (end - start))
        if key == "grad":  # 5 % margins, as autoscaling gives, on the log scale
            ax.set_ylim(lo * (lo / hi) ** 0.05, hi * (hi / lo) ** 0.05)
            ax.yaxis.set_major_locator(LogLocator(numticks=7))
            # plain text (no mathtext) and no minor ticks: both faster to draw
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0e}"))
            ax.yaxis.set_minor_locator(NullLocator())
            ax.set_ylabel("‖∂loss/∂θ‖ of the sublayer")
            ax.set_xlabel("sublayer l (1 = next to the input)")
        elif key == "act":
            ax.set_ylabel("mean ‖xₗ‖ over a batch")
            ax.set_xlabel("depth l (0 = the input)")
            ax.set_ylim(0, hi + 0.05 * (hi - lo))
        else:
            ax.set_ylabel("mean cos(xₗ of input a, xₗ of input b)")
            ax.set_xlabel("depth l (0 = the input)")
            ax.set_ylim(-0.1, 1.05)
        ax.title.set_text(f"{depth} sublayers at initialisation: {measure}")


def depth_explorer() -> Explorer:
    """Pick the depth and the measure; the statistics are computed once and only
    redrawn."""
    depth_profiles()
    return Explorer(
        DepthFigure,
        {"depth": DEPTHS, "measure": MEASURES},
        defaults={"depth": 16},
        labels={"depth": "sublayers", "measure": "show"},
        figsize=(7, 4),
        dpi=80,
        title="Five wirings of the same stack, before any training",
    )


# -- LayerNorm of one vector -----------------------------------------------------------
_RAW = torch.tensor([-3.0, -1.0, -1.0, 5.0, 2.0, -2.0, 0.5, -0.5], dtype=torch.float64)
# _RAW sums to 0: PATTERN has mean 0 and (biased) std exactly 1
PATTERN = _RAW / _RAW.pow(2).mean().sqrt()
SPREADS = [1e-4, 1e-3, 1e-2, 1.0]
EPSILONS = [1e-5, 1e-2]
AFFINES = {"γ = 1, β = 0": (1.0, 0.0), "γ = 2, β = 1": (2.0, 1.0)}


class LayerNormFigure(LiveFigure):
    """z = 4 + spread * PATTERN through PyTorch's LayerNorm formula (bars) and the
    article's (dots); the dashed outlines are gamma * PATTERN + beta, the exact
    standardisation that both approach."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.85)
        idx = np.arange(len(PATTERN))
        ones = np.ones(len(idx))
        self.ideal = ax.bar(
            idx,
            ones,
            width=0.8,
            fill=False,
            edgecolor="#888888",
            ls="--",
            lw=0.8,
            label="γ(z−μ)/σ + β  (no ε)",
        )
        self.ours = ax.bar(
            idx, ones, width=0.55, color="#1f77b4", label="PyTorch: √(σ²+ε)"
        )
        self.article = ax.plot(idx, ones, "o", color="#d62728", ms=6)[0]
        self.article.set_label("article: σ+ε")
        self.level = ax.axhline(0, color="k", lw=0.8, ls=":")
        ax.set_xticks(idx)
        ax.set_xlabel(
            "feature j of z = 4 + σ · (a fixed pattern with mean 0 and std 1)"
        )
        ax.set_ylabel("LN(z)ⱼ")
        ax.set_title(" ", fontsize=9, y=1.01)
        legend = ax.legend(fontsize=8, loc="upper left", ncol=3, frameon=False)
        self.live(*self.ideal, *self.ours, self.article, self.level, ax.title)
        self.over(legend)  # over the bars

    def layout(self, affine: str, **_) -> str:
        return affine  # the y range

    def update(
        self, spread: float = 1.0, eps: float = 1e-5, affine: str = "γ = 1, β = 0"
    ) -> None:
        g, b = AFFINES[affine]
        z = 4.0 + spread * PATTERN  # float64: the offset 4 costs no precision
        gamma, beta = torch.full_like(z, g), torch.full_like(z, b)
        ours = tl.layer_norm(z, gamma, beta, eps).numpy()
        article = tl.layer_norm_article(z, gamma, beta, eps).numpy()
        ideal = (g * PATTERN + b).numpy()
        for bars, top in ((self.ideal, ideal), (self.ours, ours)):
            for bar, y in zip(bars, top, strict=True):
                bar.set_y(b)
                bar.set_height(y - b)
        self.article.set_ydata(article)
        self.level.set_ydata([b, b])
        self.ax.set_ylim(-3.4 * g + b, 3.4 * g + b)
        self.ax.title.set_text(
            f"spread σ = {spread:g}, ε = {eps:g}, {affine}\n"
            f"std of the normalised vector: PyTorch {ours.std() / g:.3f},"
            f" article {article.std() / g:.3f}"
        )


def layer_norm_explorer() -> Explorer:
    """Shrink the spread of z towards sqrt(eps) and watch the two formulas part ways."""
    return Explorer(
        LayerNormFigure,
        {"spread": SPREADS, "eps": EPSILONS, "affine": list(AFFINES)},
        defaults={"spread": 1.0},
        labels={"spread": "spread σ of z", "eps": "ε", "affine": "γ, β"},
        figsize=(7, 3.4),
        dpi=80,
        title="LayerNorm of one vector: spread, ε, γ and β",
    )


# -- which slice of (B, T, d_model) each norm averages over ----------------------------
def draw_norm_axes(
    fig, B: int = 3, T: int = 5, d: int = 6, pad: tuple = (0, 2, 1)
) -> None:
    """A (B, T, d_model) batch drawn as B grids (rows = positions, columns =
    features), twice: the values that ONE LayerNorm statistic averages (one token's
    features) and the values that ONE BatchNorm statistic averages (one feature of
    every token of every sequence). The last ``pad[b]`` positions of sequence b are
    padding (hatched)."""
    axes = fig.subplots(2, 1)
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.93, hspace=0.32)
    gap = 1.5
    for ax, kind in zip(axes, ("LayerNorm", "BatchNorm"), strict=True):
        for b in range(B):
            ox = b * (d + gap)
            for t in range(T):
                is_pad = t >= T - pad[b]
                for j in range(d):
                    hit = (b == 0 and t == 1) if kind == "LayerNorm" else (j == 2)
                    face = ("#e76f51" if is_pad else "#f4a261") if hit else "white"
                    ax.add_patch(
                        mpatches.Rectangle(
                            (ox + j, T - 1 - t),
                            1,
                            1,
                            facecolor=face,
                            edgecolor="#555555",
                            lw=0.6,
                            hatch="///" if is_pad else None,
                        )
                    )
            ax.text(
                ox + d / 2,
                T + 0.25,
                f"sequence b = {b}" + (f"  ({pad[b]} padded)" if pad[b] else ""),
                ha="center",
                fontsize=8,
            )
        ax.annotate(
            "",
            xy=(d, -0.35),
            xytext=(0, -0.35),
            arrowprops=dict(arrowstyle="<->", lw=0.8),
        )
        ax.text(d / 2, -1.0, "d_model features", ha="center", va="center", fontsize=8)
        ax.annotate(
            "",
            xy=(-0.35, 0),
            xytext=(-0.35, T),
            arrowprops=dict(arrowstyle="<->", lw=0.8),
        )
        ax.text(
            -0.9,
            T / 2,
            "T positions",
            rotation=90,
            ha="center",
            va="center",
            fontsize=8,
        )
        ax.set_xlim(-1.4, B * d + (B - 1) * gap + 0.2)
        ax.set_ylim(-1.5, T + 0.8)
        ax.set_aspect("equal")
        ax.axis("off")
    axes[0].set_title(
        "LayerNorm: one μ and one σ² per token, from its own d_model features "
        "(B·T separate statistics)",
        fontsize=9,
    )
    axes[1].set_title(
        "BatchNorm: one μ and one σ² per feature, from all B·T tokens "
        "(padding included unless masked)",
        fontsize=9,
    )


EXPLORERS = {"depth": depth_explorer, "layer_norm": layer_norm_explorer}
