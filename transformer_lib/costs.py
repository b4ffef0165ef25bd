"""What a model costs, counted from its sizes alone: the bytes of a KV cache, the
multiply-adds of greedy decoding (chapters 5 and 12), the memory traffic of attention
(chapter 13) and the bytes sent when attention runs across processes.

Plain arithmetic on sizes: no model is built or imported (the tiles of flash attention
are counted with :func:`~transformer_lib.flash.attention_tiles`). The
functions that count a whole model take any object with the sizes of
:class:`ModelSizes` (a :class:`~transformer_lib.TransformerConfig` has them).
"""

from __future__ import annotations

from typing import Protocol

import torch

from .flash import attention_tiles


class ModelSizes(Protocol):
    """The sizes the counts read, as a :class:`~transformer_lib.TransformerConfig`
    holds them."""

    vocab_size: int
    d_model: int
    n_heads: int  # h
    n_kv_heads: int  # K/V heads, h_kv in the formulas
    n_layers: int  # L
    d_ff: int


def kv_cache_nbytes(
    n_layers: int,
    batch: int,
    n_kv_heads: int,
    T: int,
    d_k: int,
    dtype: torch.dtype = torch.float32,
) -> int:
    """Bytes of a KV cache: 2 * n_layers * batch * n_kv_heads * T * d_k * bytes
    (eq. kv-memory, kv-memory-total).

    The 2 counts K and V. For an encoder-decoder, T is the decoder positions held for
    self-attention plus T_src for the cross-attention K/V. GQA divides the total by
    h / n_kv_heads.
    """
    bytes_per_number = torch.empty((), dtype=dtype).element_size()
    return 2 * n_layers * batch * n_kv_heads * T * d_k * bytes_per_number


def decode_step_macs(cfg: ModelSizes, t: int, T_src: int, use_cache: bool) -> int:
    """Multiply-adds of the matrix products in greedy decoding step t (1-based;
    t decoder positions)   (eq. decode-macs).

    Without a cache the decoder reprocesses all t positions: the projections and FFN of
    t rows, t x t attention scores, the cross-attention K/V of the T_src memory rows.
    With a cache only the newest row is processed, against t cached keys; the memory's
    K/V were computed once (see :func:`generate_macs`). Both project only the last
    position to the vocabulary. LayerNorms, softmax, embeddings and additions are left
    out: they are O(t d_model), not matrix products.
    """
    d, L = cfg.d_model, cfg.n_layers
    d_kv = cfg.n_kv_heads * (d // cfg.n_heads)  # n_kv_heads * d_k
    rows = 1 if use_cache else t  # positions pushed through the decoder this step
    per_layer = (
        # self-attention: W_Q, W_O (d x d) and W_K, W_V (d x d_kv)
        rows * (2 * d * d + 2 * d * d_kv)
        # self-attention: Q K^T and weights @ V, h heads of d_k = d in all
        + 2 * rows * t * d
        # cross-attention: W_Q and W_O
        + rows * 2 * d * d
        # cross-attention scores and weighted sum over the memory
        + 2 * rows * T_src * d
        # cross-attention K, V of memory, recomputed
        + (0 if use_cache else 2 * T_src * d * d_kv)
        # FFN: W_1 and W_2
        + rows * 2 * d * cfg.d_ff
    )
    # + the output projection of the last position
    return L * per_layer + d * cfg.vocab_size


def generate_macs(cfg: ModelSizes, T_src: int, n_new: int, use_cache: bool) -> int:
    """Multiply-adds of greedy decoding of ``n_new`` tokens for one sequence: the
    encoder (once, on both paths), the cross-attention K/V of the memory (once, with a
    cache) and every step's :func:`decode_step_macs`."""
    d = cfg.d_model
    d_kv = cfg.n_kv_heads * (d // cfg.n_heads)
    encoder = cfg.n_layers * (
        T_src * (2 * d * d + 2 * d * d_kv)
        + 2 * T_src * T_src * d
        + T_src * 2 * d * cfg.d_ff
    )
    cross_kv = cfg.n_layers * 2 * T_src * d * d_kv if use_cache else 0
    return (
        encoder
        + cross_kv
        + sum(decode_step_macs(cfg, t, T_src, use_cache) for t in range(1, n_new + 1))
    )


def hbm_traffic(
    T_q: int,
    T_k: int,
    d_k: int,
    d_v: int,
    block_q: int | None = None,
    block_k: int | None = None,
    *,
    causal: bool = False,
) -> int:
    """Numbers moved between main memory (a GPU's HBM) and fast on-chip memory by one
    head's attention forward pass (eq. io-standard, io-flash).

    ``block_q=None``: the explicit algorithm, which writes S and P out and reads them
    back, 4 T_q T_k + (T_q + T_k) d_k + T_k d_v + T_q d_v. Otherwise the tiles of
    :func:`~transformer_lib.tiled_attention`: each query block is read once and its
    output and log-sum-exp written once, T_q (d_k + d_v + 1), and every tile reads its
    keys and values, b_k (d_k + d_v); with b_q | T_q and no causal skipping that is
    T_q (d_k + d_v + 1) + (T_q / b_q) T_k (d_k + d_v).
    """
    if block_q is None:
        return 4 * T_q * T_k + (T_q + T_k) * d_k + T_k * d_v + T_q * d_v
    tiles = attention_tiles(T_q, T_k, block_q, block_k or block_q, causal=causal)
    return T_q * (d_k + d_v + 1) + sum((j1 - j0) * (d_k + d_v) for *_, j0, j1 in tiles)


def ring_attention_bytes_sent(
    shard_lengths: list[int], batch: int, n_kv_heads: int, d_k: int, dtype: torch.dtype
) -> list[int]:
    """Bytes each rank sends in ring attention (eq. ring-bytes): in the first P - 1
    steps, rank r passes on the K and V shards of ranks r, r - 1, ..., r - P + 2,
    2 B h_kv T_s d_k bytes each; the shard of rank r + 1 it never sends."""
    P = len(shard_lengths)
    size = torch.tensor([], dtype=dtype).element_size()
    per_position = 2 * batch * n_kv_heads * d_k * size
    return [
        per_position * (sum(shard_lengths) - shard_lengths[(r + 1) % P]) if P > 1 else 0
        for r in range(P)
    ]


def all_reduce_bytes_sent(nbytes: int, world_size: int) -> int:
    """Bytes each rank sends in a ring all-reduce of ``nbytes`` (eq. ring-all-reduce):
    P - 1 steps of reduce-scatter and P - 1 of all-gather, each passing one P-th of
    the tensor, 2 (P - 1) / P * nbytes in all, whatever P."""
    if world_size < 1 or nbytes < 0:
        raise ValueError(
            f"need world_size >= 1 and nbytes >= 0, got {world_size} and {nbytes}"
        )
    return 2 * (world_size - 1) * nbytes // world_size


def tensor_parallel_bytes_sent(
    batch: int, T: int, d_model: int, n_layers: int, world_size: int, dtype: torch.dtype
) -> int:
    """Bytes each rank sends in one forward pass of a tensor-parallel stack of
    ``n_layers`` blocks (eq. tp-bytes): two all-reduces per block, one per sublayer,
    each of the (B, T, d_model) activations."""
    size = torch.tensor([], dtype=dtype).element_size()
    return 2 * n_layers * all_reduce_bytes_sent(batch * T * d_model * size, world_size)
