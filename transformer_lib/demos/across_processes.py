"""What chapter 18 runs on every rank, and what
``scripts/attention_across_processes.py`` runs under ``torchrun``: ring attention and a
tensor-parallel GPT, each checked against the computation in one process and measured
(bytes sent, memory held).

Each ``rank_*`` function is called on every rank of an initialised process group and
returns that rank's findings as plain numbers.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..configs import GPTConfig
from ..costs import ring_attention_bytes_sent, tensor_parallel_bytes_sent
from ..gpt import GPT
from ..measure import peak_allocated_bytes
from ..parallel import count_bytes_sent, ring_attention, shard_gpt


def whole_qkv(
    B: int, h: int, h_kv: int, T: int, d: int, seed: int = 0, dtype=torch.float64
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole sequence's q (B, h, T, d), k and v (B, h_kv, T, d), the same on every
    rank (drawn from ``seed``)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, T, d, generator=g, dtype=dtype)
    k = torch.randn(B, h_kv, T, d, generator=g, dtype=dtype)
    v = torch.randn(B, h_kv, T, d, generator=g, dtype=dtype)
    return q, k, v


def rank_ring_attention(
    rank: int,
    world_size: int,
    B: int = 1,
    h: int = 4,
    h_kv: int = 2,
    T: int = 256,
    d: int = 16,
    causal: bool = True,
    seed: int = 0,
) -> dict:
    """Ring attention on this rank's shard of a sequence of T positions, against
    ``F.scaled_dot_product_attention`` over the whole sequence; with the bytes this
    rank sent (measured and by eq. ring-bytes) and its peak memory."""
    q, k, v = whole_qkv(B, h, h_kv, T, d, seed)
    shard = [torch.tensor_split(t, world_size, dim=2)[rank] for t in (q, k, v)]
    stats: dict = {}
    dist.barrier()
    out, sent = count_bytes_sent(ring_attention, *shard, causal=causal, stats=stats)
    want = F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, enable_gqa=h_kv < h
    )
    want = torch.tensor_split(want, world_size, dim=2)[rank]
    lengths = stats["shard_lengths"]
    dist.barrier()
    peak = peak_allocated_bytes(ring_attention, *shard, causal=causal)
    return dict(
        error=(out - want).abs().max().item(),
        bytes_measured=sent,
        bytes_formula=ring_attention_bytes_sent(lengths, B, h_kv, d, q.dtype)[rank],
        blocks_computed=stats["blocks_computed"],
        blocks_skipped=stats["blocks_skipped"],
        peak_bytes=peak,
        shard_length=lengths[rank],
    )


def rank_tensor_parallel(
    rank: int,
    world_size: int,
    cfg: GPTConfig | None = None,
    B: int = 2,
    T: int = 16,
    seed: int = 0,
) -> dict:
    """A GPT split over the ranks (every block's heads and hidden units), against the
    whole model in one process: the largest logit difference, and the bytes this rank
    sent in the forward pass (measured and by eq. tp-bytes)."""
    cfg = cfg or GPTConfig.llama(
        vocab_size=64, d_model=64, n_heads=8, n_kv_heads=4, n_layers=2, d_ff=128,
        max_len=T,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = GPT(cfg).to(torch.float64).eval()
        idx = torch.randint(0, cfg.vocab_size, (B, T))
    part = shard_gpt(model, rank, world_size)
    with torch.no_grad():
        want = model(idx)
        dist.barrier()
        got, sent = count_bytes_sent(part, idx)
    return dict(
        error=(got - want).abs().max().item(),
        bytes_measured=sent,
        bytes_formula=tensor_parallel_bytes_sent(
            B, T, cfg.d_model, cfg.n_layers, world_size, torch.float64
        ),
    )


def rank_chapter(
    rank: int,
    world_size: int,
    T: int = 512,
    train_steps: int = 20,
) -> dict:
    """Everything chapter 18 measures on one process group, so that the ranks start
    once: causal ring attention over T positions (B = 1, h = 4, h_kv = 2, d = 32), the
    tensor-parallel GPT of :func:`rank_tensor_parallel` on a (4, 128) batch, and, on 2
    ranks, ring attention without the mask, the data-parallel gradient and
    ``train_steps`` steps of data-parallel training (float64) of the addition GPT."""
    from .data_parallel import rank_gradient, rank_train

    out = dict(
        ring=rank_ring_attention(rank, world_size, B=1, h=4, h_kv=2, T=T, d=32),
        tp=rank_tensor_parallel(rank, world_size, B=4, T=128),
    )
    if world_size == 2:
        out["ring_full"] = rank_ring_attention(
            rank, world_size, B=1, h=4, h_kv=2, T=T, d=32, causal=False
        )
        out["grad"] = rank_gradient(rank, world_size, 0, 32)
        out["train"] = rank_train(
            rank, world_size, 0, train_steps, 32, 3, 3e-3, torch.float64
        )
    return out
