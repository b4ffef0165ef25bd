"""Softmax and scaled dot-product attention (chapters 2-4).

Shapes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); masks broadcast to
(..., T_q, T_k) and are bool with True = may attend, as in
``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._validate import check_mask, check_qkv

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x)
    (eq. softmax, stable-softmax).

    Subtracting the row maximum changes nothing mathematically and keeps exp() from
    overflowing, so logits of +-1e4 stay finite. A slice that is entirely -inf (nothing
    allowed) returns all zeros instead of NaN, and its gradient is zero too, whatever
    the upstream gradient (its sum of exponentials is 0, and is replaced by 1 before the
    division, so no 1/0 or 1/tiny reaches the backward pass). float16/bfloat16 inputs
    are computed in float32 and cast back.
    """
    out_dtype = x.dtype
    if out_dtype in _LOW_PRECISION:
        x = x.float()
    m = x.amax(dim=dim, keepdim=True)
    # an all -inf slice keeps exp() = 0
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)  # >= 1 unless the slice is entirely -inf (then 0)
    # e / 1 = 0 for such a slice, and d(e/s)/de = 1/s stays finite in the backward pass
    s = torch.where(s > 0, s, torch.ones_like(s))
    return (e / s).to(out_dtype)


def attention_scores(
    q: torch.Tensor, k: torch.Tensor, scale: bool = True
) -> torch.Tensor:
    """S = Q K^T / sqrt(d_k)   (eq. scores, scaled-scores); (..., T_q, T_k).

    ``scale=False`` gives Q K^T.
    """
    check_qkv(q, k, k)
    s = q @ k.transpose(-2, -1)  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)
    return s / math.sqrt(q.size(-1)) if scale else s


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V   (eq. attention);
    returns (out, weights).

    out: (..., T_q, d_v); weights: (..., T_q, T_k). Masked scores become -inf before the
    softmax. A query row whose mask allows no key gets all-zero weights and therefore a
    zero output.
    """
    check_qkv(q, k, v)
    scores = attention_scores(q, k)  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    # (..., T_q, T_k), rows sum to 1 (or 0 if fully masked)
    weights = softmax(scores, dim=-1)
    return weights @ v, weights  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """The fast path: ``F.scaled_dot_product_attention`` with this library's
    conventions.

    Same result as :func:`scaled_dot_product_attention` (fully masked rows give zeros),
    but the weights are never materialised for the caller. With ``enable_gqa`` k/v may
    carry fewer heads (dim -3) than q.
    """
    if mask is not None:
        check_mask(mask, q.shape[:-1] + k.shape[-2:-1])  # scores: (..., T_q, T_k)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=enable_gqa)
    if mask is not None:
        # (..., T_q, 1): rows with at least one key
        allowed = mask.any(dim=-1, keepdim=True)
        out = out.masked_fill(~allowed, 0.0)
    return out
