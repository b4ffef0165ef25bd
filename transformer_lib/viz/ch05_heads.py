"""Chapter 5 figures: what each head of a multi-head attention looks at, and how GQA
shares K/V.

``heads_explorer()`` (:class:`HeadFigure`) shows any head's map of the hand-built
attention of :mod:`transformer_lib.demos.handbuilt_mha`, for MHA, GQA and MQA;
``groups_explorer()`` (:class:`GroupsFigure`) draws which query head reads which K/V
head after ``repeat_kv`` (right) or ``repeat`` (wrong).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

import transformer_lib as tl

from ..demos.handbuilt_mha import HEAD_JOBS, N_HEADS, SENTENCE, head_weights
from .figures import LiveFigure
from .heatmap import Heatmap, HoverGrid
from .interactive import Explorer

_VARIANTS = {"MHA (h_kv = 4)": 4, "GQA (h_kv = 2)": 2, "MQA (h_kv = 1)": 1}
_HEAD_CHOICES = [f"head {i}: {job}" for i, job in enumerate(HEAD_JOBS)]
_HEAD_CHOICES.append("mean over heads")


@cache
def _causal_weights(n_kv_heads: int) -> np.ndarray:
    """(h, T, T) causal attention weights of the hand-built layer, computed once."""
    return head_weights(n_kv_heads, causal=True).numpy()


class HeadFigure(LiveFigure):
    """One head's causal attention map (or the mean over heads) for one K/V variant;
    the weights that matter (0.1 or more) are printed."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        T = len(SENTENCE)
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.14, right=0.9, bottom=0.17, top=0.9)
        self.future = ~tl.causal_mask(T).numpy()
        self.map = Heatmap(ax, np.zeros((T, T)), SENTENCE, SENTENCE, masked=self.future)
        self.title = fig.text(0.5, 0.94, "", fontsize=10, ha="center")  # cheap title
        cells = [(i, j) for i in range(T) for j in range(i + 1)]  # the lower triangle
        self.labels = {
            (i, j): ax.text(j, i, "", ha="center", va="center", fontsize=8)
            for i, j in cells
        }
        self.live(*self.map.artists, self.title, *self.labels.values())

    def update(
        self, head: str = _HEAD_CHOICES[0], variant: str = "MHA (h_kv = 4)"
    ) -> HoverGrid:
        w = _causal_weights(_VARIANTS[variant])  # (h, T, T)
        k = _HEAD_CHOICES.index(head)
        # the mean over heads: what nn.MultiheadAttention returns by default
        values = w.mean(0) if k == N_HEADS else w[k]
        self.title.set_text(f"{variant}: {head}")
        for (i, j), text in self.labels.items():
            v = values[i, j]
            text.set_visible(bool(v >= 0.1))
            text.set_text(f"{v:.2f}")
            text.set_color("black" if v > 0.6 else "white")
        # NaN: the hover read-out says "masked"
        return self.map.set(np.where(self.future, np.nan, values), masked=self.future)


