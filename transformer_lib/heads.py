"""Multi-head attention, with grouped-query (GQA) and multi-query (MQA) variants
(chapter 5)."""

from __future__ import annotations

import torch
import torch.nn as nn

from ._validate import check_divisible
from .attention import fused_attention, scaled_dot_product_attention
from .costs import kv_cache_nbytes


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, h * d_k) -> (B, h, T, d_k)."""
    B, T, D = x.shape
    check_divisible(D, n_heads)
    # (B, T, h, d_k) -> (B, h, T, d_k)
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k): the Concat(head_1, ..., head_h) of
    eq. multi-head."""
    B, h, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d)  # (B, T, h, d_k) -> (B, T, h * d_k)


def repeat_kv(k: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, h_kv, T, d) -> (B, h_kv * n_rep, T, d), each K/V head repeated for its group
    (eq. gqa).

    Query head j reads K/V head j // n_rep, so copies of a head must sit next to each
    other: this is ``repeat_interleave`` on the head axis, not ``repeat``/``tile``.
    """
    if k.dim() != 4:
        raise ValueError(
            f"repeat_kv expects (B, h_kv, T, d), got shape {tuple(k.shape)}"
        )
    if n_rep < 1:
        raise ValueError(f"n_rep must be >= 1, got {n_rep}")
    if n_rep == 1:
        return k
    B, h_kv, T, d = k.shape
    return k[:, :, None].expand(B, h_kv, n_rep, T, d).reshape(B, h_kv * n_rep, T, d)


def multi_head_attention(
    x_q: torch.Tensor,
    x_kv: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    n_heads: int,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O (eq. multi-head), as one
    function of its weights, with no biases: the formula that
    :class:`MultiHeadAttention` computes with its own layers.

    x_q (B, T_q, d_model), x_kv (B, T_k, d_model); every W is (d_model, d_model),
    applied as x @ W; mask bool, True = may attend, broadcastable to (B, h, T_q, T_k).
    Returns (B, T_q, d_model).
    """
    for name, w in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o)):
        if w.dim() != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(f"{name} must be (d_model, d_model), got {tuple(w.shape)}")
    # (B, T_q, d_model) @ (d_model, d_model) -> (B, h, T_q, d_k)
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)  # (B, h, T_k, d_k)
    v = split_heads(x_kv @ W_v, n_heads)  # (B, h, T_k, d_k)
    out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_k)
    # (B, T_q, d_model) @ (d_model, d_model) -> (B, T_q, d_model)
    return merge_heads(out) @ W_o


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i).

    ``n_kv_heads < n_heads`` shares each K/V head among ``n_heads // n_kv_heads`` query
    heads (GQA; MQA when ``n_kv_heads == 1``). Inputs are batch-first (B, T, d_model).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_divisible(d_model, n_heads, n_kv_heads)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * self.d_k, bias=bias)  # W_Q
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # W_K
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # W_V
        self.o_proj = nn.Linear(n_heads * self.d_k, d_model, bias=bias)  # W_O
        self.dropout = nn.Dropout(dropout)

    def project_q(self, query: torch.Tensor) -> torch.Tensor:
        """(B, T_q, d_model) -> Q per head (B, h, T_q, d_k)."""
        self._check_input("query", query)
        return split_heads(self.q_proj(query), self.n_heads)

    def project_kv(
        self, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T_k, d_model) -> K, V per K/V head, each (B, h_kv, T_k, d_k).

        A KV cache stores these.
        """
        self._check_input("key", key)
        self._check_input("value", value)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key {tuple(key.shape)} and value {tuple(value.shape)} "
                "differ in (B, T_k)"
            )
        return (
            split_heads(self.k_proj(key), self.n_kv_heads),
            split_heads(self.v_proj(value), self.n_kv_heads),
        )

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        trace: dict | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention over projected heads, then Concat and W_O.

        q (B, h, T_q, d_k); k, v (B, h_kv, T_k, d_k). A ``trace`` dict receives what
        the heads computed: "q", "k" and "v" (K and V repeated to h heads), "mask" (as
        given, or None), "weights" (B, h, T_q, T_k) and "heads" (B, h, T_q, d_k), the
        heads' outputs before Concat and W_O.
        """
        n_rep = self.n_heads // self.n_kv_heads
        if mask is not None and mask.dim() == 3:
            # (B, T_q, T_k) -> (B, 1, T_q, T_k): the same mask for every head
            mask = mask.unsqueeze(1)
        keep = need_weights or trace is not None
        if not keep and not (self.training and self.dropout.p > 0):
            # the fused path, (B, h, T_q, d_k)
            out, weights = fused_attention(q, k, v, mask, enable_gqa=n_rep > 1), None
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, h, T_k, d_k)
            # (B, h, T_q, d_k), (B, h, T_q, T_k)
            out, weights = scaled_dot_product_attention(q, k, v, mask)
            if self.dropout.p > 0 and self.training:
                out = self.dropout(weights) @ v
        if trace is not None:
            trace.update(q=q, k=k, v=v, mask=mask, weights=weights, heads=out)
        # (B, T_q, h * d_k) @ W_O -> (B, T_q, d_model)
        out = self.o_proj(merge_heads(out))
        return out, (weights if need_weights else None)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        trace: dict | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Returns (out (B, T_q, d_model), weights (B, h, T_q, T_k) or None).

        ``mask`` is bool, True = may attend, broadcastable to (B, h, T_q, T_k); a 3-D
        mask (B, T_q, T_k) applies to every head. Without ``need_weights`` (the
        default, as in every layer and model of the library) the fused path runs;
        ``trace``: see :meth:`attend`.
        """
        q = self.project_q(query)  # (B, h, T_q, d_k)
        k, v = self.project_kv(key, value)  # (B, h_kv, T_k, d_k)
        if q.size(0) != k.size(0):
            raise ValueError(
                f"query batch {tuple(query.shape)} "
                f"and key batch {tuple(key.shape)} differ"
            )
        return self.attend(q, k, v, mask, need_weights, trace=trace)

    def _check_input(self, name: str, x: torch.Tensor) -> None:
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(
                f"{name} must have shape (B, T, d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of an ``nn.MultiheadAttention``
        (use ``batch_first=True`` to compare outputs)."""
        if not m._qkv_same_embed_dim:
            raise ValueError("from_torch supports only kdim == vdim == embed_dim")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError("from_torch does not support add_bias_kv or add_zero_attn")
        bias = m.in_proj_bias is not None
        new = cls(m.embed_dim, m.num_heads, bias=bias, dropout=m.dropout)
        new = new.to(device=m.in_proj_weight.device, dtype=m.in_proj_weight.dtype)
        with torch.no_grad():
            for proj, w in zip(
                (new.q_proj, new.k_proj, new.v_proj),
                m.in_proj_weight.chunk(3),
                strict=True,
            ):
                proj.weight.copy_(w)
            new.o_proj.weight.copy_(m.out_proj.weight)
            if bias:
                for proj, b in zip(
                    (new.q_proj, new.k_proj, new.v_proj),
                    m.in_proj_bias.chunk(3),
                    strict=True,
                ):
                    proj.bias.copy_(b)
                new.o_proj.bias.copy_(m.out_proj.bias)
        return new.train(m.training)

    def kv_cache_nbytes(
        self, batch: int, T: int, dtype: torch.dtype = torch.float32
    ) -> int:
        """Bytes of K and V for this layer: 2 * batch * n_kv_heads * T * d_k * bytes
        (eq. kv-memory), that is :func:`~transformer_lib.kv_cache_nbytes` for L = 1."""
        return kv_cache_nbytes(1, batch, self.n_kv_heads, T, self.d_k, dtype)
