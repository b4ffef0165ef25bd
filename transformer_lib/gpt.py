"""Decoder-only language models: GPT-2 and Llama in one class (the part "From the 2017
Transformer to today's language models").

    x_0 = E[idx] (+ P[positions] for learned or sinusoidal positions)   (eq. gpt-embed)
    x = x + Attn(Norm_1(x)),  x = x + FFN(Norm_2(x))   in each of N blocks (eq. pre-ln)
    logits = Norm_f(x_N) W_out,  W_out = E^T when tied   (eq. lm-logits)

Attention is causal self-attention; with ``positions="rope"`` it rotates each head's
queries and keys by their positions (eq. rope) and the input gets no position vector.
The model is trained on the causal LM objective (eq. lm-loss): the logits at position t
predict token t + 1.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._validate import check_divisible
from .feed_forward import ACTIVATIONS, FeedForward
from .heads import MultiHeadAttention
from .hf import hf_to_tl
from .kv_cache import KVCache
from .masks import causal_mask
from .norm import LayerNorm, RMSNorm
from .positional import (
    ROPE_LAYOUTS,
    apply_rope,
    rope_permutation,
    sinusoidal_positional_encoding,
)
from .sampling import check_sampling_args, sample_next

POSITIONS = ("learned", "sinusoidal", "rope", "none")
NORMS = ("layernorm", "rmsnorm")


@dataclass(kw_only=True)
class GPTConfig:
    """Hyperparameters of :class:`GPT`. The defaults are GPT-2's choices; Llama's are
    ``positions="rope", norm="rmsnorm", activation="silu", gated=True, bias=False,
    tie_embeddings=False`` (see :meth:`gpt2_small` and :meth:`llama`)."""

    vocab_size: int  # V, number of token ids
    d_model: int  # width of the residual stream and of the token embeddings
    n_heads: int  # h, query heads per attention layer; d_k = d_model / h
    n_layers: int  # N, decoder blocks
    d_ff: int  # hidden width of every feed-forward network
    max_len: int  # most positions a sequence may use (rows of a position table)
    # h_kv, K/V heads (GQA; 1 is MQA); None means n_heads, set in __post_init__
    n_kv_heads: int | None = None
    # "learned" (GPT-2), "sinusoidal" (the 2017 paper), "rope" (Llama) or "none"
    positions: str = "learned"
    norm: str = "layernorm"  # "layernorm" (GPT-2) or "rmsnorm" (Llama)
    norm_eps: float = 1e-5  # eps of every norm (GPT-2 1e-5, Llama 1e-6 or 1e-5)
    # FFN nonlinearity: "gelu_tanh" (GPT-2), "silu" (Llama), "gelu" or "relu"
    activation: str = "gelu_tanh"
    gated: bool = False  # True: the gated FFN (eq. glu-ffn), SwiGLU with "silu"
    bias: bool = True  # biases of the attention and FFN linear maps
    attn_bias: bool | None = None  # overrides ``bias`` for W_Q, W_K, W_V, W_O
    ffn_bias: bool | None = None  # overrides ``bias`` for the FFN
    tie_embeddings: bool = True  # W_out = E^T (GPT-2) or its own matrix (Llama)
    rope_base: float = 10000.0  # RoPE's base, ``rope_theta`` (Llama 3: 500000)
    rope_layout: str = "interleaved"  # RoPE pairs: "interleaved" or "half" (Llama's)
    # dropout on the embeddings, attention weights and sublayer outputs (training)
    dropout: float = 0.0
    # std of the weights at initialisation (GPT-2: 0.02, about 1/sqrt(d_model) at
    # d_model = 768; a narrow model learns faster with a larger one)
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        check_divisible(self.d_model, self.n_heads, self.n_kv_heads)
        for name in ("vocab_size", "n_layers", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        choices = {
            "positions": POSITIONS,
            "norm": NORMS,
            "activation": tuple(sorted(ACTIVATIONS)),
            "rope_layout": ROPE_LAYOUTS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        if self.positions == "rope" and self.d_k % 2:
            raise ValueError(
                f"RoPE rotates pairs of features, so d_k = d_model / n_heads must be "
                f"even, got d_k={self.d_k} (d_model={self.d_model}, "
                f"n_heads={self.n_heads})"
            )
        if not self.rope_base > 1.0:
            raise ValueError(f"rope_base must be > 1, got {self.rope_base}")
        if not self.norm_eps >= 0.0:
            raise ValueError(f"norm_eps must be >= 0, got {self.norm_eps}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if not self.init_std > 0.0:
            raise ValueError(f"init_std must be > 0, got {self.init_std}")

    @property
    def d_k(self) -> int:
        """Per-head width d_k = d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def use_attn_bias(self) -> bool:
        return self.bias if self.attn_bias is None else self.attn_bias

    @property
    def use_ffn_bias(self) -> bool:
        return self.bias if self.ffn_bias is None else self.ffn_bias

    @classmethod
    def gpt2_small(cls, **overrides) -> GPTConfig:
        """GPT-2 small ("124M"): V = 50257, d_model = 768, 12 heads, 12 layers,
        d_ff = 3072, 1024 positions, learned positions, tied embeddings."""
        kw = dict(
            vocab_size=50257,
            d_model=768,
            n_heads=12,
            n_layers=12,
            d_ff=3072,
            max_len=1024,
        )
        return cls(**{**kw, **overrides})

    @classmethod
    def llama(cls, **overrides) -> GPTConfig:
        """Llama's choices around sizes you give: RoPE in the half layout, RMSNorm with
        eps 1e-6, SwiGLU, no biases, untied embeddings. Pass vocab_size, d_model,
        n_heads, n_layers, d_ff and max_len (and n_kv_heads for GQA)."""
        kw = dict(
            positions="rope",
            rope_layout="half",
            norm="rmsnorm",
            norm_eps=1e-6,
            activation="silu",
            gated=True,
            bias=False,
            tie_embeddings=False,
        )
        return cls(**{**kw, **overrides})

    def param_count(self) -> dict[str, int]:
        """Parameters of :class:`GPT` by part, counted from the formulas
        (eq. gpt-params); "total" counts a tied matrix once.

        Per block: attention d (h + 2 h_kv) d_k + h d_k d (plus biases), FFN 2 d d_ff
        (3 d d_ff gated, plus biases), two norms of 2d (LayerNorm) or d (RMSNorm).
        """
        d, hd, kvd = self.d_model, self.n_heads * self.d_k, self.n_kv_heads * self.d_k
        norm = 2 * d if self.norm == "layernorm" else d
        attn = d * hd + 2 * d * kvd + hd * d
        if self.use_attn_bias:
            attn += hd + 2 * kvd + d
        n_mats = 3 if self.gated else 2
        ffn = n_mats * d * self.d_ff
        if self.use_ffn_bias:
            ffn += (n_mats - 1) * self.d_ff + d
        parts = {
            "token_embedding": self.vocab_size * d,
            "position_embedding": self.max_len * d
            if self.positions == "learned"
            else 0,
            "attention": self.n_layers * attn,
            "feed_forward": self.n_layers * ffn,
            "norms": (2 * self.n_layers + 1) * norm,
            "lm_head": 0 if self.tie_embeddings else self.vocab_size * d,
        }
        parts["total"] = sum(parts.values())
        return parts


