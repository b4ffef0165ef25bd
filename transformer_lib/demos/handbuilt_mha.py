"""A multi-head attention whose four heads have one readable job each (chapter 5).

:func:`handbuilt_attention` sets the weights of a 4-head ``MultiHeadAttention`` by hand
so that head 0 reads the previous token, head 1 the current token, head 2 the earlier
occurrences of the same word and head 3 the first token. Its GQA and MQA versions are
made the way Ainslie et al. convert a trained model: the K and V projections of the
heads in a group are averaged. Chapter 5's figures draw :func:`head_weights`.
"""

from __future__ import annotations

import math

import torch

from ..heads import MultiHeadAttention
from ..masks import causal_mask

SENTENCE = ["the", "cat", "sat", "on", "the", "mat"]
HEAD_JOBS = ["previous token", "current token", "same word", "first token"]
D_MODEL, N_HEADS, D_K = 32, 4, 8  # d_k = d_model / h
# input features: 0..7 a one-hot of the position, 8..15 of the word, 16 a constant 1
MAX_T, CONST = 8, 16


def embed(tokens: list[str]) -> torch.Tensor:
    """(1, T, 32) inputs: a one-hot of the position, a one-hot of the word, and a
    constant 1."""
    vocab = sorted(set(tokens))
    x = torch.zeros(1, len(tokens), D_MODEL)
    for t, word in enumerate(tokens):
        x[0, t, t] = 1.0  # position t
        x[0, t, MAX_T + vocab.index(word)] = 1.0  # word identity
        x[0, t, CONST] = 1.0
    return x


def handbuilt_attention(
    n_kv_heads: int = N_HEADS, sharpness: float = 4.0
) -> MultiHeadAttention:
    """Four heads with one job each; with n_kv_heads < 4, each group's K/V heads are
    averaged. The global random state is left as it was."""
    if n_kv_heads not in (1, 2, 4):
        raise ValueError(f"n_kv_heads must divide h = {N_HEADS}, got {n_kv_heads}")
    c = sharpness * math.sqrt(
        D_K
    )  # a matching pair scores `sharpness` after / sqrt(d_k)
    # per head (d_k, d_model)
    Wq, Wk, Wv = (torch.zeros(N_HEADS, D_K, D_MODEL) for _ in range(3))
    for t in range(1, MAX_T):
        Wq[0, t - 1, t] = c  # head 0 asks for position t - 1 ...
    for t in range(MAX_T):
        Wk[0, t, t] = 1.0  # ... and every key announces its own position
        Wq[1, t, t] = c  # head 1 asks for position t itself, with head 0's keys
        Wk[1, t, t] = 1.0
    for w in range(MAX_T - 1):
        Wq[2, w, MAX_T + w] = c  # head 2 asks for its own word ...
        Wk[2, w, MAX_T + w] = 1.0  # ... and every key announces its word
    Wq[3, D_K - 1, CONST] = c  # head 3 asks every time for the same thing ...
    Wk[3, D_K - 1, 0] = 1.0  # ... which only position 0 has
    for i in range(N_HEADS):  # values: the word one-hot
        Wv[i, : D_K - 1, MAX_T : 2 * MAX_T - 1] = torch.eye(D_K - 1)
    n_rep = N_HEADS // n_kv_heads
    # GQA conversion: the mean over each group
    Wk = Wk.view(n_kv_heads, n_rep, D_K, D_MODEL).mean(1)
    Wv = Wv.view(n_kv_heads, n_rep, D_K, D_MODEL).mean(1)
    with torch.random.fork_rng(devices=[]):  # every weight is set below: no draws
        m = MultiHeadAttention(D_MODEL, N_HEADS, n_kv_heads, bias=False)
    # nn.Linear stores (out, in): the heads' blocks stacked on dim 0
    with torch.no_grad():
        m.q_proj.weight.copy_(Wq.reshape(N_HEADS * D_K, D_MODEL))
        m.k_proj.weight.copy_(Wk.reshape(n_kv_heads * D_K, D_MODEL))
        m.v_proj.weight.copy_(Wv.reshape(n_kv_heads * D_K, D_MODEL))
        m.o_proj.weight.copy_(torch.eye(D_MODEL))
    return m.eval()


def head_weights(
    n_kv_heads: int, causal: bool, tokens: list[str] = SENTENCE
) -> torch.Tensor:
    """(h, T, T) attention weights of the hand-built layer on ``tokens``."""
    x = embed(tokens)
    mask = causal_mask(len(tokens)) if causal else None
    with torch.no_grad():
        # (1, h, T, T)
        _, w = handbuilt_attention(n_kv_heads)(x, x, x, mask, need_weights=True)
    return w[0]
