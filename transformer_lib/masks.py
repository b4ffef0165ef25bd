"""Attention masks (chapter 4).

Bool, True = may attend, broadcastable to (B, h, T_q, T_k).
"""

from __future__ import annotations

import torch


def causal_mask(
    T_q: int, T_k: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """M[i, j] = (j <= i + (T_k - T_q))   (eq. causal-mask); shape (T_q, T_k).

    Aligned to the end: the last query sees every key. With T_q == T_k this is the lower
    triangle including the diagonal; with T_q = 1 (one new token, cached keys) it allows
    all keys.
    """
    T_k = T_q if T_k is None else T_k
    if T_q < 0 or T_k < 0:
        raise ValueError(f"sizes must be non-negative, got T_q={T_q}, T_k={T_k}")
    i = torch.arange(T_q, device=device).unsqueeze(1)  # (T_q, 1)
    j = torch.arange(T_k, device=device).unsqueeze(0)  # (1, T_k)
    return j <= i + (T_k - T_q)  # (T_q, T_k)


def padding_mask(lengths: torch.Tensor | list[int], T: int) -> torch.Tensor:
    """M[b, 0, 0, j] = (j < lengths[b])   (eq. padding-mask);
    shape (B, 1, 1, T), True at real tokens."""
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > T):
        raise ValueError(f"every length must lie in [0, T={T}], got {lengths.tolist()}")
    j = torch.arange(T, device=lengths.device)  # (T,)
    return (j.unsqueeze(0) < lengths.unsqueeze(1))[:, None, None, :]  # (B, 1, 1, T)


def key_padding_to_attend(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """Translate PyTorch's ``key_padding_mask`` (B, T_k), True = *ignore*, to this
    library's convention (B, 1, 1, T_k), True = may attend."""
    return (~key_padding_mask.bool())[:, None, None, :]
