"""Chapter 12 figure: what one greedy decoding step computes, with and without the KV
cache.

``cache_explorer(weights, labels)`` (:class:`CacheFigure`) steps through decoding. The
left panel is a decoder self-attention map; the cells computed at the chosen step are
shown, the rest grey. Without a cache, step t recomputes every query row 0 ... t-1 and
every K/V row; with one, only the newest query row and the newest K/V row are computed,
the older K/V rows are read from the cache (right panel). Called with no arguments (as
``EXPLORERS`` does) it uses the random-weight model of
:func:`transformer_lib.demos.reversal.random_model`.
"""

from __future__ import annotations

import functools

import matplotlib
import numpy as np
import torch
from matplotlib.colors import ListedColormap

from ..demos import reversal
from .ch11_toy import position_labels
from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid
from .interactive import Explorer

# NaN cells (not computed at this step) drawn grey
NOT_COMPUTED_GREY = matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")
# K/V rows: white = not produced yet, blue = read from the cache, orange = new
STATUS_COLOURS = ListedColormap(["#ffffff", "#6baed6", "#fd8d3c"])


def step_cells(T: int, t: int, use_cache: bool) -> tuple[np.ndarray, np.ndarray]:
    """At step t (1-based, t decoder positions): (score cells computed (T, T) bool,
    K/V row status (T,) in 0/1/2)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    causal = j <= i
    rows = (i == t - 1) if use_cache else (i < t)  # query rows processed this step
    status = np.zeros(T, dtype=int)
    status[:t] = 2  # without a cache every K/V row is recomputed
    if use_cache:
        status[: t - 1] = 1  # with one, only the newest row is new
    return causal & rows, status


class CacheFigure(LiveFigure):
    """The attention cells computed at one decoding step (left) and the K/V rows it
    computes or reads from the cache (right). ``weights``: one (T, T) decoder
    self-attention map, ``labels`` its positions."""

    def __init__(self, fig, weights: np.ndarray, labels: list[str]) -> None:
        super().__init__(fig)
        self.weights = weights
        T = weights.shape[0]
        # fixed axes positions (no layout engine, colour bar in its own axes)
        ax = fig.add_axes((0.14, 0.17, 0.56, 0.68))
        cax = fig.add_axes((0.72, 0.17, 0.025, 0.68))
        ax_kv = fig.add_axes((0.82, 0.17, 0.14, 0.68))
        self.map = Heatmap(
            ax,
            weights,
            labels,
            labels,
            title="attention weights computed this step",
            cmap=NOT_COMPUTED_GREY,
            row_name="query position",
            col_name="key position",
            colorbar=False,
        )
        fig.colorbar(self.map.image, cax=cax)
        self.kv = ax_kv.imshow(
            np.zeros((T, 2)), cmap=STATUS_COLOURS, vmin=0, vmax=2, aspect="auto"
        )
        ax_kv.set_xticks([0, 1], ["K", "V"])
        ax_kv.set_yticks([])  # the rows line up with the positions of the map
        ax_kv.set_title("K/V rows", fontsize=10)
        # one row per position, over the rows' colours
        rules = ax_kv.hlines(np.arange(1, T) - 0.5, -0.5, 1.5, color="#999999", lw=0.5)
        ax_kv.set_xlabel("orange: new\nblue: cached", fontsize=8)
        self.title = fig.suptitle(" ", fontsize=10, y=0.97)
        self.live(*self.map.artists, self.kv, rules, self.title)

    def update(self, step: int = 5, use_cache: bool = False) -> HoverGrid:
        computed, status = step_cells(self.weights.shape[0], step, use_cache)
        self.kv.set_data(np.repeat(status[:, None], 2, axis=1))
        n_rows = 1 if use_cache else step
        n_scores = step if use_cache else step * (step + 1) // 2
        mode = "with the KV cache" if use_cache else "without a cache"
        self.title.set_text(
            f"step {step} {mode}: {n_rows} query row{'s' * (n_rows > 1)},"
            f" {n_scores} scores"
        )
        # cells not computed at this step: grey, "masked" on hover
        return self.map.set(np.where(computed, self.weights, np.nan))


def cache_explorer(
    weights: np.ndarray | torch.Tensor | None = None, labels: list[str] | None = None
) -> Explorer:
    """Controls: the decoding step and whether the KV cache is used. ``weights``: one
    (T, T) decoder self-attention map (a layer and head of
    ``Transformer.forward(..., need_weights=True)``)."""
    if weights is None:
        weights, labels = _random_model_map()
    weights = np.asarray(weights, dtype=float)
    T = weights.shape[0]
    return Explorer(
        functools.partial(CacheFigure, weights=weights, labels=labels),
        {"step": list(range(1, T + 1)), "use_cache": [False, True]},
        defaults={"step": min(5, T)},
        labels={"step": "decoding step", "use_cache": "KV cache"},
        figsize=(6.4, 4.8),
        title="One greedy decoding step: what is computed, what is reused",
    )


def _random_model_map():
    """Decoder self-attention (layer 1, head 1) of the random-weight reversal model
    over its own greedy output."""
    model = reversal.random_model(seed=0)
    src = reversal.reversal_batch(1, 8, torch.Generator().manual_seed(0))[0]
    with torch.no_grad():
        new = model.generate(src, 8)
        tgt = torch.cat([torch.full((1, 1), model.cfg.bos_id), new[:, :-1]], dim=1)
        _, attn = model(src, tgt, need_weights=True)
    return attn["decoder_self"][0][0, 0].numpy(), position_labels(tgt[0])


EXPLORERS = {"cache": cache_explorer}
