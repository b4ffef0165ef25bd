"""Chapter 18 figure: the schedule of causal ring attention.

``ring_explorer()`` shows P ranks after step s of the ring (eq. ring-attention). Left:
the P x P blocks of (query shard, K/V shard); row r is rank r, and at step t it holds
the K/V shard (r - t) mod P. A block is computed (blue), being computed at this step
(orange), skipped because it lies wholly above the diagonal (light red), or not reached
yet (white). Right: for each rank, the largest gap between its running output, the
log-sum-exp merge of the blocks it has computed (``tl.flash.merge_attention``), and
exact causal attention over the whole sequence; a rank is exact once it has merged
every block on or below the diagonal, which takes rank r until step r.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

from transformer_lib.flash import merge_attention
from transformer_lib.parallel import block_attention

from .figures import LiveFigure
from .interactive import Explorer

WORLDS = [2, 3, 4, 6]
STEPS = list(range(max(WORLDS)))
T, D = 24, 4  # positions (divisible by every P) and head width
FLOOR = 1e-17  # where an exact rank's bar ends on the log axis

# colours: not reached, skipped, computed before, computed now
_COLOURS = np.array(
    [[1.0, 1.0, 1.0], [0.98, 0.80, 0.80], [0.42, 0.68, 0.84], [0.99, 0.55, 0.24]]
)


@functools.cache
def _example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(18)
    q, k, v = (torch.randn(1, 1, T, D, generator=g, dtype=torch.float64) for _ in "qkv")
    exact = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return q, k, v, exact


@functools.cache
def ring_errors(P: int) -> np.ndarray:
    """(P, P): the largest gap of rank r's running output to exact attention after
    step t, the blocks merged in the ring's order (NaN while it has merged none)."""
    q, k, v, exact = _example()
    n = T // P
    errors = np.full((P, P), np.nan)
    for r in range(P):
        qr = q[..., r * n : (r + 1) * n, :]
        out = lse = None
        for t in range(P):
            s = (r - t) % P
            if s <= r:  # on or below the diagonal: computed
                mask = None
                if s == r:
                    mask = torch.ones(n, n, dtype=torch.bool).tril()
                ks, vs = k[..., s * n : (s + 1) * n, :], v[..., s * n : (s + 1) * n, :]
                o, lb = block_attention(qr, ks, vs, mask)
                out, lse = (
                    (o, lb) if out is None else merge_attention([out, o], [lse, lb])
                )
            if out is not None:
                gap = (out - exact[..., r * n : (r + 1) * n, :]).abs().max().item()
                errors[r, t] = max(gap, FLOOR)
    return errors


def block_states(P: int, step: int) -> np.ndarray:
    """(P, P) codes of the blocks after ``step``: 0 not reached, 1 skipped, 2 computed
    before this step, 3 computed at this step."""
    states = np.zeros((P, P), dtype=int)
    for r in range(P):
        for t in range(min(step, P - 1) + 1):
            s = (r - t) % P
            if s > r:
                states[r, s] = 1
            else:
                states[r, s] = 3 if t == min(step, P - 1) else 2
    return states


class RingFigure(LiveFigure):
    """Left: the blocks of (query shard, K/V shard), coloured by what the ring has
    done with them. Right: each rank's running output error, on a log axis."""

    def __init__(self, fig) -> None:
        super().__init__(fig)
        self.ax1 = fig.add_axes((0.07, 0.16, 0.36, 0.68))
        self.grid = self.ax1.imshow(
            np.ones((max(WORLDS), max(WORLDS), 3)), interpolation="nearest"
        )
        self.ax1.set_xlabel(
            "K/V shard s (held by rank (r - t) mod P at step t)", fontsize=8
        )
        self.ax1.set_ylabel("rank r (its query shard)", fontsize=8)
        self.ax1.tick_params(labelsize=7)
        self.ax2 = fig.add_axes((0.56, 0.16, 0.41, 0.68))
        self.bars = self.ax2.vlines(
            np.arange(max(WORLDS)), FLOOR, FLOOR, colors="#3182bd", lw=14
        )
        self.ax2.set_yscale("log")
        self.ax2.set(ylim=(FLOOR / 2, 3.0), xlabel="rank r")
        self.ax2.set_title(
            "largest gap of rank r's running output to exact attention", fontsize=9
        )
        self.ax2.tick_params(labelsize=7)
        self.status = fig.text(0.5, 0.94, " ", ha="center", fontsize=10)
        self.live(self.grid, self.bars, self.status)

    def layout(self, P: int = 4, step: int = 1) -> int:
        return P

    def update(self, P: int = 4, step: int = 1) -> None:
        t = min(step, P - 1)
        states = block_states(P, t)
        self.grid.set_data(_COLOURS[states])
        self.grid.set_extent((-0.5, P - 0.5, P - 0.5, -0.5))
        self.ax1.set_xticks(range(P))
        self.ax1.set_yticks(range(P))
        self.ax1.set_title(
            "blue: merged, orange: this step, red: skipped (above the diagonal)",
            fontsize=8,
        )
        errs = ring_errors(P)[:, t]
        heights = np.where(np.isnan(errs), FLOOR, errs)
        self.bars.set_segments([[(r, FLOOR), (r, h)] for r, h in enumerate(heights)])
        self.ax2.set_xlim(-0.6, P - 0.4)
        self.ax2.set_xticks(range(P))
        computed = int((states >= 2).sum())
        self.status.set_text(
            f"P = {P}, after step {t} of {P - 1}: {computed} blocks merged,"
            f" {int((states == 1).sum())} skipped; rank r computes r + 1 of {P}"
        )


def ring_explorer() -> Explorer:
    """Controls: the world size P and the step of the ring."""
    return Explorer(
        RingFigure,
        {"P": WORLDS, "step": STEPS},
        defaults={"P": 4, "step": 1},
        labels={"P": "ranks $P$", "step": "step $t$ (past $P - 1$: the last)"},
        figsize=(8.6, 3.3),
        title="Ring attention: which K/V block each rank holds, step by step",
    )


EXPLORERS = {"ring": ring_explorer}