def heads_explorer() -> Explorer:
    """Choose a head and the K/V sharing; see that head's causal attention map (15
    frames)."""
    for n_kv_heads in _VARIANTS.values():  # computed once: a redraw only draws
        _causal_weights(n_kv_heads)
    return Explorer(
        HeadFigure,
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
    ids = torch.arange(n_kv_heads, dtype=torch.float32).view(1, n_kv_heads, 1, 1)
    n_rep = n_heads // n_kv_heads
    if method == "repeat_kv":  # the library: repeat_interleave on the head axis
        expanded = tl.repeat_kv(ids, n_rep)  # (1, h, 1, 1)
    else:  # tiling: k0 k1 k0 k1 ...
        expanded = ids.repeat(1, n_rep, 1, 1)
    return expanded.view(-1).long().tolist()


N_KV_HEADS = [1, 2, 4, 8]
# points: the circles' radius and the squares' half side, plus the edge line
Q_RADIUS, KV_HALF = 13.9, 14.2


class GroupsFigure(LiveFigure):
    """Query heads on top, K/V heads below, a line from each query head to the K/V
    head it reads: solid in its group's colour when right, red dashes when wrong."""

    def __init__(self, fig, n_heads: int = 8) -> None:
        super().__init__(fig)
        self.n_heads = n_heads
        ax = self.ax = fig.add_subplot()
        fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.88)
        ax.set_xlim(-0.8, n_heads - 0.2)
        ax.set_ylim(-0.6, 1.35)
        ax.axis("off")
        # one set of heads per h_kv, shown when chosen (they are the layout)
        self.nodes = {n_kv: self._nodes(ax, n_kv) for n_kv in N_KV_HEADS}
        self.reads = [
            ax.plot([], [], zorder=1, solid_capstyle="butt", dash_capstyle="butt")[0]
            for _ in range(n_heads)
        ]
        self.wrong = [
            ax.text(i, 1.17, "\u2717", ha="center", va="center", fontsize=14)
            for i in range(n_heads)
        ]
        for mark in self.wrong:
            mark.set_color("crimson")
        self.strip = ax.text(-0.5, -0.42, "", fontsize=9, family="monospace")
        self.strip.set_va("center")
        ax.set_title(" ", fontsize=9)
        self.live(*self.reads, *self.wrong, self.strip, ax.title)

    def _nodes(self, ax, n_kv_heads: int) -> list:
        """The query heads in their group's colour and the K/V heads, with labels."""
        want = self._want(n_kv_heads)
        artists = [
            ax.scatter(
                range(self.n_heads),
                [1] * self.n_heads,
                s=520,
                color=[f"C{g}" for g in want],
                edgecolor="black",
                zorder=2,
            ),
            ax.scatter(
                self._x_kv(n_kv_heads),
                [0] * n_kv_heads,
                s=700,
                marker="s",
                color=[f"C{g}" for g in range(n_kv_heads)],
                edgecolor="black",
                zorder=2,
            ),
        ]
        places = [(i, 1, f"q{i}") for i in range(self.n_heads)]
        places += [(x, 0, f"kv{g}") for g, x in enumerate(self._x_kv(n_kv_heads))]
        for x, y, name in places:
            artists.append(
                ax.text(x, y, name, ha="center", va="center", fontsize=9, zorder=3)
            )
            artists[-1].set_color("white")
        return artists

    def _want(self, n_kv_heads: int) -> list[int]:
        return [i // (self.n_heads // n_kv_heads) for i in range(self.n_heads)]  # g(i)

    def _x_kv(self, n_kv_heads: int) -> np.ndarray:
        """Each K/V head centred under its group of query heads."""
        return (np.arange(n_kv_heads) + 0.5) * self.n_heads / n_kv_heads - 0.5

    def _read_line(self, x_q: float, x_kv: float) -> tuple[list, list]:
        """The line from query head (x_q, 1) to K/V head (x_kv, 0), stopped at the edge
        of the circle and of the square so that it never crosses them."""
        box = self.ax.get_window_extent()
        pt = 72 / self.fig.dpi  # points per pixel
        (x0, x1), (y0, y1) = self.ax.get_xlim(), self.ax.get_ylim()
        sx, sy = box.width * pt / (x1 - x0), box.height * pt / (y1 - y0)  # pt / unit
        dx, dy = (x_kv - x_q) * sx, -1.0 * sy  # the line's direction, in points
        length = np.hypot(dx, dy)
        ux, uy = dx / length, dy / length
        into_square = KV_HALF / max(abs(ux), abs(uy))
        start = (x_q + ux * Q_RADIUS / sx, 1 + uy * Q_RADIUS / sy)
        end = (x_kv - ux * into_square / sx, 0 - uy * into_square / sy)
        return [start[0], end[0]], [start[1], end[1]]

    def layout(self, n_kv_heads: int, **_) -> int:
        return n_kv_heads

    def update(self, n_kv_heads: int = 2, method: str = "repeat_kv") -> None:
        for n_kv, artists in self.nodes.items():
            for a in artists:
                a.set_visible(n_kv == n_kv_heads)
        got = kv_head_of_query_head(self.n_heads, n_kv_heads, method)
        want, x_kv = self._want(n_kv_heads), self._x_kv(n_kv_heads)
        for i, (line, mark) in enumerate(zip(self.reads, self.wrong, strict=True)):
            ok = got[i] == want[i]
            line.set_data(*self._read_line(i, x_kv[got[i]]))
            line.set(
                color=f"C{got[i]}" if ok else "crimson",
                linewidth=2 if ok else 2.5,
                linestyle="-" if ok else "--",
            )
            mark.set_visible(not ok)
        strip = " ".join(f"kv{g}" for g in got)
        self.strip.set_text(f"K after expansion: [{strip}]")
        wrong = sum(g != w for g, w in zip(got, want, strict=True))
        verdict = (
            f"{wrong} of {self.n_heads} heads read the wrong K/V"
            if wrong
            else "every head reads its group's K/V"
        )
        self.ax.set_title(
            f"h = {self.n_heads} query heads, h_kv = {n_kv_heads}, expanded with"
            f" {method}: {verdict}",
            fontsize=9,
        )


def groups_explorer() -> Explorer:
    """h_kv and the expansion method; a line joins each query head to its K/V head (8
    frames)."""
    return Explorer(
        GroupsFigure,
        {"n_kv_heads": N_KV_HEADS, "method": ["repeat_kv", "repeat (tile)"]},
        defaults={"n_kv_heads": 2},
        labels={"n_kv_heads": "K/V heads $h_{kv}$", "method": "expand K/V with"},
        figsize=(6.4, 2.6),
        dpi=80,
        title="Which K/V head does each query head read? Colours are the intended "
        "groups; red dashes are wrong reads",
    )


EXPLORERS = {"heads": heads_explorer, "groups": groups_explorer}
