"""Tensor parallelism (chapter 18): the heads of attention and the hidden units of the
feed-forward network split over the ranks, one all-reduce per sublayer (Megatron-LM)."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn

from ..feed_forward import ACTIVATIONS, FeedForward
from ..heads import MultiHeadAttention


class _CopyToRanks(torch.autograd.Function):
    """f: identity forward; the gradients of the ranks' copies are summed backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromRanks(torch.autograd.Function):
    """g: the ranks' partial sums are all-reduced forward; identity backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def copy_to_ranks(
    x: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Enter a tensor-parallel region: x as it is; backward, the gradient is summed
    over the ranks (each rank's slice of the weights contributed a part)."""
    return _CopyToRanks.apply(x, group)


def reduce_from_ranks(
    x: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Leave a tensor-parallel region: sum over the ranks of x, by one all-reduce
    (eq. tp-all-reduce); backward, the gradient passes to each rank unchanged."""
    return _ReduceFromRanks.apply(x, group)


def _slice(rank: int, size: int, world_size: int) -> slice:
    n = size // world_size
    return slice(rank * n, (rank + 1) * n)


def _check_rank(rank: int, world_size: int) -> None:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")


def _output_rows(lin: nn.Linear, rows: slice) -> nn.Linear:
    """A column-parallel part of ``lin``: its outputs ``rows`` (rows of the weight,
    and of the bias), (rows, in_features)."""
    new = nn.Linear(lin.in_features, rows.stop - rows.start, lin.bias is not None)
    new = new.to(lin.weight)
    with torch.no_grad():
        new.weight.copy_(lin.weight[rows])
        if lin.bias is not None:
            new.bias.copy_(lin.bias[rows])
    return new


def _input_columns(
    lin: nn.Linear, cols: slice
) -> tuple[nn.Linear, nn.Parameter | None]:
    """A row-parallel part of ``lin``: its inputs ``cols``, without the bias, which is
    returned apart, to be added once after the all-reduce."""
    new = nn.Linear(cols.stop - cols.start, lin.out_features, bias=False)
    new = new.to(lin.weight)
    with torch.no_grad():
        new.weight.copy_(lin.weight[:, cols])  # (out_features, cols)
    bias = None if lin.bias is None else nn.Parameter(lin.bias.detach().clone())
    return new, bias


class ParallelMultiHeadAttention(MultiHeadAttention):
    """This rank's heads of a :class:`MultiHeadAttention` (eq. tp-attention).

    W_Q, W_K, W_V are split by columns (whole heads), W_O by rows: the rank's heads
    give a partial sum Concat(head_i for i of this rank) W_O^(rank), and one
    all-reduce adds the ranks' parts; b_O is added once, after it. Built by
    :func:`shard_multi_head_attention`; the same ``project_q`` / ``project_kv`` /
    ``attend`` as the module it came from, with ``n_heads`` and ``n_kv_heads`` this
    rank's counts.
    """

    def __init__(
        self,
        mha: MultiHeadAttention,
        rank: int,
        world_size: int,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        nn.Module.__init__(self)
        h, h_kv, d_k = mha.n_heads, mha.n_kv_heads, mha.d_k
        _check_rank(rank, world_size)
        if h % world_size:
            raise ValueError(
                f"tensor parallelism over {world_size} ranks needs the {h} query "
                "heads to divide evenly among them"
            )
        if h_kv % world_size == 0:  # each rank its own K/V heads
            kv_heads = _slice(rank, h_kv, world_size)
        elif world_size % h_kv == 0:  # fewer K/V heads than ranks: replicate each
            kv = (rank * (h // world_size)) // (h // h_kv)  # the one its queries read
            kv_heads = slice(kv, kv + 1)
        else:
            raise ValueError(
                f"GQA with h_kv = {h_kv} K/V heads over {world_size} ranks: the K/V "
                "heads must divide evenly among the ranks, or the ranks among them "
                "(each K/V head replicated); neither holds"
            )
        q_heads = _slice(rank, h, world_size)
        self.d_model, self.d_k = mha.d_model, d_k
        self.n_heads = h // world_size
        self.n_kv_heads = kv_heads.stop - kv_heads.start
        self.full_n_heads, self.q_heads, self.kv_heads = h, q_heads, kv_heads
        self.rank, self.world_size, self.group = rank, world_size, group

        def rows(heads: slice) -> slice:  # the rows of W_Q, W_K, W_V of these heads
            return slice(heads.start * d_k, heads.stop * d_k)

        self.q_proj = _output_rows(mha.q_proj, rows(q_heads))  # W_Q^(rank)
        self.k_proj = _output_rows(mha.k_proj, rows(kv_heads))  # W_K^(rank)
        self.v_proj = _output_rows(mha.v_proj, rows(kv_heads))  # W_V^(rank)
        # W_O^(rank), the rows of W_O its heads' outputs meet; b_O, added once after
        # the sum
        self.o_proj, self.o_bias = _input_columns(mha.o_proj, rows(q_heads))
        self.dropout = copy.deepcopy(mha.dropout)
        self.train(mha.training)

    def project_q(self, query: torch.Tensor) -> torch.Tensor:
        """(B, T_q, d_model) -> this rank's Q heads (B, h / P, T_q, d_k)."""
        return super().project_q(copy_to_ranks(query, self.group))

    def project_kv(
        self, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T_k, d_model) -> this rank's K, V heads (B, h_kv / P or 1, T_k, d_k)."""
        key, value = copy_to_ranks(key, self.group), copy_to_ranks(value, self.group)
        return super().project_kv(key, value)

    def attend(self, q, k, v, mask=None, *args, **kwargs):
        """This rank's heads, its rows of W_O, one all-reduce, then b_O: the full
        (B, T_q, d_model) output on every rank, and this rank's heads' weights
        (the arguments of :meth:`MultiHeadAttention.attend`)."""
        if mask is not None and mask.dim() == 4 and mask.size(1) == self.full_n_heads:
            mask = mask[:, self.q_heads]  # a per-head mask: this rank's heads
        partial, weights = super().attend(q, k, v, mask, *args, **kwargs)
        out = reduce_from_ranks(partial, self.group)  # sum over the ranks' heads
        if self.o_bias is not None:
            out = out + self.o_bias
        return out, weights

    def forward(  # type: ignore[override]
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Self-attention of x (B, T, d_model) -> (B, T, d_model), equal on every rank
        to the unsplit module's ``mha(x, x, x, mask)[0]``."""
        return super().forward(x, x, x, mask, need_weights=False)[0]

    def extra_repr(self) -> str:
        return (
            f"rank={self.rank}/{self.world_size}, heads {self.q_heads.start}.."
            f"{self.q_heads.stop - 1} of {self.full_n_heads}, K/V heads "
            f"{self.kv_heads.start}..{self.kv_heads.stop - 1}"
        )


class ParallelFeedForward(nn.Module):
    """This rank's slice of a :class:`FeedForward` (eq. tp-ffn): W_1 (and W_up) split
    by columns, W_2 by rows, so the activation, elementwise, needs no communication;
    one all-reduce sums the ranks' parts of h W_2, then b_2 is added once."""

    def __init__(
        self,
        ffn: FeedForward,
        rank: int,
        world_size: int,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        super().__init__()
        d_ff = ffn.linear1.out_features
        _check_rank(rank, world_size)
        if d_ff % world_size:
            raise ValueError(
                f"d_ff = {d_ff} hidden units do not split evenly over "
                f"{world_size} ranks"
            )
        cols = _slice(rank, d_ff, world_size)
        self.activation, self.gated = ffn.activation, ffn.gated
        self.rank, self.world_size, self.group = rank, world_size, group

        self.linear1 = _output_rows(ffn.linear1, cols)  # W_1^(rank) (W_gate)
        # W_up^(rank), gated form only
        self.linear_up = _output_rows(ffn.linear_up, cols) if ffn.gated else None
        # W_2^(rank), and b_2, added once after the sum
        self.linear2, self.bias2 = _input_columns(ffn.linear2, cols)
        self.dropout = copy.deepcopy(ffn.dropout)
        self.train(ffn.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = copy_to_ranks(x, self.group)
        # (B, T, d_model) -> (B, T, d_ff / P)
        h = ACTIVATIONS[self.activation](self.linear1(x))
        if self.gated:
            h = h * self.linear_up(x)  # (B, T, d_ff / P)
        partial = self.linear2(self.dropout(h))  # (B, T, d_ff / P) -> (B, T, d_model)
        out = reduce_from_ranks(partial, self.group)  # sum over the ranks
        return out + self.bias2 if self.bias2 is not None else out


def shard_multi_head_attention(
    mha: MultiHeadAttention,
    rank: int,
    world_size: int,
    group: dist.ProcessGroup | None = None,
) -> ParallelMultiHeadAttention:
    """This rank's heads of ``mha``; ``module(x, mask)`` equals ``mha(x, x, x,
    mask)[0]`` on every rank. GQA needs P to divide h_kv, or h_kv to divide P."""
    return ParallelMultiHeadAttention(mha, rank, world_size, group)


def shard_feed_forward(
    ffn: FeedForward,
    rank: int,
    world_size: int,
    group: dist.ProcessGroup | None = None,
) -> ParallelFeedForward:
    """This rank's slice of ``ffn``; ``module(x)`` equals ``ffn(x)`` on every rank."""
    return ParallelFeedForward(ffn, rank, world_size, group)


def shard_block(
    block: nn.Module,
    rank: int,
    world_size: int,
    group: dist.ProcessGroup | None = None,
) -> nn.Module:
    """A copy of a Transformer block (``tl.GPTBlock``, or any block whose sublayers
    are ``.self_attn`` and ``.ffn``) with both sublayers split over the ranks: two
    all-reduces per block, one per sublayer. Norms, residuals and RoPE are unchanged:
    they act on the full width, or on each head alone."""
    new = copy.deepcopy(block)
    new.self_attn = shard_multi_head_attention(block.self_attn, rank, world_size, group)
    new.ffn = shard_feed_forward(block.ffn, rank, world_size, group)
    return new


def shard_gpt(
    model: nn.Module,
    rank: int,
    world_size: int,
    group: dist.ProcessGroup | None = None,
) -> nn.Module:
    """A copy of a ``tl.GPT`` with every block split over the ranks; embeddings, the
    final norm and the head stay whole on every rank."""
    new = copy.deepcopy(model)
    new.blocks = nn.ModuleList(
        shard_block(b, rank, world_size, group) for b in model.blocks
    )
    return new
