"""The encoder layer and the decoder layer (chapters 9 and 10).

Post-LN (the articles' form, default):  x = LayerNorm(x + Sublayer(x)).
Pre-LN (``norm_first=True``):           x = x + Sublayer(LayerNorm(x)).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .feed_forward import FeedForward
from .heads import MultiHeadAttention
from .norm import LayerNorm


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


class _Residual(nn.Module):
    """One sublayer with its residual and LayerNorm, in either placement
    (eq. residual, add-norm, pre-ln)."""

    def __init__(
        self, d_model: int, norm_first: bool, eps: float, dropout: float
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm = LayerNorm(d_model, eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.norm_first:
            # Pre-LN: x + Sublayer(LN(x))
            return x + self.dropout(sublayer(self.norm(x)))
        # Post-LN: LN(x + Sublayer(x))
        return self.norm(x + self.dropout(sublayer(x)))


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
        # around self-attention
        self.sub1 = _Residual(d_model, norm_first, eps, dropout)
        # around the FFN
        self.sub2 = _Residual(d_model, norm_first, eps, dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """x: (B, T, d_model); mask: bool, True = may attend, broadcastable to
        (B, h, T, T).

        Returns the output (B, T, d_model), or ``(output, weights (B, h, T, T))`` with
        ``need_weights``.
        """
        weights = []
        x = self.sub1(
            x, lambda z: _attend(self.self_attn, z, z, mask, need_weights, weights)
        )
        x = self.sub2(x, self.ffn)
        return (x, weights[0]) if need_weights else x

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy an ``nn.TransformerEncoderLayer``
        (compare outputs with ``batch_first=True``)."""
        # before copying: no float32 round trip
        new = cls(
            layer.self_attn.embed_dim,
            layer.self_attn.num_heads,
            layer.linear1.out_features,
            norm_first=layer.norm_first,
            activation=_activation_name(layer),
            dropout=layer.dropout.p,
            eps=layer.norm1.eps,
        ).to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
        new.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        _copy_ffn_and_norms(
            new, layer, [(new.sub1.norm, layer.norm1), (new.sub2.norm, layer.norm2)]
        )
        return new.train(layer.training)


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
        # around masked self-attention
        self.sub1 = _Residual(d_model, norm_first, eps, dropout)
        # around cross-attention
        self.sub2 = _Residual(d_model, norm_first, eps, dropout)
        # around the FFN
        self.sub3 = _Residual(d_model, norm_first, eps, dropout)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """y: (B, T_tgt, d_model); memory: the encoder output (B, T_src, d_model).

        self_mask broadcasts to (B, h, T_tgt, T_tgt) (usually :func:`causal_mask`),
        cross_mask to (B, h, T_tgt, T_src) (usually a source :func:`padding_mask`).
        Both bool, True = may attend. Returns the output (B, T_tgt, d_model), or
        ``(output, self_weights, cross_weights)`` with ``need_weights``.
        """
        weights = []
        y = self.sub1(
            y,
            lambda z: _attend(self.self_attn, z, z, self_mask, need_weights, weights),
        )
        y = self.sub2(
            y,
            lambda z: _attend(
                self.cross_attn, z, memory, cross_mask, need_weights, weights
            ),
        )
        y = self.sub3(y, self.ffn)
        return (y, weights[0], weights[1]) if need_weights else y

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Copy an ``nn.TransformerDecoderLayer``
        (compare outputs with ``batch_first=True``)."""
        # before copying: no float32 round trip
        new = cls(
            layer.self_attn.embed_dim,
            layer.self_attn.num_heads,
            layer.linear1.out_features,
            norm_first=layer.norm_first,
            activation=_activation_name(layer),
            dropout=layer.dropout.p,
            eps=layer.norm1.eps,
        ).to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
        new.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        new.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        pairs = [
            (new.sub1.norm, layer.norm1),
            (new.sub2.norm, layer.norm2),
            (new.sub3.norm, layer.norm3),
        ]
        _copy_ffn_and_norms(new, layer, pairs)
        return new.train(layer.training)


def _attend(
    attn: MultiHeadAttention, z, kv, mask, need_weights: bool, sink: list
) -> torch.Tensor:
    """Run one attention sublayer;
    append its weights to ``sink`` when they are wanted."""
    out, w = attn(z, kv, kv, mask, need_weights=need_weights)
    if need_weights:
        sink.append(w)
    return out


def _copy_ffn_and_norms(new: nn.Module, layer: nn.Module, norm_pairs) -> None:
    with torch.no_grad():
        for ours, theirs in (
            (new.ffn.linear1, layer.linear1),
            (new.ffn.linear2, layer.linear2),
        ):
            ours.weight.copy_(theirs.weight)
            ours.bias.copy_(theirs.bias)
        for ours, theirs in norm_pairs:
            ours.load_state_dict(theirs.state_dict())
