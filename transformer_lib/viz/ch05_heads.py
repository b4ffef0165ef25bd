"""Chapter 5 figures: what each head of a multi-head attention looks at, and how GQA
shares K/V.

``heads_explorer()`` shows any head's map of the hand-built attention of
:mod:`transformer_lib.demos.handbuilt_mha`, for MHA, GQA and MQA;
``groups_explorer()`` draws which query head reads which K/V head after ``repeat_kv``
(right) or ``repeat`` (wrong).
"""

from __future__ import annotations

import numpy as np
import torch

import transformer_lib as tl

from ..demos.handbuilt_mha import HEAD_JOBS, N_HEADS, SENTENCE, head_weights
from .explorer import Explorer, heatmap

_VARIANTS = {"MHA (h_kv = 4)": 4, "GQA (h_kv = 2)": 2, "MQA (h_kv = 1)": 1}
_HEAD_CHOICES = [f"head {i}: {job}" for i, job in enumerate(HEAD_JOBS)] + [
    "mean over heads"
]


def draw_head(fig, head: str = _HEAD_CHOICES[0], variant: str = "MHA (h_kv = 4)"):
    """One head's causal attention map (or the mean over heads) for one K/V variant."""
    w = head_weights(_VARIANTS[variant], causal=True)  # (h, T, T)
    k = _HEAD_CHOICES.index(head)
    values = (
        w.mean(0) if k == N_HEADS else w[k]
    )  # the mean: nn.MultiheadAttention's default
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.14, right=0.9, bottom=0.17, top=0.9)
    future = ~tl.causal_mask(len(SENTENCE)).numpy()
    shown = np.where(
        future, np.nan, values.numpy()
    )  # NaN: the hover read-out says "masked"
    fig.text(
        0.5, 0.94, f"{variant}: {head}", fontsize=10, ha="center"
    )  # cheaper than a title
    grid = heatmap(ax, shown, SENTENCE, SENTENCE, masked=future)
    for (i, j), v in np.ndenumerate(values.numpy()):  # label the weights that matter
        if v >= 0.1 and not future[i, j]:
            ax.text(
                j,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="black" if v > 0.6 else "white",
            )
    return grid


def heads_explorer() -> Explorer:
    """Choose a head and the K/V sharing; see that head's causal attention map (15 frames)."""
    return Explorer(
        draw_head,
        {"head": _HEAD_CHOICES, "variant": list(_VARIANTS)},
        labels={"head": "head", "variant": "K/V heads"},
        figsize=(5.4, 4.2),
        dpi=80,
        title="One head at a time: four hand-built heads, and what sharing their keys "
        "(GQA, MQA) does to them",
    )


def kv_head_of_query_head(n_heads: int, n_kv_heads: int, method: str) -> list[int]:
    """Which K/V head each query head reads after expanding K from h_kv to h heads.

    Computed by running the expansion on a tensor whose head j holds the number j.
    """
    ids = torch.arange(n_kv_heads, dtype=torch.float32).view(
        1, n_kv_heads, 1, 1
    )  # (1, h_kv, 1, 1)
    n_rep = n_heads // n_kv_heads
    if method == "repeat_kv":
        expanded = tl.repeat_kv(
            ids, n_rep
        )  # the library: repeat_interleave on the head axis
    else:
        expanded = ids.repeat(1, n_rep, 1, 1)  # tiling: k0 k1 k0 k1 ...
    return expanded.view(-1).long().tolist()


def draw_groups(fig, n_kv_heads: int = 2, method: str = "repeat_kv", n_heads: int = 8):
    """Query heads on top, K/V heads below, a line from each query head to the head it reads."""
    got = kv_head_of_query_head(n_heads, n_kv_heads, method)
    want = [i // (n_heads // n_kv_heads) for i in range(n_heads)]  # eq. gqa: g(i)
    colours = [f"C{g}" for g in range(n_kv_heads)]
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.88)
    xq = np.arange(n_heads)
    xkv = (
        np.arange(n_kv_heads) + 0.5
    ) * n_heads / n_kv_heads - 0.5  # centred under the group
    for i, g in enumerate(got):
        ok = g == want[i]
        ax.plot(
            [xq[i], xkv[g]],
            [1, 0],
            color=colours[g] if ok else "crimson",
            lw=2 if ok else 2.5,
            ls="-" if ok else "--",
            zorder=1,
        )
    for i in range(n_heads):
        ax.scatter(xq[i], 1, s=520, color=colours[want[i]], edgecolor="black", zorder=2)
        ax.text(
            xq[i],
            1,
            f"q{i}",
            ha="center",
            va="center",
            fontsize=9,
            color="white",
            zorder=3,
        )
        if got[i] != want[i]:
            ax.text(
                xq[i],
                1.17,
                "\u2717",
                ha="center",
                va="center",
                fontsize=14,
                color="crimson",
            )
    for g in range(n_kv_heads):
        ax.scatter(
            xkv[g], 0, s=700, marker="s", color=colours[g], edgecolor="black", zorder=2
        )
        ax.text(
            xkv[g],
            0,
            f"kv{g}",
            ha="center",
            va="center",
            fontsize=9,
            color="white",
            zorder=3,
        )
    strip = " ".join(f"kv{g}" for g in got)
    ax.text(
        -0.5,
        -0.42,
        f"K after expansion: [{strip}]",
        fontsize=9,
        family="monospace",
        va="center",
    )
    wrong = sum(g != w for g, w in zip(got, want))
    verdict = (
        f"{wrong} of {n_heads} heads read the wrong K/V"
        if wrong
        else "every head reads its group's K/V"
    )
    ax.set_title(
        f"h = {n_heads} query heads, h_kv = {n_kv_heads}, expanded with {method}: "
        + verdict,
        fontsize=9,
    )
    ax.set_xlim(-0.8, n_heads - 0.2)
    ax.set_ylim(-0.6, 1.35)
    ax.axis("off")
    return None


def groups_explorer() -> Explorer:
    """h_kv and the expansion method; a line joins each query head to its K/V head (8 frames)."""
    return Explorer(
        draw_groups,
        {"n_kv_heads": [1, 2, 4, 8], "method": ["repeat_kv", "repeat (tile)"]},
        defaults={"n_kv_heads": 2},
        labels={"n_kv_heads": "K/V heads $h_{kv}$", "method": "expand K/V with"},
        figsize=(6.4, 2.6),
        dpi=80,
        title="Which K/V head does each query head read? Colours are the intended groups; "
        "red dashes are wrong reads",
    )


EXPLORERS = {"heads": heads_explorer, "groups": groups_explorer}
