"""Ring attention (chapter 18): the sequence split over the ranks, the K/V shards
passed around the ring, the partial outputs merged by their log-sum-exps."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..attention import attention_scores
from ..flash import merge_attention
from ..heads import repeat_kv


def _world(group: dist.ProcessGroup | None) -> tuple[int, int]:
    if not dist.is_initialized():
        raise RuntimeError(
            "no process group: call torch.distributed.init_process_group first "
            "(or start the ranks with transformer_lib.parallel.run_ranks)"
        )
    return dist.get_rank(group), dist.get_world_size(group)


def _global_rank(group: dist.ProcessGroup | None, rank: int) -> int:
    return rank if group is None else dist.get_global_rank(group, rank)


def block_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q over one block of keys, with its log-sum-exp:
    O_s = softmax(S_s) V_s, L_s = log sum_j e^{S_s,ij}, S_s = Q K_s^T / sqrt(d_k)
    (eq. scaled-scores, lse).

    q (B, h, T_q, d), k and v (B, h, T_s, d), mask (T_q, T_s) bool or None; returns
    O_s (B, h, T_q, d) and L_s (B, h, T_q). A row the mask leaves without a key has
    L_s = -inf and O_s = 0, and weighs nothing when the blocks are merged.
    """
    scores = attention_scores(q, k)  # (B, h, T_q, T_s)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # (B, h, T_q)
    shift = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    p = torch.exp(scores - shift.unsqueeze(-1))  # (B, h, T_q, T_s), rows sum to 1 or 0
    return p @ v, lse  # (B, h, T_q, T_s) @ (B, h, T_s, d) -> (B, h, T_q, d)


def _check_ring_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            "ring_attention expects q (B, h, T_r, d) and k, v (B, h_kv, T_r, d); got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if k.shape != v.shape:
        raise ValueError(
            f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape"
        )
    B, h, T_r, d = q.shape
    if k.shape[0] != B or k.shape[2] != T_r or k.shape[3] != d:
        raise ValueError(
            "q (B, h, T_r, d) and k (B, h_kv, T_r, d) must agree in B, T_r (this "
            f"rank's shard) and d: got q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    if h % k.shape[1]:
        raise ValueError(
            f"h_kv = {k.shape[1]} K/V heads must divide h = {h} query heads (GQA)"
        )


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    group: dist.ProcessGroup | None = None,
    stats: dict[str, Any] | None = None,
) -> torch.Tensor:
    """This rank's rows of exact attention over the whole sequence (eq. ring-attention).

    The sequence is split into P contiguous shards in rank order (lengths may differ,
    as ``torch.tensor_split(x, P, dim=2)`` makes them): q (B, h, T_r, d) holds this
    rank's queries, k and v (B, h_kv, T_r, d) its keys and values, h_kv dividing h.
    In P steps each rank attends to one K/V shard while passing the shard it holds to
    the next rank and receiving one from the previous; the partial outputs merge by
    their log-sum-exps (eq. lse-merge). Only the K/V shards and the shard lengths
    travel. ``causal=True``: position i of the whole sequence attends to j <= i, and a
    block wholly above the diagonal is skipped (still passed on).

    ``stats``, when given, receives what this rank did: ``bytes_sent``,
    ``blocks_computed``, ``blocks_skipped``, ``shard_lengths``.
    """
    _check_ring_inputs(q, k, v)
    rank, P = _world(group)
    B, h, T_r, d = q.shape
    n_rep = h // k.shape[1]
    # every shard's length, so that each receive knows its size (P ints travel)
    lengths = [torch.zeros(1, dtype=torch.long) for _ in range(P)]
    dist.all_gather(lengths, torch.tensor([T_r]), group=group)
    lengths = [int(n) for n in lengths]
    starts = [sum(lengths[:r]) for r in range(P)]
    q_pos = torch.arange(starts[rank], starts[rank] + T_r, device=q.device)  # (T_r,)
    send_to = _global_rank(group, (rank + 1) % P)
    recv_from = _global_rank(group, (rank - 1) % P)

    kv = torch.stack([k, v]).contiguous()  # (2, B, h_kv, T_r, d): one message per step
    out = lse = None  # the merge of the blocks seen so far
    sent = computed = skipped = 0
    for step in range(P):
        src = (rank - step) % P  # the shard this rank holds now
        requests = []
        if step < P - 1:
            nxt = (rank - step - 1) % P  # the shard arriving from the previous rank
            incoming = kv.new_empty((2, B, k.shape[1], lengths[nxt], d))
            ops = []
            if kv.shape[3] > 0:
                ops.append(dist.P2POp(dist.isend, kv, send_to, group))
                sent += kv.numel() * kv.element_size()
            if lengths[nxt] > 0:
                ops.append(dist.P2POp(dist.irecv, incoming, recv_from, group))
            requests = dist.batch_isend_irecv(ops) if ops else []
        k_pos = torch.arange(starts[src], starts[src] + lengths[src], device=q.device)
        if lengths[src] == 0 or T_r == 0 or causal and k_pos[0] > q_pos[-1]:
            skipped += 1  # empty, or wholly above the diagonal: no query may see it
        else:
            mask = None
            if causal and k_pos[-1] > q_pos[0]:  # the block crosses the diagonal
                mask = q_pos[:, None] >= k_pos[None, :]  # (T_r, T_s), global positions
            # (B, h, T_r, d), (B, h, T_r): K/V heads repeated for their query groups
            o, block_lse = block_attention(
                q, repeat_kv(kv[0], n_rep), repeat_kv(kv[1], n_rep), mask
            )
            if out is None:
                out, lse = o, block_lse
            else:  # (eq. lse-merge), two parts at a time: memory stays O(T_r)
                out, lse = merge_attention([out, o], [lse, block_lse])
            computed += 1
        for request in requests:
            request.wait()
        if step < P - 1:
            kv = incoming
    if stats is not None:
        stats.update(
            bytes_sent=sent,
            blocks_computed=computed,
            blocks_skipped=skipped,
            shard_lengths=lengths,
        )
    return q.new_zeros(q.shape) if out is None else out  # (B, h, T_r, d)
