"""Chapter 17 figures: models trained at one length, read at twice that length.

``extrapolation_explorer(maps, accuracy, L)`` shows, for each kind of positions, one
attention map of a model run on a sequence twice as long as any it was trained on, with
the training length marked, above that model's accuracy at each position. Called with no
arguments (as ``EXPLORERS`` does) it uses small random-weight models, which have learned
nothing; the chapter passes its trained ones.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

import transformer_lib as tl

from .figures import LiveFigure
from .heatmap import Heatmap
from .interactive import Explorer

KINDS = ("learned", "sinusoidal", "rope", "none")
COLOURS = {
    "learned": "#1f77b4",
    "sinusoidal": "#ff7f0e",
    "rope": "#2ca02c",
    "none": "#7f7f7f",
}


class ExtrapolationFigure(LiveFigure):
    """Top: the attention weights (T, T) of one head at the test length T = 2L, the
    training length L dashed; bottom: every kind's accuracy at each position, the
    chosen kind's line drawn thick. ``maps[kind]``: (layers, heads, T, T);
    ``accuracy[kind]``: (T,) or shorter."""

    def __init__(self, fig, maps: dict, accuracy: dict, L: int) -> None:
        super().__init__(fig)
        self.maps, self.L = maps, L
        T = np.asarray(next(iter(maps.values()))).shape[-1]
        ax = fig.add_axes((0.1, 0.42, 0.62, 0.5))
        cax = fig.add_axes((0.74, 0.42, 0.02, 0.5))
        labels = [str(i) if i % 8 == 0 else "" for i in range(T)]
        self.map = Heatmap(
            ax,
            np.zeros((T, T)),
            labels,
            labels,
            row_name="query position",
            col_name="",
            colorbar=False,
        )
        ax.set_xticks(range(0, T, 8), [str(i) for i in range(0, T, 8)], rotation=0)
        fig.colorbar(self.map.image, cax=cax)
        for line in (ax.axvline, ax.axhline):
            self.over(line(L - 0.5, color="#d62728", lw=1.2, ls="--"))
        ax2 = fig.add_axes((0.1, 0.08, 0.62, 0.24))
        self.lines = {}
        for kind, acc in accuracy.items():
            acc = np.asarray(acc, dtype=float)
            (self.lines[kind],) = ax2.plot(
                np.arange(len(acc)), acc, color=COLOURS[kind], label=kind, lw=0.9
            )
        self.over(ax2.axvline(L - 0.5, color="#d62728", lw=1.2, ls="--"))
        ax2.set(xlim=(-0.5, T - 0.5), ylim=(-0.02, 1.05), xlabel="position")
        ax2.set_ylabel("accuracy", fontsize=8)
        ax2.legend(
            fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False
        )
        fig.text(
            0.82,
            0.9,
            f"dashed line:\nL = {L}, the\ntraining length",
            fontsize=8,
            va="top",
        )
        self.live(*self.map.artists, *self.lines.values())

    def update(self, positions: str = "rope", layer: int = 1, head: int = 1):
        w = np.asarray(self.maps[positions][layer - 1][head - 1], dtype=float)
        for kind, line in self.lines.items():
            line.set_linewidth(2.2 if kind == positions else 0.9)
            line.set_alpha(1.0 if kind == positions else 0.6)
        T = w.shape[0]
        return self.map.set(
            w,
            title=f"{positions}: layer {layer}, head {head} on a sequence of"
            f" {T} = 2L tokens",
        )


def extrapolation_explorer(
    maps: dict | None = None, accuracy: dict | None = None, L: int | None = None
) -> Explorer:
    """Controls: the kind of positions, the layer and the head. ``maps[kind]`` is a
    (layers, heads, T, T) array of attention weights at T = 2L, ``accuracy[kind]`` a
    (T,) array of per-position accuracy."""
    if maps is None:
        maps, accuracy, L = _random_models()
    n_layers, n_heads = np.asarray(maps[KINDS[0]]).shape[:2]
    return Explorer(
        functools.partial(ExtrapolationFigure, maps=maps, accuracy=accuracy, L=L),
        {
            "positions": [k for k in KINDS if k in maps],
            "layer": list(range(1, n_layers + 1)),
            "head": list(range(1, n_heads + 1)),
        },
        defaults={"positions": "rope"},
        labels={"positions": "kind of positions"},
        figsize=(7.4, 6.2),
        dpi=80,
        title="Trained at length L, run at 2L: attention maps and accuracy by position",
    )


def _random_models(L: int = 12, seed: int = 0):
    """Attention maps of small random-weight models at 2L, and a flat 'accuracy'."""
    maps, accuracy = {}, {}
    idx = torch.randint(0, 8, (1, 2 * L), generator=torch.Generator().manual_seed(seed))
    for kind in KINDS:
        cfg = tl.GPTConfig(
            vocab_size=8,
            d_model=16,
            n_heads=2,
            n_layers=2,
            d_ff=32,
            max_len=2 * L,
            positions=kind,
        )
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = tl.GPT(cfg).eval()
        with torch.no_grad():
            _, weights = model(idx, need_weights=True)
        maps[kind] = torch.stack([w[0] for w in weights]).numpy()  # (layers, h, T, T)
        accuracy[kind] = np.full(2 * L, 1 / 8)
    return maps, accuracy, L


EXPLORERS = {"extrapolation": extrapolation_explorer}
