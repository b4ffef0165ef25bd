"""The KV cache (chapter 12): one cached attention step, the per-layer cache of a
decoder, and :class:`CacheSlot`, the one layer's view of it that every block takes.

The cached-step protocol: a model hands block i ``cache.slot(i)``; the block projects
its new K, V, calls ``slot.append(k_new, v_new)`` (eq. kv-append) and attends over what
it returns (eq. kv-step). The memory formula, ``kv_cache_nbytes``, lives in
:mod:`.costs`.
"""

from __future__ import annotations

import torch

from .attention import scaled_dot_product_attention
from .heads import repeat_kv
from .masks import causal_mask
from .positional import apply_rope

__all__ = ["CacheSlot", "KVCache", "cached_attention_step"]


def cached_attention_step(
    q_new: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    rope: bool = False,
    rope_base: float = 10000.0,
    rope_layout: str = "interleaved",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoding step with a KV cache   (eq. kv-append, kv-step).

    q_new (B, h, T_new, d_k); k_new, v_new (B, h_kv, T_new, d_k); cache_k, cache_v
    (B, h_kv, T_past, d_k), T_past may be 0. The new tokens sit at positions
    T_past, ..., T_past + T_new - 1: with ``rope`` they are rotated there before K joins
    the cache (the cache stores rotated keys), with ``rope_base`` (a model's
    ``rope_theta``: 10000 in RoFormer and Llama 2, 500000 in Llama 3) and
    ``rope_layout`` ("interleaved" or "half", as in :func:`apply_rope`). K and V are
    appended, and the new queries attend causally over all T_past + T_new keys.
    Returns (out (B, h, T_new, d_k), cache_k, cache_v), the caches now
    T_past + T_new long.
    """
    if cache_k.shape != cache_v.shape or cache_k.shape[:2] != k_new.shape[:2]:
        raise ValueError(
            f"cache_k {tuple(cache_k.shape)}, cache_v {tuple(cache_v.shape)} "
            f"and k_new {tuple(k_new.shape)} "
            "must agree in (B, h_kv) and cache_k must have the shape of cache_v"
        )
    T_past, T_new = cache_k.size(-2), q_new.size(-2)
    if rope:
        positions = torch.arange(T_past, T_past + T_new, device=q_new.device)
        q_new = apply_rope(q_new, positions, base=rope_base, layout=rope_layout)
        k_new = apply_rope(k_new, positions, base=rope_base, layout=rope_layout)
    cache_k = torch.cat([cache_k, k_new], dim=-2)  # (B, h_kv, T_past + T_new, d_k)
    cache_v = torch.cat([cache_v, v_new], dim=-2)
    n_rep = q_new.size(1) // cache_k.size(1)
    # (T_new, T_past + T_new), end-aligned
    mask = causal_mask(T_new, T_past + T_new, device=q_new.device)
    out, _ = scaled_dot_product_attention(
        q_new, repeat_kv(cache_k, n_rep), repeat_kv(cache_v, n_rep), mask
    )
    return out, cache_k, cache_v


class KVCache:
    """What a decoder keeps between decoding steps, per decoder layer
    (eq. kv-append, kv-memory-total).

    - self-attention K and V, each (B, h_kv, T, d_k), one position appended per step;
    - cross-attention K and V of the encoder output, each (B, h_kv, T_src, d_k),
      computed once.

    ``capacity`` preallocates that many positions and writes each new K/V row in place,
    so a step costs O(1) copying. ``capacity=None`` grows the tensors with
    ``torch.cat``, which copies the whole cache at every step: simpler, same results,
    more memory traffic.
    """

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_kv_heads: int,
        d_k: int,
        capacity: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        if capacity is not None and capacity < 0:
            raise ValueError(f"capacity must be >= 0 or None, got {capacity}")
        self.n_layers, self.capacity = n_layers, capacity
        # (B, h_kv, T, d_k)
        shape = (batch, n_kv_heads, 0 if capacity is None else capacity, d_k)
        self._k = [
            torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)
        ]
        self._v = [
            torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)
        ]
        self._len = [0] * n_layers
        # (B, h_kv, T_src, d_k)
        self.cross_k: list[torch.Tensor | None] = [None] * n_layers
        self.cross_v: list[torch.Tensor | None] = [None] * n_layers
        # source key mask, broadcastable to (B, 1, 1, T_src)
        self.cross_mask: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """Decoder positions held so far (the T of the self-attention cache)."""
        return self._len[0]

    def append(
        self, layer: int, k_new: torch.Tensor, v_new: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K <- [K; k_new], V <- [V; v_new] for one layer   (eq. kv-append);
        returns the full K, V (B, h_kv, T, d_k)."""
        T0, T_new = self._len[layer], k_new.size(-2)
        if self.capacity is None:
            # copies all T0 + T_new rows
            self._k[layer] = torch.cat([self._k[layer], k_new], dim=-2)
            self._v[layer] = torch.cat([self._v[layer], v_new], dim=-2)
        else:
            if T0 + T_new > self.capacity:
                raise ValueError(
                    f"KV cache full: layer {layer} holds {T0} positions, "
                    f"{T_new} more would exceed capacity={self.capacity}"
                )
            self._k[layer][:, :, T0 : T0 + T_new] = k_new  # write the new rows in place
            self._v[layer][:, :, T0 : T0 + T_new] = v_new
        self._len[layer] = T0 + T_new
        return self.self_kv(layer)

    def self_kv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The self-attention K, V of one layer held so far, each (B, h_kv, T, d_k)
        (views, no copy)."""
        T = self._len[layer]
        return self._k[layer][:, :, :T], self._v[layer][:, :, :T]

    def slot(self, layer: int) -> CacheSlot:
        """Layer ``layer``'s view of the cache, what its block is handed."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must lie in [0, {self.n_layers}), got {layer}")
        return CacheSlot(self, layer)

    def set_cross(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the cross-attention K, V (B, h_kv, T_src, d_k) of the encoder output,
        computed once."""
        self.cross_k[layer], self.cross_v[layer] = k, v

    def tensors(self) -> list[torch.Tensor]:
        """Every K/V tensor the cache holds: per layer self K, self V, then cross K,
        cross V if set."""
        out = []
        for i in range(self.n_layers):
            out += list(self.self_kv(i))
            out += [t for t in (self.cross_k[i], self.cross_v[i]) if t is not None]
        return out

    def nbytes(self) -> int:
        """Bytes of the K/V held (the filled part of a preallocated buffer): compare
        with :func:`kv_cache_nbytes`."""
        return sum(t.nbytes for t in self.tensors())

    def allocated_nbytes(self) -> int:
        """Bytes actually allocated, including preallocated positions not filled yet."""
        own = sum(t.untyped_storage().nbytes() for t in self._k + self._v)
        return own + sum(
            t.untyped_storage().nbytes()
            for t in self.cross_k + self.cross_v
            if t is not None
        )


class CacheSlot:
    """One layer's part of a :class:`KVCache`: ``append`` its new self-attention K, V
    (eq. kv-append) and read the encoder output's cross-attention K, V."""

    def __init__(self, cache: KVCache, layer: int) -> None:
        self.cache, self.layer = cache, layer

    @property
    def length(self) -> int:
        """Positions this layer holds so far (T_past)."""
        return self.cache._len[self.layer]

    def append(
        self, k_new: torch.Tensor, v_new: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K <- [K; k_new], V <- [V; v_new]   (eq. kv-append); returns K, V, each
        (B, h_kv, T_past + T_new, d_k)."""
        return self.cache.append(self.layer, k_new, v_new)

    def cross_kv(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder output's cross-attention K, V, (B, h_kv, T_src, d_k) each."""
        k, v = self.cache.cross_k[self.layer], self.cache.cross_v[self.layer]
        if k is None:
            raise ValueError(
                f"layer {self.layer} of the cache holds no cross-attention K, V: "
                "make the cache with Transformer.init_cache(memory)"
            )
        return k, v

    def set_cross(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the cross-attention K, V (B, h_kv, T_src, d_k), computed once."""
        self.cache.set_cross(self.layer, k, v)
