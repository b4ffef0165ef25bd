"""The encoder-decoder Transformer, greedy decoding and decoding with a KV cache
(chapters 11 and 12).

    X_0 = sqrt(d_model) * E[src] + PE   (eq. embedding-scale), the same for the target
    memory = Encoder_N(... Encoder_1(X_0))
    Z = Decoder_N(... Decoder_1(Y_0, memory), memory)
    logits = Z W_out + b_out            (eq. toy-logits)
    y_t = argmax_v logits[t - 1, v]     (eq. greedy), starting from BOS

and :func:`time_decoding`, the step timer of chapter 12's measurements. The cost
formulas :func:`decode_step_macs` and :func:`generate_macs` live in :mod:`.costs`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from .configs import TransformerConfig
from .generation import Generates, Step
from .kv_cache import KVCache
from .layers import DecoderLayer, EncoderLayer
from .masks import causal_mask
from .measure import Stopwatch
from .norm import LayerNorm
from .positional import sinusoidal_positional_encoding

__all__ = [
    "Transformer",
    "TransformerConfig",
    "time_decoding",
]


class Transformer(Generates, nn.Module):
    """The encoder-decoder of "Attention Is All You Need": token embeddings scaled by
    sqrt(d_model), sinusoidal positions, N encoder layers, N decoder layers and the
    output projection.

    Source and target share one embedding table. Masks are bool, True = may attend.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d)  # E, shared by source and target
        # so that sqrt(d_model) * E has unit-size entries
        nn.init.normal_(self.embed.weight, std=d**-0.5)
        # (max_len, d)
        self.register_buffer(
            "pe", sinusoidal_positional_encoding(cfg.max_len, d), persistent=False
        )
        self.dropout = nn.Dropout(cfg.dropout)
        kw = dict(
            norm_first=cfg.norm_first,
            activation=cfg.activation,
            dropout=cfg.dropout,
            n_kv_heads=cfg.n_kv_heads,
        )
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d, cfg.n_heads, cfg.d_ff, **kw) for _ in range(cfg.n_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d, cfg.n_heads, cfg.d_ff, **kw) for _ in range(cfg.n_layers)
        )
        # Pre-LN leaves the residual stream un-normalised, so each stack ends with a
        # LayerNorm (as nn.Transformer).
        self.encoder_norm = LayerNorm(d) if cfg.norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(d) if cfg.norm_first else nn.Identity()
        # W_out, b_out: d_model -> vocabulary logits
        self.out_proj = nn.Linear(d, cfg.vocab_size)

    # -- the pieces -------------------------------------------------------------------
    def embed_tokens(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """(B, T) ids at positions start, ..., start + T - 1
        -> sqrt(d_model) E[ids] + PE   (eq. embedding-scale)."""
        _, T = self._check_tokens("tokens", tokens)
        self._check_positions(start + T, f"{T} tokens from position {start}")
        x = self.embed(tokens) * math.sqrt(self.cfg.d_model)  # (B, T, d_model)
        # + (T, d_model), broadcast over B
        return self.dropout(x + self.pe[start : start + T])

    def encode(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """src (B, T_src) -> memory (B, T_src, d_model), or
        ``(memory, [weights (B, h, T_src, T_src)] per layer)``.

        src_mask: bool, True = may attend, broadcastable to (B, 1, 1, T_src), e.g.
        :func:`padding_mask`.
        """
        x, weights = self.embed_tokens(src), []
        for layer in self.encoder_layers:
            if need_weights:
                x, w = layer(x, src_mask, need_weights=True)
                weights.append(w)
            else:
                x = layer(x, src_mask)
        x = self.encoder_norm(x)
        return (x, weights) if need_weights else x

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """All target positions at once: tgt (B, T_tgt) -> decoder output
        (B, T_tgt, d_model) (before W_out).

        tgt_mask defaults to :func:`causal_mask` (T_tgt, T_tgt); a mask you pass
        replaces it, so combine it yourself (``causal_mask(T) & padding_mask(...)``).
        With ``need_weights`` also returns the lists of self- and cross-attention
        weights, one (B, h, T_tgt, T_k) per layer.
        """
        y = self.embed_tokens(tgt)
        if tgt_mask is None:
            tgt_mask = causal_mask(tgt.size(1), device=tgt.device)  # (T_tgt, T_tgt)
        self_ws, cross_ws = [], []
        for layer in self.decoder_layers:
            if need_weights:
                y, w_self, w_cross = layer(
                    y, memory, tgt_mask, src_mask, need_weights=True
                )
                self_ws.append(w_self)
                cross_ws.append(w_cross)
            else:
                y = layer(y, memory, tgt_mask, src_mask)
        y = self.decoder_norm(y)
        return (y, self_ws, cross_ws) if need_weights else y

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """Teacher forcing: src (B, T_src), tgt (B, T_tgt)
        -> logits (B, T_tgt, vocab_size)   (eq. toy-logits).

        With ``need_weights`` returns ``(logits, attn)``, attn = {"encoder": [...],
        "decoder_self": [...], "cross": [...]}, one (B, h, T_q, T_k) tensor per layer.
        """
        if not need_weights:
            return self.out_proj(
                self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)
            )
        memory, enc_ws = self.encode(src, src_mask, need_weights=True)
        y, self_ws, cross_ws = self.decode(
            tgt, memory, src_mask, tgt_mask, need_weights=True
        )
        return self.out_proj(y), {
            "encoder": enc_ws,
            "decoder_self": self_ws,
            "cross": cross_ws,
        }

    # -- decoding with a KV cache -----------------------------------------------------
    def init_cache(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        capacity: int | None = None,
    ) -> KVCache:
        """An empty self-attention cache per decoder layer, and the cross-attention K, V
        of ``memory``, computed here once for every later step. ``capacity``: decoder
        positions to preallocate."""
        if capacity is not None:
            self._check_positions(capacity, f"a KV cache of capacity {capacity}")
        cfg = self.cfg
        cache = KVCache(
            cfg.n_layers,
            memory.size(0),
            cfg.n_kv_heads,
            cfg.d_k,
            capacity,
            memory.dtype,
            memory.device,
        )
        for i, layer in enumerate(self.decoder_layers):
            layer.cache_memory_kv(memory, cache.slot(i))  # (B, h_kv, T_src, d_k) K, V
        cache.cross_mask = src_mask
        return cache

    def decode_step(self, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """The next T_new target tokens (B, T_new), usually T_new = 1, with a KV cache
        (eq. kv-step).

        They sit at positions cache.length, ..., cache.length + T_new - 1. Only their
        own Q, K, V are computed; K and V join the cache, and the queries attend over
        all cached keys. Returns the logits (B, T_new, vocab_size).
        """
        T_past, T_new = cache.length, tokens.size(1)
        y = self.embed_tokens(tokens, start=T_past)  # (B, T_new, d_model)
        # One new query may see every key; several new ones see the past and their own
        # causal triangle.
        self_mask = (
            None
            if T_new == 1
            else causal_mask(T_new, T_past + T_new, device=tokens.device)
        )
        for i, layer in enumerate(self.decoder_layers):
            y = layer(y, None, self_mask, cache.cross_mask, cache=cache.slot(i))
        return self.out_proj(self.decoder_norm(y))  # (B, T_new, vocab_size)

    # -- decoding: generate and generate_steps come from Generates --------------------
    def decoding_step(
        self,
        src: torch.Tensor,
        max_new_tokens: int,
        use_cache: bool,
        src_mask: torch.Tensor | None = None,
    ) -> tuple[Step, torch.Tensor]:
        """The step :class:`~transformer_lib.generation.Generates` decodes with, and
        the BOS column (B, 1) it starts from.

        Both paths run the encoder once. The step maps the target tokens so far (B, t)
        to the next-token logits (B, vocab_size): ``use_cache=False`` recomputes the
        decoder over the whole prefix; ``use_cache=True`` feeds only the newest token
        (:meth:`decode_step`).
        """
        self._check_generate(src, max_new_tokens)
        memory = self.encode(src, src_mask)  # (B, T_src, d_model), once
        cache = (
            self.init_cache(memory, src_mask, capacity=max_new_tokens)
            if use_cache
            else None
        )

        def step(tokens: torch.Tensor) -> torch.Tensor:
            if cache is None:
                h = self.decode(tokens, memory, src_mask)  # the whole prefix again
                return self.out_proj(h[:, -1])  # only the last position: (B, vocab)
            # only the tokens the cache has not seen (the newest): (B, vocab)
            return self.decode_step(tokens[:, cache.length :], cache)[:, -1]

        # (B, 1)
        bos = torch.full(
            (src.size(0), 1), self.cfg.bos_id, dtype=torch.long, device=src.device
        )
        return step, bos

    # -- PyTorch ----------------------------------------------------------------------
    def load_torch_layers(self, tt: nn.Transformer) -> Transformer:
        """Copy the encoder and decoder layers of an ``nn.Transformer``
        (``batch_first=True``) into this model.

        ``nn.Transformer`` has no embeddings or output projection, so then
        ``self.out_proj(tt(self.embed_tokens(src), self.embed_tokens(tgt),
        tgt_mask=...))`` equals ``self(src, tgt)``. It always ends each stack with a
        LayerNorm; a Post-LN model here has none, so set
        ``tt.encoder.norm = tt.decoder.norm = None`` first.
        """
        if (
            len(tt.encoder.layers) != self.cfg.n_layers
            or len(tt.decoder.layers) != self.cfg.n_layers
        ):
            raise ValueError(
                f"nn.Transformer has {len(tt.encoder.layers)} encoder and "
                f"{len(tt.decoder.layers)} decoder layers, "
                f"this model {self.cfg.n_layers} of each"
            )
        if not self.cfg.norm_first and (
            tt.encoder.norm is not None or tt.decoder.norm is not None
        ):
            raise ValueError(
                "a Post-LN model has no final LayerNorms: "
                "set tt.encoder.norm = tt.decoder.norm = None"
            )
        for i, layer in enumerate(tt.encoder.layers):
            self.encoder_layers[i] = EncoderLayer.from_torch(layer)
        for i, layer in enumerate(tt.decoder.layers):
            self.decoder_layers[i] = DecoderLayer.from_torch(layer)
        if self.cfg.norm_first:
            self.encoder_norm.load_state_dict(tt.encoder.norm.state_dict())
            self.decoder_norm.load_state_dict(tt.decoder.norm.state_dict())
        return self

    # -- checks (_check_tokens, _check_positions: from Generates) -------------------
    def _check_generate(self, src: torch.Tensor, max_new_tokens: int) -> None:
        _, T_src = self._check_tokens("src", src)
        self._check_new_tokens(max_new_tokens)
        self._check_positions(T_src, "the source")
        self._check_positions(
            max_new_tokens,
            f"{max_new_tokens} new tokens (BOS and the first {max_new_tokens - 1} "
            "new tokens as decoder input)",
        )


def time_decoding(
    model: Transformer, src: torch.Tensor, max_new_tokens: int, use_cache: bool
) -> dict[str, list[float]]:
    """Seconds of each greedy decoding step of ``model.generate_steps``.

    Returns {"wall": wall-clock seconds, "cpu": CPU seconds of this process}, one entry
    per step. On a machine shared with other jobs, wall-clock time also counts the time
    spent waiting for a core; CPU time counts only the work done. Step 1 also pays for
    the encoder (and, with the cache, the memory's cross-attention K/V).
    """
    wall, cpu, clock = [], [], Stopwatch()
    for _ in model.generate_steps(src, max_new_tokens, use_cache=use_cache):
        w, c = clock.lap()  # seconds of this step
        wall.append(w)
        cpu.append(c)
    return {"wall": wall, "cpu": cpu}
