"""One attention head with hand-set weights: a soft dictionary look-up (chapter 1).

A six-token sentence whose embeddings are hand-made features: the kind of word
(one-hot), then its position (one-hot). Keys simply announce those features
(``W_K = I``); the question each token asks lives in a hand-set ``W_Q`` (eq. q, eq. k),
and ``W_V`` hands over the kind of word (eq. v). :func:`lookup` runs the head for one
of the questions in :data:`RULES`. The introduction's and chapter 1's figures draw it.
"""

from __future__ import annotations

import torch

from ..attention import attention_scores, softmax
from ..masks import causal_mask

WORDS = ["the", "cat", "sat", "on", "the", "mat"]
KINDS = ["article", "noun", "verb", "prep."]
KIND_OF = [0, 1, 2, 3, 0, 1]  # the kind of each word of WORDS
FEATURES = KINDS + [f"pos {i}" for i in range(len(WORDS))]  # the d_model = 10 features

RULES = [
    "itself",
    "the previous word",
    "the next word",
    "the first word",
    "a noun",
    "its own kind",
]


def sentence_embeddings() -> torch.Tensor:
    """X (T, d_model): one row per word, its kind (4 one-hot features) then its
    position (T one-hot features)."""
    T, n_kinds = len(WORDS), len(KINDS)
    X = torch.zeros(T, n_kinds + T)
    X[torch.arange(T), torch.tensor(KIND_OF)] = 1.0  # kind features
    X[torch.arange(T), n_kinds + torch.arange(T)] = 1.0  # position features
    return X


def query_weights(rule: str, beta: float = 1.0) -> torch.Tensor:
    """A hand-set W_Q (d_model, d_k = d_model): row a says which key feature input
    feature a asks for.

    With row vectors, q_i = x_i W_Q, so W_Q[a, b] = beta means "a token that has
    feature a looks for feature b" with sharpness beta.
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {RULES}")
    T, n_kinds = len(WORDS), len(KINDS)
    W = torch.zeros(n_kinds + T, n_kinds + T)

    def pos(i: int) -> int:  # index of the feature "pos i"
        return n_kinds + i

    for i in range(T):
        if rule == "itself":
            W[pos(i), pos(i)] = 1.0
        elif rule == "the previous word":  # the first word has none: itself
            W[pos(i), pos(max(i - 1, 0))] = 1.0
        elif rule == "the next word":  # the last word looks at itself
            W[pos(i), pos(min(i + 1, T - 1))] = 1.0
        elif rule == "the first word":
            W[pos(i), pos(0)] = 1.0
    for c in range(n_kinds):
        if rule == "a noun":
            W[c, KINDS.index("noun")] = 1.0
        elif rule == "its own kind":
            W[c, c] = 1.0
    return beta * W


def key_weights() -> torch.Tensor:
    """W_K = I (d_model, d_k = d_model): each key announces the token's own features."""
    return torch.eye(len(FEATURES))


def value_weights() -> torch.Tensor:
    """W_V (d_model, d_v = 4): hands over the kind of word and drops the position."""
    W = torch.zeros(len(FEATURES), len(KINDS))
    W[: len(KINDS)] = torch.eye(len(KINDS))
    return W


def lookup(
    rule: str, beta: float, causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights (T, T), retrieved values Z (T, d_v)) of the head asking ``rule``.

    Scores are q_i . k_j without the 1/sqrt(d_k) of chapter 2, so a perfect match
    scores beta.
    """
    X = sentence_embeddings()  # (T, d_model)
    Q = X @ query_weights(rule, beta)  # (T, d_model) @ (d_model, d_k)   eq. q
    K = X @ key_weights()  # (T, d_k)   eq. k
    V = X @ value_weights()  # (T, d_v)   eq. v
    scores = attention_scores(Q, K, scale=False)  # (T, T) = Q K^T
    if causal:
        scores = scores.masked_fill(~causal_mask(len(WORDS)), float("-inf"))
    weights = softmax(scores, dim=-1)  # (T, T), each row sums to 1
    return weights, weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)
