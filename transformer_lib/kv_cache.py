"""Cached attention for autoregressive decoding (chapter 12)."""

from __future__ import annotations

import torch

from .attention import scaled_dot_product_attention
from .heads import repeat_kv
from .masks import causal_mask
from .positional import apply_rope


def cached_attention_step(
    q_new: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    rope: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoding step with a KV cache   (eq. kv-append, kv-step).

    q_new (B, h, T_new, d_k); k_new, v_new (B, h_kv, T_new, d_k); cache_k, cache_v (B, h_kv, T_past, d_k),
    T_past may be 0. The new tokens sit at positions T_past, ..., T_past + T_new - 1: with ``rope``
    they are rotated there before K joins the cache (the cache stores rotated keys). K and V are
    appended, and the new queries attend causally over all T_past + T_new keys.
    Returns (out (B, h, T_new, d_k), cache_k, cache_v), the caches now T_past + T_new long.
    """
    if cache_k.shape != cache_v.shape or cache_k.shape[:2] != k_new.shape[:2]:
        raise ValueError(
            f"cache_k {tuple(cache_k.shape)}, cache_v {tuple(cache_v.shape)} and k_new {tuple(k_new.shape)} "
            "must agree in (B, h_kv) and cache_k must have the shape of cache_v"
        )
    T_past, T_new = cache_k.size(-2), q_new.size(-2)
    if rope:
        positions = torch.arange(T_past, T_past + T_new, device=q_new.device)
        q_new, k_new = apply_rope(q_new, positions), apply_rope(k_new, positions)
    cache_k = torch.cat([cache_k, k_new], dim=-2)  # (B, h_kv, T_past + T_new, d_k)
    cache_v = torch.cat([cache_v, v_new], dim=-2)
    n_rep = q_new.size(1) // cache_k.size(1)
    mask = causal_mask(T_new, T_past + T_new, device=q_new.device)  # (T_new, T_past + T_new), end-aligned
    out, _ = scaled_dot_product_attention(q_new, repeat_kv(cache_k, n_rep), repeat_kv(cache_v, n_rep), mask)
    return out, cache_k, cache_v
