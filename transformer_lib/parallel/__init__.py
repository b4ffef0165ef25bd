"""Attention across processes, on ``torch.distributed``: ring attention (the sequence
split over ranks), tensor-parallel heads and feed-forward (the weights split over
ranks).

Every function here is called on every rank of an initialised process group
(``group=None`` is the default group); :func:`run_ranks` starts such a group of local
processes (gloo on 127.0.0.1) for the book and the tests. Ranks are numbered 0 .. P - 1;
``P`` is the world size.
"""

from __future__ import annotations

from .launch import count_bytes_sent, run_ranks
from .ring import block_attention, ring_attention
from .tensor import (
    ParallelFeedForward,
    ParallelMultiHeadAttention,
    copy_to_ranks,
    reduce_from_ranks,
    shard_block,
    shard_feed_forward,
    shard_gpt,
    shard_multi_head_attention,
)

__all__ = [
    "block_attention",
    "ring_attention",
    "copy_to_ranks",
    "reduce_from_ranks",
    "ParallelMultiHeadAttention",
    "ParallelFeedForward",
    "shard_multi_head_attention",
    "shard_feed_forward",
    "shard_block",
    "shard_gpt",
    "run_ranks",
    "count_bytes_sent",
]
