"""Layer normalisation (chapter 7) and RMSNorm, its uncentred form."""

from __future__ import annotations

import torch
import torch.nn as nn


def layer_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """LN(z) = gamma * (z - mu) / sqrt(sigma^2 + eps) + beta over the last dim
    (eq. layer-norm).

    mu and sigma^2 are the mean and the *biased* variance (divide by N) of the last
    dimension, eps sits inside the square root: exactly ``nn.LayerNorm``. The input is
    centred before squaring, so a large common offset (1e4) does not cancel
    catastrophically.
    """
    if gamma.shape != x.shape[-1:] or beta.shape != x.shape[-1:]:
        raise ValueError(
            f"gamma {tuple(gamma.shape)} and beta {tuple(beta.shape)} must both have "
            f"shape ({x.size(-1)},), the last dim of x {tuple(x.shape)}"
        )
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    centred = x - mu
    # biased: divide by N, (..., 1)
    var = (centred * centred).mean(dim=-1, keepdim=True)
    return gamma * centred / torch.sqrt(var + eps) + beta


def layer_norm_article(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """The first source article's form, gamma * (z - mu) / (sigma + eps) + beta
    (eq. layer-norm-article).

    Shown in chapter 7 for comparison only: it differs from ``nn.LayerNorm`` when sigma
    is comparable to sqrt(eps). The library's layers use :func:`layer_norm`.
    """
    mu = x.mean(dim=-1, keepdim=True)
    sigma = (x - mu).pow(2).mean(dim=-1, keepdim=True).sqrt()
    return gamma * (x - mu) / (sigma + eps) + beta


class LayerNorm(nn.Module):
    """:func:`layer_norm` with learned gamma (``weight``) and beta (``bias``); loads
    ``nn.LayerNorm``'s state_dict."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm(z) = gamma * z / sqrt(mean(z^2) + eps) over the last dim
    (eq. rms-norm).

    LayerNorm (eq. layer-norm) without the centring (no mu) and without the shift (no
    beta): the root mean square replaces the standard deviation. eps sits inside the
    square root, as in ``torch.nn.RMSNorm`` and Llama.
    """
    if weight.shape != x.shape[-1:]:
        raise ValueError(
            f"weight {tuple(weight.shape)} must have shape ({x.size(-1)},), "
            f"the last dim of x {tuple(x.shape)}"
        )
    ms = (x * x).mean(dim=-1, keepdim=True)  # (..., 1): mean of squares
    return weight * x * torch.rsqrt(ms + eps)


class RMSNorm(nn.Module):
    """:func:`rms_norm` with a learned gamma (``weight``), no bias; loads
    ``torch.nn.RMSNorm``'s state_dict (give it the same eps: its default, None, means
    the dtype's machine epsilon)."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"
