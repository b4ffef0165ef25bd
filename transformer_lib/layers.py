"""The encoder layer and the decoder layer (chapters 9 and 10), and the decoder layer's
cached step (chapter 12).

Post-LN (the articles' form, default):  x = LayerNorm(x + Sublayer(x)).
Pre-LN (``norm_first=True``):           x = x + Sublayer(LayerNorm(x)).

Each sublayer sits in a :class:`Residual`, the one place that wiring is written. Pass a
dict as ``trace=`` to a layer's ``forward`` and it fills it with the chapter's named
intermediates (X_pos, Z_attn, Z_add_norm_1, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .feed_forward import FeedForward
from .heads import MultiHeadAttention
from .kv_cache import KVCache
from .norm import LayerNorm

Trace = dict[str, torch.Tensor]  # intermediate name -> tensor


class Residual(nn.Module):
    """One sublayer with its residual connection and LayerNorm, in either placement
    (eq. residual, add-norm, pre-ln).

    ``forward(x, sublayer)`` returns LN(x + Sublayer(x)) (Post-LN) or
    x + Sublayer(LN(x)) (Pre-LN). With a ``trace`` dict it also stores, under the two
    ``names``, the sublayer's output (before dropout) and the result.
    """

    def __init__(
        self, d_model: int, norm_first: bool, eps: float, dropout: float
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm = LayerNorm(d_model, eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        sublayer: Callable[[torch.Tensor], torch.Tensor],
        trace: Trace | None = None,
        names: tuple[str, str] = ("sublayer", "output"),
    ) -> torch.Tensor:
        if self.norm_first:
            z = sublayer(self.norm(x))
            out = x + self.dropout(z)  # Pre-LN: x + Sublayer(LN(x))
        else:
            z = sublayer(x)
            out = self.norm(x + self.dropout(z))  # Post-LN: LN(x + Sublayer(x))
        if trace is not None:
            trace[names[0]], trace[names[1]] = z, out
        return out


class EncoderLayer(nn.Module):
    """Z_attn = MultiHead(X_pos); Z_add_norm_1 = LN(X_pos + Z_attn);
    Z_ffn = FFN(Z_add_norm_1); Z_encoder_output = LN(Z_add_norm_1 + Z_ffn)
    (eq. enc-attn ... enc-out), Post-LN by default."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        norm_first: bool = False,
        activation: str = "relu",
        dropout: float = 0.0,
        eps: float = 1e-5,
        n_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, n_kv_heads, dropout=dropout
        )
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.self_attn_block = Residual(d_model, norm_first, eps, dropout)
        self.ffn_block = Residual(d_model, norm_first, eps, dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        trace: Trace | None = None,
    ):
        """x: (B, T, d_model); mask: bool, True = may attend, broadcastable to
        (B, h, T, T).

        Returns the output (B, T, d_model), or ``(output, weights (B, h, T, T))`` with
        ``need_weights``. A ``trace`` dict receives "X_pos" (the input), "Z_attn",
        "Z_add_norm_1", "Z_ffn", "Z_encoder_output" (each (B, T, d_model); in Pre-LN
        the "add_norm" entries are the plain sums) and "weights".
        """
        seen = {} if trace is None else trace  # the input and the weights go here
        keep = need_weights or trace is not None

        def self_attention(z: torch.Tensor) -> torch.Tensor:
            out, seen["weights"] = self.self_attn(z, z, z, mask, need_weights=keep)
            return out

        seen["X_pos"] = x
        x = self.self_attn_block(x, self_attention, trace, ("Z_attn", "Z_add_norm_1"))
        x = self.ffn_block(x, self.ffn, trace, ("Z_ffn", "Z_encoder_output"))
        return (x, seen["weights"]) if need_weights else x

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy an ``nn.TransformerEncoderLayer``
        (compare outputs with ``batch_first=True``)."""
        return _from_torch(
            cls,
            layer,
            attentions={"self_attn": "self_attn"},
            norms={"self_attn_block": "norm1", "ffn_block": "norm2"},
        )


class DecoderLayer(nn.Module):
    """Z_masked_attn = MaskedMultiHead(Y_pos); Z_add_norm_2 = LN(Y_pos + Z_masked_attn);
    Z_cross_attn = MultiHead(Q = Z_add_norm_2, K = V = Z_encoder_output);
    Z_add_norm_3 = LN(Z_add_norm_2 + Z_cross_attn); Z_ffn_decoder = FFN(Z_add_norm_3);
    Z_decoder_output = LN(Z_add_norm_3 + Z_ffn_decoder)
    (eq. dec-masked-attn ... dec-out)."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        norm_first: bool = False,
        activation: str = "relu",
        dropout: float = 0.0,
        eps: float = 1e-5,
        n_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, n_kv_heads, dropout=dropout
        )
        self.cross_attn = MultiHeadAttention(
            d_model, n_heads, n_kv_heads, dropout=dropout
        )
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.self_attn_block = Residual(d_model, norm_first, eps, dropout)
        self.cross_attn_block = Residual(d_model, norm_first, eps, dropout)
        self.ffn_block = Residual(d_model, norm_first, eps, dropout)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        trace: Trace | None = None,
    ):
        """y: (B, T_tgt, d_model); memory: the encoder output (B, T_src, d_model).

        self_mask broadcasts to (B, h, T_tgt, T_tgt) (usually :func:`causal_mask`),
        cross_mask to (B, h, T_tgt, T_src) (usually a source :func:`padding_mask`).
        Both bool, True = may attend. Returns the output (B, T_tgt, d_model), or
        ``(output, self_weights, cross_weights)`` with ``need_weights``. A ``trace``
        dict receives "Y_pos" (the input), "Z_encoder_output" (the memory),
        "Z_masked_attn", "Z_add_norm_2", "Z_cross_attn", "Z_add_norm_3",
        "Z_ffn_decoder", "Z_decoder_output" (in Pre-LN the "add_norm" entries are the
        plain sums), "self_weights" (B, h, T_tgt, T_tgt) and "cross_weights"
        (B, h, T_tgt, T_src).
        """
        seen = {} if trace is None else trace  # the inputs and the weights go here
        keep = need_weights or trace is not None

        def masked_attention(z: torch.Tensor) -> torch.Tensor:
            out, seen["self_weights"] = self.self_attn(
                z, z, z, self_mask, need_weights=keep
            )
            return out

        def cross_attention(z: torch.Tensor) -> torch.Tensor:
            out, seen["cross_weights"] = self.cross_attn(
                z, memory, memory, cross_mask, need_weights=keep
            )
            return out

        seen.update(Y_pos=y, Z_encoder_output=memory)
        y = self._sublayers(y, masked_attention, cross_attention, trace)
        return (y, seen["self_weights"], seen["cross_weights"]) if need_weights else y

    def _sublayers(self, y, masked_attention, cross_attention, trace) -> torch.Tensor:
        """The three residual sublayers in order, for :meth:`forward` and
        :meth:`decode_step` alike (eq. dec-masked-attn ... dec-out)."""
        names = ("Z_masked_attn", "Z_add_norm_2")
        y = self.self_attn_block(y, masked_attention, trace, names)
        names = ("Z_cross_attn", "Z_add_norm_3")
        y = self.cross_attn_block(y, cross_attention, trace, names)
        return self.ffn_block(y, self.ffn, trace, ("Z_ffn_decoder", "Z_decoder_output"))

    def decode_step(
        self,
        y: torch.Tensor,
        cache: KVCache,
        index: int,
        self_mask: torch.Tensor | None = None,
        *,
        trace: Trace | None = None,
    ) -> torch.Tensor:
        """The layer for T_new new positions with a KV cache (eq. kv-append, kv-step):
        y (B, T_new, d_model) -> (B, T_new, d_model).

        ``index`` is this layer's slot in ``cache``. The new K, V are appended there and
        the queries attend over every cached position; ``self_mask``
        (T_new, T_past + T_new) is needed only when T_new > 1 (an end-aligned
        :func:`causal_mask`).
        The cross-attention reads the memory's K, V from the cache
        (:meth:`cache_memory_kv`) with ``cache.cross_mask``. Same wiring as
        :meth:`forward`; a ``trace`` gets the same names except "Z_encoder_output".
        """
        seen = {} if trace is None else trace
        keep = trace is not None

        def masked_attention(z: torch.Tensor) -> torch.Tensor:
            q = self.self_attn.project_q(z)  # (B, h, T_new, d_k)
            k_new, v_new = self.self_attn.project_kv(z, z)  # (B, h_kv, T_new, d_k)
            # (B, h_kv, T_past + T_new, d_k) each   (eq. kv-append)
            k, v = cache.append(index, k_new, v_new)
            out, seen["self_weights"] = self.self_attn.attend(
                q, k, v, self_mask, need_weights=keep
            )
            return out

        def cross_attention(z: torch.Tensor) -> torch.Tensor:
            q = self.cross_attn.project_q(z)  # (B, h, T_new, d_k)
            k, v = cache.cross_k[index], cache.cross_v[index]  # (B, h_kv, T_src, d_k)
            out, seen["cross_weights"] = self.cross_attn.attend(
                q, k, v, cache.cross_mask, need_weights=keep
            )
            return out

        seen["Y_pos"] = y
        return self._sublayers(y, masked_attention, cross_attention, trace)

    def cache_memory_kv(self, memory: torch.Tensor, cache: KVCache, index: int) -> None:
        """Compute the cross-attention K, V of the encoder output once and store them
        in slot ``index`` of ``cache``: (B, T_src, d_model) -> (B, h_kv, T_src, d_k)
        each."""
        cache.set_cross(index, *self.cross_attn.project_kv(memory, memory))

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Copy an ``nn.TransformerDecoderLayer``
        (compare outputs with ``batch_first=True``)."""
        return _from_torch(
            cls,
            layer,
            attentions={"self_attn": "self_attn", "cross_attn": "multihead_attn"},
            norms={
                "self_attn_block": "norm1",
                "cross_attn_block": "norm2",
                "ffn_block": "norm3",
            },
        )


def _activation_name(layer: nn.Module) -> str:
    """'relu' or 'gelu' from a torch Transformer layer's ``activation``
    (a function or a module)."""
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(
        f"from_torch supports the 'relu' and exact 'gelu' activations, got {act!r}"
    )


def _from_torch(cls, layer: nn.Module, attentions: dict, norms: dict):
    """An encoder or decoder layer with the sizes and weights of a torch one.

    attentions: our MultiHeadAttention attribute -> their ``nn.MultiheadAttention``
    attribute; norms: our :class:`Residual` attribute -> their ``nn.LayerNorm``.
    """
    new = cls(
        layer.self_attn.embed_dim,
        layer.self_attn.num_heads,
        layer.linear1.out_features,
        norm_first=layer.norm_first,
        activation=_activation_name(layer),
        dropout=layer.dropout.p,
        eps=layer.norm1.eps,
    )
    # their dtype before copying: no float32 round trip
    new = new.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    for ours, theirs in attentions.items():
        setattr(new, ours, MultiHeadAttention.from_torch(getattr(layer, theirs)))
    with torch.no_grad():
        for ours, theirs in (
            (new.ffn.linear1, layer.linear1),
            (new.ffn.linear2, layer.linear2),
        ):
            ours.weight.copy_(theirs.weight)
            ours.bias.copy_(theirs.bias)
        for block, norm in norms.items():
            getattr(new, block).norm.load_state_dict(getattr(layer, norm).state_dict())
    return new.train(layer.training)
