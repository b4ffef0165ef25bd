"""The encoder layer and the decoder layer (chapters 9 and 10), and the decoder-only
block (chapters 14 and 16).

Post-LN (the articles' form, default):  x = LayerNorm(x + Sublayer(x)).
Pre-LN (``norm_first=True``):           x = x + Sublayer(LayerNorm(x)).

Each sublayer sits in a :class:`Residual`, the one place that wiring is written. Pass a
dict as ``trace=`` to a layer's ``forward`` and it fills it with the chapter's named
intermediates (X_pos, Z_attn, Z_add_norm_1, ...). With a KV cache, the decoder layer
and the block take their ``cache`` slot (:class:`~transformer_lib.kv_cache.CacheSlot`),
append their new K and V to it and attend over all it holds (chapter 12).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from .configs import GPTConfig
from .feed_forward import FeedForward
from .heads import MultiHeadAttention
from .kv_cache import CacheSlot
from .masks import causal_mask
from .norm import LayerNorm, RMSNorm
from .positional import apply_rope

Trace = dict[str, Any]  # intermediate name -> tensor (an attention's: a dict)


class Residual(nn.Module):
    """One sublayer with its residual connection and LayerNorm, in either placement
    (eq. residual, add-norm, pre-ln).

    ``forward(x, sublayer)`` returns LN(x + Sublayer(x)) (Post-LN) or
    x + Sublayer(LN(x)) (Pre-LN). With a ``trace`` dict it also stores, under the two
    ``names``, the sublayer's output (before dropout) and the result. ``norm``: the
    norm module, LayerNorm(d_model, eps) when None (the decoder-only block passes its
    config's LayerNorm or RMSNorm).
    """

    def __init__(
        self,
        d_model: int,
        norm_first: bool,
        eps: float,
        dropout: float,
        norm: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm = LayerNorm(d_model, eps) if norm is None else norm
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


class _Layer(nn.Module):
    """What the encoder and the decoder layer share: their sizes, a
    MultiHeadAttention per name in ``attentions``, the FFN, and a :class:`Residual`
    around each, named "<sublayer>_block"."""

    attentions: tuple[str, ...] = ()

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
        for name in self.attentions:  # self_attn (and the decoder's cross_attn)
            mha = MultiHeadAttention(d_model, n_heads, n_kv_heads, dropout=dropout)
            self.add_module(name, mha)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        for name in (*self.attentions, "ffn"):  # self_attn_block, ..., ffn_block
            block = Residual(d_model, norm_first, eps, dropout)
            self.add_module(f"{name}_block", block)


class EncoderLayer(_Layer):
    """Z_attn = MultiHead(X_pos); Z_add_norm_1 = LN(X_pos + Z_attn);
    Z_ffn = FFN(Z_add_norm_1); Z_encoder_output = LN(Z_add_norm_1 + Z_ffn)
    (eq. enc-attn ... enc-out), Post-LN by default."""

    attentions = ("self_attn",)

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
            out, seen["weights"] = self.self_attn(
                z, z, z, mask, need_weights=keep, trace=_heads(trace, "self_attn")
            )
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


class DecoderLayer(_Layer):
    """Z_masked_attn = MaskedMultiHead(Y_pos); Z_add_norm_2 = LN(Y_pos + Z_masked_attn);
    Z_cross_attn = MultiHead(Q = Z_add_norm_2, K = V = Z_encoder_output);
    Z_add_norm_3 = LN(Z_add_norm_2 + Z_cross_attn); Z_ffn_decoder = FFN(Z_add_norm_3);
    Z_decoder_output = LN(Z_add_norm_3 + Z_ffn_decoder)
    (eq. dec-masked-attn ... dec-out)."""

    attentions = ("self_attn", "cross_attn")

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor | None,
        self_mask: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        cache: CacheSlot | None = None,
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

        With this layer's ``cache`` slot (eq. kv-append, kv-step), y holds only the
        T_new newest positions: their K, V join the cache and the queries attend over
        all T_past + T_new keys (``self_mask`` (T_new, T_past + T_new), an end-aligned
        :func:`causal_mask`, is needed only when T_new > 1); the cross-attention reads
        the memory's K, V from the cache (:meth:`cache_memory_kv`), so memory may be
        None.
        """
        seen = {} if trace is None else trace  # the inputs and the weights go here
        keep = need_weights or trace is not None

        def masked_attention(z: torch.Tensor) -> torch.Tensor:
            q = self.self_attn.project_q(z)  # (B, h, T, d_k)
            k, v = self.self_attn.project_kv(z, z)  # (B, h_kv, T, d_k) each
            if cache is not None:
                k, v = cache.append(k, v)  # (B, h_kv, T_past + T, d_k) each
            out, seen["self_weights"] = self.self_attn.attend(
                q, k, v, self_mask, keep, trace=_heads(trace, "self_attn")
            )
            return out

        def cross_attention(z: torch.Tensor) -> torch.Tensor:
            q = self.cross_attn.project_q(z)  # (B, h, T_tgt, d_k)
            if cache is None:
                # (B, h_kv, T_src, d_k) each
                k, v = self.cross_attn.project_kv(memory, memory)
            else:
                k, v = cache.cross_kv()  # computed once, (B, h_kv, T_src, d_k)
            out, seen["cross_weights"] = self.cross_attn.attend(
                q, k, v, cross_mask, keep, trace=_heads(trace, "cross_attn")
            )
            return out

        seen["Y_pos"] = y
        if memory is not None:
            seen["Z_encoder_output"] = memory
        names = ("Z_masked_attn", "Z_add_norm_2")
        y = self.self_attn_block(y, masked_attention, trace, names)
        names = ("Z_cross_attn", "Z_add_norm_3")
        y = self.cross_attn_block(y, cross_attention, trace, names)
        names = ("Z_ffn_decoder", "Z_decoder_output")
        y = self.ffn_block(y, self.ffn, trace, names)
        return (y, seen["self_weights"], seen["cross_weights"]) if need_weights else y

    def cache_memory_kv(self, memory: torch.Tensor, cache: CacheSlot) -> None:
        """Compute the cross-attention K, V of the encoder output once and store them
        in this layer's ``cache`` slot: (B, T_src, d_model) -> (B, h_kv, T_src, d_k)
        each."""
        cache.set_cross(*self.cross_attn.project_kv(memory, memory))

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


def make_norm(cfg: GPTConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return LayerNorm(cfg.d_model, cfg.norm_eps)


class GPTBlock(nn.Module):
    """One decoder-only block, Pre-LN   (eq. pre-ln):

    x = x + Attn(Norm_1(x))     causal self-attention, RoPE inside with "rope"
    x = x + FFN(Norm_2(x))

    Named as the encoder layer: the sublayers ``self_attn`` and ``ffn``, each in a
    Pre-LN :class:`Residual` (``self_attn_block``, ``ffn_block``) whose ``.norm`` is
    the config's LayerNorm or RMSNorm.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(
            cfg.d_model,
            cfg.n_heads,
            cfg.n_kv_heads,
            bias=cfg.use_attn_bias,
            dropout=cfg.dropout,
        )
        self.ffn = FeedForward(
            cfg.d_model,
            cfg.d_ff,
            cfg.activation,
            cfg.dropout,
            bias=cfg.use_ffn_bias,
            gated=cfg.gated,
        )
        for name in ("self_attn_block", "ffn_block"):  # Norm_1, Norm_2 inside
            block = Residual(
                cfg.d_model, True, cfg.norm_eps, cfg.dropout, make_norm(cfg)
            )
            self.add_module(name, block)
        self.rope = cfg.positions == "rope"
        self.rope_base, self.rope_layout = cfg.rope_base, cfg.rope_layout

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        cache: CacheSlot | None = None,
        need_weights: bool = False,
        *,
        trace: Trace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, d_model) at ``positions`` (T,) -> (x (B, T, d_model), attention
        weights (B, h, T, T_k) or None).

        ``cache``: this block's slot of a KV cache; the keys then span the cached
        positions and these T (T_k = T_past + T), else T_k = T. A ``trace`` dict
        receives "X" (the input), "Z_attn", "X_attn" (x after the first sublayer),
        "Z_ffn", "X_out", "weights" and "self_attn" (what the heads computed).
        """
        seen = {} if trace is None else trace  # the input and the weights go here
        keep = need_weights or trace is not None

        def attention(z: torch.Tensor) -> torch.Tensor:
            out, seen["weights"] = self.self_attention(
                z, positions, cache, keep, trace=_heads(trace, "self_attn")
            )
            return out

        seen["X"] = x
        x = self.self_attn_block(x, attention, trace, ("Z_attn", "X_attn"))
        x = self.ffn_block(x, self.ffn, trace, ("Z_ffn", "X_out"))
        return x, (seen["weights"] if need_weights else None)

    def self_attention(
        self,
        z: torch.Tensor,
        positions: torch.Tensor,
        cache: CacheSlot | None = None,
        need_weights: bool = False,
        *,
        trace: Trace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Causal self-attention of z (B, T, d_model); returns (out (B, T, d_model),
        weights (B, h, T, T_k) or None)."""
        q = self.self_attn.project_q(z)  # (B, h, T, d_k)
        k, v = self.self_attn.project_kv(z, z)  # (B, h_kv, T, d_k) each
        if self.rope:  # (eq. rope), before K joins the cache: it holds rotated keys
            q = apply_rope(q, positions, self.rope_base, self.rope_layout)
            k = apply_rope(k, positions, self.rope_base, self.rope_layout)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, T_past + T, d_k)   (eq. kv-append)
        T, T_k = q.size(2), k.size(2)
        # (T, T_k), end-aligned; one new token may see every key
        mask = None if T == 1 else causal_mask(T, T_k, device=z.device)
        return self.self_attn.attend(q, k, v, mask, need_weights, trace=trace)


def _heads(trace: Trace | None, name: str) -> Trace | None:
    """The dict in ``trace`` that an attention ``name`` fills
    (:meth:`MultiHeadAttention.attend`), or None when nothing is traced."""
    return None if trace is None else trace.setdefault(name, {})


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
