"""The position-wise feed-forward network (chapter 6), its activations, and its gated
form (GLU variants: SwiGLU, GEGLU)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU_tanh(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    (eq. gelu-tanh).

    GPT-2's approximation of the exact GELU x * Phi(x); equal to
    ``F.gelu(x, approximate="tanh")`` and to ``transformers``' "gelu_new".
    """
    return (
        0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    )


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU(x) = x * sigma(x) = x / (1 + e^(-x))   (eq. silu), also called Swish;
    equal to ``F.silu``."""
    return x * torch.sigmoid(x)


def _gelu_tanh_fused(x: torch.Tensor) -> torch.Tensor:
    """:func:`gelu_tanh` in one PyTorch kernel (forward and backward)."""
    return F.gelu(x, approximate="tanh")


# name -> activation. The fast path: PyTorch's fused kernels, equal to the formulas
# above (tests/test_modern_block.py checks it); "gelu" is the exact x * Phi(x) (erf).
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": _gelu_tanh_fused,
    "silu": F.silu,
}


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2   (eq. ffn),
    applied to every position alone.

    ``activation`` replaces max(0, .): "relu", "gelu" (exact, x * Phi(x)), "gelu_tanh"
    (GPT-2's, eq. gelu-tanh) or "silu" (eq. silu). Usually d_ff = 4 d_model.

    ``gated=True`` is the gated form (eq. glu-ffn)

        FFN_gated(x) = (act(x W_gate) * (x W_up)) W_down,

    with * elementwise: W_gate is ``linear1``, W_down is ``linear2``, and the extra
    W_up is ``linear_up``. With "silu" this is SwiGLU (Llama's feed-forward), with
    "gelu" GEGLU. It has three d_model x d_ff matrices instead of two, so equal size
    means d_ff = 8/3 d_model instead of 4 d_model. ``bias=False`` drops every b.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
        gated: bool = False,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}"
            )
        self.activation, self.gated = activation, gated
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)  # W_1 (W_gate), b_1
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # W_2 (W_down), b_2
        # W_up, gated form only
        self.linear_up = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, d_model) -> (B, T, d_ff)
        h = ACTIVATIONS[self.activation](self.linear1(x))
        if self.gated:
            h = h * self.linear_up(x)  # (B, T, d_ff), elementwise gate
        return self.linear2(self.dropout(h))  # (B, T, d_ff) -> (B, T, d_model)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, gated={self.gated}"
