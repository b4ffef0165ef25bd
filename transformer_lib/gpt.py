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
import math
from dataclasses import replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from .configs import GPTConfig
from .generation import Generates, Step
from .hf import hf_to_tl
from .kv_cache import KVCache
from .layers import GPTBlock, make_norm
from .positional import (
    ROPE_LAYOUTS,
    rope_permutation,
    sinusoidal_positional_encoding,
)


class GPT(Generates, nn.Module):
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
        self.norm_f = make_norm(cfg)  # Pre-LN leaves the stream un-normalised
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
            for w in (block.self_attn.o_proj.weight, block.ffn.linear2.weight):
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
        self._check_tokens("idx", idx)
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
            slot = None if cache is None else cache.slot(i)  # (eq. kv-append)
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

    # -- generation: generate and generate_steps come from Generates ------------------
    def decoding_step(
        self, idx: torch.Tensor, max_new_tokens: int, use_cache: bool
    ) -> tuple[Step, torch.Tensor]:
        """The step :class:`~transformer_lib.generation.Generates` decodes with, and
        the prompt idx (B, T) it starts from.

        The step maps the tokens so far (B, t) to the next-token logits (B, vocab_size).
        With ``use_cache`` it feeds only the tokens the cache has not seen (the prompt
        in one pass, then one token) against a preallocated KV cache; without, it
        reruns the whole sequence.
        """
        B, T = self._check_generate(idx, max_new_tokens)
        cache = self.init_cache(B, T + max_new_tokens - 1) if use_cache else None

        def step(tokens: torch.Tensor) -> torch.Tensor:
            if cache is None:
                h, _ = self._hidden(tokens, None, False)  # the whole sequence again
            else:
                h, _ = self._hidden(tokens[:, cache.length :], cache, False)  # new only
            return self.lm_head(h[:, -1])  # (B, vocab_size), the last position only

        return step, idx

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
                for proj in (block.self_attn.q_proj, block.self_attn.k_proj):
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

    # -- checks (_check_tokens, _check_positions: from Generates) -------------------
    def _check_generate(
        self, idx: torch.Tensor, max_new_tokens: int
    ) -> tuple[int, int]:
        B, T = self._check_tokens("idx", idx)
        if T < 1:
            raise ValueError(f"the prompt needs at least one token, got shape {(B, T)}")
        self._check_new_tokens(max_new_tokens)
        need = T + max(max_new_tokens - 1, 0)
        self._check_positions(
            need,
            f"a prompt of {T} tokens and {max_new_tokens} new tokens "
            "(the last new token is not fed back)",
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