def _make_norm(cfg: GPTConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return LayerNorm(cfg.d_model, cfg.norm_eps)


# A block's view of its KV-cache slot: takes this step's K, V (B, h_kv, T_new, d_k) and
# returns everything held so far, (B, h_kv, T_past + T_new, d_k) each.
KVSlot = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class GPTBlock(nn.Module):
    """One decoder-only block, Pre-LN   (eq. pre-ln):

    x = x + Attn(Norm_1(x))     causal self-attention, RoPE inside with "rope"
    x = x + FFN(Norm_2(x))
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.norm1 = _make_norm(cfg)
        self.attn = MultiHeadAttention(
            cfg.d_model,
            cfg.n_heads,
            cfg.n_kv_heads,
            bias=cfg.use_attn_bias,
            dropout=cfg.dropout,
        )
        self.norm2 = _make_norm(cfg)
        self.ffn = FeedForward(
            cfg.d_model,
            cfg.d_ff,
            cfg.activation,
            cfg.dropout,
            bias=cfg.use_ffn_bias,
            gated=cfg.gated,
        )
        self.dropout = nn.Dropout(cfg.dropout)  # on each sublayer's output
        self.rope = cfg.positions == "rope"
        self.rope_base, self.rope_layout = cfg.rope_base, cfg.rope_layout

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        kv_slot: KVSlot | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, d_model) at ``positions`` (T,) -> (x (B, T, d_model), attention
        weights (B, h, T, T_k) or None).

        ``kv_slot``: this block's slot of a KV cache; the keys then span the cached
        positions and these T (T_k = T_past + T), else T_k = T.
        """
        a, weights = self.self_attention(
            self.norm1(x), positions, kv_slot, need_weights
        )
        x = x + self.dropout(a)
        x = x + self.dropout(self.ffn(self.norm2(x)))
        return x, weights

    def self_attention(
        self,
        z: torch.Tensor,
        positions: torch.Tensor,
        kv_slot: KVSlot | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Causal self-attention of z (B, T, d_model); returns (out (B, T, d_model),
        weights (B, h, T, T_k) or None)."""
        q = self.attn.project_q(z)  # (B, h, T, d_k)
        k, v = self.attn.project_kv(z, z)  # (B, h_kv, T, d_k) each
        if self.rope:  # (eq. rope), before K joins the cache: it holds rotated keys
            q = apply_rope(q, positions, self.rope_base, self.rope_layout)
            k = apply_rope(k, positions, self.rope_base, self.rope_layout)
        if kv_slot is not None:
            k, v = kv_slot(k, v)  # (B, h_kv, T_past + T, d_k)   (eq. kv-append)
        T, T_k = q.size(2), k.size(2)
        # (T, T_k), end-aligned; one new token may see every key
        mask = None if T == 1 else causal_mask(T, T_k, device=z.device)
        return self.attn.attend(q, k, v, mask, need_weights)


class GPT(nn.Module):
    """A decoder-only Transformer language model: GPT-2 or Llama, by its
    :class:`GPTConfig`.

    ``forward(idx)`` gives next-token logits at every position, ``generate`` continues
    a prompt (greedy or sampled, with a KV cache), ``from_hf`` copies a
    ``transformers`` GPT-2 or Llama model.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.tok_emb = nn.Embedding(cfg.vocab_size, d)  # E
        if cfg.positions == "learned":
            self.pos_emb = nn.Embedding(cfg.max_len, d)  # P, one row per position
        elif cfg.positions == "sinusoidal":
            # (max_len, d), eq. pe-sin, pe-cos
            pe = sinusoidal_positional_encoding(cfg.max_len, d)
            self.register_buffer("pe", pe, persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(GPTBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = _make_norm(cfg)  # Pre-LN leaves the stream un-normalised
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)  # W_out
        self.reset_parameters()
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # W_out = E^T, one matrix

    def reset_parameters(self) -> None:
        """GPT-2's initialisation: weights N(0, s^2) with s = ``cfg.init_std`` (0.02),
        biases 0, norms 1; the two projections that write into the residual stream
        (W_O, the FFN's last) get std s / sqrt(2 N), so the stream's variance does not
        grow with depth."""
        std = self.cfg.init_std
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for block in self.blocks:
            for w in (block.attn.o_proj.weight, block.ffn.linear2.weight):
                nn.init.normal_(w, std=std / math.sqrt(2 * self.cfg.n_layers))

    # -- forward ----------------------------------------------------------------------
    def forward(
        self,
        idx: torch.Tensor,
        *,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ):
        """Token ids idx (B, T) -> next-token logits (B, T, vocab_size)
        (eq. lm-logits): row t predicts token t + 1.

        With ``need_weights`` returns ``(logits, weights)``, weights a list with one
        (B, h, T, T_k) attention map per block. With a ``cache`` (:meth:`init_cache`)
        the tokens sit after the cache.length positions it holds, their K and V join
        it, and they attend over all of them (T_k = cache.length + T).
        """
        h, weights = self._hidden(idx, cache, need_weights)
        logits = self.lm_head(h)  # (B, T, d_model) @ W_out -> (B, T, vocab_size)
        return (logits, weights) if need_weights else logits

    def _hidden(
        self, idx: torch.Tensor, cache: KVCache | None, need_weights: bool
    ) -> tuple[torch.Tensor, list]:
        """Norm_f(x_N) (B, T, d_model) and the attention maps."""
        self._check_idx(idx)
        T, start = idx.size(1), 0 if cache is None else cache.length
        self._check_positions(start + T, f"{T} tokens from position {start}")
        positions = torch.arange(start, start + T, device=idx.device)  # (T,)
        x = self.tok_emb(idx)  # (B, T, d_model)   (eq. gpt-embed)
        if self.cfg.positions == "learned":
            x = x + self.pos_emb(positions)  # + (T, d_model), broadcast over B
        elif self.cfg.positions == "sinusoidal":
            x = x + self.pe[start : start + T].to(x.dtype)
        x = self.dropout(x)
        weights = []
        for i, block in enumerate(self.blocks):
            slot = None if cache is None else functools.partial(cache.append, i)
            x, w = block(x, positions, slot, need_weights)
            weights.append(w)
        return self.norm_f(x), weights

    def init_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty KV cache for ``batch`` sequences of up to ``capacity`` positions,
        preallocated, in the model's dtype and device."""
        self._check_positions(capacity, f"a KV cache of capacity {capacity}")
        p = self.tok_emb.weight
        cfg = self.cfg
        return KVCache(
            cfg.n_layers,
            batch,
            cfg.n_kv_heads,
            cfg.d_k,
            capacity,
            p.dtype,
            p.device,
        )

    # -- generation -------------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_id: int | None = None,
        pad_id: int | None = None,
        generator: torch.Generator | None = None,
        return_logits: bool = False,
    ):
        """Continue the prompts idx (B, T): returns the new tokens
        (B, max_new_tokens), or ``(tokens, logits (B, max_new_tokens, vocab_size))``
        with ``return_logits``.

        Greedy (eq. greedy) unless ``do_sample``, which draws each token with
        :func:`~transformer_lib.sample_next` (temperature, top_k, top_p, generator).
        With ``use_cache`` the prompt is prefilled in one pass, then one token per step
        runs against a preallocated KV cache; without it the whole sequence is rerun at
        every step. Both give the same tokens. A row that produces ``eos_id`` keeps it
        and is padded after it with ``pad_id`` (default: ``eos_id``, as
        ``transformers`` does for a model without a pad token; any integer, -1 too);
        generation stops early once every row has ended. The train/eval mode is left
        alone: call ``eval()`` first if the model has dropout.
        """
        B, T = self._check_generate(idx, max_new_tokens)
        if do_sample:
            check_sampling_args(temperature, top_k, top_p)
        if eos_id is not None and not 0 <= eos_id < self.cfg.vocab_size:
            raise ValueError(
                f"eos_id={eos_id} is not a token id in "
                f"[0, vocab_size={self.cfg.vocab_size})"
            )
        pad = eos_id if pad_id is None else pad_id
        out = idx.new_full((B, max_new_tokens), -1 if pad is None else pad)
        all_logits = []
        done = torch.zeros(B, dtype=torch.bool, device=idx.device)
        cache = self.init_cache(B, T + max_new_tokens - 1) if use_cache else None
        seq, step_in = idx, idx  # the whole sequence; what the cached step feeds
        for t in range(max_new_tokens):
            if use_cache:
                h, _ = self._hidden(step_in, cache, False)  # prefill, then 1 token
            else:
                h, _ = self._hidden(seq, None, False)  # the whole sequence again
            logits = self.lm_head(h[:, -1])  # (B, vocab_size), the last position only
            if do_sample:
                nxt = sample_next(
                    logits,
                    temperature=temperature,
                    top_k=top_k,
                    top_p=top_p,
                    generator=generator,
                )
            else:
                nxt = logits.argmax(dim=-1)  # (B,)   (eq. greedy)
            if eos_id is not None:
                # a row that has ended keeps feeding eos; its output is pad
                nxt = torch.where(done, eos_id, nxt)
                out[:, t] = torch.where(done, pad, nxt)
                done = done | (nxt == eos_id)
            else:
                out[:, t] = nxt
            all_logits.append(logits)
            if eos_id is not None and bool(done.all()):
                break  # the rest of out already holds pad
            step_in = nxt[:, None]  # (B, 1)
            if not use_cache:
                seq = torch.cat([seq, step_in], dim=1)  # (B, T + t + 1)
        if not return_logits:
            return out
        V = self.cfg.vocab_size
        logits = self.tok_emb.weight.new_zeros((B, max_new_tokens, V))
        if all_logits:
            logits[:, : len(all_logits)] = torch.stack(all_logits, dim=1)
        return out, logits

    # -- sizes and conversions --------------------------------------------------------
    def num_params(self) -> int:
        """Parameters of the model, a tied matrix counted once
        (equals ``cfg.param_count()["total"]``)."""
        return sum(p.numel() for p in self.parameters())

    def with_rope_layout(self, layout: str) -> GPT:
        """A copy computing the same function with RoPE in the other ``layout``: each
        head's rows of W_Q and W_K (and their biases) reordered by
        :func:`~transformer_lib.rope_permutation` (eq. rope-half-perm)."""
        if self.cfg.positions != "rope":
            raise ValueError(
                f"with_rope_layout needs positions='rope', got {self.cfg.positions!r}"
            )
        if layout not in ROPE_LAYOUTS:
            raise ValueError(f"layout must be one of {ROPE_LAYOUTS}, got {layout!r}")
        new = copy.deepcopy(self)
        if layout == self.cfg.rope_layout:
            return new
        perm = rope_permutation(self.cfg.d_k)  # interleaved -> half
        if layout == "interleaved":
            perm = torch.argsort(perm)  # half -> interleaved
        new.cfg = replace(self.cfg, rope_layout=layout)
        d_k = self.cfg.d_k
        with torch.no_grad():
            for block in new.blocks:
                block.rope_layout = layout
                for proj in (block.attn.q_proj, block.attn.k_proj):
                    n = proj.out_features // d_k  # heads of this projection
                    # (n * d_k, ...) -> (n, d_k, ...), reorder rows within each head
                    w = proj.weight.view(n, d_k, -1)[:, perm]
                    proj.weight.copy_(w.reshape(n * d_k, -1))
                    if proj.bias is not None:
                        proj.bias.copy_(proj.bias.view(n, d_k)[:, perm].reshape(-1))
        return new

    @classmethod
    def from_hf(cls, model: nn.Module) -> GPT:
        """Copy a ``transformers`` ``GPT2LMHeadModel`` or ``LlamaForCausalLM``: its
        config, its weights, its dtype, device and train/eval mode.

        The model may be built from a config with random weights or loaded with
        ``from_pretrained``; this function downloads nothing and imports nothing from
        ``transformers``. Logits then agree with the original's, and so does greedy
        decoding with the cache.
        """
        kwargs, state = hf_to_tl(model)
        p = next(model.parameters())
        with torch.device("meta"):  # shapes only: no random init of a large model
            new = cls(GPTConfig(**kwargs)).to(p.dtype)
        new = new.to_empty(device=p.device)
        if new.cfg.tie_embeddings:  # to_empty makes new tensors: tie them again
            new.lm_head.weight = new.tok_emb.weight
        new.load_state_dict(state)  # every parameter is overwritten here
        return new.train(model.training)

    # -- checks -----------------------------------------------------------------------
    def _check_idx(self, idx: torch.Tensor) -> None:
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        if idx.dtype.is_floating_point or idx.dtype == torch.bool:
            raise TypeError(f"idx must hold integer token ids, got dtype {idx.dtype}")
        if idx.numel() and (idx.min() < 0 or idx.max() >= self.cfg.vocab_size):
            raise ValueError(
                f"token ids must lie in [0, vocab_size={self.cfg.vocab_size}), "
                f"got ids from {int(idx.min())} to {int(idx.max())}"
            )

    def _check_positions(self, n: int, what: str) -> None:
        if n > self.cfg.max_len:
            raise ValueError(
                f"{what} needs {n} positions, more than max_len={self.cfg.max_len}"
            )

    def _check_generate(
        self, idx: torch.Tensor, max_new_tokens: int
    ) -> tuple[int, int]:
        self._check_idx(idx)
        B, T = idx.shape
        if T < 1:
            raise ValueError(f"the prompt needs at least one token, got shape {(B, T)}")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        need = T + max(max_new_tokens - 1, 0)
        if need > self.cfg.max_len:
            raise ValueError(
                f"a prompt of {T} tokens and {max_new_tokens} new tokens need "
                f"{need} positions (the last new token is not fed back), "
                f"more than max_len={self.cfg.max_len}"
            )
        return B, T


def causal_lm_loss(
    logits: torch.Tensor, tokens: torch.Tensor, loss_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """L = -(1/|M|) sum_{t in M} log softmax(z_t)[x_{t+1}]   (eq. lm-loss).

    logits (B, T, V) = model(tokens), tokens (B, T): the prediction at position t is
    scored against the next token, tokens[:, t + 1] (shifted targets), so the last
    position predicts nothing. ``loss_mask`` (B, T) bool marks the tokens that count as
    targets (position t's prediction counts when loss_mask[:, t + 1]), e.g. only the
    answer after a prompt; None counts every token after the first.
    """
    if logits.dim() != 3 or logits.shape[:2] != tokens.shape:
        raise ValueError(
            f"logits (B, T, V) and tokens (B, T) must agree in (B, T), "
            f"got logits {tuple(logits.shape)} and tokens {tuple(tokens.shape)}"
        )
    if loss_mask is not None and loss_mask.shape != tokens.shape:
        raise ValueError(
            f"loss_mask {tuple(loss_mask.shape)} must have the shape of tokens "
            f"{tuple(tokens.shape)}"
        )
    V = logits.size(-1)
    pred, target = logits[:, :-1], tokens[:, 1:]  # (B, T - 1, V), (B, T - 1)
    nll = F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), reduction="none")
    if loss_mask is None:
        return nll.mean()
    m = loss_mask[:, 1:].reshape(-1).to(nll.dtype)  # (B (T - 1),)
    if not m.any():
        raise ValueError("loss_mask selects no target token (after the first position)")
    return (nll * m).sum() / m.sum()
