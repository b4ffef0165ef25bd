"""Chapter 12 figures: what one greedy decoding step computes, with and without the KV cache.

``cache_explorer(weights, labels)`` steps through decoding. The left panel is a decoder
self-attention map; the cells computed at the chosen step are shown, the rest grey. Without a
cache, step t recomputes every query row 0 ... t-1 and every K/V row; with one, only the newest
query row and the newest K/V row are computed, the older K/V rows are read from the cache (right
panel). Called with no arguments (as ``EXPLORERS`` does) it uses a small random-weight model.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import torch
from matplotlib.colors import ListedColormap

import transformer_lib as tl

from .ch11_toy import position_labels
from .explorer import Explorer, heatmap

NOT_COMPUTED_GREY = matplotlib.colormaps["viridis"].with_extremes(
    bad="#d9d9d9"
)  # NaN cells drawn grey
STATUS_COLOURS = ListedColormap(
    ["#ffffff", "#6baed6", "#fd8d3c"]
)  # white: not produced yet, blue: cached, orange: new


def step_cells(T: int, t: int, use_cache: bool) -> tuple[np.ndarray, np.ndarray]:
    """At step t (1-based, t decoder positions): (score cells computed (T, T) bool, K/V row status (T,) in 0/1/2)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    causal = j <= i
    rows = (i == t - 1) if use_cache else (i < t)  # query rows processed this step
    status = np.zeros(T, dtype=int)
    status[:t] = 2  # without a cache every K/V row is recomputed
    if use_cache:
        status[: t - 1] = 1  # with one, only the newest row is new
    return causal & rows, status


def cache_explorer(
    weights: np.ndarray | torch.Tensor | None = None, labels: list[str] | None = None
) -> Explorer:
    """Controls: the decoding step and whether the KV cache is used. ``weights``: one (T, T) decoder
    self-attention map (a layer and head of ``Transformer.forward(..., return_attention=True)``)."""
    if weights is None:
        weights, labels = _random_model_map()
    weights = np.asarray(weights, dtype=float)
    T = weights.shape[0]

    def draw(fig, step: int, use_cache: bool):
        computed, status = step_cells(T, step, use_cache)
        # fixed axes positions (no layout engine, colour bar in its own axes): a redraw stays fast
        ax = fig.add_axes((0.14, 0.17, 0.56, 0.68))
        cax = fig.add_axes((0.72, 0.17, 0.025, 0.68))
        ax_kv = fig.add_axes((0.82, 0.17, 0.14, 0.68))
        shown = np.where(
            computed, weights, np.nan
        )  # cells not computed at this step: grey, "masked" on hover
        grid = heatmap(
            ax,
            shown,
            labels,
            labels,
            title="attention weights computed this step",
            cmap=NOT_COMPUTED_GREY,
            row_name="query position",
            col_name="key position",
            colorbar=False,
        )
        fig.colorbar(ax.images[0], cax=cax)
        ax_kv.imshow(
            np.repeat(status[:, None], 2, axis=1),
            cmap=STATUS_COLOURS,
            vmin=0,
            vmax=2,
            aspect="auto",
        )
        ax_kv.set_xticks([0, 1], ["K", "V"])
        ax_kv.set_yticks(
            []
        )  # the rows line up with the positions of the map on the left
        ax_kv.set_title("K/V rows", fontsize=10)
        ax_kv.hlines(
            np.arange(1, T) - 0.5, -0.5, 1.5, color="#999999", lw=0.5
        )  # one row per position
        n_rows = 1 if use_cache else step
        n_scores = step if use_cache else step * (step + 1) // 2
        mode = "with the KV cache" if use_cache else "without a cache"
        fig.suptitle(
            f"step {step} {mode}: {n_rows} query row{'s' * (n_rows > 1)}, {n_scores} scores",
            fontsize=10,
            y=0.97,
        )
        ax_kv.set_xlabel("orange: new\nblue: cached", fontsize=8)
        return grid

    return Explorer(
        draw,
        {"step": list(range(1, T + 1)), "use_cache": [False, True]},
        defaults={"step": min(5, T)},
        labels={"use_cache": "KV cache"},
        figsize=(6.4, 4.8),
        title="One greedy decoding step: what is computed, what is reused",
    )


def _random_model_map():
    """Decoder self-attention (layer 1, head 1) of a small random-weight model over its own greedy output."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = tl.Transformer(tl.tasks.reversal_config()).eval()
    src = tl.tasks.reversal_batch(1, 8, torch.Generator().manual_seed(0))[0]
    with torch.no_grad():
        new = model.generate(src, 8)
        tgt = torch.cat([torch.full((1, 1), model.cfg.bos_id), new[:, :-1]], dim=1)
        _, attn = model(src, tgt, return_attention=True)
    return attn["decoder_self"][0][0, 0].numpy(), position_labels(tgt[0])


EXPLORERS = {"cache": cache_explorer}
