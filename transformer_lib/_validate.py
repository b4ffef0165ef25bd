"""Input checks shared by the library: each raises with the offending shapes or values
named."""

from __future__ import annotations

import torch


def check_mask(
    mask: torch.Tensor, scores_shape: torch.Size, *, what: str = "mask"
) -> None:
    """Refuse a non-bool mask and a mask that cannot broadcast to the scores
    `(..., T_q, T_k)`."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{what} must be a torch.Tensor of dtype bool, got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{what} must be a bool tensor (True = may attend), "
            f"got dtype {mask.dtype}. "
            "An additive float mask of 0/-inf converts with `mask == 0`; "
            "a 0/1 integer mask with `mask.bool()`."
        )
    try:
        shape = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        shape = None
    if shape != scores_shape:
        raise ValueError(
            f"{what} of shape {tuple(mask.shape)} cannot broadcast to the attention "
            f"scores of shape {tuple(scores_shape)} (..., T_q, T_k)"
        )


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dims (..., T, d), "
                f"got shape {tuple(t.shape)}"
            )
    if q.size(-1) != k.size(-1):
        raise ValueError(
            "q and k must share their last (feature) size d_k: "
            f"q has shape {tuple(q.shape)}, k has shape {tuple(k.shape)}"
        )
    if k.size(-2) != v.size(-2):
        raise ValueError(
            "k and v must have the same number of keys T_k: "
            f"k has shape {tuple(k.shape)}, v has shape {tuple(v.shape)}"
        )


def check_divisible(d_model: int, n_heads: int, n_kv_heads: int | None = None) -> None:
    if n_heads <= 0 or d_model <= 0:
        raise ValueError(
            "d_model and n_heads must be positive, "
            f"got d_model={d_model}, n_heads={n_heads}"
        )
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: "
            f"each head needs d_k = d_model / n_heads features"
        )
    if n_kv_heads is not None and (n_kv_heads <= 0 or n_heads % n_kv_heads != 0):
        raise ValueError(
            f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}: "
            "grouped-query attention needs the same number of query heads "
            "in every group"
        )
