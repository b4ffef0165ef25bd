"""The depth experiment of chapter 7: one stack of feed-forward sublayers, five ways to
wire each of them into the stream.

:class:`SublayerStack` stacks ``depth`` position-wise feed-forward sublayers
(chapter 6) wired as one of :data:`VARIANTS`: without residual or norm, with LayerNorm
only, with the residual only, Post-LN (eq. add-norm) and Pre-LN (eq. pre-ln). The two
Transformer placements are the library's own :class:`~transformer_lib.layers.Residual`,
the block the encoder and decoder layers use. :func:`teacher_task` is the small
regression problem the chapter trains the stacks on, and :func:`depth_profiles` the
statistics of freshly initialised stacks that its explorer draws.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..feed_forward import FeedForward
from ..layers import Residual
from ..norm import LayerNorm

# How each sublayer F is wired into the stream x (eq. residual, add-norm, pre-ln).
VARIANTS = {
    "plain": "x ← F(x)",
    "LN only": "x ← LN(F(x))",
    "residual": "x ← x + F(x)",
    "Post-LN": "x ← LN(x + F(x))",
    "Pre-LN": "x ← x + F(LN(x))",
}
D_MODEL = 32
DEPTHS = [4, 8, 16, 24]  # the depths of depth_profiles
EPS = 1e-5  # LayerNorm's epsilon, PyTorch's default


class _Replace(nn.Module):
    """The stream replaced by the sublayer's output, optionally normalised: F(x) or
    LN(F(x)). No residual: the two wirings a Transformer does not use."""

    def __init__(self, d_model: int, norm: bool) -> None:
        super().__init__()
        self.norm = LayerNorm(d_model, EPS) if norm else nn.Identity()

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        return self.norm(sublayer(x))


def wiring(variant: str, d_model: int) -> nn.Module:
    """The module that wires one sublayer as ``variant``: ``block(x, sublayer)``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    if variant in ("plain", "LN only"):
        return _Replace(d_model, norm=variant == "LN only")
    block = Residual(d_model, norm_first=variant == "Pre-LN", eps=EPS, dropout=0.0)
    if variant == "residual":
        block.norm = nn.Identity()  # LN(x + F(x)) without the LN: x + F(x)
    return block


class SublayerStack(nn.Module):
    """``depth`` FeedForward sublayers (d_ff = 2 d_model) wired as ``variant``, then a
    linear read-out. Pre-LN ends with a final LayerNorm before the read-out, as Pre-LN
    Transformers do."""

    def __init__(self, d_model: int, depth: int, variant: str) -> None:
        super().__init__()
        self.variant = variant
        self.sublayers = nn.ModuleList(
            [FeedForward(d_model, 2 * d_model) for _ in range(depth)]
        )
        self.blocks = nn.ModuleList([wiring(variant, d_model) for _ in range(depth)])
        pre_ln = variant == "Pre-LN"
        self.final_norm = LayerNorm(d_model, EPS) if pre_ln else nn.Identity()
        self.readout = nn.Linear(d_model, d_model)

    def step(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Sublayer i applied to the stream x (..., d_model), wired as ``variant``."""
        return self.blocks[i](x, self.sublayers[i])

    def forward(
        self, x: torch.Tensor, trace: list | None = None, skip: int | None = None
    ) -> torch.Tensor:
        """x (..., d_model) -> prediction (..., d_model).

        ``trace`` collects the stream after every sublayer; ``skip`` leaves sublayer
        number ``skip`` out (the stream passes it unchanged).
        """
        for i in range(len(self.sublayers)):
            if i != skip:
                x = self.step(x, i)
            if trace is not None:
                trace.append(x.detach())
        return self.readout(self.final_norm(x))


def teacher_task(
    n: int, d_model: int = D_MODEL, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """n inputs x ~ N(0, I) and targets y = 2 tanh(x A) B of a fixed random teacher."""
    g = torch.Generator().manual_seed(1234)  # the teacher is the same for every call
    A = torch.randn(d_model, 2 * d_model, generator=g) / d_model**0.5
    B = torch.randn(2 * d_model, d_model, generator=g) / (2 * d_model) ** 0.5
    x = torch.randn(n, d_model, generator=torch.Generator().manual_seed(seed))
    return x, 2 * torch.tanh(x @ A) @ B


def mean_similarity(h: torch.Tensor) -> float:
    """The mean cosine similarity between the vectors of different inputs: h (n, d),
    one row per input, the n (n - 1) pairs of different rows."""
    u = F.normalize(h, dim=-1)  # (n, d), unit rows
    c = u @ u.T  # (n, n)
    n = c.size(0)
    return ((c.sum() - c.diagonal().sum()) / (n * (n - 1))).item()


def init_statistics(
    depth: int, variant: str, x: torch.Tensor, y: torch.Tensor, seed: int = 0
) -> dict[str, np.ndarray]:
    """A fresh stack's gradient norm per sublayer ("grad"), and at every depth the
    stream's mean norm ("act") and the similarity of different inputs ("sim")."""
    torch.manual_seed(seed)
    model = SublayerStack(x.size(-1), depth, variant)
    trace = [x]
    F.mse_loss(model(x, trace), y).backward()
    grad = [
        torch.sqrt(sum(p.grad.pow(2).sum() for p in s.parameters())).item()
        for s in model.sublayers
    ]
    act = [h.norm(dim=-1).mean().item() for h in trace]  # ||x_l||, batch mean
    sim = [mean_similarity(h) for h in trace]
    return {"grad": np.array(grad), "act": np.array(act), "sim": np.array(sim)}


@lru_cache(maxsize=1)
def depth_profiles() -> dict[tuple[int, str], dict[str, np.ndarray]]:
    """init_statistics for every depth in DEPTHS and every variant, computed once
    (about 0.3 s): ``{(depth, variant): statistics}``."""
    x, y = teacher_task(64, seed=99)
    return {(L, v): init_statistics(L, v, x, y) for L in DEPTHS for v in VARIANTS}
