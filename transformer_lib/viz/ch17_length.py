"""Chapter 17 figures: models trained at one length, read at twice that length.

``extrapolation_explorer(maps, accuracy, L)`` shows, for each kind of positions, one
attention map of a model run on a sequence twice as long as any it was trained on, with
the training length marked, above that model's accuracy at each position. Called with no
arguments (as ``EXPLORERS`` does) it uses small random-weight models, which have learned
nothing; the chapter passes its trained ones.
"""

from __future__ import annotations

import numpy as np
import torch

import transformer_lib as tl

from .explorer import Explorer, heatmap

KINDS = ("learned", "sinusoidal", "rope", "none")
COLOURS = {
    "learned": "#1f77b4",
    "sinusoidal": "#ff7f0e",
    "rope": "#2ca02c",
    "none": "#7f7f7f",
}


def draw_extrapolation(
    fig,
    maps: dict,
    accuracy: dict,
    L: int,
    positions: str = "rope",
    layer: int = 1,
    head: int = 1,
) -> object:
    """Top: attention weights (T, T) of one head at test length T = 2L; bottom: accuracy
    of the next-token prediction at every position, per kind of positions."""
    w = np.asarray(maps[positions][layer - 1][head - 1], dtype=float)  # (T, T)
    T = w.shape[0]
    ax = fig.add_axes((0.1, 0.42, 0.62, 0.5))
    cax = fig.add_axes((0.74, 0.42, 0.02, 0.5))
    labels = [str(i) if i % 8 == 0 else "" for i in range(T)]
    grid = heatmap(
        ax,
        w,
        labels,
        labels,
        row_name="query position",
        col_name="",
        colorbar=False,
        vmax=max(float(np.nanmax(w)), 1e-9),
    )
    fig.colorbar(ax.images[0], cax=cax)
    for line in (ax.axvline, ax.axhline):
        line(L - 0.5, color="#d62728", lw=1.2, ls="--")
    ax.set_xticks(range(0, T, 8), [str(i) for i in range(0, T, 8)], rotation=0)
    ax.set_title(
        f"{positions}: layer {layer}, head {head} on a sequence of {T} = 2L tokens",
        fontsize=9,
    )
    ax2 = fig.add_axes((0.1, 0.08, 0.62, 0.24))
    for kind, acc in accuracy.items():
        acc = np.asarray(acc, dtype=float)
        style = dict(lw=2.2) if kind == positions else dict(lw=0.9, alpha=0.6)
        ax2.plot(np.arange(len(acc)), acc, color=COLOURS[kind], label=kind, **style)
    ax2.axvline(L - 0.5, color="#d62728", lw=1.2, ls="--")
    ax2.set(xlim=(-0.5, T - 0.5), ylim=(-0.02, 1.05), xlabel="position")
    ax2.set_ylabel("accuracy", fontsize=8)
    ax2.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.text(
        0.82, 0.9, f"dashed line:\nL = {L}, the\ntraining length", fontsize=8, va="top"
    )
    return grid


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
        lambda fig, **v: draw_extrapolation(fig, maps, accuracy, L, **v),
        {
            "positions": [k for k in KINDS if k in maps],
            "layer": list(range(1, n_layers + 1)),
            "head": list(range(1, n_heads + 1)),
        },
        defaults={"positions": "rope"},
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
